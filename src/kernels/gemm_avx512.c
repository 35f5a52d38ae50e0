/* AVX-512 SGEMM: the classic packed, cache-blocked scheme (Goto / BLIS).
 *
 *   for ic in M by MC:
 *     for pc in K by KC:
 *       pack A block [MC, KC]       lives in L3, each micro-panel re-read once per B block
 *       for jc in N by NC:
 *         pack B block [KC, NC]     stays in L2
 *         for ir in MC by MR:       one A micro-panel [MR, KC] stays in L1
 *           for jr in NC by NR:     B micro-panels stream from L2
 *             microkernel: MR x NR tile of C in 28 zmm accumulators
 *
 * The operand that is loaded as vectors (B, NR = 32 floats per k) is the one streamed from L2;
 * the broadcast operand (A, MR = 14 floats per k) is the one kept in L1. The other way round
 * (B micro-panel in L1, A streaming) needs a 32 KiB B micro-panel at KC = 256 to survive in a
 * 48 KiB L1 while A streams through it; it measured ~7% slower over the GPT-2 products and ~15%
 * slower whenever the B block outgrew L2 (N = 3072, 50257).
 *
 * Packing turns all four transpose cases into one microkernel: A micro-panels are stored
 * k-major with MR floats per k (broadcast one at a time), B micro-panels k-major with NR floats
 * per k (two aligned vector loads). Edges are padded with zeros in the packed buffers, so the
 * microkernel always runs full tiles and only its stores are masked to the valid part of C.
 *
 * The block loops, block packing and buffers are gemm_blocked.c's; this file holds the packing
 * routines and the tiles.
 *
 * Every function that executes AVX-512 carries a target attribute instead of the translation
 * unit being built with -mavx512*: the library must still run on CPUs without it, and
 * brg_gemm only calls in here after brg_gemm_avx512_supported(). */
#include "kernels/gemm_avx512.h"

#include <immintrin.h>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_blocked.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define AVX512_INLINE static inline __attribute__((always_inline)) AVX512

enum {
    MR = BRG_GEMM_AVX512_MR,
    NR = BRG_GEMM_AVX512_NR,
    NV = NR / 16, /* zmm vectors per tile row */
    KC = BRG_GEMM_AVX512_KC,
    MC = BRG_GEMM_AVX512_MC,
    NC = BRG_GEMM_AVX512_NC,
};

_Static_assert(MR <= 16, "an A micro-panel is packed through one 16x16 transpose");
_Static_assert(NR % 16 == 0, "a B micro-panel is a whole number of zmm vectors");
_Static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of tiles");

bool brg_gemm_avx512_supported(void) { return brg_isa_hardware(BRG_ISA_AVX512); }

/* ---- packing ---------------------------------------------------------------------------- */

/* The mask of the first n lanes (n clamped to [0, 16]). */
static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* In-register transpose: on entry r[row] holds row `row` (16 lanes = 16 columns); on exit
 * r[col] holds column `col` (16 lanes = 16 rows). Three shuffle stages of 32-bit, 64-bit and
 * 128-bit granularity. */
AVX512_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* After this stage, 128-bit lane L of s[4g + q] holds rows 4g..4g+3 of column 4L + q. */
    __m512 s[16];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512d a0 = _mm512_castps_pd(t[4 * g]), a1 = _mm512_castps_pd(t[4 * g + 1]);
        __m512d a2 = _mm512_castps_pd(t[4 * g + 2]), a3 = _mm512_castps_pd(t[4 * g + 3]);
        s[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        s[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        s[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        s[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* Gather lane L of s[q], s[4+q], s[8+q], s[12+q] into column 4L + q. */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512 lo01 = _mm512_shuffle_f32x4(s[q], s[4 + q], 0x44);      /* lanes 0,1 of each */
        __m512 hi01 = _mm512_shuffle_f32x4(s[8 + q], s[12 + q], 0x44);
        __m512 lo23 = _mm512_shuffle_f32x4(s[q], s[4 + q], 0xEE);      /* lanes 2,3 of each */
        __m512 hi23 = _mm512_shuffle_f32x4(s[8 + q], s[12 + q], 0xEE);
        r[q] = _mm512_shuffle_f32x4(lo01, hi01, 0x88);
        r[4 + q] = _mm512_shuffle_f32x4(lo01, hi01, 0xDD);
        r[8 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0xDD);
    }
}

/* Packs `rows` (<= 16) source rows that are contiguous along k (row r at src + r * ld) into
 * dst[k * w + lane], lane = row, for k < kc; lanes rows..width-1 are written as zeros. This is
 * the transposing case: A not transposed, or B transposed.
 *
 * Each row contributes only kc floats (1 KiB) before the next group of rows starts, too short
 * for the hardware prefetcher to ramp up on 16 streams, so the loop prefetches PREFETCH floats
 * ahead along each row and, near the end, the first lines of the next group (`next` rows on). */
#define PREFETCH 64
AVX512 static void pack_rows(float *restrict dst, int64_t w, int width, const float *restrict src, int64_t ld,
                             int rows, int64_t kc, int64_t next) {
    const __mmask16 store = lanes(width);
    for (int64_t k = 0; k < kc; k += 16) {
        const int64_t kt = kc - k < 16 ? kc - k : 16;
        const __mmask16 load = lanes(kt);
        /* An address, not a pointer: past the last group it lies outside the matrix, which a
         * prefetch tolerates and pointer arithmetic does not. */
        const uintptr_t ahead = (uintptr_t)src + sizeof(float) * (uintptr_t)(k + PREFETCH < kc
                                                                                ? k + PREFETCH
                                                                                : next * ld + (k + PREFETCH - kc));
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < rows) {
                r[i] = _mm512_maskz_loadu_ps(load, src + (int64_t)i * ld + k);
                _mm_prefetch((const char *)(ahead + sizeof(float) * (uintptr_t)(i * ld)), _MM_HINT_T0);
            } else {
                r[i] = _mm512_setzero_ps();
            }
        }
        transpose16(r);
        float *d = dst + k * w;
        if (kt == 16) {
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(d + q * w, store, r[q]);
        } else {
            for (int q = 0; q < kt; q++) _mm512_mask_storeu_ps(d + q * w, store, r[q]);
        }
    }
}

/* Packs a source whose panel dimension is contiguous (element (k, lane) at src + k * ld + lane,
 * `cols` valid lanes) into dst[k * w + lane] for lanes < w; the rest of each row becomes zeros.
 * This is the copying case: A transposed, or B not transposed. (Software prefetching rows
 * ahead here measured slower: the hardware prefetcher already follows the constant stride.) */
AVX512 static void pack_cols(float *restrict dst, int64_t w, const float *restrict src, int64_t ld, int64_t cols,
                             int64_t kc) {
    const int nv = (int)((w + 15) / 16);
    for (int64_t k = 0; k < kc; k++) {
        const float *s = src + k * ld;
        float *d = dst + k * w;
        for (int v = 0; v < nv; v++) {
            __m512 x = _mm512_maskz_loadu_ps(lanes(cols - 16 * v), s + 16 * v);
            _mm512_mask_storeu_ps(d + 16 * v, lanes(w - 16 * v), x);
        }
    }
}

/* ---- microkernel -------------------------------------------------------------------------
 * C[0:mr, 0:nr] = alpha * (A_panel @ B_panel) + beta * C over one packed depth kc. Per k: NV
 * aligned loads of B, ROWS broadcasts of A, ROWS * NV FMAs into accumulators that never leave
 * registers (28 of the 32 zmm for 14 x 32). beta == 0 stores without reading C.
 *
 * ROWS is a compile-time constant of each instance (always_inline + constant argument): the
 * full 14-row tile, and 8- and 4-row tiles for the last panel of a block, which would otherwise
 * spend up to 13/14 of its FMAs on padding (M = 256 leaves 4 rows, attention's M = 32 too). All
 * read the same packed A layout, MR floats per k. */
AVX512_INLINE void tile(const int ROWS, int64_t kc, const float *restrict a, const float *restrict b, float *c,
                        int64_t ldc, float alpha, float beta, int64_t mr, int64_t nr) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();

    /* Bring the C tile toward L1 while the products run: it is only touched at the end. */
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }

#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + p * NR + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; i++) {
            const __m512 av = _mm512_set1_ps(a[p * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
        }
    }

    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    if (mr == ROWS && nr == NR) {
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; i++) {
            float *ci = c + i * ldc;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                __m512 r = _mm512_mul_ps(acc[i][v], va);
                if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16 * v), r);
                _mm512_storeu_ps(ci + 16 * v, r);
            }
        }
        return;
    }
    __mmask16 mask[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) mask[v] = lanes(nr - 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m512 r = _mm512_mul_ps(acc[i][v], va);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + 16 * v), r);
            _mm512_mask_storeu_ps(ci + 16 * v, mask[v], r);
        }
    }
}

AVX512 static void tile_14(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
                           int64_t mr, int64_t nr) {
    tile(MR, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX512 static void tile_8(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
                          int64_t mr, int64_t nr) {
    tile(8, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX512 static void tile_4(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
                          int64_t mr, int64_t nr) {
    tile(4, kc, a, b, c, ldc, alpha, beta, mr, nr);
}


/* A micro-panel outer (see the top of this file for why). */
static const brg_gemm_kernel avx512_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 16,
    .pack_rows = pack_rows, .pack_cols = pack_cols,
    .n_tiles = 3, .tile_rows = {MR, 8, 4}, .tiles = {tile_14, tile_8, tile_4},
    .b_panel_outer = false,
};

bool brg_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return brg_gemm_blocked(&avx512_kernel, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
