/* Inverted dropout with a counter-based mask: element i's keep decision is a pure function of
 * (seed, offset + i), so backward regenerates the forward mask instead of storing it, any
 * sub-range can be computed independently, and a seed reproduces a run. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* splitmix64's finaliser: a bijection on 64 bits with full avalanche. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The stream's key: the seed is mixed before the counter is added so that nearby seeds give
 * unrelated streams rather than the same stream shifted. */
static uint64_t stream_key(uint64_t seed) { return mix64(seed ^ GOLDEN); }

/* 24 random bits for element `index` of the stream. */
static uint64_t draw24(uint64_t key, uint64_t index) { return mix64(key + (index + 1) * GOLDEN) >> 40; }

/* Element i is kept iff its uniform draw24 * 2^-24 in [0, 1) is >= p, that is iff
 * draw24 >= ceil(p * 2^24): one integer comparison, exactly the same decision. */
static uint64_t keep_threshold(float p) { return (uint64_t)ceil((double)p * 16777216.0); }

bool brg_k_dropout_keep(float p, uint64_t seed, uint64_t index) {
    return draw24(stream_key(seed), index) >= keep_threshold(p);
}

/* y[i] = keep_i ? x[i] * scale : 0 (accumulate: y[i] += keep_i ? x[i] * scale : 0) for
 * elements offset .. offset + n - 1 of the stream. y may equal x. */
static void dropout_scalar(float *y, const float *x, int64_t n, float scale, uint64_t key, uint64_t thr,
                           uint64_t offset, bool accumulate) {
    for (int64_t i = 0; i < n; i++) {
        bool keep = draw24(key, offset + (uint64_t)i) >= thr;
        if (accumulate) {
            if (keep) y[i] += x[i] * scale;
        } else {
            y[i] = keep ? x[i] * scale : 0.0f;
        }
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* mix64 on 8 lanes (vpmullq is AVX512DQ). */
BRG_AVX512_INLINE __m512i mix64x8(__m512i z) {
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ULL));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64((long long)0x94D049BB133111EBULL));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Keep decisions of 16 consecutive elements starting at stream index `first`. */
BRG_AVX512_INLINE __mmask16 keep16(uint64_t key, uint64_t first, __m512i thr) {
    const __m512i lane = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1); /* the + 1 of draw24 */
    const __m512i golden = _mm512_set1_epi64((long long)GOLDEN);
    __m512i idx_lo = _mm512_add_epi64(_mm512_set1_epi64((long long)first), lane);
    __m512i idx_hi = _mm512_add_epi64(idx_lo, _mm512_set1_epi64(8));
    __m512i z_lo = mix64x8(_mm512_add_epi64(_mm512_set1_epi64((long long)key), _mm512_mullo_epi64(idx_lo, golden)));
    __m512i z_hi = mix64x8(_mm512_add_epi64(_mm512_set1_epi64((long long)key), _mm512_mullo_epi64(idx_hi, golden)));
    __mmask8 lo = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(z_lo, 40), thr);
    __mmask8 hi = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(z_hi, 40), thr);
    return (__mmask16)(lo | ((unsigned)hi << 8));
}

/* The same as dropout_scalar, 16 elements at a time; the products and sums are the scalar
 * loop's operations (no fused multiply-add), so both give the same bits. */
BRG_AVX512 static void dropout_avx512(float *y, const float *x, int64_t n, float scale, uint64_t key, uint64_t thr,
                                      uint64_t offset, bool accumulate) {
    const __m512 sv = _mm512_set1_ps(scale);
    const __m512i tv = _mm512_set1_epi64((long long)thr);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 valid = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __mmask16 keep = keep16(key, offset + (uint64_t)i, tv) & valid;
        __m512 kept = _mm512_maskz_mul_ps(keep, _mm512_maskz_loadu_ps(valid, x + i), sv);
        if (accumulate) {
            __m512 acc = _mm512_maskz_loadu_ps(valid, y + i);
            _mm512_mask_storeu_ps(y + i, valid, _mm512_mask_add_ps(acc, keep, acc, kept));
        } else {
            _mm512_mask_storeu_ps(y + i, valid, kept);
        }
    }
}
#endif

static void dropout_rows(float *y, const float *x, int64_t n, float p, uint64_t seed, uint64_t offset,
                         bool accumulate) {
    const float scale = 1.0f / (1.0f - p);
    const uint64_t key = stream_key(seed), thr = keep_threshold(p);
#if defined(__x86_64__) || defined(__i386__)
    if (brg_simd_avx512()) {
        dropout_avx512(y, x, n, scale, key, thr, offset, accumulate);
        return;
    }
#endif
    dropout_scalar(y, x, n, scale, key, thr, offset, accumulate);
}

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
    dropout_rows(y, x, n, p, seed, offset, false);
}

void brg_k_dropout_bwd(float *dx, const float *dy, int64_t n, float p, uint64_t seed, uint64_t offset) {
    BRG_ASSERT(n >= 0 && p >= 0.0f && p <= 1.0f);
    if (!dx || p == 1.0f) return;
    if (p == 0.0f) {
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    dropout_rows(dx, dy, n, p, seed, offset, true);
}
