/* Row conversions between float32 and the two 16-bit floating-point formats, fp16 (IEEE
 * binary16) and bfloat16, stored as uint16_t bit patterns (internal to the library and its
 * tests). The scalar reference is the public brg_f32_to_f16 / brg_f16_to_f32 / brg_f32_to_bf16 /
 * brg_bf16_to_f32 of include/brigade/tensor.h:
 *   fp32 -> fp16   round to nearest even; |x| >= 65520 (the tie above 65504) and inf to +-inf;
 *                  results below 2^-14 are fp16 subnormals (rounded, not flushed); fp32
 *                  subnormals give +-0; a NaN keeps its sign and top 10 payload bits, quiet bit
 *                  set (what VCVTPS2PH does).
 *   fp32 -> bf16   (u + 0x7FFF + lsb) >> 16 on the bits: inf stays inf, FLT_MAX rounds to inf,
 *                  fp32 subnormals are rounded like any other value (not flushed); a NaN keeps its
 *                  upper half with the quiet bit set (what VCVTNEPS2BF16 does).
 *   widening       exact: bf16 is bits << 16; fp16 re-biases, normalises subnormals, and makes a
 *                  NaN quiet (what VCVTPH2PS does).
 * For every non-NaN input this is PyTorch's c10::Half / c10::BFloat16; NaNs stay NaNs of the
 * same sign, with the hardware's payload where PyTorch's scalar code writes a canonical NaN.
 *
 * The row converters have a scalar, an AVX2 (+F16C) and an AVX-512 body, picked by
 * brg_simd_isa() as the other row primitives are (BRIGADE_SIMD, BRIGADE_ISA); the AVX-512 body
 * of fp32 -> bf16 uses VCVTNEPS2BF16 where the CPU has AVX512_BF16, patching the lanes of fp32
 * subnormal inputs it would flush. Every body gives the reference's bits for all 2^32 inputs
 * (tested), so results never depend on the CPU. */
#ifndef BRIGADE_KERNELS_HALF_H
#define BRIGADE_KERNELS_HALF_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tensor.h"
#include "kernels/cpu_isa.h"

/* ---- rows, through the body brg_simd_isa() picks ---- */
void brg_f32_to_f16_row(uint16_t *dst, const float *src, int64_t n);
void brg_f16_to_f32_row(float *dst, const uint16_t *src, int64_t n);
void brg_f32_to_bf16_row(uint16_t *dst, const float *src, int64_t n);
void brg_bf16_to_f32_row(float *dst, const uint16_t *src, int64_t n);
/* The same by the type's name (F16 or BF16): the CPU backend's widen and narrow kernels. */
void brg_k_widen(float *dst, const void *src, brg_dtype type, int64_t n);
void brg_k_narrow(void *dst, const float *src, brg_dtype type, int64_t n);

/* ---- the bodies one by one, for tests and benchmarks ---- */
typedef enum brg_half_path {
    BRG_HALF_SCALAR = 0,
    BRG_HALF_AVX2,       /* AVX2 + F16C; bf16 by integer RNE */
    BRG_HALF_AVX512,     /* AVX-512 F/BW; fp16 by VCVTPS2PH zmm, bf16 by integer RNE */
    BRG_HALF_AVX512BF16, /* AVX-512 with VCVTNEPS2BF16 for fp32 -> bf16 (the rest as AVX512) */
    BRG_HALF_PATH_COUNT
} brg_half_path;

/* True when the CPU (not BRIGADE_ISA) can run the path. */
bool brg_half_path_hardware(brg_half_path path);
/* "scalar", "avx2", "avx512", "avx512bf16". */
const char *brg_half_path_name(brg_half_path path);
/* The path the row converters take now (brg_simd_isa() and the CPU's AVX512_BF16). */
brg_half_path brg_half_path_active(void);

/* True when the CPU and OS support AVX512_BF16 on top of the AVX-512 level (VCVTNEPS2BF16,
 * VDPBF16PS), whatever BRIGADE_ISA says; brg_isa_detected() >= BRG_ISA_AVX512 must also hold
 * for a kernel to use it. */
bool brg_isa_has_avx512bf16(void);
/* True when VDPBF16PS products outrun the fp32 FMA kernel on this CPU (AVX512_BF16 on AMD; on
 * Intel it issues at half the fp32 FMA rate), which makes it the default bf16 kernel. */
bool brg_isa_bf16_dot_outruns_fma(void);
/* True when the CPU has F16C (every AVX2 CPU does; checked anyway before F16C bodies run). */
bool brg_isa_has_f16c(void);

/* Converts with an explicit path, which must satisfy brg_half_path_hardware. */
void brg_f32_to_f16_row_with(brg_half_path path, uint16_t *dst, const float *src, int64_t n);
void brg_f16_to_f32_row_with(brg_half_path path, float *dst, const uint16_t *src, int64_t n);
void brg_f32_to_bf16_row_with(brg_half_path path, uint16_t *dst, const float *src, int64_t n);
void brg_bf16_to_f32_row_with(brg_half_path path, float *dst, const uint16_t *src, int64_t n);

#endif
