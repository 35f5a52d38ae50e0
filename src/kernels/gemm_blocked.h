/* The packed, cache-blocked GEMM scheme (Goto / BLIS) that our ISA kernels (gemm_avx512.c,
 * gemm_avx2.c) plug into: each supplies its tile sizes, its two packing routines and its
 * microkernel tiles; the loops, the packing of whole blocks and each thread's buffers live here
 * (internal to the library).
 *
 *   for ic in M by MC:
 *     for pc in K by KC:
 *       pack A block [MC, KC]
 *       for jc in N by NC:
 *         pack B block [KC, NC]
 *         tiles: every MR x NR tile of C over the packed depth kc
 *
 * Packed A micro-panels are k-major with MR floats per k (broadcast one at a time), B
 * micro-panels k-major with NR floats per k (whole vector loads); a kernel with k_pack == 2
 * (gemm_bf16.c) stores pairs of bf16 k values in each 4-byte lane instead. Operands may be
 * fp32, fp16 or bf16 in memory: each kernel's packing routines read the types it supports
 * (widening half types exactly). Edges are zero-padded, so the
 * tiles always compute full tiles and mask only their stores. Each element of C is accumulated
 * over k in the same order whatever M and N are (the K blocks depend on K alone, and every tile
 * variant runs the same FMA chain per lane), so a product split by rows or columns gives the
 * same bits as the whole product. */
#ifndef BRIGADE_KERNELS_GEMM_BLOCKED_H
#define BRIGADE_KERNELS_GEMM_BLOCKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/tensor.h"

/* Source element types a kernel can pack from: the index of its packing routines. */
enum { BRG_GEMM_SRC_TYPES = 3 }; /* BRG_DTYPE_F32, BRG_DTYPE_F16, BRG_DTYPE_BF16 */

/* Packs `rows` (<= group) source rows that are contiguous along k (row r at src + r * ld
 * elements) into lanes of dst, lane = row, for k < kc; lanes rows..width-1 become zeros. The
 * transposing case: A not transposed, or B transposed. `next`: rows on to the next group (for
 * prefetching). A packed lane is 4 bytes per packed step: one fp32 value per k (dst[k * w +
 * lane]) or, for kernels with k_pack == 2, a pair of bf16 values k = 2s, 2s + 1 (low half first)
 * per step s, an odd kc padded with a zero. */
typedef void brg_pack_rows_fn(void *restrict dst, int64_t w, int width, const void *restrict src, int64_t ld,
                              int rows, int64_t kc, int64_t next);
/* Packs a source whose panel dimension is contiguous (element (k, lane) at src + k * ld + lane,
 * `cols` valid lanes) into the lanes < w of dst, zeros past cols. The copying case: A
 * transposed, or B not transposed. */
typedef void brg_pack_cols_fn(void *restrict dst, int64_t w, const void *restrict src, int64_t ld, int64_t cols,
                              int64_t kc);
/* C[0:mr, 0:nr] = alpha * (A_panel @ B_panel) + beta * C over one packed depth kc, for
 * mr <= the tile's rows and nr <= NR; beta == 0 never reads C. */
typedef void brg_tile_fn(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, float alpha, float beta,
                         int64_t mr, int64_t nr);

typedef struct brg_gemm_kernel {
    int64_t MR, NR, KC, MC, NC;
    int group;  /* rows pack_rows transposes at once (the vector width) */
    int k_pack; /* k values per 4-byte packed lane: 1 (fp32 panels) or 2 (bf16 pairs) */
    /* Depth a packed panel is padded to, in k values (0: k_pack); the packing routines write
     * zeros in the padding. Tiles that load whole k-steps (gemm_amx.c, 32 k) need it. */
    int k_align;
    /* Indexed by the operand's brg_dtype (F32, F16, BF16); NULL where the kernel cannot read
     * that type. Half sources are widened (or paired) while packing, so the tiles never see
     * the source type. */
    brg_pack_rows_fn *pack_rows[BRG_GEMM_SRC_TYPES];
    brg_pack_cols_fn *pack_cols[BRG_GEMM_SRC_TYPES];
    /* Optional, B not transposed: all micro-panels of a block at once, source rows outer, so
     * each row's nc elements are read in one sweep instead of NR at a time per panel (which
     * touches every row's page once per panel). dst holds ceil(nc / NR) panels of NR lanes one
     * after the other, laid out as pack_cols lays out one. */
    void (*pack_cols_block[BRG_GEMM_SRC_TYPES])(void *restrict dst, int64_t NR, const void *restrict src, int64_t ld,
                                                 int64_t nc, int64_t kc);
    /* A's own routines where its panels are laid out unlike B's (gemm_amx.c: rows of k-steps);
     * NULL: A packs as B does. */
    brg_pack_rows_fn *pack_rows_a[BRG_GEMM_SRC_TYPES];
    brg_pack_cols_fn *pack_cols_a[BRG_GEMM_SRC_TYPES];
    /* Optional, A transposed: the same sweep over a block of A's MR-lane panels, laid out as
     * A's per-panel routine lays them out (pack_cols_a, else pack_cols). Training's weight
     * gradient x^T @ dy packs A this way: per panel, its MR lanes of every row were a 56-byte
     * read per 3 KiB row. */
    void (*pack_cols_a_block[BRG_GEMM_SRC_TYPES])(void *restrict dst, int64_t MR, const void *restrict src,
                                                   int64_t ld, int64_t mc, int64_t kc);
    /* Tiles of decreasing height: tiles[0] has MR rows; the last panel of a block runs the
     * lowest one that covers its rows, instead of spending most FMAs on padding. */
    int n_tiles;
    int tile_rows[3];
    brg_tile_fn *tiles[3];
    /* Optional: run on the calling thread before and after a product's block loops (the AMX
     * kernel loads its tile configuration and releases the tiles); NULL: nothing. */
    void (*enter)(void);
    void (*leave)(void);
    /* Loop order inside a block pair: B micro-panel outer (it stays in L1 while A micro-panels
     * stream from L2) or A micro-panel outer (the other way round). */
    bool b_panel_outer;
} brg_gemm_kernel;

/* True when kernel `k` can pack operands of these types. */
bool brg_gemm_blocked_reads(const brg_gemm_kernel *k, brg_dtype a_type, brg_dtype b_type);

/* brg_gemm's contract computed with kernel `k` on the calling thread, A and B holding elements
 * of a_type and b_type (which brg_gemm_blocked_reads must accept; lda, ldb in elements); false,
 * having touched nothing, only when the thread's packing buffers cannot be allocated. */
bool brg_gemm_blocked(const brg_gemm_kernel *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, brg_dtype a_type, const void *A, int64_t lda, brg_dtype b_type, const void *B,
                      int64_t ldb, float beta, float *C, int64_t ldc);

/* B packed once for many products (a weight matrix, gemm_packed.c): op(B) [K, N] laid out as
 * brg_gemm_blocked would pack it, every block at once, into `dst` (64-byte aligned,
 * brg_gemm_blocked_packed_bytes long; 0 for an empty B). The blocks are independent:
 * brg_gemm_blocked_pack_b packs share `part` of `parts` of them (0 of 1: all), so threads may
 * each pack a share of one B. brg_gemm_blocked_packed then computes brg_gemm_blocked's product
 * on it with the same bits, packing only A; false, having touched nothing, only when the
 * thread's A buffer cannot be allocated. */
size_t brg_gemm_blocked_packed_bytes(const brg_gemm_kernel *k, int64_t K, int64_t N);
void brg_gemm_blocked_pack_b(const brg_gemm_kernel *k, bool trans_b, int64_t K, int64_t N, brg_dtype b_type,
                             const void *B, int64_t ldb, void *dst, int part, int parts);
bool brg_gemm_blocked_packed(const brg_gemm_kernel *k, bool trans_a, int64_t M, int64_t N, int64_t K, float alpha,
                             brg_dtype a_type, const void *A, int64_t lda, const void *packed_b, float beta, float *C,
                             int64_t ldc);

/* C = beta * C, for the products with K == 0 or alpha == 0: beta == 0 clears C even when it
 * holds NaN or Inf garbage. */
void brg_gemm_scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc);

#endif
