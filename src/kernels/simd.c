/* The row primitives of simd.h: an AVX-512 body and a scalar loop each. Sums are accumulated in
 * double on both paths (rows can be as long as a vocabulary); the AVX-512 bodies keep 16 double
 * lanes and add them in a fixed order, so their results do not depend on timing either. */
#include "kernels/simd.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_avx512.h"

/* 0 = not decided yet, 1 = AVX-512, 2 = scalar. */
static atomic_int simd_mode;

static int detect_mode(void) {
    const char *env = getenv("BRIGADE_SIMD");
    if (env && strcmp(env, "scalar") == 0) return 2;
    return brg_gemm_avx512_supported() ? 1 : 2;
}

bool brg_simd_avx512(void) {
    int mode = atomic_load_explicit(&simd_mode, memory_order_relaxed);
    if (mode == 0) {
        mode = detect_mode();
        atomic_store_explicit(&simd_mode, mode, memory_order_relaxed);
    }
    return mode == 1;
}

void brg_simd_force_scalar(bool scalar) {
    atomic_store_explicit(&simd_mode, scalar ? 2 : detect_mode(), memory_order_relaxed);
}

/* ---- scalar loops ---- */

static float max_scalar(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static double exp_sum_scalar(float *y, const float *x, float shift, int64_t n) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        float e = expf(x[j] - shift);
        if (y) y[j] = e;
        sum += e;
    }
    return sum;
}

static void exp_axpy_scalar(float *d, const float *x, float shift, float g, int64_t n) {
    for (int64_t j = 0; j < n; j++) d[j] += g * expf(x[j] - shift);
}

static double sum_squares_scalar(const float *x, int64_t n) {
    /* Eight independent lanes, added in a fixed order at the end, let the loop vectorise. */
    double lanes[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lanes[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++) lanes[i % 8] += (double)x[i] * (double)x[i];
    double sum = 0;
    for (int j = 0; j < 8; j++) sum += lanes[j];
    return sum;
}

/* ---- AVX-512 bodies ---- */
#if defined(__x86_64__) || defined(__i386__)

/* Adds 16 floats to two double accumulators. */
BRG_AVX512_INLINE void add_wide(__m512d *lo, __m512d *hi, __m512 v) {
    *lo = _mm512_add_pd(*lo, brg_widen_lo(v));
    *hi = _mm512_add_pd(*hi, brg_widen_hi(v));
}

BRG_AVX512 static float max_avx512(const float *x, int64_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(_mm512_loadu_ps(x + j), mx);
    if (j < n) {
        __mmask16 m = brg_tail_mask(n - j);
        mx = _mm512_mask_max_ps(mx, m, _mm512_maskz_loadu_ps(m, x + j), mx);
    }
    return _mm512_reduce_max_ps(mx);
}

BRG_AVX512 static double exp_sum_avx512(float *y, const float *x, float shift, int64_t n) {
    const __m512 s = _mm512_set1_ps(shift);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = brg_exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
        if (y) _mm512_storeu_ps(y + j, e);
        add_wide(&lo, &hi, e);
    }
    if (j < n) {
        __mmask16 m = brg_tail_mask(n - j);
        __m512 e = _mm512_maskz_mov_ps(m, brg_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s)));
        if (y) _mm512_mask_storeu_ps(y + j, m, e);
        add_wide(&lo, &hi, e);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

BRG_AVX512 static void exp_axpy_avx512(float *d, const float *x, float shift, float g, int64_t n) {
    const __m512 s = _mm512_set1_ps(shift), gv = _mm512_set1_ps(g);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = brg_exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
        _mm512_storeu_ps(d + j, _mm512_fmadd_ps(gv, e, _mm512_loadu_ps(d + j)));
    }
    if (j < n) {
        __mmask16 m = brg_tail_mask(n - j);
        __m512 e = brg_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s));
        _mm512_mask_storeu_ps(d + j, m, _mm512_fmadd_ps(gv, e, _mm512_maskz_loadu_ps(m, d + j)));
    }
}

BRG_AVX512 static double sum_squares_avx512(const float *x, int64_t n) {
    __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(x + j)), b = _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 8));
        int k = (int)((j >> 4) & 1) * 2; /* alternate accumulator pairs: two FMA chains in flight */
        acc[k] = _mm512_fmadd_pd(a, a, acc[k]);
        acc[k + 1] = _mm512_fmadd_pd(b, b, acc[k + 1]);
    }
    if (j < n) {
        __mmask16 m = brg_tail_mask(n - j);
        __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        __m512d a = brg_widen_lo(v), b = brg_widen_hi(v);
        acc[0] = _mm512_fmadd_pd(a, a, acc[0]);
        acc[1] = _mm512_fmadd_pd(b, b, acc[1]);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
}

#define SIMD_DISPATCH(avx512_call, scalar_call) return brg_simd_avx512() ? (avx512_call) : (scalar_call)
#else
#define SIMD_DISPATCH(avx512_call, scalar_call) return (scalar_call)
#endif

float brg_simd_max(const float *x, int64_t n) { SIMD_DISPATCH(max_avx512(x, n), max_scalar(x, n)); }

double brg_simd_exp_sum(float *y, const float *x, float shift, int64_t n) {
    SIMD_DISPATCH(exp_sum_avx512(y, x, shift, n), exp_sum_scalar(y, x, shift, n));
}

void brg_simd_exp_axpy(float *d, const float *x, float shift, float g, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
    if (brg_simd_avx512()) {
        exp_axpy_avx512(d, x, shift, g, n);
        return;
    }
#endif
    exp_axpy_scalar(d, x, shift, g, n);
}

double brg_simd_sum_squares(const float *x, int64_t n) {
    SIMD_DISPATCH(sum_squares_avx512(x, n), sum_squares_scalar(x, n));
}
