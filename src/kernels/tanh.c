/* tanh (BERT's pooler); its backward reads the output: dx += dy * (1 - y^2). */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_tanh_fwd(float *y, const float *x, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

void brg_k_tanh_bwd(float *dx, const float *dy, const float *y, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}
