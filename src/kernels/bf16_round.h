/* fp32 -> bf16 rounding of 16 lanes with AVX-512, as the reference brg_f32_to_bf16 rounds
 * (include/brigade/tensor.h): to nearest even, subnormals rounded (not flushed), a NaN keeps its
 * upper half with the quiet bit set. Shared by the row converters (half.c) and the AMX kernel,
 * which rounds fp32 operands while packing them (gemm_amx.c); internal. Include after
 * kernels/simd.h; the functions inline into callers compiled for the same targets. */
#ifndef BRIGADE_KERNELS_BF16_ROUND_H
#define BRIGADE_KERNELS_BF16_ROUND_H

#include <immintrin.h>

#include "kernels/simd.h"

#define BRG_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define BRG_AVX512BF16_INLINE static inline __attribute__((always_inline)) BRG_AVX512BF16

/* The reference's bf16 bits in 32-bit lanes: integer RNE; a NaN keeps its upper half with the
 * quiet bit set. */
BRG_AVX512_INLINE __m512i brg_bf16_rne512(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), nan);
}

/* VCVTNEPS2BF16 rounds like the reference and treats NaNs alike, but flushes fp32 subnormal
 * inputs to zero: those lanes, rare in real data, take the integer result. */
BRG_AVX512BF16_INLINE __m256i brg_bf16_round16(__m512 x) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
    /* a - 1 < 0x7FFFFF: a nonzero subnormal */
    const __mmask16 sub =
        _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFFFF));
    if (sub) h = _mm256_mask_blend_epi16(sub, h, _mm512_cvtepi32_epi16(brg_bf16_rne512(x)));
    return h;
}

#endif
