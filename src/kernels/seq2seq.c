/* Kernels of the encoder-decoder models (T5): RMS norm, ReLU, elementwise product, relative
 * position buckets and the bias gathered from them. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

/* ---- RMS norm ---- */

/* The mean square is reduced in double: T5LayerNorm upcasts to float32 for the same reason in
 * half precision, and a long row of float32 squares loses digits too. */
void brg_k_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t n, int64_t c, float eps) {
    BRG_ASSERT(n >= 0 && c >= 0);
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c;
        float *yr = y + i * c;
        double ss = 0.0;
        for (int64_t j = 0; j < c; j++) ss += (double)xr[j] * xr[j];
        const float r = (float)(1.0 / sqrt(ss / (double)(c ? c : 1) + (double)eps));
        rstd[i] = r;
        for (int64_t j = 0; j < c; j++) yr[j] = w[j] * (xr[j] * r);
    }
}

/* With g = dy * w: dx = r * g - r^3 * x * mean(g * x); dw += dy * x * r. */
void brg_k_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                       int64_t n, int64_t c) {
    BRG_ASSERT(n >= 0 && c >= 0);
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c, *g = dy + i * c;
        const float r = rstd[i];
        if (dw)
            for (int64_t j = 0; j < c; j++) dw[j] += g[j] * (xr[j] * r);
        if (!dx) continue;
        double sgx = 0.0;
        for (int64_t j = 0; j < c; j++) sgx += (double)g[j] * w[j] * xr[j];
        const float k = (float)(sgx / (double)c * (double)r * (double)r * (double)r);
        float *d = dx + i * c;
        for (int64_t j = 0; j < c; j++) d[j] += r * g[j] * w[j] - k * xr[j];
    }
}

/* ---- ReLU ---- */

/* torch's threshold(x, 0, 0): x <= 0 ? 0 : x, so a NaN stays NaN instead of becoming 0. */
void brg_k_relu_fwd(float *y, const float *x, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

/* torch's threshold_backward: x <= 0 ? 0 : dy, so the gradient at exactly 0 is 0 and a NaN
 * input passes it on. */
void brg_k_relu_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] <= 0.0f)) dx[i] += dy[i];
}

/* ---- elementwise product ---- */

void brg_k_mul_fwd(float *y, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

void brg_k_mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (da)
        for (int64_t i = 0; i < n; i++) da[i] += dy[i] * b[i];
    if (db)
        for (int64_t i = 0; i < n; i++) db[i] += dy[i] * a[i];
}

/* ---- relative position buckets ---- */

/* transformers computes the logarithmic buckets in float32 arithmetic and truncates; the same
 * float operations in the same order give the same bucket at the points where the exact value
 * is an integer (distance 16, 32, 64 with 32 buckets over 128), where double precision would
 * land on the other side. */
int32_t brg_k_relative_position_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
    BRG_ASSERT(num_buckets >= 4 && max_distance > num_buckets / 2);
    int64_t bucket = 0, rp = relative_position, nb = num_buckets;
    if (bidirectional) {
        nb /= 2;
        if (rp > 0) bucket += nb;
        rp = rp < 0 ? -rp : rp;
    } else {
        rp = rp < 0 ? -rp : 0;
    }
    const int64_t max_exact = nb / 2;
    if (rp < max_exact) return (int32_t)(bucket + rp);
    float v = logf((float)rp / (float)max_exact);
    v = v / (float)log((double)max_distance / (double)max_exact);
    v = v * (float)(nb - max_exact);
    int64_t large = max_exact + (int64_t)v;
    if (large > nb - 1) large = nb - 1;
    return (int32_t)(bucket + large);
}

/* The table is constant along its diagonals (it depends on j - i only): the first row and column
 * take Tq + Tk - 1 logarithms instead of Tq * Tk, and every other entry copies its upper-left
 * neighbour. */
void brg_k_relative_position_buckets(int32_t *buckets, int64_t Tq, int64_t Tk, bool bidirectional,
                                     int64_t num_buckets, int64_t max_distance) {
    BRG_ASSERT(Tq >= 0 && Tk >= 0);
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++)
            buckets[i * Tk + j] = i > 0 && j > 0 ? buckets[(i - 1) * Tk + j - 1]
                                                 : brg_k_relative_position_bucket(j - i, bidirectional, num_buckets,
                                                                                  max_distance);
}

/* ---- relative position bias: bias[h, i, j] = table[buckets[i, j], h] ---- */

void brg_k_relpos_bias_fwd(float *bias, const float *table, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk) {
    BRG_ASSERT(H >= 0 && Tq >= 0 && Tk >= 0);
    const int64_t n = Tq * Tk;
    for (int64_t h = 0; h < H; h++)
        for (int64_t p = 0; p < n; p++) bias[h * n + p] = table[(int64_t)buckets[p] * H + h];
}

/* Visited in a fixed order, so the many positions that share a bucket sum deterministically. */
void brg_k_relpos_bias_bwd(float *dtable, const float *dbias, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk) {
    BRG_ASSERT(H >= 0 && Tq >= 0 && Tk >= 0);
    if (!dtable) return;
    const int64_t n = Tq * Tk;
    for (int64_t h = 0; h < H; h++)
        for (int64_t p = 0; p < n; p++) dtable[(int64_t)buckets[p] * H + h] += dbias[h * n + p];
}
