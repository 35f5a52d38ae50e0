/* Rows of two tensors side by side (BertForPreTraining packs its two heads' outputs so), and
 * back. */
#include <string.h>

#include "kernels/kernels.h"

void brg_k_concat_rows_fwd(float *y, const float *a, const float *b, int64_t B, int64_t na, int64_t nb) {
    for (int64_t r = 0; r < B; r++) {
        memcpy(y + r * (na + nb), a + r * na, (size_t)na * sizeof(float));
        memcpy(y + r * (na + nb) + na, b + r * nb, (size_t)nb * sizeof(float));
    }
}

void brg_k_concat_rows_bwd(float *da, float *db, const float *dy, int64_t B, int64_t na, int64_t nb) {
    const int64_t row = na + nb;
    for (int64_t r = 0; r < B; r++) {
        for (int64_t i = 0; da && i < na; i++) da[r * na + i] += dy[r * row + i];
        for (int64_t i = 0; db && i < nb; i++) db[r * nb + i] += dy[r * row + na + i];
    }
}
