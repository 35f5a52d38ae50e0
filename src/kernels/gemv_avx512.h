/* AVX-512 bodies of the decode step's small-row linear layer (gemv.h), register-blocked over up
 * to 8 rows so each weight vector loaded feeds every row. They compute each output element with
 * the same chain of correctly rounded operations as gemv.c's portable loops (a multiply, then an
 * add, in the same order; no fused multiply-add), so they give the same bits. Internal to the
 * library and its tests; call only when brg_isa_hardware(BRG_ISA_AVX512). */
#ifndef BRIGADE_KERNELS_GEMV_AVX512_H
#define BRIGADE_KERNELS_GEMV_AVX512_H

#include <stdbool.h>
#include <stdint.h>

/* Columns [c0, c1) of y[m, out] = b + x[m, in] @ W with W [in, out] (row stride out); b may be
 * NULL (the sums then start at +0). Each element adds its in terms in order of k. */
void brg_gemv_in_out_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1);

/* The same for fewer than BLOCK_ROWS rows (gemv_parts.h), where the weight stream bounds the
 * product: FEW_ROWS_GROUP weight rows a pass, as the portable loop adds them. */
void brg_gemv_in_out_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1);

/* The same with W stored as bf16 (bf16 true) or fp16, widened as loaded. */
void brg_gemv_in_out_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1);

/* Columns [c0, c1) of y[m, out] = x[m, in] @ W^T + b with W [out, in]: each element is the dot
 * product in 16 partial sums (term i into sum i mod 16) added in order, then the bias. */
void brg_gemv_out_in_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1);

/* The same for fewer than BLOCK_ROWS rows, where the weight stream bounds the product: one weight
 * row after the other, each dotted with every row, with the lines a few KiB ahead asked into L2. */
void brg_gemv_out_in_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1);
void brg_gemv_out_in_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1);

/* The same with W stored as bf16 (bf16 true) or fp16, widened as loaded: the bits of the fp32
 * bodies on the widened values (gemv_half.c). */
void brg_gemv_in_out_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1);
void brg_gemv_out_in_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1);

#endif
