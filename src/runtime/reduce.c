/* Gradients across devices: every copy of a parameter (its replicas, and a tied weight's
 * copies on different stages) ends up with the sum over all copies (with shard_gradients, each
 * replica's copies over their shard only), added in device order by the transport so the result
 * never depends on timing; norms, scaling and zeroing on each device's own copies; the run
 * itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "runtime_internal.h"

static bool scatters(const brg_runtime *rt) { return rt->opts.shard_gradients && rt->opts.replicas > 1; }

/* One collective per device over its flat gradient span: the transport adds each parameter's
 * copies in device order. */
static brg_status reduce_job(brg_device *dev, void *arg) {
    (void)arg;
    if (scatters(dev->rt)) return runtime_reduce_scatter(dev);
    transport *t = dev->rt->transport;
    return t->all_reduce(t, dev->id, dev->grad_span, dev->segs, dev->n_segs);
}

brg_status reduce_gradients(brg_runtime *rt) { return brg_runtime_each_device(rt, reduce_job, NULL); }

/* The parts [*k0, *k1) of parameter p whose squares device d sums: those whose reduced gradient
 * it holds and stands for. Every copy holds the whole reduced gradient, so the parts are shared
 * out among p's holders in device order (replicas each sum their share, where the first holder
 * used to sum them all); with shard_gradients, its replica's shard on the copy that sums it. A
 * part's sum is the same wherever it is taken, and the parts are added in one order, so the norm
 * keeps its bits. */
static void norm_parts(const brg_runtime *rt, int d, int p, int *k0, int *k1) {
    *k0 = *k1 = 0;
    if (!scatters(rt)) {
        if (!rt->devices[d].holds[p]) return;
        int holders = 0, rank = 0;
        for (int e = 0; e < rt->n_devices; e++)
            if (rt->devices[e].holds[p]) rank += e < d, holders++;
        brg_shard_parts(rank, holders, k0, k1);
        return;
    }
    const int r = rt->devices[d].replica;
    if (runtime_shard_source(rt, p, r) == d) brg_shard_parts(r, rt->opts.replicas, k0, k1);
}

typedef struct sq_norm_work {
    brg_device *dev;
    double *partial;
    int64_t elements; /* of the parts the device sums */
} sq_norm_work;

/* Slice i of n of the device's parts, cut by elements: partial[p * BRG_SHARD_PARTS + k], the sum
 * of squares of part k of parameter p, for the parts whose first element falls in the slice. */
static void sq_norm_slice(void *ctx, int i, int n) {
    const sq_norm_work *w = ctx;
    const brg_runtime *rt = w->dev->rt;
    int64_t lo, hi, at = 0;
    brg_team_slice(w->elements, 1, i, n, &lo, &hi);
    for (int p = 0; p < rt->model->n_params && at < hi; p++) {
        int k0, k1;
        norm_parts(rt, w->dev->id, p, &k0, &k1);
        const brg_tensor *t = w->dev->view.params[p].tensor;
        for (int k = k0; k < k1; k++) {
            int64_t first, count;
            brg_shard_part_range(brg_tensor_numel(t), k, &first, &count);
            if (at >= lo && at < hi)
                w->partial[(size_t)p * BRG_SHARD_PARTS + (size_t)k] =
                    w->dev->backend->f32->sum_squares(t->grad + first, count);
            at += count;
        }
    }
}

/* The device's parts, shared out over its team whatever their size (by whole parts, so each sum
 * is what one thread alone gives). */
static brg_status sq_norm_job(brg_device *dev, void *arg) {
    sq_norm_work w = {dev, arg, 0};
    const brg_runtime *rt = dev->rt;
    for (int p = 0; p < rt->model->n_params; p++) {
        int k0, k1;
        norm_parts(rt, dev->id, p, &k0, &k1);
        if (k1 <= k0) continue;
        const int64_t n = brg_tensor_numel(dev->view.params[p].tensor);
        int64_t first, end, unused;
        brg_shard_part_range(n, k0, &first, &unused);
        brg_shard_part_range(n, k1, &end, &unused); /* part k1's first element ends [k0, k1) */
        w.elements += end - first;
    }
    if (!brg_team_run(sq_norm_slice, &w)) sq_norm_slice(&w, 0, 1);
    return BRG_OK;
}

/* Device d's partial sums, for runtime_share. */
static int partial_parts(brg_runtime *rt, int d, void *ctx, host_part *parts, int cap) {
    double *partial = ctx;
    int n = 0;
    for (int p = 0; p < rt->model->n_params; p++) {
        int k0, k1;
        norm_parts(rt, d, p, &k0, &k1);
        if (k1 <= k0) continue;
        if (n < cap)
            parts[n] = (host_part){partial + (size_t)p * BRG_SHARD_PARTS + (size_t)k0,
                                   (size_t)(k1 - k0) * sizeof *partial};
        n++;
    }
    return n;
}

brg_status brg_runtime_grad_sq_norm(brg_runtime *rt, double *out) {
    const size_t n = (size_t)rt->model->n_params * BRG_SHARD_PARTS;
    if (!rt->norm_parts && !(rt->norm_parts = malloc((n ? n : 1) * sizeof *rt->norm_parts)))
        return brg_error(BRG_ERR_OOM, "cannot allocate the norm's partial sums");
    double *partial = rt->norm_parts;
    memset(partial, 0, n * sizeof *partial);
    brg_status st = brg_runtime_each_device(rt, sq_norm_job, partial);
    if (st == BRG_OK) st = runtime_share(rt, partial_parts, partial); /* other ranks' devices' */
    *out = 0;
    for (size_t i = 0; i < n; i++) *out += partial[i];
    return st;
}

typedef struct grad_op {
    float factor;
    bool zero;
} grad_op;

static brg_status grad_job(brg_device *dev, void *arg) {
    const grad_op *op = arg;
    for (int p = 0; p < dev->rt->model->n_params; p++) {
        if (!dev->holds[p]) continue;
        brg_tensor *t = dev->view.params[p].tensor;
        int64_t n = brg_tensor_numel(t);
        if (op->zero) t->grad_zero_pending = true; /* cleared by the next run (see runtime.h) */
        else dev->backend->f32->scale(t->grad, t->grad, op->factor, n);
    }
    return BRG_OK;
}

brg_status brg_runtime_scale_grads(brg_runtime *rt, float factor) {
    grad_op op = {factor, false};
    return brg_runtime_each_device(rt, grad_job, &op);
}

brg_status brg_runtime_zero_grads(brg_runtime *rt) {
    grad_op op = {0.0f, true};
    return brg_runtime_each_device(rt, grad_job, &op);
}

brg_status brg_runtime_infer(brg_runtime *rt, const brg_micro_batch *mbs, const brg_loss_items *denominators,
                             float **logits, float *losses) {
    if (rt->opts.training) return brg_error(BRG_ERR_INVALID_ARG, "brg_runtime_infer needs a runtime made for inference");
    rt->logits = logits;
    brg_status st = brg_runtime_run(rt, mbs, denominators, 0, losses);
    rt->logits = NULL;
    return st;
}

brg_status brg_runtime_infer_collect(brg_runtime *rt, const brg_micro_batch *mbs, const int64_t *first_rows,
                                     int64_t rows, const brg_loss_items *denominators, brg_arena *host,
                                     brg_tensor **logits, float *losses) {
    if (rt->opts.training)
        return brg_error(BRG_ERR_INVALID_ARG, "brg_runtime_infer_collect needs a runtime made for inference");
    if (!first_rows || !host || !logits || rows < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "brg_runtime_infer_collect needs the micro-batches' rows, a host arena "
                                              "and somewhere to put the logits");
    *logits = NULL;
    rt->collect_rows = first_rows;
    rt->collect_total = rows;
    rt->collect_arena = host;
    rt->collect_out = logits;
    brg_status st = brg_runtime_run(rt, mbs, denominators, 0, losses);
    rt->collect_out = NULL;
    rt->collect_rows = NULL;
    rt->collect_arena = NULL;
    if (st == BRG_OK && !*logits) st = brg_error(BRG_ERR_INTERNAL, "the pipeline's last stage gave no logits");
    if (st != BRG_OK) *logits = NULL;
    return st;
}

brg_status brg_runtime_run(brg_runtime *rt, const brg_micro_batch *mbs, const brg_loss_items *denominators,
                           uint64_t seed, float *losses) {
    rt->mbs = mbs;
    rt->denominators = denominators ? *denominators : (brg_loss_items){0, 0};
    rt->seed = seed;
    rt->losses = losses;
    double t0 = runtime_now();
    brg_status st = brg_runtime_each_device(rt, executor_run_device, NULL);
    rt->schedule_seconds += runtime_now() - t0;
    if (st == BRG_OK) st = runtime_share_run(rt); /* losses and logits from other ranks' last stages */
    if (st == BRG_OK && rt->opts.training) st = reduce_gradients(rt);
    return st;
}

void brg_runtime_set_loss_scale(brg_runtime *rt, float scale) { rt->loss_scale = scale; }
