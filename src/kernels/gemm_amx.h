/* The AMX-BF16 GEMM: both operands bfloat16, products summed in fp32 by the tile unit's
 * TDPBF16PS (internal to the library and its tests).
 *
 * What it computes: for each element of C and each depth block of KC, the sum over the block's
 * k of a[k] b[k], accumulated in 32-k steps by TDPBF16PS, starting from +0; the first block
 * stores fl(fl(alpha acc) + beta c) as one FMA, or fl(alpha acc) for beta == 0, later blocks add
 * theirs with beta 1, as the other kernels of gemm_blocked.h do. Intel documents the
 * instruction's sum only as fp32 accumulation with round to nearest even, treating subnormal
 * inputs as zero and flushing subnormal results; measured, one 32-k step is within 5.1 u of the
 * exact sum of its 32 products and the accumulator (u = 2^-24, relative to the sum of their
 * magnitudes), less than the 33 u of 32 sequential fp32 FMAs, but it is neither that order nor
 * any other simple one. So this kernel's bits are its own: the tests hold it to the fp32 dot
 * product's bound against the double reference (as gemm_bf16.h's), and to equal bits whatever
 * the rows and columns it is given (the depth blocks depend on K alone).
 *
 * The CPU must have AMX-TILE and AMX-BF16, the OS must save the tile state, and Linux must grant
 * this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once by
 * brg_isa_has_amx_bf16). The functions are compiled per function for AMX and AVX-512. */
#ifndef BRIGADE_KERNELS_GEMM_AMX_H
#define BRIGADE_KERNELS_GEMM_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when this process may run the AMX-BF16 kernel (CPU, OS and permission; AVX512_BF16 too,
 * which every AMX CPU has and the packing uses), whatever BRIGADE_ISA says; the first call asks
 * Linux for the tile state. */
bool brg_isa_has_amx_bf16(void);

/* brg_gemm's contract with A and B bf16 bit patterns (lda, ldb in elements), on the calling
 * thread alone; false, having touched nothing, only when the packing buffers cannot be
 * allocated. brg_isa_has_amx_bf16() must hold. */
bool brg_gemm_amxbf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                      int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The product of A and B rounded to bf16 (to nearest even, as brg_f32_to_bf16) while they are
 * packed: the bits of brg_gemm_amxbf16 on rounded copies, without the copies. Same contract. */
bool brg_gemm_amxbf16_rounding(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc);

/* The kernel as gemm_blocked.h describes it (its bf16 sources as they are, fp32 ones rounded
 * while packed; the tiles configured around each product), for B packed once in its layout
 * (gemm_packed.c's BRG_GEMM_PACK_AMXBF16); NULL on a build without AMX. */
const struct brg_gemm_kernel *brg_gemm_amx_kernel(void);

/* Blocking, exposed so tests can cross every edge. */
enum {
    BRG_GEMM_AMX_MR = 32,  /* rows of C per tile call: two 16-row A tiles */
    BRG_GEMM_AMX_NR = 32,  /* columns: two 16-column B tiles, four fp32 C tiles */
    BRG_GEMM_AMX_KSTEP = 32, /* k per TDPBF16PS: 16 pairs */
    BRG_GEMM_AMX_KC = 1536,
    BRG_GEMM_AMX_MC = 1024,
    BRG_GEMM_AMX_NC = 512,
};

#endif
