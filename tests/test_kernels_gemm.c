/* GEMM, linear and batched matmul: the dispatched path and each of our kernels (avx512, avx2)
 * against the reference on awkward shapes, strides and alpha/beta, the backend choice
 * (BRIGADE_GEMM, BRIGADE_ISA), the reference against hand-computed values, and finite-difference
 * checks of every backward. A kernel the CPU lacks prints a note and its tests are skipped. */
#include <pthread.h>
#include <unistd.h>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
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

/* One of our kernels, called directly, with its blocking (tile MR x NR, depth KC, blocks MC
 * rows and NC columns) so the tests can cross every edge. */
typedef bool kernel_fn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
typedef struct gemm_kernel {
    const char *name;
    kernel_fn *fn;
    bool (*supported)(void);
    int64_t MR, NR, KC, MC, NC;
} gemm_kernel;

static const gemm_kernel kernels[] = {
    {"avx512", brg_gemm_avx512, brg_gemm_avx512_supported, BRG_GEMM_AVX512_MR, BRG_GEMM_AVX512_NR,
     BRG_GEMM_AVX512_KC, BRG_GEMM_AVX512_MC, BRG_GEMM_AVX512_NC},
    {"avx2", brg_gemm_avx2, brg_gemm_avx2_supported, BRG_GEMM_AVX2_MR, BRG_GEMM_AVX2_NR, BRG_GEMM_AVX2_KC,
     BRG_GEMM_AVX2_MC, BRG_GEMM_AVX2_NC},
};

/* The implementation under test: a kernel, or brg_gemm (whatever it dispatches to) when NULL. */
typedef const gemm_kernel *gemm_impl;
#define IMPL_DISPATCH NULL

static void gemm_run(gemm_impl impl, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (impl)
        CHECK(impl->fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
    else
        brg_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Leading-dimension padding of one case: extra elements per row of A, B and C. */
typedef struct pads {
    int64_t a, b, c;
} pads;

/* One random case against the reference. Every buffer starts one float past a 64-byte boundary
 * (the kernel must not assume aligned operands); the padding of C (ldc > N) and the floats just
 * before and after C must stay untouched, and beta == 0 must overwrite NaN in C. Returns false
 * after reporting a mismatch, so loops over many shapes report each failure once. */
static bool gemm_case_full(gemm_impl impl, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                           pads pad) {
    const int64_t lda = (ta ? M : K) + pad.a, ldb = (tb ? K : N) + pad.b, ldc = N + pad.c;
    const int64_t a_rows = ta ? K : M, b_rows = tb ? N : K, nc = M * ldc;
    float *Abuf = tk_rand(a_rows * lda + 16, -1, 1), *Bbuf = tk_rand(b_rows * ldb + 16, -1, 1);
    float *C1buf = tk_rand(nc + 32, -1, 1), *C2 = tk_zeros(nc), *C0 = tk_zeros(nc);
    const float *A = Abuf + 1, *B = Bbuf + 1;
    float *C1 = C1buf + 16;
    if (beta == 0.0f)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C1[i * ldc + j] = NAN;
    memcpy(C2, C1, (size_t)nc * sizeof(float));
    memcpy(C0, C1, (size_t)nc * sizeof(float));
    const float guard_lo = C1[-1], guard_hi = C1[nc];

    gemm_run(impl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    brg_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);

    /* Float accumulation over K terms of size <= |alpha| + |beta| C: a bound that any
     * indexing, packing or edge mistake (an O(1) error) exceeds by orders of magnitude. */
    const double tol = 2e-6 * (double)(K + 1) * (fabs(alpha) + fabs(beta) + 1.0);
    double diff = 0.0;
    bool pad_ok = C1[-1] == guard_lo && C1[nc] == guard_hi;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double d = fabs((double)C1[i * ldc + j] - (double)C2[i * ldc + j]);
            if (!(d <= diff)) diff = d == d ? d : INFINITY;
        }
        for (int64_t j = N; j < ldc; j++) pad_ok &= C1[i * ldc + j] == C0[i * ldc + j];
    }
    bool ok = diff <= tol && pad_ok;
    CHECK_MSG(ok,
              "%s gemm ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pads=%lld/%lld/%lld: diff %.3g (tol %.3g)%s",
              impl ? impl->name : brg_gemm_backend(), ta, tb, (long long)M, (long long)N, (long long)K,
              alpha, beta, (long long)pad.a, (long long)pad.b, (long long)pad.c, diff, tol,
              pad_ok ? "" : "; wrote outside C's rows");
    free(Abuf), free(Bbuf), free(C1buf), free(C2), free(C0);
    return ok;
}

static void gemm_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    gemm_case_full(IMPL_DISPATCH, ta, tb, M, N, K, alpha, beta, (pads){3, 2, 5});
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
}

/* ---- backend choice --------------------------------------------------------------------- */

/* What brg_gemm_backend() must say for a given BRIGADE_GEMM (NULL: unset), on this CPU as
 * BRIGADE_ISA caps it: our best kernel by default (openblas below AVX2); a kernel the CPU lacks
 * gives the best one below it; unknown names keep the default. */
static const char *expected_backend(const char *env) {
    const brg_isa isa = brg_isa_detected();
    const char *best = isa >= BRG_ISA_AVX512 ? "avx512" : isa >= BRG_ISA_AVX2 ? "avx2" : "openblas";
    if (env && (strcmp(env, "openblas") == 0 || strcmp(env, "ref") == 0)) return env;
    if (env && strcmp(env, "avx2") == 0) return isa >= BRG_ISA_AVX2 ? "avx2" : "openblas";
    return best;
}

/* The backend is chosen once per process, so each BRIGADE_GEMM value runs this test binary again
 * in a child that reports its backend and checks a few products against the reference. */
static void test_backend_env(const char *self) {
    CHECK_MSG(strcmp(brg_gemm_backend(), expected_backend(getenv("BRIGADE_GEMM"))) == 0, "backend %s",
              brg_gemm_backend());
    if (!self) return;
    const char *values[] = {"openblas", "avx512", "avx2", "ref", "bogus"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char cmd[4200], line[256] = "";
        snprintf(cmd, sizeof cmd, "BRIGADE_GEMM=%s '%s' --child-backend 2>/dev/null", values[i], self);
        FILE *f = popen(cmd, "r");
        CHECK(f != NULL);
        if (!f) continue;
        if (!fgets(line, sizeof line, f)) line[0] = '\0';
        int rc = pclose(f);
        line[strcspn(line, "\n")] = '\0';
        CHECK_MSG(rc == 0 && strcmp(line, expected_backend(values[i])) == 0,
                  "BRIGADE_GEMM=%s: child said '%s' (exit status %d), wanted '%s'", values[i], line, rc,
                  expected_backend(values[i]));
    }
}

/* The child of test_backend_env: prints the backend, then checks products with it. */
static int child_backend(void) {
    printf("%s\n", brg_gemm_backend());
    fflush(stdout);
    for (int t = 0; t < 4; t++) gemm_case(t & 1, t & 2, 37, 45, 70, 0.5f, t == 0 ? 0.0f : 1.0f);
    return test_failed_ ? 1 : 0;
}


/* ---- our kernels, called directly ------------------------------------------------------ */

/* Every combination of small sizes around the tile edges (MR rows, NR columns and their halves,
 * vector widths), all four transposes, with alpha/beta and leading-dimension padding varied. */
static void test_kernel_small_shapes(const gemm_kernel *k) {
    const int64_t MR = k->MR, NR = k->NR;
    /* Below, at and past one and two tiles, and the sizes that reach each shorter edge tile. */
    const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, MR / 2, MR - 1, MR, MR + 1, MR + 2, MR + 4, 2 * MR - 1, 2 * MR + 1, 33};
    const int64_t ns[] = {1, 7, 8, 9, NR / 2 - 1, NR / 2 + 1, NR - 1, NR, NR + 1, 2 * NR - 1, 2 * NR + 1, 65};
    const int64_t ks[] = {1, 2, 7, 8, 9, 15, 16, 17, 33};
    const float alphas[] = {1.0f, -0.75f, 2.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f, 0.25f};
    const pads padv[] = {{0, 0, 0}, {1, 3, 2}, {17, 5, 16}};
    int n = 0, failed = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (int t = 0; t < 4 && failed < 10; t++, n++)
                    failed += !gemm_case_full(k, t & 1, t & 2, ms[mi], ns[ni], ks[ki], alphas[n % 3],
                                              betas[(n / 3) % 4], padv[(n / 12) % 3]);
}

/* Shapes that cross the cache blocks (KC in depth, MC rows, NC columns, once and several
 * times) and the awkward sizes 255 and 1000. */
static void test_kernel_block_edges(const gemm_kernel *k) {
    const int64_t KC = k->KC, MC = k->MC, NC = k->NC;
    const int64_t shapes[][3] = {
        {255, 33, 1000},   {1000, 17, 255},   {33, 1000, 15},   {MC + 1, 40, KC + 1}, {MC - 1, 33, 2 * KC + 3},
        {2 * MC + 15, 31, 3}, {9, NC + 33, 20}, {3, NC - 1, KC}, {20, 2 * NC + 5, 50},  {16, 16, 16},
        {64, 96, 64},
    };
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            gemm_case_full(k, t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, betas[(s + t) % 3],
                           (pads){(int64_t)(s % 3), (int64_t)(t * 7), (int64_t)(s & 1)});
}

/* Degenerate products through the kernel itself: C = beta * C, beta == 0 clears NaN, nothing
 * is touched for M == 0 or N == 0. */
static void test_kernel_degenerate(const gemm_kernel *k) {
    float A[8] = {1, 2, 3, 4, 5, 6, 7, 8}, B[8] = {1, 2, 3, 4, 5, 6, 7, 8}, C[6];
    for (int i = 0; i < 6; i++) C[i] = NAN;
    CHECK(k->fn(false, false, 2, 3, 0, 1.0f, A, 1, B, 3, 0.0f, C, 3));
    int zero = 1;
    for (int i = 0; i < 6; i++) zero &= C[i] == 0.0f;
    CHECK_MSG(zero, "%s: K == 0, beta == 0 must zero C", k->name);
    for (int i = 0; i < 6; i++) C[i] = 2.0f;
    CHECK(k->fn(true, true, 2, 3, 2, 0.0f, A, 2, B, 2, 0.5f, C, 3));
    CHECK(C[0] == 1.0f && C[5] == 1.0f); /* alpha == 0: C = beta * C */
    CHECK(k->fn(false, false, 0, 3, 2, 1.0f, A, 2, B, 3, 0.0f, C, 3));
    CHECK(k->fn(false, false, 2, 0, 2, 1.0f, A, 2, B, 1, 0.0f, C, 1));
    CHECK(C[0] == 1.0f && C[5] == 1.0f);
}

/* Each element keeps its loop over K whatever the shape: a product computed in row slices and
 * in column slices equals the whole product bit for bit (what lets a device's team split it). */
static void test_kernel_split_exact(const gemm_kernel *k) {
    const int64_t M = 2 * k->MR + 5, N = 3 * k->NR + 3, K = 2 * k->KC + 7;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        float *A = tk_rand(M * K, -1, 1), *B = tk_rand(K * N, -1, 1), *C0 = tk_rand(M * N, -1, 1);
        float *whole = tk_zeros(M * N), *rows = tk_zeros(M * N), *cols = tk_zeros(M * N);
        memcpy(whole, C0, (size_t)(M * N) * sizeof(float));
        memcpy(rows, C0, (size_t)(M * N) * sizeof(float));
        memcpy(cols, C0, (size_t)(M * N) * sizeof(float));
        CHECK(k->fn(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, whole, N));
        const int64_t cut_m[] = {0, 1, k->MR + 2, M}, cut_n[] = {0, 5, k->NR + 1, N};
        for (int s = 0; s < 3; s++) {
            const int64_t r0 = cut_m[s], r1 = cut_m[s + 1], c0 = cut_n[s], c1 = cut_n[s + 1];
            CHECK(k->fn(ta, tb, r1 - r0, N, K, 0.5f, ta ? A + r0 : A + r0 * lda, lda, B, ldb, 1.0f, rows + r0 * N, N));
            CHECK(k->fn(ta, tb, M, c1 - c0, K, 0.5f, A, lda, tb ? B + c0 * ldb : B + c0, ldb, 1.0f, cols + c0, N));
        }
        CHECK_MSG(memcmp(whole, rows, (size_t)(M * N) * sizeof(float)) == 0, "%s ta=%d tb=%d: row slices differ",
                  k->name, ta, tb);
        CHECK_MSG(memcmp(whole, cols, (size_t)(M * N) * sizeof(float)) == 0, "%s ta=%d tb=%d: column slices differ",
                  k->name, ta, tb);
        free(A), free(B), free(C0), free(whole), free(rows), free(cols);
    }
}

/* Threads each keep their own packing buffers: concurrent products must not interfere. */
typedef struct thread_job {
    const gemm_kernel *k;
    int64_t M, N, K;
    bool ok;
} thread_job;

static void *thread_main(void *p) {
    thread_job *j = p;
    const int64_t M = j->M, N = j->N, K = j->K;
    float *A = malloc((size_t)(M * K) * sizeof(float)), *B = malloc((size_t)(K * N) * sizeof(float));
    float *C1 = malloc((size_t)(M * N) * sizeof(float)), *C2 = malloc((size_t)(M * N) * sizeof(float));
    uint64_t s = (uint64_t)(M * 131 + N);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)((s = s * 6364136223846793005ULL + 1) >> 40) * 0x1p-24f - 0.5f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)((s = s * 6364136223846793005ULL + 1) >> 40) * 0x1p-24f - 0.5f;
    j->ok = true;
    for (int rep = 0; rep < 3; rep++) {
        j->ok &= j->k->fn(rep & 1, false, M, N, K, 1.0f, A, (rep & 1) ? M : K, B, N, 0.0f, C1, N);
        brg_gemm_ref(rep & 1, false, M, N, K, 1.0f, A, (rep & 1) ? M : K, B, N, 0.0f, C2, N);
        for (int64_t i = 0; i < M * N; i++) j->ok &= fabs((double)C1[i] - (double)C2[i]) <= 2e-6 * (double)(K + 1);
    }
    free(A), free(B), free(C1), free(C2);
    return NULL;
}

static void test_kernel_threads(const gemm_kernel *k) {
    thread_job jobs[3] = {{k, 70, 90, 300, false}, {k, 200, 40, 100, false}, {k, 33, 65, 17, false}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, thread_main, &jobs[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_MSG(jobs[i].ok, "%s on thread %d differs from the reference", k->name, i);
}

static void test_kernels(void) {
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        const gemm_kernel *k = &kernels[i];
        if (!k->supported()) {
            printf("note: this CPU lacks the instructions of the %s GEMM; its tests are skipped\n", k->name);
            continue;
        }
        test_kernel_small_shapes(k);
        test_kernel_block_edges(k);
        test_kernel_degenerate(k);
        test_kernel_split_exact(k);
        test_kernel_threads(k);
    }
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
    brg_k_linear_bwd(dx, false, dw, false, db, c.r, c.x, c.w, n, in, out, w_in_out);
    tk_gradcheck("linear dx", &c, linear_loss, c.x, n * in, dx);
    tk_gradcheck("linear dw", &c, linear_loss, c.w, in * out, dw);
    if (bias) tk_gradcheck("linear db", &c, linear_loss, c.b, out, db);

    /* Accumulation into pre-filled gradients, and NULL gradients skipped. */
    float *px = tk_rand(n * in, -1, 1), *pw = tk_rand(in * out, -1, 1), *pb = tk_rand(out, -1, 1);
    float *ax = tk_copy(px, n * in), *aw = tk_copy(pw, in * out), *ab = tk_copy(pb, out);
    brg_k_linear_bwd(ax, false, NULL, false, NULL, c.r, c.x, c.w, n, in, out, w_in_out);
    brg_k_linear_bwd(NULL, false, aw, false, bias ? ab : NULL, c.r, c.x, c.w, n, in, out, w_in_out);
    tk_check_accumulated("linear dx", ax, px, dx, n * in);
    tk_check_accumulated("linear dw", aw, pw, dw, in * out);
    if (bias) tk_check_accumulated("linear db", ab, pb, db, out);
    /* dx_overwrite, dw_overwrite: whatever the buffer held (NaN here) is replaced by the gradient
     * itself. */
    for (int64_t i = 0; i < in * out; i++) aw[i] = NAN;
    for (int64_t i = 0; i < n * in; i++) ax[i] = NAN;
    brg_k_linear_bwd(ax, true, aw, true, NULL, c.r, c.x, c.w, n, in, out, w_in_out);
    CHECK_MSG(memcmp(aw, dw, (size_t)(in * out) * sizeof *aw) == 0, "linear dw overwrite n=%lld in=%lld out=%lld",
              (long long)n, (long long)in, (long long)out);
    CHECK_MSG(memcmp(ax, dx, (size_t)(n * in) * sizeof *ax) == 0, "linear dx overwrite n=%lld in=%lld out=%lld",
              (long long)n, (long long)in, (long long)out);
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
    brg_k_linear_bwd(NULL, false, NULL, false, db, dy, NULL, NULL, n, 0, out, true);
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

int main(int argc, char **argv) {
    tk_seed(1);
    if (argc > 1 && strcmp(argv[1], "--child-backend") == 0) return child_backend();
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) self[len] = '\0';
    test_gemm_ref_known_values();
    test_gemm_vs_ref();
    test_gemm_beta_zero_overwrites_nan();
    test_gemm_empty();
    test_kernels();
    test_backend_env(len > 0 ? self : NULL);
    test_linear();
    test_linear_bias_grad_many_rows();
    test_bmm();
    return test_finish();
}
