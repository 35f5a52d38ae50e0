/* Layer normalisation over the last dimension, as torch.nn.LayerNorm: population variance,
 * rstd = 1/sqrt(var + eps). Row statistics are reduced in double (two passes: mean, then the
 * centred sum of squares) so that large offsets do not cancel digits away. gamma and beta may be
 * NULL (no affine transform).
 *
 * Three bodies, picked by brg_simd_isa(): AVX-512, AVX2+FMA and scalar. The AVX2 one keeps the
 * AVX-512 body's double lanes (16 per row sum, one per column for dgamma/dbeta) and its float
 * operations, so the two SIMD levels give the same bits. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

/* Columns per pass of the parameter-gradient reduction (see param_grads_add). */
#define COL_BLOCK 64

static void row_stats(const float *x, int64_t c, float eps, float *mean, float *rstd) {
    double sum = 0.0;
    for (int64_t j = 0; j < c; j++) sum += x[j];
    double m = sum / (double)c;
    double ss = 0.0;
    for (int64_t j = 0; j < c; j++) {
        double d = (double)x[j] - m;
        ss += d * d;
    }
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(ss / (double)c + (double)eps));
}

#if defined(__x86_64__) || defined(__i386__)
/* The same rows 16 columns at a time: the row sums in 16 double lanes added in a fixed order,
 * the element-wise parts in float as above. */

BRG_AVX512 static void row_stats_avx512(const float *x, int64_t c, float eps, float *mean, float *rstd) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t j = 0; j < c; j += 16) {
        __m512 v = _mm512_maskz_loadu_ps(brg_step_mask(j, c), x + j);
        lo = _mm512_add_pd(lo, brg_widen_lo(v));
        hi = _mm512_add_pd(hi, brg_widen_hi(v));
    }
    const double m = brg_sum_pd512(_mm512_add_pd(lo, hi)) / (double)c;
    const __m512d mv = _mm512_set1_pd(m);
    lo = hi = _mm512_setzero_pd();
    for (int64_t j = 0; j < c; j += 16) {
        __mmask16 k = brg_step_mask(j, c);
        __m512 v = _mm512_maskz_loadu_ps(k, x + j);
        __m512d dl = _mm512_maskz_sub_pd((__mmask8)k, brg_widen_lo(v), mv);
        __m512d dh = _mm512_maskz_sub_pd((__mmask8)(k >> 8), brg_widen_hi(v), mv);
        lo = _mm512_fmadd_pd(dl, dl, lo);
        hi = _mm512_fmadd_pd(dh, dh, hi);
    }
    const double ss = brg_sum_pd512(_mm512_add_pd(lo, hi));
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(ss / (double)c + (double)eps));
}

BRG_AVX512 static void row_normalise_avx512(float *y, const float *x, const float *gamma, const float *beta, float m,
                                            float r, int64_t c) {
    const __m512 mv = _mm512_set1_ps(m), rv = _mm512_set1_ps(r);
    for (int64_t j = 0; j < c; j += 16) {
        __mmask16 k = brg_step_mask(j, c);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv), rv);
        if (gamma) t = _mm512_mul_ps(t, _mm512_maskz_loadu_ps(k, gamma + j));
        if (beta) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(k, beta + j));
        _mm512_mask_storeu_ps(y + j, k, t);
    }
}

BRG_AVX512 static void row_dx_add_avx512(float *dx, const float *dy, const float *x, const float *gamma, float m,
                                         float r, int64_t c) {
    const __m512 mv = _mm512_set1_ps(m), rv = _mm512_set1_ps(r);
    __m512d g_lo = _mm512_setzero_pd(), g_hi = _mm512_setzero_pd(), gx_lo = _mm512_setzero_pd(),
            gx_hi = _mm512_setzero_pd();
    for (int64_t j = 0; j < c; j += 16) {
        __mmask16 k = brg_step_mask(j, c);
        __m512 g = _mm512_maskz_loadu_ps(k, dy + j);
        if (gamma) g = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(k, gamma + j));
        __m512 xhat = _mm512_maskz_mul_ps(k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv), rv);
        __m512d gl = brg_widen_lo(g), gh = brg_widen_hi(g);
        g_lo = _mm512_add_pd(g_lo, gl);
        g_hi = _mm512_add_pd(g_hi, gh);
        gx_lo = _mm512_fmadd_pd(gl, brg_widen_lo(xhat), gx_lo);
        gx_hi = _mm512_fmadd_pd(gh, brg_widen_hi(xhat), gx_hi);
    }
    const __m512 mg = _mm512_set1_ps((float)(brg_sum_pd512(_mm512_add_pd(g_lo, g_hi)) / (double)c));
    const __m512 mgx = _mm512_set1_ps((float)(brg_sum_pd512(_mm512_add_pd(gx_lo, gx_hi)) / (double)c));
    for (int64_t j = 0; j < c; j += 16) {
        __mmask16 k = brg_step_mask(j, c);
        __m512 g = _mm512_maskz_loadu_ps(k, dy + j);
        if (gamma) g = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(k, gamma + j));
        __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv), rv);
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(g, mg), _mm512_mul_ps(xhat, mgx)), rv);
        _mm512_mask_storeu_ps(dx + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dx + j), d));
    }
}

/* dgamma/dbeta over a block of 64 columns: 4 x 2 double accumulators per output, one row at a
 * time. */
BRG_AVX512 static void param_grads_add_avx512(float *dgamma, float *dbeta, const float *dy, const float *x,
                                              const float *mean, const float *rstd, int64_t n, int64_t c,
                       int64_t j_first, int64_t j_last) {
    for (int64_t j0 = j_first; j0 < j_last; j0 += COL_BLOCK) {
        __m512d ag[8], ab[8];
        for (int v = 0; v < 8; v++) ag[v] = ab[v] = _mm512_setzero_pd();
        __mmask16 k[4];
        for (int q = 0; q < 4; q++) k[q] = j0 + 16 * q < c ? brg_step_mask(j0 + 16 * q, c) : 0;
        for (int64_t i = 0; i < n; i++) {
            const float *xr = x + i * c + j0, *gr = dy + i * c + j0;
            const __m512 mv = _mm512_set1_ps(mean[i]), rv = _mm512_set1_ps(rstd[i]);
            for (int q = 0; q < 4; q++) {
                __m512 g = _mm512_maskz_loadu_ps(k[q], gr + 16 * q);
                __m512 xhat = _mm512_maskz_mul_ps(k[q], _mm512_sub_ps(_mm512_maskz_loadu_ps(k[q], xr + 16 * q), mv), rv);
                __m512d gl = brg_widen_lo(g), gh = brg_widen_hi(g);
                ag[2 * q] = _mm512_fmadd_pd(brg_widen_lo(xhat), gl, ag[2 * q]);
                ag[2 * q + 1] = _mm512_fmadd_pd(brg_widen_hi(xhat), gh, ag[2 * q + 1]);
                ab[2 * q] = _mm512_add_pd(ab[2 * q], gl);
                ab[2 * q + 1] = _mm512_add_pd(ab[2 * q + 1], gh);
            }
        }
        for (int q = 0; q < 4; q++) {
            if (!k[q]) continue;
            for (int half = 0; half < 2; half++) {
                __mmask8 m8 = (__mmask8)(k[q] >> (8 * half));
                int64_t at = j0 + 16 * q + 8 * half;
                if (dgamma) {
                    __m512d cur = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m8, dgamma + at));
                    _mm256_mask_storeu_ps(dgamma + at, m8, _mm512_cvtpd_ps(_mm512_add_pd(cur, ag[2 * q + half])));
                }
                if (dbeta) {
                    __m512d cur = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m8, dbeta + at));
                    _mm256_mask_storeu_ps(dbeta + at, m8, _mm512_cvtpd_ps(_mm512_add_pd(cur, ab[2 * q + half])));
                }
            }
        }
    }
}
/* ---- AVX2: the AVX-512 rows in 16-column steps of two 8-wide halves (the same double lanes);
 * full steps load plainly, the one tail step masked. ---- */

/* The lanes of a row's 16-wide step at j as two 32-bit lane masks, widened to the four 64-bit
 * masks of its double quarters. */
BRG_AVX2_INLINE void quarter_masks(__m256d mq[4], int64_t j, int64_t c) {
    const __m256i a = brg_mask8(j, c), b = brg_mask8(j + 8, c);
    mq[0] = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(a)));
    mq[1] = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(a, 1)));
    mq[2] = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(b)));
    mq[3] = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(b, 1)));
}

/* l += (v - m)^2 over the 16 floats (a, b); in the tail step the lanes past the row count zero,
 * as the AVX-512 body's masked subtraction makes them. */
BRG_AVX2_INLINE void centred_squares_add(brg_lanes16 *l, __m256 a, __m256 b, __m256d mv, int64_t j, int64_t c,
                                         bool tail) {
    const __m256d w[4] = {brg_widen8_lo(a), brg_widen8_hi(a), brg_widen8_lo(b), brg_widen8_hi(b)};
    __m256d mq[4];
    if (tail) quarter_masks(mq, j, c);
    for (int k = 0; k < 4; k++) {
        __m256d d = _mm256_sub_pd(w[k], mv);
        if (tail) d = _mm256_and_pd(d, mq[k]);
        l->q[k] = _mm256_fmadd_pd(d, d, l->q[k]);
    }
}

BRG_AVX2 static void row_stats_avx2(const float *x, int64_t c, float eps, float *mean, float *rstd) {
    brg_lanes16 sum = brg_lanes16_zero(), ss = brg_lanes16_zero();
    int64_t j = 0;
    for (; j + 16 <= c; j += 16) brg_lanes16_add(&sum, _mm256_loadu_ps(x + j), _mm256_loadu_ps(x + j + 8));
    if (j < c) brg_lanes16_add(&sum, brg_load_tail8(x, j, c), brg_load_tail8(x, j + 8, c));
    const double m = brg_lanes16_sum(&sum) / (double)c;
    const __m256d mv = _mm256_set1_pd(m);
    for (j = 0; j + 16 <= c; j += 16)
        centred_squares_add(&ss, _mm256_loadu_ps(x + j), _mm256_loadu_ps(x + j + 8), mv, j, c, false);
    if (j < c) centred_squares_add(&ss, brg_load_tail8(x, j, c), brg_load_tail8(x, j + 8, c), mv, j, c, true);
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(brg_lanes16_sum(&ss) / (double)c + (double)eps));
}

/* One 8-wide step of the forward: ((x - m) r) gamma + beta. */
BRG_AVX2_INLINE __m256 normalise8(__m256 x, __m256 mv, __m256 rv, const float *gamma, const float *beta, int64_t j,
                                  int64_t c, bool tail) {
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(x, mv), rv);
    if (gamma) t = _mm256_mul_ps(t, tail ? brg_load_tail8(gamma, j, c) : _mm256_loadu_ps(gamma + j));
    if (beta) t = _mm256_add_ps(t, tail ? brg_load_tail8(beta, j, c) : _mm256_loadu_ps(beta + j));
    return t;
}

BRG_AVX2 static void row_normalise_avx2(float *y, const float *x, const float *gamma, const float *beta, float m,
                                        float r, int64_t c) {
    const __m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(r);
    int64_t j = 0;
    for (; j + 8 <= c; j += 8)
        _mm256_storeu_ps(y + j, normalise8(_mm256_loadu_ps(x + j), mv, rv, gamma, beta, j, c, false));
    if (j < c) brg_store_tail8(y, j, c, normalise8(brg_load_tail8(x, j, c), mv, rv, gamma, beta, j, c, true));
}

/* g = gamma dy and xhat = (x - m) r for the 8-wide step at j; xhat is zero past the row. */
BRG_AVX2_INLINE void g_xhat8(__m256 *g, __m256 *xhat, const float *dy, const float *x, const float *gamma, __m256 mv,
                             __m256 rv, int64_t j, int64_t c, bool tail) {
    *g = tail ? brg_load_tail8(dy, j, c) : _mm256_loadu_ps(dy + j);
    if (gamma) *g = _mm256_mul_ps(*g, tail ? brg_load_tail8(gamma, j, c) : _mm256_loadu_ps(gamma + j));
    *xhat = _mm256_mul_ps(_mm256_sub_ps(tail ? brg_load_tail8(x, j, c) : _mm256_loadu_ps(x + j), mv), rv);
    if (tail) *xhat = brg_zero_tail8(*xhat, j, c);
}

/* sum_g += g and sum_gx += g xhat over the 16-wide step at j, in row_dx_add_avx512's lanes. */
BRG_AVX2_INLINE void dx_sums16(brg_lanes16 *sum_g, brg_lanes16 *sum_gx, const float *dy, const float *x,
                               const float *gamma, __m256 mv, __m256 rv, int64_t j, int64_t c, bool tail) {
    __m256 g[2], xhat[2];
    g_xhat8(&g[0], &xhat[0], dy, x, gamma, mv, rv, j, c, tail);
    g_xhat8(&g[1], &xhat[1], dy, x, gamma, mv, rv, j + 8, c, tail);
    brg_lanes16_add(sum_g, g[0], g[1]);
    for (int h = 0; h < 2; h++) {
        sum_gx->q[2 * h] = _mm256_fmadd_pd(brg_widen8_lo(g[h]), brg_widen8_lo(xhat[h]), sum_gx->q[2 * h]);
        sum_gx->q[2 * h + 1] = _mm256_fmadd_pd(brg_widen8_hi(g[h]), brg_widen8_hi(xhat[h]), sum_gx->q[2 * h + 1]);
    }
}

/* dx += (g - mean(g) - xhat mean(g xhat)) r for the 8-wide step at j. */
BRG_AVX2_INLINE __m256 dx_step8(__m256 dx, const float *dy, const float *x, const float *gamma, __m256 mv, __m256 rv,
                                __m256 mg, __m256 mgx, int64_t j, int64_t c, bool tail) {
    __m256 g, xhat;
    g_xhat8(&g, &xhat, dy, x, gamma, mv, rv, j, c, tail);
    __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(g, mg), _mm256_mul_ps(xhat, mgx)), rv);
    return _mm256_add_ps(dx, d);
}

BRG_AVX2 static void row_dx_add_avx2(float *dx, const float *dy, const float *x, const float *gamma, float m, float r,
                                     int64_t c) {
    const __m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(r);
    brg_lanes16 sum_g = brg_lanes16_zero(), sum_gx = brg_lanes16_zero();
    int64_t j = 0;
    for (; j + 16 <= c; j += 16) dx_sums16(&sum_g, &sum_gx, dy, x, gamma, mv, rv, j, c, false);
    if (j < c) dx_sums16(&sum_g, &sum_gx, dy, x, gamma, mv, rv, j, c, true);
    const __m256 mg = _mm256_set1_ps((float)(brg_lanes16_sum(&sum_g) / (double)c));
    const __m256 mgx = _mm256_set1_ps((float)(brg_lanes16_sum(&sum_gx) / (double)c));
    for (j = 0; j + 8 <= c; j += 8)
        _mm256_storeu_ps(dx + j, dx_step8(_mm256_loadu_ps(dx + j), dy, x, gamma, mv, rv, mg, mgx, j, c, false));
    if (j < c) brg_store_tail8(dx, j, c, dx_step8(brg_load_tail8(dx, j, c), dy, x, gamma, mv, rv, mg, mgx, j, c, true));
}

/* The AVX2 parameter gradients take the same 64-column blocks, as 16 double quarters. Their
 * accumulators do not all fit the 16 ymm registers, but reading 256 contiguous bytes of each row
 * per pass measured faster than register-sized blocks (0.29 against 0.36 ns per element for 16
 * columns, 768-wide rows). Each column's sum runs over the rows in order, as in the AVX-512 body,
 * so the block width does not change a bit. */
#define QUARTERS (COL_BLOCK / 4)

/* dgamma/dbeta columns [j0, j0 + COL_BLOCK) (those before c): ag += xhat dy, ab += dy down
 * the rows. */
BRG_AVX2_INLINE void grads_block(__m256d ag[QUARTERS], __m256d ab[QUARTERS], const float *dy, const float *x,
                                 const float *mean, const float *rstd, int64_t n, int64_t c, int64_t j0, bool tail) {
    for (int k = 0; k < QUARTERS; k++) ag[k] = ab[k] = _mm256_setzero_pd();
    const int64_t w = c - j0;
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c + j0, *gr = dy + i * c + j0;
        const __m256 mv = _mm256_set1_ps(mean[i]), rv = _mm256_set1_ps(rstd[i]);
        for (int h = 0; h < QUARTERS / 2; h++) {
            __m256 g, xhat;
            g_xhat8(&g, &xhat, gr, xr, NULL, mv, rv, 8 * h, tail ? w : COL_BLOCK, tail);
            const __m256d gq[2] = {brg_widen8_lo(g), brg_widen8_hi(g)};
            const __m256d xq[2] = {brg_widen8_lo(xhat), brg_widen8_hi(xhat)};
            for (int q = 0; q < 2; q++) {
                ag[2 * h + q] = _mm256_fmadd_pd(xq[q], gq[q], ag[2 * h + q]);
                ab[2 * h + q] = _mm256_add_pd(ab[2 * h + q], gq[q]);
            }
        }
    }
}

/* out[j] = float(out[j] + acc[j]) for the 4 columns at out (the first `left` of them). */
BRG_AVX2_INLINE void add_quarter(float *out, __m256d acc, int64_t left) {
    if (left >= 4) {
        _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(out)), acc)));
    } else if (left > 0) {
        const __m128i m = _mm_cmpgt_epi32(_mm_set1_epi32((int)left), _mm_setr_epi32(0, 1, 2, 3));
        _mm_maskstore_ps(out, m, _mm256_cvtpd_ps(_mm256_add_pd(_mm256_cvtps_pd(_mm_maskload_ps(out, m)), acc)));
    }
}

BRG_AVX2 static void param_grads_add_avx2(float *dgamma, float *dbeta, const float *dy, const float *x,
                                          const float *mean, const float *rstd, int64_t n, int64_t c,
                     int64_t j_first, int64_t j_last) {
    for (int64_t j0 = j_first; j0 < j_last; j0 += COL_BLOCK) {
        __m256d ag[QUARTERS], ab[QUARTERS];
        grads_block(ag, ab, dy, x, mean, rstd, n, c, j0, j0 + COL_BLOCK > c);
        for (int q = 0; q < QUARTERS; q++) {
            if (dgamma) add_quarter(dgamma + j0 + 4 * q, ag[q], c - j0 - 4 * q);
            if (dbeta) add_quarter(dbeta + j0 + 4 * q, ab[q], c - j0 - 4 * q);
        }
    }
}
#endif

/* One row of the forward at each level: statistics, then the normalised row from exactly the
 * float mean and rstd that are saved, since those are what backward sees. */
static void row_fwd_scalar(float *y, const float *x, const float *gamma, const float *beta, int64_t c, float eps,
                           float *m, float *r) {
    row_stats(x, c, eps, m, r);
    for (int64_t j = 0; j < c; j++) y[j] = (x[j] - *m) * *r;
    if (gamma)
        for (int64_t j = 0; j < c; j++) y[j] *= gamma[j];
    if (beta)
        for (int64_t j = 0; j < c; j++) y[j] += beta[j];
}

#if defined(__x86_64__) || defined(__i386__)
static void row_fwd_avx512(float *y, const float *x, const float *gamma, const float *beta, int64_t c, float eps,
                           float *m, float *r) {
    row_stats_avx512(x, c, eps, m, r);
    row_normalise_avx512(y, x, gamma, beta, *m, *r, c);
}

static void row_fwd_avx2(float *y, const float *x, const float *gamma, const float *beta, int64_t c, float eps,
                         float *m, float *r) {
    row_stats_avx2(x, c, eps, m, r);
    row_normalise_avx2(y, x, gamma, beta, *m, *r, c);
}
#endif

/* Rows [first, last) of the forward. */
typedef struct fwd_job {
    float *y, *mean, *rstd;
    const float *x, *gamma, *beta;
    int64_t n, c;
    float eps;
} fwd_job;

static void fwd_slice(void *p, int i, int n_slices) {
    const fwd_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 1, i, n_slices, &first, &last);
    const int64_t c = j->c;
    for (int64_t r = first; r < last; r++) {
        const float *xr = j->x + r * c;
        float *yr = j->y + r * c;
        BRG_SIMD_PICK(row_fwd_avx512(yr, xr, j->gamma, j->beta, c, j->eps, &j->mean[r], &j->rstd[r]),
                      row_fwd_avx2(yr, xr, j->gamma, j->beta, c, j->eps, &j->mean[r], &j->rstd[r]),
                      row_fwd_scalar(yr, xr, j->gamma, j->beta, c, j->eps, &j->mean[r], &j->rstd[r]));
    }
}

/* Rows are independent: a device's team takes a share of them each. */
void brg_k_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                         const float *beta, int64_t n, int64_t c, float eps) {
    BRG_ASSERT(n >= 0 && c >= 0);
    BRG_ASSERT(n == 0 || c > 0);
    fwd_job job = {y, mean, rstd, x, gamma, beta, n, c, eps};
    brg_team_split(fwd_slice, &job, n * c);
}

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gamma * dy: the two means are the
 * projections that normalisation removes. */
static void row_dx_add(float *dx, const float *dy, const float *x, const float *gamma, float m, float r,
                       int64_t c) {
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = 0; j < c; j++) {
        float g = gamma ? gamma[j] * dy[j] : dy[j];
        float xhat = (x[j] - m) * r;
        sum_g += g;
        sum_gx += (double)g * xhat;
    }
    float mg = (float)(sum_g / (double)c), mgx = (float)(sum_gx / (double)c);
    for (int64_t j = 0; j < c; j++) {
        float g = gamma ? gamma[j] * dy[j] : dy[j];
        float xhat = (x[j] - m) * r;
        dx[j] += (g - mg - xhat * mgx) * r;
    }
}

/* dgamma += sum_rows xhat * dy, dbeta += sum_rows dy, reduced in double over a block of columns at
 * a time: the sums run over every token of the batch. */
static void param_grads_add(float *dgamma, float *dbeta, const float *dy, const float *x, const float *mean,
                            const float *rstd, int64_t n, int64_t c,
                int64_t j_first, int64_t j_last) {
    for (int64_t j0 = j_first; j0 < j_last; j0 += COL_BLOCK) {
        int64_t w = c - j0 < COL_BLOCK ? c - j0 : COL_BLOCK;
        double acc_g[COL_BLOCK] = {0}, acc_b[COL_BLOCK] = {0};
        for (int64_t i = 0; i < n; i++) {
            const float *xr = x + i * c + j0, *gr = dy + i * c + j0;
            float m = mean[i], r = rstd[i];
            for (int64_t j = 0; j < w; j++) {
                acc_g[j] += (double)((xr[j] - m) * r) * gr[j];
                acc_b[j] += gr[j];
            }
        }
        for (int64_t j = 0; j < w; j++) {
            if (dgamma) dgamma[j0 + j] = (float)(dgamma[j0 + j] + acc_g[j]);
            if (dbeta) dbeta[j0 + j] = (float)(dbeta[j0 + j] + acc_b[j]);
        }
    }
}

/* One slice of the backward: dx for its share of the rows, and dgamma/dbeta for its share of the
 * column blocks, each summed down all the rows in order as alone. */
typedef struct bwd_job {
    float *dx, *dgamma, *dbeta;
    const float *dy, *x, *gamma, *mean, *rstd;
    int64_t n, c;
} bwd_job;

static void bwd_slice(void *p, int i, int n_slices) {
    const bwd_job *j = p;
    const int64_t c = j->c;
    int64_t r0, r1, c0, c1;
    brg_team_slice(j->n, 1, i, n_slices, &r0, &r1);
    brg_team_slice(c, COL_BLOCK, i, n_slices, &c0, &c1);
    for (int64_t r = r0; j->dx && r < r1; r++) {
        float *dx = j->dx + r * c;
        const float *dy = j->dy + r * c, *x = j->x + r * c;
        BRG_SIMD_PICK(row_dx_add_avx512(dx, dy, x, j->gamma, j->mean[r], j->rstd[r], c),
                      row_dx_add_avx2(dx, dy, x, j->gamma, j->mean[r], j->rstd[r], c),
                      row_dx_add(dx, dy, x, j->gamma, j->mean[r], j->rstd[r], c));
    }
    if (!j->dgamma && !j->dbeta) return;
    BRG_SIMD_PICK(param_grads_add_avx512(j->dgamma, j->dbeta, j->dy, j->x, j->mean, j->rstd, j->n, c, c0, c1),
                  param_grads_add_avx2(j->dgamma, j->dbeta, j->dy, j->x, j->mean, j->rstd, j->n, c, c0, c1),
                  param_grads_add(j->dgamma, j->dbeta, j->dy, j->x, j->mean, j->rstd, j->n, c, c0, c1));
}

void brg_k_layernorm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                         const float *gamma, const float *mean, const float *rstd, int64_t n, int64_t c) {
    BRG_ASSERT(n >= 0 && c >= 0);
    bwd_job job = {dx, dgamma, dbeta, dy, x, gamma, mean, rstd, n, c};
    brg_team_split(bwd_slice, &job, n * c);
}
