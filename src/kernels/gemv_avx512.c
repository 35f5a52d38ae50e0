#include "kernels/gemv_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "brigade/status.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemv_parts.h"
#include "kernels/simd.h"

/* Rows of one register block: 8 rows x 3 vectors of partial sums use 24 of the 32 registers. */
enum { ROWS = 8, IO_VECS = 3, OI_COLS = 3 };

/* Weight rows per pass over the columns (W [in, out]): the pass reads these rows side by side,
 * each from c0 to c1 in order, so the memory streams are long and contiguous; the partial sums go
 * back to y between passes (they are exact floats, so nothing changes). As it reads a row, the
 * pass asks for the next pass's row at the same columns into L2: 16 streams are more than the
 * hardware prefetcher follows on its own, and a prefetch a whole pass ahead hides the latency that
 * a short one (1.5 KiB, non-temporal) left exposed. GPT-2 small's layer products for 8 rows on one
 * Intel AVX-512 core: 28.6 ms against 83.7 (11.9 against 4.1 GB/s). */
enum { K_PASS = 16 };

static inline __mmask16 first_lanes(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* The weights: fp32, or bf16 / fp16 widened as loaded (exact: a shift, VCVTPH2PS), so all run
 * the same chains of operations (gemv_half.c). One of the pointers is set; HALF (0: fp32, 1:
 * bf16, 2: fp16) is a constant each caller unrolls for. */
typedef struct weights {
    const float *f32;
    const uint16_t *half;
    int type; /* HALF */
} weights;

enum { W_F32 = 0, W_BF16 = 1, W_F16 = 2 };

BRG_AVX512_INLINE __m512 load_w(weights w, int64_t i, __mmask16 mk, const int HALF) {
    if (HALF == W_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, w.half + i)), 16));
    if (HALF == W_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, w.half + i));
    return _mm512_maskz_loadu_ps(mk, w.f32 + i);
}

/* Into L2 (T1): the next weights a block reads, well before it reads them. */
BRG_AVX512_INLINE void prefetch_w(weights w, int64_t i, const int HALF) {
    if (HALF) _mm_prefetch((const char *)(w.half + i), _MM_HINT_T1);
    else _mm_prefetch((const char *)(w.f32 + i), _MM_HINT_T1);
}

static inline weights offset_w(weights w, int64_t i) {
    return (weights){w.f32 ? w.f32 + i : NULL, w.half ? w.half + i : NULL, w.type};
}

/* R rows x NV vectors of columns, weight rows [k0, k1) of [0, k_end); the last vector holds the
 * lanes of `last`. The sums start from y (k0 > 0), else from b or +0, and each adds x * w one k
 * at a time, as gemv.c's loop does. */
BRG_AVX512_INLINE void io_block(float *y, int64_t ldy, const float *x, int64_t ldx, weights w, int64_t ldw,
                                const float *b, int64_t k0, int64_t k1, int64_t k_end, const int R, const int NV,
                                __mmask16 last, const int HALF) {
    __m512 acc[ROWS][IO_VECS];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            const __mmask16 mk = v == NV - 1 ? last : (__mmask16)0xFFFF;
            acc[r][v] = k0 > 0 ? _mm512_maskz_loadu_ps(mk, y + r * ldy + 16 * v)
                        : b    ? _mm512_maskz_loadu_ps(mk, b + 16 * v)
                               : _mm512_setzero_ps();
        }
    for (int64_t k = k0; k < k1; k++) {
        __m512 wv[IO_VECS];
        if (k + K_PASS < k_end)
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) prefetch_w(w, (k + K_PASS) * ldw + 16 * v, HALF);
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) wv[v] = load_w(w, k * ldw + 16 * v, v == NV - 1 ? last : (__mmask16)0xFFFF, HALF);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_mul_ps(a, wv[v]));
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(y + r * ldy + 16 * v, v == NV - 1 ? last : (__mmask16)0xFFFF, acc[r][v]);
}

#define IO_ROWS(R)                                                                              \
    case R:                                                                                     \
        if (nv == 3) io_block(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, 3, last, HALF);      \
        else if (nv == 2) io_block(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, 2, last, HALF); \
        else io_block(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, 1, last, HALF);              \
        break;

/* One block of R <= 8 rows and nv <= 3 vectors, the constants the loops unroll by. */
BRG_AVX512_INLINE void io_block_rows(float *y, int64_t ldy, const float *x, int64_t ldx, weights w, int64_t ldw,
                                     const float *b, int64_t k0, int64_t k1, int64_t k_end, int R, int nv,
                                     __mmask16 last, const int HALF) {
    switch (R) {
        IO_ROWS(1)
        IO_ROWS(2)
        IO_ROWS(3)
        IO_ROWS(4)
        IO_ROWS(5)
        IO_ROWS(6)
        IO_ROWS(7)
        IO_ROWS(8)
    default: break;
    }
}

BRG_AVX512 static void io_block_any(float *y, int64_t ldy, const float *x, int64_t ldx, weights w, int64_t ldw,
                                    const float *b, int64_t k0, int64_t k1, int64_t k_end, int R, int nv,
                                    __mmask16 last) {
    if (w.type == W_BF16) io_block_rows(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, nv, last, W_BF16);
    else if (w.type == W_F16) io_block_rows(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, nv, last, W_F16);
    else io_block_rows(y, ldy, x, ldx, w, ldw, b, k0, k1, k_end, R, nv, last, W_F32);
}

static void in_out(float *y, const float *x, weights w, const float *b, int64_t m, int64_t in, int64_t out, int64_t c0,
                   int64_t c1) {
    const int64_t width = 16 * IO_VECS;
    /* in == 0: one pass over no weight rows writes the bias (or zeros) */
    for (int64_t k0 = 0; k0 < in || (k0 == 0 && in == 0); k0 += K_PASS) {
        const int64_t k1 = k0 + K_PASS < in ? k0 + K_PASS : in;
        for (int64_t c = c0; c < c1; c += width) {
            const int64_t n = c1 - c < width ? c1 - c : width;
            const int nv = (int)((n + 15) / 16);
            const __mmask16 last = first_lanes(n - 16 * (nv - 1));
            for (int64_t r0 = 0; r0 < m; r0 += ROWS)
                io_block_any(y + r0 * out + c, out, x + r0 * in, in, offset_w(w, c), out, b ? b + c : NULL, k0, k1, in,
                             (int)(m - r0 < ROWS ? m - r0 : ROWS), nv, last);
        }
    }
}

void brg_gemv_in_out_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1) {
    in_out(y, x, (weights){w, NULL, W_F32}, b, m, in, out, c0, c1);
}

void brg_gemv_in_out_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1) {
    in_out(y, x, (weights){NULL, w, bf16 ? W_BF16 : W_F16}, b, m, in, out, c0, c1);
}

/* Fewer than BLOCK_ROWS rows, W [in, out]: the weight stream bounds the product, not the
 * arithmetic. Each pass adds FEW_ROWS_GROUP weight rows, read side by side across the tile, into
 * the rows' partial outputs (loaded and stored once per pass), and asks for the next pass's rows
 * (into L2) at the same columns as it goes. The order and the bits are those of the portable loop
 * (gemv.c's in_out_tile); the reads are faster: GPT-2 small's layer products for one row at 24.4
 * GB/s against 21.8 on one Zen 4 core (medians of 31 alternating passes). */
BRG_AVX512_INLINE void few_rows_body(float *y, int64_t ldy, const float *x, int64_t in, weights w, int64_t ldw,
                                     const float *b, int64_t m, int64_t n, const int HALF) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j += 16) {
            const __mmask16 mk = first_lanes(n - j);
            _mm512_mask_storeu_ps(y + r * ldy + j, mk, b ? _mm512_maskz_loadu_ps(mk, b + j) : _mm512_setzero_ps());
        }
    int64_t k = 0;
    for (; k + FEW_ROWS_GROUP <= in; k += FEW_ROWS_GROUP) {
        const bool ahead = k + 2 * FEW_ROWS_GROUP <= in;
        for (int64_t r = 0; r < m; r++) {
            __m512 a[FEW_ROWS_GROUP];
#pragma GCC unroll 16
            for (int q = 0; q < FEW_ROWS_GROUP; q++) a[q] = _mm512_set1_ps(x[r * in + k + q]);
            for (int64_t j = 0; j < n; j += 16) {
                const __mmask16 mk = first_lanes(n - j);
                __m512 acc = _mm512_maskz_loadu_ps(mk, y + r * ldy + j);
#pragma GCC unroll 16
                for (int q = 0; q < FEW_ROWS_GROUP; q++)
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(a[q], load_w(w, (k + q) * ldw + j, mk, HALF)));
                if (ahead && r == 0)
#pragma GCC unroll 16
                    for (int q = 0; q < FEW_ROWS_GROUP; q++) prefetch_w(w, (k + FEW_ROWS_GROUP + q) * ldw + j, HALF);
                _mm512_mask_storeu_ps(y + r * ldy + j, mk, acc);
            }
        }
    }
    for (; k < in; k++)
        for (int64_t r = 0; r < m; r++) {
            const __m512 a = _mm512_set1_ps(x[r * in + k]);
            for (int64_t j = 0; j < n; j += 16) {
                const __mmask16 mk = first_lanes(n - j);
                const __m512 acc = _mm512_maskz_loadu_ps(mk, y + r * ldy + j);
                _mm512_mask_storeu_ps(y + r * ldy + j, mk,
                                      _mm512_add_ps(acc, _mm512_mul_ps(a, load_w(w, k * ldw + j, mk, HALF))));
            }
        }
}

BRG_AVX512 static void few_rows_tile(float *y, int64_t ldy, const float *x, int64_t in, weights w, int64_t ldw,
                                     const float *b, int64_t m, int64_t n) {
    if (w.type == W_BF16) few_rows_body(y, ldy, x, in, w, ldw, b, m, n, W_BF16);
    else if (w.type == W_F16) few_rows_body(y, ldy, x, in, w, ldw, b, m, n, W_F16);
    else few_rows_body(y, ldy, x, in, w, ldw, b, m, n, W_F32);
}

static void in_out_few(float *y, const float *x, weights w, const float *b, int64_t m, int64_t in, int64_t out,
                       int64_t c0, int64_t c1) {
    const int64_t tile = gemv_tile_width(m);
    for (int64_t t0 = c0; t0 < c1; t0 += tile)
        few_rows_tile(y + t0, out, x, in, offset_w(w, t0), out, b ? b + t0 : NULL, m, c1 - t0 < tile ? c1 - t0 : tile);
}

void brg_gemv_in_out_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1) {
    in_out_few(y, x, (weights){w, NULL, W_F32}, b, m, in, out, c0, c1);
}

void brg_gemv_in_out_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1) {
    in_out_few(y, x, (weights){NULL, w, bf16 ? W_BF16 : W_F16}, b, m, in, out, c0, c1);
}

/* R rows x NC columns of W [out, in] (rows of in floats from w): 16 partial sums per element,
 * term i into sum i mod 16 (the tail into the first lanes, masked so the others stay as they
 * are), then the sums added in lane order and the bias, as gemv.c's dot. The next block's
 * weight rows are asked into L2 as these are read (the LM head for 8 rows on one Intel AVX-512
 * core: 14.8 ms against 33.1 with non-temporal prefetches). */
BRG_AVX512_INLINE void oi_block(float *y, int64_t ldy, const float *x, int64_t in, weights w, const float *b,
                                const int R, const int NC, const int HALF) {
    __m512 acc[ROWS][OI_COLS];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= in; i += 16) {
        __m512 wv[OI_COLS];
#pragma GCC unroll 3
        for (int j = 0; j < NC; j++) wv[j] = load_w(w, j * in + i, (__mmask16)0xFFFF, HALF);
#pragma GCC unroll 3
        for (int j = 0; j < NC; j++) prefetch_w(w, (j + NC) * in + i, HALF);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 xv = _mm512_loadu_ps(x + r * in + i);
#pragma GCC unroll 3
            for (int j = 0; j < NC; j++) acc[r][j] = _mm512_add_ps(acc[r][j], _mm512_mul_ps(xv, wv[j]));
        }
    }
    if (i < in) {
        const __mmask16 mk = first_lanes(in - i);
        __m512 wv[OI_COLS];
#pragma GCC unroll 3
        for (int j = 0; j < NC; j++) wv[j] = load_w(w, j * in + i, mk, HALF);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 xv = _mm512_maskz_loadu_ps(mk, x + r * in + i);
#pragma GCC unroll 3
            for (int j = 0; j < NC; j++)
                acc[r][j] = _mm512_mask_add_ps(acc[r][j], mk, acc[r][j], _mm512_mul_ps(xv, wv[j]));
        }
    }
    float lane[ROWS][OI_COLS][16];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int j = 0; j < NC; j++) _mm512_storeu_ps(lane[r][j], acc[r][j]);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NC; j++) {
            float s = 0.0f;
            for (int l = 0; l < 16; l++) s += lane[r][j][l];
            y[r * ldy + j] = s + (b ? b[j] : 0.0f);
        }
}

#define OI_ROWS(R)                                                     \
    case R:                                                            \
        if (nc == 3) oi_block(y, ldy, x, in, w, b, R, 3, HALF);        \
        else if (nc == 2) oi_block(y, ldy, x, in, w, b, R, 2, HALF);   \
        else oi_block(y, ldy, x, in, w, b, R, 1, HALF);                \
        break;

BRG_AVX512_INLINE void oi_block_rows(float *y, int64_t ldy, const float *x, int64_t in, weights w, const float *b,
                                     int R, int nc, const int HALF) {
    switch (R) {
        OI_ROWS(1)
        OI_ROWS(2)
        OI_ROWS(3)
        OI_ROWS(4)
        OI_ROWS(5)
        OI_ROWS(6)
        OI_ROWS(7)
        OI_ROWS(8)
    default: break;
    }
}

BRG_AVX512 static void oi_block_any(float *y, int64_t ldy, const float *x, int64_t in, weights w, const float *b,
                                    int R, int nc) {
    if (w.type == W_BF16) oi_block_rows(y, ldy, x, in, w, b, R, nc, W_BF16);
    else if (w.type == W_F16) oi_block_rows(y, ldy, x, in, w, b, R, nc, W_F16);
    else oi_block_rows(y, ldy, x, in, w, b, R, nc, W_F32);
}

static void out_in(float *y, const float *x, weights w, const float *b, int64_t m, int64_t in, int64_t out, int64_t c0,
                   int64_t c1) {
    for (int64_t c = c0; c < c1; c += OI_COLS) {
        const int nc = (int)(c1 - c < OI_COLS ? c1 - c : OI_COLS);
        for (int64_t r0 = 0; r0 < m; r0 += ROWS)
            oi_block_any(y + r0 * out + c, out, x + r0 * in, in, offset_w(w, c * in), b ? b + c : NULL,
                         (int)(m - r0 < ROWS ? m - r0 : ROWS), nc);
    }
}

/* Fewer than BLOCK_ROWS rows against W [out, in]: each weight row is read once, in order, and
 * dotted with the m rows, so a thread's columns are one contiguous stream. The hardware
 * prefetcher alone keeps such a stream below the bandwidth on Intel (and the register blocks'
 * prefetch of the next three weight rows reads slower still); asking for the line a few KiB on
 * into L2 as each is read does not. The lanes and order are gemv.c's dot (the same bits).
 * How far ahead depends on the CPU (oi_ahead_bytes). */
enum { OI_AHEAD_INTEL = 4096, OI_AHEAD_AMD = 2048 };

/* GPT-2 small's LM head for one row, weights from memory. On an Intel AVX-512 VM, 4 KiB ahead
 * against the portable dot products: fp32 16.5-16.7 GB/s against 15.2-15.3 on one core,
 * 33.1-33.2 against 30.6-30.8 on two; bf16 33.0-33.4 against 28.4-30.0 on two (4-16 KiB ahead
 * read alike). On a Zen 4 core that distance reads slower than no hint at all: fp32 on one core,
 * 20.4-21.1 GB/s at 4 KiB against 23.7-24.5 at 1-2 KiB and 23.6 with no hint. */
static uintptr_t oi_ahead_bytes(void) { return brg_cpu_is_amd() ? OI_AHEAD_AMD : OI_AHEAD_INTEL; }

BRG_AVX512_INLINE void few_oi_column(float *y, int64_t ldy, const float *x, int64_t in, weights w, float bias,
                                     uintptr_t ahead, const int R, const int HALF) {
    const uintptr_t row = HALF ? (uintptr_t)w.half : (uintptr_t)w.f32, elem = HALF ? 2 : 4;
    __m512 acc[BLOCK_ROWS - 1];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    /* a cache line of weights a step: one vector of fp32, two of half (added one after the other) */
    const int64_t line = HALF ? 32 : 16;
    int64_t i = 0;
    for (; i + line <= in; i += line) {
        /* an address, not a pointer: past the matrix near its end, which a prefetch tolerates */
        _mm_prefetch((const char *)(row + elem * (uintptr_t)i + ahead), _MM_HINT_T1);
#pragma GCC unroll 2
        for (int64_t v = 0; v < line; v += 16) {
            const __m512 wv = load_w(w, i + v, (__mmask16)0xFFFF, HALF);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++)
                acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_loadu_ps(x + r * in + i + v), wv));
        }
    }
    for (; i + 16 <= in; i += 16) {
        const __m512 wv = load_w(w, i, (__mmask16)0xFFFF, HALF);
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_loadu_ps(x + r * in + i), wv));
    }
    if (i < in) {
        const __mmask16 mk = first_lanes(in - i);
        const __m512 wv = load_w(w, i, mk, HALF);
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_mask_add_ps(acc[r], mk, acc[r],
                                        _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + r * in + i), wv));
    }
    for (int r = 0; r < R; r++) {
        float lane[16];
        _mm512_storeu_ps(lane, acc[r]);
        float s = 0.0f;
        for (int l = 0; l < 16; l++) s += lane[l];
        y[r * ldy] = s + bias;
    }
}

BRG_AVX512_INLINE void few_oi_columns(float *y, int64_t ldy, const float *x, int64_t in, weights w, const float *b,
                                      int64_t c0, int64_t c1, const int R, const int HALF) {
    const uintptr_t ahead = oi_ahead_bytes();
    for (int64_t c = c0; c < c1; c++)
        few_oi_column(y + c, ldy, x, in, offset_w(w, c * in), b ? b[c] : 0.0f, ahead, R, HALF);
}

BRG_AVX512_INLINE void few_oi_rows(float *y, int64_t ldy, const float *x, int64_t in, weights w, const float *b,
                                   int64_t m, int64_t c0, int64_t c1, const int HALF) {
    if (m == 1) few_oi_columns(y, ldy, x, in, w, b, c0, c1, 1, HALF);
    else if (m == 2) few_oi_columns(y, ldy, x, in, w, b, c0, c1, 2, HALF);
    else few_oi_columns(y, ldy, x, in, w, b, c0, c1, 3, HALF);
}

BRG_AVX512 static void out_in_few(float *y, const float *x, weights w, const float *b, int64_t m, int64_t in,
                                  int64_t out, int64_t c0, int64_t c1) {
    BRG_ASSERT(m < BLOCK_ROWS);
    if (m < 1) return;
    if (w.type == W_BF16) few_oi_rows(y, out, x, in, w, b, m, c0, c1, W_BF16);
    else if (w.type == W_F16) few_oi_rows(y, out, x, in, w, b, m, c0, c1, W_F16);
    else few_oi_rows(y, out, x, in, w, b, m, c0, c1, W_F32);
}

void brg_gemv_out_in_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1) {
    out_in_few(y, x, (weights){w, NULL, W_F32}, b, m, in, out, c0, c1);
}

void brg_gemv_out_in_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1) {
    out_in_few(y, x, (weights){NULL, w, bf16 ? W_BF16 : W_F16}, b, m, in, out, c0, c1);
}

void brg_gemv_out_in_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1) {
    out_in(y, x, (weights){w, NULL, W_F32}, b, m, in, out, c0, c1);
}

void brg_gemv_out_in_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1) {
    out_in(y, x, (weights){NULL, w, bf16 ? W_BF16 : W_F16}, b, m, in, out, c0, c1);
}

#else
#include "brigade/status.h"
void brg_gemv_in_out_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_in_out_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_in_out_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)bf16, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_out_in_avx512_few(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                                int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_out_in_avx512_few_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b,
                                     int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)bf16, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_out_in_avx512(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_in_out_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)bf16, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
void brg_gemv_out_in_avx512_half(float *y, const float *x, const uint16_t *w, bool bf16, const float *b, int64_t m,
                                 int64_t in, int64_t out, int64_t c0, int64_t c1) {
    (void)y, (void)x, (void)w, (void)bf16, (void)b, (void)m, (void)in, (void)out, (void)c0, (void)c1;
    BRG_ASSERT(0 && "no AVX-512 on this target");
}
#endif
