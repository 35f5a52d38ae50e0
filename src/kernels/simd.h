/* Vectorised row primitives shared by the softmax, cross-entropy, attention, GELU and dropout
 * kernels, and the AVX-512 and AVX2 building blocks they use (internal to the library and its
 * tests).
 *
 * Each primitive has three bodies: AVX-512 (16 floats a step), AVX2+FMA (8 floats a step, for
 * the Zen 2/3 and Intel client CPUs without AVX-512) and a scalar loop; brg_simd_isa() picks one
 * per process. As in gemm_avx512.c, SIMD code carries per-function target attributes instead of
 * global -m flags, so the library still runs on any x86-64 CPU. All three are deterministic. The
 * two SIMD bodies give the same bits: brg_exp256 is brg_exp512's arithmetic on 8 lanes, and where
 * a body sums in double lanes the AVX2 one keeps the AVX-512 lanes (as 4-wide quarters) and adds
 * them in the same order (brg_sum_pd512 / brg_sum_pd256). The scalar loops agree with them to a
 * few float ulps (exp) and exactly where no transcendental or reordered sum is involved (dropout
 * masks). */
#ifndef BRIGADE_KERNELS_SIMD_H
#define BRIGADE_KERNELS_SIMD_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu_isa.h"

#define BRG_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define BRG_AVX512_INLINE static inline __attribute__((always_inline)) BRG_AVX512
#define BRG_AVX2 __attribute__((target("avx2,fma")))
#define BRG_AVX2_INLINE static inline __attribute__((always_inline)) BRG_AVX2

/* The level the element-wise bodies run at: BRIGADE_SIMD=avx512|avx2|scalar in the environment
 * asks for one, capped by what the CPU has (cpu_isa.h); unset, the highest the CPU has. Decided
 * on first use. */
brg_isa brg_simd_isa(void);
/* True when the AVX-512 bodies run. */
bool brg_simd_avx512(void);
/* For tests comparing the paths: run at `isa` (capped by the CPU) until the next force/reset;
 * reset decides again from the environment. brg_simd_force_scalar(true) is force(SCALAR),
 * (false) is reset. */
void brg_simd_force(brg_isa isa);
void brg_simd_reset(void);
void brg_simd_force_scalar(bool scalar);

/* max_j x[j]; -inf for n == 0. A NaN entry may or may not propagate (as with the scalar
 * comparison loop, it depends on its position). */
float brg_simd_max(const float *x, int64_t n);

/* y[j] = exp(x[j] - shift) and returns sum_j y[j], accumulated in double. y may equal x, or be
 * NULL to only sum. */
double brg_simd_exp_sum(float *y, const float *x, float shift, int64_t n);

/* d[j] += g * exp(x[j] - shift); with overwrite, d[j] = +0 + g * exp(x[j] - shift), the bits of
 * adding into zeros, without reading d. d may equal x (each element is read before it is
 * written). */
void brg_simd_exp_axpy(float *d, bool overwrite, const float *x, float shift, float g, int64_t n);

/* sum_j x[j]^2 in double. */
double brg_simd_sum_squares(const float *x, int64_t n);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Runs the statement for the level brg_simd_isa() picks, e.g.
 * BRG_SIMD_PICK(f_avx512(x), f_avx2(x), f_scalar(x)); `return g(x)` statements work too. */
#define BRG_SIMD_PICK(avx512_stmt, avx2_stmt, scalar_stmt) \
    switch (brg_simd_isa()) {                              \
    case BRG_ISA_AVX512: avx512_stmt; break;               \
    case BRG_ISA_AVX2: avx2_stmt; break;                   \
    default: scalar_stmt; break;                           \
    }

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

/* The sum of 8 double lanes in a fixed order (halves, then quarters, then the last two), spelled
 * out rather than left to _mm512_reduce_add_pd, whose order is the compiler's; brg_sum_pd256 is
 * the same order for AVX2. */
BRG_AVX512_INLINE double brg_sum_pd512(__m512d v) {
    const __m256d h = _mm256_add_pd(_mm512_extractf64x4_pd(v, 1), _mm512_castpd512_pd256(v));
    const __m128d q = _mm_add_pd(_mm256_extractf128_pd(h, 1), _mm256_castpd256_pd128(h));
    return _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
}

/* ---- AVX2 + FMA ---- */

/* brg_exp512 on 8 floats, operation for operation, so both give the same bits. AVX2 has no
 * scalef: 2^n is built from exponent bits as 2^(n/2) 2^(n - n/2), two factors that are normal
 * floats for every clamped n (|n/2| <= 80), so the product rounds once, as scalef does: inf above
 * ~88.7, subnormals below ~-87.3 (gradual underflow) and 0 below ~-103.9. A NaN x makes r and the
 * polynomial NaN (the integer n of a NaN is garbage, but only multiplies it). */
BRG_AVX2_INLINE __m256 brg_exp256(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-110.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(90.0f), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1), rest = _mm256_sub_epi32(ni, half);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

/* The lanes of the 8-wide step at i of a row of n that lie in the row (all for i + 8 <= n, none
 * for i >= n), as the sign-bit mask of _mm256_maskload_ps / _mm256_maskstore_ps. */
BRG_AVX2_INLINE __m256i brg_mask8(int64_t i, int64_t n) {
    const int64_t left = n - i;
    const int k = left >= 8 ? 8 : left <= 0 ? 0 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Floats [i, i + 8) of a row of n, zero past its end; nothing past the end is read (masked lanes
 * do not fault). Only row tails use it: a full step is a plain load, masked loads and stores
 * being slow on Zen 2. */
BRG_AVX2_INLINE __m256 brg_load_tail8(const float *x, int64_t i, int64_t n) {
    return i < n ? _mm256_maskload_ps(x + i, brg_mask8(i, n)) : _mm256_setzero_ps();
}

/* Stores the lanes of v that fall in [i, n) at y + i. */
BRG_AVX2_INLINE void brg_store_tail8(float *y, int64_t i, int64_t n, __m256 v) {
    if (i < n) _mm256_maskstore_ps(y + i, brg_mask8(i, n), v);
}

/* v with the lanes outside [i, n) set to zero. */
BRG_AVX2_INLINE __m256 brg_zero_tail8(__m256 v, int64_t i, int64_t n) {
    return _mm256_and_ps(v, _mm256_castsi256_ps(brg_mask8(i, n)));
}

/* Lanes 0-3 and 4-7 of 8 floats, widened to double. */
BRG_AVX2_INLINE __m256d brg_widen8_lo(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
BRG_AVX2_INLINE __m256d brg_widen8_hi(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

/* brg_sum_pd512 of the 8 lanes (lo, hi). */
BRG_AVX2_INLINE double brg_sum_pd256(__m256d lo, __m256d hi) {
    const __m256d h = _mm256_add_pd(hi, lo);
    const __m128d q = _mm_add_pd(_mm256_extractf128_pd(h, 1), _mm256_castpd256_pd128(h));
    return _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
}

/* 16 double lanes as an AVX-512 body keeps them (two zmm registers lo, hi), held as four 4-wide
 * quarters: q[0], q[1] are lo, q[2], q[3] are hi. */
typedef struct brg_lanes16 {
    __m256d q[4];
} brg_lanes16;

BRG_AVX2_INLINE brg_lanes16 brg_lanes16_zero(void) {
    brg_lanes16 l = {{_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}};
    return l;
}

/* Adds floats 0-7 (a) and 8-15 (b) of a 16-wide step, widened, to their lanes. */
BRG_AVX2_INLINE void brg_lanes16_add(brg_lanes16 *l, __m256 a, __m256 b) {
    l->q[0] = _mm256_add_pd(l->q[0], brg_widen8_lo(a));
    l->q[1] = _mm256_add_pd(l->q[1], brg_widen8_hi(a));
    l->q[2] = _mm256_add_pd(l->q[2], brg_widen8_lo(b));
    l->q[3] = _mm256_add_pd(l->q[3], brg_widen8_hi(b));
}

/* The sum the AVX-512 bodies take of their (lo, hi) pair: brg_sum_pd512(lo + hi). */
BRG_AVX2_INLINE double brg_lanes16_sum(const brg_lanes16 *l) {
    return brg_sum_pd256(_mm256_add_pd(l->q[0], l->q[2]), _mm256_add_pd(l->q[1], l->q[3]));
}
#else
#define BRG_SIMD_PICK(avx512_stmt, avx2_stmt, scalar_stmt) \
    do {                                                   \
        scalar_stmt;                                       \
    } while (0)
#endif

#endif
