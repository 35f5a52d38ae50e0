/* The AMX-BF16 GEMM of gemm_amx.h: gemm_blocked.c's scheme with tiles of the AMX unit.
 *
 * TDPBF16PS adds to a 16 x 16 fp32 tile C the products of a 16-row A tile (each row 32 bf16
 * along k) and a B tile of 16 rows of k pairs (each row 16 columns, a column's pair k = 2s, 2s + 1
 * in one 32-bit word). A call of the kernel computes a 32 x 32 block of C in four C tiles, per
 * 32-k step loading two A tiles and two B tiles: the eight tile registers all in use.
 *
 * Panels: B's hold pairs as gemm_bf16.c's do ([kc / 2][NR] 32-bit pairs, so a B tile is 16 pair
 * rows read at a stride of NR words, its right half 16 words on). A's are laid out for the A
 * tiles: per 32-k step, MR rows of 64 bytes (32 bf16 along k), the step's two tiles one after the
 * other. Both are padded with zeros to a whole number of 32-k steps (gemm_blocked.h's k_align).
 * The packers read bf16 sources as they are and round fp32 ones to bf16 (the .32 precision
 * modes' operands, brg_gemm_amxbf16_rounding), so no rounded copy is ever written.
 *
 * The tile registers hold a configuration (rows and bytes per row of each) that LDTILECFG sets
 * per thread; the kernel's enter and leave hooks (gemm_blocked.h) set it before each product's
 * block loops and release the tiles after, so the OS does not save 8 KiB of tile data for a
 * thread that has finished its products. */
#include "kernels/gemm_amx.h"

#include <stdatomic.h>
#include <string.h>

#include "kernels/gemm_blocked.h"
#include "kernels/half.h"

#if defined(__x86_64__) && defined(__linux__)
#define BRG_AMX_BUILD 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/bf16_round.h"
#include "kernels/gemm_avx512_parts.h"
#endif

/* ---- can this process use the tiles ---- */

#ifdef BRG_AMX_BUILD
#define ARCH_REQ_XCOMP_PERM 0x1023 /* linux/arch/x86/include/uapi/asm/prctl.h */
#define XFEATURE_XTILEDATA 18

static bool detect_amx_bf16(void) {
    unsigned a, b, c, d;
    if (!brg_isa_has_avx512bf16() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned amx_bf16 = 1u << 22, amx_tile = 1u << 24;
    if ((d & (amx_bf16 | amx_tile)) != (amx_bf16 | amx_tile)) return false;
    /* XCR0 bits 17 and 18: the OS saves the tile configuration and data. */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    /* Linux keeps the tile data disabled until the process asks (a fault otherwise). */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

static atomic_int has_amx = -1; /* -1 unknown, else 0 or 1 */

bool brg_isa_has_amx_bf16(void) {
    int v = atomic_load_explicit(&has_amx, memory_order_acquire);
    if (v < 0) {
#ifdef BRG_AMX_BUILD
        v = detect_amx_bf16();
#else
        v = 0;
#endif
        atomic_store_explicit(&has_amx, v, memory_order_release);
    }
    return v != 0;
}

#ifdef BRG_AMX_BUILD

#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define AMX_INLINE static inline __attribute__((always_inline)) AMX
#define PACK BRG_AVX512BF16
#define PACK_INLINE static inline __attribute__((always_inline)) PACK

enum {
    MR = BRG_GEMM_AMX_MR,
    NR = BRG_GEMM_AMX_NR,
    KSTEP = BRG_GEMM_AMX_KSTEP,
    KC = BRG_GEMM_AMX_KC,
    MC = BRG_GEMM_AMX_MC,
    NC = BRG_GEMM_AMX_NC,
    ROW_BYTES = 64, /* a tile row: 32 bf16 of A, 16 pairs of B, 16 fp32 of C */
};

_Static_assert(MR == 32 && NR == 32, "the tile call holds a 2 x 2 arrangement of 16 x 16 C tiles");
_Static_assert(KC % KSTEP == 0, "every depth block but the last is a whole number of tile steps");
_Static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole numbers of tile calls");

static int64_t steps_of(int64_t kc) { return (kc + KSTEP - 1) / KSTEP; }

/* ---- loading sources as bf16 ---- */

/* The mask of the first n (clamped to [0, 32]) 16-bit elements. */
static inline __mmask32 halves(int64_t n) {
    return n >= 32 ? (__mmask32)0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
}

/* The lanes of mask m of a source row from element i, as bf16: a bf16 source as it is, an fp32
 * one rounded to nearest even (bf16_round.h). Lanes outside m are zero. */
PACK_INLINE __m256i load16(bool f32, const void *src, int64_t i, __mmask16 m) {
    if (f32) return brg_bf16_round16(_mm512_maskz_loadu_ps(m, (const float *)src + i));
    return _mm256_maskz_loadu_epi16(m, (const uint16_t *)src + i);
}

/* 32 consecutive elements of a source row from element i as 16 pairs, zeros past the first n. */
PACK_INLINE __m512i load32(bool f32, const void *src, int64_t i, int64_t n) {
    if (!f32) return _mm512_maskz_loadu_epi16(halves(n), (const uint16_t *)src + i);
    const __m256i lo = load16(true, src, i, lanes(n)), hi = load16(true, src, i + 16, lanes(n - 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* 16 lanes of pairs from two source rows: lo[lane] in the low half, hi[lane] in the high. */
PACK_INLINE __m512i interleave(__m256i lo, __m256i hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

enum { PREFETCH_ROWS = 16 };

/* ---- B panels: [steps * 16][w] pairs, as gemm_bf16.c's, padded with zeros to whole steps ---- */

/* Rows contiguous along k (B transposed; a row is a lane): 16 rows of a step loaded as pairs,
 * then transposed so that each pair step holds the lanes side by side. */
PACK_INLINE void pack_b_rows(bool f32, void *restrict dst_, int64_t w, int width, const void *restrict src_,
                             int64_t ld, int rows, int64_t kc) {
    uint32_t *dst = dst_;
    const char *src = src_;
    const int64_t elem = f32 ? 4 : 2;
    const __mmask16 store = lanes(width);
    for (int64_t t = 0; t < steps_of(kc); t++) {
        __m512 r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_castsi512_ps(load32(f32, src + i * ld * elem, t * KSTEP, kc - t * KSTEP))
                            : _mm512_setzero_ps();
        transpose16(r);
        uint32_t *d = dst + t * (KSTEP / 2) * w;
        for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(d + q * w, store, r[q]);
    }
}

/* Lanes contiguous (B not transposed: element (k, lane) at src + k * ld + lane): rows k and
 * k + 1 interleaved into each pair step of the `cols` lanes from `lane0` of a w-lane panel. */
PACK_INLINE void pair_step(bool f32, uint32_t *restrict d, int64_t w, const char *restrict row, int64_t ld_bytes,
                           int64_t k, int64_t kc, int64_t lane0, int64_t cols) {
    for (int64_t v = 0; v < w; v += 16) {
        const __mmask16 m = lanes(cols - v);
        const __m256i lo = k < kc ? load16(f32, row, lane0 + v, m) : _mm256_setzero_si256();
        const __m256i hi = k + 1 < kc ? load16(f32, row + ld_bytes, lane0 + v, m) : _mm256_setzero_si256();
        _mm512_mask_storeu_epi32(d + v, lanes(w - v), interleave(lo, hi));
    }
}

PACK_INLINE void pack_b_cols(bool f32, void *restrict dst, int64_t w, const void *restrict src_, int64_t ld,
                             int64_t cols, int64_t kc) {
    const char *src = src_;
    const int64_t elem = f32 ? 4 : 2;
    for (int64_t s = 0; s < steps_of(kc) * (KSTEP / 2); s++)
        pair_step(f32, (uint32_t *)dst + s * w, w, src + 2 * s * ld * elem, ld * elem, 2 * s, kc, 0, cols);
}

/* A whole block of panels, source rows outer: each pair of rows is swept once across all of nc
 * (a row is a new page at every step; per panel the sweep would touch each page nc / NR times),
 * the rows PREFETCH_ROWS on asked for meanwhile. */
PACK_INLINE void pack_b_block(bool f32, void *restrict dst, int64_t w, const void *restrict src_, int64_t ld,
                              int64_t nc, int64_t kc) {
    const char *src = src_;
    const int64_t elem = f32 ? 4 : 2, pairs = steps_of(kc) * (KSTEP / 2);
    for (int64_t s = 0; s < pairs; s++) {
        const char *row = src + 2 * s * ld * elem;
        /* An address, not a pointer: past the last row it lies outside the matrix. */
        const uintptr_t ahead = (uintptr_t)row + (uintptr_t)(PREFETCH_ROWS * ld * elem);
        for (int64_t b = 0; b < nc * elem; b += 64) {
            _mm_prefetch((const char *)(ahead + (uintptr_t)b), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + (uintptr_t)(ld * elem + b)), _MM_HINT_T0);
        }
        for (int64_t jr = 0; jr < nc; jr += w) {
            uint32_t *panel = (uint32_t *)dst + jr * pairs;
            pair_step(f32, panel + s * w, w, row, ld * elem, 2 * s, kc, jr, nc - jr);
        }
    }
}

/* ---- A panels: per step, w rows of 32 bf16 ---- */

/* Rows contiguous along k (A not transposed): each step's row r is the row's next 32 values,
 * zeros past kc and for rows >= `rows`. */
PACK_INLINE void pack_a_rows(bool f32, void *restrict dst_, int64_t w, const void *restrict src_, int64_t ld, int rows,
                             int64_t kc) {
    char *dst = dst_;
    const char *src = src_;
    const int64_t elem = f32 ? 4 : 2;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        char *d = dst + t * w * ROW_BYTES;
        for (int64_t r = 0; r < w; r++) {
            const __m512i v =
                r < rows ? load32(f32, src + r * ld * elem, t * KSTEP, kc - t * KSTEP) : _mm512_setzero_si512();
            _mm512_store_si512(d + r * ROW_BYTES, v);
        }
    }
}

/* Rows' dimension contiguous (A transposed: element (k, row) at src + k * ld + row): for each
 * step and 16 rows, the 16 pairs of each row gathered across source rows k, then transposed so
 * that each row's pairs lie side by side. */
PACK_INLINE void pack_a_cols(bool f32, void *restrict dst_, int64_t w, const void *restrict src_, int64_t ld,
                             int64_t cols, int64_t kc) {
    char *dst = dst_;
    const char *src = src_;
    const int64_t elem = f32 ? 4 : 2;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        for (int64_t g = 0; g < w; g += 16) {
            const __mmask16 m = lanes(cols - g);
            __m512 r[16];
            for (int s = 0; s < 16; s++) {
                const int64_t k = t * KSTEP + 2 * s;
                const __m256i lo = k < kc ? load16(f32, src + k * ld * elem, g, m) : _mm256_setzero_si256();
                const __m256i hi = k + 1 < kc ? load16(f32, src + (k + 1) * ld * elem, g, m) : _mm256_setzero_si256();
                r[s] = _mm512_castsi512_ps(interleave(lo, hi));
            }
            transpose16(r); /* r[row] now holds that row's 16 pairs */
            char *d = dst + t * w * ROW_BYTES + g * ROW_BYTES;
            for (int q = 0; q < 16; q++) _mm512_store_ps(d + q * ROW_BYTES, r[q]);
        }
    }
}

/* The routines of gemm_blocked.h's signatures, per source type. */
#define PACKERS(suffix, f32)                                                                                       \
    PACK static void b_rows_##suffix(void *restrict dst, int64_t w, int width, const void *restrict src, int64_t ld, \
                                     int rows, int64_t kc, int64_t next) {                                          \
        (void)next;                                                                                                \
        pack_b_rows(f32, dst, w, width, src, ld, rows, kc);                                                        \
    }                                                                                                              \
    PACK static void b_cols_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,          \
                                     int64_t cols, int64_t kc) {                                                   \
        pack_b_cols(f32, dst, w, src, ld, cols, kc);                                                               \
    }                                                                                                              \
    PACK static void b_block_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,         \
                                      int64_t nc, int64_t kc) {                                                    \
        pack_b_block(f32, dst, w, src, ld, nc, kc);                                                                \
    }                                                                                                              \
    PACK static void a_rows_##suffix(void *restrict dst, int64_t w, int width, const void *restrict src, int64_t ld, \
                                     int rows, int64_t kc, int64_t next) {                                          \
        (void)width, (void)next;                                                                                   \
        pack_a_rows(f32, dst, w, src, ld, rows, kc);                                                               \
    }                                                                                                              \
    PACK static void a_cols_##suffix(void *restrict dst, int64_t w, const void *restrict src, int64_t ld,          \
                                     int64_t cols, int64_t kc) {                                                   \
        pack_a_cols(f32, dst, w, src, ld, cols, kc);                                                               \
    }
PACKERS(bf16, false)
PACKERS(f32, true)

/* ---- the tile calls ---- */

/* C[0:mr, 0:nr] = alpha * acc + beta * C from the tiles' fp32 sums in acc (rows of NR). */
PACK static void store_block(const float *acc, int rows, float *c, int64_t ldc, float alpha, float beta, int64_t mr,
                             int64_t nr) {
    for (int h = 0; h < rows; h += 16) {
        if (mr - h <= 0) break;
        __m512 v[16][2];
        for (int i = 0; i < 16; i++) {
            v[i][0] = _mm512_load_ps(acc + (h + i) * NR);
            v[i][1] = _mm512_load_ps(acc + (h + i) * NR + 16);
        }
        brg_avx512_tile_store(16, v, c + h * ldc, ldc, alpha, beta, mr - h, nr);
    }
}

/* ROWS (32 or 16) x 32: per step, A tiles 4 (rows 0-15) and 5 (16-31), B tiles 6 (columns
 * 0-15) and 7 (16-31), C tiles 0..3 in row-major order of the 2 x 2; 16 rows use the upper half
 * (a block's last rows when 16 or fewer). */
AMX_INLINE void tiles(const int ROWS, int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha,
                      float beta, int64_t mr, int64_t nr) {
    const char *pa = a, *pb = b;
    const bool two = ROWS == 32;
    _tile_zero(0);
    _tile_zero(1);
    if (two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    const int64_t a_step = MR * ROW_BYTES, b_step = (KSTEP / 2) * NR * 4;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        _tile_loadd(4, pa + t * a_step, ROW_BYTES);
        if (two) _tile_loadd(5, pa + t * a_step + 16 * ROW_BYTES, ROW_BYTES);
        _tile_loadd(6, pb + t * b_step, NR * 4);
        _tile_loadd(7, pb + t * b_step + ROW_BYTES, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (two) {
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    if (mr == ROWS && nr == NR && alpha == 1.0f && beta == 0.0f) {
        /* C = fl(1 * acc) = acc: the tiles go straight to C, the bits store_block would give. */
        const int64_t stride = ldc * (int64_t)sizeof(float);
        _tile_stored(0, c, stride);
        _tile_stored(1, c + 16, stride);
        if (two) {
            _tile_stored(2, c + 16 * ldc, stride);
            _tile_stored(3, c + 16 * ldc + 16, stride);
        }
        return;
    }
    float acc[MR * NR] __attribute__((aligned(64)));
    _tile_stored(0, acc, NR * 4);
    _tile_stored(1, acc + 16, NR * 4);
    if (two) {
        _tile_stored(2, acc + 16 * NR, NR * 4);
        _tile_stored(3, acc + 16 * NR + 16, NR * 4);
    }
    store_block(acc, ROWS, c, ldc, alpha, beta, mr, nr);
}

AMX static void tile_32(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tiles(32, kc, a, b, c, ldc, alpha, beta, mr, nr);
}

AMX static void tile_16(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    tiles(16, kc, a, b, c, ldc, alpha, beta, mr, nr);
}

/* LDTILECFG's 64-byte operand: palette 1, then per tile its bytes per row and rows. */
typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t row_bytes[16];
    uint8_t rows[16];
} tile_config;

/* Eight tiles of 16 rows of 64 bytes. A constant in memory: GCC 12 does not treat LDTILECFG as
 * reading its operand, and dropped the stores that filled a local copy. */
static const tile_config config = {
    .palette = 1,
    .row_bytes = {ROW_BYTES, ROW_BYTES, ROW_BYTES, ROW_BYTES, ROW_BYTES, ROW_BYTES, ROW_BYTES, ROW_BYTES},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

AMX static void tiles_configure(void) { _tile_loadconfig(&config); }

AMX static void tiles_release(void) { _tile_release(); }

static const brg_gemm_kernel amx_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 16, .k_pack = 2, .k_align = KSTEP,
    /* fp32 sources are rounded to bf16 while packed (brg_gemm_amxbf16_rounding) */
    .pack_rows = {[BRG_DTYPE_BF16] = b_rows_bf16, [BRG_DTYPE_F32] = b_rows_f32},
    .pack_cols = {[BRG_DTYPE_BF16] = b_cols_bf16, [BRG_DTYPE_F32] = b_cols_f32},
    .pack_cols_block = {[BRG_DTYPE_BF16] = b_block_bf16, [BRG_DTYPE_F32] = b_block_f32},
    .pack_rows_a = {[BRG_DTYPE_BF16] = a_rows_bf16, [BRG_DTYPE_F32] = a_rows_f32},
    .pack_cols_a = {[BRG_DTYPE_BF16] = a_cols_bf16, [BRG_DTYPE_F32] = a_cols_f32},
    .n_tiles = 2, .tile_rows = {MR, 16}, .tiles = {tile_32, tile_16},
    .enter = tiles_configure, .leave = tiles_release,
    .b_panel_outer = false,
};

const brg_gemm_kernel *brg_gemm_amx_kernel(void) { return &amx_kernel; }

bool brg_gemm_amxbf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                      int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return brg_gemm_blocked(&amx_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_BF16, A, lda, BRG_DTYPE_BF16, B,
                            ldb, beta, C, ldc);
}

bool brg_gemm_amxbf16_rounding(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
    return brg_gemm_blocked(&amx_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_F32, A, lda, BRG_DTYPE_F32, B,
                            ldb, beta, C, ldc);
}

#else

bool brg_gemm_amxbf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                      int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return false; /* never called: brg_isa_has_amx_bf16() is false on this build */
}

bool brg_gemm_amxbf16_rounding(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return false;
}

const brg_gemm_kernel *brg_gemm_amx_kernel(void) { return NULL; }

#endif
