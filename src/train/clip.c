/* Gradient-norm clipping as torch.nn.utils.clip_grad_norm_ (L2), split into a sum of squares and
 * a scaling step so that gradients spread over devices can share one total norm. */
#include <math.h>

#include "brigade/optim.h"

static brg_status check_buffers(const char *fn, const float *const *grads, const int64_t *counts, int n) {
    if (n < 0) return brg_error(BRG_ERR_INVALID_ARG, "%s: negative buffer count %d", fn, n);
    if (n > 0 && (!grads || !counts)) return brg_error(BRG_ERR_INVALID_ARG, "%s: no gradient list given", fn);
    for (int i = 0; i < n; i++) {
        if (counts[i] < 0)
            return brg_error(BRG_ERR_INVALID_ARG, "%s: gradient %d has a negative size %lld", fn, i,
                             (long long)counts[i]);
        if (counts[i] > 0 && !grads[i]) return brg_error(BRG_ERR_INVALID_ARG, "%s: gradient %d is NULL", fn, i);
    }
    return BRG_OK;
}

static brg_status check_max_norm(const char *fn, float max_norm) {
    if (!(max_norm > 0.0f))
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%s: max_norm must be > 0 (got %g); pass INFINITY to measure the norm without clipping", fn,
                         (double)max_norm);
    return BRG_OK;
}

/* Four interleaved partial sums: independent adds pipeline, and a fixed association keeps the
 * result identical from run to run. */
static double sum_squares(const float *g, int64_t n) {
    double acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) acc[k] += (double)g[i + k] * g[i + k];
    for (; i < n; i++) acc[0] += (double)g[i] * g[i];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

brg_status brg_grad_sum_squares(const float *const *grads, const int64_t *counts, int n, double *sum_out) {
    BRG_TRY(check_buffers("brg_grad_sum_squares", grads, counts, n));
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += sum_squares(grads[i], counts[i]);
    *sum_out = sum;
    return BRG_OK;
}

float brg_clip_coef(float max_norm, double total_norm) {
    if (!isfinite(total_norm)) return 1.0f;
    /* torch: max_norm / (total_norm + 1e-6) on an fp32 0-d tensor */
    float coef = max_norm / ((float)total_norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

brg_status brg_clip_grad_norm_from_total(float **grads, const int64_t *counts, int n, float max_norm,
                                         double total_norm) {
    const char *fn = "brg_clip_grad_norm";
    BRG_TRY(check_max_norm(fn, max_norm));
    BRG_TRY(check_buffers(fn, (const float *const *)grads, counts, n));
    float coef = brg_clip_coef(max_norm, total_norm);
    if (coef == 1.0f) return BRG_OK;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < counts[i]; j++) grads[i][j] *= coef;
    return BRG_OK;
}

brg_status brg_clip_grad_norm(float **grads, const int64_t *counts, int n, float max_norm, double *total_norm_out) {
    BRG_TRY(check_max_norm("brg_clip_grad_norm", max_norm));
    double sum;
    BRG_TRY(brg_grad_sum_squares((const float *const *)grads, counts, n, &sum));
    double total = sqrt(sum);
    if (total_norm_out) *total_norm_out = total;
    return brg_clip_grad_norm_from_total(grads, counts, n, max_norm, total);
}
