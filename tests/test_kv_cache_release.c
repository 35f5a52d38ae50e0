/* A KV cache whose blocks run on other ranks (a decode over mpirun) frees them: the blocks kept
 * still take writes and follow a beam search's reorder row for row, the freed ones stay empty
 * and the reorder passes them by. */
#include "models/kv_cache.h"
#include "test_util.h"

enum { BLOCKS = 3, ROWS = 3, HEADS = 2, CAP = 4, DIM = 2 };

/* Projections [rows, n, 2 * heads * dim] whose keys and values say their row, block and position. */
static void fill(float *src, int block, int64_t n) {
    const int64_t HD = HEADS * DIM;
    for (int64_t r = 0; r < ROWS; r++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < 2 * HD; j++)
                src[(r * n + t) * 2 * HD + j] = (float)(1000 * block + 100 * r + 10 * t + j);
}

int main(void) {
    kv_cache *c = NULL;
    CHECK_OK(kv_cache_create(BLOCKS, ROWS, HEADS, CAP, DIM, &c));
    if (!c) return test_finish();
    kv_cache_release_block(c, 1);
    CHECK(!c->blocks[1].k && !c->blocks[1].v);
    float src[ROWS * 2 * 2 * HEADS * DIM];
    for (int b = 0; b < BLOCKS; b++) {
        if (b == 1) continue;
        fill(src, b, 2);
        kv_cache_write(c, b, src, 2, 2 * HEADS * DIM, 0, HEADS * DIM);
    }
    c->len = 2;
    float before[BLOCKS][ROWS * HEADS * CAP * DIM];
    for (int b = 0; b < BLOCKS; b += 2) memcpy(before[b], c->blocks[b].k, sizeof before[b]);
    const int32_t src_rows[ROWS] = {2, 2, 0};
    CHECK_OK(kv_cache_reorder(c, src_rows));
    CHECK(!c->blocks[1].k && !c->blocks[1].spare_k);
    for (int b = 0; b < BLOCKS; b += 2)
        for (int64_t r = 0; r < ROWS; r++)
            for (int64_t h = 0; h < HEADS; h++)
                CHECK(memcmp(c->blocks[b].k + kv_cache_offset(c, r, h), before[b] + kv_cache_offset(c, src_rows[r], h),
                             (size_t)(c->len * DIM) * sizeof(float)) == 0);
    kv_cache_destroy(c);
    return test_finish();
}
