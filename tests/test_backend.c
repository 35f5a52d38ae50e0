/* Devices compute through their backend: a backend that wraps the CPU's and counts what it is
 * asked to do (allocate, copy, run kernels) trains a pipelined tiny GPT-2 to the CPU's bits,
 * and every part of a step reaches it: the ops' forward and backward kernels, the stages'
 * gradient hand-back, the gradient norm, the clipping scale, the optimizer's update, the
 * parameter copies and the arenas' memory. A backend whose product kernel is broken on purpose
 * changes the result, so the ops cannot be reaching the CPU's kernels some other way. */
#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "kernels/backend.h"
#include "trainer_util.h"

enum { ROWS = 8, T = 8, VOCAB = 37, MAX_PARAMS = 64 };

/* ---- a counting backend ---- */

static struct {
    long alloc, copy_to_device, copy_other;
    long linear_fwd, linear_bwd, attention_fwd, attention_bwd, layernorm_bwd, accumulate, sum_squares, scale,
        optimizer_update, widen, narrow;
} calls;

static const brg_kernels *cpu_k(void) { return brg_backend_cpu()->f32; }

static void *count_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    calls.alloc++;
    return brg_backend_cpu()->allocator.alloc_zeroed(brg_backend_cpu()->allocator.ctx, bytes);
}
static void count_release(void *ctx, void *p) {
    (void)ctx;
    brg_backend_cpu()->allocator.release(brg_backend_cpu()->allocator.ctx, p);
}
static void count_copy(void *dst, const void *src, size_t bytes, brg_copy_kind kind) {
    if (kind == BRG_COPY_TO_DEVICE) calls.copy_to_device++;
    else calls.copy_other++;
    brg_backend_cpu()->copy(dst, src, bytes, kind);
}
static void count_linear_fwd(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                             int64_t out, bool w_in_out) {
    calls.linear_fwd++;
    cpu_k()->linear_fwd(y, x, w, b, n, in, out, w_in_out);
}
static void count_linear_bwd(float *dx, bool dx_overwrite, float *dw, bool dw_overwrite, float *db, const float *dy,
                             const float *x,
                             const float *w, int64_t n, int64_t in, int64_t out, bool w_in_out) {
    calls.linear_bwd++;
    cpu_k()->linear_bwd(dx, dx_overwrite, dw, dw_overwrite, db, dy, x, w, n, in, out, w_in_out);
}
static void count_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                                const brg_attn_args *args) {
    calls.attention_fwd++;
    cpu_k()->attention_fwd(out, lse, q, k, v, args);
}
static void count_attention_bwd(float *dq, float *dk, float *dv, float *dbias, const float *dout, const float *out,
                                const float *lse, const float *q, const float *k, const float *v,
                                const brg_attn_args *args) {
    calls.attention_bwd++;
    cpu_k()->attention_bwd(dq, dk, dv, dbias, dout, out, lse, q, k, v, args);
}
static void count_layernorm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                                const float *gamma, const float *mean, const float *rstd, int64_t n, int64_t c) {
    calls.layernorm_bwd++;
    cpu_k()->layernorm_bwd(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, n, c);
}
static void count_accumulate(float *dx, bool overwrite, const float *dy, int64_t n) {
    calls.accumulate++;
    cpu_k()->accumulate(dx, overwrite, dy, n);
}
static double count_sum_squares(const float *x, int64_t n) {
    calls.sum_squares++;
    return cpu_k()->sum_squares(x, n);
}
static void count_scale(float *y, const float *x, float s, int64_t n) {
    calls.scale++;
    cpu_k()->scale(y, x, s, n);
}
static void count_optimizer_update(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t) {
    calls.optimizer_update++;
    cpu_k()->optimizer_update(c, s, lr, t);
}

static void count_widen(float *dst, const void *src, brg_dtype type, int64_t n) {
    calls.widen++;
    cpu_k()->widen(dst, src, type, n);
}
static void count_narrow(void *dst, const float *src, brg_dtype type, int64_t n) {
    calls.narrow++;
    cpu_k()->narrow(dst, src, type, n);
}

static brg_kernels counting_kernels;
static brg_backend counting;

static void make_counting_backend(void) {
    counting_kernels = *cpu_k();
    counting_kernels.linear_fwd = count_linear_fwd;
    counting_kernels.linear_bwd = count_linear_bwd;
    counting_kernels.attention_fwd = count_attention_fwd;
    counting_kernels.attention_bwd = count_attention_bwd;
    counting_kernels.layernorm_bwd = count_layernorm_bwd;
    counting_kernels.accumulate = count_accumulate;
    counting_kernels.sum_squares = count_sum_squares;
    counting_kernels.scale = count_scale;
    counting_kernels.optimizer_update = count_optimizer_update;
    counting_kernels.widen = count_widen;
    counting_kernels.narrow = count_narrow;
    counting = (brg_backend){.name = "counting", .allocator = {count_alloc, count_release, NULL}, .copy = count_copy,
                             .f32 = &counting_kernels};
}

/* The CPU's kernels but a product that adds one to every output. */
static void off_by_one_linear_fwd(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                                  int64_t out, bool w_in_out) {
    cpu_k()->linear_fwd(y, x, w, b, n, in, out, w_in_out);
    for (int64_t i = 0; i < n * out; i++) y[i] += 1.0f;
}

/* ---- the model and its data ---- */

static brg_model *tiny_gpt2(void) { return tu_tiny_gpt2(VOCAB); }

typedef struct data {
    int32_t ids[ROWS * T];
    brg_tensor t_ids[2];
    brg_micro_batch mbs[2];
    brg_loss_items denom;
} data;

static void make_data(brg_model *m, data *d) {
    brg_rng rng;
    brg_rng_seed(&rng, 1);
    for (int i = 0; i < ROWS * T; i++) d->ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
    const int64_t shape[2] = {ROWS / 2, T};
    for (int k = 0; k < 2; k++) {
        d->t_ids[k] = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, d->ids + k * ROWS / 2 * T);
        /* labels are the ids (the model shifts them) */
        d->mbs[k] = TEST_MAP("input_ids", &d->t_ids[k], "labels", &d->t_ids[k]);
    }
    brg_tensor all = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){ROWS, T}, d->ids);
    brg_tensor_map whole = TEST_MAP("labels", &all);
    d->denom = brg_model_count_loss_items(m, &whole);
}

typedef struct step {
    double loss, sq_norm;
    float *weights[MAX_PARAMS]; /* after clipping and one AdamW step */
} step;

/* Forward and backward over 2 stages, the norm, a clipping scale and an AdamW step on every
 * device, all with `backend` (NULL: the default); the updated weights come back to the host. */
static void run_step_as(const data *d, const brg_backend *backend, brg_dtype activations, step *out) {
    brg_model *m = tiny_gpt2();
    if (!m) return;
    const int block_stage[4] = {0, 0, 1, 1};
    brg_runtime_options o = {.replicas = 1, .stages = 2, .block_stage = block_stage, .micro_batches = 2,
                             .schedule = BRG_SCHEDULE_1F1B, .training = true, .backend = backend,
                             .activation_dtype = activations};
    brg_runtime *rt = NULL;
    float losses[2] = {0};
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    if (!rt) {
        brg_model_destroy(m);
        return;
    }
    CHECK_OK(brg_runtime_run(rt, d->mbs, &d->denom, 7, losses));
    out->loss = (double)losses[0] + losses[1];
    CHECK_OK(brg_runtime_grad_sq_norm(rt, &out->sq_norm));
    CHECK_OK(brg_runtime_scale_grads(rt, 0.5f));
    const brg_optimizer_config cfg = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    for (int dv = 0; dv < brg_runtime_device_count(rt); dv++) {
        brg_device *dev = brg_runtime_device(rt, dv);
        brg_device_info info;
        brg_device_get_info(dev, &info);
        CHECK(brg_device_backend(dev) == (backend ? backend : brg_backend_cpu()));
        brg_optimizer *opt = NULL;
        CHECK_OK(brg_optimizer_create(&cfg, brg_device_arena(dev), &opt));
        if (!opt) continue;
        brg_optimizer_set_backend(opt, brg_device_backend(dev));
        for (int p = 0; p < m->n_params; p++) {
            brg_tensor *t = info.view->params[p].tensor;
            if (info.holds[p])
                CHECK_OK(brg_optimizer_add_param(opt, t->data, t->grad, brg_tensor_numel(t), true, m->params[p].name));
        }
        CHECK_OK(brg_optimizer_step(opt, 1e-2f));
        brg_optimizer_destroy(opt);
    }
    CHECK_OK(brg_runtime_sync_to_model(rt));
    for (int p = 0; p < m->n_params; p++) {
        size_t bytes = brg_tensor_nbytes(m->params[p].tensor);
        out->weights[p] = malloc(bytes);
        memcpy(out->weights[p], m->params[p].tensor->data, bytes);
    }
    out->weights[m->n_params] = NULL;
    brg_runtime_destroy(rt);
    brg_model_destroy(m);
}

static void run_step(const data *d, const brg_backend *backend, step *out) {
    run_step_as(d, backend, BRG_DTYPE_F32, out);
}

static bool same_weights(const step *a, const step *b) {
    brg_model *m = tiny_gpt2();
    bool same = m != NULL;
    for (int p = 0; m && p < m->n_params; p++)
        same &= a->weights[p] && b->weights[p] &&
                memcmp(a->weights[p], b->weights[p], brg_tensor_nbytes(m->params[p].tensor)) == 0;
    brg_model_destroy(m);
    return same;
}

static void free_step(step *s) {
    for (int p = 0; p < MAX_PARAMS && s->weights[p]; p++) free(s->weights[p]);
}

/* The CPU fills every slot of its fp32 table (the table is all function pointers). */
static void check_cpu_table_full(void) {
    const brg_kernels *k = cpu_k();
    const size_t n = sizeof *k / sizeof(void (*)(void));
    int empty = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t slot;
        memcpy(&slot, (const char *)k + i * sizeof slot, sizeof slot);
        empty += slot == 0;
    }
    CHECK_MSG(empty == 0 && n > 50, "%d of the CPU table's %zu kernels are missing", empty, n);
}

int main(void) {
    CHECK(strcmp(brg_backend_name(brg_backend_cpu()), "cpu") == 0);
    check_cpu_table_full();
    make_counting_backend();
    brg_model *m = tiny_gpt2();
    if (!m) return test_finish();
    data d;
    make_data(m, &d);
    brg_model_destroy(m);

    step cpu = {0}, counted = {0}, broken = {0};
    run_step(&d, NULL, &cpu);
    memset(&calls, 0, sizeof calls);
    run_step(&d, &counting, &counted);
    CHECK(cpu.loss > 1.0 && cpu.sq_norm > 0.0);
    CHECK_MSG(counted.loss == cpu.loss && counted.sq_norm == cpu.sq_norm, "loss %.9g / %.9g, norm %.9g / %.9g",
              counted.loss, cpu.loss, counted.sq_norm, cpu.sq_norm);
    CHECK(same_weights(&cpu, &counted));

    /* 2 micro-batches x 2 layers x 4 products (QKV, projection, MLP up and down) each way, an
     * attention per layer and micro-batch; the stage boundary's gradient comes back through
     * accumulate; the norm, the scale and the optimizer run on the devices' kernels. */
    CHECK_MSG(calls.linear_fwd >= 8 && calls.linear_bwd >= 8, "products: %ld forward, %ld backward", calls.linear_fwd,
              calls.linear_bwd);
    CHECK_MSG(calls.attention_fwd == 4 && calls.attention_bwd == 4, "attention: %ld forward, %ld backward",
              calls.attention_fwd, calls.attention_bwd);
    CHECK(calls.layernorm_bwd >= 8);
    CHECK_MSG(calls.accumulate >= 2, "accumulate: %ld", calls.accumulate);
    CHECK_MSG(calls.sum_squares >= 1 && calls.scale >= 1, "sum_squares %ld, scale %ld", calls.sum_squares,
              calls.scale);
    CHECK_MSG(calls.optimizer_update >= 1, "optimizer updates: %ld", calls.optimizer_update);
    /* the parameters went onto the devices and the stage-1 inputs crossed, into the backend's
     * memory */
    CHECK_MSG(calls.copy_to_device >= 2 && calls.alloc >= 2, "%ld copies to devices; %ld chunks", calls.copy_to_device,
              calls.alloc);
    CHECK_MSG(calls.widen == 0 && calls.narrow == 0, "fp32 activations converted: %ld widen, %ld narrow", calls.widen,
              calls.narrow);

    /* Half activations: the ops' staging and the tape's half gradients convert on the device's
     * kernels, and give the CPU's results bit for bit. */
    step half_cpu = {0}, half_counted = {0};
    run_step_as(&d, NULL, BRG_DTYPE_BF16, &half_cpu);
    memset(&calls, 0, sizeof calls);
    run_step_as(&d, &counting, BRG_DTYPE_BF16, &half_counted);
    CHECK_MSG(calls.widen >= 16 && calls.narrow >= 16, "bf16 activations: %ld widen, %ld narrow", calls.widen,
              calls.narrow);
    CHECK_MSG(half_counted.loss == half_cpu.loss && half_cpu.loss != cpu.loss, "bf16 loss %.9g / %.9g (fp32 %.9g)",
              half_counted.loss, half_cpu.loss, cpu.loss);
    CHECK(same_weights(&half_cpu, &half_counted));
    free_step(&half_cpu);
    free_step(&half_counted);
    /* activations are held in a floating-point type */
    brg_model *bad = tiny_gpt2();
    if (bad) {
        const int zero[4] = {0};
        brg_runtime_options o = {.replicas = 1, .stages = 1, .block_stage = zero, .micro_batches = 1,
                                 .training = true, .activation_dtype = BRG_DTYPE_I32};
        brg_runtime *rt = NULL;
        CHECK_ERR(brg_runtime_create(bad, &o, &rt), BRG_ERR_INVALID_ARG, "activations cannot be held in I32");
        CHECK(rt == NULL);
        brg_model_destroy(bad);
    }

    counting_kernels.linear_fwd = off_by_one_linear_fwd;
    run_step(&d, &counting, &broken);
    CHECK_MSG(broken.loss != cpu.loss, "a broken product kernel left the loss at %.9g", broken.loss);
    free_step(&cpu);
    free_step(&counted);
    free_step(&broken);
    return test_finish();
}
