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

typedef struct scatter_job {
    float *dtable;
    const float *dy;
    const int32_t *ids;
    int64_t n, dim;
} scatter_job;

/* Rows are visited in order, so repeated ids accumulate deterministically; on a device's team
 * each slice takes a share of the columns of every row, keeping that order per element. */
static void scatter_slice(void *p, int i, int n_slices) {
    const scatter_job *j = p;
    int64_t first, last;
    brg_team_slice(j->dim, 16, i, n_slices, &first, &last);
    for (int64_t r = 0; r < j->n; r++) {
        BRG_ASSERT(j->ids[r] >= 0);
        float *row = j->dtable + (int64_t)j->ids[r] * j->dim;
        const float *g = j->dy + r * j->dim;
        for (int64_t k = first; k < last; k++) row[k] += g[k];
    }
}

void brg_k_embedding_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim) {
    BRG_ASSERT(n >= 0 && dim >= 0);
    if (!dtable) return;
    scatter_job job = {dtable, dy, ids, n, dim};
    brg_team_split(scatter_slice, &job, n * dim);
}

/* nn.Embedding(padding_idx)'s backward: rows whose id is padding_idx send no gradient. */
void brg_k_embedding_pad_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim,
                             int32_t padding_idx) {
    BRG_ASSERT(n >= 0 && dim >= 0);
    if (!dtable) return;
    for (int64_t r = 0; r < n; r++) {
        if (ids[r] == padding_idx) continue;
        float *dst = dtable + (int64_t)ids[r] * dim;
        const float *src = dy + r * dim;
        for (int64_t i = 0; i < dim; i++) dst[i] += src[i];
    }
}
