/* Encoder-decoder (T5) kernels: RMS norm, ReLU, product and the relative position bias against
 * double-precision formulas and central differences; relative position buckets against values
 * transformers computes; and the op wrappers' checks. */
#include "test_kernels_util.h"

/* ---- RMS norm ---- */

typedef struct rms_ctx {
    float *y, *rstd, *x, *w, *r;
    int64_t n, c;
    float eps;
} rms_ctx;

static double rms_loss(void *p) {
    rms_ctx *c = p;
    brg_k_rmsnorm_fwd(c->y, c->rstd, c->x, c->w, c->n, c->c, c->eps);
    return tk_dot(c->y, c->r, c->n * c->c);
}

static double rms_fwd_err(const rms_ctx *c) {
    double err = 0.0;
    for (int64_t i = 0; i < c->n; i++) {
        const float *x = c->x + i * c->c;
        double ss = 0.0;
        for (int64_t j = 0; j < c->c; j++) ss += (double)x[j] * x[j];
        double r = 1.0 / sqrt(ss / (double)c->c + c->eps);
        err = fmax(err, fabs(c->rstd[i] - r) / r);
        for (int64_t j = 0; j < c->c; j++) err = fmax(err, fabs(c->w[j] * x[j] * r - c->y[i * c->c + j]));
    }
    return err;
}

static void rmsnorm_case(int64_t n, int64_t cols, double offset) {
    rms_ctx c = {tk_zeros(n * cols), tk_zeros(n), tk_rand(n * cols, offset - 1, offset + 1), tk_rand(cols, 0.5, 1.5),
                 tk_rand(n * cols, -1, 1), n, cols, 1e-6f};
    brg_k_rmsnorm_fwd(c.y, c.rstd, c.x, c.w, n, cols, c.eps);
    double err = rms_fwd_err(&c);
    CHECK_MSG(err < 2e-5, "rmsnorm fwd n=%lld c=%lld offset=%g: %.3g", (long long)n, (long long)cols, offset, err);
    float *dx = tk_zeros(n * cols), *dw = tk_zeros(cols);
    brg_k_rmsnorm_bwd(dx, dw, c.r, c.x, c.w, c.rstd, n, cols);
    tk_gradcheck("rmsnorm dx", &c, rms_loss, c.x, n * cols, dx);
    tk_gradcheck("rmsnorm dw", &c, rms_loss, c.w, cols, dw);
    float *pw = tk_rand(cols, -1, 1), *aw = tk_copy(pw, cols), *px = tk_rand(n * cols, -1, 1);
    float *ax = tk_copy(px, n * cols);
    brg_k_rmsnorm_bwd(NULL, aw, c.r, c.x, c.w, c.rstd, n, cols);
    brg_k_rmsnorm_bwd(ax, NULL, c.r, c.x, c.w, c.rstd, n, cols);
    tk_check_accumulated("rmsnorm dw", aw, pw, dw, cols);
    tk_check_accumulated("rmsnorm dx", ax, px, dx, n * cols);
    free(pw), free(aw), free(px), free(ax), free(dx), free(dw);
    free(c.y), free(c.rstd), free(c.x), free(c.w), free(c.r);
}

static void test_rmsnorm(void) {
    const int64_t sizes[][2] = {{1, 1}, {1, 2}, {3, 7}, {4, 33}, {0, 5}, {2, 70}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        rmsnorm_case(sizes[s][0], sizes[s][1], 0.0);
        rmsnorm_case(sizes[s][0], sizes[s][1], 3.0); /* no mean is subtracted: an offset matters */
    }
    /* A zero row stays finite thanks to eps. */
    float x[4] = {0}, w[4] = {1, 1, 1, 1}, y[4], r;
    brg_k_rmsnorm_fwd(y, &r, x, w, 1, 4, 1e-6f);
    CHECK(y[0] == 0.0f && isfinite(r));
}

/* ---- ReLU and product ---- */

typedef struct unary_ctx {
    float *y, *a, *b, *r;
    int64_t n;
    bool mul;
} unary_ctx;

static double unary_loss(void *p) {
    unary_ctx *c = p;
    if (c->mul) brg_k_mul_fwd(c->y, c->a, c->b, c->n);
    else brg_k_relu_fwd(c->y, c->a, c->n);
    return tk_dot(c->y, c->r, c->n);
}

static void test_relu(void) {
    const int64_t n = 301;
    unary_ctx c = {tk_zeros(n), tk_rand(n, -3, 3), NULL, tk_rand(n, -1, 1), n, false};
    /* Keep entries away from the kink, where central differences straddle it. */
    for (int64_t i = 0; i < n; i++)
        if (fabsf(c.a[i]) < 0.01f) c.a[i] = 0.5f;
    brg_k_relu_fwd(c.y, c.a, n);
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(c.y[i] - fmax(c.a[i], 0.0)));
    CHECK_MSG(err == 0.0, "relu fwd err %.3g", err);
    float *dx = tk_zeros(n);
    brg_k_relu_bwd(dx, false, c.r, c.a, n);
    tk_gradcheck("relu dx", &c, unary_loss, c.a, n, dx);
    float *p = tk_rand(n, -1, 1), *acc = tk_copy(p, n);
    brg_k_relu_bwd(acc, false, c.r, c.a, n);
    tk_check_accumulated("relu dx", acc, p, dx, n);
    for (int64_t i = 0; i < n; i++) acc[i] = NAN; /* overwrite: what the buffer held is replaced */
    brg_k_relu_bwd(acc, true, c.r, c.a, n);
    CHECK_MSG(memcmp(acc, dx, (size_t)n * sizeof *acc) == 0, "relu dx overwrite differs from the accumulated one");
    float zero = 0.0f, one = 1.0f, g = 0.0f;
    brg_k_relu_bwd(&g, false, &one, &zero, 1);
    CHECK_MSG(g == 0.0f, "relu gradient at 0 is %g, torch gives 0", g);
    brg_k_relu_bwd(NULL, false, c.r, c.a, n);
    free(p), free(acc), free(dx), free(c.y), free(c.a), free(c.r);
}

static void test_mul(void) {
    const int64_t n = 97;
    unary_ctx c = {tk_zeros(n), tk_rand(n, -2, 2), tk_rand(n, -2, 2), tk_rand(n, -1, 1), n, true};
    brg_k_mul_fwd(c.y, c.a, c.b, n);
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(c.y[i] - (double)c.a[i] * c.b[i]));
    CHECK_MSG(err < 1e-6, "mul fwd err %.3g", err);
    float *da = tk_zeros(n), *db = tk_zeros(n);
    brg_k_mul_bwd(da, db, c.r, c.a, c.b, n);
    tk_gradcheck("mul da", &c, unary_loss, c.a, n, da);
    tk_gradcheck("mul db", &c, unary_loss, c.b, n, db);
    float *p = tk_rand(n, -1, 1), *acc = tk_copy(p, n);
    brg_k_mul_bwd(NULL, acc, c.r, c.a, c.b, n);
    tk_check_accumulated("mul db", acc, p, db, n);
    free(p), free(acc), free(da), free(db), free(c.y), free(c.a), free(c.b), free(c.r);
}

/* ---- relative position buckets ---- */

/* transformers' T5Attention._relative_position_bucket on these relative positions (printed by
 * torch 2.x): the points where the logarithmic formula is exactly an integer (16, 32, 64 with 32
 * buckets over 128) only come out right in float32 arithmetic. */
static const int rel_pos[] = {-200, -130, -128, -127, -91, -90, -64, -63, -45, -33, -32, -31, -23, -22, -17, -16, -15,
                              -12,  -11,  -9,   -8,   -7,  -4,  -1,  0,   1,   4,   7,   8,   9,   11,  12,  15,
                              16,   17,   22,   23,   31,  32,  33,  45,  63,  64,  65,  90,  91,  127, 128, 200};
enum { N_REL = sizeof rel_pos / sizeof rel_pos[0] };
static const int bidir_32_128[N_REL] = {15, 15, 15, 15, 15, 14, 14, 13, 12, 12, 12, 11, 11, 10, 10, 10, 9,
                                        9,  8,  8,  8,  7,  4,  1,  0,  17, 20, 23, 24, 24, 24, 25, 25,
                                        26, 26, 26, 27, 27, 28, 28, 28, 29, 30, 30, 30, 31, 31, 31, 31};
static const int causal_32_128[N_REL] = {31, 31, 31, 31, 29, 29, 26, 26, 23, 21, 21, 21, 18, 18, 16, 16, 15,
                                         12, 11, 9,  8,  7,  4,  1,  0,  0,  0,  0,  0,  0,  0,  0,  0,
                                         0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0};
static const int bidir_8_12[N_REL] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 1, 0,
                                      5, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
static const int causal_8_12[N_REL] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 4, 1, 0,
                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

static void check_buckets(const char *what, const int *want, bool bidir, int64_t nb, int64_t md) {
    int bad = 0;
    for (int i = 0; i < N_REL; i++) {
        int32_t got = brg_k_relative_position_bucket(rel_pos[i], bidir, nb, md);
        if (got != want[i] && bad++ < 3)
            fprintf(stderr, "%s: relative position %d -> bucket %d, transformers %d\n", what, rel_pos[i], got, want[i]);
    }
    CHECK_MSG(bad == 0, "%s: %d buckets differ from transformers", what, bad);
}

static void test_buckets(void) {
    check_buckets("bidirectional 32/128", bidir_32_128, true, 32, 128);
    check_buckets("causal 32/128", causal_32_128, false, 32, 128);
    check_buckets("bidirectional 8/12", bidir_8_12, true, 8, 12);
    check_buckets("causal 8/12", causal_8_12, false, 8, 12);
    /* The [Tq, Tk] table is the bucket of (j - i), for Tq != Tk too. */
    const int64_t Tq = 5, Tk = 9;
    int32_t table[5 * 9];
    brg_k_relative_position_buckets(table, Tq, Tk, true, 32, 128);
    int bad = 0;
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++)
            bad += table[i * Tk + j] != brg_k_relative_position_bucket(j - i, true, 32, 128);
    CHECK(bad == 0);
}

/* ---- relative position bias ---- */

typedef struct relpos_ctx {
    float *bias, *table, *r;
    const int32_t *buckets;
    int64_t H, Tq, Tk;
} relpos_ctx;

static double relpos_loss(void *p) {
    relpos_ctx *c = p;
    brg_k_relpos_bias_fwd(c->bias, c->table, c->buckets, c->H, c->Tq, c->Tk);
    return tk_dot(c->bias, c->r, c->H * c->Tq * c->Tk);
}

static void test_relpos_bias(void) {
    const int64_t H = 3, Tq = 6, Tk = 7, NB = 8, n = H * Tq * Tk;
    int32_t buckets[6 * 7];
    brg_k_relative_position_buckets(buckets, Tq, Tk, false, NB, 12);
    relpos_ctx c = {tk_zeros(n), tk_rand(NB * H, -1, 1), tk_rand(n, -1, 1), buckets, H, Tq, Tk};
    brg_k_relpos_bias_fwd(c.bias, c.table, buckets, H, Tq, Tk);
    int bad = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t p = 0; p < Tq * Tk; p++) bad += c.bias[h * Tq * Tk + p] != c.table[buckets[p] * H + h];
    CHECK_MSG(bad == 0, "relative position bias: %d entries are not table[bucket, head]", bad);
    float *dt = tk_zeros(NB * H);
    brg_k_relpos_bias_bwd(dt, c.r, buckets, H, Tq, Tk);
    tk_gradcheck("relative position bias dtable", &c, relpos_loss, c.table, NB * H, dt);
    float *p = tk_rand(NB * H, -1, 1), *acc = tk_copy(p, NB * H);
    brg_k_relpos_bias_bwd(acc, c.r, buckets, H, Tq, Tk);
    tk_check_accumulated("relative position bias dtable", acc, p, dt, NB * H);
    free(p), free(acc), free(dt), free(c.bias), free(c.table), free(c.r);
}

/* ---- op wrappers ---- */

static void test_ops(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("ops", 0, &a));
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *x, *w, *y, *buckets, *table, *bias;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, "x", &x));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 1, (int64_t[]){5}, "w", &w));
    CHECK_ERR(brg_rms_norm(tape, x, w, 1e-6f, &y), BRG_ERR_INVALID_ARG, "width is 4");
    CHECK_ERR(brg_mul(tape, x, w, &y), BRG_ERR_INVALID_ARG, "differ");
    CHECK_ERR(brg_relative_position_buckets(tape, 3, 3, true, 2, 10, &buckets), BRG_ERR_INVALID_ARG,
              "at least 4");
    CHECK_ERR(brg_relative_position_buckets(tape, 3, 3, true, 32, 16, &buckets), BRG_ERR_INVALID_ARG,
              "greater than half");
    CHECK_OK(brg_relative_position_buckets(tape, 3, 4, true, 8, 12, &buckets));
    CHECK(buckets->dtype == BRG_DTYPE_I32 && buckets->shape[0] == 3 && buckets->shape[1] == 4);
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, (int64_t[]){4, 2}, "small table", &table));
    CHECK_ERR(brg_relative_position_bias(tape, table, buckets, &bias), BRG_ERR_INVALID_ARG, "small table");
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, (int64_t[]){8, 2}, "table", &table));
    CHECK_OK(brg_relative_position_bias(tape, table, buckets, &bias));
    CHECK(bias->ndim == 3 && bias->shape[0] == 2 && bias->shape[1] == 3 && bias->shape[2] == 4);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

int main(void) {
    tk_seed(42);
    test_rmsnorm();
    test_relu();
    test_mul();
    test_buckets();
    test_relpos_bias();
    test_ops();
    return test_finish();
}
