/* Prepending a learned token to every sequence (ViT's [CLS] token before the patches). */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_prepend_token_fwd(float *y, const float *token, const float *x, int64_t B, int64_t n, int64_t c) {
    BRG_ASSERT(B >= 0 && n >= 0 && c >= 0);
    size_t row = (size_t)c * sizeof(float);
    for (int64_t b = 0; b < B; b++) {
        float *dst = y + b * (n + 1) * c;
        memcpy(dst, token, row);
        memcpy(dst + c, x + b * n * c, row * (size_t)n);
    }
}

void brg_k_prepend_token_bwd(float *dtoken, float *dx, const float *dy, int64_t B, int64_t n, int64_t c) {
    BRG_ASSERT(B >= 0 && n >= 0 && c >= 0);
    for (int64_t b = 0; b < B; b++) {
        const float *src = dy + b * (n + 1) * c;
        if (dtoken)
            for (int64_t i = 0; i < c; i++) dtoken[i] += src[i];
        if (dx) {
            float *dst = dx + b * n * c;
            for (int64_t i = 0; i < n * c; i++) dst[i] += src[c + i];
        }
    }
}
