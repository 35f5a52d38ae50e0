/* The losses that compare each element with its target: mean squared error (regression) and
 * binary cross-entropy with logits (multi-label classification), as sums the caller divides.
 * Sums accumulate in double so a loss over many elements keeps float32's precision. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

double brg_k_mse_sum_fwd(const float *x, const float *t, int64_t n) {
    BRG_ASSERT(n >= 0);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)t[i];
        s += d * d;
    }
    return s;
}

void brg_k_mse_bwd(float *dx, float scale, const float *x, const float *t, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++) dx[i] += scale * 2.0f * (x[i] - t[i]);
}

/* log(1 + exp(-|x|)) never overflows, and log1p keeps it accurate when exp(-|x|) is tiny. */
double brg_k_bce_logits_sum_fwd(const float *x, const float *t, int64_t n) {
    BRG_ASSERT(n >= 0);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double xi = x[i], ti = t[i];
        s += fmax(xi, 0.0) - xi * ti + log1p(exp(-fabs(xi)));
    }
    return s;
}

static float sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

void brg_k_bce_logits_bwd(float *dx, float scale, const float *x, const float *t, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++) dx[i] += scale * (sigmoid(x[i]) - t[i]);
}
