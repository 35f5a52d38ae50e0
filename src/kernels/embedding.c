/* Embedding lookup (token and position tables) and its scatter-add backward. */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_embedding_fwd(float *y, const int32_t *ids, const float *table, int64_t n, int64_t dim) {
    BRG_ASSERT(n >= 0 && dim >= 0);
    for (int64_t i = 0; i < n; i++) {
        BRG_ASSERT(ids[i] >= 0);
        memcpy(y + i * dim, table + (int64_t)ids[i] * dim, (size_t)dim * sizeof(float));
    }
}

/* Rows are visited in order, so repeated ids accumulate deterministically. */
void brg_k_embedding_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim) {
    BRG_ASSERT(n >= 0 && dim >= 0);
    if (!dtable) return;
    for (int64_t i = 0; i < n; i++) {
        BRG_ASSERT(ids[i] >= 0);
        float *row = dtable + (int64_t)ids[i] * dim;
        const float *g = dy + i * dim;
        for (int64_t j = 0; j < dim; j++) row[j] += g[j];
    }
}
