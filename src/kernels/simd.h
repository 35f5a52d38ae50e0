/* Vectorised row primitives shared by the softmax, cross-entropy, attention, GELU and dropout
 * kernels, and the AVX-512 building blocks they use (internal to the library and its tests).
 *
 * Each primitive has an AVX-512 body and a scalar loop; brg_simd_avx512() picks once per process
 * (the CPU must support AVX-512 F/BW/DQ/VL, as for the GEMM). As in gemm_avx512.c, AVX-512 code
 * carries per-function target attributes instead of global -mavx512 flags, so the library still
 * runs on CPUs without it. Both paths are deterministic; they agree to a few float ulps (exp) and
 * exactly where no transcendental is involved (dropout masks). */
#ifndef BRIGADE_KERNELS_SIMD_H
#define BRIGADE_KERNELS_SIMD_H

#include <stdbool.h>
#include <stdint.h>

#define BRG_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define BRG_AVX512_INLINE static inline __attribute__((always_inline)) BRG_AVX512

/* True when the AVX-512 bodies run. BRIGADE_SIMD=scalar in the environment, or
 * brg_simd_force_scalar(true) (tests comparing both paths), selects the scalar loops. */
bool brg_simd_avx512(void);
void brg_simd_force_scalar(bool scalar);

/* max_j x[j]; -inf for n == 0. A NaN entry may or may not propagate (as with the scalar
 * comparison loop, it depends on its position). */
float brg_simd_max(const float *x, int64_t n);

/* y[j] = exp(x[j] - shift) and returns sum_j y[j], accumulated in double. y may equal x, or be
 * NULL to only sum. */
double brg_simd_exp_sum(float *y, const float *x, float shift, int64_t n);

/* d[j] += g * exp(x[j] - shift). */
void brg_simd_exp_axpy(float *d, const float *x, float shift, float g, int64_t n);

/* sum_j x[j]^2 in double. */
double brg_simd_sum_squares(const float *x, int64_t n);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* exp(x) for 16 floats: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact for
 * every |n| that matters), exp(r) by its Taylor series to degree 7 (truncation error 5e-9, below
 * float rounding), times 2^n by scalef, which also gives inf above ~88.7 and 0 below ~-103.9.
 * The clamps keep n finite; max/min return their second operand for a NaN, so NaN propagates. */
BRG_AVX512_INLINE __m512 brg_exp512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(90.0f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* Lanes [0, n) of a 16-wide step, for the masked tail of a row. */
BRG_AVX512_INLINE __mmask16 brg_tail_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }

/* The valid lanes of the 16-wide step at i of a row of n. */
BRG_AVX512_INLINE __mmask16 brg_step_mask(int64_t i, int64_t n) {
    return n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
}

/* Lanes 0-7 and 8-15 of 16 floats, widened to double. */
BRG_AVX512_INLINE __m512d brg_widen_lo(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
BRG_AVX512_INLINE __m512d brg_widen_hi(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
#endif

#endif
