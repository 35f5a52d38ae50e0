/* GEMM throughput on the products of GPT-2 small training: the avx512 kernel against OpenBLAS
 * (as the environment configures it) and whatever brg_gemm dispatches to, single-threaded.
 *
 *   brigade_bench_gemm [--quick]
 *
 * --quick: the LM head's products at n = 256 only, and no separate brg_gemm column.
 *
 * Shapes: for n = B*T rows in {256, 1024} and each (in, out) of the model's linears, the
 * forward y = x @ W (NN), the input gradient dx = dy @ W^T (NT) and the weight gradient
 * dW = x^T @ dy (TN); the tied LM head's three products use its [vocab, 768] layout.
 * Each number is the best of several repetitions: the machine is shared, so the best run is
 * the one least disturbed by others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm_avx512.h"
#include "kernels/kernels.h"

/* Last: OpenBLAS's header pulls in <complex.h>, whose macro I clashes with parameter names. */
#include <cblas.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
    const char *what;
    bool ta, tb;
    int64_t M, N, K;
} shape;

typedef enum impl { IMPL_AVX512, IMPL_OPENBLAS, IMPL_DISPATCH } impl;

static void run(impl which, const shape *s, const float *A, const float *B, float *C) {
    const int64_t lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    switch (which) {
    case IMPL_AVX512:
        brg_gemm_avx512(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        break;
    case IMPL_OPENBLAS:
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, (int)s->M,
                    (int)s->N, (int)s->K, 1.0f, A, (int)lda, B, (int)ldb, 1.0f, C, (int)s->N);
        break;
    case IMPL_DISPATCH:
        brg_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        break;
    }
}

/* Best GFLOP/s of each implementation over repetitions that alternate between them (so load
 * from other users hits all alike) and together take about `budget` seconds (at least 2 each). */
static void measure(const impl *which, int n, const shape *s, const float *A, const float *B, float *C, double budget,
                    double *gflops) {
    double best[3] = {1e30, 1e30, 1e30}, spent = 0.0;
    for (int i = 0; i < n; i++) run(which[i], s, A, B, C); /* warm-up: page faults, packing buffers */
    for (int rep = 0; rep < 50 && (rep < 2 || spent < budget); rep++) {
        for (int i = 0; i < n; i++) {
            double t = now();
            run(which[i], s, A, B, C);
            t = now() - t;
            spent += t;
            if (t < best[i]) best[i] = t;
        }
    }
    const double flops = 2.0 * (double)s->M * (double)s->N * (double)s->K;
    for (int i = 0; i < n; i++) gflops[i] = flops / best[i] * 1e-9;
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const bool have_avx512 = brg_gemm_avx512_supported();
    openblas_set_num_threads(1);
    brg_gemm_set_threads(1);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("brg_gemm backend: %s; OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", brg_gemm_backend(),
           openblas_get_corename(), coretype ? coretype : "unset");
    if (!have_avx512) printf("note: this CPU has no AVX-512; the avx512 column is skipped\n");

    static const int64_t lin[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
    const int64_t rows[2] = {256, 1024}, V = 50257, C = 768;
    shape shapes[64];
    int n = 0;
    for (int r = 0; r < 2; r++) {
        const int64_t m = rows[r];
        for (int l = 0; l < 4; l++) {
            const int64_t in = lin[l][0], out = lin[l][1];
            shapes[n++] = (shape){"fwd  x@W    ", false, false, m, out, in};
            shapes[n++] = (shape){"bwd  dy@W^T ", false, true, m, in, out};
            shapes[n++] = (shape){"bwd  x^T@dy ", true, false, in, out, m};
        }
        if (!quick || m == 256) {
            shapes[n++] = (shape){"head x@E^T  ", false, true, m, V, C};
            shapes[n++] = (shape){"head dy@E   ", false, false, m, C, V};
            shapes[n++] = (shape){"head dy^T@x ", true, false, V, C, m};
        }
    }
    size_t amax = 0, bmax = 0, cmax = 0;
    for (int i = 0; i < n; i++) {
        size_t a = (size_t)(shapes[i].M * shapes[i].K), b = (size_t)(shapes[i].K * shapes[i].N);
        size_t c = (size_t)(shapes[i].M * shapes[i].N);
        amax = a > amax ? a : amax, bmax = b > bmax ? b : bmax, cmax = c > cmax ? c : cmax;
    }
    float *A = malloc(amax * sizeof *A), *B = malloc(bmax * sizeof *B), *Cb = malloc(cmax * sizeof *Cb);
    if (!A || !B || !Cb) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < amax; i++) A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < bmax; i++) B[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    memset(Cb, 0, cmax * sizeof *Cb);

    const double budget = quick ? 0.15 : 0.4;
    double t_avx = 0, t_blas = 0, flops_all = 0;
    printf("\n%-13s %2s %6s %6s %6s | %9s %9s %9s  GFLOP/s\n", "product", "op", "M", "N", "K", "avx512",
           "openblas", "brg_gemm");
    for (int i = 0; i < n; i++) {
        const shape *s = &shapes[i];
        /* brg_gemm is one of the other two; --quick saves the time of measuring it again. */
        impl which[3];
        int n_impl = 0, i_avx = -1, i_blas, i_disp = -1;
        if (have_avx512) i_avx = n_impl, which[n_impl++] = IMPL_AVX512;
        i_blas = n_impl, which[n_impl++] = IMPL_OPENBLAS;
        if (!quick) i_disp = n_impl, which[n_impl++] = IMPL_DISPATCH;
        double g[3];
        measure(which, n_impl, s, A, B, Cb, budget * n_impl, g);
        const double g_avx = i_avx >= 0 ? g[i_avx] : 0.0, g_blas = g[i_blas], g_disp = i_disp >= 0 ? g[i_disp] : 0.0;
        const double f = 2.0 * (double)s->M * (double)s->N * (double)s->K * 1e-9;
        flops_all += f;
        if (have_avx512) t_avx += f / g_avx;
        t_blas += f / g_blas;
        char col[3][16];
        const double gs[3] = {g_avx, g_blas, g_disp};
        for (int c = 0; c < 3; c++) {
            if (gs[c] > 0) snprintf(col[c], sizeof col[c], "%9.1f", gs[c]);
            else snprintf(col[c], sizeof col[c], "%9s", "-");
        }
        printf("%-13s %c%c %6lld %6lld %6lld | %s %s %s\n", s->what, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N',
               (long long)s->M, (long long)s->N, (long long)s->K, col[0], col[1], col[2]);
    }
    /* The time-weighted rate is what a training step sees: big products dominate. */
    printf("\nall products, time-weighted: avx512 %.1f GFLOP/s, openblas %.1f GFLOP/s\n",
           have_avx512 ? flops_all / t_avx : 0.0, flops_all / t_blas);
    free(A), free(B), free(Cb);
    return 0;
}
