#include "kernels/gemv.h"

#include <string.h>

#include "brigade/status.h"

/* Lanes of the dot products: independent partial sums the compiler turns into vector registers
 * (a fixed order, so no -ffast-math reassociation is needed). */
#define LANES 16

static float dot(const float *a, const float *b, int64_t n) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

static void axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] += a * x[j];
}

void brg_k_linear_rows_fwd(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                           int64_t out, bool w_in_out) {
    BRG_ASSERT(m >= 0 && in >= 0 && out >= 0);
    if (w_in_out) {
        for (int64_t r = 0; r < m; r++) {
            if (b) memcpy(y + r * out, b, (size_t)out * sizeof *y);
            else memset(y + r * out, 0, (size_t)out * sizeof *y);
        }
        for (int64_t k = 0; k < in; k++)
            for (int64_t r = 0; r < m; r++) axpy(y + r * out, x[r * in + k], w + k * out, out);
        return;
    }
    for (int64_t j = 0; j < out; j++) {
        const float *wj = w + j * in, bj = b ? b[j] : 0.0f;
        for (int64_t r = 0; r < m; r++) y[r * out + j] = dot(x + r * in, wj, in) + bj;
    }
}
