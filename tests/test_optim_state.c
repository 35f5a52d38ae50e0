/* Optimizer behaviour beyond the PyTorch fixtures: checkpoint round trips through the state
 * enumeration (bit-exact resume), lr 0, weight-decay exclusion, state layout and names, arena
 * allocation, and rejection of invalid configurations and calls. */
#include "test_util.h"

#include "brigade/optim.h"
#include "kernels/kernels.h"

#define N_W 37 /* odd sizes: no loop happens to line up with a multiple of 4 or 8 */
#define N_B 5
#define STEPS 10

/* Deterministic values in [-1, 1) from (seed, index). */
static float value_at(uint32_t seed, uint32_t i) {
    uint32_t x = seed * 2654435761u ^ (i + 0x9e3779b9u) * 40503u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return (float)(x % 20000u) / 10000.0f - 1.0f;
}

typedef struct model {
    float w[N_W], b[N_B], gw[N_W], gb[N_B];
} model;

static void model_init(model *m) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < N_W; i++) m->w[i] = value_at(1, i);
    for (int i = 0; i < N_B; i++) m->b[i] = value_at(2, i);
}

static void model_grads(model *m, int step) {
    for (int i = 0; i < N_W; i++) m->gw[i] = value_at(100 + step, i);
    for (int i = 0; i < N_B; i++) m->gb[i] = value_at(200 + step, i);
}

static brg_optimizer *make_opt(const brg_optimizer_config *c, model *m, brg_arena *arena) {
    brg_optimizer *o = NULL;
    CHECK_OK(brg_optimizer_create(c, arena, &o));
    if (!o) return NULL;
    CHECK_OK(brg_optimizer_add_param(o, m->w, m->gw, N_W, true, "layer.weight"));
    CHECK_OK(brg_optimizer_add_param(o, m->b, m->gb, N_B, false, "layer.bias"));
    return o;
}

static void run_steps(brg_optimizer *o, model *m, int first, int last) {
    for (int k = first; k < last; k++) {
        model_grads(m, k);
        CHECK_OK(brg_optimizer_step(o, 0.05f * (float)(k + 1) / STEPS));
    }
}

typedef struct saved_state {
    int count;
    char names[8][64];
    float data[8][N_W];
    int64_t step;
} saved_state;

static void save_state(brg_optimizer *o, saved_state *s) {
    s->count = brg_optimizer_state_count(o);
    s->step = brg_optimizer_get_step(o);
    for (int i = 0; i < s->count && i < 8; i++) {
        snprintf(s->names[i], sizeof s->names[i], "%s", brg_optimizer_state_name(o, i));
        memcpy(s->data[i], brg_optimizer_state_data(o, i), (size_t)brg_optimizer_state_numel(o, i) * sizeof(float));
    }
}

static void restore_state(brg_optimizer *o, const saved_state *s) {
    CHECK(brg_optimizer_state_count(o) == s->count);
    CHECK_OK(brg_optimizer_set_step(o, s->step));
    for (int i = 0; i < s->count && i < 8; i++) {
        int j = brg_optimizer_state_find(o, s->names[i]);
        CHECK_MSG(j >= 0, "state %s missing after restore", s->names[i]);
        if (j < 0) continue;
        memcpy(brg_optimizer_state_data(o, j), s->data[i], (size_t)brg_optimizer_state_numel(o, j) * sizeof(float));
    }
}

/* 10 uninterrupted steps vs 5 steps, a checkpoint, a fresh optimizer (in an arena) restored from
 * it, and 5 more steps: parameters and state must be bit-identical. */
static void check_round_trip(const brg_optimizer_config *c) {
    const char *kind = brg_optimizer_kind_name(c->kind);
    model a, b;
    model_init(&a);
    model_init(&b);
    brg_optimizer *oa = make_opt(c, &a, NULL), *ob = make_opt(c, &b, NULL);
    if (!oa || !ob) return;
    run_steps(oa, &a, 0, STEPS);
    run_steps(ob, &b, 0, STEPS / 2);
    saved_state s = {0};
    save_state(ob, &s);
    brg_optimizer_destroy(ob);

    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("device 0", 0, &arena));
    brg_optimizer *oc = make_opt(c, &b, arena);
    if (oc) {
        restore_state(oc, &s);
        run_steps(oc, &b, STEPS / 2, STEPS);
        CHECK_MSG(memcmp(a.w, b.w, sizeof a.w) == 0 && memcmp(a.b, b.b, sizeof a.b) == 0,
                  "%s: resumed parameters differ from an uninterrupted run", kind);
        saved_state sa = {0}, sc = {0};
        save_state(oa, &sa);
        save_state(oc, &sc);
        CHECK_MSG(sa.count == sc.count && sa.step == sc.step && sa.step == STEPS &&
                      memcmp(sa.data, sc.data, sizeof sa.data) == 0,
                  "%s: resumed optimizer state differs from an uninterrupted run", kind);
    }
    brg_optimizer_destroy(oa);
    brg_optimizer_destroy(oc);
    brg_arena_destroy(arena);
}

static brg_optimizer_config busy_config(brg_optimizer_kind kind) {
    brg_optimizer_config c = brg_optimizer_config_default(kind);
    c.weight_decay = 0.1;
    if (kind == BRG_OPTIMIZER_SGD) {
        c.momentum = 0.9;
        c.nesterov = true;
    }
    if (kind == BRG_OPTIMIZER_RMSPROP) {
        c.momentum = 0.5;
        c.centered = true;
    }
    if (kind == BRG_OPTIMIZER_LAMB) c.max_weight_norm = 2.0;
    return c;
}

/* lr 0 leaves every parameter bit-for-bit alone (AdamW's decoupled decay is p *= 1 - 0*wd),
 * while the state moves on. */
static void check_lr_zero(brg_optimizer_kind kind) {
    brg_optimizer_config c = busy_config(kind);
    model m, orig;
    model_init(&m);
    orig = m;
    brg_optimizer *o = make_opt(&c, &m, NULL);
    if (!o) return;
    model_grads(&m, 0);
    CHECK_OK(brg_optimizer_step(o, 0.0f));
    CHECK_OK(brg_optimizer_step(o, 0.0f));
    CHECK_MSG(memcmp(m.w, orig.w, sizeof m.w) == 0 && memcmp(m.b, orig.b, sizeof m.b) == 0,
              "%s: lr 0 changed the parameters", brg_optimizer_kind_name(kind));
    CHECK(brg_optimizer_get_step(o) == 2);
    CHECK(brg_optimizer_state_count(o) > 0 && test_max_abs(brg_optimizer_state_data(o, 0), N_W) > 0);
    brg_optimizer_destroy(o);
}

/* With zero gradients only weight decay can move a parameter: the decayed slot moves, the
 * no-decay slot stays exactly as it was. */
static void check_no_decay(brg_optimizer_kind kind) {
    brg_optimizer_config c = busy_config(kind);
    model m, orig;
    model_init(&m);
    orig = m;
    brg_optimizer *o = make_opt(&c, &m, NULL);
    if (!o) return;
    for (int k = 0; k < 3; k++) CHECK_OK(brg_optimizer_step(o, 0.1f));
    const char *name = brg_optimizer_kind_name(kind);
    CHECK_MSG(memcmp(m.b, orig.b, sizeof m.b) == 0, "%s: weight decay reached a no-decay parameter", name);
    CHECK_MSG(test_max_abs_diff(m.w, orig.w, N_W) > 1e-4, "%s: weight decay did not move a decayed parameter", name);
    brg_optimizer_destroy(o);
}

static void check_state_layout(void) {
    float w[3] = {0}, g[3] = {0};
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_RMSPROP);
    c.momentum = 0.9;
    c.centered = true;
    brg_optimizer *o = NULL;
    CHECK_OK(brg_optimizer_create(&c, NULL, &o));
    CHECK_OK(brg_optimizer_add_param(o, w, g, 3, true, "h.0.mlp.c_fc.weight"));
    CHECK(brg_optimizer_param_count(o) == 1);
    CHECK(brg_optimizer_state_count(o) == 3);
    CHECK(strcmp(brg_optimizer_state_name(o, 0), "h.0.mlp.c_fc.weight.square_avg") == 0);
    CHECK(strcmp(brg_optimizer_state_name(o, 1), "h.0.mlp.c_fc.weight.momentum_buffer") == 0);
    CHECK(strcmp(brg_optimizer_state_name(o, 2), "h.0.mlp.c_fc.weight.grad_avg") == 0);
    CHECK(brg_optimizer_state_numel(o, 2) == 3);
    CHECK(brg_optimizer_state_find(o, "h.0.mlp.c_fc.weight.grad_avg") == 2);
    CHECK(brg_optimizer_state_find(o, "h.0.mlp.c_fc.weight.exp_avg") == -1);
    brg_optimizer_destroy(o);

    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD); /* no momentum: torch keeps no buffer */
    CHECK_OK(brg_optimizer_create(&c, NULL, &o));
    CHECK_OK(brg_optimizer_add_param(o, w, g, 3, true, "w"));
    CHECK(brg_optimizer_state_count(o) == 0);
    CHECK_OK(brg_optimizer_add_param(o, NULL, NULL, 0, true, "empty"));
    CHECK_OK(brg_optimizer_step(o, 0.1f));
    brg_optimizer_destroy(o);

    c = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    CHECK_OK(brg_optimizer_create(&c, NULL, &o));
    CHECK_OK(brg_optimizer_add_param(o, w, g, 3, true, "w"));
    CHECK(brg_optimizer_state_count(o) == 2);
    CHECK(strcmp(brg_optimizer_state_name(o, 0), "w.exp_avg") == 0);
    CHECK(strcmp(brg_optimizer_state_name(o, 1), "w.exp_avg_sq") == 0);
    brg_optimizer_destroy(o);
}

static void check_arena_budget(void) {
    static float w[1024], g[1024];
    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("device 3", 6000, &arena));
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    brg_optimizer *o = NULL;
    CHECK_OK(brg_optimizer_create(&c, arena, &o));
    /* exp_avg (4 KiB) fits, exp_avg_sq does not */
    CHECK_ERR(brg_optimizer_add_param(o, w, g, 1024, true, "wte"), BRG_ERR_OOM, "wte.exp_avg_sq");
    CHECK(brg_optimizer_param_count(o) == 0 && brg_optimizer_state_count(o) == 0);
    CHECK_OK(brg_optimizer_add_param(o, w, g, 10, true, "small"));
    CHECK(brg_optimizer_state_count(o) == 2);
    brg_optimizer_destroy(o);
    brg_arena_destroy(arena);
}

static void check_defaults(void) {
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    CHECK(c.lr == 1e-3 && c.weight_decay == 1e-2 && c.betas[0] == 0.9 && c.betas[1] == 0.999 && c.eps == 1e-8);
    CHECK(brg_optimizer_config_default(BRG_OPTIMIZER_ADAM).weight_decay == 0.0);
    c = brg_optimizer_config_default(BRG_OPTIMIZER_RMSPROP);
    CHECK(c.lr == 1e-2 && c.alpha == 0.99 && c.momentum == 0.0 && !c.centered);
    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    CHECK(c.lr == 1e-3 && c.momentum == 0.0 && c.dampening == 0.0 && !c.nesterov && c.weight_decay == 0.0);
    c = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    CHECK(c.max_weight_norm == 65500.0 && c.weight_decay == 1e-2 && c.bias_correction);
    for (int k = 0; k < BRG_OPTIMIZER_KIND_COUNT; k++) {
        c = brg_optimizer_config_default((brg_optimizer_kind)k);
        CHECK_OK(brg_optimizer_config_validate(&c));
    }
}

static void check_kind_names(void) {
    brg_optimizer_kind k = BRG_OPTIMIZER_SGD;
    CHECK_OK(brg_optimizer_kind_parse("lamb", &k));
    CHECK(k == BRG_OPTIMIZER_LAMB);
    CHECK_OK(brg_optimizer_kind_parse("adamw_torch", &k));
    CHECK(k == BRG_OPTIMIZER_ADAMW);
    CHECK_ERR(brg_optimizer_kind_parse("adam_w", &k), BRG_ERR_INVALID_ARG, "'adam_w'");
    for (int i = 0; i < BRG_OPTIMIZER_KIND_COUNT; i++) {
        CHECK_OK(brg_optimizer_kind_parse(brg_optimizer_kind_name((brg_optimizer_kind)i), &k));
        CHECK(k == (brg_optimizer_kind)i);
    }
}

/* Expects `c` to be rejected by both validate and create, naming `field`. */
static void expect_invalid(brg_optimizer_config c, const char *field) {
    static char sentinel;
    brg_optimizer *o = (brg_optimizer *)&sentinel; /* a failing create must reset it to NULL */
    CHECK_ERR(brg_optimizer_config_validate(&c), BRG_ERR_INVALID_ARG, field);
    CHECK_ERR(brg_optimizer_create(&c, NULL, &o), BRG_ERR_INVALID_ARG, field);
    CHECK(o == NULL);
}

static void check_invalid_configs(void) {
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAM);
    c.lr = -0.1;
    expect_invalid(c, "lr must be");
    c.lr = NAN;
    expect_invalid(c, "lr must be");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    c.eps = -1e-8;
    expect_invalid(c, "eps must be");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    c.betas[0] = 1.0;
    expect_invalid(c, "betas[0] = 1 is outside [0, 1)");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    c.betas[1] = -0.5;
    expect_invalid(c, "betas[1]");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    c.max_weight_norm = -1;
    expect_invalid(c, "max_weight_norm");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    c.weight_decay = -0.01;
    expect_invalid(c, "weight_decay");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    c.momentum = -0.9;
    expect_invalid(c, "momentum");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    c.nesterov = true;
    expect_invalid(c, "nesterov requires momentum > 0 and dampening == 0");
    c.momentum = 0.9;
    c.dampening = 0.1;
    expect_invalid(c, "nesterov");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_RMSPROP);
    c.alpha = -0.5;
    expect_invalid(c, "alpha");
    c = brg_optimizer_config_default(BRG_OPTIMIZER_RMSPROP);
    c.eps = NAN;
    expect_invalid(c, "eps");
    c.kind = (brg_optimizer_kind)42;
    expect_invalid(c, "kind");
    /* fields a kind does not use are not checked: SGD ignores betas */
    c = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    c.betas[0] = 7.0;
    CHECK_OK(brg_optimizer_config_validate(&c));
    c = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    c.max_weight_norm = INFINITY;
    CHECK_OK(brg_optimizer_config_validate(&c));
}

static void check_invalid_calls(void) {
    float w[4] = {0}, g[4] = {0};
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    brg_optimizer *o = NULL;
    CHECK_OK(brg_optimizer_create(&c, NULL, &o));
    CHECK_ERR(brg_optimizer_add_param(o, w, g, 4, true, ""), BRG_ERR_INVALID_ARG, "non-empty name");
    CHECK_ERR(brg_optimizer_add_param(o, w, g, -1, true, "w"), BRG_ERR_INVALID_ARG, "negative size");
    CHECK_ERR(brg_optimizer_add_param(o, w, NULL, 4, true, "w"), BRG_ERR_INVALID_ARG, "no gradient buffer");
    CHECK_OK(brg_optimizer_add_param(o, w, g, 4, true, "w"));
    CHECK_ERR(brg_optimizer_add_param(o, w, g, 4, true, "w"), BRG_ERR_INVALID_ARG, "'w' was added twice");
    CHECK_ERR(brg_optimizer_step(o, -1e-3f), BRG_ERR_INVALID_ARG, "lr must be");
    CHECK_ERR(brg_optimizer_step(o, NAN), BRG_ERR_INVALID_ARG, "lr must be");
    CHECK(brg_optimizer_get_step(o) == 0);
    CHECK_OK(brg_optimizer_step(o, 1e-3f));
    CHECK_ERR(brg_optimizer_add_param(o, w, g, 4, true, "late"), BRG_ERR_INVALID_ARG, "after step 1");
    CHECK_ERR(brg_optimizer_set_step(o, -3), BRG_ERR_INVALID_ARG, "step must be >= 0");
    CHECK(brg_optimizer_param_count(o) == 1 && brg_optimizer_state_count(o) == 2);
    brg_optimizer_destroy(o);
    brg_optimizer_destroy(NULL);
}

/* A step on a thread with intra-op threads bound (a device's team, which splits every slot into
 * equal parts) changes each weight and state by exactly the bits a lone thread does. The slots
 * are large enough to be split, with odd sizes and one too small to have a part per thread. */
static void check_team_step(brg_optimizer_kind kind, int threads) {
    enum { N_SLOTS = 3, STEPS_HERE = 3 };
    const int64_t sizes[N_SLOTS] = {70001, 2, 40003};
    brg_optimizer_config c = busy_config(kind);
    float *w[2][N_SLOTS], *g[N_SLOTS];
    brg_optimizer *opt[2];
    brg_arena *arena;
    CHECK_OK(brg_arena_create("optimizer", 0, &arena));
    for (int r = 0; r < 2; r++) {
        CHECK_OK(brg_optimizer_create(&c, arena, &opt[r]));
        for (int s = 0; s < N_SLOTS; s++) {
            w[r][s] = malloc((size_t)sizes[s] * sizeof(float));
            if (r == 0) g[s] = malloc((size_t)sizes[s] * sizeof(float));
            for (int64_t i = 0; i < sizes[s]; i++) w[r][s][i] = value_at(10 + (uint32_t)s, (uint32_t)i);
            char name[16];
            snprintf(name, sizeof name, "p%d", s);
            CHECK_OK(brg_optimizer_add_param(opt[r], w[r][s], g[s], sizes[s], s != 1, name));
        }
    }
    brg_gemm_team *team;
    CHECK_OK(brg_gemm_team_create(threads, &team));
    for (int step = 0; step < STEPS_HERE; step++) {
        for (int s = 0; s < N_SLOTS; s++)
            for (int64_t i = 0; i < sizes[s]; i++) g[s][i] = value_at(300 + (uint32_t)(step * N_SLOTS + s), (uint32_t)i);
        brg_gemm_team_bind(NULL);
        CHECK_OK(brg_optimizer_step(opt[0], 0.01f));
        brg_gemm_team_bind(team);
        CHECK_OK(brg_optimizer_step(opt[1], 0.01f));
        brg_gemm_team_bind(NULL);
    }
    bool same = true;
    for (int s = 0; s < N_SLOTS; s++) same &= memcmp(w[0][s], w[1][s], (size_t)sizes[s] * sizeof(float)) == 0;
    for (int k = 0; k < brg_optimizer_state_count(opt[0]); k++)
        same &= memcmp(brg_optimizer_state_data(opt[0], k), brg_optimizer_state_data(opt[1], k),
                       (size_t)brg_optimizer_state_numel(opt[0], k) * sizeof(float)) == 0;
    CHECK_MSG(same, "%s: a step split over %d threads differs from one thread", brg_optimizer_kind_name(kind), threads);
    brg_gemm_team_destroy(team);
    for (int r = 0; r < 2; r++) {
        brg_optimizer_destroy(opt[r]);
        for (int s = 0; s < N_SLOTS; s++) free(w[r][s]);
    }
    for (int s = 0; s < N_SLOTS; s++) free(g[s]);
    brg_arena_destroy(arena);
}

int main(void) {
    for (int k = 0; k < BRG_OPTIMIZER_KIND_COUNT; k++) {
        check_team_step((brg_optimizer_kind)k, 2);
        check_team_step((brg_optimizer_kind)k, 3);
        brg_optimizer_config c = busy_config((brg_optimizer_kind)k);
        check_round_trip(&c);
        c.bias_correction = false;
        check_round_trip(&c);
        check_lr_zero((brg_optimizer_kind)k);
        check_no_decay((brg_optimizer_kind)k);
    }
    check_state_layout();
    check_arena_budget();
    check_defaults();
    check_kind_names();
    check_invalid_configs();
    check_invalid_calls();
    return test_finish();
}
