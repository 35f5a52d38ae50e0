/* GELU activations with their exact derivatives.
 * erf:  y = 0.5 x (1 + erf(x / sqrt 2))                          (nn.GELU, "gelu")
 * tanh: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))       ("gelu_new", "gelu_pytorch_tanh")
 * Both are evaluated in float, as the float32 PyTorch kernels do. The tanh form uses the identity
 * 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): the same function, but expf costs a fraction of tanhf and
 * does not cancel digits for negative x. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

static void gelu_erf_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
}

static float tanh_u(float v) { return SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v); }

/* 0.5 (1 + tanh u); exp overflowing to inf for very negative u correctly gives 0. */
static float half_one_plus_tanh(float u) { return 1.0f / (1.0f + expf(-2.0f * u)); }

static void gelu_tanh_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * half_one_plus_tanh(tanh_u(x[i]));
}

/* d/dx = Phi(x) + x phi(x). */
static void gelu_erf_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * (1.0f + erff(v * INV_SQRT2));
        float pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
        dx[i] += dy[i] * (cdf + v * pdf);
    }
}

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x) with t = tanh u, u' = sqrt(2/pi) (1 + 3c x^2);
 * in terms of s = 0.5 (1 + t): s + 2 x s (1 - s) u'. */
static void gelu_tanh_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float s = half_one_plus_tanh(tanh_u(v));
        float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * v * v);
        dx[i] += dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
    }
}

void brg_k_gelu_fwd(float *y, const float *x, int64_t n, brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0);
    BRG_ASSERT(kind == BRG_GELU_ERF || kind == BRG_GELU_TANH);
    if (kind == BRG_GELU_ERF)
        gelu_erf_fwd(y, x, n);
    else
        gelu_tanh_fwd(y, x, n);
}

void brg_k_gelu_bwd(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0);
    BRG_ASSERT(kind == BRG_GELU_ERF || kind == BRG_GELU_TANH);
    if (!dx) return;
    if (kind == BRG_GELU_ERF)
        gelu_erf_bwd(dx, dy, x, n);
    else
        gelu_tanh_bwd(dx, dy, x, n);
}
