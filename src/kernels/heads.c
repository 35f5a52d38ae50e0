/* Layout changes between [B,T,H*D] activations and the [B,H,T,D] attention layout. The row
 * stride lets q, k and v be read directly out of a fused [B,T,3C] projection. */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_split_heads(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D,
                       int64_t row_stride) {
    BRG_ASSERT(B >= 0 && T >= 0 && H >= 0 && D >= 0 && row_stride >= H * D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                memcpy(dst + ((b * H + h) * T + t) * D, src + (b * T + t) * row_stride + h * D,
                       (size_t)D * sizeof(float));
}

void brg_k_merge_heads(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D,
                       int64_t row_stride, bool accumulate) {
    BRG_ASSERT(B >= 0 && T >= 0 && H >= 0 && D >= 0 && row_stride >= H * D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                float *d = dst + (b * T + t) * row_stride + h * D;
                const float *s = src + ((b * H + h) * T + t) * D;
                if (accumulate)
                    for (int64_t e = 0; e < D; e++) d[e] += s[e];
                else
                    memcpy(d, s, (size_t)D * sizeof(float));
            }
}
