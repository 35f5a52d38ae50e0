/* Decode rows against half-precision weights: what `generate` runs in a half compute type.
 *
 * y[m, out] = round(x) W + b with W stored as F16 or BF16 and x rounded to the same type: every
 * operand is a half value, every product and sum fp32. The weights go through the same chains of
 * operations as the fp32 kernel's portable loops (gemv.c), so the result is, bit for bit,
 * brg_k_linear_rows_fwd on the widened operands, while only half the weight bytes are read,
 * which is what bounds a decode step. BF16 widens in the loops themselves (a shift); F16 is
 * widened a few rows (or one row) at a time into the thread's scratch first, by F16C where the
 * CPU has it (the extra pass costs most of what the halved bytes save). */
#include <string.h>

#include "brigade/status.h"
#include "kernels/gemv.h"
#include "kernels/gemv_avx512.h"
#include "kernels/gemv_parts.h"
#include "kernels/half.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

typedef struct half_job {
    float *y;
    const float *x; /* rounded to the weights' type, widened back */
    const uint16_t *w;
    brg_dtype type;
    const float *b;
    int64_t m, in, out;
    bool w_in_out;
} half_job;

static void widen(brg_dtype type, float *dst, const uint16_t *src, int64_t n) {
    if (type == BRG_DTYPE_BF16) brg_bf16_to_f32_row(dst, src, n);
    else brg_f16_to_f32_row(dst, src, n);
}

/* Four weight rows at a time (eight for bf16 read in place, FEW_ROWS_GROUP below BLOCK_ROWS rows,
 * where the weight stream bounds the loop), the rest one at a time: gemv.c's in_out_tile, through
 * the same add_weight_rows, so the bits are those of the fp32 kernel on the widened weights. */
ROW_LOOP static void add_four_rows(float *restrict y, int64_t ldy, const float *x, int64_t in, int64_t k,
                                   const float *restrict w, int64_t ldw, int64_t m, int64_t n) {
    add_weight_rows(y, ldy, x, in, k, w, ldw, m, n, 4, false);
}

ROW_LOOP static void add_one_row(float *restrict y, int64_t ldy, const float *x, int64_t in, int64_t k,
                                 const float *restrict w, int64_t m, int64_t n) {
    add_weight_rows(y, ldy, x, in, k, w, 0, m, n, 1, false);
}

ROW_LOOP static void add_eight_bf16_rows(float *restrict y, int64_t ldy, const float *x, int64_t in, int64_t k,
                                         const uint16_t *restrict w, int64_t ldw, int64_t m, int64_t n) {
    add_weight_rows(y, ldy, x, in, k, w, ldw, m, n, 8, true);
}

ROW_LOOP static void add_group_bf16_rows(float *restrict y, int64_t ldy, const float *x, int64_t in, int64_t k,
                                         const uint16_t *restrict w, int64_t ldw, int64_t m, int64_t n) {
    add_weight_rows(y, ldy, x, in, k, w, ldw, m, n, FEW_ROWS_GROUP, true);
}

ROW_LOOP static void add_one_bf16_row(float *restrict y, int64_t ldy, const float *x, int64_t in, int64_t k,
                                      const uint16_t *restrict w, int64_t m, int64_t n) {
    add_weight_rows(y, ldy, x, in, k, w, 0, m, n, 1, true);
}

/* gemv_parts.h's dot with b in bf16: the same lanes and order. */
static inline __attribute__((always_inline)) float dot_bf16(const float *a, const uint16_t *b, int64_t n) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * bf16_value(b[i + l]);
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * bf16_value(b[i]);
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

ROW_LOOP static void dot_bf16_rows(const half_job *j, int64_t c) {
    const uint16_t *wc = j->w + c * j->in;
    const float bc = j->b ? j->b[c] : 0.0f;
    for (int64_t r = 0; r < j->m; r++) j->y[r * j->out + c] = dot_bf16(j->x + r * j->in, wc, j->in) + bc;
}

/* Columns [t0, t0 + n) of W [in, out]. */
static void in_out_tile(const half_job *j, int64_t t0, int64_t n, float *rows) {
    for (int64_t r = 0; r < j->m; r++) {
        if (j->b) memcpy(j->y + r * j->out + t0, j->b + t0, (size_t)n * sizeof(float));
        else memset(j->y + r * j->out + t0, 0, (size_t)n * sizeof(float));
    }
    int64_t k = 0;
    if (j->type == BRG_DTYPE_BF16) {
        if (j->m < BLOCK_ROWS)
            for (; k + FEW_ROWS_GROUP <= j->in; k += FEW_ROWS_GROUP)
                add_group_bf16_rows(j->y + t0, j->out, j->x, j->in, k, j->w + k * j->out + t0, j->out, j->m, n);
        for (; k + 8 <= j->in; k += 8)
            add_eight_bf16_rows(j->y + t0, j->out, j->x, j->in, k, j->w + k * j->out + t0, j->out, j->m, n);
        for (; k < j->in; k++) add_one_bf16_row(j->y + t0, j->out, j->x, j->in, k, j->w + k * j->out + t0, j->m, n);
        return;
    }
    for (; k + 4 <= j->in; k += 4) {
        for (int q = 0; q < 4; q++) widen(j->type, rows + q * n, j->w + (k + q) * j->out + t0, n);
        add_four_rows(j->y + t0, j->out, j->x, j->in, k, rows, n, j->m, n);
    }
    for (; k < j->in; k++) {
        widen(j->type, rows, j->w + k * j->out + t0, n);
        add_one_row(j->y + t0, j->out, j->x, j->in, k, rows, j->m, n);
    }
}

ROW_LOOP static void dot_rows(const half_job *j, int64_t c, const float *wc) {
    const float bc = j->b ? j->b[c] : 0.0f;
    for (int64_t r = 0; r < j->m; r++) j->y[r * j->out + c] = dot(j->x + r * j->in, wc, j->in) + bc;
}

/* A team splits the output columns as the fp32 kernel does; each thread widens into its own
 * scratch. */
static void columns_slice(void *ctx, int i, int n) {
    const half_job *j = ctx;
    int64_t first, last;
    brg_team_slice(j->out, TEAM_UNIT, i, n, &first, &last);
    if (first >= last) return;
    /* Below BLOCK_ROWS, W [out, in] (bf16 and fp16) takes the AVX-512 body that reads the weight
     * rows as one stream, as fp32 does. From BLOCK_ROWS the register blocks; fp16 W [in, out] takes
     * them for fewer rows too (its conversion in the loads beats a scratch pass). Below BLOCK_ROWS,
     * bf16 W [in, out] takes the AVX-512 body of 16-row passes that asks for the next pass's rows
     * into L2, as fp32 does. On an Intel Xeon VM, GPT-2 small's batch-1 bf16 decode with 2
     * threads: 79.6 tokens/s against 56.8 with the portable loops for both. */
    const bool bf16 = j->type == BRG_DTYPE_BF16;
    if (brg_simd_avx512() && !j->w_in_out && j->m < BLOCK_ROWS) {
        brg_gemv_out_in_avx512_few_half(j->y, j->x, j->w, bf16, j->b, j->m, j->in, j->out, first, last);
        return;
    }
    if (brg_simd_avx512() && (j->m >= BLOCK_ROWS || !bf16 || !j->w_in_out)) {
        if (j->w_in_out) brg_gemv_in_out_avx512_half(j->y, j->x, j->w, bf16, j->b, j->m, j->in, j->out, first, last);
        else brg_gemv_out_in_avx512_half(j->y, j->x, j->w, bf16, j->b, j->m, j->in, j->out, first, last);
        return;
    }
    if (brg_simd_avx512()) {
        brg_gemv_in_out_avx512_few_half(j->y, j->x, j->w, true, j->b, j->m, j->in, j->out, first, last);
        return;
    }
    if (j->w_in_out) {
        const int64_t tile = gemv_tile_width(j->m);
        float *rows = j->type == BRG_DTYPE_BF16 ? NULL : brg_scratch(BRG_SCRATCH_GEMM_B, (size_t)(4 * tile));
        for (int64_t t0 = first; t0 < last; t0 += tile) in_out_tile(j, t0, last - t0 < tile ? last - t0 : tile, rows);
        return;
    }
    if (j->type == BRG_DTYPE_BF16) {
        for (int64_t c = first; c < last; c++) dot_bf16_rows(j, c);
        return;
    }
    float *row = brg_scratch(BRG_SCRATCH_GEMM_B, (size_t)j->in);
    for (int64_t c = first; c < last; c++) {
        widen(j->type, row, j->w + c * j->in, j->in);
        dot_rows(j, c, row);
    }
}

void brg_k_linear_rows_half_fwd(float *y, const float *x, const uint16_t *w, brg_dtype type, const float *b,
                                int64_t m, int64_t in, int64_t out, bool w_in_out) {
    BRG_ASSERT(m >= 0 && in >= 0 && out >= 0 && (type == BRG_DTYPE_BF16 || type == BRG_DTYPE_F16));
    /* the input rows rounded to the weights' type once, on this thread, for every slice */
    float *xr = brg_scratch(BRG_SCRATCH_GEMM_A, (size_t)(m * in) + (size_t)(m * in + 1) / 2);
    uint16_t *bits = (uint16_t *)(xr + m * in);
    if (type == BRG_DTYPE_BF16) brg_f32_to_bf16_row(bits, x, m * in);
    else brg_f32_to_f16_row(bits, x, m * in);
    widen(type, xr, bits, m * in);
    const half_job j = {y, xr, w, type, b, m, in, out, w_in_out};
    brg_team_split(columns_slice, (void *)&j, in * out / 16);
}
