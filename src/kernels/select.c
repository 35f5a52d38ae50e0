/* Selecting one position of a dimension: the [CLS] row of hidden states, one column of
 * question-answering logits. */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_select_fwd(float *y, const float *x, int64_t outer, int64_t n, int64_t inner, int64_t index) {
    BRG_ASSERT(outer >= 0 && inner >= 0 && index >= 0 && index < n);
    for (int64_t o = 0; o < outer; o++) {
        const float *src = x + (o * n + index) * inner;
        float *dst = y + o * inner;
        if (inner == 1) dst[0] = src[0];
        else memcpy(dst, src, (size_t)inner * sizeof(float));
    }
}

void brg_k_select_bwd(float *dx, const float *dy, int64_t outer, int64_t n, int64_t inner, int64_t index) {
    BRG_ASSERT(outer >= 0 && inner >= 0 && index >= 0 && index < n);
    if (!dx) return;
    for (int64_t o = 0; o < outer; o++) {
        float *dst = dx + (o * n + index) * inner;
        const float *src = dy + o * inner;
        for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
    }
}
