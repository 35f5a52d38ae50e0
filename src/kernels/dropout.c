/* Inverted dropout with a counter-based mask: element i's keep decision is a pure function of
 * (seed, offset + i), so backward regenerates the forward mask instead of storing it, any
 * sub-range can be computed independently, and a seed reproduces a run.
 *
 * Three bodies, picked by brg_simd_isa(): AVX-512 (16 elements a step), AVX2 (8) and scalar. All
 * compute the same 64-bit hash exactly and the same single multiply per kept element, so every
 * level keeps the same elements and gives the same bits. */
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

/* Keep decisions of the 16 elements whose hash inputs (draw24's key + (index + 1) GOLDEN) are
 * h[0] (elements 0-7) and h[1] (8-15). */
BRG_AVX512_INLINE __mmask16 keep16(const __m512i h[2], __m512i thr) {
    __mmask8 lo = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(mix64x8(h[0]), 40), thr);
    __mmask8 hi = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(mix64x8(h[1]), 40), thr);
    return (__mmask16)(lo | ((unsigned)hi << 8));
}

/* The same as dropout_scalar, 16 elements at a time; the products and sums are the scalar
 * loop's operations (no fused multiply-add), so both give the same bits. */
BRG_AVX512 static void dropout_avx512(float *y, const float *x, int64_t n, float scale, uint64_t key, uint64_t thr,
                                      uint64_t offset, bool accumulate) {
    const __m512 sv = _mm512_set1_ps(scale);
    const __m512i tv = _mm512_set1_epi64((long long)thr), golden = _mm512_set1_epi64((long long)GOLDEN);
    /* The hash inputs of the first 16 elements, then 16 GOLDEN more each step: exact modulo 2^64,
     * as the products are, and two of the six 64-bit multiplies of 16 elements fewer (dropout
     * was 3.2% of a T5-small training step). */
    const __m512i index = _mm512_add_epi64(_mm512_set1_epi64((long long)offset), _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1));
    const __m512i kv = _mm512_set1_epi64((long long)key), step = _mm512_set1_epi64((long long)(16 * GOLDEN));
    __m512i h[2] = {_mm512_add_epi64(kv, _mm512_mullo_epi64(index, golden)),
                    _mm512_add_epi64(kv, _mm512_mullo_epi64(_mm512_add_epi64(index, _mm512_set1_epi64(8)), golden))};
    for (int64_t i = 0; i < n; i += 16, h[0] = _mm512_add_epi64(h[0], step), h[1] = _mm512_add_epi64(h[1], step)) {
        __mmask16 valid = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __mmask16 keep = keep16(h, tv) & valid;
        __m512 kept = _mm512_maskz_mul_ps(keep, _mm512_maskz_loadu_ps(valid, x + i), sv);
        if (accumulate) {
            __m512 acc = _mm512_maskz_loadu_ps(valid, y + i);
            _mm512_mask_storeu_ps(y + i, valid, _mm512_mask_add_ps(acc, keep, acc, kept));
        } else {
            _mm512_mask_storeu_ps(y + i, valid, kept);
        }
    }
}

/* ---- AVX2: no 64-bit multiply (vpmullq), so it is built from 32 x 32 -> 64 products ---- */

/* a * b mod 2^64 on 4 lanes: lo(a) lo(b) + (hi(a) lo(b) + lo(a) hi(b)) 2^32. */
BRG_AVX2_INLINE __m256i mullo64x4(__m256i a, __m256i b) {
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                           _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

BRG_AVX2_INLINE __m256i mix64x4(__m256i z) {
    z = mullo64x4(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), _mm256_set1_epi64x((long long)0xBF58476D1CE4E5B9ULL));
    z = mullo64x4(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), _mm256_set1_epi64x((long long)0x94D049BB133111EBULL));
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* All-ones in the 64-bit lanes whose hash input h = key + (index + 1) GOLDEN (draw24's) gives a
 * kept element. The 24-bit draws and the threshold (<= 2^24) are small, so a signed compare is
 * exact. */
BRG_AVX2_INLINE __m256i keep4(__m256i h, __m256i thr) {
    const __m256i dropped = _mm256_cmpgt_epi64(thr, _mm256_srli_epi64(mix64x4(h), 40));
    return _mm256_xor_si256(dropped, _mm256_set1_epi64x(-1));
}

/* Keep decisions of the 8 elements whose hash inputs are h[0] (elements 0-3) and h[1] (4-7), as
 * 32-bit lane masks: the low halves of the two 64-bit masks, put back in element order. */
BRG_AVX2_INLINE __m256 keep8(const __m256i h[2], __m256i thr) {
    const __m256 lo = _mm256_castsi256_ps(keep4(h[0], thr));
    const __m256 hi = _mm256_castsi256_ps(keep4(h[1], thr));
    const __m256 mixed = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); /* lo0 lo1 hi0 hi1 | lo2 lo3 hi2 hi3 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(mixed), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Moves the hash inputs 8 elements on: adding 8 GOLDEN is exact modulo 2^64, as the products are,
 * and saves one emulated 64-bit multiply per element. */
BRG_AVX2_INLINE void advance8(__m256i h[2]) {
    const __m256i step = _mm256_set1_epi64x((long long)(8 * GOLDEN));
    h[0] = _mm256_add_epi64(h[0], step);
    h[1] = _mm256_add_epi64(h[1], step);
}

/* One 8-wide step: kept lanes x * scale, dropped ones 0, or (accumulate) acc plus that where
 * kept and acc untouched where dropped, as the scalar loop's `if (keep) y += x * scale`. */
BRG_AVX2_INLINE __m256 dropout_step8(__m256 acc, __m256 x, __m256 keep, __m256 sv, bool accumulate) {
    const __m256 kept = _mm256_and_ps(_mm256_mul_ps(x, sv), keep);
    return accumulate ? _mm256_blendv_ps(acc, _mm256_add_ps(acc, kept), keep) : kept;
}

BRG_AVX2 static void dropout_avx2(float *y, const float *x, int64_t n, float scale, uint64_t key, uint64_t thr,
                                  uint64_t offset, bool accumulate) {
    const __m256 sv = _mm256_set1_ps(scale);
    const __m256i tv = _mm256_set1_epi64x((long long)thr), kv = _mm256_set1_epi64x((long long)key);
    const __m256i golden = _mm256_set1_epi64x((long long)GOLDEN), first = _mm256_set1_epi64x((long long)offset);
    __m256i h[2] = {_mm256_add_epi64(kv, mullo64x4(_mm256_add_epi64(first, _mm256_setr_epi64x(1, 2, 3, 4)), golden)),
                    _mm256_add_epi64(kv, mullo64x4(_mm256_add_epi64(first, _mm256_setr_epi64x(5, 6, 7, 8)), golden))};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8, advance8(h)) {
        __m256 keep = keep8(h, tv);
        __m256 acc = accumulate ? _mm256_loadu_ps(y + i) : _mm256_setzero_ps();
        _mm256_storeu_ps(y + i, dropout_step8(acc, _mm256_loadu_ps(x + i), keep, sv, accumulate));
    }
    if (i < n) {
        __m256 keep = keep8(h, tv);
        __m256 acc = accumulate ? brg_load_tail8(y, i, n) : _mm256_setzero_ps();
        brg_store_tail8(y, i, n, dropout_step8(acc, brg_load_tail8(x, i, n), keep, sv, accumulate));
    }
}
#endif

typedef struct dropout_job {
    float *y;
    const float *x;
    int64_t n;
    float scale;
    uint64_t key, thr, offset;
    bool accumulate;
} dropout_job;

/* A share of the elements per slice, cut at multiples of 64: element i's mask bit comes from its
 * index offset + i alone, so any split keeps exactly the same elements. */
static void dropout_slice(void *p, int i, int n_slices) {
    const dropout_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 64, i, n_slices, &first, &last);
    if (last <= first) return;
    float *y = j->y + first;
    const float *x = j->x + first;
    const uint64_t at = j->offset + (uint64_t)first;
    BRG_SIMD_PICK(dropout_avx512(y, x, last - first, j->scale, j->key, j->thr, at, j->accumulate),
                  dropout_avx2(y, x, last - first, j->scale, j->key, j->thr, at, j->accumulate),
                  dropout_scalar(y, x, last - first, j->scale, j->key, j->thr, at, j->accumulate));
}

static void dropout_rows(float *y, const float *x, int64_t n, float p, uint64_t seed, uint64_t offset,
                         bool accumulate) {
    dropout_job job = {y, x, n, 1.0f / (1.0f - p), stream_key(seed), keep_threshold(p), offset, accumulate};
    brg_team_split(dropout_slice, &job, n);
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

void brg_k_dropout_bwd(float *dx, bool overwrite, const float *dy, int64_t n, float p, uint64_t seed, uint64_t offset) {
    BRG_ASSERT(n >= 0 && p >= 0.0f && p <= 1.0f);
    if (!dx) return;
    if (overwrite) { /* the forward's computation on dy */
        brg_k_dropout_fwd(dx, dy, n, p, seed, offset);
        return;
    }
    if (p == 1.0f) return;
    if (p == 0.0f) {
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    dropout_rows(dx, dy, n, p, seed, offset, true);
}
