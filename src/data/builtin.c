/* Datasets brigade generates itself, so the demo and tests need no download. "reverse": a
 * word of 3-6 letters, '>', the word reversed, '.', padded with spaces. Byte-level tokens; loss
 * on the answer only. */
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/rng.h"

#include <stdlib.h>

static int64_t reverse_row(brg_rng *rng, int32_t *ids, float *mask, int32_t *labels, int64_t T) {
    int len = 3 + (int)(brg_rng_next(rng) % 4);
    char row[64];
    int n = 0;
    for (int i = 0; i < len; i++) row[n++] = (char)('a' + brg_rng_next(rng) % 26);
    row[n++] = '>';
    for (int i = len - 1; i >= 0; i--) row[n++] = row[i];
    row[n++] = '.';
    for (int64_t t = 0; t < T; t++) {
        bool real = t < n;
        ids[t] = real ? (unsigned char)row[t] : ' ';
        mask[t] = real ? 1.0f : 0.0f;
        labels[t] = real && t > len ? ids[t] : -100; /* predict what follows '>' */
    }
    return n;
}

brg_status brg_dataset_builtin(const char *name, int64_t rows, int64_t seq_len, uint64_t seed, brg_dataset **out) {
    if (strcmp(name, "reverse") != 0)
        return brg_error(BRG_ERR_NOT_FOUND, "unknown built-in dataset '%s' (built-in: reverse)", name);
    if (seq_len < 14) return brg_error(BRG_ERR_INVALID_ARG, "the reverse task needs rows of at least 14 tokens");
    if (rows < 1) return brg_error(BRG_ERR_INVALID_ARG, "a dataset needs at least one row");
    size_t n = (size_t)(rows * seq_len);
    int32_t *ids = malloc(n * sizeof *ids), *labels = malloc(n * sizeof *labels);
    float *mask = malloc(n * sizeof *mask);
    brg_status st = BRG_OK;
    if (!ids || !labels || !mask) st = brg_error(BRG_ERR_OOM, "cannot generate %lld rows", (long long)rows);
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int64_t r = 0; st == BRG_OK && r < rows; r++)
        reverse_row(&rng, ids + r * seq_len, mask + r * seq_len, labels + r * seq_len, seq_len);
    if (st == BRG_OK) st = brg_dataset_from_rows(ids, mask, labels, rows, seq_len, out);
    free(ids);
    free(labels);
    free(mask);
    return st;
}
