/* GEMM throughput on the products of GPT-2 small / BERT-base and T5-small training: our kernels
 * (avx512, avx2; those the CPU has) against OpenBLAS (as the environment configures it) and
 * whatever brg_gemm dispatches to, single-threaded.
 *
 *   brigade_bench_gemm [--quick | --half]
 *
 * --quick: the LM head's products at n = 256 only, no T5 shapes, no separate brg_gemm column.
 * --half: the GPT-2 products with half-precision operands (brg_gemm_half's kernels, fp32
 *         accumulation and output) next to the fp32 kernel of the same ISA: both operands bf16
 *         through VDPBF16PS (avx512bf16) and through the AMX tiles (amxbf16), and bf16 or fp16
 *         operands widened while packing into the fp32 AVX-512 and AVX2 microkernels.
 *         BRIGADE_ISA caps the columns shown.
 *
 * Shapes: for n = B*T rows in {256, 1024} and each (in, out) of GPT-2's linears (BERT-base has
 * the same 768/3072 ones), the forward y = x @ W (NN), the input gradient dx = dy @ W^T (NT) and
 * the weight gradient dW = x^T @ dy (TN); the tied LM head's three products use its [vocab, 768]
 * layout; T5-small's 512/2048 linears and its 32128-token head at n = 256.
 * Each number is the best of several repetitions: the machine is shared, so the best run is
 * the one least disturbed by others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_bf16.h"
#include "kernels/half.h"
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

typedef enum impl {
    IMPL_AVX512, IMPL_AVX2, IMPL_OPENBLAS, IMPL_DISPATCH, N_FP32_IMPL,
    /* --half: the operands as bf16 or fp16 copies of the fp32 ones */
    IMPL_BF16_DOT = N_FP32_IMPL, IMPL_BF16_AMX, IMPL_BF16_AVX512, IMPL_F16_AVX512, IMPL_BF16_AVX2, IMPL_F16_AVX2,
    N_IMPL
} impl;
static const char *const impl_names[N_IMPL] = {"avx512", "avx2", "openblas", "brg_gemm", "bf16dot",
                                               "bf16amx", "bf16w512", "f16w512", "bf16w2", "f16w2"};

/* The half copies of the operands (--half). */
static uint16_t *A_bf16, *B_bf16, *A_f16, *B_f16;

static void run(impl which, const shape *s, const float *A, const float *B, float *C) {
    const int64_t lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    switch (which) {
    case IMPL_AVX512:
        brg_gemm_avx512(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        break;
    case IMPL_AVX2:
        brg_gemm_avx2(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        break;
    case IMPL_OPENBLAS:
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, (int)s->M,
                    (int)s->N, (int)s->K, 1.0f, A, (int)lda, B, (int)ldb, 1.0f, C, (int)s->N);
        break;
    case IMPL_BF16_DOT:
        brg_gemm_avx512bf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A_bf16, lda, B_bf16, ldb, 1.0f, C, s->N);
        break;
    case IMPL_BF16_AMX:
        brg_gemm_amxbf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A_bf16, lda, B_bf16, ldb, 1.0f, C, s->N);
        break;
    case IMPL_BF16_AVX512:
    case IMPL_F16_AVX512: {
        const bool bf = which == IMPL_BF16_AVX512;
        const brg_dtype t = bf ? BRG_DTYPE_BF16 : BRG_DTYPE_F16;
        brg_gemm_avx512_typed(s->ta, s->tb, s->M, s->N, s->K, 1.0f, t, bf ? A_bf16 : A_f16, lda, t, bf ? B_bf16 : B_f16,
                              ldb, 1.0f, C, s->N);
        break;
    }
    case IMPL_BF16_AVX2:
    case IMPL_F16_AVX2: {
        const bool bf = which == IMPL_BF16_AVX2;
        const brg_dtype t = bf ? BRG_DTYPE_BF16 : BRG_DTYPE_F16;
        brg_gemm_avx2_typed(s->ta, s->tb, s->M, s->N, s->K, 1.0f, t, bf ? A_bf16 : A_f16, lda, t, bf ? B_bf16 : B_f16,
                            ldb, 1.0f, C, s->N);
        break;
    }
    case IMPL_DISPATCH:
    case N_IMPL:
        brg_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 1.0f, C, s->N);
        break;
    }
}

/* Best GFLOP/s of each implementation over repetitions that alternate between them (so load
 * from other users hits all alike) and together take about `budget` seconds (at least 2 each). */
static void measure(const impl *which, int n, const shape *s, const float *A, const float *B, float *C, double budget,
                    double *gflops) {
    double best[N_IMPL], spent = 0.0;
    for (int i = 0; i < N_IMPL; i++) best[i] = 1e30;
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

/* The products of one model's linears at `m` rows (forward, input and weight gradient), and of
 * its tied head of `vocab` rows when vocab > 0. */
static int add_model(shape *shapes, int n, const int64_t (*lin)[2], int n_lin, int64_t m, int64_t vocab,
                     int64_t hidden, bool t5) {
    for (int l = 0; l < n_lin; l++) {
        const int64_t in = lin[l][0], out = lin[l][1];
        shapes[n++] = (shape){t5 ? "t5   x@W    " : "fwd  x@W    ", false, false, m, out, in};
        shapes[n++] = (shape){t5 ? "t5   dy@W^T " : "bwd  dy@W^T ", false, true, m, in, out};
        shapes[n++] = (shape){t5 ? "t5   x^T@dy " : "bwd  x^T@dy ", true, false, in, out, m};
    }
    if (vocab > 0) {
        shapes[n++] = (shape){"head x@E^T  ", false, true, m, vocab, hidden};
        shapes[n++] = (shape){"head dy@E   ", false, false, m, hidden, vocab};
        shapes[n++] = (shape){"head dy^T@x ", true, false, vocab, hidden, m};
    }
    return n;
}

/* The half copies of `n` fp32 values. */
static uint16_t *half_copy(const float *x, size_t n, bool bf16) {
    uint16_t *h = malloc(n * sizeof *h);
    if (!h) return NULL;
    if (bf16) brg_f32_to_bf16_row(h, x, (int64_t)n);
    else brg_f32_to_f16_row(h, x, (int64_t)n);
    return h;
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const bool half = argc > 1 && strcmp(argv[1], "--half") == 0;
    bool have[N_IMPL] = {brg_gemm_avx512_supported(), brg_gemm_avx2_supported(), true, !quick && !half};
    if (half) {
        /* Each family at the levels BRIGADE_ISA leaves, fp32 first as the yardstick; no OpenBLAS. */
        const brg_isa isa = brg_isa_detected();
        have[IMPL_AVX512] = isa >= BRG_ISA_AVX512;
        have[IMPL_AVX2] = isa >= BRG_ISA_AVX2;
        have[IMPL_OPENBLAS] = false;
        have[IMPL_BF16_DOT] = isa >= BRG_ISA_AVX512 && brg_isa_has_avx512bf16();
        have[IMPL_BF16_AMX] = isa >= BRG_ISA_AVX512 && brg_isa_has_amx_bf16();
        have[IMPL_BF16_AVX512] = have[IMPL_F16_AVX512] = isa >= BRG_ISA_AVX512;
        have[IMPL_BF16_AVX2] = isa >= BRG_ISA_AVX2;
        have[IMPL_F16_AVX2] = isa >= BRG_ISA_AVX2 && brg_isa_has_f16c();
    }
    openblas_set_num_threads(1);
    brg_gemm_set_threads(1);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("brg_gemm backend: %s; OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", brg_gemm_backend(),
           openblas_get_corename(), coretype ? coretype : "unset");
    if (half)
        printf("brg_gemm_half: bf16 x bf16 %s, f16 x f16 %s (BRIGADE_ISA caps the columns)\n",
               brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16), brg_gemm_half_backend(BRG_DTYPE_F16, BRG_DTYPE_F16));
    if (!have[IMPL_AVX512]) printf("note: no AVX-512 here (or BRIGADE_ISA); the avx512 columns are skipped\n");
    if (!have[IMPL_AVX2]) printf("note: this CPU has no AVX2+FMA; the avx2 column is skipped\n");

    static const int64_t gpt2[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
    static const int64_t t5[][2] = {{512, 512}, {512, 2048}, {2048, 512}};
    shape shapes[64];
    int n = 0;
    n = add_model(shapes, n, gpt2, 4, 256, 50257, 768, false);
    n = add_model(shapes, n, gpt2, 4, 1024, quick ? 0 : 50257, 768, false);
    if (!quick && !half) n = add_model(shapes, n, t5, 3, 256, 32128, 512, true);
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
    if (half) {
        A_bf16 = half_copy(A, amax, true), B_bf16 = half_copy(B, bmax, true);
        A_f16 = half_copy(A, amax, false), B_f16 = half_copy(B, bmax, false);
        if (!A_bf16 || !B_bf16 || !A_f16 || !B_f16) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
    }

    const double budget = quick ? 0.15 : half ? 0.25 : 0.4;
    double seconds[N_IMPL] = {0}, flops_all = 0;
    printf("\n%-13s %2s %6s %6s %6s |", "product", "op", "M", "N", "K");
    for (int c = 0; c < N_IMPL; c++)
        if (have[c] || c < N_FP32_IMPL) printf(" %9s", impl_names[c]);
    printf("  GFLOP/s\n");
    for (int i = 0; i < n; i++) {
        const shape *s = &shapes[i];
        impl which[N_IMPL];
        int n_impl = 0, slot[N_IMPL];
        for (int c = 0; c < N_IMPL; c++) slot[c] = have[c] ? (which[n_impl] = (impl)c, n_impl++) : -1;
        double g[N_IMPL];
        measure(which, n_impl, s, A, B, Cb, budget * n_impl, g);
        const double f = 2.0 * (double)s->M * (double)s->N * (double)s->K * 1e-9;
        flops_all += f;
        printf("%-13s %c%c %6lld %6lld %6lld |", s->what, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', (long long)s->M,
               (long long)s->N, (long long)s->K);
        for (int c = 0; c < N_IMPL; c++) {
            if (slot[c] < 0) {
                if (c < N_FP32_IMPL) printf(" %9s", "-");
                continue;
            }
            seconds[c] += f / g[slot[c]];
            printf(" %9.1f", g[slot[c]]);
        }
        printf("\n");
    }
    /* The time-weighted rate is what a training step sees: big products dominate. */
    printf("\nall products, time-weighted GFLOP/s:");
    for (int c = 0; c < N_IMPL; c++)
        if (have[c]) printf(" %s %.1f", impl_names[c], flops_all / seconds[c]);
    printf("\n");
    if (half) {
        /* Each half kernel against the fp32 kernel of its ISA, over the same products. */
        printf("speed-up over fp32 (time-weighted):");
        const impl base[] = {IMPL_AVX512, IMPL_AVX512, IMPL_AVX512, IMPL_AVX512, IMPL_AVX2, IMPL_AVX2};
        for (int c = IMPL_BF16_DOT; c < N_IMPL; c++)
            if (have[c] && have[base[c - IMPL_BF16_DOT]])
                printf(" %s %.2fx", impl_names[c], seconds[base[c - IMPL_BF16_DOT]] / seconds[c]);
        printf("\n");
    }
    free(A), free(B), free(Cb);
    free(A_bf16), free(B_bf16), free(A_f16), free(B_f16);
    return 0;
}
