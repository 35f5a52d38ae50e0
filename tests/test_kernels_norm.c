/* Layer norm, GELU, softmax, embedding, head layout and elementwise kernels: forward against
 * double-precision formulas, backward against central differences. */
#include "test_kernels_util.h"

/* ---- layernorm ------------------------------------------------------------------------- */

typedef struct ln_ctx {
    float *y, *mean, *rstd, *x, *gamma, *beta, *r;
    int64_t n, c;
    float eps;
} ln_ctx;

static double ln_loss(void *p) {
    ln_ctx *c = p;
    brg_k_layernorm_fwd(c->y, c->mean, c->rstd, c->x, c->gamma, c->beta, c->n, c->c, c->eps);
    return tk_dot(c->y, c->r, c->n * c->c);
}

static double ln_fwd_err(const ln_ctx *c) {
    double err = 0.0;
    for (int64_t i = 0; i < c->n; i++) {
        const float *x = c->x + i * c->c;
        double m = 0.0, v = 0.0;
        for (int64_t j = 0; j < c->c; j++) m += x[j];
        m /= (double)c->c;
        for (int64_t j = 0; j < c->c; j++) v += (x[j] - m) * (x[j] - m);
        v /= (double)c->c;
        double r = 1.0 / sqrt(v + c->eps);
        err = fmax(err, fabs(c->mean[i] - m) + fabs(c->rstd[i] - r) / r);
        for (int64_t j = 0; j < c->c; j++) {
            double want = (x[j] - m) * r * (c->gamma ? c->gamma[j] : 1.0) + (c->beta ? c->beta[j] : 0.0);
            err = fmax(err, fabs(want - c->y[i * c->c + j]));
        }
    }
    return err;
}

static void layernorm_case(int64_t n, int64_t cols, double offset, bool affine) {
    ln_ctx c = {tk_zeros(n * cols), tk_zeros(n), tk_zeros(n), tk_rand(n * cols, offset - 1, offset + 1),
                affine ? tk_rand(cols, 0.5, 1.5) : NULL, affine ? tk_rand(cols, -1, 1) : NULL,
                tk_rand(n * cols, -1, 1), n, cols, 1e-5f};
    brg_k_layernorm_fwd(c.y, c.mean, c.rstd, c.x, c.gamma, c.beta, n, cols, c.eps);
    double err = ln_fwd_err(&c);
    CHECK_MSG(err < 2e-5, "layernorm fwd n=%lld c=%lld offset=%g: %.3g", (long long)n, (long long)cols, offset, err);

    float *dx = tk_zeros(n * cols), *dg = tk_zeros(cols), *db = tk_zeros(cols);
    brg_k_layernorm_bwd(dx, affine ? dg : NULL, affine ? db : NULL, c.r, c.x, c.gamma, c.mean, c.rstd, n, cols);
    if (offset == 0.0) { /* central differences cannot resolve a row sitting at 100 +- 1 in float */
        tk_gradcheck("layernorm dx", &c, ln_loss, c.x, n * cols, dx);
        if (affine) {
            tk_gradcheck("layernorm dgamma", &c, ln_loss, c.gamma, cols, dg);
            tk_gradcheck("layernorm dbeta", &c, ln_loss, c.beta, cols, db);
        }
    }
    if (affine) {
        float *pg = tk_rand(cols, -1, 1), *ag = tk_copy(pg, cols), *px = tk_rand(n * cols, -1, 1);
        float *ax = tk_copy(px, n * cols);
        brg_k_layernorm_bwd(NULL, ag, NULL, c.r, c.x, c.gamma, c.mean, c.rstd, n, cols);
        brg_k_layernorm_bwd(ax, NULL, NULL, c.r, c.x, c.gamma, c.mean, c.rstd, n, cols);
        tk_check_accumulated("layernorm dgamma", ag, pg, dg, cols);
        tk_check_accumulated("layernorm dx", ax, px, dx, n * cols);
        free(pg), free(ag), free(px), free(ax);
    }
    free(dx), free(dg), free(db);
    free(c.y), free(c.mean), free(c.rstd), free(c.x), free(c.gamma), free(c.beta), free(c.r);
}

static void test_layernorm(void) {
    const int64_t sizes[][2] = {{1, 1}, {1, 2}, {3, 7}, {4, 33}, {0, 5}, {2, 130}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        layernorm_case(sizes[s][0], sizes[s][1], 0.0, true);
        layernorm_case(sizes[s][0], sizes[s][1], 0.0, false);
        layernorm_case(sizes[s][0], sizes[s][1], 100.0, true); /* a large mean must not cancel digits */
    }
}

/* ---- gelu ------------------------------------------------------------------------------ */

typedef struct gelu_ctx {
    float *y, *x, *r;
    int64_t n;
    brg_gelu_kind kind;
} gelu_ctx;

static double gelu_loss(void *p) {
    gelu_ctx *c = p;
    brg_k_gelu_fwd(c->y, c->x, c->n, c->kind);
    return tk_dot(c->y, c->r, c->n);
}

static double gelu_exact(double x, brg_gelu_kind kind) {
    if (kind == BRG_GELU_ERF) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu(void) {
    for (int kind = 0; kind < 2; kind++) {
        const int64_t n = 257;
        gelu_ctx c = {tk_zeros(n), tk_rand(n, -6, 6), tk_rand(n, -1, 1), n, (brg_gelu_kind)kind};
        c.x[0] = 0.0f, c.x[1] = -10.0f, c.x[2] = 10.0f;
        brg_k_gelu_fwd(c.y, c.x, n, c.kind);
        double err = 0.0;
        for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(c.y[i] - gelu_exact(c.x[i], c.kind)));
        CHECK_MSG(err < 2e-6, "gelu kind %d fwd err %.3g", kind, err);
        /* The two kinds must differ, or one of them is the other. */
        CHECK(fabs(gelu_exact(1.0, BRG_GELU_ERF) - gelu_exact(1.0, BRG_GELU_TANH)) > 1e-5);

        float *dx = tk_zeros(n);
        brg_k_gelu_bwd(dx, c.r, c.x, n, c.kind);
        tk_gradcheck(kind ? "gelu tanh dx" : "gelu erf dx", &c, gelu_loss, c.x, n, dx);
        float *p = tk_rand(n, -1, 1), *a = tk_copy(p, n);
        brg_k_gelu_bwd(a, c.r, c.x, n, c.kind);
        tk_check_accumulated("gelu dx", a, p, dx, n);
        brg_k_gelu_fwd(c.y, c.x, 0, c.kind);
        brg_k_gelu_bwd(NULL, c.r, c.x, n, c.kind);
        free(p), free(a), free(dx), free(c.y), free(c.x), free(c.r);
    }
}

/* ---- softmax --------------------------------------------------------------------------- */

typedef struct softmax_ctx {
    float *y, *x, *r;
    int64_t rows, cols;
} softmax_ctx;

static double softmax_loss(void *p) {
    softmax_ctx *c = p;
    brg_k_softmax_fwd(c->y, c->x, c->rows, c->cols);
    return tk_dot(c->y, c->r, c->rows * c->cols);
}

static void softmax_case(int64_t rows, int64_t cols, double scale) {
    const int64_t n = rows * cols;
    softmax_ctx c = {tk_zeros(n), tk_rand(n, -scale, scale), tk_rand(n, -1, 1), rows, cols};
    brg_k_softmax_fwd(c.y, c.x, rows, cols);
    double err = 0.0;
    for (int64_t i = 0; i < rows; i++) {
        const float *x = c.x + i * cols;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < cols; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < cols; j++) sum += exp(x[j] - mx);
        for (int64_t j = 0; j < cols; j++) err = fmax(err, fabs(exp(x[j] - mx) / sum - c.y[i * cols + j]));
    }
    CHECK_MSG(err < 1e-6, "softmax fwd rows=%lld cols=%lld scale=%g: %.3g", (long long)rows, (long long)cols, scale,
              err);
    float *dx = tk_zeros(n);
    brg_k_softmax_bwd(dx, c.r, c.y, rows, cols);
    if (scale < 10) tk_gradcheck("softmax dx", &c, softmax_loss, c.x, n, dx);
    float *p = tk_rand(n, -1, 1), *a = tk_copy(p, n);
    brg_k_softmax_bwd(a, c.r, c.y, rows, cols);
    tk_check_accumulated("softmax dx", a, p, dx, n);
    free(p), free(a), free(dx), free(c.y), free(c.x), free(c.r);
}

static void test_softmax(void) {
    softmax_case(1, 1, 1);
    softmax_case(3, 7, 3);
    softmax_case(5, 64, 2);
    softmax_case(0, 4, 1);
    softmax_case(2, 50, 500); /* large logits: max subtraction keeps exp finite */
}

/* ---- embedding ------------------------------------------------------------------------- */

typedef struct emb_ctx {
    float *y, *table, *r;
    int32_t *ids;
    int64_t n, dim;
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    brg_k_embedding_fwd(c->y, c->ids, c->table, c->n, c->dim);
    return tk_dot(c->y, c->r, c->n * c->dim);
}

static void test_embedding(void) {
    const int64_t rows = 6, dim = 5, n = 9;
    int32_t ids[9] = {0, 5, 2, 2, 5, 1, 2, 0, 3}; /* repeats must accumulate; row 4 is unused */
    emb_ctx c = {tk_zeros(n * dim), tk_rand(rows * dim, -1, 1), tk_rand(n * dim, -1, 1), ids, n, dim};
    brg_k_embedding_fwd(c.y, ids, c.table, n, dim);
    int same = 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < dim; j++) same &= c.y[i * dim + j] == c.table[ids[i] * dim + j];
    CHECK(same);
    float *dt = tk_zeros(rows * dim);
    brg_k_embedding_bwd(dt, c.r, ids, n, dim);
    tk_gradcheck("embedding dtable", &c, emb_loss, c.table, rows * dim, dt);
    CHECK(dt[4 * dim] == 0.0f);
    float *p = tk_rand(rows * dim, -1, 1), *a = tk_copy(p, rows * dim);
    brg_k_embedding_bwd(a, c.r, ids, n, dim);
    tk_check_accumulated("embedding dtable", a, p, dt, rows * dim);
    brg_k_embedding_bwd(NULL, c.r, ids, n, dim);
    brg_k_embedding_fwd(c.y, ids, c.table, 0, dim);
    free(p), free(a), free(dt), free(c.y), free(c.table), free(c.r);
}

/* ---- heads ----------------------------------------------------------------------------- */

static void test_heads(void) {
    const int64_t B = 2, T = 3, H = 4, D = 5, C = H * D, stride = 3 * C; /* fused qkv rows */
    float *src = tk_rand(B * T * stride, -1, 1), *dst = tk_zeros(B * H * T * D);
    brg_k_split_heads(dst, src + C, B, T, H, D, stride); /* the k slice */
    int ok = 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++)
                    ok &= dst[((b * H + h) * T + t) * D + d] == src[(b * T + t) * stride + C + h * D + d];
    CHECK_MSG(ok, "split_heads layout");

    /* merge is the inverse of split; accumulate adds, and the other columns stay untouched. */
    float *back = tk_rand(B * T * stride, -1, 1), *orig = tk_copy(back, B * T * stride);
    brg_k_merge_heads(back + C, dst, B, T, H, D, stride, false);
    ok = 1;
    for (int64_t i = 0; i < B * T * stride; i++) {
        int64_t col = i % stride;
        ok &= (col >= C && col < 2 * C) ? back[i] == src[i] : back[i] == orig[i];
    }
    CHECK_MSG(ok, "merge_heads(split_heads(x)) != x");
    brg_k_merge_heads(back + C, dst, B, T, H, D, stride, true);
    ok = 1;
    for (int64_t i = 0; i < B * T * stride; i++) {
        int64_t col = i % stride;
        ok &= (col >= C && col < 2 * C) ? back[i] == 2 * src[i] : back[i] == orig[i];
    }
    CHECK_MSG(ok, "merge_heads accumulate");
    brg_k_split_heads(dst, src, 0, T, H, D, stride);
    free(src), free(dst), free(back), free(orig);
}

/* ---- elementwise ----------------------------------------------------------------------- */

static void test_elementwise(void) {
    const int64_t n = 37;
    float *a = tk_rand(n, -1, 1), *b = tk_rand(n, -1, 1), *y = tk_zeros(n), *acc = tk_copy(a, n);
    brg_k_add_fwd(y, a, b, n);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == a[i] + b[i];
    CHECK(ok);
    brg_k_accumulate(acc, false, b, n);
    CHECK(test_max_abs_diff(acc, y, n) == 0.0);
    float *over = tk_zeros(n);
    for (int64_t i = 0; i < n; i++) over[i] = NAN; /* overwrite: what dx held is replaced by dy */
    brg_k_accumulate(over, true, b, n);
    CHECK_MSG(memcmp(over, b, (size_t)n * sizeof *b) == 0, "accumulate with overwrite is not a copy of dy");
    free(over);
    brg_k_scale(y, a, -2.5f, n);
    ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == a[i] * -2.5f;
    CHECK(ok);
    brg_k_add_fwd(a, a, b, n); /* in place */
    CHECK(test_max_abs_diff(a, acc, n) == 0.0);
    brg_k_accumulate(NULL, false, b, n);
    brg_k_scale(y, a, 1.0f, 0);
    free(a), free(b), free(y), free(acc);
}

int main(void) {
    tk_seed(2);
    test_layernorm();
    test_gelu();
    test_softmax();
    test_embedding();
    test_heads();
    test_elementwise();
    return test_finish();
}
