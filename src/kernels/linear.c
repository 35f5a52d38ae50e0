/* Linear layer y = x @ W + b for both weight layouts in use: GPT-2's Conv1D keeps W as
 * [in, out], nn.Linear as [out, in]. Every product goes through brg_gemm; only the transpose
 * flags differ between the layouts. */
#include "brigade/status.h"
#include "kernels/kernels.h"

/* Columns summed per pass of col_sums_add: the double accumulators stay in registers/L1 while
 * each row contributes a contiguous slice. */
#define COL_BLOCK 64

/* dst[j] += sum_i src[i, j] over rows, accumulated in double: a bias gradient sums thousands of
 * rows and float accumulation would lose digits the model tolerances need. */
static void col_sums_add(float *dst, const float *src, int64_t rows, int64_t cols) {
    for (int64_t j0 = 0; j0 < cols; j0 += COL_BLOCK) {
        int64_t w = cols - j0 < COL_BLOCK ? cols - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        for (int64_t i = 0; i < rows; i++) {
            const float *row = src + i * cols + j0;
            for (int64_t j = 0; j < w; j++) acc[j] += row[j];
        }
        for (int64_t j = 0; j < w; j++) dst[j0 + j] = (float)(dst[j0 + j] + acc[j]);
    }
}

void brg_k_linear_fwd(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                      int64_t out, bool w_in_out) {
    BRG_ASSERT(n >= 0 && in >= 0 && out >= 0);
    /* [in,out]: y = x @ W.  [out,in]: y = x @ W^T. */
    brg_gemm(false, !w_in_out, n, out, in, 1.0f, x, in, w, w_in_out ? out : in, 0.0f, y, out);
    if (!b) return;
    for (int64_t i = 0; i < n; i++) {
        float *row = y + i * out;
        for (int64_t j = 0; j < out; j++) row[j] += b[j];
    }
}

void brg_k_linear_bwd(float *dx, float *dw, bool dw_overwrite, float *db, const float *dy, const float *x,
                      const float *w, int64_t n, int64_t in, int64_t out, bool w_in_out) {
    BRG_ASSERT(n >= 0 && in >= 0 && out >= 0);
    const float dw_beta = dw_overwrite ? 0.0f : 1.0f;
    if (dx) {
        /* [in,out]: dx += dy @ W^T.  [out,in]: dx += dy @ W. */
        brg_gemm(false, w_in_out, n, in, out, 1.0f, dy, out, w, w_in_out ? out : in, 1.0f, dx, in);
    }
    if (dw) {
        if (w_in_out) /* dW[in,out] += x^T @ dy */
            brg_gemm(true, false, in, out, n, 1.0f, x, in, dy, out, dw_beta, dw, out);
        else /* dW[out,in] += dy^T @ x */
            brg_gemm(true, false, out, in, n, 1.0f, dy, out, x, in, dw_beta, dw, in);
    }
    if (db) col_sums_add(db, dy, n, out);
}
