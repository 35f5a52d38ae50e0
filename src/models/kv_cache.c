#include "models/kv_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static size_t block_floats(const kv_cache *c) {
    return (size_t)(c->rows * c->heads * c->capacity * c->head_dim);
}

brg_status kv_cache_create(int n_blocks, int64_t rows, int64_t heads, int64_t capacity, int64_t head_dim,
                           kv_cache **out) {
    if (n_blocks < 0 || rows < 1 || heads < 1 || capacity < 1 || head_dim < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "KV cache: %d blocks of %lld rows, %lld heads, %lld positions, %lld dims",
                         n_blocks, (long long)rows, (long long)heads, (long long)capacity, (long long)head_dim);
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return brg_error(BRG_ERR_OOM, "cannot allocate a KV cache");
    *c = (kv_cache){.n_blocks = n_blocks, .rows = rows, .heads = heads, .capacity = capacity, .head_dim = head_dim};
    c->blocks = calloc((size_t)(n_blocks ? n_blocks : 1), sizeof *c->blocks);
    const size_t n = block_floats(c);
    bool ok = c->blocks != NULL;
    for (int b = 0; ok && b < n_blocks; b++) {
        c->blocks[b].k = calloc(n, sizeof(float));
        c->blocks[b].v = calloc(n, sizeof(float));
        ok = c->blocks[b].k && c->blocks[b].v;
    }
    if (!ok) {
        kv_cache_destroy(c);
        return brg_error(BRG_ERR_OOM, "cannot allocate a KV cache of %d blocks x 2 x %zu floats", n_blocks, n);
    }
    *out = c;
    return BRG_OK;
}

void kv_cache_destroy(kv_cache *c) {
    if (!c) return;
    for (int b = 0; c->blocks && b < c->n_blocks; b++) {
        free(c->blocks[b].k);
        free(c->blocks[b].v);
        free(c->blocks[b].spare_k);
        free(c->blocks[b].spare_v);
    }
    free(c->blocks);
    free(c);
}

void kv_cache_write(kv_cache *c, int b, const float *src, int64_t n, int64_t row_stride, int64_t k_col,
                    int64_t v_col) {
    const int64_t H = c->heads, D = c->head_dim;
    BRG_ASSERT(b >= 0 && b < c->n_blocks && c->len + n <= c->capacity);
    kv_block *blk = &c->blocks[b];
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t t = 0; t < n; t++) {
            const float *row = src + (r * n + t) * row_stride;
            for (int64_t h = 0; h < H; h++) {
                const int64_t dst = kv_cache_offset(c, r, h) + (c->len + t) * D;
                memcpy(blk->k + dst, row + k_col + h * D, (size_t)D * sizeof(float));
                memcpy(blk->v + dst, row + v_col + h * D, (size_t)D * sizeof(float));
            }
        }
}

void kv_cache_release_block(kv_cache *c, int b) {
    BRG_ASSERT(b >= 0 && b < c->n_blocks);
    kv_block *blk = &c->blocks[b];
    free(blk->k);
    free(blk->v);
    free(blk->spare_k);
    free(blk->spare_v);
    *blk = (kv_block){0};
}

/* dst row r = src row idx[r], the first len positions of every head. */
static void gather_rows(const kv_cache *c, float *dst, const float *src, const int32_t *idx) {
    const size_t span = (size_t)(c->len * c->head_dim) * sizeof(float);
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t h = 0; h < c->heads; h++)
            memcpy(dst + kv_cache_offset(c, r, h), src + kv_cache_offset(c, idx[r], h), span);
}

brg_status kv_cache_reorder(kv_cache *c, const int32_t *src) {
    bool identity = true;
    for (int64_t r = 0; r < c->rows; r++) {
        if (src[r] < 0 || src[r] >= c->rows)
            return brg_error(BRG_ERR_INVALID_ARG, "KV cache reorder: row %d outside [0, %lld)", (int)src[r],
                             (long long)c->rows);
        identity = identity && src[r] == r;
    }
    if (identity || c->len == 0) return BRG_OK;
    const size_t n = block_floats(c);
    for (int b = 0; b < c->n_blocks; b++) {
        kv_block *blk = &c->blocks[b];
        if (!blk->k) continue; /* released: its layer runs elsewhere */
        if (!blk->spare_k) blk->spare_k = malloc(n * sizeof(float));
        if (!blk->spare_v) blk->spare_v = malloc(n * sizeof(float));
        if (!blk->spare_k || !blk->spare_v)
            return brg_error(BRG_ERR_OOM, "cannot allocate the KV cache's reorder buffer");
        gather_rows(c, blk->spare_k, blk->k, src);
        gather_rows(c, blk->spare_v, blk->v, src);
        float *t = blk->k;
        blk->k = blk->spare_k;
        blk->spare_k = t;
        t = blk->v;
        blk->v = blk->spare_v;
        blk->spare_v = t;
    }
    return BRG_OK;
}
