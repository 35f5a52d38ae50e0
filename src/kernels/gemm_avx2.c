/* AVX2 + FMA SGEMM: the packed, cache-blocked scheme of gemm_blocked.h on 8-wide vectors; this
 * file holds the packing routines and the tiles.
 *
 * Blocks: KC = 256 deep; a B block of KC x NC = 256 KiB stays in L2 (half of a Zen 3 core's);
 * the A block [MC, KC] in L3. Inside a block pair the B micro-panel [KC, 16] (16 KiB) stays in
 * L1 while the A micro-panels [6, KC] stream from L2.
 *
 * 6 x 16 is the tile the 16 ymm registers allow: 12 accumulators, two B vectors and one A
 * broadcast, so each k costs 2 loads + 6 broadcasts for 12 FMAs (the shape BLIS and OpenBLAS
 * use on Haswell and Zen).
 *
 * Functions carry target attributes (no global -mavx2), so the library still runs on older
 * CPUs; brg_gemm calls in here only after brg_isa_hardware(BRG_ISA_AVX2). */
#include "kernels/gemm_avx2.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_blocked.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline)) AVX2

enum {
    MR = BRG_GEMM_AVX2_MR,
    NR = BRG_GEMM_AVX2_NR,
    NV = NR / 8, /* ymm vectors per tile row */
    KC = BRG_GEMM_AVX2_KC,
    MC = BRG_GEMM_AVX2_MC,
    NC = BRG_GEMM_AVX2_NC,
};

_Static_assert(MR <= 8, "an A micro-panel is packed through one 8x8 transpose");
_Static_assert(NR % 8 == 0, "a B micro-panel is a whole number of ymm vectors");
_Static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of tiles");

bool brg_gemm_avx2_supported(void) { return brg_isa_hardware(BRG_ISA_AVX2); }

/* ---- packing ---------------------------------------------------------------------------- */

/* The maskload/maskstore mask of the first n lanes (n clamped to [0, 8]). */
AVX2_INLINE __m256i lanes(int64_t n) {
    const int k = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Stores the first `width` lanes of x: 8 (a B panel's half) and MR = 6 (an A panel's row)
 * without vmaskmovps, whose store form is slow on AMD cores (it made packing 6% of a GPT-2
 * training step on Zen); other widths through the mask. */
AVX2_INLINE void store_lanes(float *d, int width, __m256 x) {
    if (width == 8) {
        _mm256_storeu_ps(d, x);
    } else if (width == 6) {
        _mm_storeu_ps(d, _mm256_castps256_ps128(x));
        _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(x, 1));
    } else {
        _mm256_maskstore_ps(d, lanes(width), x);
    }
}

/* In-register transpose: on entry r[row] holds row `row` (8 lanes = 8 columns); on exit r[col]
 * holds column `col`. Stages of 32-bit, 64-bit and 128-bit granularity. */
AVX2_INLINE void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* 128-bit lane L of s[4g + q] now holds rows 4g..4g+3 of column 4L + q. */
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
        __m256d a0 = _mm256_castps_pd(t[4 * g]), a1 = _mm256_castps_pd(t[4 * g + 1]);
        __m256d a2 = _mm256_castps_pd(t[4 * g + 2]), a3 = _mm256_castps_pd(t[4 * g + 3]);
        s[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a0, a2));
        s[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a0, a2));
        s[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(a1, a3));
        s[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(a1, a3));
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x31);
    }
}

/* The packing routines also read half operands, whose widening needs F16C (every AVX2 CPU has
 * it; the half GEMM checks it before calling). The fp32 instances use no F16C instruction. */
#define AVX2H __attribute__((target("avx2,fma,f16c")))
#define AVX2H_INLINE static inline __attribute__((always_inline)) AVX2H

/* Bytes per source element. */
#define ELEM(SRC) ((SRC) == BRG_DTYPE_F32 ? 4 : 2)

/* 8 half elements as floats (exact). */
AVX2H_INLINE __m256 widen8(const brg_dtype SRC, __m128i h) {
    if (SRC == BRG_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The first n (0..8) source elements at p as floats, zeros past them; nothing past them is
 * read. AVX2 has no 16-bit masked load, so a half tail goes through a copy on the stack. */
AVX2H_INLINE __m256 load8(const brg_dtype SRC, const char *p, int64_t n) {
    if (SRC == BRG_DTYPE_F32) return n >= 8 ? _mm256_loadu_ps((const float *)p) : _mm256_maskload_ps((const float *)p, lanes(n));
    if (n >= 8) return widen8(SRC, _mm_loadu_si128((const __m128i *)p));
    uint16_t tmp[8] = {0};
    if (n > 0) memcpy(tmp, p, (size_t)n * sizeof *tmp);
    return widen8(SRC, _mm_loadu_si128((const __m128i *)tmp));
}

/* Packs `rows` (<= 8) source rows that are contiguous along k (row r at src + r * ld) into
 * dst[k * w + lane], lane = row, for k < kc; lanes rows..width-1 are written as zeros. The
 * transposing case: A not transposed, or B transposed. As in the AVX-512 kernel, each row
 * contributes only kc elements before the next group starts, so the loop prefetches ahead
 * along each row and, near the end, into the next group (`next` rows on). Half sources widen
 * exactly, so they pack to the floats of their widened values. */
#define PREFETCH 64
AVX2H_INLINE void pack_rows_of(const brg_dtype SRC, float *restrict dst, int64_t w, int width,
                               const char *restrict src, int64_t ld, int rows, int64_t kc, int64_t next) {
    const uintptr_t es = ELEM(SRC);
    for (int64_t k = 0; k < kc; k += 8) {
        const int64_t kt = kc - k < 8 ? kc - k : 8;
        /* An address, not a pointer: past the last group it lies outside the matrix, which a
         * prefetch tolerates and pointer arithmetic does not. */
        const uintptr_t ahead = (uintptr_t)src + es * (uintptr_t)(k + PREFETCH < kc ? k + PREFETCH
                                                                                    : next * ld + (k + PREFETCH - kc));
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            if (i < rows) {
                r[i] = load8(SRC, src + (uintptr_t)((int64_t)i * ld + k) * es, kt);
                _mm_prefetch((const char *)(ahead + es * (uintptr_t)(i * ld)), _MM_HINT_T0);
            } else {
                r[i] = _mm256_setzero_ps();
            }
        }
        transpose8(r);
        float *d = dst + k * w;
        for (int q = 0; q < kt; q++) store_lanes(d + q * w, width, r[q]);
    }
}

/* Packs a source whose panel dimension is contiguous (element (k, lane) at src + k * ld + lane,
 * `cols` valid lanes) into dst[k * w + lane] for lanes < w; the rest of each row becomes zeros.
 * The copying case: A transposed, or B not transposed. */
AVX2H_INLINE void pack_cols_of(const brg_dtype SRC, float *restrict dst, int64_t w, const char *restrict src,
                               int64_t ld, int64_t cols, int64_t kc) {
    const int nv = (int)((w + 7) / 8);
    const int64_t es = ELEM(SRC);
    for (int64_t k = 0; k < kc; k++) {
        const char *s = src + k * ld * es;
        float *d = dst + k * w;
        for (int v = 0; v < nv; v++) {
            __m256 x = load8(SRC, s + 8 * v * es, cols - 8 * v);
            store_lanes(d + 8 * v, w - 8 * v >= 8 ? 8 : (int)(w - 8 * v), x);
        }
    }
}

/* A whole block of the copying case into its w-lane panels (panel p at dst + p * w * kc,
 * element (k, lane) at k * w + lane, lanes past n zero), a source row at a time: each row's n
 * elements are read in one sweep instead of w at a time per panel (pack_cols_of's bytes; the
 * tests compare them). B not transposed (w = NR) and A transposed (w = MR; a panel's load of 8
 * may read 2 elements of the next, never past n). GPT-2 small fp32 training on one device of
 * the Intel AVX-512 VM with BRIGADE_ISA=avx2, alternating with the build before (tokens/s): 4x64
 * 107.6 and 112.6 against 103.2 and 101.4, 8x128 114.6 and 115.3 against 107.5 and 109.5. */
AVX2H_INLINE void pack_block_of(const brg_dtype SRC, float *restrict dst, const int w, const char *restrict src,
                                int64_t ld, int64_t n, int64_t kc) {
    const int64_t es = ELEM(SRC), panels = (n + w - 1) / w;
    for (int64_t k = 0; k < kc; k++) {
        const char *s = src + k * ld * es;
        for (int64_t p = 0; p < panels; p++) {
            float *d = dst + (p * kc + k) * w;
#pragma GCC unroll 2
            for (int v = 0; v < w; v += 8)
                store_lanes(d + v, w - v >= 8 ? 8 : w - v, load8(SRC, s + (p * w + v) * es, n - p * w - v));
        }
    }
}

/* One instance per source type, for the kernel's tables. */
#define PACKERS(suffix, SRC)                                                                                     \
    AVX2H static void pack_block_b_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld, \
                                            int64_t nc, int64_t kc) {                                            \
        (void)w;                                                                                                 \
        pack_block_of(SRC, dst, NR, src, ld, nc, kc);                                                            \
    }                                                                                                            \
    AVX2H static void pack_block_a_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld, \
                                            int64_t mc, int64_t kc) {                                            \
        (void)w;                                                                                                 \
        pack_block_of(SRC, dst, MR, src, ld, mc, kc);                                                            \
    }                                                                                                            \
    AVX2H static void pack_rows_##suffix(void *restrict dst, int64_t w, int width, const void *restrict src,    \
                                         int64_t ld, int rows, int64_t kc, int64_t next) {                       \
        pack_rows_of(SRC, dst, w, width, src, ld, rows, kc, next);                                               \
    }                                                                                                            \
    AVX2H static void pack_cols_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,    \
                                         int64_t cols, int64_t kc) {                                             \
        pack_cols_of(SRC, dst, w, src, ld, cols, kc);                                                            \
    }
PACKERS(f32, BRG_DTYPE_F32)
PACKERS(f16, BRG_DTYPE_F16)
PACKERS(bf16, BRG_DTYPE_BF16)

/* ---- microkernel -------------------------------------------------------------------------
 * C[0:mr, 0:nr] = alpha * (A_panel @ B_panel) + beta * C over one packed depth kc. ROWS is a
 * compile-time constant of each instance: the full 6-row tile, and 4- and 2-row tiles for the
 * last panel of a block, which would otherwise spend most of their FMAs on padding. All read
 * the same packed A layout, MR floats per k. beta == 0 stores without reading C. */
AVX2_INLINE void tile(const int ROWS, int64_t kc, const float *restrict a, const float *restrict b, float *c,
                      int64_t ldc, float alpha, float beta, int64_t mr, int64_t nr) {
    __m256 acc[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();

    /* Bring the C tile toward L1 while the products run: it is only touched at the end. */
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }

    /* Not unrolled: with 12 accumulators, 2 B vectors and the broadcast, gcc's unrolled copies
     * spill an accumulator to the stack in every iteration (-4% to -8% measured); the plain loop
     * keeps all 15 in registers. */
#pragma GCC unroll 1
    for (int64_t p = 0; p < kc; p++) {
        __m256 bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) bv[v] = _mm256_load_ps(b + p * NR + 8 * v);
#pragma GCC unroll 8
        for (int i = 0; i < ROWS; i++) {
            const __m256 av = _mm256_broadcast_ss(a + p * MR + i);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
        }
    }

    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    if (mr == ROWS && nr == NR) {
#pragma GCC unroll 8
        for (int i = 0; i < ROWS; i++) {
            float *ci = c + i * ldc;
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) {
                __m256 r = _mm256_mul_ps(acc[i][v], va);
                if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8 * v), r);
                _mm256_storeu_ps(ci + 8 * v, r);
            }
        }
        return;
    }
    __m256i mask[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) mask[v] = lanes(nr - 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m256 r = _mm256_mul_ps(acc[i][v], va);
            if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8 * v, mask[v]), r);
            _mm256_maskstore_ps(ci + 8 * v, mask[v], r);
        }
    }
}

AVX2 static void tile_6(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tile(MR, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX2 static void tile_4(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tile(4, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX2 static void tile_2(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tile(2, kc, a, b, c, ldc, alpha, beta, mr, nr);
}


/* B micro-panel outer: its 16 KiB stays in L1 while the 6 KiB A micro-panels stream from L2
 * (measured level with or slightly ahead of the A-outer order on the GPT-2 products). */
static const brg_gemm_kernel avx2_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 8,
    .k_pack = 1,
    .pack_rows = {pack_rows_f32, pack_rows_f16, pack_rows_bf16},
    .pack_cols = {pack_cols_f32, pack_cols_f16, pack_cols_bf16},
    .pack_cols_block = {pack_block_b_f32, pack_block_b_f16, pack_block_b_bf16},
    .pack_cols_a_block = {pack_block_a_f32, pack_block_a_f16, pack_block_a_bf16},
    .n_tiles = 3, .tile_rows = {MR, 4, 2}, .tiles = {tile_6, tile_4, tile_2},
    .b_panel_outer = true,
};

const brg_gemm_kernel *brg_gemm_avx2_kernel(void) { return &avx2_kernel; }

bool brg_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return brg_gemm_blocked(&avx2_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_F32, A, lda, BRG_DTYPE_F32, B,
                            ldb, beta, C, ldc);
}

bool brg_gemm_avx2_typed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                         const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta,
                         float *C, int64_t ldc) {
    return brg_gemm_blocked(&avx2_kernel, trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C,
                            ldc);
}
