/* RMS norm (T5LayerNorm): y = w * x / sqrt(mean(x^2) + eps), no mean subtraction, no bias. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

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
