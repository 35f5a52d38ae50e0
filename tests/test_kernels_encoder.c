/* Encoder kernels (select, prepend token, broadcast add, padded embedding backward, tanh, MSE,
 * BCE with logits, patch unfold) against direct computations and central differences, and the
 * op wrappers end to end on a tape. */
#include "brigade/rng.h"
#include "test_kernels_util.h"

/* ---- select ---- */
typedef struct sel_ctx {
    float *x, *y, *r;
    int64_t outer, n, inner, index;
} sel_ctx;

static double sel_loss(void *p) {
    sel_ctx *c = p;
    brg_k_select_fwd(c->y, c->x, c->outer, c->n, c->inner, c->index);
    return tk_dot(c->y, c->r, c->outer * c->inner);
}

static void test_select(void) {
    const int64_t outer = 3, n = 4, inner = 5;
    for (int64_t index = 0; index < n; index += 3) {
        sel_ctx c = {tk_rand(outer * n * inner, -1, 1), tk_zeros(outer * inner), tk_rand(outer * inner, -1, 1),
                     outer, n, inner, index};
        sel_loss(&c);
        bool ok = true;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) ok &= c.y[o * inner + i] == c.x[(o * n + index) * inner + i];
        CHECK_MSG(ok, "select forward at index %lld", (long long)index);
        float *dx = tk_zeros(outer * n * inner);
        brg_k_select_bwd(dx, c.r, outer, n, inner, index);
        tk_gradcheck("select dx", &c, sel_loss, c.x, outer * n * inner, dx);
        float *pre = tk_rand(outer * n * inner, -1, 1), *acc = tk_copy(pre, outer * n * inner);
        brg_k_select_bwd(acc, c.r, outer, n, inner, index);
        tk_check_accumulated("select dx", acc, pre, dx, outer * n * inner);
        free(pre), free(acc), free(dx), free(c.x), free(c.y), free(c.r);
    }
}

/* ---- prepend token ---- */
typedef struct prep_ctx {
    float *tok, *x, *y, *r;
    int64_t B, n, c;
} prep_ctx;

static double prep_loss(void *p) {
    prep_ctx *c = p;
    brg_k_prepend_token_fwd(c->y, c->tok, c->x, c->B, c->n, c->c);
    return tk_dot(c->y, c->r, c->B * (c->n + 1) * c->c);
}

static void test_prepend_token(void) {
    const int64_t B = 3, n = 4, C = 5, ny = B * (n + 1) * C;
    prep_ctx c = {tk_rand(C, -1, 1), tk_rand(B * n * C, -1, 1), tk_zeros(ny), tk_rand(ny, -1, 1), B, n, C};
    prep_loss(&c);
    CHECK(c.y[(n + 1) * C + 2] == c.tok[2]);
    CHECK(c.y[2 * (n + 1) * C + 3 * C + 1] == c.x[2 * n * C + 2 * C + 1]);
    float *dt = tk_zeros(C), *dx = tk_zeros(B * n * C);
    brg_k_prepend_token_bwd(dt, dx, c.r, B, n, C);
    tk_gradcheck("prepend dtoken", &c, prep_loss, c.tok, C, dt);
    tk_gradcheck("prepend dx", &c, prep_loss, c.x, B * n * C, dx);
    float *pre = tk_rand(C, -1, 1), *acc = tk_copy(pre, C);
    brg_k_prepend_token_bwd(acc, NULL, c.r, B, n, C);
    tk_check_accumulated("prepend dtoken", acc, pre, dt, C);
    free(pre), free(acc), free(dt), free(dx), free(c.tok), free(c.x), free(c.y), free(c.r);
}

/* ---- broadcast add ---- */
typedef struct bc_ctx {
    float *x, *p, *y, *r;
    int64_t A, M, I;
} bc_ctx;

static double bc_loss(void *q) {
    bc_ctx *c = q;
    brg_k_add_bcast_fwd(c->y, c->x, c->p, c->A, c->M, c->I);
    return tk_dot(c->y, c->r, c->A * c->M * c->I);
}

static void test_add_broadcast(void) {
    const int64_t A = 2, M = 3, I = 4, n = A * M * I;
    bc_ctx c = {tk_rand(n, -1, 1), tk_rand(A * I, -1, 1), tk_zeros(n), tk_rand(n, -1, 1), A, M, I};
    bc_loss(&c);
    CHECK_NEAR(c.y[(1 * M + 2) * I + 3], c.x[(1 * M + 2) * I + 3] + c.p[1 * I + 3], 1e-7);
    float *dx = tk_zeros(n), *dp = tk_zeros(A * I);
    brg_k_add_bcast_bwd(dx, dp, c.r, A, M, I);
    tk_gradcheck("add_bcast dx", &c, bc_loss, c.x, n, dx);
    tk_gradcheck("add_bcast dp", &c, bc_loss, c.p, A * I, dp);
    free(dx), free(dp), free(c.x), free(c.p), free(c.y), free(c.r);
}

/* ---- embedding with a padding row ---- */
static void test_embedding_pad(void) {
    const int64_t n = 6, dim = 3, rows = 4;
    int32_t ids[6] = {1, 0, 3, 1, 0, 2};
    float *dy = tk_rand(n * dim, -1, 1), *dt = tk_zeros(rows * dim), *plain = tk_zeros(rows * dim);
    brg_k_embedding_pad_bwd(dt, dy, ids, n, dim, 0);
    brg_k_embedding_bwd(plain, dy, ids, n, dim);
    CHECK(test_max_abs(dt, dim) == 0.0); /* the padding row learns nothing */
    CHECK(test_max_abs_diff(dt + dim, plain + dim, (rows - 1) * dim) < 1e-7);
    memset(dt, 0, rows * dim * sizeof(float));
    brg_k_embedding_pad_bwd(dt, dy, ids, n, dim, -1);
    CHECK(test_max_abs_diff(dt, plain, rows * dim) < 1e-7);
    free(dy), free(dt), free(plain);
}

/* ---- tanh ---- */
typedef struct un_ctx {
    float *x, *y, *r;
    int64_t n;
} un_ctx;

static double tanh_loss(void *p) {
    un_ctx *c = p;
    brg_k_tanh_fwd(c->y, c->x, c->n);
    return tk_dot(c->y, c->r, c->n);
}

static void test_tanh(void) {
    const int64_t n = 50;
    un_ctx c = {tk_rand(n, -3, 3), tk_zeros(n), tk_rand(n, -1, 1), n};
    tanh_loss(&c);
    CHECK_NEAR(c.y[7], tanh(c.x[7]), 1e-6);
    float *dx = tk_zeros(n);
    brg_k_tanh_bwd(dx, c.r, c.y, n);
    tk_gradcheck("tanh dx", &c, tanh_loss, c.x, n, dx);
    float *acc = tk_rand(n, -1, 1), *pre = tk_copy(acc, n);
    brg_k_tanh_bwd(acc, c.r, c.y, n);
    tk_check_accumulated("tanh dx", acc, pre, dx, n);
    free(acc), free(pre), free(dx), free(c.x), free(c.y), free(c.r);
}

/* ---- MSE and BCE with logits ---- */
typedef struct pl_ctx {
    float *x, *t;
    int64_t n;
    bool bce;
} pl_ctx;

static double pl_loss(void *p) {
    pl_ctx *c = p;
    return 0.3 * (c->bce ? brg_k_bce_logits_sum_fwd(c->x, c->t, c->n) : brg_k_mse_sum_fwd(c->x, c->t, c->n));
}

static void test_pointwise_losses(void) {
    const int64_t n = 24;
    pl_ctx c = {tk_rand(n, -4, 4), tk_rand(n, 0, 1), n, false};
    double mse = 0, bce = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = c.x[i], t = c.t[i], s = 1.0 / (1.0 + exp(-x));
        mse += (x - t) * (x - t);
        bce += -(t * log(s) + (1 - t) * log(1 - s));
    }
    CHECK_NEAR(brg_k_mse_sum_fwd(c.x, c.t, n), mse, 1e-9 * n);
    CHECK_NEAR(brg_k_bce_logits_sum_fwd(c.x, c.t, n), bce, 1e-9 * n);
    float *dx = tk_zeros(n);
    brg_k_mse_bwd(dx, 0.3f, c.x, c.t, n);
    tk_gradcheck("mse dx", &c, pl_loss, c.x, n, dx);
    c.bce = true;
    memset(dx, 0, n * sizeof(float));
    brg_k_bce_logits_bwd(dx, 0.3f, c.x, c.t, n);
    tk_gradcheck("bce dx", &c, pl_loss, c.x, n, dx);
    /* Saturated logits stay finite: a confident right answer costs ~0, a wrong one ~|x|. */
    float big[2] = {100.0f, -100.0f}, tgt[2] = {1.0f, 1.0f}, g[2] = {0, 0};
    CHECK_NEAR(brg_k_bce_logits_sum_fwd(big, tgt, 1), 0.0, 1e-12);
    CHECK_NEAR(brg_k_bce_logits_sum_fwd(big + 1, tgt + 1, 1), 100.0, 1e-9);
    brg_k_bce_logits_bwd(g, 1.0f, big, tgt, 2);
    CHECK(g[0] == 0.0f && g[1] == -1.0f);
    free(dx), free(c.x), free(c.t);
}

/* ---- patch unfold ---- */
typedef struct uf_ctx {
    float *px, *patches, *r;
    brg_patch_dims d;
    int64_t np;
} uf_ctx;

static double uf_loss(void *p) {
    uf_ctx *c = p;
    brg_k_patch_unfold_fwd(c->patches, c->px, &c->d);
    return tk_dot(c->patches, c->r, c->np);
}

static void test_patch_unfold(void) {
    /* 7x8 images with 2x3 patches: the last row and the last two columns fall outside. */
    brg_patch_dims d = {2, 3, 7, 8, 2, 3};
    int64_t gh = 3, gw = 2, width = 3 * 2 * 3, out = 5, npx = 2 * 3 * 7 * 8, np = 2 * gh * gw * width;
    uf_ctx c = {tk_rand(npx, -1, 1), tk_zeros(np), tk_rand(np, -1, 1), d, np};
    float *w = tk_rand(out * width, -1, 1), *b = tk_rand(out, -1, 1);
    float *conv = tk_zeros(2 * gh * gw * out), *viaunfold = tk_zeros(2 * gh * gw * out);
    uf_loss(&c);
    brg_k_patch_conv_ref(conv, c.px, w, b, out, &d);
    brg_k_linear_fwd(viaunfold, c.patches, w, b, 2 * gh * gw, width, out, false);
    CHECK_MSG(test_max_abs_diff(conv, viaunfold, 2 * gh * gw * out) < 1e-5,
              "unfold @ W^T differs from the convolution");
    float *dpx = tk_zeros(npx);
    brg_k_patch_unfold_bwd(dpx, c.r, &d);
    tk_gradcheck("unfold dpixels", &c, uf_loss, c.px, npx, dpx);
    CHECK(dpx[6 * 8 + 2] == 0.0f && dpx[7] == 0.0f); /* dropped row 6 and column 7 */
    free(dpx), free(w), free(b), free(conv), free(viaunfold), free(c.px), free(c.patches), free(c.r);
}

/* ---- the op wrappers on a tape ---- */

typedef struct graph {
    brg_tensor *px, *w, *bias, *tok, *pos, *target, *target01;
} graph;

static brg_tensor *param(brg_arena *a, brg_rng *rng, int nd, const int64_t *shape, float scale, bool grad) {
    brg_tensor *t;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, nd, shape, "param", &t));
    for (int64_t i = 0; i < brg_tensor_numel(t); i++) ((float *)t->data)[i] = scale * (float)brg_rng_normal(rng);
    if (grad) {
        CHECK_OK(brg_tensor_ensure_grad(a, t));
        t->requires_grad = true;
    }
    return t;
}

enum { GB = 2, GC = 2, GH = 5, GW = 7, GE = 5, NP = 4 }; /* 2x3 patches: (5/2) * (7/3) = 4 */

static void build(brg_arena *a, graph *g) {
    brg_rng rng;
    brg_rng_seed(&rng, 21);
    g->px = param(a, &rng, 4, (int64_t[]){GB, GC, GH, GW}, 1.0f, true);
    g->w = param(a, &rng, 4, (int64_t[]){GE, GC, 2, 3}, 0.4f, true);
    g->bias = param(a, &rng, 1, (int64_t[]){GE}, 0.3f, true);
    g->tok = param(a, &rng, 3, (int64_t[]){1, 1, GE}, 0.5f, true);
    g->pos = param(a, &rng, 3, (int64_t[]){1, NP + 1, GE}, 0.5f, true);
    g->target = param(a, &rng, 2, (int64_t[]){GB, GE}, 1.0f, false);
    g->target01 = param(a, &rng, 2, (int64_t[]){GB, NP + 1}, 1.0f, false);
    for (int i = 0; i < GB * (NP + 1); i++) ((float *)g->target01->data)[i] = (float)(i % 3 == 0);
}

/* loss = MSE(scale(select(tanh(pos + [tok; unfold(px) W^T + b]), 0)), target) / 3
 *      + BCE(select(..., last column), target01) / 7 */
static brg_tensor *forward(brg_tape *tape, graph *g) {
    brg_tensor *patches, *w2, *emb, *cat, *x, *t, *first, *scaled, *col, *l1, *l2, *loss;
    CHECK_OK(brg_patch_unfold(tape, g->px, 2, 3, &patches));
    CHECK_OK(brg_reshape(tape, g->w, 2, (int64_t[]){GE, GC * 6}, &w2));
    CHECK_OK(brg_linear(tape, patches, w2, g->bias, false, &emb));
    CHECK_OK(brg_prepend_token(tape, g->tok, emb, &cat));
    CHECK_OK(brg_add_broadcast(tape, cat, g->pos, &x));
    CHECK_OK(brg_tanh(tape, x, &t));
    CHECK_OK(brg_select(tape, t, 1, 0, &first));
    CHECK_OK(brg_scale(tape, first, 1.7f, &scaled));
    CHECK_OK(brg_mse_loss_share(tape, scaled, g->target, 3.0, &l1));
    CHECK_OK(brg_select(tape, t, 2, GE - 1, &col));
    CHECK_OK(brg_bce_with_logits_share(tape, col, g->target01, 7.0, &l2));
    CHECK_OK(brg_add(tape, l1, l2, &loss));
    return loss;
}

static brg_tensor *graph_loss(brg_tape *tape, void *g) { return forward(tape, g); }

static void check_param(brg_arena *a, graph *g, brg_tensor *p, const char *what) {
    test_graph_gradcheck(a, graph_loss, g, p, what, 1e-3);
}

static void test_op_graph(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    graph g;
    build(a, &g);
    size_t mark = brg_arena_mark(a);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *loss = forward(tape, &g);
    CHECK(loss->ndim == 0 && loss->requires_grad);
    CHECK_OK(brg_tape_backward(tape, loss));
    brg_tape_destroy(tape);
    brg_arena_reset(a, mark);
    check_param(a, &g, g.px, "pixels");
    check_param(a, &g, g.w, "conv weight");
    check_param(a, &g, g.bias, "conv bias");
    check_param(a, &g, g.tok, "token");
    check_param(a, &g, g.pos, "positions");
    brg_arena_destroy(a);
}

static void test_op_errors_and_padding(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_rng rng;
    brg_rng_seed(&rng, 5);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *x = param(a, &rng, 3, (int64_t[]){2, 3, 4}, 1.0f, true), *y;
    brg_tensor *bad = param(a, &rng, 3, (int64_t[]){2, 1, 3}, 1.0f, false);
    brg_tensor *gap = param(a, &rng, 3, (int64_t[]){1, 3, 1}, 1.0f, false);
    CHECK_ERR(brg_select(tape, x, 1, 3, &y), BRG_ERR_INVALID_ARG, "index 3 outside [0, 3)");
    CHECK_ERR(brg_select(tape, x, 3, 0, &y), BRG_ERR_INVALID_ARG, "dim 3");
    CHECK_ERR(brg_add_broadcast(tape, x, bad, &y), BRG_ERR_INVALID_ARG, "does not broadcast");
    CHECK_ERR(brg_add_broadcast(tape, x, gap, &y), BRG_ERR_INVALID_ARG, "does not broadcast");
    CHECK_ERR(brg_prepend_token(tape, bad, x, &y), BRG_ERR_INVALID_ARG, "6 elements, the rows have 4");
    CHECK_ERR(brg_patch_unfold(tape, x, 2, 2, &y), BRG_ERR_INVALID_ARG, "[B, C, H, W]");
    brg_tensor *img = param(a, &rng, 4, (int64_t[]){1, 3, 4, 4}, 1.0f, false);
    CHECK_ERR(brg_patch_unfold(tape, img, 5, 2, &y), BRG_ERR_INVALID_ARG, "smaller than one 5x2 patch");
    CHECK_ERR(brg_mse_loss_share(tape, x, bad, 0, &y), BRG_ERR_INVALID_ARG, "does not match");
    /* MSE with no denominator is the mean; the padded embedding keeps row 0 frozen. */
    CHECK_OK(brg_mse_loss_share(tape, bad, bad, 0, &y));
    CHECK(((float *)y->data)[0] == 0.0f);
    brg_tensor *table = param(a, &rng, 2, (int64_t[]){4, 3}, 1.0f, true), *ids, *e;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, 1, (int64_t[]){3}, "ids", &ids));
    int32_t *id = ids->data;
    id[0] = 0, id[1] = 2, id[2] = 0;
    CHECK_OK(brg_embedding_padded(tape, ids, table, 0, &e));
    CHECK(e->requires_grad && ((float *)e->data)[4] == ((float *)table->data)[7]);
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_OK(brg_tape_backward_from(tape, e, ones));
    CHECK(table->grad[0] == 0.0f && table->grad[6] == 1.0f);
    id[1] = 4;
    CHECK_ERR(brg_embedding_padded(tape, ids, table, 0, &e), BRG_ERR_INVALID_ARG, "out of range");
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

int main(void) {
    tk_seed(9);
    test_select();
    test_prepend_token();
    test_add_broadcast();
    test_embedding_pad();
    test_tanh();
    test_pointwise_losses();
    test_patch_unfold();
    test_op_graph();
    test_op_errors_and_padding();
    return test_finish();
}
