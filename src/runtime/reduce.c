/* Gradients across devices: every copy of a parameter (its replicas, and a tied weight's
 * copies on different stages) ends up with the sum over all copies, added in device order so
 * the result never depends on thread timing. */
#include <math.h>
#include <string.h>

#include "runtime_internal.h"

void reduce_gradients(brg_runtime *rt) {
    const brg_model *m = rt->model;
    for (int p = 0; p < m->n_params; p++) {
        float *acc = NULL;
        int64_t n = brg_tensor_numel(m->params[p].tensor);
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
}

/* The copy that stands for parameter p: the first device holding it. */
static brg_tensor *first_copy(const brg_runtime *rt, int p) {
    for (int d = 0; d < rt->n_devices; d++)
        if (rt->devices[d].holds[p]) return rt->devices[d].view.params[p].tensor;
    return NULL;
}

double brg_runtime_grad_sq_norm(const brg_runtime *rt) {
    double sum = 0;
    for (int p = 0; p < rt->model->n_params; p++) {
        const brg_tensor *t = first_copy(rt, p);
        int64_t n = brg_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) sum += (double)t->grad[i] * (double)t->grad[i];
    }
    return sum;
}

static void for_each_grad(brg_runtime *rt, float factor, bool zero) {
    for (int d = 0; d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        for (int p = 0; p < rt->model->n_params; p++) {
            if (!dev->holds[p]) continue;
            brg_tensor *t = dev->view.params[p].tensor;
            int64_t n = brg_tensor_numel(t);
            if (zero) memset(t->grad, 0, (size_t)n * sizeof *t->grad);
            else
                for (int64_t i = 0; i < n; i++) t->grad[i] *= factor;
        }
    }
}

void brg_runtime_scale_grads(brg_runtime *rt, float factor) { for_each_grad(rt, factor, false); }
void brg_runtime_zero_grads(brg_runtime *rt) { for_each_grad(rt, 0.0f, true); }

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
    brg_status st = brg_runtime_each_device(rt, executor_run_device, NULL);
    if (st == BRG_OK && rt->opts.training) reduce_gradients(rt);
    for (int d = 0; d < rt->n_devices; d++) {
        brg_device *dev = &rt->devices[d];
        for (int i = 0; i < dev->n_tapes; i++) brg_tape_clear(dev->tapes[i]);
        brg_arena_reset(dev->arena, dev->run_mark);
    }
    return st;
}
