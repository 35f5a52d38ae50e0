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
 * Every function that executes AVX-512 carries a target attribute instead of the translation
 * unit being built with -mavx512*: the library must still run on CPUs without it, and
 * brg_gemm only calls in here after brg_gemm_avx512_supported(). */
#include "kernels/gemm_avx512.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>

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

bool brg_gemm_avx512_supported(void) {
    /* libgcc's feature bits already require the OS to save the opmask and zmm state (XCR0),
     * so a set bit means the instructions are usable, not merely present. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
}

/* ---- per-thread packing buffers ---------------------------------------------------------
 * Devices are long-lived threads that call GEMM thousands of times per step, so each thread
 * keeps its buffers and only grows them; a thread-exit destructor frees them. */

typedef struct pack_buffers {
    float *a, *b;
    size_t a_cap, b_cap; /* in floats */
} pack_buffers;

static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;
static bool buffers_key_ok;
static _Thread_local pack_buffers *thread_buffers;

static void buffers_free(void *p) {
    pack_buffers *pb = p;
    free(pb->a);
    free(pb->b);
    free(pb);
    thread_buffers = NULL; /* a GEMM in a later exit handler of this thread starts afresh */
}

static void buffers_key_create(void) { buffers_key_ok = pthread_key_create(&buffers_key, buffers_free) == 0; }

/* 64-byte aligned so the microkernel's B loads are aligned and each A panel starts on a line. */
static bool grow(float **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t bytes = (need * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (!p) return false;
    free(*buf);
    *buf = p;
    *cap = bytes / sizeof(float);
    return true;
}

static pack_buffers *buffers_get(size_t a_need, size_t b_need) {
    pack_buffers *pb = thread_buffers;
    if (!pb) {
        pthread_once(&buffers_once, buffers_key_create);
        if (!buffers_key_ok) return NULL;
        pb = calloc(1, sizeof *pb);
        if (!pb) return NULL;
        if (pthread_setspecific(buffers_key, pb) != 0) {
            free(pb);
            return NULL;
        }
        thread_buffers = pb;
    }
    if (!grow(&pb->a, &pb->a_cap, a_need) || !grow(&pb->b, &pb->b_cap, b_need)) return NULL;
    return pb;
}

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

/* op(A)[ic:ic+mc, pc:pc+kc] into MR-row micro-panels, each [kc][MR]. */
AVX512 static void pack_a(float *restrict dst, bool trans_a, const float *A, int64_t lda, int64_t ic, int64_t pc,
                          int64_t mc, int64_t kc) {
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t rows = mc - ir < MR ? mc - ir : MR;
        float *d = dst + ir * kc;
        if (trans_a) /* A is [K, M]: the MR rows of a panel are contiguous for each k */
            pack_cols(d, MR, A + pc * lda + (ic + ir), lda, rows, kc);
        else
            pack_rows(d, MR, MR, A + (ic + ir) * lda + pc, lda, (int)rows, kc, MR);
    }
}

/* op(B)[pc:pc+kc, jc:jc+nc] into NR-column micro-panels, each [kc][NR]. */
AVX512 static void pack_b(float *restrict dst, bool trans_b, const float *B, int64_t ldb, int64_t jc, int64_t pc,
                          int64_t nc, int64_t kc) {
    for (int64_t jr = 0; jr < nc; jr += NR) {
        const int64_t cols = nc - jr < NR ? nc - jr : NR;
        float *d = dst + jr * kc;
        if (!trans_b) { /* B is [K, N]: the NR columns of a panel are contiguous for each k */
            pack_cols(d, NR, B + pc * ldb + (jc + jr), ldb, cols, kc);
        } else { /* B is [N, K]: transpose 16 columns of op(B) (rows of B) at a time */
            for (int g = 0; g < NV; g++) {
                const int64_t c = cols - 16 * g;
                const float *s = B + (jc + jr + 16 * g) * ldb + pc;
                pack_rows(d + 16 * g, NR, 16, s, ldb, c <= 0 ? 0 : c >= 16 ? 16 : (int)c, kc, 16);
            }
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

/* ---- driver ----------------------------------------------------------------------------- */

typedef void tile_fn(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
                     int64_t mr, int64_t nr);

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* C = beta * C for the degenerate products (K == 0 or alpha == 0); beta == 0 clears NaN. */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    if (beta == 1.0f) return;
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : c[j] * beta;
    }
}

AVX512 static void gemm_blocked(pack_buffers *pb, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                                float *C, int64_t ldc) {
    for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = min64(MC, M - ic);
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = min64(KC, K - pc);
            /* beta applies once, with the first slice of K; later slices accumulate. */
            const float beta_k = pc == 0 ? beta : 1.0f;
            pack_a(pb->a, trans_a, A, lda, ic, pc, mc, kc);
            for (int64_t jc = 0; jc < N; jc += NC) {
                const int64_t nc = min64(NC, N - jc);
                pack_b(pb->b, trans_b, B, ldb, jc, pc, nc, kc);
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    const float *ap = pb->a + ir * kc;
                    const int64_t mr = min64(MR, mc - ir);
                    float *c = C + (ic + ir) * ldc + jc;
                    tile_fn *fn = mr > 8 ? tile_14 : mr > 4 ? tile_8 : tile_4;
                    for (int64_t jr = 0; jr < nc; jr += NR)
                        fn(kc, ap, pb->b + jr * kc, c + jr, ldc, alpha, beta_k, mr, min64(NR, nc - jr));
                }
            }
        }
    }
}

bool brg_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return true;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return true;
    }
    const int64_t kc = min64(KC, K);
    const size_t a_need = (size_t)(round_up(min64(MC, M), MR) * kc);
    const size_t b_need = (size_t)(round_up(min64(NC, N), NR) * kc);
    pack_buffers *pb = buffers_get(a_need, b_need);
    if (!pb) return false;
    gemm_blocked(pb, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return true;
}
