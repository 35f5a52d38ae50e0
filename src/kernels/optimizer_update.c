/* The optimizers' element updates (brg_k_optimizer_update), one parameter slot at a time.
 *
 * Each update loop reproduces torch.optim's _single_tensor_* code one element at a time: every
 * tensor op of the Python becomes one fp32 operation here, in the same order, with its Python
 * scalar computed in double and rounded to float where torch's fp32 kernel receives it. torch
 * runs each op over the whole tensor before the next; running them all on one element before
 * the next element gives the same values, since no op reads another element (LAMB's norms are
 * the exception and get a pass of their own). */
#include <math.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* The element loops are also compiled for AVX-512 and for AVX2 (the CPUs without AVX-512) and
 * picked at load time by the CPU: their sqrt and divisions dominate on 4-wide SSE. Every
 * operation is correctly rounded and the file is built without floating-point contraction, so all
 * three versions give the same bits (BRIGADE_SIMD does not pick among them: it need not). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ELEMENT_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ELEMENT_LOOP
#endif

/* torch's CPU lerp: exact at both ends, which a plain a + w*(b-a) is not for w near 1. */
static inline float lerpf(float start, float end, float weight) {
    return fabsf(weight) < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.0f - weight);
}

static double slot_weight_decay(const brg_optimizer_config *c, const brg_k_optim_slot *s) {
    return s->decay ? c->weight_decay : 0.0;
}

ELEMENT_LOOP static void update_sgd(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr,
                                    bool first_step) {
    const double wd = slot_weight_decay(c, s);
    const float wdf = (float)wd, mom = (float)c->momentum, keep = (float)(1.0 - c->dampening);
    const float neg_lr = (float)-lr;
    const bool use_momentum = c->momentum != 0.0, nesterov = c->nesterov;
    float *p = s->value, *buf = s->state[0];
    const float *grad = s->grad;
    for (int64_t i = 0; i < s->n; i++) {
        float g = grad[i];
        if (wd != 0.0) g = g + wdf * p[i];
        if (use_momentum) {
            /* torch creates the buffer from the first gradient: no dampening on that step */
            buf[i] = first_step ? g : buf[i] * mom + keep * g;
            g = nesterov ? g + mom * buf[i] : buf[i];
        }
        p[i] = p[i] + neg_lr * g;
    }
}

static void bias_corrections(const brg_optimizer_config *c, int64_t t, double *bc1, double *bc2) {
    *bc1 = 1.0;
    *bc2 = 1.0;
    if (!c->bias_correction) return;
    *bc1 = 1.0 - pow(c->betas[0], (double)t);
    *bc2 = 1.0 - pow(c->betas[1], (double)t);
}

typedef struct adam_consts {
    float wdf, decay, w1, b2, w2, neg_step_size, bc2_sqrt, eps;
} adam_consts;

enum { ADAM_NO_DECAY, ADAM_DECOUPLED, ADAM_L2 };

/* `low` picks lerpf's formula (|w1| < 0.5, the usual beta1 > 0.5) once for the whole loop, so
 * that each specialisation is branch-free and vectorises; the arithmetic is lerpf's. */
static inline __attribute__((always_inline)) void adam_loop(int kind, bool low, const adam_consts *k,
                                                            brg_k_optim_slot *s) {
    float *restrict p = s->value, *restrict m = s->state[0], *restrict v = s->state[1];
    const float *restrict grad = s->grad;
    const float w1 = k->w1, rest = 1.0f - k->w1, decay = k->decay, wdf = k->wdf, b2 = k->b2, w2 = k->w2;
    const float bc2_sqrt = k->bc2_sqrt, eps = k->eps, step = k->neg_step_size;
    for (int64_t i = 0; i < s->n; i++) {
        float g = grad[i], w = p[i];
        if (kind == ADAM_DECOUPLED) w = w * decay;
        if (kind == ADAM_L2) g = g + wdf * w;
        m[i] = low ? m[i] + w1 * (g - m[i]) : g - (g - m[i]) * rest;
        v[i] = v[i] * b2 + w2 * g * g;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = w + step * m[i] / denom;
    }
}

ELEMENT_LOOP static void adam_dispatch(int kind, const adam_consts *k, brg_k_optim_slot *s) {
    bool low = fabsf(k->w1) < 0.5f;
    switch (kind * 2 + low) {
    case ADAM_NO_DECAY * 2 + 1: adam_loop(ADAM_NO_DECAY, true, k, s); break;
    case ADAM_NO_DECAY * 2: adam_loop(ADAM_NO_DECAY, false, k, s); break;
    case ADAM_DECOUPLED * 2 + 1: adam_loop(ADAM_DECOUPLED, true, k, s); break;
    case ADAM_DECOUPLED * 2: adam_loop(ADAM_DECOUPLED, false, k, s); break;
    case ADAM_L2 * 2 + 1: adam_loop(ADAM_L2, true, k, s); break;
    default: adam_loop(ADAM_L2, false, k, s); break;
    }
}

static void update_adam(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t) {
    const double wd = slot_weight_decay(c, s);
    const bool decoupled = c->kind == BRG_OPTIMIZER_ADAMW;
    double bc1, bc2;
    bias_corrections(c, t, &bc1, &bc2);
    const float wdf = (float)wd, decay = (float)(1.0 - lr * wd);
    const float w1 = (float)(1.0 - c->betas[0]);
    const float b2 = (float)c->betas[1], w2 = (float)(1.0 - c->betas[1]);
    const float neg_step_size = (float)-(lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)c->eps;
    adam_consts k = {wdf, decay, w1, b2, w2, neg_step_size, bc2_sqrt, eps};
    /* One loop per decay kind, so each is branch-free and vectorises. */
    adam_dispatch(wd == 0.0 ? ADAM_NO_DECAY : decoupled ? ADAM_DECOUPLED : ADAM_L2, &k, s);
}

ELEMENT_LOOP static void update_rmsprop(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr) {
    const double wd = slot_weight_decay(c, s);
    const float wdf = (float)wd, alpha = (float)c->alpha, w_avg = (float)(1.0 - c->alpha);
    const float eps = (float)c->eps, mom = (float)c->momentum, neg_lr = (float)-lr;
    const bool use_momentum = c->momentum > 0.0, centered = c->centered;
    float *p = s->value, *sq = s->state[0], *buf = s->state[1], *gavg = s->state[2];
    const float *grad = s->grad;
    for (int64_t i = 0; i < s->n; i++) {
        float g = grad[i];
        if (wd != 0.0) g = g + wdf * p[i];
        sq[i] = sq[i] * alpha + w_avg * g * g;
        float avg;
        if (centered) {
            gavg[i] = lerpf(gavg[i], g, w_avg);
            avg = sqrtf(sq[i] + -1.0f * gavg[i] * gavg[i]);
        } else {
            avg = sqrtf(sq[i]);
        }
        avg = avg + eps;
        if (use_momentum) {
            buf[i] = buf[i] * mom + 1.0f * g / avg;
            p[i] = p[i] + neg_lr * buf[i];
        } else {
            p[i] = p[i] + neg_lr * g / avg;
        }
    }
}

typedef struct lamb_scalars {
    float b1, w1, b2, w2, bc1, bc2_sqrt, eps, wd;
} lamb_scalars;

/* The LAMB direction for element i from the already-updated moments. Called twice per element
 * (norm pass, then update pass) with identical inputs, so both passes see the same value and no
 * scratch buffer is needed. */
static inline float lamb_direction(const lamb_scalars *k, float m, float v, float w) {
    float denom = sqrtf(v) / k->bc2_sqrt + k->eps;
    return m / k->bc1 / denom + k->wd * w;
}

static void update_lamb(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t) {
    double bc1, bc2;
    bias_corrections(c, t, &bc1, &bc2);
    const lamb_scalars k = {
        .b1 = (float)c->betas[0], .w1 = (float)(1.0 - c->betas[0]),
        .b2 = (float)c->betas[1], .w2 = (float)(1.0 - c->betas[1]),
        .bc1 = (float)bc1, .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)c->eps, .wd = (float)slot_weight_decay(c, s),
    };
    float *p = s->value, *m = s->state[0], *v = s->state[1];
    const float *grad = s->grad;
    double w_sq = 0.0, u_sq = 0.0;
    for (int64_t i = 0; i < s->n; i++) {
        float g = grad[i];
        m[i] = m[i] * k.b1 + k.w1 * g;
        v[i] = v[i] * k.b2 + k.w2 * g * g;
        float u = lamb_direction(&k, m[i], v[i], p[i]);
        w_sq += (double)p[i] * p[i];
        u_sq += (double)u * u;
    }
    double w_norm = fmin(sqrt(w_sq), c->max_weight_norm), u_norm = sqrt(u_sq);
    double trust = (w_norm == 0.0 || u_norm == 0.0) ? 1.0 : w_norm / u_norm;
    const float scale = (float)(-lr * trust);
    for (int64_t i = 0; i < s->n; i++) p[i] = p[i] + scale * lamb_direction(&k, m[i], v[i], p[i]);
}

void brg_k_optimizer_update(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t) {
    switch (c->kind) {
    case BRG_OPTIMIZER_SGD: update_sgd(c, s, lr, t == 1); break;
    case BRG_OPTIMIZER_ADAM:
    case BRG_OPTIMIZER_ADAMW: update_adam(c, s, lr, t); break;
    case BRG_OPTIMIZER_RMSPROP: update_rmsprop(c, s, lr); break;
    case BRG_OPTIMIZER_LAMB: update_lamb(c, s, lr, t); break;
    default: BRG_ASSERT(!"unreachable optimizer kind");
    }
}
