/* Key/value caches for incremental decoding (internal to src/models).
 *
 * One kv_block per attention layer, each its own allocation, so that a pipeline stage can own
 * the caches of the blocks placed on it. A block holds keys and values as [rows, heads,
 * capacity, head_dim]: the layout brg_k_attention_fwd reads with kv_stride = capacity, so a
 * decode step attends to the first `len` positions of each head without copying them. */
#ifndef BRIGADE_MODELS_KV_CACHE_H
#define BRIGADE_MODELS_KV_CACHE_H

#include <stdint.h>

#include "brigade/status.h"

typedef struct kv_block {
    float *k, *v;         /* [rows, heads, capacity, head_dim] */
    float *spare_k, *spare_v; /* as big, for reordering rows (beam search); allocated on first use */
} kv_block;

typedef struct kv_cache {
    int n_blocks;
    int64_t rows, heads, capacity, head_dim;
    int64_t len; /* positions filled (the same for every row) */
    kv_block *blocks;
} kv_cache;

brg_status kv_cache_create(int n_blocks, int64_t rows, int64_t heads, int64_t capacity, int64_t head_dim,
                           kv_cache **out);
void kv_cache_destroy(kv_cache *c);

/* Writes n new positions [c->len, c->len + n) of block `b` from projections laid out as rows of
 * `src` [rows, n, row_stride]: the keys at column k_col, the values at v_col (H*D wide each).
 * Does not advance c->len (the caller does, once every block has its keys). */
void kv_cache_write(kv_cache *c, int b, const float *src, int64_t n, int64_t row_stride, int64_t k_col,
                    int64_t v_col);

/* Frees block b's keys and values: a block whose layer runs on another rank (decode_ranks.h)
 * is never written or read here; reorder passes it by. */
void kv_cache_release_block(kv_cache *c, int b);

/* Row r of every block becomes what row src[r] was (positions [0, len)); src holds row indices
 * in [0, rows), repeats allowed (beam search keeps a beam twice). */
brg_status kv_cache_reorder(kv_cache *c, const int32_t *src);

/* Element offset of (row, head, position 0) in a block's k or v. */
static inline int64_t kv_cache_offset(const kv_cache *c, int64_t row, int64_t head) {
    return ((row * c->heads + head) * c->capacity) * c->head_dim;
}

#endif
