/* The AVX-512-BF16 GEMM of gemm_bf16.h: gemm_blocked.c's scheme with panels of bf16 pairs.
 *
 * VDPBF16PS multiplies, per 32-bit lane, two pairs of bf16 values and adds both products to an
 * fp32 accumulator, so the packed panels hold pairs of consecutive k in each 4-byte lane (low
 * half k = 2s, high half 2s + 1): an A micro-panel is [kc/2][MR] pairs (one pair broadcast per
 * row), a B micro-panel [kc/2][NR] pairs (two zmm loads). The tile is the fp32 kernel's 14 x 32
 * with 28 accumulators, each instruction doing twice the multiply-adds of an FMA, on operands of
 * half the bytes; KC is twice the fp32 kernel's so a packed block has the same bytes.
 *
 * Packing: where k is contiguous in the source (A not transposed, B transposed) a row's pairs
 * already sit in 32-bit words, so panels are the fp32 kernel's 16 x 16 transpose of those words;
 * where the panel dimension is contiguous (A transposed, B not transposed) two source rows k,
 * k + 1 are interleaved into pairs by zero-extending one and shifting the other. An odd depth
 * leaves the last pair's upper half zero. */
#include "kernels/gemm_bf16.h"

#include <immintrin.h>

#include "kernels/gemm_avx512_parts.h"
#include "kernels/gemm_blocked.h"

#define BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define BF16_INLINE static inline __attribute__((always_inline)) BF16

enum {
    MR = BRG_GEMM_BF16_MR,
    NR = BRG_GEMM_BF16_NR,
    NV = NR / 16,
    KC = BRG_GEMM_BF16_KC,
    MC = BRG_GEMM_BF16_MC,
    NC = BRG_GEMM_BF16_NC,
};

_Static_assert(MR <= 16, "an A micro-panel is packed through one 16x16 transpose");
_Static_assert(NR == 32, "brg_avx512_tile_store stores tiles of two zmm vectors per row");
_Static_assert(KC % 2 == 0, "only the last depth block may end in half a pair");
_Static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of tiles");

/* The mask of the first n (clamped to [0, 32]) 16-bit elements. */
static inline __mmask32 halves(int64_t n) {
    return n >= 32 ? (__mmask32)0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
}

/* Rows contiguous along k: `rows` (<= 16) rows of kc bf16 at src + r * ld become lanes of
 * dst[s * w + lane] (32-bit pairs), s < ceil(kc / 2); lanes rows..width-1 are zeros. 32 k (16
 * pairs) a step. `next`: rows on to the next group, prefetched near the end. */
#define PREFETCH 128
BF16 static void pack_rows(void *restrict dst_, int64_t w, int width, const void *restrict src_, int64_t ld,
                           int rows, int64_t kc, int64_t next) {
    uint32_t *dst = dst_;
    const uint16_t *src = src_;
    const __mmask16 store = lanes(width);
    for (int64_t k = 0; k < kc; k += 32) {
        const int64_t kt = kc - k < 32 ? kc - k : 32, pairs = (kt + 1) / 2;
        const __mmask32 load = halves(kt);
        /* An address, not a pointer: past the last group it lies outside the matrix. */
        const uintptr_t ahead = (uintptr_t)src + 2 * (uintptr_t)(k + PREFETCH < kc ? k + PREFETCH
                                                                                    : next * ld + (k + PREFETCH - kc));
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < rows) {
                r[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(load, src + (int64_t)i * ld + k));
                _mm_prefetch((const char *)(ahead + 2 * (uintptr_t)(i * ld)), _MM_HINT_T0);
            } else {
                r[i] = _mm512_setzero_ps();
            }
        }
        transpose16(r);
        uint32_t *d = dst + (k / 2) * w;
        if (pairs == 16) {
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(d + q * w, store, r[q]);
        } else {
            for (int q = 0; q < pairs; q++) _mm512_mask_storeu_ps(d + q * w, store, r[q]);
        }
    }
}

/* 16 lanes of pairs from two source rows: lo[lane] in the low half, hi[lane] in the high. */
BF16_INLINE __m512i interleave(__m256i lo, __m256i hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

/* Panel dimension contiguous: element (k, lane) at src + k * ld + lane, `cols` valid lanes, into
 * dst[s * w + lane] pairs for lanes < w (zeros past cols); an odd kc pairs its last row with 0. */
BF16 static void pack_cols(void *restrict dst_, int64_t w, const void *restrict src_, int64_t ld, int64_t cols,
                           int64_t kc) {
    uint32_t *dst = dst_;
    const uint16_t *src = src_;
    const int nv = (int)((w + 15) / 16);
    for (int64_t k = 0; k < kc; k += 2) {
        const uint16_t *s0 = src + k * ld, *s1 = s0 + ld;
        const bool odd_end = k + 1 == kc;
        uint32_t *d = dst + (k / 2) * w;
        for (int v = 0; v < nv; v++) {
            const __mmask16 m = lanes(cols - 16 * v);
            const __m256i lo = _mm256_maskz_loadu_epi16(m, s0 + 16 * v);
            const __m256i hi = odd_end ? _mm256_setzero_si256() : _mm256_maskz_loadu_epi16(m, s1 + 16 * v);
            _mm512_mask_storeu_epi32(d + 16 * v, lanes(w - 16 * v), interleave(lo, hi));
        }
    }
}

/* C[0:mr, 0:nr] = alpha * (A_panel @ B_panel) + beta * C over depth kc: per pair of k, NV
 * aligned B loads, ROWS pair broadcasts, ROWS * NV VDPBF16PS into 28 resident accumulators. */
BF16_INLINE void tile(const int ROWS, int64_t kc, const uint32_t *restrict a, const uint32_t *restrict b, float *c,
                      int64_t ldc, float alpha, float beta, int64_t mr, int64_t nr) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();

    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }

    const int64_t pairs = (kc + 1) / 2;
#pragma GCC unroll 4
    for (int64_t p = 0; p < pairs; p++) {
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = (__m512bh)_mm512_load_si512(b + p * NR + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[p * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
        }
    }
    brg_avx512_tile_store(ROWS, acc, c, ldc, alpha, beta, mr, nr);
}

BF16 static void tile_14(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                         int64_t mr, int64_t nr) {
    tile(MR, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
BF16 static void tile_8(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tile(8, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
BF16 static void tile_4(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tile(4, kc, a, b, c, ldc, alpha, beta, mr, nr);
}

/* A micro-panel outer, as the fp32 AVX-512 kernel. Reads bf16 operands only. */
static const brg_gemm_kernel bf16_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 16, .k_pack = 2,
    .pack_rows = {[BRG_DTYPE_BF16] = pack_rows},
    .pack_cols = {[BRG_DTYPE_BF16] = pack_cols},
    .n_tiles = 3, .tile_rows = {MR, 8, 4}, .tiles = {tile_14, tile_8, tile_4},
    .b_panel_outer = false,
};

bool brg_gemm_avx512bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                         int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return brg_gemm_blocked(&bf16_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_BF16, A, lda, BRG_DTYPE_BF16, B,
                            ldb, beta, C, ldc);
}
