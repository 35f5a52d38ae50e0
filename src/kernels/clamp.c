/* Clamping to [lo, hi], as torch.clamp: a NaN stays NaN; the gradient passes where lo <= x <= hi
 * (not for NaN). */
#include "kernels/kernels.h"

void brg_k_clamp_fwd(float *y, const float *x, int64_t n, float lo, float hi) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

void brg_k_clamp_bwd(float *dx, const float *dy, const float *x, int64_t n, float lo, float hi) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++)
        if (x[i] >= lo && x[i] <= hi) dx[i] += dy[i];
}

float brg_k_max_abs(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = x[i] < 0 ? -x[i] : x[i];
        if (a > m) m = a;
    }
    return m;
}
