/* Linear layer y = x @ W + b for both weight layouts in use: GPT-2's Conv1D keeps W as
 * [in, out], nn.Linear as [out, in]. Every product goes through brg_gemm; only the transpose
 * flags differ between the layouts. */
#include "brigade/status.h"
#include "kernels/kernels.h"

/* Columns summed per pass of col_sums_add: the double accumulators stay in registers/L1 while
 * each row contributes a contiguous slice. */
#define COL_BLOCK 64

/* dst[j] += sum_i src[i, j] over rows, accumulated in double, for columns [first, last) (whole
 * blocks): a bias gradient sums thousands of rows and float accumulation would lose digits the
 * model tolerances need. */
static void col_sums_range(float *dst, const float *src, int64_t rows, int64_t cols, int64_t first, int64_t last) {
    for (int64_t j0 = first; j0 < last; j0 += COL_BLOCK) {
        int64_t w = last - j0 < COL_BLOCK ? last - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        for (int64_t i = 0; i < rows; i++) {
            const float *row = src + i * cols + j0;
            for (int64_t j = 0; j < w; j++) acc[j] += row[j];
        }
        for (int64_t j = 0; j < w; j++) dst[j0 + j] = (float)(dst[j0 + j] + acc[j]);
    }
}

typedef struct rows_job {
    float *y;
    const float *x;
    int64_t rows, cols;
} rows_job;

/* Each column is summed down all the rows in order by one slice: any split gives the same bits. */
static void col_sums_slice(void *p, int i, int n) {
    const rows_job *j = p;
    int64_t first, last;
    brg_team_slice(j->cols, COL_BLOCK, i, n, &first, &last);
    col_sums_range(j->y, j->x, j->rows, j->cols, first, last);
}

static void col_sums_add(float *dst, const float *src, int64_t rows, int64_t cols) {
    rows_job job = {dst, src, rows, cols};
    brg_team_split(col_sums_slice, &job, rows * cols);
}

/* y[i, :] += b for a share of the rows. */
static void bias_add_slice(void *p, int i, int n) {
    const rows_job *j = p;
    int64_t first, last;
    brg_team_slice(j->rows, 1, i, n, &first, &last);
    for (int64_t r = first; r < last; r++) {
        float *row = j->y + r * j->cols;
        for (int64_t k = 0; k < j->cols; k++) row[k] += j->x[k];
    }
}

void brg_k_linear_fwd(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                      int64_t out, bool w_in_out) {
    BRG_ASSERT(n >= 0 && in >= 0 && out >= 0);
    /* [in,out]: y = x @ W.  [out,in]: y = x @ W^T. A W packed once (a device's) gives the same bits. */
    const int64_t ldw = w_in_out ? out : in;
    const brg_packed_b *packed = brg_packed_weights_find(w, !w_in_out, in, out, ldw);
    if (packed) brg_gemm_packed(false, n, out, in, 1.0f, x, in, packed, 0.0f, y, out);
    else brg_gemm(false, !w_in_out, n, out, in, 1.0f, x, in, w, ldw, 0.0f, y, out);
    if (!b) return;
    rows_job job = {y, b, n, out};
    brg_team_split(bias_add_slice, &job, n * out);
}

void brg_k_linear_bwd(float *dx, bool dx_overwrite, float *dw, bool dw_overwrite, float *db, const float *dy,
                      const float *x, const float *w, int64_t n, int64_t in, int64_t out, bool w_in_out) {
    BRG_ASSERT(n >= 0 && in >= 0 && out >= 0);
    const float dx_beta = dx_overwrite ? 0.0f : 1.0f, dw_beta = dw_overwrite ? 0.0f : 1.0f;
    if (dx) {
        /* [in,out]: dx += dy @ W^T.  [out,in]: dx += dy @ W. A W packed once a step (a training
         * device's, over its micro-batches) gives the same bits. */
        const int64_t ldw = w_in_out ? out : in;
        const brg_packed_b *packed = brg_packed_weights_find(w, w_in_out, out, in, ldw);
        if (packed) brg_gemm_packed(false, n, in, out, 1.0f, dy, out, packed, dx_beta, dx, in);
        else brg_gemm(false, w_in_out, n, in, out, 1.0f, dy, out, w, ldw, dx_beta, dx, in);
    }
    if (dw) {
        if (w_in_out) /* dW[in,out] += x^T @ dy */
            brg_gemm(true, false, in, out, n, 1.0f, x, in, dy, out, dw_beta, dw, out);
        else /* dW[out,in] += dy^T @ x */
            brg_gemm(true, false, out, in, n, 1.0f, dy, out, x, in, dw_beta, dw, in);
    }
    if (db) col_sums_add(db, dy, n, out);
}
