/* ViT's patch embedding as unfold + matmul: a convolution whose stride equals its kernel size
 * touches every pixel at most once, so im2col is a pure rearrangement (no duplication) and its
 * backward a scatter without overlaps. */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

static void check_dims(const brg_patch_dims *d) {
    BRG_ASSERT(d->B >= 0 && d->C > 0 && d->ph > 0 && d->pw > 0 && d->H >= d->ph && d->W >= d->pw);
}

/* Element (c, ky, kx) of patch (py, px) of image b lives at pixels[b, c, py*ph + ky, px*pw + kx]. */
void brg_k_patch_unfold_fwd(float *patches, const float *pixels, const brg_patch_dims *d) {
    check_dims(d);
    int64_t gh = d->H / d->ph, gw = d->W / d->pw, width = d->C * d->ph * d->pw;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t py = 0; py < gh; py++)
            for (int64_t px = 0; px < gw; px++) {
                float *dst = patches + ((b * gh + py) * gw + px) * width;
                for (int64_t c = 0; c < d->C; c++)
                    for (int64_t ky = 0; ky < d->ph; ky++) {
                        const float *src = pixels + ((b * d->C + c) * d->H + py * d->ph + ky) * d->W + px * d->pw;
                        memcpy(dst + (c * d->ph + ky) * d->pw, src, (size_t)d->pw * sizeof(float));
                    }
            }
}

void brg_k_patch_unfold_bwd(float *dpixels, const float *dpatches, const brg_patch_dims *d) {
    check_dims(d);
    if (!dpixels) return;
    int64_t gh = d->H / d->ph, gw = d->W / d->pw, width = d->C * d->ph * d->pw;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t py = 0; py < gh; py++)
            for (int64_t px = 0; px < gw; px++) {
                const float *src = dpatches + ((b * gh + py) * gw + px) * width;
                for (int64_t c = 0; c < d->C; c++)
                    for (int64_t ky = 0; ky < d->ph; ky++) {
                        float *dst = dpixels + ((b * d->C + c) * d->H + py * d->ph + ky) * d->W + px * d->pw;
                        const float *s = src + (c * d->ph + ky) * d->pw;
                        for (int64_t kx = 0; kx < d->pw; kx++) dst[kx] += s[kx];
                    }
            }
}

void brg_k_patch_conv_ref(float *y, const float *pixels, const float *w, const float *b, int64_t out,
                          const brg_patch_dims *d) {
    check_dims(d);
    int64_t gh = d->H / d->ph, gw = d->W / d->pw;
    for (int64_t n = 0; n < d->B; n++)
        for (int64_t py = 0; py < gh; py++)
            for (int64_t px = 0; px < gw; px++)
                for (int64_t o = 0; o < out; o++) {
                    double s = b ? b[o] : 0.0;
                    for (int64_t c = 0; c < d->C; c++)
                        for (int64_t ky = 0; ky < d->ph; ky++)
                            for (int64_t kx = 0; kx < d->pw; kx++) {
                                int64_t yy = py * d->ph + ky, xx = px * d->pw + kx;
                                s += (double)w[((o * d->C + c) * d->ph + ky) * d->pw + kx] *
                                     pixels[((n * d->C + c) * d->H + yy) * d->W + xx];
                            }
                    y[((n * gh + py) * gw + px) * out + o] = (float)s;
                }
}
