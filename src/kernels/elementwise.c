/* Elementwise arithmetic: residual add, gradient accumulation, scaling, the add of an addend
 * broadcast over a middle dimension (ViT's position embeddings), and the product. Outputs may
 * alias inputs. */
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_add_fwd(float *y, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void brg_k_accumulate(float *dx, bool overwrite, const float *dy, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (!dx) return;
    if (overwrite) memcpy(dx, dy, (size_t)n * sizeof *dx);
    else
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
}

void brg_k_scale(float *y, const float *x, float s, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

/* y[a,m,i] = x[a,m,i] + p[a,i]: p repeats along m. */
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

/* y = a * b; da += dy * b, db += dy * a. */
void brg_k_mul_fwd(float *y, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

void brg_k_mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b, int64_t n) {
    BRG_ASSERT(n >= 0);
    if (da)
        for (int64_t i = 0; i < n; i++) da[i] += dy[i] * b[i];
    if (db)
        for (int64_t i = 0; i < n; i++) db[i] += dy[i] * a[i];
}
