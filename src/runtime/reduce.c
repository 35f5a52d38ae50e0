/* Gradients across devices: every copy of a parameter (its replicas, and a tied weight's
 * copies on different stages) ends up with the sum over all copies, added in device order so
 * the result never depends on thread timing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "runtime_internal.h"

/* Parameter p is reduced by device p mod n: the devices split the work, and each parameter's
 * sum still runs over its copies in device order. */
static void reduce_param(brg_runtime *rt, int p) {
    float *acc = NULL;
    int64_t n = brg_tensor_numel(rt->model->params[p].tensor);
    for (int d = 0; d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        if (!dev->holds[p]) continue;
        float *g = dev->view.params[p].tensor->grad;
        if (!acc) {
            acc = g;
            continue;
        }
        for (int64_t i = 0; i < n; i++) acc[i] += g[i];
    }
    for (int d = 0; acc && d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        float *g = dev->holds[p] ? dev->view.params[p].tensor->grad : NULL;
        if (g && g != acc) memcpy(g, acc, (size_t)n * sizeof *g);
    }
}

static brg_status reduce_job(brg_device *dev, void *arg) {
    (void)arg;
    brg_runtime *rt = dev->rt;
    for (int p = dev->id; p < rt->model->n_params; p += rt->n_devices) reduce_param(rt, p);
    return BRG_OK;
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

/* The owner's copy: replica 0, on the stage of the block that owns the parameter. */
static brg_tensor *owner_copy(const brg_runtime *rt, int p) {
    int stage = rt->block_stage[rt->model->params[p].block];
    return rt->devices[stage].view.params[p].tensor;
}

void brg_runtime_sync_to_model(brg_runtime *rt) {
    for (int p = 0; p < rt->model->n_params; p++) {
        brg_tensor *dst = rt->model->params[p].tensor;
        memcpy(dst->data, owner_copy(rt, p)->data, brg_tensor_nbytes(dst));
    }
}

void brg_runtime_sync_from_model(brg_runtime *rt) {
    for (int d = 0; d < rt->n_devices; d++)
        for (int p = 0; p < rt->model->n_params; p++)
            if (rt->devices[d].holds[p]) {
                brg_tensor *dst = rt->devices[d].view.params[p].tensor;
                memcpy(dst->data, rt->model->params[p].tensor->data, brg_tensor_nbytes(dst));
            }
}

brg_status brg_runtime_infer(brg_runtime *rt, const brg_micro_batch *mbs, const brg_loss_items *denominators,
                             float **logits, float *losses) {
    if (rt->opts.training) return brg_error(BRG_ERR_INVALID_ARG, "brg_runtime_infer needs a runtime made for inference");
    rt->logits = logits;
    brg_status st = brg_runtime_run(rt, mbs, denominators, 0, losses);
    rt->logits = NULL;
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
    if (st == BRG_OK && rt->opts.training) st = reduce_gradients(rt);
    for (int d = 0; d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        for (int i = 0; i < dev->n_tapes; i++) brg_tape_clear(dev->tapes[i]);
        for (int s = 0; s < dev->n_slots; s++) {
            brg_arena_reset(dev->slots[s], 0);
            dev->slot_busy[s] = false;
        }
        brg_arena_reset(dev->arena, dev->run_mark);
    }
    return st;
}
