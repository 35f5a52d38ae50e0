/* The AMX-BF16 GEMM of gemm_amx.h: gemm_blocked.c's scheme with tiles of the AMX unit.
 *
 * TDPBF16PS adds to a 16 x 16 fp32 tile C the products of a 16-row A tile (each row 32 bf16
 * along k) and a B tile of 16 rows of k pairs (each row 16 columns, a column's pair k = 2s, 2s + 1
 * in one 32-bit word). A call of the kernel computes a 32 x 32 block of C in four C tiles, per
 * 32-k step loading two A tiles and two B tiles: the eight tile registers all in use.
 *
 * Panels: B's are gemm_bf16.c's pair panels ([kc / 2][NR] 32-bit pairs, so a B tile is 16 pair
 * rows read at a stride of NR words, its right half 16 words on). A's are laid out for the A
 * tiles: per 32-k step, MR rows of 64 bytes (32 bf16 along k), the step's two tiles one after the
 * other. Both are padded with zeros to a whole number of 32-k steps (gemm_blocked.h's k_align).
 *
 * The tile registers hold a configuration (rows and bytes per row of each) that LDTILECFG sets
 * per thread; brg_gemm_amxbf16 sets it before the blocked loops and releases the tiles after, so
 * the OS does not save 8 KiB of tile data for a thread that has finished its products. */
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

#include "kernels/gemm_avx512_parts.h"
#include "kernels/gemm_bf16.h"
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
#define PACK __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

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

/* ---- B panels: gemm_bf16.c's pairs, then zeros up to the step ---- */

/* Zeros pair steps [from, to) of lanes [0, width) of a [steps][w] panel of 32-bit words. */
static void zero_steps(uint32_t *dst, int64_t w, int64_t width, int64_t from, int64_t to) {
    for (int64_t s = from; s < to; s++) memset(dst + s * w, 0, (size_t)width * sizeof *dst);
}

PACK static void pack_b_rows(void *restrict dst, int64_t w, int width, const void *restrict src, int64_t ld, int rows,
                             int64_t kc, int64_t next) {
    brg_gemm_bf16_pack_rows(dst, w, width, src, ld, rows, kc, next);
    zero_steps(dst, w, width, (kc + 1) / 2, steps_of(kc) * (KSTEP / 2));
}

PACK static void pack_b_cols(void *restrict dst, int64_t w, const void *restrict src, int64_t ld, int64_t cols,
                             int64_t kc) {
    brg_gemm_bf16_pack_cols(dst, w, src, ld, cols, kc);
    zero_steps(dst, w, w, (kc + 1) / 2, steps_of(kc) * (KSTEP / 2));
}

/* ---- A panels: per step, w rows of 32 bf16 ---- */

/* The mask of the first n (clamped to [0, 32]) 16-bit elements. */
static inline __mmask32 halves(int64_t n) {
    return n >= 32 ? (__mmask32)0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
}

/* Rows contiguous along k (A not transposed): each step's row r is the row's next 32 values,
 * zeros past kc and for rows >= `rows`. */
PACK static void pack_a_rows(void *restrict dst_, int64_t w, int width, const void *restrict src_, int64_t ld,
                             int rows, int64_t kc, int64_t next) {
    (void)width, (void)next;
    char *dst = dst_;
    const uint16_t *src = src_;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        const __mmask32 load = halves(kc - t * KSTEP);
        char *d = dst + t * w * ROW_BYTES;
        for (int64_t r = 0; r < w; r++) {
            const __m512i v =
                r < rows ? _mm512_maskz_loadu_epi16(load, src + r * ld + t * KSTEP) : _mm512_setzero_si512();
            _mm512_store_si512(d + r * ROW_BYTES, v);
        }
    }
}

/* 16 lanes of pairs from two source rows: lo[lane] in the low half, hi[lane] in the high. */
PACK static inline __m512i interleave(__m256i lo, __m256i hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

/* Rows' dimension contiguous (A transposed: element (k, row) at src + k * ld + row): for each
 * step and 16 rows, the 16 pairs of each row gathered across source rows k, then transposed so
 * that each row's pairs lie side by side. */
PACK static void pack_a_cols(void *restrict dst_, int64_t w, const void *restrict src_, int64_t ld, int64_t cols,
                             int64_t kc) {
    char *dst = dst_;
    const uint16_t *src = src_;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        for (int64_t g = 0; g < w; g += 16) {
            const __mmask16 m = lanes(cols - g);
            __m512 r[16];
            for (int s = 0; s < 16; s++) {
                const int64_t k = t * KSTEP + 2 * s;
                const __m256i lo = k < kc ? _mm256_maskz_loadu_epi16(m, src + k * ld + g) : _mm256_setzero_si256();
                const __m256i hi =
                    k + 1 < kc ? _mm256_maskz_loadu_epi16(m, src + (k + 1) * ld + g) : _mm256_setzero_si256();
                r[s] = _mm512_castsi512_ps(interleave(lo, hi));
            }
            transpose16(r); /* r[row] now holds that row's 16 pairs */
            char *d = dst + t * w * ROW_BYTES + g * ROW_BYTES;
            for (int q = 0; q < 16; q++) _mm512_store_ps(d + q * ROW_BYTES, r[q]);
        }
    }
}

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

/* 32 x 32: per step, A tiles 4 (rows 0-15) and 5 (16-31), B tiles 6 (columns 0-15) and 7
 * (16-31), C tiles 0..3 in row-major order of the 2 x 2. */
AMX static void tile_32(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    const char *pa = a, *pb = b;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int64_t a_step = MR * ROW_BYTES, b_step = (KSTEP / 2) * NR * 4;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        _tile_loadd(4, pa + t * a_step, ROW_BYTES);
        _tile_loadd(5, pa + t * a_step + 16 * ROW_BYTES, ROW_BYTES);
        _tile_loadd(6, pb + t * b_step, NR * 4);
        _tile_loadd(7, pb + t * b_step + ROW_BYTES, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float acc[MR * NR] __attribute__((aligned(64)));
    _tile_stored(0, acc, NR * 4);
    _tile_stored(1, acc + 16, NR * 4);
    _tile_stored(2, acc + 16 * NR, NR * 4);
    _tile_stored(3, acc + 16 * NR + 16, NR * 4);
    store_block(acc, MR, c, ldc, alpha, beta, mr, nr);
}

/* 16 x 32, for a block's last rows when 16 or fewer: the upper half of tile_32. */
AMX static void tile_16(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                        int64_t mr, int64_t nr) {
    const char *pa = a, *pb = b;
    _tile_zero(0);
    _tile_zero(1);
    const int64_t a_step = MR * ROW_BYTES, b_step = (KSTEP / 2) * NR * 4;
    for (int64_t t = 0; t < steps_of(kc); t++) {
        _tile_loadd(4, pa + t * a_step, ROW_BYTES);
        _tile_loadd(6, pb + t * b_step, NR * 4);
        _tile_loadd(7, pb + t * b_step + ROW_BYTES, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
    }
    float acc[16 * NR] __attribute__((aligned(64)));
    _tile_stored(0, acc, NR * 4);
    _tile_stored(1, acc + 16, NR * 4);
    store_block(acc, 16, c, ldc, alpha, beta, mr, nr);
}

static const brg_gemm_kernel amx_kernel = {
    .MR = MR, .NR = NR, .KC = KC, .MC = MC, .NC = NC, .group = 16, .k_pack = 2, .k_align = KSTEP,
    .pack_rows = {[BRG_DTYPE_BF16] = pack_b_rows},
    .pack_cols = {[BRG_DTYPE_BF16] = pack_b_cols},
    .pack_rows_a = {[BRG_DTYPE_BF16] = pack_a_rows},
    .pack_cols_a = {[BRG_DTYPE_BF16] = pack_a_cols},
    .n_tiles = 2, .tile_rows = {MR, 16}, .tiles = {tile_32, tile_16},
    .b_panel_outer = false,
};

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

bool brg_gemm_amxbf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                      int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    tiles_configure();
    const bool ok = brg_gemm_blocked(&amx_kernel, trans_a, trans_b, M, N, K, alpha, BRG_DTYPE_BF16, A, lda,
                                     BRG_DTYPE_BF16, B, ldb, beta, C, ldc);
    tiles_release();
    return ok;
}

#else

bool brg_gemm_amxbf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                      int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return false; /* never called: brg_isa_has_amx_bf16() is false on this build */
}

#endif
