/* Cross-entropy over logits with an ignore index, averaged over the rows that count, as
 * torch.nn.functional.cross_entropy(reduction="mean"). The log-sum-exp and the loss are reduced
 * in double: the loss must agree with PyTorch to 1e-5 over vocabularies of 50k entries. */
#include <math.h>
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

/* log(sum_j exp(x_j)) with the maximum factored out. */
static double row_lse(const float *x, int64_t v) {
    float mx = brg_simd_max(x, v);
    return (double)mx + log(brg_simd_exp_sum(NULL, x, mx, v));
}

/* The rows' losses l - x[t] in double (NaN for an ignored row), computed on a device's team a
 * share of the rows each, then summed in row order on the calling thread: the same total as one
 * thread's running sum, whatever the team size. */
typedef struct ce_job {
    float *lse, *dlogits;
    const float *saved_lse; /* backward reads the forward's */
    double *loss;
    const float *logits;
    const int32_t *targets;
    int64_t n, v;
    int32_t ignore_index;
    float g;
    bool overwrite; /* backward: write the rows' gradients instead of adding into them */
} ce_job;

static void ce_fwd_slice(void *p, int i, int n_slices) {
    const ce_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 1, i, n_slices, &first, &last);
    for (int64_t r = first; r < last; r++) {
        const float *x = j->logits + r * j->v;
        const int32_t t = j->targets[r];
        if (t == j->ignore_index) {
            j->lse[r] = 0.0f; /* never read by backward */
            j->loss[r] = NAN;
            continue;
        }
        BRG_ASSERT(t >= 0 && t < j->v);
        const double l = row_lse(x, j->v);
        j->lse[r] = (float)l;
        j->loss[r] = l - (double)x[t];
    }
}

float brg_k_cross_entropy_fwd(float *lse, int64_t *count, const float *logits, const int32_t *targets, int64_t n,
                              int64_t v, int32_t ignore_index) {
    BRG_ASSERT(n >= 0 && v > 0);
    /* Slot 3: the other kernels' scratch (attention 0, bias-GELU 1, linear-act 2) is not live here. */
    double *loss = (double *)brg_scratch(3, 2 * (size_t)n);
    ce_job job = {.lse = lse, .loss = loss, .logits = logits, .targets = targets, .n = n, .v = v,
                  .ignore_index = ignore_index};
    brg_team_split(ce_fwd_slice, &job, n * v);
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t i = 0; i < n; i++) {
        if (targets[i] == ignore_index) continue;
        total += loss[i];
        counted++;
    }
    *count = counted;
    return counted ? (float)(total / (double)counted) : 0.0f;
}

/* Rows are independent: a share of them per slice. With overwrite an ignored row's gradient is
 * written as zeros and a counted row's without reading it, so dlogits may be the logits. */
static void ce_bwd_slice(void *p, int i, int n_slices) {
    const ce_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 1, i, n_slices, &first, &last);
    for (int64_t r = first; r < last; r++) {
        const int32_t t = j->targets[r];
        float *d = j->dlogits + r * j->v;
        if (t == j->ignore_index) {
            if (j->overwrite) memset(d, 0, (size_t)j->v * sizeof *d);
            continue;
        }
        BRG_ASSERT(t >= 0 && t < j->v);
        brg_simd_exp_axpy(d, j->overwrite, j->logits + r * j->v, j->saved_lse[r], j->g, j->v);
        d[t] -= j->g;
    }
}

void brg_k_cross_entropy_bwd(float *dlogits, bool overwrite, float dloss, const float *logits, const float *lse,
                             const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index, int64_t count) {
    BRG_ASSERT(n >= 0 && v > 0 && count >= 0);
    if (!dlogits) return;
    if (count == 0) {
        if (overwrite) memset(dlogits, 0, (size_t)(n * v) * sizeof *dlogits);
        return;
    }
    ce_job job = {.saved_lse = lse, .dlogits = dlogits, .logits = logits, .targets = targets, .n = n, .v = v,
                  .ignore_index = ignore_index, .g = dloss / (float)count, .overwrite = overwrite};
    brg_team_split(ce_bwd_slice, &job, n * v);
}
