/* A linear layer for a few rows at a time (a decode step's one new position per sequence):
 * y[m, out] = x[m, in] @ W (+ b), W [in, out] when w_in_out (GPT-2 Conv1D) else [out, in].
 * Every weight row is read once for all m rows and nothing is packed, which is what a GEMM
 * would spend most of its time on for so few rows. Each output element is computed the same
 * way whatever m is (row by row), so a sequence's results do not depend on what else is in the
 * batch. Plain C the compiler vectorises, and on AVX-512 register blocks over up to 8 rows
 * (gemv_avx512.h): the same results on every CPU. */
#ifndef BRIGADE_KERNELS_GEMV_H
#define BRIGADE_KERNELS_GEMV_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tensor.h"

void brg_k_linear_rows_fwd(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                           int64_t out, bool w_in_out);

/* The same with W stored as `type` (BRG_DTYPE_BF16 or F16) and x rounded to it: bit for bit
 * brg_k_linear_rows_fwd on the widened operands, reading half the weight bytes (gemv_half.c). */
void brg_k_linear_rows_half_fwd(float *y, const float *x, const uint16_t *w, brg_dtype type, const float *b,
                                int64_t m, int64_t in, int64_t out, bool w_in_out);

#endif
