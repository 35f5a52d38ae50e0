/* The AVX2 + FMA single-precision GEMM behind brg_gemm (internal to the library and its tests).
 *
 * Compiled for AVX2 per function (target attributes), never with global -mavx2 flags, so the
 * library still runs on CPUs without it; callers check brg_gemm_avx2_supported() first. */
#ifndef BRIGADE_GEMM_AVX2_H
#define BRIGADE_GEMM_AVX2_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tensor.h"

/* True when the CPU and the OS support AVX2 and FMA. */
bool brg_gemm_avx2_supported(void);

/* brg_gemm's contract (row-major C = alpha * op(A) @ op(B) + beta * C; beta == 0 never reads
 * C), computed on the calling thread alone. Returns false, having touched nothing, only when the
 * thread's packing buffers cannot be allocated. */
bool brg_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same kernel with A and B of any of F32, F16, BF16 (lda, ldb in elements): half operands
 * are widened to fp32 while they are packed, so the result has the bits brg_gemm_avx2 gives on
 * the widened operands. F16 operands need F16C besides AVX2 (brg_isa_has_f16c). */
bool brg_gemm_avx2_typed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                         const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);

/* The kernel's blocking, packing routines and tiles (gemm_blocked.h), for the GEMM on a B packed
 * once (gemm_packed.c). */
struct brg_gemm_kernel;
const struct brg_gemm_kernel *brg_gemm_avx2_kernel(void);

/* Blocking of the kernel, exposed so tests can pick shapes that cross every block edge. */
enum {
    BRG_GEMM_AVX2_MR = 6,    /* rows of C per microkernel tile */
    BRG_GEMM_AVX2_NR = 16,   /* columns of C per microkernel tile (two ymm vectors) */
    BRG_GEMM_AVX2_KC = 256,  /* depth of one packed panel */
    BRG_GEMM_AVX2_MC = 1020, /* rows of A packed at once (a multiple of MR; L3) */
    BRG_GEMM_AVX2_NC = 256,  /* columns of B packed at once (a multiple of NR; L2) */
};

#endif
