#include "kernels/gemv.h"

#include <string.h>

#include "brigade/status.h"
#include "kernels/gemv_avx512.h"
#include "kernels/gemv_parts.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

typedef struct rows_job {
    float *y;
    const float *x, *w, *b;
    int64_t m, in, out;
    bool w_in_out;
} rows_job;

/* One tile: y[r, 0:n] (row stride ldy) = b[0:n] + sum over k of x[r, k] w[k, 0:n] (row stride
 * ldw), adding the k terms in order. Below BLOCK_ROWS rows the loop is bound by the weight stream:
 * FEW_ROWS_GROUP weight rows per pass over y keep the y traffic at a sixteenth of the weights'
 * (one decode row's GPT-2 layer products read their weights at 22 GB/s against 18 with four,
 * alone on one Zen 4 core). With more rows each row's pass re-reads the group's weights from the
 * cache, and four at a time is faster (AVX2, 8 rows: 7.7 against 6.4 GB/s). The grouping changes
 * no bit. */
ROW_LOOP static void in_out_tile(float *restrict y, int64_t ldy, const float *restrict x, int64_t in,
                                 const float *restrict w, int64_t ldw, const float *restrict b, int64_t m, int64_t n) {
    for (int64_t r = 0; r < m; r++) {
        if (b) memcpy(y + r * ldy, b, (size_t)n * sizeof *y);
        else memset(y + r * ldy, 0, (size_t)n * sizeof *y);
    }
    int64_t k = 0;
    if (m < BLOCK_ROWS)
        for (; k + FEW_ROWS_GROUP <= in; k += FEW_ROWS_GROUP)
            add_weight_rows(y, ldy, x, in, k, w + k * ldw, ldw, m, n, FEW_ROWS_GROUP, false);
    for (; k + 4 <= in; k += 4) add_weight_rows(y, ldy, x, in, k, w + k * ldw, ldw, m, n, 4, false);
    for (; k < in; k++) add_weight_rows(y, ldy, x, in, k, w + k * ldw, ldw, m, n, 1, false);
}

/* Columns [c0, c1) with W [in, out], a tile at a time (or the AVX-512 bodies: register blocks
 * from BLOCK_ROWS rows, 16-row passes below; the same bits). */
static void in_out_columns(const rows_job *j, int64_t c0, int64_t c1) {
    if (brg_simd_avx512()) {
        if (j->m >= BLOCK_ROWS) brg_gemv_in_out_avx512(j->y, j->x, j->w, j->b, j->m, j->in, j->out, c0, c1);
        else brg_gemv_in_out_avx512_few(j->y, j->x, j->w, j->b, j->m, j->in, j->out, c0, c1);
        return;
    }
    const int64_t tile = gemv_tile_width(j->m);
    for (int64_t t0 = c0; t0 < c1; t0 += tile) {
        const int64_t n = c1 - t0 < tile ? c1 - t0 : tile;
        in_out_tile(j->y + t0, j->out, j->x, j->in, j->w + t0, j->out, j->b ? j->b + t0 : NULL, j->m, n);
    }
}

/* Columns [c0, c1) with W [out, in]: each weight row read once, dotted with every input row. */
ROW_LOOP static void out_in_columns(const rows_job *j, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = j->w + c * j->in, bc = j->b ? j->b[c] : 0.0f;
        for (int64_t r = 0; r < j->m; r++) j->y[r * j->out + c] = dot(j->x + r * j->in, wc, j->in) + bc;
    }
}

/* A device's team splits the output columns (whole tiles), each computed as it is alone. */
static void columns_slice(void *ctx, int i, int n) {
    const rows_job *j = ctx;
    int64_t first, last;
    brg_team_slice(j->out, TEAM_UNIT, i, n, &first, &last);
    if (first >= last) return;
    if (j->w_in_out) in_out_columns(j, first, last);
    else if (brg_simd_avx512() && j->m >= BLOCK_ROWS)
        brg_gemv_out_in_avx512(j->y, j->x, j->w, j->b, j->m, j->in, j->out, first, last);
    else if (brg_simd_avx512()) brg_gemv_out_in_avx512_few(j->y, j->x, j->w, j->b, j->m, j->in, j->out, first, last);
    else out_in_columns(j, first, last);
}

void brg_k_linear_rows_fwd(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                           int64_t out, bool w_in_out) {
    BRG_ASSERT(m >= 0 && in >= 0 && out >= 0);
    const rows_job j = {y, x, w, b, m, in, out, w_in_out};
    /* weights touched: what a step reads, so what a team shares out */
    brg_team_split(columns_slice, (void *)&j, in * out / 8);
}
