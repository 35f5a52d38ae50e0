/* Cross-entropy over logits with an ignore index, averaged over the rows that count, as
 * torch.nn.functional.cross_entropy(reduction="mean"). The log-sum-exp and the loss are reduced
 * in double: the loss must agree with PyTorch to 1e-5 over vocabularies of 50k entries. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

/* log(sum_j exp(x_j)) with the maximum factored out. */
static double row_lse(const float *x, int64_t v) {
    float mx = brg_simd_max(x, v);
    return (double)mx + log(brg_simd_exp_sum(NULL, x, mx, v));
}

float brg_k_cross_entropy_fwd(float *lse, int64_t *count, const float *logits, const int32_t *targets, int64_t n,
                              int64_t v, int32_t ignore_index) {
    BRG_ASSERT(n >= 0 && v > 0);
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = logits + i * v;
        int32_t t = targets[i];
        if (t == ignore_index) {
            lse[i] = 0.0f; /* never read by backward */
            continue;
        }
        BRG_ASSERT(t >= 0 && t < v);
        double l = row_lse(x, v);
        lse[i] = (float)l;
        total += l - (double)x[t];
        counted++;
    }
    *count = counted;
    return counted ? (float)(total / (double)counted) : 0.0f;
}

void brg_k_cross_entropy_bwd(float *dlogits, float dloss, const float *logits, const float *lse,
                             const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index, int64_t count) {
    BRG_ASSERT(n >= 0 && v > 0 && count >= 0);
    if (!dlogits || count == 0) return;
    const float g = dloss / (float)count;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = targets[i];
        if (t == ignore_index) continue;
        BRG_ASSERT(t >= 0 && t < v);
        const float *x = logits + i * v;
        float *d = dlogits + i * v;
        const float l = lse[i];
        brg_simd_exp_axpy(d, x, l, g, v);
        d[t] -= g;
    }
}
