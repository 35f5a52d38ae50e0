/* Row movement for encoder models: selecting one position ([CLS]), prepending a learned token,
 * broadcasting an addend over a batch, and the padding-aware embedding backward. */
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

void brg_k_add_bcast_fwd(float *y, const float *x, const float *p, int64_t A, int64_t M, int64_t inner) {
    BRG_ASSERT(A >= 0 && M >= 0 && inner >= 0);
    for (int64_t a = 0; a < A; a++)
        for (int64_t m = 0; m < M; m++) {
            const float *xs = x + (a * M + m) * inner, *ps = p + a * inner;
            float *ys = y + (a * M + m) * inner;
            for (int64_t i = 0; i < inner; i++) ys[i] = xs[i] + ps[i];
        }
}

void brg_k_add_bcast_bwd(float *dx, float *dp, const float *dy, int64_t A, int64_t M, int64_t inner) {
    BRG_ASSERT(A >= 0 && M >= 0 && inner >= 0);
    for (int64_t a = 0; a < A; a++)
        for (int64_t m = 0; m < M; m++) {
            const float *g = dy + (a * M + m) * inner;
            if (dx) {
                float *d = dx + (a * M + m) * inner;
                for (int64_t i = 0; i < inner; i++) d[i] += g[i];
            }
            if (dp) {
                float *d = dp + a * inner;
                for (int64_t i = 0; i < inner; i++) d[i] += g[i];
            }
        }
}

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
