/* Choosing tokens: argmax, and draws from softmax(scores) with brigade's generator. Each output
 * sequence has its own stream, keyed by the seed, its prompt's key and its copy number, so what
 * a prompt samples does not depend on the rest of the batch. */
#include <math.h>

#include "models/generate_internal.h"

int32_t gen_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gen_rng_seed(brg_rng *rng, uint64_t seed, uint64_t key, uint64_t copy) {
    brg_rng_seed(rng, mix(mix(seed ^ 0x67656e6572617465ull) + key) ^ mix(copy + 0x9e3779b97f4a7c15ull));
}

/* exp(score - max) into w (0 for -inf); returns their sum. */
static double weights(const float *s, int64_t n, double *w) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = s[i] > mx ? s[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        w[i] = mx == -INFINITY || s[i] == -INFINITY ? 0.0 : exp((double)(s[i] - mx));
        sum += w[i];
    }
    return sum;
}

/* The index where the running sum of w passes u * sum (the last positive weight if rounding
 * leaves it short). */
static int32_t pick(const double *w, int64_t n, double sum, double u) {
    const double target = u * sum;
    double cum = 0;
    int64_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        if (w[i] <= 0) continue;
        cum += w[i];
        last = i;
        if (cum > target) return (int32_t)i;
    }
    return (int32_t)(last >= 0 ? last : 0);
}

int32_t gen_sample(brg_rng *rng, const float *s, int64_t n, double *scratch) {
    const double sum = weights(s, n, scratch), u = brg_rng_uniform(rng);
    if (!(sum > 0)) return gen_argmax(s, n);
    return pick(scratch, n, sum, u);
}

int64_t gen_sample_distinct(brg_rng *rng, const float *s, int64_t n, int64_t k, int32_t *out, double *scratch) {
    double sum = weights(s, n, scratch);
    int64_t got = 0;
    while (got < k && sum > 0) {
        const int32_t i = pick(scratch, n, sum, brg_rng_uniform(rng));
        out[got++] = i;
        sum -= scratch[i];
        scratch[i] = 0;
        if (sum <= 0) { /* recompute what rounding may have lost */
            sum = 0;
            for (int64_t j = 0; j < n; j++) sum += scratch[j];
        }
    }
    return got;
}
