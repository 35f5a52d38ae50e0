/* Collectives over pieces of float memory (transport.h), built on send and recv:
 * - the all-gather: every source sends each device it feeds one bundle of that device's pieces,
 *   in key order, then every device receives one bundle from each source that feeds it and
 *   copies each piece in;
 * - the reduce-scatter (unless the transport does it its own way): every contributor sends each
 *   device that wants its values one bundle of them, then every device takes the bundles in
 *   device order, so each wanted piece is built as x0, then + x1, + x2, ...: the all-reduce's
 *   order.
 * Sending never waits on any transport, so sending all first cannot deadlock. Empty pieces are
 * not sent. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

static bool sends_to(const transport_piece *r, int device, int to) {
    return r->source == device && r->device == to && to != device && r->count > 0;
}

static bool receives_from(const transport_piece *r, int device, int from) {
    return r->device == device && r->source == from && from != device && r->count > 0;
}

/* Room to name and wrap a bundle of up to n pieces. */
typedef struct bundle_room {
    brg_named_tensor *items;
    brg_tensor *views;
    char (*names)[16];
} bundle_room;

static brg_status room_init(bundle_room *b, int device, int n) {
    const size_t k = (size_t)(n ? n : 1);
    b->items = calloc(k, sizeof *b->items);
    b->views = calloc(k, sizeof *b->views);
    b->names = calloc(k, sizeof *b->names);
    return b->items && b->views && b->names ? BRG_OK
                                            : brg_error(BRG_ERR_OOM, "device %d: cannot list its pieces", device);
}

static void room_free(bundle_room *b) {
    free(b->items);
    free(b->views);
    free(b->names);
}

static brg_status check_sorted(int device, const transport_piece *rows, int n) {
    for (int i = 1; i < n; i++)
        if (rows[i - 1].key > rows[i].key)
            return brg_error(BRG_ERR_INTERNAL, "device %d's pieces are not sorted by key", device);
    return BRG_OK;
}

/* One bundle of the rows this device sends to `to`; views over its own memory. */
static brg_status send_pieces(transport *t, int device, int to, int tag, const transport_piece *rows, int n,
                              bundle_room *b) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!sends_to(&rows[i], device, to)) continue;
        int64_t count = (int64_t)rows[i].count;
        snprintf(b->names[k], sizeof b->names[k], "%d", rows[i].key);
        b->views[k] = brg_tensor_wrap(BRG_DTYPE_F32, 1, &count, rows[i].data);
        b->items[k] = (brg_named_tensor){b->names[k], &b->views[k]};
        k++;
    }
    return k ? t->send(t, device, to, tag, b->items, k) : BRG_OK;
}

static brg_status send_all(transport *t, int device, int tag, const transport_piece *rows, int n, bundle_room *b) {
    brg_status st = BRG_OK;
    for (int to = 0; st == BRG_OK && to < t->n_devices; to++) st = send_pieces(t, device, to, tag, rows, n, b);
    return st;
}

/* What a received piece's values do for row i: copied in (all-gather) or added (reduce-scatter). */
typedef void (*take_fn)(const transport_piece *rows, int i, const float *values, void *ctx);

/* The bundle from `from`: its pieces in the order of this device's rows from it, each handed to
 * take. */
static brg_status take_pieces(transport *t, int device, int from, int tag, const transport_piece *rows, int n,
                              take_fn take, void *ctx) {
    int expected = 0;
    for (int i = 0; i < n; i++) expected += receives_from(&rows[i], device, from);
    if (!expected) return BRG_OK;
    transport_msg m;
    BRG_TRY(t->recv(t, device, from, tag, &m));
    brg_status st = m.n == expected ? BRG_OK
                                    : brg_error(BRG_ERR_INTERNAL, "device %d expects %d pieces from device %d, got %d",
                                                device, expected, from, m.n);
    for (int i = 0, k = 0; st == BRG_OK && i < n; i++) {
        if (!receives_from(&rows[i], device, from)) continue;
        const brg_tensor *got = m.items[k].tensor;
        char key[16];
        snprintf(key, sizeof key, "%d", rows[i].key);
        if (strcmp(m.items[k].name, key) != 0 || got->dtype != BRG_DTYPE_F32 ||
            brg_tensor_numel(got) != (int64_t)rows[i].count)
            st = brg_error(BRG_ERR_INTERNAL,
                           "device %d got piece %s from device %d where it expects piece %s of %zu floats", device,
                           m.items[k].name, from, key, rows[i].count);
        else
            take(rows, i, got->data, ctx);
        k++;
    }
    t->release(t, device, &m);
    return st;
}

/* ---- all-gather ---- */

static void copy_in(const transport_piece *rows, int i, const float *values, void *ctx) {
    (void)ctx;
    memcpy(rows[i].data, values, rows[i].count * sizeof(float));
}

brg_status transport_all_gather(transport *t, int device, const transport_piece *rows, int n) {
    BRG_TRY(check_sorted(device, rows, n));
    bundle_room b;
    brg_status st = room_init(&b, device, n);
    if (st == BRG_OK) st = send_all(t, device, TRANSPORT_TAG_PIECES, rows, n, &b);
    for (int from = 0; st == BRG_OK && from < t->n_devices; from++)
        st = take_pieces(t, device, from, TRANSPORT_TAG_PIECES, rows, n, copy_in, NULL);
    room_free(&b);
    return st;
}

/* ---- reduce-scatter ---- */

static bool wanted(const transport_piece *r, int device) { return r->device == device && r->count > 0; }

/* For each row this device wants: the key's first contributor, and a copy of this device's own
 * values when it contributes after another (the sum overwrites them before their turn). */
typedef struct sum_plan {
    int *first;
    float **saved;
} sum_plan;

static brg_status plan_sums(int device, const transport_piece *rows, int n, sum_plan *p) {
    p->first = malloc((size_t)(n ? n : 1) * sizeof *p->first);
    p->saved = calloc((size_t)(n ? n : 1), sizeof *p->saved);
    if (!p->first || !p->saved) return brg_error(BRG_ERR_OOM, "device %d: cannot plan its sums", device);
    for (int a = 0, b; a < n; a = b) {
        int first = -1;
        for (b = a; b < n && rows[b].key == rows[a].key; b++)
            if (wanted(&rows[b], device) && (first < 0 || rows[b].source < first)) first = rows[b].source;
        for (int i = a; i < b; i++) p->first[i] = first;
    }
    for (int i = 0; i < n; i++) {
        if (!wanted(&rows[i], device) || rows[i].source != device || p->first[i] == device) continue;
        p->saved[i] = malloc(rows[i].count * sizeof(float));
        if (!p->saved[i]) return brg_error(BRG_ERR_OOM, "device %d: cannot keep its own piece %d", device, rows[i].key);
        memcpy(p->saved[i], rows[i].data, rows[i].count * sizeof(float));
    }
    return BRG_OK;
}

static void plan_free(sum_plan *p, int n) {
    for (int i = 0; p->saved && i < n; i++) free(p->saved[i]);
    free(p->saved);
    free(p->first);
}

/* The first contributor's values start the sum; each later one adds in. */
static void add_in(const transport_piece *rows, int i, const float *values, void *ctx) {
    const sum_plan *p = ctx;
    float *sum = rows[i].data;
    if (rows[i].source == p->first[i]) {
        if (sum != values) memcpy(sum, values, rows[i].count * sizeof(float));
        return;
    }
    for (size_t j = 0; j < rows[i].count; j++) sum[j] += values[j];
}

/* This device's own contributions, at its turn in device order. */
static void add_own(const transport_piece *rows, int n, int device, sum_plan *p) {
    for (int i = 0; i < n; i++)
        if (wanted(&rows[i], device) && rows[i].source == device)
            add_in(rows, i, p->saved[i] ? p->saved[i] : rows[i].data, p);
}

brg_status transport_reduce_scatter(transport *t, int device, const transport_piece *rows, int n) {
    BRG_TRY(check_sorted(device, rows, n));
    if (t->reduce_scatter) return t->reduce_scatter(t, device, rows, n);
    bundle_room b;
    sum_plan p = {NULL, NULL};
    brg_status st = room_init(&b, device, n);
    if (st == BRG_OK) st = plan_sums(device, rows, n, &p);
    if (st == BRG_OK) st = send_all(t, device, TRANSPORT_TAG_SUMS, rows, n, &b);
    for (int from = 0; st == BRG_OK && from < t->n_devices; from++) {
        if (from == device) add_own(rows, n, device, &p);
        else st = take_pieces(t, device, from, TRANSPORT_TAG_SUMS, rows, n, add_in, &p);
    }
    plan_free(&p, n);
    room_free(&b);
    return st;
}
