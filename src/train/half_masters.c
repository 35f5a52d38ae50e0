/* The .16 modes' half weights, gradients and optimizer state, held as fp32 values the half type
 * can represent. */
#include "half_masters.h"

#include <math.h>
#include <string.h>

#include "kernels/half.h"

#define CHUNK 512

void half_round(brg_dtype type, float *x, int64_t n) {
    uint16_t bits[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int64_t m = n - i < CHUNK ? n - i : CHUNK;
        brg_k_narrow(bits, x + i, type, m);
        brg_k_widen(x + i, bits, type, m);
    }
}

/* splitmix64's finaliser: a well-mixed 64-bit value from any key. */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}


/* a when c, else b, by masks: a branch on a random draw would be mispredicted half the time */
static float pick(bool c, float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    const uint32_t m = (uint32_t)0 - (uint32_t)c;
    const uint32_t r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, 4);
    return f;
}

/* Stochastic rounding over a chunk, its conversions done a row at a time. Both formats are
 * sign-magnitude, so the half values next to h in magnitude are h - 1 and h + 1 (h - 1 of +-0 is
 * never taken: a value that rounds to zero lies above it in magnitude); the nearest value v is
 * the upper neighbour when |v| > |x|. A value beyond the largest finite one stays finite. */
static void round_chunk(brg_dtype type, float *x, int64_t m, uint64_t key, uint64_t first) {
    uint16_t near[CHUNK], lo[CHUNK], hi[CHUNK];
    float v[CHUNK], lo_v[CHUNK], hi_v[CHUNK];
    brg_k_narrow(near, x, type, m);
    brg_k_widen(v, near, type, m);
    for (int64_t k = 0; k < m; k++) { /* arithmetic, not branches: which side is a coin toss */
        const unsigned inexact = isfinite(x[k]) && v[k] != x[k], above = fabsf(v[k]) > fabsf(x[k]);
        lo[k] = (uint16_t)(near[k] - (inexact & above));
        hi[k] = (uint16_t)(near[k] + (inexact & !above));
    }
    brg_k_widen(lo_v, lo, type, m);
    brg_k_widen(hi_v, hi, type, m);
    /* Up with probability p = below / gap: u < p. The gap between neighbours is a power of two and
     * below (under one gap) and u (53 bits) are exact in double, so u * gap < below is the same
     * comparison without the division. */
    for (int64_t k = 0; k < m; k++) {
        const double below = (double)fabsf(x[k]) - fabs((double)lo_v[k]);
        const double gap = fabs((double)hi_v[k]) - fabs((double)lo_v[k]);
        const double u = (double)(int64_t)(mix(key + first + (uint64_t)k) >> 11) * 0x1p-53;
        const bool up = (u * gap < below) & (isfinite(hi_v[k]) != 0);
        const float drawn = pick(up, hi_v[k], lo_v[k]);
        x[k] = !isfinite(x[k]) || v[k] == x[k] ? x[k] : drawn;
    }
}

void half_round_stochastic(brg_dtype type, float *x, int64_t n, uint64_t seed, uint64_t stream) {
    const uint64_t key = mix(seed ^ mix(stream));
    for (int64_t i = 0; i < n; i += CHUNK) round_chunk(type, x + i, n - i < CHUNK ? n - i : CHUNK, key, (uint64_t)i);
}

/* FNV-1a of a parameter's name: the stream its draws come from on every device that holds it. */
static uint64_t name_stream(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = name ? name : ""; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return h;
}

void half_round_device(brg_device *dev, brg_optimizer *opt, const half_rounding *r) {
    brg_device_info info;
    brg_device_get_info(dev, &info);
    for (int p = 0; p < info.view->n_params; p++) {
        if (!info.holds[p]) continue;
        const brg_param *prm = &info.view->params[p];
        float *w = prm->tensor->data;
        const int64_t n = brg_tensor_numel(prm->tensor);
        if (r->stochastic) half_round_stochastic(r->type, w, n, r->seed, name_stream(prm->name));
        else half_round(r->type, w, n);
    }
    for (int i = 0; opt && i < brg_optimizer_state_count(opt); i++)
        half_round(r->type, brg_optimizer_state_data(opt, i), brg_optimizer_state_numel(opt, i));
}

void half_round_device_grads(brg_device *dev, brg_dtype type) {
    brg_device_info info;
    brg_device_get_info(dev, &info);
    for (int p = 0; p < info.view->n_params; p++) {
        brg_tensor *t = info.view->params[p].tensor;
        if (info.holds[p] && t->grad) half_round(type, t->grad, brg_tensor_numel(t));
    }
}
