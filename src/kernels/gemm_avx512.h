/* The AVX-512 single-precision GEMM behind brg_gemm (internal to the library and its tests).
 *
 * The kernel is compiled for AVX-512 per function (target attributes), never with global
 * -mavx512 flags, so the library still loads and runs on CPUs without it; callers must check
 * brg_gemm_avx512_supported() before calling brg_gemm_avx512(). */
#ifndef BRIGADE_GEMM_AVX512_H
#define BRIGADE_GEMM_AVX512_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tensor.h"

/* True when the CPU and the OS support AVX-512 F/BW/DQ/VL and FMA (the instructions the kernel
 * uses, and the OS saves the zmm state). */
bool brg_gemm_avx512_supported(void);

/* brg_gemm's contract (row-major C = alpha * op(A) @ op(B) + beta * C; beta == 0 never reads
 * C; any leading dimensions satisfying brg_gemm's rules), computed on the calling thread alone.
 * Returns false, having touched nothing, only when the thread's packing buffers cannot be
 * allocated; the caller then computes the product another way. */
bool brg_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same kernel with A and B of any of F32, F16, BF16 (lda, ldb in elements): half operands
 * are widened to fp32 while they are packed, so the result has the bits brg_gemm_avx512 gives
 * on the widened operands; only the operands' memory traffic is halved. */
bool brg_gemm_avx512_typed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                           const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta,
                           float *C, int64_t ldc);

/* The kernel's blocking, packing routines and tiles (gemm_blocked.h), for the GEMM on a B packed
 * once (gemm_packed.c). */
struct brg_gemm_kernel;
const struct brg_gemm_kernel *brg_gemm_avx512_kernel(void);

/* Blocking of the kernel, exposed so tests can pick shapes that cross every block edge. */
enum {
    BRG_GEMM_AVX512_MR = 14, /* rows of C per microkernel tile */
    BRG_GEMM_AVX512_NR = 32, /* columns of C per microkernel tile (two zmm vectors) */
    BRG_GEMM_AVX512_KC = 384, /* depth of one packed panel */
    BRG_GEMM_AVX512_MC = 2016, /* rows of A packed at once (a multiple of MR; L3) */
    BRG_GEMM_AVX512_NC = 384,  /* columns of B packed at once (a multiple of NR; L2) */
};

#endif
