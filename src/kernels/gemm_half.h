/* The kernels behind brg_gemm_half one by one (internal to the library, its tests and the
 * GEMM bench); kernels.h has the entry point and its contract. */
#ifndef BRIGADE_KERNELS_GEMM_HALF_H
#define BRIGADE_KERNELS_GEMM_HALF_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tensor.h"

typedef enum brg_gemm_half_kernel {
    BRG_GEMM_HALF_OPENBLAS = 0, /* widen both operands to fp32 buffers, then cblas_sgemm */
    BRG_GEMM_HALF_AVX512,       /* widen while packing, the fp32 AVX-512 microkernel */
    BRG_GEMM_HALF_AVX2,         /* widen while packing, the fp32 AVX2 microkernel */
    BRG_GEMM_HALF_REF,          /* brg_gemm_half_ref */
    BRG_GEMM_HALF_AVX512BF16,   /* VDPBF16PS on bf16 pairs (both operands bf16) */
    BRG_GEMM_HALF_AMXBF16,      /* TDPBF16PS on the AMX tiles (both operands bf16) */
    BRG_GEMM_HALF_KERNEL_COUNT
} brg_gemm_half_kernel;

/* The BRIGADE_GEMM name of each: "openblas", "avx512", "avx2", "ref", "avx512bf16", "amxbf16". */
const char *brg_gemm_half_kernel_name(brg_gemm_half_kernel k);

/* True when kernel k can run here (CPU and OS, not BRIGADE_ISA) on operands of these types. */
bool brg_gemm_half_kernel_supported(brg_gemm_half_kernel k, brg_dtype a_type, brg_dtype b_type);

/* The product computed by kernel k on the calling thread (no team split), which must be
 * supported for the types; false, having touched nothing, only when its buffers cannot be
 * allocated. */
bool brg_gemm_half_with(brg_gemm_half_kernel k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                        float alpha, brg_dtype a_type, const void *A, int64_t lda, brg_dtype b_type, const void *B,
                        int64_t ldb, float beta, float *C, int64_t ldc);

/* The kernel brg_gemm_half runs for these operand types in this process. */
brg_gemm_half_kernel brg_gemm_half_kernel_for(brg_dtype a_type, brg_dtype b_type);

/* brg_gemm_half on A and B rounded to `type` (to nearest even) when this process's kernel for
 * type x type rounds while packing (amxbf16): the bits brg_gemm_half gives on rounded copies of
 * the operands, without the copies, split across the bound team alike. False, having touched
 * nothing, when the kernel does not round while packing: then make the copies. */
bool brg_gemm_half_rounded(brg_dtype type, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                           int64_t ldc);

#endif
