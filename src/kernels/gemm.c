/* GEMM: the single entry point for matrix products, and the choice of who computes them.
 *
 * Backends, chosen once per process:
 *   avx512    the packed AVX-512 kernel in gemm_avx512.c; the default when the CPU has AVX-512:
 *             on the products of a GPT-2 small training step it measured 1.9x faster than
 *             OpenBLAS as this environment configures it (OPENBLAS_CORETYPE=Haswell) and level
 *             with OpenBLAS's best kernel, whatever OPENBLAS_CORETYPE says (bench/README.md,
 *             `brigade_bench_gemm`).
 *   avx2      the packed AVX2 + FMA kernel in gemm_avx2.c; the default on CPUs with AVX2 but
 *             not AVX-512 (bench/README.md has the measurement against OpenBLAS's Haswell
 *             kernel, the one OpenBLAS runs on such CPUs).
 *   openblas  OpenBLAS's cblas_sgemm, loaded when first needed (openblas.c); the default on CPUs
 *             without AVX2.
 *   ref       brg_gemm_ref, the double-accumulating scalar loop (slow; for debugging).
 * The environment variable BRIGADE_GEMM=openblas|avx512|avx2|ref overrides the default (and
 * amxbf16 and avx512bf16, which half-precision products read, give avx512 here: gemm_half.c); asking
 * for a kernel the CPU lacks (or BRIGADE_ISA rules out) gives the best one below it.
 * brg_gemm_backend() names what actually runs.
 *
 * A device's intra-op team splits products by rows of C only on the backends whose every element
 * keeps its loop over K whatever the split (our kernels and ref). OpenBLAS picks kernels and
 * blockings by shape, so a split would change the last bits: with it the team leaves products
 * whole, and results stay the same for any number of threads.
 *
 * brg_gemm_ref is the slow, accurate yardstick the tests compare everything against. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/precision.h"
#include "brigade/status.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_blocked.h"
#include "kernels/gemm_half.h"
#include "kernels/half.h"
#include "kernels/kernels.h"

#include "kernels/openblas.h"

typedef enum backend { BACKEND_OPENBLAS = 0, BACKEND_AVX512, BACKEND_AVX2, BACKEND_REF } backend;

static const char *const backend_names[] = {"openblas", "avx512", "avx2", "ref"};
static backend active = BACKEND_OPENBLAS;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

/* Our kernel for the ISA level, falling back level by level. */
static backend kernel_for(brg_isa isa) {
    if (isa >= BRG_ISA_AVX512) return BACKEND_AVX512;
    if (isa >= BRG_ISA_AVX2) return BACKEND_AVX2;
    return BACKEND_OPENBLAS;
}

static void choose_backend(void) {
    const brg_isa isa = brg_isa_detected();
    active = kernel_for(isa);
    const char *env = getenv("BRIGADE_GEMM");
    if (!env || !*env) return;
    if (strcmp(env, "openblas") == 0) {
        active = BACKEND_OPENBLAS;
    } else if (strcmp(env, "ref") == 0) {
        active = BACKEND_REF;
    } else if (strcmp(env, "avx512") == 0 || strcmp(env, "avx512bf16") == 0 || strcmp(env, "amxbf16") == 0) {
        /* amxbf16 and avx512bf16 name bf16 kernels of brg_gemm_half; fp32 products use avx512. */
        active = kernel_for(isa);
    } else if (strcmp(env, "avx2") == 0) {
        active = kernel_for(isa < BRG_ISA_AVX2 ? isa : BRG_ISA_AVX2);
    } else {
        /* A typo must not silently benchmark the wrong kernel. */
        fprintf(stderr,
                "brigade: BRIGADE_GEMM=%s is not one of openblas, amxbf16, avx512bf16, avx512, avx2, ref; using %s\n",
                env, backend_names[active]);
    }
}

/* -1: the backend chosen above; else the one brg_gemm_force_backend asked for. */
static atomic_int forced = -1;

static backend current_backend(void) {
    const int f = atomic_load_explicit(&forced, memory_order_relaxed);
    if (f >= 0) return (backend)f;
    pthread_once(&choose_once, choose_backend);
    return active;
}

const char *brg_gemm_force_backend(const char *name) {
    if (!name) {
        atomic_store_explicit(&forced, -1, memory_order_relaxed);
        return brg_gemm_backend();
    }
    const brg_isa isa = brg_isa_detected();
    backend b;
    if (strcmp(name, "openblas") == 0) b = BACKEND_OPENBLAS;
    else if (strcmp(name, "ref") == 0) b = BACKEND_REF;
    else if (strcmp(name, "avx512") == 0) b = kernel_for(isa);
    else if (strcmp(name, "avx2") == 0) b = kernel_for(isa < BRG_ISA_AVX2 ? isa : BRG_ISA_AVX2);
    else return NULL;
    atomic_store_explicit(&forced, (int)b, memory_order_relaxed);
    return backend_names[b];
}

/* Leading-dimension rules of row-major BLAS: a [rows, cols] operand needs ld >= cols. */
static void check_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                       int64_t ldc) {
    BRG_ASSERT(M >= 0 && N >= 0 && K >= 0);
    BRG_ASSERT(lda >= (trans_a ? M : K));
    BRG_ASSERT(ldb >= (trans_b ? K : N));
    BRG_ASSERT(ldc >= N);
}

/* ---- products in a reduced compute type (brg_compute_dtype_set) ---- */

/* A [rows, cols] block of X (row stride ld) rounded to `type` into this thread's scratch slot,
 * contiguous (row stride cols). */
static const uint16_t *rounded_operand(int slot, brg_dtype type, const float *X, int64_t rows, int64_t cols,
                                       int64_t ld) {
    uint16_t *dst = (uint16_t *)brg_scratch(slot, (size_t)((rows * cols + 1) / 2));
    for (int64_t r = 0; r < rows; r++) {
        if (type == BRG_DTYPE_BF16) brg_f32_to_bf16_row(dst + r * cols, X + r * ld, cols);
        else brg_f32_to_f16_row(dst + r * cols, X + r * ld, cols);
    }
    return dst;
}

/* The product on operands rounded to nearest even in `type`, accumulated in fp32 by
 * brg_gemm_half (AVX512_BF16's VDPBF16PS for bf16 where the CPU has it). */
static void gemm_rounded(brg_dtype type, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc) {
    /* The AMX kernel rounds while it packs: no copies to write and read again. */
    if (brg_gemm_half_rounded(type, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    const uint16_t *a = rounded_operand(BRG_SCRATCH_GEMM_A, type, A, a_rows, a_cols, lda);
    const uint16_t *b = rounded_operand(BRG_SCRATCH_GEMM_B, type, B, b_rows, b_cols, ldb);
    brg_gemm_half(trans_a, trans_b, M, N, K, alpha, type, a, a_cols, type, b, b_cols, beta, C, ldc);
}

void brg_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    check_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return;
    }
    const brg_dtype compute = brg_compute_dtype();
    if (compute != BRG_DTYPE_F32) {
        gemm_rounded(compute, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const backend be = current_backend();
    if (be != BACKEND_OPENBLAS && brg_gemm_team_run(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (be == BACKEND_REF) {
        brg_gemm_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* The kernel declines only when its packing buffers cannot be allocated: OpenBLAS then
     * computes the product, which needs no buffers of ours. */
    if (be == BACKEND_AVX512 && brg_gemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (be == BACKEND_AVX2 && brg_gemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    brg_openblas_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void brg_gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    check_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
    /* Element strides of op(A) along k and of op(B) along k, so one loop serves all four cases. */
    const int64_t a_row = trans_a ? 1 : lda, a_k = trans_a ? lda : 1;
    const int64_t b_k = trans_b ? 1 : ldb, b_col = trans_b ? ldb : 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            const float *a = A + i * a_row;
            const float *b = B + j * b_col;
            double acc = 0.0;
            for (int64_t p = 0; p < K; p++) acc += (double)a[p * a_k] * (double)b[p * b_k];
            double prev = beta == 0.0f ? 0.0 : (double)beta * (double)C[i * ldc + j];
            C[i * ldc + j] = (float)((double)alpha * acc + prev);
        }
    }
}

const char *brg_gemm_backend(void) { return backend_names[current_backend()]; }

/* Devices compute single-threaded by default: parallelism comes from devices, and OpenBLAS
 * serialises concurrent callers when it runs its own thread pool. Our kernels always run on the
 * calling thread alone, whatever this is set to. */
void brg_gemm_set_threads(int threads) { brg_openblas_set_threads(threads); }
