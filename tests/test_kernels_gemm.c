/* GEMM, linear and batched matmul: the BLAS path against the reference, the reference against
 * hand-computed values, and finite-difference checks of every backward. */
#include "test_kernels_util.h"

/* ---- gemm ------------------------------------------------------------------------------ */

static void test_gemm_ref_known_values(void) {
    /* [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]] */
    const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1};
    float C[4] = {1, 1, 1, 1};
    brg_gemm_ref(false, false, 2, 2, 3, 2.0f, A, 3, B, 2, 0.5f, C, 2);
    CHECK_NEAR(C[0], 8.5, 0);
    CHECK_NEAR(C[1], 10.5, 0);
    CHECK_NEAR(C[2], 20.5, 0);
    CHECK_NEAR(C[3], 22.5, 0);
    /* The same product with both operands stored transposed. */
    const float At[6] = {1, 4, 2, 5, 3, 6}, Bt[6] = {1, 0, 1, 0, 1, 1};
    brg_gemm_ref(true, true, 2, 2, 3, 1.0f, At, 2, Bt, 3, 0.0f, C, 2);
    CHECK_NEAR(C[0], 4, 0);
    CHECK_NEAR(C[3], 11, 0);
    brg_gemm(true, true, 2, 2, 3, 1.0f, At, 2, Bt, 3, 0.0f, C, 2);
    CHECK_NEAR(C[1], 5, 0);
    CHECK_NEAR(C[2], 10, 0);
}

/* One random case with padded leading dimensions; the padding of C must stay untouched. */
static void gemm_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
    const int64_t a_rows = ta ? K : M, b_rows = tb ? N : K;
    float *A = tk_rand(a_rows * lda, -1, 1), *B = tk_rand(b_rows * ldb, -1, 1);
    float *C1 = tk_rand(M * ldc, -1, 1), *C2 = tk_copy(C1, M * ldc), *C0 = tk_copy(C1, M * ldc);
    brg_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    brg_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
    double diff = test_max_abs_diff(C1, C2, M * ldc);
    CHECK_MSG(diff <= 1e-5 * (1.0 + K), "gemm ta=%d tb=%d M=%lld N=%lld K=%lld beta=%g: diff %.3g", ta, tb,
              (long long)M, (long long)N, (long long)K, beta, diff);
    int pad_ok = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++) pad_ok &= C1[i * ldc + j] == C0[i * ldc + j];
    CHECK_MSG(pad_ok, "gemm wrote into the padding of C (ldc > N)");
    free(A), free(B), free(C0), free(C1), free(C2);
}

static void test_gemm_vs_ref(void) {
    const int64_t sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 17, 1}, {1, 33, 9}, {31, 1, 65}, {64, 48, 130}};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (int t = 0; t < 4; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t b = 0; b < 3; b++)
                gemm_case(t & 1, t & 2, sizes[s][0], sizes[s][1], sizes[s][2], 1.5f, betas[b]);
}

/* beta == 0 means "do not read C": NaN garbage must be overwritten, not propagated. */
static void test_gemm_beta_zero_overwrites_nan(void) {
    const int64_t M = 5, N = 6, K = 4;
    float *A = tk_rand(M * K, -1, 1), *B = tk_rand(K * N, -1, 1);
    float C1[30], C2[30];
    for (int i = 0; i < 30; i++) C1[i] = C2[i] = NAN;
    brg_gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    brg_gemm_ref(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N);
    CHECK(test_max_abs_diff(C1, C2, 30) < 1e-5);
    /* K == 0: the product is empty, so C = beta * C; beta 0 still clears NaN. */
    for (int i = 0; i < 30; i++) C1[i] = C2[i] = NAN;
    brg_gemm(false, false, M, N, 0, 1.0f, A, 1, B, N, 0.0f, C1, N);
    brg_gemm_ref(false, false, M, N, 0, 1.0f, A, 1, B, N, 0.0f, C2, N);
    int zero = 1;
    for (int i = 0; i < 30; i++) zero &= C1[i] == 0.0f && C2[i] == 0.0f;
    CHECK_MSG(zero, "K == 0, beta == 0 must zero C");
    for (int i = 0; i < 30; i++) C1[i] = C2[i] = 2.0f;
    brg_gemm(true, true, M, N, 0, 1.0f, A, M, B, 1, 0.25f, C1, N);
    brg_gemm_ref(true, true, M, N, 0, 1.0f, A, M, B, 1, 0.25f, C2, N);
    CHECK(C1[29] == 0.5f && C2[29] == 0.5f);
    free(A), free(B);
}

static void test_gemm_empty(void) {
    float A[4] = {1, 2, 3, 4}, B[4] = {1, 2, 3, 4}, C[4] = {7, 7, 7, 7};
    brg_gemm(false, false, 0, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
    brg_gemm(false, false, 2, 0, 2, 1.0f, A, 2, B, 0, 0.0f, C, 0);
    brg_gemm_ref(false, false, 0, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
    CHECK(C[0] == 7 && C[3] == 7);
    CHECK(strcmp(brg_gemm_backend(), "openblas") == 0);
}

/* ---- linear ---------------------------------------------------------------------------- */

typedef struct linear_ctx {
    float *y, *x, *w, *b, *r;
    int64_t n, in, out;
    bool w_in_out;
} linear_ctx;

static double linear_loss(void *p) {
    linear_ctx *c = p;
    brg_k_linear_fwd(c->y, c->x, c->w, c->b, c->n, c->in, c->out, c->w_in_out);
    return tk_dot(c->y, c->r, c->n * c->out);
}

static double w_at(const linear_ctx *c, int64_t i, int64_t o) {
    return c->w_in_out ? c->w[i * c->out + o] : c->w[o * c->in + i];
}

static void linear_case(int64_t n, int64_t in, int64_t out, bool w_in_out, bool bias) {
    linear_ctx c = {tk_zeros(n * out), tk_rand(n * in, -1, 1), tk_rand(in * out, -1, 1),
                    bias ? tk_rand(out, -1, 1) : NULL, tk_rand(n * out, -1, 1), n, in, out, w_in_out};
    /* Forward against a double-precision loop; the output buffer starts as NaN garbage. */
    for (int64_t i = 0; i < n * out; i++) c.y[i] = NAN;
    brg_k_linear_fwd(c.y, c.x, c.w, c.b, n, in, out, w_in_out);
    double err = 0.0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = c.b ? c.b[o] : 0.0;
            for (int64_t i = 0; i < in; i++) acc += (double)c.x[r * in + i] * w_at(&c, i, o);
            err = fmax(err, fabs(acc - c.y[r * out + o]));
        }
    CHECK_MSG(err < 1e-5, "linear fwd n=%lld in=%lld out=%lld w_in_out=%d: %.3g", (long long)n, (long long)in,
              (long long)out, w_in_out, err);

    float *dx = tk_zeros(n * in), *dw = tk_zeros(in * out), *db = bias ? tk_zeros(out) : NULL;
    brg_k_linear_bwd(dx, dw, db, c.r, c.x, c.w, n, in, out, w_in_out);
    tk_gradcheck("linear dx", &c, linear_loss, c.x, n * in, dx);
    tk_gradcheck("linear dw", &c, linear_loss, c.w, in * out, dw);
    if (bias) tk_gradcheck("linear db", &c, linear_loss, c.b, out, db);

    /* Accumulation into pre-filled gradients, and NULL gradients skipped. */
    float *px = tk_rand(n * in, -1, 1), *pw = tk_rand(in * out, -1, 1), *pb = tk_rand(out, -1, 1);
    float *ax = tk_copy(px, n * in), *aw = tk_copy(pw, in * out), *ab = tk_copy(pb, out);
    brg_k_linear_bwd(ax, NULL, NULL, c.r, c.x, c.w, n, in, out, w_in_out);
    brg_k_linear_bwd(NULL, aw, bias ? ab : NULL, c.r, c.x, c.w, n, in, out, w_in_out);
    tk_check_accumulated("linear dx", ax, px, dx, n * in);
    tk_check_accumulated("linear dw", aw, pw, dw, in * out);
    if (bias) tk_check_accumulated("linear db", ab, pb, db, out);
    free(px), free(pw), free(pb), free(ax), free(aw), free(ab);
    free(dx), free(dw), free(db);
    free(c.y), free(c.x), free(c.w), free(c.b), free(c.r);
}

static void test_linear(void) {
    const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {9, 13, 11}, {0, 4, 3}, {3, 1, 6}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int layout = 0; layout < 2; layout++)
            for (int bias = 0; bias < 2; bias++) linear_case(sizes[s][0], sizes[s][1], sizes[s][2], layout, bias);
}

/* A bias gradient summed over many rows stays accurate (it is reduced in double). */
static void test_linear_bias_grad_many_rows(void) {
    const int64_t n = 20000, out = 3;
    float *dy = tk_zeros(n * out), *db = tk_zeros(out);
    for (int64_t i = 0; i < n * out; i++) dy[i] = 0.1f;
    brg_k_linear_bwd(NULL, NULL, db, dy, NULL, NULL, n, 0, out, true);
    CHECK_NEAR(db[0], (double)0.1f * n, 2e-4); /* float accumulation would be off by ~1e-2 */
    free(dy), free(db);
}

/* ---- bmm ------------------------------------------------------------------------------- */

typedef struct bmm_ctx {
    float *c, *a, *b, *r;
    int64_t batch, M, N, K;
    bool ta, tb;
} bmm_ctx;

static double bmm_loss(void *p) {
    bmm_ctx *c = p;
    brg_k_bmm_fwd(c->c, c->a, c->b, c->batch, c->M, c->N, c->K, c->ta, c->tb);
    return tk_dot(c->c, c->r, c->batch * c->M * c->N);
}

static void bmm_case(int64_t batch, int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
    const int64_t na = batch * M * K, nb = batch * K * N, nc = batch * M * N;
    bmm_ctx c = {tk_zeros(nc), tk_rand(na, -1, 1), tk_rand(nb, -1, 1), tk_rand(nc, -1, 1), batch, M, N, K, ta, tb};
    for (int64_t i = 0; i < nc; i++) c.c[i] = NAN; /* overwritten, never read */
    brg_k_bmm_fwd(c.c, c.a, c.b, batch, M, N, K, ta, tb);
    float *ref = tk_zeros(nc);
    for (int64_t i = 0; i < batch; i++)
        brg_gemm_ref(ta, tb, M, N, K, 1.0f, c.a + i * M * K, ta ? M : K, c.b + i * K * N, tb ? K : N, 0.0f,
                     ref + i * M * N, N);
    CHECK_MSG(test_max_abs_diff(c.c, ref, nc) < 1e-5, "bmm fwd ta=%d tb=%d", ta, tb);

    float *da = tk_zeros(na), *db = tk_zeros(nb);
    brg_k_bmm_bwd(da, db, c.r, c.a, c.b, batch, M, N, K, ta, tb);
    tk_gradcheck(ta ? (tb ? "bmm da (tt)" : "bmm da (tn)") : (tb ? "bmm da (nt)" : "bmm da (nn)"), &c, bmm_loss, c.a,
                 na, da);
    tk_gradcheck(ta ? (tb ? "bmm db (tt)" : "bmm db (tn)") : (tb ? "bmm db (nt)" : "bmm db (nn)"), &c, bmm_loss, c.b,
                 nb, db);

    float *pa = tk_rand(na, -1, 1), *aa = tk_copy(pa, na);
    brg_k_bmm_bwd(aa, NULL, c.r, c.a, c.b, batch, M, N, K, ta, tb);
    tk_check_accumulated("bmm da", aa, pa, da, na);
    free(pa), free(aa), free(da), free(db), free(ref);
    free(c.c), free(c.a), free(c.b), free(c.r);
}

static void test_bmm(void) {
    for (int t = 0; t < 4; t++) {
        bmm_case(3, 4, 5, 6, t & 1, t & 2);
        bmm_case(2, 1, 7, 3, t & 1, t & 2);
        bmm_case(1, 5, 1, 1, t & 1, t & 2);
        bmm_case(0, 3, 3, 3, t & 1, t & 2);
    }
}

int main(void) {
    tk_seed(1);
    test_gemm_ref_known_values();
    test_gemm_vs_ref();
    test_gemm_beta_zero_overwrites_nan();
    test_gemm_empty();
    test_linear();
    test_linear_bias_grad_many_rows();
    test_bmm();
    return test_finish();
}
