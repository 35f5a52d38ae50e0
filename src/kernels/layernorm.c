/* Layer normalisation over the last dimension, as torch.nn.LayerNorm: population variance,
 * rstd = 1/sqrt(var + eps). Row statistics are reduced in double (two passes: mean, then the
 * centred sum of squares) so that large offsets do not cancel digits away. gamma and beta may be
 * NULL (no affine transform). */
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
    const double m = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)) / (double)c;
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
    const double ss = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
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
    const __m512 mg = _mm512_set1_ps((float)(_mm512_reduce_add_pd(_mm512_add_pd(g_lo, g_hi)) / (double)c));
    const __m512 mgx = _mm512_set1_ps((float)(_mm512_reduce_add_pd(_mm512_add_pd(gx_lo, gx_hi)) / (double)c));
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
                                              const float *mean, const float *rstd, int64_t n, int64_t c) {
    for (int64_t j0 = 0; j0 < c; j0 += COL_BLOCK) {
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
#define LAYERNORM_AVX512 1
#endif

void brg_k_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                         const float *beta, int64_t n, int64_t c, float eps) {
    BRG_ASSERT(n >= 0 && c >= 0);
    BRG_ASSERT(n == 0 || c > 0);
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c;
        float *yr = y + i * c;
        float m, r;
#ifdef LAYERNORM_AVX512
        if (brg_simd_avx512()) {
            row_stats_avx512(xr, c, eps, &m, &r);
            row_normalise_avx512(yr, xr, gamma, beta, m, r, c);
            mean[i] = m;
            rstd[i] = r;
            continue;
        }
#endif
        row_stats(xr, c, eps, &m, &r);
        /* The saved float mean/rstd are what backward sees, so forward uses exactly them too. */
        for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - m) * r;
        if (gamma)
            for (int64_t j = 0; j < c; j++) yr[j] *= gamma[j];
        if (beta)
            for (int64_t j = 0; j < c; j++) yr[j] += beta[j];
        mean[i] = m;
        rstd[i] = r;
    }
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
                            const float *rstd, int64_t n, int64_t c) {
    for (int64_t j0 = 0; j0 < c; j0 += COL_BLOCK) {
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

void brg_k_layernorm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                         const float *gamma, const float *mean, const float *rstd, int64_t n, int64_t c) {
    BRG_ASSERT(n >= 0 && c >= 0);
#ifdef LAYERNORM_AVX512
    if (brg_simd_avx512()) {
        if (dx)
            for (int64_t i = 0; i < n; i++)
                row_dx_add_avx512(dx + i * c, dy + i * c, x + i * c, gamma, mean[i], rstd[i], c);
        if (dgamma || dbeta) param_grads_add_avx512(dgamma, dbeta, dy, x, mean, rstd, n, c);
        return;
    }
#endif
    if (dx)
        for (int64_t i = 0; i < n; i++)
            row_dx_add(dx + i * c, dy + i * c, x + i * c, gamma, mean[i], rstd[i], c);
    if (dgamma || dbeta) param_grads_add(dgamma, dbeta, dy, x, mean, rstd, n, c);
}
