/* Row softmax with the row maximum subtracted first, so exp never overflows. Sums are reduced in
 * double: rows can be as long as a vocabulary. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

static void softmax_row(float *y, const float *x, int64_t cols) {
    double sum = brg_simd_exp_sum(y, x, brg_simd_max(x, cols), cols);
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < cols; j++) y[j] *= inv;
}

void brg_k_softmax_fwd(float *y, const float *x, int64_t rows, int64_t cols) {
    BRG_ASSERT(rows >= 0 && cols >= 0);
    for (int64_t i = 0; i < rows; i++) softmax_row(y + i * cols, x + i * cols, cols);
}

/* dx += y * (dy - sum_j dy_j y_j). */
void brg_k_softmax_bwd(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols) {
    BRG_ASSERT(rows >= 0 && cols >= 0);
    if (!dx) return;
    for (int64_t i = 0; i < rows; i++) {
        const float *g = dy + i * cols, *p = y + i * cols;
        float *d = dx + i * cols;
        double dot = 0.0;
        for (int64_t j = 0; j < cols; j++) dot += (double)g[j] * p[j];
        float s = (float)dot;
        for (int64_t j = 0; j < cols; j++) d[j] += p[j] * (g[j] - s);
    }
}
