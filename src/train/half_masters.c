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
        if (type == BRG_DTYPE_BF16) {
            brg_f32_to_bf16_row(bits, x + i, m);
            brg_bf16_to_f32_row(x + i, bits, m);
        } else {
            brg_f32_to_f16_row(bits, x + i, m);
            brg_f16_to_f32_row(x + i, bits, m);
        }
    }
}

/* splitmix64's finaliser: a well-mixed 64-bit value from any key. */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float widen(brg_dtype type, uint16_t h) { return type == BRG_DTYPE_BF16 ? brg_bf16_to_f32(h) : brg_f16_to_f32(h); }
static uint16_t narrow(brg_dtype type, float f) { return type == BRG_DTYPE_BF16 ? brg_f32_to_bf16(f) : brg_f32_to_f16(f); }

/* Both formats are sign-magnitude, so the half values next to h in magnitude are h - 1 and h + 1
 * (h - 1 of +-0 is never taken: a value that rounds to zero lies above it in magnitude). */
static float round_one(brg_dtype type, float x, uint64_t draw) {
    if (!isfinite(x)) return x;
    const uint16_t near = narrow(type, x);
    const float v = widen(type, near);
    if (v == x) return x;
    uint16_t lo = near, hi = near;
    if (fabsf(v) > fabsf(x)) lo = (uint16_t)(near - 1); /* near is the upper neighbour */
    else hi = (uint16_t)(near + 1);
    const float lo_v = widen(type, lo), hi_v = widen(type, hi);
    if (!isfinite(hi_v)) return lo_v; /* beyond the largest finite value: stay finite */
    const double p = ((double)fabsf(x) - fabs((double)lo_v)) / (fabs((double)hi_v) - fabs((double)lo_v));
    const double u = (double)(draw >> 11) * 0x1p-53;
    return u < p ? hi_v : lo_v;
}

void half_round_stochastic(brg_dtype type, float *x, int64_t n, uint64_t seed, uint64_t stream) {
    const uint64_t key = mix(seed ^ mix(stream));
    for (int64_t i = 0; i < n; i++) x[i] = round_one(type, x[i], mix(key + (uint64_t)i));
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
