/* The threads transport: devices are threads of one process. A bundle is copied into a message
 * buffer (kept in a pool and reused, so steady-state steps allocate nothing) that travels
 * through the receiver's mailbox (channel.c); collectives meet at a rendezvous and each device
 * then does its share of the work on the others' published spans, the one place where one
 * device's thread reads another's memory. */
#include <stdlib.h>
#include <string.h>

#include "brigade/model.h"
#include "channel.h"
#include "transport.h"
#include "transport_failure.h"

enum { ALIGN = 64 };
/* Buffers above this go back to the host rather than into the pool (checkpoint gathers). */
#define POOL_MAX_BYTES ((size_t)64 << 20)

typedef struct msgbuf {
    struct msgbuf *next; /* in the pool */
    int cap_items, n;
    size_t cap_bytes;
    brg_named_tensor *items;
    brg_tensor *tensors;
    char (*names)[BRG_NAME_MAX];
    unsigned char *data;
} msgbuf;

typedef struct threads_transport {
    transport base;
    channel *mail; /* [n_devices] */
    pthread_mutex_t lock; /* the pool, the rendezvous and the failure */
    pthread_cond_t met;
    msgbuf *pool;
    int arrived;
    unsigned long generation;
    /* what each device published for the current collective */
    float **spans;
    const transport_segment **segs;
    int *n_segs;
    brg_tensor *const *bcast;
    int bcast_n;
    const transport_piece **rows; /* each device's reduce-scatter rows, while it runs */
    int *n_rows;
    const float **sources; /* [n_devices][n_devices]: each device's contributors to one sum */
    transport_failure fail;
} threads_transport;

static threads_transport *impl(transport *t) { return (threads_transport *)t; }

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static brg_status stopped(threads_transport *tt) {
    pthread_mutex_lock(&tt->lock);
    brg_status st = transport_failure_stopped(&tt->fail);
    pthread_mutex_unlock(&tt->lock);
    return st;
}

/* ---- message buffers ---- */

static void buf_free(msgbuf *b) {
    if (!b) return;
    free(b->items);
    free(b->tensors);
    free(b->names);
    free(b->data);
    free(b);
}

static msgbuf *buf_new(int items, size_t bytes) {
    msgbuf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->cap_items = items > 4 ? items : 4;
    b->cap_bytes = bytes > ALIGN ? bytes : ALIGN;
    b->items = calloc((size_t)b->cap_items, sizeof *b->items);
    b->tensors = calloc((size_t)b->cap_items, sizeof *b->tensors);
    b->names = calloc((size_t)b->cap_items, sizeof *b->names);
    b->data = aligned_alloc(ALIGN, b->cap_bytes);
    if (!b->items || !b->tensors || !b->names || !b->data) {
        buf_free(b);
        return NULL;
    }
    return b;
}

/* The first pooled buffer with room, else a new one. */
static msgbuf *buf_take(threads_transport *tt, int items, size_t bytes) {
    pthread_mutex_lock(&tt->lock);
    for (msgbuf **p = &tt->pool; *p; p = &(*p)->next)
        if ((*p)->cap_items >= items && (*p)->cap_bytes >= bytes) {
            msgbuf *b = *p;
            *p = b->next;
            pthread_mutex_unlock(&tt->lock);
            return b;
        }
    pthread_mutex_unlock(&tt->lock);
    return buf_new(items, bytes);
}

static void buf_give(threads_transport *tt, msgbuf *b) {
    if (b->cap_bytes > POOL_MAX_BYTES) {
        buf_free(b);
        return;
    }
    pthread_mutex_lock(&tt->lock);
    b->next = tt->pool;
    tt->pool = b;
    pthread_mutex_unlock(&tt->lock);
}

/* ---- point to point ---- */

static brg_status th_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    threads_transport *tt = impl(t);
    if (atomic_load(&tt->fail.aborted)) return stopped(tt);
    if (to < 0 || to >= t->n_devices || to == device)
        return brg_error(BRG_ERR_INTERNAL, "device %d sends to device %d of %d", device, to, t->n_devices);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!brg_tensor_is_contiguous(items[i].tensor))
            return brg_error(BRG_ERR_INTERNAL, "device %d sends %s, which is not contiguous", device, items[i].name);
        if (strlen(items[i].name) >= BRG_NAME_MAX)
            return brg_error(BRG_ERR_INTERNAL, "device %d sends a tensor whose name is too long: %s", device,
                             items[i].name);
        bytes += align_up(brg_tensor_nbytes(items[i].tensor));
    }
    msgbuf *b = buf_take(tt, n, bytes);
    if (!b) return brg_error(BRG_ERR_OOM, "cannot allocate a message of %zu bytes from device %d", bytes, device);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const brg_tensor *src = items[i].tensor;
        memcpy(b->data + at, src->data, brg_tensor_nbytes(src));
        b->tensors[i] = brg_tensor_wrap(src->dtype, src->ndim, src->shape, b->data + at);
        snprintf(b->names[i], BRG_NAME_MAX, "%s", items[i].name);
        b->tensors[i].name = b->names[i];
        b->items[i] = (brg_named_tensor){b->names[i], &b->tensors[i]};
        at += align_up(brg_tensor_nbytes(src));
    }
    b->n = n;
    brg_status st = channel_send(&tt->mail[to], (channel_msg){device, tag, b});
    if (st != BRG_OK) buf_give(tt, b);
    return st;
}

static brg_status th_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    threads_transport *tt = impl(t);
    channel_msg m;
    if (channel_recv(&tt->mail[device], from, tag, &m) != BRG_OK) return stopped(tt);
    msgbuf *b = m.payload;
    *out = (transport_msg){b->n, b->items, b};
    return BRG_OK;
}

static void th_release(transport *t, int device, transport_msg *msg) {
    (void)device;
    if (msg->impl) buf_give(impl(t), msg->impl);
    *msg = (transport_msg){0, NULL, NULL};
}

/* ---- collectives ---- */

/* Returns once all devices have arrived (BRG_OK), or once a device aborted. */
static brg_status rendezvous(threads_transport *tt) {
    pthread_mutex_lock(&tt->lock);
    unsigned long gen = tt->generation;
    if (!atomic_load(&tt->fail.aborted) && ++tt->arrived == tt->base.n_devices) {
        tt->arrived = 0;
        tt->generation++;
        pthread_cond_broadcast(&tt->met);
    }
    while (tt->generation == gen && !atomic_load(&tt->fail.aborted)) pthread_cond_wait(&tt->met, &tt->lock);
    bool met = tt->generation != gen;
    pthread_mutex_unlock(&tt->lock);
    return met ? BRG_OK : stopped(tt);
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

/* Sums key k over its holders in device order into the first holder's segment, then copies the
 * sum to the other holders. */
static void reduce_key(threads_transport *tt, int key) {
    float *acc = NULL;
    size_t count = 0;
    for (int d = 0; d < tt->base.n_devices; d++) {
        const transport_segment *s = find_segment(tt->segs[d], tt->n_segs[d], key);
        if (!s) continue;
        float *g = tt->spans[d] + s->offset;
        if (!acc) {
            acc = g, count = s->count;
            continue;
        }
        BRG_ASSERT(s->count == count);
        for (size_t i = 0; i < count; i++) acc[i] += g[i];
    }
    for (int d = 0; acc && d < tt->base.n_devices; d++) {
        const transport_segment *s = find_segment(tt->segs[d], tt->n_segs[d], key);
        float *g = s ? tt->spans[d] + s->offset : NULL;
        if (g && g != acc) memcpy(g, acc, count * sizeof *g);
    }
}

/* Device d reduces keys d, d + n, d + 2n, ...: the devices split the work, and each key's sum
 * still runs over its holders in device order. */
static brg_status th_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    threads_transport *tt = impl(t);
    for (int i = 1; i < n_segs; i++) BRG_ASSERT(segs[i - 1].key < segs[i].key);
    tt->spans[device] = span;
    tt->segs[device] = segs;
    tt->n_segs[device] = n_segs;
    BRG_TRY(rendezvous(tt));
    int max_key = -1;
    for (int d = 0; d < t->n_devices; d++)
        if (tt->n_segs[d] > 0 && tt->segs[d][tt->n_segs[d] - 1].key > max_key) max_key = tt->segs[d][tt->n_segs[d] - 1].key;
    for (int k = device; k <= max_key; k += t->n_devices) reduce_key(tt, k);
    return rendezvous(tt); /* nobody reads or changes a span before every share is done */
}

/* ---- reduce-scatter in place ----
 * Every device publishes its rows; for each key, the lowest device that wants it adds the
 * contributors' pieces (read where they lie) into its own in device order, the other devices that
 * want it copy that sum, and nobody goes on before every copy is made. No piece is copied into a
 * message, so the gradients are never held twice. */

/* The first of device d's rows with `key` (rows sorted by key), or n. */
static int first_row(const transport_piece *rows, int n, int key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (rows[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Device d's piece of `key`: the data of any of its rows with that key where it is the source
 * or the device (all point at its one piece of the key). */
static float *piece_of(const threads_transport *tt, int d, int key, bool wanting) {
    const transport_piece *rows = tt->rows[d];
    for (int i = first_row(rows, tt->n_rows[d], key); i < tt->n_rows[d] && rows[i].key == key; i++)
        if (rows[i].count > 0 && (wanting ? rows[i].device == d : rows[i].source == d)) return rows[i].data;
    return NULL;
}

/* The lowest device that wants `key`. */
static int first_wanter(const threads_transport *tt, int key) {
    for (int d = 0; d < tt->base.n_devices; d++)
        if (piece_of(tt, d, key, true)) return d;
    return -1;
}

enum { SUM_BLOCK = 1024 };

/* rows[a..b): this device's rows wanting one key, sources in any order: their sum in device order
 * into its piece, block by block (each block read whole before it is written). */
static void sum_key(const threads_transport *tt, int device, const transport_piece *rows, int a, int b) {
    const float **from = tt->sources + (size_t)device * (size_t)tt->base.n_devices;
    int n = 0;
    for (int d = 0; d < tt->base.n_devices; d++)
        for (int i = a; i < b; i++)
            if (rows[i].source == d && rows[i].device == device) {
                from[n++] = piece_of(tt, d, rows[i].key, false);
                break;
            }
    if (n == 0) return;
    float *sum = rows[a].data, acc[SUM_BLOCK];
    for (size_t at = 0; at < rows[a].count; at += SUM_BLOCK) {
        const size_t len = rows[a].count - at < SUM_BLOCK ? rows[a].count - at : SUM_BLOCK;
        memcpy(acc, from[0] + at, len * sizeof *acc);
        for (int c = 1; c < n; c++)
            for (size_t j = 0; j < len; j++) acc[j] += from[c][at + j];
        memcpy(sum + at, acc, len * sizeof *acc);
    }
}

/* Calls fn on each group of this device's rows that want one key: [a, b). */
static void each_wanted_key(threads_transport *tt, int device, const transport_piece *rows, int n,
                            void (*fn)(threads_transport *, int, const transport_piece *, int, int)) {
    for (int a = 0, b; a < n; a = b) {
        int w = -1, w_end = -1;
        for (b = a; b < n && rows[b].key == rows[a].key; b++)
            if (rows[b].device == device && rows[b].count > 0) {
                if (w < 0) w = b;
                w_end = b + 1;
            }
        if (w >= 0) fn(tt, device, rows, w, w_end);
    }
}

static void sum_if_first(threads_transport *tt, int device, const transport_piece *rows, int a, int b) {
    if (first_wanter(tt, rows[a].key) == device) sum_key(tt, device, rows, a, b);
}

static void copy_if_not_first(threads_transport *tt, int device, const transport_piece *rows, int a, int b) {
    (void)b;
    const int first = first_wanter(tt, rows[a].key);
    if (first != device) memcpy(rows[a].data, piece_of(tt, first, rows[a].key, true), rows[a].count * sizeof(float));
}

static brg_status th_reduce_scatter(transport *t, int device, const transport_piece *rows, int n) {
    threads_transport *tt = impl(t);
    tt->rows[device] = rows;
    tt->n_rows[device] = n;
    BRG_TRY(rendezvous(tt));
    each_wanted_key(tt, device, rows, n, sum_if_first);
    BRG_TRY(rendezvous(tt)); /* every sum made before it is copied */
    each_wanted_key(tt, device, rows, n, copy_if_not_first);
    return rendezvous(tt); /* nobody changes a piece before every copy is made */
}

static brg_status th_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    threads_transport *tt = impl(t);
    if (device == root) tt->bcast = tensors, tt->bcast_n = n;
    BRG_TRY(rendezvous(tt));
    brg_status st = BRG_OK;
    if (device != root && tt->bcast_n != n)
        st = brg_error(BRG_ERR_INTERNAL, "device %d expects %d tensors from device %d, which sends %d", device, n,
                       root, tt->bcast_n);
    for (int i = 0; st == BRG_OK && device != root && i < n; i++)
        if (tensors[i]) st = brg_tensor_copy(tensors[i], tt->bcast[i]);
    brg_status met = rendezvous(tt); /* the root's tensors stay until every copy is made */
    return st != BRG_OK ? st : met;
}

static brg_status th_barrier(transport *t, int device) {
    (void)device;
    return rendezvous(impl(t));
}

/* ---- failures ---- */

static void th_abort(transport *t, int device, brg_status status, const char *message) {
    threads_transport *tt = impl(t);
    pthread_mutex_lock(&tt->lock);
    const bool first = transport_failure_record(&tt->fail, device, status, message);
    if (first) pthread_cond_broadcast(&tt->met);
    pthread_mutex_unlock(&tt->lock);
    for (int d = 0; first && d < t->n_devices; d++) channel_wake(&tt->mail[d]);
}

static brg_status th_failure(const transport *t, int *device, const char **message) {
    threads_transport *tt = (threads_transport *)t;
    pthread_mutex_lock(&tt->lock);
    brg_status st = transport_failure_get(&tt->fail, device, message);
    pthread_mutex_unlock(&tt->lock);
    return st;
}

static void drop(void *ctx, void *payload) { buf_give(ctx, payload); }

static void th_reset(transport *t) {
    threads_transport *tt = impl(t);
    for (int d = 0; d < t->n_devices; d++) channel_reset(&tt->mail[d], drop, tt);
    pthread_mutex_lock(&tt->lock);
    tt->arrived = 0;
    transport_failure_clear(&tt->fail);
    pthread_mutex_unlock(&tt->lock);
}

static void th_destroy(transport *t) {
    if (!t) return;
    threads_transport *tt = impl(t);
    for (int d = 0; tt->mail && d < t->n_devices; d++) {
        if (!tt->mail[d].msgs) continue; /* creation failed before it */
        channel_reset(&tt->mail[d], drop, tt);
        channel_destroy(&tt->mail[d]);
    }
    while (tt->pool) {
        msgbuf *b = tt->pool;
        tt->pool = b->next;
        buf_free(b);
    }
    pthread_mutex_destroy(&tt->lock);
    pthread_cond_destroy(&tt->met);
    free(tt->mail);
    free(tt->spans);
    free(tt->segs);
    free(tt->n_segs);
    free(tt->rows);
    free(tt->n_rows);
    free(tt->sources);
    free(tt);
}

brg_status transport_threads_create(int n_devices, transport **out) {
    threads_transport *tt = calloc(1, sizeof *tt);
    if (!tt) return brg_error(BRG_ERR_OOM, "cannot allocate the transport");
    tt->base = (transport){n_devices, th_send, th_recv, th_release, th_all_reduce, th_broadcast,
                           th_barrier, th_abort, th_failure, th_reset, th_destroy, 0, 1, NULL, th_reduce_scatter};
    pthread_mutex_init(&tt->lock, NULL);
    pthread_cond_init(&tt->met, NULL);
    transport_failure_clear(&tt->fail);
    tt->mail = calloc((size_t)n_devices, sizeof *tt->mail);
    tt->spans = calloc((size_t)n_devices, sizeof *tt->spans);
    tt->segs = calloc((size_t)n_devices, sizeof *tt->segs);
    tt->n_segs = calloc((size_t)n_devices, sizeof *tt->n_segs);
    tt->rows = calloc((size_t)n_devices, sizeof *tt->rows);
    tt->n_rows = calloc((size_t)n_devices, sizeof *tt->n_rows);
    tt->sources = calloc((size_t)n_devices * (size_t)n_devices, sizeof *tt->sources);
    brg_status st = tt->mail && tt->spans && tt->segs && tt->n_segs && tt->rows && tt->n_rows && tt->sources
                        ? BRG_OK
                        : brg_error(BRG_ERR_OOM, "cannot allocate the transport of %d devices", n_devices);
    for (int d = 0; st == BRG_OK && d < n_devices; d++) st = channel_init(&tt->mail[d], 16, &tt->fail.aborted);
    if (st != BRG_OK) {
        th_destroy(&tt->base);
        return st;
    }
    *out = &tt->base;
    return BRG_OK;
}
