/* What the row kernels (gemv.c, gemv_half.c) share: tiles and the dot product, with the same
 * lanes and order in both, so a product on widened half operands gives the bits of the fp32
 * kernel on the same values. Both files are built without floating-point contraction. */
#ifndef BRIGADE_KERNELS_GEMV_PARTS_H
#define BRIGADE_KERNELS_GEMV_PARTS_H

#include <stdbool.h>
#include <stdint.h>

/* The loops are also compiled for AVX-512 and AVX2 and picked at load time by the CPU (a batch of
 * 8 decode rows is compute-bound on SSE2). The file is built without floating-point contraction
 * and every lane computes the same chain of correctly rounded operations in every version, so
 * all three give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROW_LOOP
#endif

/* Lanes of the dot products: independent partial sums the compiler turns into vector registers
 * (a fixed order, so no -ffast-math reassociation is needed). */
#define LANES 16

/* Output columns of W [in, out] per pass down its depth: the m rows' partial outputs for them
 * stay in L1 while every weight row of the tile streams past once. Without the tile each weight
 * row would be applied to m whole output rows, which for a batch of 8 moves more bytes of y
 * through the cache than W holds. The tile is as wide as TILE_Y_FLOATS partial outputs allow
 * (at least TILE): for one row, 4096 columns, so a pass reads each weight row whole (GPT-2's are
 * 3-12 KiB) instead of 2 KiB of it before jumping to the next:
 * short strided runs that the hardware prefetcher follows badly (one decode row's GPT-2 layer
 * products took 28 ms a step instead of 38 in an alternating test). Each element still adds its
 * k terms in order, so the tile changes no bit. */
#define TILE 512
#define TILE_Y_FLOATS 4096

/* Output columns a device's team splits by: 64 floats (four cache lines), so the halves of a
 * 768-wide product are even (in units of TILE they were 512 and 256 columns, and one thread did
 * two thirds of the work). GPT-2 small's layer products on a 2-thread team, one Intel AVX-512
 * VM, alternating: one row 12.0 ms against 12.8, eight rows 18.4 against 19.0. */
#define TEAM_UNIT 64

static inline int64_t gemv_tile_width(int64_t m) {
    const int64_t fit = TILE_Y_FLOATS / (m > 0 ? m : 1) / 16 * 16;
    return fit > TILE ? fit : TILE;
}

/* Rows from which the AVX-512 register blocks run. With fewer the weight stream, not the
 * arithmetic, bounds the product: W [out, in] is then read as one stream of weight rows, each
 * dotted with every input row (out_in_columns, and its AVX-512 body, which asks for the lines a
 * few KiB ahead), and W [in, out] adds FEW_ROWS_GROUP weight rows per pass over the rows' partial
 * outputs (in_out_tile, and its AVX-512 body) instead of four. */
#define BLOCK_ROWS 4
#define FEW_ROWS_GROUP 16

/* bf16 bits -> fp32: exact. */
static inline float bf16_value(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)h << 16};
    return v.f;
}

/* Weight rows k .. k + G - 1 (fp32, or bf16 read in place when BF16) into each of the m rows'
 * tile y[r, 0:n]: every y element is loaded and stored once for the G terms, which are still
 * added one after the other, so any G gives the same bits. Inlined with G and BF16 constants,
 * so each clone of the caller vectorises it for that CPU. */
static inline __attribute__((always_inline)) void add_weight_rows(float *restrict y, int64_t ldy,
                                                                  const float *restrict x, int64_t in, int64_t k,
                                                                  const void *restrict w, int64_t ldw, int64_t m,
                                                                  int64_t n, const int G, const bool BF16) {
    const float *restrict wf = w;
    const uint16_t *restrict wh = w;
    for (int64_t r = 0; r < m; r++) {
        float *restrict yr = y + r * ldy;
        float a[FEW_ROWS_GROUP];
        for (int q = 0; q < G; q++) a[q] = x[r * in + k + q];
        for (int64_t j = 0; j < n; j++) {
            float s = yr[j];
#pragma GCC unroll 16
            for (int q = 0; q < G; q++) s += a[q] * (BF16 ? bf16_value(wh[q * ldw + j]) : wf[q * ldw + j]);
            yr[j] = s;
        }
    }
}

/* Inlined, so each clone of its caller vectorises it for that CPU. */
static inline __attribute__((always_inline)) float dot(const float *a, const float *b, int64_t n) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

#endif
