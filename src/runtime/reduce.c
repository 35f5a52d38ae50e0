/* Gradients across devices: every copy of a parameter (its replicas, and a tied weight's
 * copies on different stages) ends up with the sum over all copies, added in device order by
 * the transport's all-reduce so the result never depends on thread timing; norms, scaling and
 * zeroing on each device's own copies; the run itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "runtime_internal.h"

/* One collective per device over its flat gradient span: the transport adds each parameter's
 * copies in device order. */
static brg_status reduce_job(brg_device *dev, void *arg) {
    (void)arg;
    transport *t = dev->rt->transport;
    return t->all_reduce(t, dev->id, dev->grad_span, dev->segs, dev->n_segs);
}

brg_status reduce_gradients(brg_runtime *rt) { return brg_runtime_each_device(rt, reduce_job, NULL); }

/* The copy that stands for parameter p: the first device holding it. */
static int first_holder(const brg_runtime *rt, int p) {
    for (int d = 0; d < rt->n_devices; d++)
        if (rt->devices[d].holds[p]) return d;
    return -1;
}

/* Each device sums the squares of the parameters it stands for; the host adds the partial sums
 * in device order, so the norm does not depend on timing. */
/* Device d's partial sum, for runtime_share. */
static int partial_part(brg_runtime *rt, int d, void *ctx, host_part *parts, int cap) {
    (void)rt;
    if (cap > 0) parts[0] = (host_part){(double *)ctx + d, sizeof(double)};
    return 1;
}

static brg_status sq_norm_job(brg_device *dev, void *arg) {
    double *partial = arg;
    brg_runtime *rt = dev->rt;
    double sum = 0;
    for (int p = 0; p < rt->model->n_params; p++) {
        if (first_holder(rt, p) != dev->id) continue;
        sum += brg_simd_sum_squares(dev->view.params[p].tensor->grad, brg_tensor_numel(dev->view.params[p].tensor));
    }
    partial[dev->id] = sum;
    return BRG_OK;
}

brg_status brg_runtime_grad_sq_norm(brg_runtime *rt, double *out) {
    double *partial = calloc((size_t)rt->n_devices, sizeof *partial);
    if (!partial) return brg_error(BRG_ERR_OOM, "cannot allocate the norm's partial sums");
    brg_status st = brg_runtime_each_device(rt, sq_norm_job, partial);
    if (st == BRG_OK) st = runtime_share(rt, partial_part, partial); /* other ranks' devices' */
    *out = 0;
    for (int d = 0; d < rt->n_devices; d++) *out += partial[d];
    free(partial);
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
        else
            for (int64_t i = 0; i < n; i++) t->grad[i] *= op->factor;
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
