/* Elementwise helpers: residual add, gradient accumulation, scaling. Outputs may alias inputs. */
#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_add_fwd(float *y, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void brg_k_accumulate(float *dx, const float *dy, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
}

void brg_k_scale(float *y, const float *x, float s, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}
