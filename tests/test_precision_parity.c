/* Half-precision training against PyTorch (tools/precision_fixtures.py): 20 steps of tiny GPT-2,
 * BERT (masked LM), ViT and T5 in every precision mode, each step's loss within 1e-4 relative of
 * PyTorch's for 32.32, 3% for the .32 modes (autocast) and 5% for the .16 modes (the model cast to
 * the half type), with stochastic rounding off (PyTorch rounds to nearest) and on.
 *
 * Being close to PyTorch's losses is not enough on its own (a run that ignored the precision would
 * be close too), so a half mode must also differ from brigade's float32 run with the same
 * optimizer, a .16 run must leave every weight exactly representable in its half type, and a
 * stochastically rounded run must differ from the rounded-to-nearest one. Pipelined over 2 stages
 * and replicated over 2 replicas, GPT-2's and T5's losses (32.32, bf16.32, 16.16) equal their
 * one-device runs within 1e-5 for 32.32 and within rounding noise otherwise (split_tol).
 *
 * Usage: test_precision_parity [ROOT]   (ROOT holds precision_<model>/; default tests/fixtures) */
#include "brigade/trainer.h"
#include "test_util.h"

#define STEPS 20
#define GLOBAL_BATCH 8
#define ADAMW_LR 3e-3
#define SGD_MOMENTUM 0.9
#define LOSS_SCALE 1024.0f
/* Pipelined and replicated runs sum gradients in another order: ~1e-7 apart in float32. Products
 * that round their operands turn such differences into a half ulp wherever a value sits near a
 * rounding boundary, so the losses of a half compute mode drift apart by rounding noise (6e-4 in
 * PyTorch, for bf16 GPT-2 here, between one batch of 8 and 4 accumulated micro-batches of 2):
 * 1e-5 for 32.32, half the compute type's unit roundoff otherwise. */
static double split_tol(brg_precision p) {
    switch (brg_precision_compute_dtype(p)) {
    case BRG_DTYPE_BF16: return 0.5 * 0x1p-8;
    case BRG_DTYPE_F16: return 0.5 * 0x1p-11;
    default: return 1e-5;
    }
}

/* The settings tools/precision_fixtures.py trains with (SGD_LR there). */
typedef struct model_case {
    const char *name;
    double sgd_lr; /* the .16 modes' optimizer (and the float32 baseline loss.32.32-sgd) */
    bool split;    /* also pipelined and replicated */
} model_case;

static const model_case cases[] = {
    {"gpt2", 0.05, true},
    {"bert", 0.05, false},
    {"vit", 0.1, false},
    {"t5", 0.1, true},
};

typedef struct run_spec {
    brg_precision precision;
    bool sgd;                /* the .16 modes' optimizer */
    int stochastic_rounding; /* 0 or 1 */
    int stages, replicas, accumulation;
} run_spec;

typedef struct losses {
    double v[STEPS];
    int64_t seen;
} losses;

static void on_step(void *ctx, int64_t step, double loss, float lr) {
    (void)lr;
    losses *l = ctx;
    if (step >= 1 && step <= STEPS) l->v[step - 1] = loss, l->seen++;
}

static bool is_half_master(brg_precision p) { return brg_precision_master_dtype(p) != BRG_DTYPE_F32; }

static void options_for(const model_case *mc, const run_spec *r, int *block_stage, int n_blocks,
                        brg_train_options *o) {
    brg_train_options_default(o);
    o->stages = r->stages, o->replicas = r->replicas, o->accumulation = r->accumulation;
    for (int b = 0; b < n_blocks; b++) block_stage[b] = r->stages == 2 && b >= n_blocks / 2;
    o->block_stage = r->stages == 2 ? block_stage : NULL;
    o->micro_batch = GLOBAL_BATCH / (r->replicas * r->accumulation);
    o->steps = STEPS, o->shuffle = false, o->seed = 5;
    if (r->sgd) {
        o->optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
        o->optimizer.lr = mc->sgd_lr, o->optimizer.momentum = SGD_MOMENTUM;
    } else {
        o->optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
        o->optimizer.lr = ADAMW_LR, o->optimizer.eps = 1e-8;
    }
    o->optimizer.weight_decay = 0;
    o->lr_schedule.kind = BRG_LR_SCHEDULE_CONSTANT;
    o->max_grad_norm = 1.0f;
    o->precision = r->precision;
    o->loss_scaling = brg_precision_compute_dtype(r->precision) == BRG_DTYPE_F16 ? LOSS_SCALE : 0.0f;
    o->stochastic_rounding = r->stochastic_rounding;
}

/* Largest |w - half(w)| over the model's weights, for the half type `dtype` (0: all representable). */
static double unrepresentable(const brg_model *m, brg_dtype dtype, const char **worst_name) {
    double worst = 0;
    for (int p = 0; p < m->n_params; p++) {
        const float *w = m->params[p].tensor->data;
        for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++) {
            float back = dtype == BRG_DTYPE_F16 ? brg_f16_to_f32(brg_f32_to_f16(w[i])) : brg_bf16_to_f32(brg_f32_to_bf16(w[i]));
            double d = fabs((double)back - (double)w[i]);
            if (d > worst || d != d) worst = d != d ? INFINITY : d, *worst_name = m->params[p].name;
        }
    }
    return worst;
}

/* Trains a fresh copy of the fixture's model; false when it could not. */
static bool train(const char *dir, const model_case *mc, const run_spec *r, losses *out) {
    char path[1024];
    brg_model *m = NULL;
    brg_dataset *d = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    snprintf(path, sizeof path, "%s/data.safetensors", dir);
    if (m) CHECK_OK(brg_dataset_load(path, m, 0, &d));
    bool ok = m && d;
    if (ok) {
        int block_stage[256];
        brg_train_options o;
        ok = m->n_blocks <= 256;
        options_for(mc, r, block_stage, m->n_blocks, &o);
        memset(out, 0, sizeof *out);
        o.on_step = on_step, o.on_step_ctx = out;
        brg_status st = ok ? brg_train(m, d, &o, NULL) : BRG_ERR_INVALID_ARG;
        CHECK_MSG(st == BRG_OK, "%s %s: brg_train: %s", mc->name, brg_precision_name(r->precision), brg_last_error());
        ok = st == BRG_OK && out->seen == STEPS;
    }
    if (ok && is_half_master(r->precision)) {
        const char *name = "";
        brg_dtype dtype = brg_precision_master_dtype(r->precision);
        double off = unrepresentable(m, dtype, &name);
        CHECK_MSG(off == 0, "%s %s (stochastic rounding %d, %d stages x %d replicas): weights are not all %s "
                  "after training (%s off by %.3g)", mc->name, brg_precision_name(r->precision),
                  r->stochastic_rounding, r->stages, r->replicas, brg_dtype_name(dtype), name, off);
    }
    brg_dataset_free(d);
    brg_model_destroy(m);
    return ok;
}

static double max_rel_deviation(const losses *a, const double *ref) {
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(a->v[s] - ref[s]) / fmax(fabs(ref[s]), 1e-30);
        if (rel > worst || rel != rel) worst = rel != rel ? INFINITY : rel;
    }
    return worst;
}

static bool read_reference(const brg_safetensors *exp, const char *key, double ref[STEPS]) {
    int64_t n = 0;
    float *v = test_read_f32(exp, key, &n);
    CHECK_MSG(v && n == STEPS, "%s: %lld values, want %d", key, (long long)n, STEPS);
    for (int s = 0; v && s < STEPS && s < n; s++) ref[s] = v[s];
    bool ok = v && n == STEPS;
    free(v);
    return ok;
}

/* A run against PyTorch's losses `key`: every step within tol relative; prints the worst. */
static void against_torch(const char *what, const losses *run, const brg_safetensors *exp, const char *key,
                          double tol) {
    double ref[STEPS];
    if (!read_reference(exp, key, ref)) return;
    double worst = max_rel_deviation(run, ref);
    printf("%-28s worst rel deviation from PyTorch %.2e (tol %.0e)\n", what, worst, tol);
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(fabs(run->v[s] - ref[s]) <= tol * fabs(ref[s]), "%s: step %d loss %.7f vs PyTorch %.7f", what, s + 1,
                  run->v[s], ref[s]);
}

static bool identical(const losses *a, const losses *b) { return memcmp(a->v, b->v, sizeof a->v) == 0; }

/* 2 stages x 2 replicas x 2 micro-batches against the one-device run `one` of mode p. */
static void check_split(const char *dir, const model_case *mc, brg_precision p, const losses *one) {
    run_spec split = {p, is_half_master(p), 0, 2, 2, 2};
    losses two;
    if (!train(dir, mc, &split, &two)) return;
    double worst = max_rel_deviation(&two, one->v);
    printf("%-5s %-7s 2 stages x 2 replicas: worst rel deviation from one device %.2e (tol %.1e)\n", mc->name,
           brg_precision_name(p), worst, split_tol(p));
    CHECK_MSG(worst <= split_tol(p), "%s %s: 2 stages x 2 replicas differ from one device by %.3g relative", mc->name,
              brg_precision_name(p), worst);
}

static void check_mode(const char *dir, const model_case *mc, brg_precision p, const brg_safetensors *exp,
                       const losses *fp32_adamw, const losses *fp32_sgd) {
    const bool half_master = is_half_master(p);
    const double tol = p == BRG_PRECISION_32_32 ? 1e-4 : half_master ? 5e-2 : 3e-2;
    char key[64], what[96];
    snprintf(key, sizeof key, "loss.%s", brg_precision_name(p));
    run_spec r = {p, half_master, 0, 1, 1, 1};
    losses run;
    snprintf(what, sizeof what, "%s %s", mc->name, brg_precision_name(p));
    if (p == BRG_PRECISION_32_32) run = *fp32_adamw;
    else if (!train(dir, mc, &r, &run)) return;
    against_torch(what, &run, exp, key, tol);
    if (p != BRG_PRECISION_32_32)
        CHECK_MSG(!identical(&run, half_master ? fp32_sgd : fp32_adamw),
                  "%s: losses are bit-identical to the 32.32 run: the precision was ignored", what);
    if (mc->split && (p == BRG_PRECISION_32_32 || p == BRG_PRECISION_BF16_32 || p == BRG_PRECISION_16_16))
        check_split(dir, mc, p, &run);
    if (half_master) {
        losses sr;
        r.stochastic_rounding = 1;
        snprintf(what, sizeof what, "%s %s stochastic", mc->name, brg_precision_name(p));
        if (!train(dir, mc, &r, &sr)) return;
        against_torch(what, &sr, exp, key, tol);
        CHECK_MSG(!identical(&sr, &run), "%s: losses are bit-identical to rounding to nearest", what);
    }
}

static void check_model(const char *root, const model_case *mc) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/precision_%s", root, mc->name);
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(path, &exp));
    if (!exp) return;
    /* float32 with each optimizer: the baselines the half modes must not reproduce bit for bit */
    losses fp32_adamw, fp32_sgd;
    run_spec adamw = {BRG_PRECISION_32_32, false, 0, 1, 1, 1}, sgd = {BRG_PRECISION_32_32, true, 0, 1, 1, 1};
    char what[64];
    snprintf(what, sizeof what, "%s 32.32 sgd", mc->name);
    if (train(dir, mc, &adamw, &fp32_adamw) && train(dir, mc, &sgd, &fp32_sgd)) {
        against_torch(what, &fp32_sgd, exp, "loss.32.32-sgd", 1e-4);
        for (int p = 0; p < BRG_PRECISION_COUNT; p++) check_mode(dir, mc, (brg_precision)p, exp, &fp32_adamw, &fp32_sgd);
    }
    brg_safetensors_close(exp);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "tests/fixtures";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_model(root, &cases[i]);
    return test_finish();
}
