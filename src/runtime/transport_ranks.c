/* The ranks transport: the devices of one layout spread over processes (ranks), each process
 * running its own devices, joined by a wire (wire.h: Open MPI, or a loopback in the tests).
 *
 * Every message, whether its receiver runs in this process or another, is one buffer: the wire's
 * headroom, a header (kind, sender, receiver, tag) and the bundle in transport_serial.c's byte
 * form. A message for a device here goes straight into its mailbox (channel.c); one for a device
 * elsewhere is posted on the wire, whose far end puts it into the receiver's mailbox as soon as it
 * arrives. Sending never waits and every message is received eagerly, so no order of sends and
 * receives can deadlock; every wait gives up after the timeout, naming what it waited for.
 *
 * The collectives are point-to-point messages too, with tags of their own (negative):
 * - all_reduce: at a device's first call every device tells every other which keys it holds (the
 *   plan, kept: the runtime's gradient layout never changes). Each key's first holder then
 *   receives the key's copies from the other holders, in device order, adds them into its own in
 *   that order (x0 + x1 + x2 + ..., exactly the threads transport's sum) and sends the sum back to
 *   each of them. One message per pair of devices and direction carries all the keys they share.
 * - broadcast: every other device tells the root which tensors it wants; the root sends each only
 *   those.
 * - barrier: everyone checks in with device 0, which lets everyone go.
 * - abort: the first failure is kept, wakes this process's waiting devices and is posted to every
 *   other process, whose devices stop the same way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/model.h"
#include "channel.h"
#include "transport.h"
#include "transport_failure.h"
#include "wire.h"

enum { MSG_DATA = 1, MSG_ABORT = 2 };
enum { MSG_MAGIC = 0x4d475242u }; /* "BRGM" */

/* The transport's own tags, below every tag the runtime uses. */
enum {
    TAG_ANNOUNCE = -1,
    TAG_REDUCE_IN = -2,
    TAG_REDUCE_OUT = -3,
    TAG_BCAST_WANT = -4,
    TAG_BCAST = -5,
    TAG_BARRIER_IN = -6,
    TAG_BARRIER_OUT = -7,
};

typedef struct msg_head {
    uint32_t magic;
    int32_t kind, from, to, tag, status, n_devices, unused;
    uint64_t bytes; /* what follows the header */
} msg_head;

static msg_head *head_of(void *buf) { return (msg_head *)((unsigned char *)buf + WIRE_HEADROOM); }
static unsigned char *body_of(void *buf) { return (unsigned char *)buf + WIRE_HEADROOM + sizeof(msg_head); }

/* The keys a device exchanges with one other device in an all-reduce, in key order. */
typedef struct peer_keys {
    int peer, n;
    int *keys;
} peer_keys;

typedef struct reduce_plan {
    bool ready;
    int n_own;
    transport_segment *own;   /* the keys and counts the plan was made for (offsets unused) */
    peer_keys *up;            /* keys whose first holder is another device: sent there, sums back */
    int n_up;
    peer_keys *down;          /* keys this device holds first: the other holders', in device order */
    int n_down;
} reduce_plan;

typedef struct ranks_transport {
    transport base;
    int *device_rank;
    int *local;      /* [n_devices]: the index of a device here in mail/plans, or -1 */
    channel *mail;   /* [devices here] */
    reduce_plan *plans;
    int n_local;
    double timeout;  /* seconds a wait lasts; 0: for ever */
    transport_wire *wire;
    pthread_mutex_t lock; /* the failure */
    transport_failure fail;
} ranks_transport;

static ranks_transport *impl(transport *t) { return (ranks_transport *)t; }

static brg_status stopped(ranks_transport *rt) {
    pthread_mutex_lock(&rt->lock);
    brg_status st = transport_failure_stopped(&rt->fail);
    pthread_mutex_unlock(&rt->lock);
    return st;
}

/* ---- messages ---- */

static void drop(void *ctx, void *payload) {
    (void)ctx;
    free(payload);
}

/* A label for the wire (MPI's tag): sender, receiver and tag, folded to a non-negative int. */
static int wire_label(const ranks_transport *rt, int from, int to, int tag) {
    uint64_t n = (uint64_t)rt->base.n_devices, t = tag >= 0 ? 2 * (uint64_t)tag : 2 * (uint64_t)(-(int64_t)tag) - 1;
    return (int)(((t * n + (uint64_t)from) * n + (uint64_t)to) % 2147483647u);
}

static void record_failure(ranks_transport *rt, int device, brg_status status, const char *message, bool *first) {
    pthread_mutex_lock(&rt->lock);
    *first = transport_failure_record(&rt->fail, device, status, message);
    pthread_mutex_unlock(&rt->lock);
    for (int i = 0; *first && i < rt->n_local; i++) channel_wake(&rt->mail[i]);
}

/* A malloc'd message with room for `body` bytes after its header. */
static void *new_msg(const ranks_transport *rt, int kind, int from, int to, int tag, int status, size_t body) {
    void *buf = malloc(WIRE_HEADROOM + sizeof(msg_head) + body);
    if (!buf) return NULL;
    *head_of(buf) = (msg_head){MSG_MAGIC, kind, from, to, tag, status, rt->base.n_devices, 0, body};
    return buf;
}

/* The message goes to its receiver's mailbox here, or onto the wire; either way it is taken. */
static brg_status route(ranks_transport *rt, void *buf) {
    const msg_head *h = head_of(buf);
    const size_t bytes = WIRE_HEADROOM + sizeof *h + h->bytes;
    if (rt->local[h->to] >= 0) {
        brg_status st = channel_send(&rt->mail[rt->local[h->to]], (channel_msg){h->from, h->tag, buf});
        if (st != BRG_OK) free(buf);
        return st;
    }
    return rt->wire->post(rt->wire, rt->device_rank[h->to], wire_label(rt, h->from, h->to, h->tag), buf, bytes);
}

static brg_status send_msg(ranks_transport *rt, int device, int to, int tag, const brg_named_tensor *items, int n) {
    if (atomic_load(&rt->fail.aborted)) return stopped(rt);
    if (to < 0 || to >= rt->base.n_devices || to == device)
        return brg_error(BRG_ERR_INTERNAL, "device %d sends to device %d of %d", device, to, rt->base.n_devices);
    const size_t body = transport_bundle_size(items, n);
    void *buf = new_msg(rt, MSG_DATA, device, to, tag, 0, body);
    if (!buf) return brg_error(BRG_ERR_OOM, "cannot allocate a message of %zu bytes from device %d", body, device);
    brg_status st = transport_bundle_encode(device, items, n, body_of(buf));
    if (st != BRG_OK) {
        free(buf);
        return st;
    }
    return route(rt, buf);
}

/* What a wait was for, in words. */
static const char *tag_name(int tag, char *buf, size_t len) {
    if (tag >= TRANSPORT_TAG_FIRST)
        snprintf(buf, len, "micro-batch %d's %s", (tag - TRANSPORT_TAG_FIRST) / 2,
                 (tag - TRANSPORT_TAG_FIRST) % 2 == TRANSPORT_FORWARD ? "activations" : "gradients");
    else if (tag == TRANSPORT_TAG_GATHER) snprintf(buf, len, "a gather onto device 0");
    else if (tag == TRANSPORT_TAG_SHARE) snprintf(buf, len, "host values");
    else if (tag == TRANSPORT_TAG_PIECES) snprintf(buf, len, "the optimizer shards' all-gather");
    else if (tag == TRANSPORT_TAG_SUMS) snprintf(buf, len, "the gradients' reduce-scatter");
    else if (tag == TAG_ANNOUNCE || tag == TAG_REDUCE_IN || tag == TAG_REDUCE_OUT) snprintf(buf, len, "the all-reduce");
    else if (tag == TAG_BCAST_WANT || tag == TAG_BCAST) snprintf(buf, len, "a broadcast");
    else snprintf(buf, len, "a barrier");
    return buf;
}

static brg_status recv_msg(ranks_transport *rt, int device, int from, int tag, transport_msg *out) {
    if (atomic_load(&rt->fail.aborted)) return stopped(rt);
    channel_msg m;
    brg_status st = channel_recv_timed(&rt->mail[rt->local[device]], from, tag, rt->timeout, &m);
    if (st == BRG_ERR_IO) {
        char what[64];
        return brg_error(BRG_ERR_IO,
                         "no message from device %d (rank %d) in %g s (%s): that rank has stopped, hung or is far "
                         "behind (brigade --timeout sets how long to wait)",
                         from, rt->device_rank[from], rt->timeout, tag_name(tag, what, sizeof what));
    }
    if (st != BRG_OK) return stopped(rt);
    const msg_head *h = head_of(m.payload);
    st = transport_bundle_decode(body_of(m.payload), h->bytes, from, out);
    free(m.payload);
    return st;
}

/* From the wire: a message for a device here, or another process's failure. */
static void deliver(void *ctx, void *buf, size_t bytes) {
    ranks_transport *rt = ctx;
    const msg_head *h = bytes >= WIRE_HEADROOM + sizeof(msg_head) ? head_of(buf) : NULL;
    bool fine = h && h->magic == MSG_MAGIC && h->bytes == bytes - WIRE_HEADROOM - sizeof *h &&
                h->n_devices == rt->base.n_devices && h->from >= 0 && h->from < rt->base.n_devices;
    bool first;
    if (fine && h->kind == MSG_ABORT) {
        char why[1024];
        size_t len = h->bytes < sizeof why - 1 ? h->bytes : sizeof why - 1;
        memcpy(why, body_of(buf), len);
        why[len] = '\0';
        record_failure(rt, h->from, (brg_status)h->status, why, &first);
        free(buf);
        return;
    }
    if (fine && h->kind == MSG_DATA && h->to >= 0 && h->to < rt->base.n_devices && rt->local[h->to] >= 0 &&
        channel_send(&rt->mail[rt->local[h->to]], (channel_msg){h->from, h->tag, buf}) == BRG_OK)
        return;
    const int from = fine ? h->from : 0;
    free(buf);
    char why[160];
    snprintf(why, sizeof why, "rank %d received a message it cannot use (%zu bytes%s)", rt->base.rank, bytes,
             fine ? ", for a device it does not run" : ", malformed, or from a run of another layout");
    record_failure(rt, from, BRG_ERR_FORMAT, why, &first);
}

/* ---- point to point ---- */

static brg_status rk_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    return send_msg(impl(t), device, to, tag, items, n);
}

static brg_status rk_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    if (from < 0 || from >= t->n_devices || from == device)
        return brg_error(BRG_ERR_INTERNAL, "device %d receives from device %d of %d", device, from, t->n_devices);
    return recv_msg(impl(t), device, from, tag, out);
}

static void rk_release(transport *t, int device, transport_msg *msg) {
    (void)t, (void)device;
    transport_bundle_release(msg);
}

/* ---- all-reduce ---- */

static void plan_free(reduce_plan *p) {
    for (int i = 0; i < p->n_up; i++) free(p->up[i].keys);
    for (int i = 0; i < p->n_down; i++) free(p->down[i].keys);
    free(p->up);
    free(p->down);
    free(p->own);
    memset(p, 0, sizeof *p);
}

static const transport_segment *find_segment(const transport_segment *segs, int n, int key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (segs[mid].key == key) return &segs[mid];
        if (segs[mid].key < key) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static brg_status add_key(peer_keys *list, int *n, int peer, int key) {
    peer_keys *p = NULL;
    for (int i = 0; i < *n && !p; i++)
        if (list[i].peer == peer) p = &list[i];
    if (!p) {
        p = &list[(*n)++];
        *p = (peer_keys){peer, 0, NULL};
    }
    int *grown = realloc(p->keys, (size_t)(p->n + 1) * sizeof *grown);
    if (!grown) return brg_error(BRG_ERR_OOM, "cannot plan the all-reduce");
    p->keys = grown;
    p->keys[p->n++] = key;
    return BRG_OK;
}

static int by_peer(const void *a, const void *b) {
    return ((const peer_keys *)a)->peer - ((const peer_keys *)b)->peer;
}

/* lists[e] / counts[e]: device e's (key, count) pairs. */
static brg_status make_plan(ranks_transport *rt, int device, const transport_segment *segs, int n_segs,
                            int64_t *const *lists, const int *counts, reduce_plan *p) {
    const int n = rt->base.n_devices;
    p->own = malloc((size_t)(n_segs ? n_segs : 1) * sizeof *p->own);
    p->up = calloc((size_t)n, sizeof *p->up);
    p->down = calloc((size_t)n, sizeof *p->down);
    if (!p->own || !p->up || !p->down) return brg_error(BRG_ERR_OOM, "cannot plan the all-reduce");
    memcpy(p->own, segs, (size_t)n_segs * sizeof *segs);
    p->n_own = n_segs;
    for (int i = 0; i < n_segs; i++) {
        const int key = segs[i].key;
        int first = -1;
        for (int e = 0; e < n; e++) {
            int64_t held = -1;
            if (e == device) held = (int64_t)segs[i].count;
            else
                for (int j = 0; j < counts[e] && held < 0; j++)
                    if (lists[e][2 * j] == key) held = lists[e][2 * j + 1];
            if (held < 0) continue;
            if (held != (int64_t)segs[i].count)
                return brg_error(BRG_ERR_INTERNAL, "key %d has %lld values on device %d and %zu on device %d", key,
                                 (long long)held, e, segs[i].count, device);
            if (first < 0) first = e;
            if (first == device && e != device) BRG_TRY(add_key(p->down, &p->n_down, e, key));
        }
        if (first != device) BRG_TRY(add_key(p->up, &p->n_up, first, key));
    }
    qsort(p->down, (size_t)p->n_down, sizeof *p->down, by_peer); /* the sum runs in device order */
    p->ready = true;
    return BRG_OK;
}

/* Every device tells every other which keys it holds, then plans from what they said. */
static brg_status announce(ranks_transport *rt, int device, const transport_segment *segs, int n_segs,
                           reduce_plan *p) {
    const int n = rt->base.n_devices;
    int64_t *mine = malloc((size_t)(2 * n_segs + 1) * sizeof *mine);
    int64_t **lists = calloc((size_t)n, sizeof *lists);
    int *counts = calloc((size_t)n, sizeof *counts);
    brg_status st = mine && lists && counts ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot plan the all-reduce");
    for (int i = 0; st == BRG_OK && i < n_segs; i++) mine[2 * i] = segs[i].key, mine[2 * i + 1] = (int64_t)segs[i].count;
    int64_t shape[1] = {2 * (int64_t)n_segs};
    brg_tensor keys = brg_tensor_wrap(BRG_DTYPE_I64, 1, shape, mine);
    brg_named_tensor item = {"keys", &keys};
    for (int e = 0; st == BRG_OK && e < n; e++)
        if (e != device) st = send_msg(rt, device, e, TAG_ANNOUNCE, &item, 1);
    for (int e = 0; st == BRG_OK && e < n; e++) {
        if (e == device) continue;
        transport_msg m;
        st = recv_msg(rt, device, e, TAG_ANNOUNCE, &m);
        if (st != BRG_OK) break;
        const brg_tensor *x = m.n == 1 ? m.items[0].tensor : NULL;
        if (!x || x->dtype != BRG_DTYPE_I64 || x->ndim != 1 || x->shape[0] % 2)
            st = brg_error(BRG_ERR_FORMAT, "device %d announced its keys malformed", e);
        else if (!(lists[e] = malloc((size_t)(x->shape[0] + 1) * sizeof **lists)))
            st = brg_error(BRG_ERR_OOM, "cannot plan the all-reduce");
        else {
            memcpy(lists[e], x->data, (size_t)x->shape[0] * sizeof **lists);
            counts[e] = (int)(x->shape[0] / 2);
        }
        transport_bundle_release(&m);
    }
    if (st == BRG_OK) st = make_plan(rt, device, segs, n_segs, lists, counts, p);
    if (st != BRG_OK) plan_free(p);
    for (int e = 0; lists && e < n; e++) free(lists[e]);
    free(lists);
    free(counts);
    free(mine);
    return st;
}

static bool same_keys(const reduce_plan *p, const transport_segment *segs, int n_segs) {
    if (p->n_own != n_segs) return false;
    for (int i = 0; i < n_segs; i++)
        if (p->own[i].key != segs[i].key || p->own[i].count != segs[i].count) return false;
    return true;
}

/* The segments of `keys` in this device's span, as one message's tensors. */
static brg_status send_keys(ranks_transport *rt, int device, const peer_keys *pk, int tag, float *span,
                            const transport_segment *segs, int n_segs) {
    brg_named_tensor *items = calloc((size_t)(pk->n ? pk->n : 1), sizeof *items);
    brg_tensor *views = calloc((size_t)(pk->n ? pk->n : 1), sizeof *views);
    brg_status st = items && views ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot list an all-reduce message");
    for (int i = 0; st == BRG_OK && i < pk->n; i++) {
        const transport_segment *s = find_segment(segs, n_segs, pk->keys[i]);
        int64_t count = (int64_t)s->count;
        views[i] = brg_tensor_wrap(BRG_DTYPE_F32, 1, &count, span + s->offset);
        items[i] = (brg_named_tensor){"g", &views[i]};
    }
    if (st == BRG_OK) st = send_msg(rt, device, pk->peer, tag, items, pk->n);
    free(items);
    free(views);
    return st;
}

/* Receives the segments of `keys` from pk->peer: added into this device's (add) or copied. */
static brg_status recv_keys(ranks_transport *rt, int device, const peer_keys *pk, int tag, float *span,
                            const transport_segment *segs, int n_segs, bool add) {
    transport_msg m;
    BRG_TRY(recv_msg(rt, device, pk->peer, tag, &m));
    brg_status st = m.n == pk->n ? BRG_OK
                                 : brg_error(BRG_ERR_INTERNAL, "device %d sent %d gradients to device %d, which expects %d",
                                             pk->peer, m.n, device, pk->n);
    for (int i = 0; st == BRG_OK && i < pk->n; i++) {
        const transport_segment *s = find_segment(segs, n_segs, pk->keys[i]);
        const brg_tensor *x = m.items[i].tensor;
        if (x->dtype != BRG_DTYPE_F32 || brg_tensor_numel(x) != (int64_t)s->count) {
            st = brg_error(BRG_ERR_INTERNAL, "device %d sent key %d's gradient in another shape", pk->peer, s->key);
            break;
        }
        float *dst = span + s->offset;
        const float *g = x->data;
        if (add)
            for (size_t j = 0; j < s->count; j++) dst[j] += g[j];
        else memcpy(dst, g, s->count * sizeof *dst);
    }
    transport_bundle_release(&m);
    return st;
}

static brg_status rk_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    ranks_transport *rt = impl(t);
    for (int i = 1; i < n_segs; i++) BRG_ASSERT(segs[i - 1].key < segs[i].key);
    if (atomic_load(&rt->fail.aborted)) return stopped(rt);
    reduce_plan *p = &rt->plans[rt->local[device]];
    if (!p->ready) BRG_TRY(announce(rt, device, segs, n_segs, p));
    else if (!same_keys(p, segs, n_segs))
        return brg_error(BRG_ERR_INTERNAL,
                         "device %d's gradient keys changed since its first all-reduce (the ranks transport plans "
                         "the reduction once)",
                         device);
    /* Sends first (they never wait), then the sums in device order, then the sums back. */
    for (int i = 0; i < p->n_up; i++) BRG_TRY(send_keys(rt, device, &p->up[i], TAG_REDUCE_IN, span, segs, n_segs));
    for (int i = 0; i < p->n_down; i++)
        BRG_TRY(recv_keys(rt, device, &p->down[i], TAG_REDUCE_IN, span, segs, n_segs, true));
    for (int i = 0; i < p->n_down; i++)
        BRG_TRY(send_keys(rt, device, &p->down[i], TAG_REDUCE_OUT, span, segs, n_segs));
    for (int i = 0; i < p->n_up; i++)
        BRG_TRY(recv_keys(rt, device, &p->up[i], TAG_REDUCE_OUT, span, segs, n_segs, false));
    return BRG_OK;
}

/* ---- broadcast and barrier ---- */

static brg_status bcast_root(ranks_transport *rt, int root, brg_tensor *const *tensors, int n) {
    brg_named_tensor *items = calloc((size_t)(n ? n : 1), sizeof *items);
    char (*names)[12] = calloc((size_t)(n ? n : 1), sizeof *names);
    brg_status st = items && names ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot list a broadcast");
    for (int i = 0; i < n && st == BRG_OK; i++) snprintf(names[i], sizeof names[i], "%d", i);
    for (int e = 0; st == BRG_OK && e < rt->base.n_devices; e++) {
        if (e == root) continue;
        transport_msg m;
        if ((st = recv_msg(rt, root, e, TAG_BCAST_WANT, &m)) != BRG_OK) break;
        const brg_tensor *want = m.n == 1 ? m.items[0].tensor : NULL;
        int k = 0;
        if (!want || want->dtype != BRG_DTYPE_BOOL || brg_tensor_numel(want) != n)
            st = brg_error(BRG_ERR_INTERNAL, "device %d expects %lld tensors from device %d, which sends %d", e,
                           want ? (long long)brg_tensor_numel(want) : -1LL, root, n);
        for (int i = 0; st == BRG_OK && i < n; i++)
            if (((const unsigned char *)want->data)[i]) items[k++] = (brg_named_tensor){names[i], tensors[i]};
        transport_bundle_release(&m);
        if (st == BRG_OK) st = send_msg(rt, root, e, TAG_BCAST, items, k);
    }
    free(items);
    free(names);
    return st;
}

static brg_status bcast_leaf(ranks_transport *rt, int device, int root, brg_tensor *const *tensors, int n) {
    unsigned char *want = calloc((size_t)(n ? n : 1), 1);
    if (!want) return brg_error(BRG_ERR_OOM, "cannot list a broadcast");
    for (int i = 0; i < n; i++) want[i] = tensors[i] != NULL;
    int64_t shape[1] = {n};
    brg_tensor mask = brg_tensor_wrap(BRG_DTYPE_BOOL, 1, shape, want);
    brg_named_tensor item = {"want", &mask};
    brg_status st = send_msg(rt, device, root, TAG_BCAST_WANT, &item, 1);
    free(want);
    transport_msg m;
    if (st == BRG_OK) st = recv_msg(rt, device, root, TAG_BCAST, &m);
    if (st != BRG_OK) return st;
    for (int i = 0; st == BRG_OK && i < m.n; i++) {
        char *end;
        long k = strtol(m.items[i].name, &end, 10);
        if (*end || k < 0 || k >= n || !tensors[k])
            st = brg_error(BRG_ERR_INTERNAL, "device %d broadcast tensor %s, which device %d did not ask for", root,
                           m.items[i].name, device);
        else st = brg_tensor_copy(tensors[k], m.items[i].tensor);
    }
    transport_bundle_release(&m);
    return st;
}

static brg_status rk_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    ranks_transport *rt = impl(t);
    return device == root ? bcast_root(rt, root, tensors, n) : bcast_leaf(rt, device, root, tensors, n);
}

static brg_status rk_barrier(transport *t, int device) {
    ranks_transport *rt = impl(t);
    transport_msg m;
    if (device != 0) {
        BRG_TRY(send_msg(rt, device, 0, TAG_BARRIER_IN, NULL, 0));
        BRG_TRY(recv_msg(rt, device, 0, TAG_BARRIER_OUT, &m));
        transport_bundle_release(&m);
        return BRG_OK;
    }
    for (int e = 1; e < t->n_devices; e++) {
        BRG_TRY(recv_msg(rt, 0, e, TAG_BARRIER_IN, &m));
        transport_bundle_release(&m);
    }
    for (int e = 1; e < t->n_devices; e++) BRG_TRY(send_msg(rt, 0, e, TAG_BARRIER_OUT, NULL, 0));
    return BRG_OK;
}

/* ---- failures ---- */

static void rk_abort(transport *t, int device, brg_status status, const char *message) {
    ranks_transport *rt = impl(t);
    bool first;
    record_failure(rt, device, status, message, &first);
    if (!first) return;
    /* Every other process hears of it (best effort: one that cannot be told still times out). */
    const size_t len = message ? strlen(message) : 0;
    for (int r = 0; r < t->n_ranks; r++) {
        if (r == t->rank) continue;
        void *buf = new_msg(rt, MSG_ABORT, device, -1, 0, (int)(status != BRG_OK ? status : BRG_ERR_INTERNAL), len);
        if (!buf) continue;
        if (len) memcpy(body_of(buf), message, len);
        rt->wire->post(rt->wire, r, 0, buf, WIRE_HEADROOM + sizeof(msg_head) + len);
    }
}

static brg_status rk_failure(const transport *t, int *device, const char **message) {
    ranks_transport *rt = (ranks_transport *)t;
    pthread_mutex_lock(&rt->lock);
    brg_status st = transport_failure_get(&rt->fail, device, message);
    pthread_mutex_unlock(&rt->lock);
    return st;
}

static void rk_reset(transport *t) {
    ranks_transport *rt = impl(t);
    for (int i = 0; i < rt->n_local; i++) channel_reset(&rt->mail[i], drop, NULL);
    pthread_mutex_lock(&rt->lock);
    transport_failure_clear(&rt->fail);
    pthread_mutex_unlock(&rt->lock);
}

static void rk_destroy(transport *t) {
    if (!t) return;
    ranks_transport *rt = impl(t);
    if (rt->wire) rt->wire->close(rt->wire); /* nothing is delivered after this */
    for (int i = 0; rt->mail && i < rt->n_local; i++) {
        if (!rt->mail[i].msgs) continue;
        channel_reset(&rt->mail[i], drop, NULL);
        channel_destroy(&rt->mail[i]);
    }
    for (int i = 0; rt->plans && i < rt->n_local; i++) plan_free(&rt->plans[i]);
    pthread_mutex_destroy(&rt->lock);
    free(rt->mail);
    free(rt->plans);
    free(rt->local);
    free(rt->device_rank);
    free(rt);
}

brg_status transport_ranks_create(int n_devices, const int *device_rank, int rank, int n_ranks, double timeout,
                                  wire_open_fn open_wire, void *wire_arg, transport **out) {
    ranks_transport *rt = calloc(1, sizeof *rt);
    if (!rt) return brg_error(BRG_ERR_OOM, "cannot allocate the transport");
    rt->base = (transport){n_devices, rk_send, rk_recv, rk_release, rk_all_reduce, rk_broadcast, rk_barrier,
                           rk_abort, rk_failure, rk_reset, rk_destroy, rank, n_ranks, NULL, NULL};
    pthread_mutex_init(&rt->lock, NULL);
    transport_failure_clear(&rt->fail);
    rt->timeout = timeout;
    rt->device_rank = malloc((size_t)n_devices * sizeof *rt->device_rank);
    rt->local = malloc((size_t)n_devices * sizeof *rt->local);
    rt->mail = calloc((size_t)n_devices, sizeof *rt->mail);
    rt->plans = calloc((size_t)n_devices, sizeof *rt->plans);
    brg_status st = rt->device_rank && rt->local && rt->mail && rt->plans
                        ? BRG_OK
                        : brg_error(BRG_ERR_OOM, "cannot allocate the transport of %d devices", n_devices);
    for (int d = 0; st == BRG_OK && d < n_devices; d++) {
        if (device_rank[d] < 0 || device_rank[d] >= n_ranks) {
            st = brg_error(BRG_ERR_INVALID_ARG, "device %d is placed on rank %d of %d", d, device_rank[d], n_ranks);
            break;
        }
        rt->device_rank[d] = device_rank[d];
        rt->local[d] = device_rank[d] == rank ? rt->n_local++ : -1;
        if (rt->local[d] >= 0) st = channel_init(&rt->mail[rt->local[d]], 16, &rt->fail.aborted);
    }
    if (st == BRG_OK) rt->base.device_rank = rt->device_rank;
    /* Last: messages may arrive as soon as the wire is open. */
    if (st == BRG_OK) st = open_wire(wire_arg, deliver, rt, &rt->wire);
    if (st == BRG_OK && (rt->wire->rank != rank || rt->wire->n_ranks != n_ranks))
        st = brg_error(BRG_ERR_INTERNAL, "the wire joins rank %d of %d, the transport was made for rank %d of %d",
                       rt->wire->rank, rt->wire->n_ranks, rank, n_ranks);
    if (st != BRG_OK) {
        rk_destroy(&rt->base);
        return st;
    }
    *out = &rt->base;
    return BRG_OK;
}
