/* Shared helpers of the kernel tests: a seeded generator, buffers, and a central-difference
 * gradient checker. */
#ifndef BRIGADE_TEST_KERNELS_UTIL_H
#define BRIGADE_TEST_KERNELS_UTIL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "test_util.h"

static uint64_t tk_rng_state_ = 0x243F6A8885A308D3ULL;

static inline void tk_seed(uint64_t s) { tk_rng_state_ = s * 0x9E3779B97F4A7C15ULL + 1; }

/* Uniform in [0, 1): splitmix64. */
static inline double tk_uniform(void) {
    uint64_t z = (tk_rng_state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static inline void tk_fill(float *x, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * tk_uniform());
}

/* A buffer of n random floats in [lo, hi) (never NULL, even for n == 0). */
static inline float *tk_rand(int64_t n, double lo, double hi) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    tk_fill(x, n, lo, hi);
    return x;
}

static inline float *tk_zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static inline float *tk_copy(const float *x, int64_t n) {
    float *y = tk_zeros(n);
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

static inline double tk_dot(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* The scalar loss of a gradient check: runs the forward and returns sum(y * r) in double. */
typedef double (*tk_loss_fn)(void *ctx);

/* Compares grad (the analytic dL/dparam) with central differences of loss() over every element
 * of param. The test passes when max |num - grad| <= rtol * max(|grad|, |num|) + atol: relative
 * to the largest entry, so a factor of 2 or a missing term is caught without tripping on float
 * rounding of near-zero entries. */
static inline void tk_gradcheck_tol(const char *what, void *ctx, tk_loss_fn loss, float *param, int64_t n,
                                    const float *grad, double h, double rtol, double atol) {
    double max_err = 0.0, max_g = 0.0;
    int64_t worst = -1;
    double worst_num = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float x0 = param[i];
        const float xp = (float)(x0 + h), xm = (float)(x0 - h);
        param[i] = xp;
        double lp = loss(ctx);
        param[i] = xm;
        double lm = loss(ctx);
        param[i] = x0;
        double num = (lp - lm) / ((double)xp - (double)xm);
        double err = fabs(num - (double)grad[i]);
        if (fabs(num) > max_g) max_g = fabs(num);
        if (fabs(grad[i]) > max_g) max_g = fabs(grad[i]);
        if (err > max_err || err != err) {
            max_err = err != err ? INFINITY : err;
            worst = i;
            worst_num = num;
        }
    }
    loss(ctx); /* leave the outputs as they are at the unperturbed point */
    CHECK_MSG(max_err <= rtol * max_g + atol, "%s: max err %.3g at [%lld] (numeric %.6g, analytic %.6g), max |g| %.3g",
              what, max_err, (long long)worst, worst_num, worst >= 0 ? (double)grad[worst] : 0.0, max_g);
}

static inline void tk_gradcheck(const char *what, void *ctx, tk_loss_fn loss, float *param, int64_t n,
                                const float *grad) {
    tk_gradcheck_tol(what, ctx, loss, param, n, grad, 1e-3, 1e-2, 1e-3);
}

/* Asserts y == base + delta elementwise (within float rounding): a backward into a pre-filled
 * gradient must add to it. */
static inline void tk_check_accumulated(const char *what, const float *y, const float *base, const float *delta,
                                        int64_t n) {
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double want = (double)base[i] + (double)delta[i];
        double err = fabs((double)y[i] - want) / (1.0 + fabs(want));
        if (err > worst || err != err) worst = err != err ? INFINITY : err;
    }
    CHECK_MSG(worst <= 1e-5, "%s: accumulate mismatch %.3g", what, worst);
}

#endif
