/* A transport that sends every bundle as bytes: the sender writes it into one buffer (what a
 * network transport puts on the wire), the buffer travels through the inner transport as a
 * single 1-D BOOL tensor (the one-byte dtype; its bytes are never read as booleans), and the
 * receiver rebuilds names, dtypes, shapes and data from it. Collectives go to the inner
 * transport as they are. Used by the tests to show that the runtime only ever moves data by
 * value.
 *
 * Format (little-endian host order, no padding): "BRGB", u32 count, then per tensor: u32 name
 * length, the name, u32 dtype, u32 ndim, i64 shape[ndim], u64 bytes, the data. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/model.h"
#include "transport.h"

typedef struct serial_transport {
    transport base;
    transport *inner;
} serial_transport;

/* A rebuilt bundle: one allocation per part. */
typedef struct rebuilt {
    brg_named_tensor *items;
    brg_tensor *tensors;
    char (*names)[BRG_NAME_MAX];
    unsigned char *data;
} rebuilt;

static transport *inner_of(transport *t) { return ((serial_transport *)t)->inner; }

size_t transport_bundle_size(const brg_named_tensor *items, int n) {
    size_t bytes = 8;
    for (int i = 0; i < n; i++)
        bytes += 4 + strlen(items[i].name) + 8 + 8 * (size_t)items[i].tensor->ndim + 8 + brg_tensor_nbytes(items[i].tensor);
    return bytes;
}

static unsigned char *put(unsigned char *p, const void *v, size_t n) {
    if (n) memcpy(p, v, n);
    return p + n;
}

brg_status transport_bundle_encode(int device, const brg_named_tensor *items, int n, unsigned char *out) {
    unsigned char *p = out;
    uint32_t count = (uint32_t)n;
    p = put(p, "BRGB", 4);
    p = put(p, &count, 4);
    for (int i = 0; i < n; i++) {
        const brg_tensor *x = items[i].tensor;
        if (!brg_tensor_is_contiguous(x))
            return brg_error(BRG_ERR_INTERNAL, "device %d sends %s, which is not contiguous", device, items[i].name);
        uint32_t len = (uint32_t)strlen(items[i].name), dtype = (uint32_t)x->dtype, ndim = (uint32_t)x->ndim;
        if (len >= BRG_NAME_MAX)
            return brg_error(BRG_ERR_INTERNAL, "device %d sends a tensor whose name is too long: %s", device,
                             items[i].name);
        uint64_t nb = brg_tensor_nbytes(x);
        p = put(p, &len, 4);
        p = put(p, items[i].name, len);
        p = put(p, &dtype, 4);
        p = put(p, &ndim, 4);
        p = put(p, x->shape, 8 * (size_t)x->ndim);
        p = put(p, &nb, 8);
        p = put(p, x->data, nb);
    }
    return BRG_OK;
}

static brg_status se_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    size_t bytes = transport_bundle_size(items, n);
    unsigned char *buf = malloc(bytes);
    if (!buf) return brg_error(BRG_ERR_OOM, "cannot serialise a bundle of %zu bytes", bytes);
    brg_status st = transport_bundle_encode(device, items, n, buf);
    int64_t shape[1] = {(int64_t)bytes};
    brg_tensor wire = brg_tensor_wrap(BRG_DTYPE_BOOL, 1, shape, buf);
    brg_named_tensor one = {"bundle", &wire};
    if (st == BRG_OK) st = inner_of(t)->send(inner_of(t), device, to, tag, &one, 1);
    free(buf);
    return st;
}

/* Reads n bytes at *p if the buffer has them. */
static bool get(const unsigned char **p, const unsigned char *end, void *v, size_t n) {
    if ((size_t)(end - *p) < n) return false;
    memcpy(v, *p, n);
    *p += n;
    return true;
}

static void rebuilt_free(rebuilt *r) {
    if (!r) return;
    free(r->items);
    free(r->tensors);
    free(r->names);
    free(r->data);
    free(r);
}

static brg_status corrupt(rebuilt *r, int from, const char *what) {
    rebuilt_free(r);
    return brg_error(BRG_ERR_FORMAT, "a bundle from device %d is corrupt: %s", from, what);
}

static size_t aligned(size_t n) { return (n + 63) & ~(size_t)63; }

/* Checks every field against the buffer's end before using it. */
brg_status transport_bundle_decode(const unsigned char *buf, size_t bytes, int from, transport_msg *out) {
    const unsigned char *p = buf, *end = buf + bytes;
    char magic[4];
    uint32_t count;
    if (!get(&p, end, magic, 4) || memcmp(magic, "BRGB", 4) != 0 || !get(&p, end, &count, 4) || count > (1u << 20))
        return corrupt(NULL, from, "bad header");
    rebuilt *r = calloc(1, sizeof *r);
    size_t n = count ? count : 1;
    if (!r || !(r->items = calloc(n, sizeof *r->items)) || !(r->tensors = calloc(n, sizeof *r->tensors)) ||
        !(r->names = calloc(n, sizeof *r->names)) || !(r->data = aligned_alloc(64, aligned(bytes + 64 * n)))) {
        rebuilt_free(r);
        return brg_error(BRG_ERR_OOM, "cannot rebuild a bundle of %zu bytes", bytes);
    }
    size_t at = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t len, dtype, ndim;
        uint64_t nb;
        int64_t shape[BRG_MAX_DIMS];
        if (!get(&p, end, &len, 4) || len >= BRG_NAME_MAX || !get(&p, end, r->names[i], len))
            return corrupt(r, from, "bad name");
        r->names[i][len] = '\0';
        if (!get(&p, end, &dtype, 4) || dtype >= BRG_DTYPE_COUNT || !get(&p, end, &ndim, 4) || ndim > BRG_MAX_DIMS ||
            !get(&p, end, shape, 8 * (size_t)ndim) || !get(&p, end, &nb, 8) || nb > (uint64_t)(end - p))
            return corrupt(r, from, r->names[i]);
        brg_tensor x = brg_tensor_wrap((brg_dtype)dtype, (int)ndim, shape, r->data + at);
        if (brg_tensor_nbytes(&x) != nb) return corrupt(r, from, "data size does not match the shape");
        memcpy(r->data + at, p, nb);
        p += nb;
        at = aligned(at + nb); /* each tensor's data aligned, as from an arena */
        x.name = r->names[i];
        r->tensors[i] = x;
        r->items[i] = (brg_named_tensor){r->names[i], &r->tensors[i]};
    }
    if (p != end) return corrupt(r, from, "trailing bytes");
    *out = (transport_msg){(int)count, r->items, r};
    return BRG_OK;
}

static brg_status se_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    transport *in = inner_of(t);
    transport_msg wire;
    BRG_TRY(in->recv(in, device, from, tag, &wire));
    brg_status st = wire.n == 1 && wire.items[0].tensor->dtype == BRG_DTYPE_BOOL && wire.items[0].tensor->ndim == 1
                        ? transport_bundle_decode(wire.items[0].tensor->data, brg_tensor_nbytes(wire.items[0].tensor), from, out)
                        : brg_error(BRG_ERR_FORMAT, "device %d received something other than bytes from device %d",
                                    device, from);
    in->release(in, device, &wire);
    return st;
}

void transport_bundle_release(transport_msg *msg) {
    rebuilt_free(msg->impl);
    *msg = (transport_msg){0, NULL, NULL};
}

static void se_release(transport *t, int device, transport_msg *msg) {
    (void)t, (void)device;
    transport_bundle_release(msg);
}

static brg_status se_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    return inner_of(t)->all_reduce(inner_of(t), device, span, segs, n_segs);
}
static brg_status se_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    return inner_of(t)->broadcast(inner_of(t), device, root, tensors, n);
}
static brg_status se_barrier(transport *t, int device) { return inner_of(t)->barrier(inner_of(t), device); }
static void se_abort(transport *t, int device, brg_status status, const char *message) {
    inner_of(t)->abort(inner_of(t), device, status, message);
}
static brg_status se_failure(const transport *t, int *device, const char **message) {
    const transport *in = ((const serial_transport *)t)->inner;
    return in->failure(in, device, message);
}
static void se_reset(transport *t) { inner_of(t)->reset(inner_of(t)); }
static void se_destroy(transport *t) {
    if (!t) return;
    inner_of(t)->destroy(inner_of(t));
    free(t);
}

brg_status transport_serial_create(transport *inner, transport **out) {
    serial_transport *s = calloc(1, sizeof *s);
    if (!s) {
        inner->destroy(inner);
        return brg_error(BRG_ERR_OOM, "cannot allocate the transport");
    }
    s->base = (transport){inner->n_devices, se_send, se_recv, se_release, se_all_reduce, se_broadcast,
                          se_barrier, se_abort, se_failure, se_reset, se_destroy, 0, 1, NULL, NULL};
    s->base.rank = inner->rank, s->base.n_ranks = inner->n_ranks, s->base.device_rank = inner->device_rank;
    s->inner = inner;
    *out = &s->base;
    return BRG_OK;
}

brg_status transport_serial_threads_create(int n_devices, transport **out) {
    transport *inner;
    BRG_TRY(transport_threads_create(n_devices, &inner));
    return transport_serial_create(inner, out);
}
