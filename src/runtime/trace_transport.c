/* A transport that records what passes through another (brigade/trace.h): every send and
 * receive with its bytes, micro-batch and direction, and every collective, on the calling
 * device's track. The runtime puts it around its transport when a trace is being recorded, so
 * a run without a trace goes through no extra layer at all; any transport (threads, serialised,
 * MPI) is traced the same way. */
#include <stdlib.h>

#include "brigade/trace.h"
#include "runtime_internal.h"

typedef struct traced {
    transport base;
    transport *inner;
} traced;

static transport *inner_of(transport *t) { return ((traced *)t)->inner; }

/* What a tag says: the pipeline's (micro-batch, direction), or the runtime's own exchanges. */
static void describe_tag(int tag, int *micro_batch, const char **what) {
    if (tag >= TRANSPORT_TAG_FIRST) {
        *micro_batch = (tag - TRANSPORT_TAG_FIRST) / 2;
        *what = (tag - TRANSPORT_TAG_FIRST) % 2 == TRANSPORT_FORWARD ? "forward" : "backward";
        return;
    }
    *micro_batch = -1;
    *what = tag == TRANSPORT_TAG_GATHER ? "gather" : tag == TRANSPORT_TAG_PIECES ? "shards"
            : tag == TRANSPORT_TAG_SUMS ? "gradient shards"
                                        : "message";
}

static int64_t bundle_bytes(const brg_named_tensor *items, int n) {
    int64_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += (int64_t)brg_tensor_nbytes(items[i].tensor);
    return bytes;
}

static brg_status tr_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->send(inner_of(t), device, to, tag, items, n);
    int mb;
    const char *what;
    describe_tag(tag, &mb, &what);
    brg_trace_span(BRG_TRACE_SEND, t0, to, mb, bundle_bytes(items, n), what);
    return st;
}

static brg_status tr_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->recv(inner_of(t), device, from, tag, out);
    int mb;
    const char *what;
    describe_tag(tag, &mb, &what);
    brg_trace_span(BRG_TRACE_RECV, t0, from, mb, st == BRG_OK ? bundle_bytes(out->items, out->n) : 0, what);
    return st;
}

static void tr_release(transport *t, int device, transport_msg *msg) { inner_of(t)->release(inner_of(t), device, msg); }

static brg_status tr_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->all_reduce(inner_of(t), device, span, segs, n_segs);
    int64_t floats = 0;
    for (int i = 0; i < n_segs; i++) floats += (int64_t)segs[i].count;
    brg_trace_span(BRG_TRACE_ALL_REDUCE, t0, 0, 0, floats * (int64_t)sizeof(float), NULL);
    return st;
}

static brg_status tr_reduce_scatter(transport *t, int device, const transport_piece *rows, int n) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->reduce_scatter(inner_of(t), device, rows, n);
    brg_trace_named("reduce-scatter", t0, -1);
    return st;
}

static brg_status tr_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->broadcast(inner_of(t), device, root, tensors, n);
    int64_t bytes = 0;
    for (int i = 0; i < n; i++)
        if (tensors[i]) bytes += (int64_t)brg_tensor_nbytes(tensors[i]);
    brg_trace_span(BRG_TRACE_BROADCAST, t0, root, 0, bytes, NULL);
    return st;
}

static brg_status tr_barrier(transport *t, int device) {
    const uint64_t t0 = brg_trace_now();
    brg_status st = inner_of(t)->barrier(inner_of(t), device);
    brg_trace_span(BRG_TRACE_BARRIER, t0, 0, 0, 0, NULL);
    return st;
}

static void tr_abort(transport *t, int device, brg_status status, const char *message) {
    inner_of(t)->abort(inner_of(t), device, status, message);
}

static brg_status tr_failure(const transport *t, int *device, const char **message) {
    const transport *inner = ((const traced *)t)->inner;
    return inner->failure(inner, device, message);
}

static void tr_reset(transport *t) { inner_of(t)->reset(inner_of(t)); }

static void tr_destroy(transport *t) {
    if (!t) return;
    inner_of(t)->destroy(inner_of(t));
    free(t);
}

brg_status transport_traced_wrap(transport **t) {
    traced *w = calloc(1, sizeof *w);
    if (!w) return brg_error(BRG_ERR_OOM, "cannot allocate the traced transport");
    w->inner = *t;
    /* Whatever else the transport carries stays as it is; the operations go through here. */
    w->base = **t;
    w->base.send = tr_send;
    w->base.recv = tr_recv;
    w->base.release = tr_release;
    w->base.all_reduce = tr_all_reduce;
    w->base.broadcast = tr_broadcast;
    w->base.barrier = tr_barrier;
    w->base.abort = tr_abort;
    w->base.failure = tr_failure;
    w->base.reset = tr_reset;
    w->base.destroy = tr_destroy;
    /* over send and recv (traced there) unless the inner transport has its own */
    w->base.reduce_scatter = (*t)->reduce_scatter ? tr_reduce_scatter : NULL;
    *t = &w->base;
    return BRG_OK;
}

/* Everything the device's arena family holds now: its own chunks, its micro-batch slots and its
 * threads' kernel scratch. */
void trace_device_memory(const brg_device *dev) {
    int64_t bytes = (int64_t)brg_arena_used(dev->arena) + (int64_t)brg_arena_scratch(dev->arena);
    for (int s = 0; s < dev->n_slots; s++) bytes += (int64_t)brg_arena_used(dev->slots[s]);
    brg_trace_memory(dev->id, bytes);
}
