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
#include "kernels/gemm_avx512_parts.h"

enum {
    MR = BRG_GEMM_AVX512_MR,
    NR = BRG_GEMM_AVX512_NR,
    NV = NR / 16, /* zmm vectors per tile row */
    KC = BRG_GEMM_AVX512_KC,
    MC = BRG_GEMM_AVX512_MC,
    NC = BRG_GEMM_AVX512_NC,
};

_Static_assert(MR <= 16, "an A micro-panel is packed through one 16x16 transpose");
_Static_assert(NR == 32, "brg_avx512_tile_store stores tiles of two zmm vectors per row");
_Static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of tiles");

bool brg_gemm_avx512_supported(void) { return brg_isa_hardware(BRG_ISA_AVX512); }

/* ---- packing ---------------------------------------------------------------------------- */

/* 16 source elements (lanes outside m read as zero) as floats: half types widen exactly, so a
 * half operand packs to the floats an fp32 operand holding its widened values would. */
AVX512_INLINE __m512 load16(const brg_dtype SRC, const void *p, __mmask16 m) {
    if (SRC == BRG_DTYPE_F32) return _mm512_maskz_loadu_ps(m, p);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (SRC == BRG_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Bytes per source element. */
#define ELEM(SRC) ((SRC) == BRG_DTYPE_F32 ? 4 : 2)

/* Packs `rows` (<= 16) source rows that are contiguous along k (row r at src + r * ld) into
 * dst[k * w + lane], lane = row, for k < kc; lanes rows..width-1 are written as zeros. This is
 * the transposing case: A not transposed, or B transposed.
 *
 * Each row contributes only kc elements (1 KiB of fp32) before the next group of rows starts,
 * too short for the hardware prefetcher to ramp up on 16 streams, so the loop prefetches
 * PREFETCH elements ahead along each row and, near the end, the first lines of the next group
 * (`next` rows on). */
#define PREFETCH 64
AVX512_INLINE void pack_rows_of(const brg_dtype SRC, float *restrict dst, int64_t w, int width,
                                const char *restrict src, int64_t ld, int rows, int64_t kc, int64_t next) {
    const __mmask16 store = lanes(width);
    const uintptr_t es = ELEM(SRC);
    for (int64_t k = 0; k < kc; k += 16) {
        const int64_t kt = kc - k < 16 ? kc - k : 16;
        const __mmask16 load = lanes(kt);
        /* An address, not a pointer: past the last group it lies outside the matrix, which a
         * prefetch tolerates and pointer arithmetic does not. */
        const uintptr_t ahead = (uintptr_t)src + es * (uintptr_t)(k + PREFETCH < kc ? k + PREFETCH
                                                                                    : next * ld + (k + PREFETCH - kc));
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < rows) {
                r[i] = load16(SRC, src + (uintptr_t)((int64_t)i * ld + k) * es, load);
                _mm_prefetch((const char *)(ahead + es * (uintptr_t)(i * ld)), _MM_HINT_T0);
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
 * This is the copying case: A transposed, or B not transposed. The driver packs whole blocks
 * with the sweeps below, which write these bytes; this one panel at a time defines the layout
 * (the tests compare the two). (Software prefetching rows ahead here measured slower: the
 * hardware prefetcher already follows the constant stride.) */
AVX512_INLINE void pack_cols_of(const brg_dtype SRC, float *restrict dst, int64_t w, const char *restrict src,
                                int64_t ld, int64_t cols, int64_t kc) {
    const int nv = (int)((w + 15) / 16);
    const int64_t es = ELEM(SRC);
    for (int64_t k = 0; k < kc; k++) {
        const char *s = src + k * ld * es;
        float *d = dst + k * w;
        for (int v = 0; v < nv; v++) {
            __m512 x = load16(SRC, s + 16 * v * es, lanes(cols - 16 * v));
            _mm512_mask_storeu_ps(d + 16 * v, lanes(w - 16 * v), x);
        }
    }
}

/* A whole block of the copying case into its w-lane panels (panel p at dst + p * w * kc,
 * element (k, lane) at k * w + lane, lanes past n zero), a source row at a time: each row of
 * the block is read as one contiguous run, where a panel at a time read w lanes (128 bytes of B,
 * 56 of A) of every row before moving to the next panel. pack_cols_of's bytes (the tests
 * compare them). B not transposed (w = NR) and A transposed (w = MR; a panel's load of 16 may
 * read 2 elements of the next, never past n). With both, packing went from 14.4% of a GPT-2
 * small fp32 training step (4x64, one device) to 10.6%, and the step, on the Intel AVX-512 VM
 * (alternating with the build before, tokens/s): 8x128 187.4-191.4 against 177.6-185.0 on one
 * core, 332.2-334.1 against 319.3-319.6 on two; 4x64 156.1-168.1 against 156.4-160.3 on one
 * core. */
AVX512_INLINE void pack_block_of(const brg_dtype SRC, float *restrict dst, const int w, const char *restrict src,
                                 int64_t ld, int64_t n, int64_t kc) {
    const int64_t es = ELEM(SRC), panels = (n + w - 1) / w;
    for (int64_t k = 0; k < kc; k++) {
        const char *s = src + k * ld * es;
        for (int64_t p = 0; p < panels; p++) {
            float *d = dst + (p * kc + k) * w;
#pragma GCC unroll 2
            for (int v = 0; v < w; v += 16)
                _mm512_mask_storeu_ps(d + v, lanes(w - v), load16(SRC, s + (p * w + v) * es, lanes(n - p * w - v)));
        }
    }
}

/* One instance per source type, for the kernel's tables. */
#define PACKERS(suffix, SRC)                                                                                     \
    AVX512 static void pack_rows_##suffix(void *restrict dst, int64_t w, int width, const void *restrict src,   \
                                          int64_t ld, int rows, int64_t kc, int64_t next) {                      \
        pack_rows_of(SRC, dst, w, width, src, ld, rows, kc, next);                                               \
    }                                                                                                            \
    AVX512 static void pack_cols_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,   \
                                          int64_t cols, int64_t kc) {                                            \
        pack_cols_of(SRC, dst, w, src, ld, cols, kc);                                                            \
    }                                                                                                            \
    AVX512 static void pack_block_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,  \
                                           int64_t nc, int64_t kc) {                                             \
        (void)w;                                                                                                 \
        pack_block_of(SRC, dst, NR, src, ld, nc, kc);                                                            \
    }                                                                                                            \
    AVX512 static void pack_a_block_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,\
                                             int64_t mc, int64_t kc) {                                           \
        (void)w;                                                                                                 \
        pack_block_of(SRC, dst, MR, src, ld, mc, kc);                                                            \
    }
PACKERS(f32, BRG_DTYPE_F32)
PACKERS(f16, BRG_DTYPE_F16)
PACKERS(bf16, BRG_DTYPE_BF16)

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

    brg_avx512_tile_store(ROWS, acc, c, ldc, alpha, beta, mr, nr);
}

AVX512 static void tile_14(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                           int64_t mr, int64_t nr) {
    tile(MR, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX512 static void tile_8(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                          int64_t mr, int64_t nr) {
    tile(8, kc, a, b, c, ldc, alpha, beta, mr, nr);
}
AVX512 static void tile_4(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                          int64_t mr, int64_t nr) {
    tile(4, kc, a, b, c, ldc, alpha, beta, mr, nr);
}


/* A micro-panel outer (see the top of this file for why). */
static const brg_gemm_kernel avx512_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 16,
    .k_pack = 1,
    .pack_rows = {pack_rows_f32, pack_rows_f16, pack_rows_bf16},
    .pack_cols = {pack_cols_f32, pack_cols_f16, pack_cols_bf16},
    .pack_cols_block = {pack_block_f32, pack_block_f16, pack_block_bf16},
    .pack_cols_a_block = {pack_a_block_f32, pack_a_block_f16, pack_a_block_bf16},
    .n_tiles = 3, .tile_rows = {MR, 8, 4}, .tiles = {tile_14, tile_8, tile_4},
    .b_panel_outer = false,
};

const brg_gemm_kernel *brg_gemm_avx512_kernel(void) { return &avx512_kernel; }

bool brg_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return brg_gemm_blocked(&avx512_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_F32, A, lda, BRG_DTYPE_F32, B,
                            ldb, beta, C, ldc);
}

bool brg_gemm_avx512_typed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                           const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta,
                           float *C, int64_t ldc) {
    return brg_gemm_blocked(&avx512_kernel, trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C,
                            ldc);
}
