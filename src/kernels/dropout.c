/* Inverted dropout with a counter-based mask: element i's keep decision is a pure function of
 * (seed, offset + i), so backward regenerates the forward mask instead of storing it, any
 * sub-range can be computed independently, and a seed reproduces a run. */
#include "brigade/status.h"
#include "kernels/kernels.h"

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* splitmix64's finaliser: a bijection on 64 bits with full avalanche. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits, exactly representable as a float. The seed is mixed
 * before the counter is added so that nearby seeds give unrelated streams rather than the same
 * stream shifted. */
static float uniform01(uint64_t seed, uint64_t index) {
    uint64_t z = mix64(mix64(seed ^ GOLDEN) + (index + 1) * GOLDEN);
    return (float)(z >> 40) * 0x1.0p-24f;
}

bool brg_k_dropout_keep(float p, uint64_t seed, uint64_t index) { return uniform01(seed, index) >= p; }

void brg_k_dropout_fwd(float *y, const float *x, int64_t n, float p, uint64_t seed, uint64_t offset) {
    BRG_ASSERT(n >= 0 && p >= 0.0f && p <= 1.0f);
    if (p == 0.0f) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i];
        return;
    }
    if (p == 1.0f) {
        for (int64_t i = 0; i < n; i++) y[i] = 0.0f;
        return;
    }
    const float scale = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) y[i] = brg_k_dropout_keep(p, seed, offset + (uint64_t)i) ? x[i] * scale : 0.0f;
}

void brg_k_dropout_bwd(float *dx, const float *dy, int64_t n, float p, uint64_t seed, uint64_t offset) {
    BRG_ASSERT(n >= 0 && p >= 0.0f && p <= 1.0f);
    if (!dx || p == 1.0f) return;
    if (p == 0.0f) {
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    const float scale = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++)
        if (brg_k_dropout_keep(p, seed, offset + (uint64_t)i)) dx[i] += dy[i] * scale;
}
