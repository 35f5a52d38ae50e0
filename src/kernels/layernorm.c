/* Layer normalisation over the last dimension, as torch.nn.LayerNorm: population variance,
 * rstd = 1/sqrt(var + eps). Row statistics are reduced in double (two passes: mean, then the
 * centred sum of squares) so that large offsets do not cancel digits away. gamma and beta may be
 * NULL (no affine transform). */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

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

void brg_k_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                         const float *beta, int64_t n, int64_t c, float eps) {
    BRG_ASSERT(n >= 0 && c >= 0);
    BRG_ASSERT(n == 0 || c > 0);
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c;
        float *yr = y + i * c;
        float m, r;
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
    if (dx)
        for (int64_t i = 0; i < n; i++)
            row_dx_add(dx + i * c, dy + i * c, x + i * c, gamma, mean[i], rstd[i], c);
    if (dgamma || dbeta) param_grads_add(dgamma, dbeta, dy, x, mean, rstd, n, c);
}
