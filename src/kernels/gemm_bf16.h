/* The AVX-512-BF16 GEMM: both operands bfloat16, products and sums in fp32 with VDPBF16PS
 * (internal to the library and its tests).
 *
 * What it computes, exactly: for each element of C and each depth block of KC, starting from
 * +0, the pairs k = 2s, 2s + 1 in order of s, each pair adding its upper product first:
 *     acc = fl(acc + a[2s+1] b[2s+1]);  acc = fl(acc + a[2s] b[2s])
 * (a bf16 x bf16 product is exact in fp32, so each step is one correctly rounded FMA, and an odd
 * depth adds a zero product). The first block stores fl(fl(alpha acc) + beta c) as one FMA, or
 * fl(alpha acc) for beta == 0; later blocks add fl(alpha acc) to C, as the fp32 kernels do. The
 * instruction treats subnormal inputs, products, sums and accumulators as zero (DAZ/FTZ, whatever
 * MXCSR says): whenever none of these is subnormal, which holds for data whose nonzero values
 * lie in [2^-60, 2^60], the result equals the fp32 FMA loop above bit for bit (tested), and
 * therefore |C - C_exact| <= gamma(K/2 + ...) bounds of an ordinary fp32 dot product
 * (docs/precision.md derives the one the tests use).
 *
 * Compiled per function for AVX-512 + AVX512_BF16; callers check brg_isa_has_avx512bf16(). */
#ifndef BRIGADE_KERNELS_GEMM_BF16_H
#define BRIGADE_KERNELS_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* brg_gemm's contract with A and B bf16 bit patterns (lda, ldb in elements), on the calling
 * thread alone; false, having touched nothing, only when the packing buffers cannot be
 * allocated. */
bool brg_gemm_avx512bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                         int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Blocking, exposed so tests can cross every edge and emulate the depth blocks. */
enum {
    BRG_GEMM_BF16_MR = 14,  /* rows of C per tile */
    BRG_GEMM_BF16_NR = 32,  /* columns of C per tile (two zmm of 16 fp32 accumulators) */
    BRG_GEMM_BF16_KC = 768, /* depth of one packed block: the bytes of the fp32 kernel's 384 */
    BRG_GEMM_BF16_MC = 2016,
    BRG_GEMM_BF16_NC = 384,
};

#endif
