/* A runtime whose devices are spread over ranks (mpirun). Every rank runs the same host code
 * over the same layout; each creates, starts and runs only its own devices, and keeps for the
 * others what they hold (for the owner and holder lookups). What the host reads from the devices
 * (losses, the gradient norm's partial sums, collected logits, statistics) is filled on the rank
 * of the device that computed it, then shared: the first device of each rank sends its rank's
 * parts to the first device of every other rank, so every host goes on with the same values and
 * takes the same decisions. */
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

brg_status runtime_init_remote_device(brg_device *dev) {
    const brg_model *m = dev->rt->model;
    dev->view = *m;
    dev->view.params = calloc((size_t)m->n_params, sizeof *dev->view.params);
    dev->holds = calloc((size_t)m->n_params, sizeof *dev->holds);
    if (!dev->view.params || !dev->holds) return brg_error(BRG_ERR_OOM, "cannot allocate device %d", dev->id);
    for (int p = 0; p < m->n_params; p++) {
        dev->view.params[p] = m->params[p];
        dev->view.params[p].tensor = NULL;
        for (int b = dev->first_block; b <= dev->last_block; b++) dev->holds[p] |= brg_model_block_uses(m, b, p);
    }
    return BRG_OK;
}

static int first_of_rank(const brg_runtime *rt, int rank) {
    for (int d = 0; d < rt->n_devices; d++)
        if (rt->transport->device_rank[d] == rank) return d;
    return -1;
}

/* ---- sharing host memory ---- */

typedef struct share {
    host_parts_fn fn;
    void *ctx;
} share;

/* Rank r's parts, its devices in order, as one bundle of byte tensors (views of host memory). */
static brg_status rank_parts(brg_runtime *rt, const share *sh, int rank, brg_named_tensor **items, brg_tensor **views,
                             int *n) {
    int total = 0;
    for (int d = 0; d < rt->n_devices; d++)
        if (rt->transport->device_rank[d] == rank) total += sh->fn(rt, d, sh->ctx, NULL, 0);
    host_part *parts = calloc((size_t)(total ? total : 1), sizeof *parts);
    *items = calloc((size_t)(total ? total : 1), sizeof **items);
    *views = calloc((size_t)(total ? total : 1), sizeof **views);
    int k = 0;
    brg_status st = parts && *items && *views ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot list rank %d's host values", rank);
    for (int d = 0; st == BRG_OK && d < rt->n_devices; d++)
        if (rt->transport->device_rank[d] == rank) k += sh->fn(rt, d, sh->ctx, parts + k, total - k);
    if (st == BRG_OK && k != total) st = brg_error(BRG_ERR_INTERNAL, "rank %d's host values changed while listed", rank);
    for (int i = 0; st == BRG_OK && i < k; i++) {
        int64_t bytes = (int64_t)parts[i].bytes;
        (*views)[i] = brg_tensor_wrap(BRG_DTYPE_BOOL, 1, &bytes, parts[i].data);
        (*items)[i] = (brg_named_tensor){"part", &(*views)[i]};
    }
    free(parts);
    if (st != BRG_OK) {
        free(*items), free(*views);
        *items = NULL, *views = NULL;
    }
    *n = k;
    return st;
}

static brg_status share_job(brg_device *dev, void *arg) {
    brg_runtime *rt = dev->rt;
    transport *t = rt->transport;
    if (first_of_rank(rt, t->rank) != dev->id) return BRG_OK; /* one device speaks for its rank */
    brg_named_tensor *items = NULL;
    brg_tensor *views = NULL;
    int n = 0;
    brg_status st = rank_parts(rt, arg, t->rank, &items, &views, &n);
    for (int r = 0; st == BRG_OK && r < t->n_ranks; r++)
        if (r != t->rank) st = t->send(t, dev->id, first_of_rank(rt, r), TRANSPORT_TAG_SHARE, items, n);
    free(items);
    free(views);
    for (int r = 0; st == BRG_OK && r < t->n_ranks; r++) {
        if (r == t->rank) continue;
        if ((st = rank_parts(rt, arg, r, &items, &views, &n)) != BRG_OK) break;
        const int from = first_of_rank(rt, r);
        transport_msg m;
        if ((st = t->recv(t, dev->id, from, TRANSPORT_TAG_SHARE, &m)) == BRG_OK) {
            if (m.n != n) st = brg_error(BRG_ERR_INTERNAL, "rank %d shared %d host values, rank %d expects %d", r, m.n, t->rank, n);
            for (int i = 0; st == BRG_OK && i < n; i++) st = brg_tensor_copy(&views[i], m.items[i].tensor);
            t->release(t, dev->id, &m);
        }
        free(items);
        free(views);
    }
    return st;
}

brg_status runtime_share(brg_runtime *rt, host_parts_fn fn, void *ctx) {
    if (rt->transport->n_ranks <= 1) return BRG_OK;
    share sh = {fn, ctx};
    return brg_runtime_each_device(rt, share_job, &sh);
}

/* ---- after a run ---- */

typedef struct device_stats {
    double busy;
    uint64_t peak, activation_peak, micro_batch_peak;
} device_stats;

/* The shape of the logits collected on a rank (ndim -1: none there). */
typedef struct logits_head {
    int64_t dtype, ndim, shape[BRG_MAX_DIMS];
} logits_head;

typedef struct run_share {
    device_stats *stats;  /* [n_devices] */
    logits_head *heads;   /* [n_ranks], when collecting */
} run_share;

static bool last_stage(const brg_runtime *rt, int d) { return d % rt->opts.stages == rt->opts.stages - 1; }

static int put(host_part *parts, int cap, int k, void *data, size_t bytes) {
    if (k < cap) parts[k] = (host_part){data, bytes};
    return k + 1;
}

static int run_parts(brg_runtime *rt, int d, void *ctx, host_part *parts, int cap) {
    run_share *rs = ctx;
    int k = put(parts, cap, 0, &rs->stats[d], sizeof rs->stats[d]);
    const int M = rt->opts.micro_batches;
    if (rt->losses && last_stage(rt, d)) k = put(parts, cap, k, &rt->losses[d / rt->opts.stages * M], (size_t)M * sizeof(float));
    const int rank = rt->transport->device_rank[d];
    if (rs->heads && first_of_rank(rt, rank) == d) k = put(parts, cap, k, &rs->heads[rank], sizeof rs->heads[rank]);
    return k;
}

/* The rows each last stage copied into its rank's collected logits. */
static int row_parts(brg_runtime *rt, int d, void *ctx, host_part *parts, int cap) {
    const brg_tensor *all = ctx;
    if (!last_stage(rt, d)) return 0;
    const int M = rt->opts.micro_batches;
    const size_t row_bytes = brg_tensor_nbytes(all) / (size_t)all->shape[0];
    int k = 0;
    for (int mb = 0; mb < M; mb++) {
        const int g = d / rt->opts.stages * M + mb;
        const int64_t rows = brg_tensor_map_rows(&rt->mbs[g]);
        k = put(parts, cap, k, (char *)all->data + (size_t)rt->collect_rows[g] * row_bytes, (size_t)rows * row_bytes);
    }
    return k;
}

/* Every rank holds the collected logits' tensor, of the shape the ranks with a last stage gave. */
static brg_status agree_logits(brg_runtime *rt, const logits_head *heads) {
    const logits_head *h = NULL;
    for (int r = 0; r < rt->transport->n_ranks; r++) {
        if (heads[r].ndim < 0) continue;
        if (h && memcmp(h, &heads[r], sizeof *h) != 0)
            return brg_error(BRG_ERR_INTERNAL, "the ranks' last stages gave logits of different shapes");
        h = &heads[r];
    }
    if (!h) return BRG_OK; /* none: brg_runtime_infer_collect says so */
    if (h->ndim < 1 || h->ndim > BRG_MAX_DIMS || h->dtype < 0 || h->dtype >= BRG_DTYPE_COUNT || h->shape[0] != rt->collect_total)
        return brg_error(BRG_ERR_INTERNAL, "a rank shared logits of a shape that cannot be the batch's");
    if (!*rt->collect_out)
        BRG_TRY(brg_tensor_new(rt->collect_arena, (brg_dtype)h->dtype, (int)h->ndim, h->shape, "logits", rt->collect_out));
    return runtime_share(rt, row_parts, *rt->collect_out);
}

brg_status runtime_share_run(brg_runtime *rt) {
    transport *t = rt->transport;
    if (t->n_ranks <= 1) return BRG_OK;
    if (rt->logits)
        return brg_error(BRG_ERR_UNSUPPORTED, "logits into caller buffers are not gathered across ranks: collect them "
                                              "(brg_runtime_infer_collect)");
    run_share rs = {calloc((size_t)rt->n_devices, sizeof *rs.stats),
                    rt->collect_out ? calloc((size_t)t->n_ranks, sizeof *rs.heads) : NULL};
    brg_status st = rs.stats && (rs.heads || !rt->collect_out) ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot share a run");
    for (int d = 0; st == BRG_OK && d < rt->n_devices; d++) {
        const brg_device *dev = &rt->devices[d];
        if (transport_is_local(t, d))
            rs.stats[d] = (device_stats){dev->busy_seconds, brg_arena_peak(dev->arena), dev->activation_peak,
                                         dev->micro_batch_peak};
    }
    if (st == BRG_OK && rs.heads) {
        for (int r = 0; r < t->n_ranks; r++) rs.heads[r].ndim = -1;
        const brg_tensor *mine = *rt->collect_out;
        if (mine) {
            rs.heads[t->rank] = (logits_head){mine->dtype, mine->ndim, {0}};
            memcpy(rs.heads[t->rank].shape, mine->shape, (size_t)mine->ndim * sizeof *mine->shape);
        }
    }
    if (st == BRG_OK) st = runtime_share(rt, run_parts, &rs);
    for (int d = 0; st == BRG_OK && d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        if (transport_is_local(t, d)) continue;
        dev->busy_seconds = rs.stats[d].busy;
        dev->remote_peak = (size_t)rs.stats[d].peak;
        dev->activation_peak = (size_t)rs.stats[d].activation_peak;
        dev->micro_batch_peak = (size_t)rs.stats[d].micro_batch_peak;
    }
    if (st == BRG_OK && rs.heads) st = agree_logits(rt, rs.heads);
    free(rs.stats);
    free(rs.heads);
    return st;
}

/* ---- a host decision ---- */

static int flag_parts(brg_runtime *rt, int d, void *ctx, host_part *parts, int cap) {
    (void)rt;
    return d == 0 ? put(parts, cap, 0, ctx, 1) : 0;
}

brg_status brg_runtime_host_flag(brg_runtime *rt, bool *flag) {
    unsigned char v = *flag;
    BRG_TRY(runtime_share(rt, flag_parts, &v));
    *flag = v != 0;
    return BRG_OK;
}

int brg_runtime_ranks(const brg_runtime *rt, int *rank) {
    if (rank) *rank = rt->transport->n_ranks > 1 ? rt->transport->rank : 0;
    return rt->transport->n_ranks > 1 ? rt->transport->n_ranks : 1;
}
