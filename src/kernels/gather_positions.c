/* One position per row of [B, T, C] (a classification head reading the last real token), and
 * back. */
#include <string.h>

#include "kernels/kernels.h"

void brg_k_gather_positions_fwd(float *y, const float *x, const int32_t *index, int64_t B, int64_t T, int64_t C) {
    for (int64_t r = 0; r < B; r++) memcpy(y + r * C, x + (r * T + index[r]) * C, (size_t)C * sizeof(float));
}

void brg_k_gather_positions_bwd(float *dx, const float *dy, const int32_t *index, int64_t B, int64_t T, int64_t C) {
    for (int64_t r = 0; r < B; r++)
        for (int64_t k = 0; k < C; k++) dx[(r * T + index[r]) * C + k] += dy[r * C + k];
}
