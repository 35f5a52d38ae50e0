/* Used by the trainer tests (test_trainer.c, test_trace.c, test_zero.c): a tiny GPT-2 without
 * dropout and a dataset of random token rows, the same for every test that asks alike. */
#ifndef BRIGADE_TEST_TRAINER_UTIL_H
#define BRIGADE_TEST_TRAINER_UTIL_H

#include <stdlib.h>

#include "brigade/dataset.h"
#include "brigade/gpt2.h"
#include "brigade/rng.h"
#include "test_util.h"

/* 2 layers, 2 heads, width 16, 16 positions, weights from seed 5. */
static inline brg_model *tu_tiny_gpt2(int vocab) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = vocab;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 5);
    return m;
}

/* rows x t ids below vocab from seed 1; `masked`: row r's last r % 3 tokens are padding. */
static inline brg_dataset *tu_token_rows(int rows, int t, int vocab, bool masked) {
    int32_t *ids = malloc((size_t)rows * (size_t)t * sizeof *ids);
    float *mask = malloc((size_t)rows * (size_t)t * sizeof *mask);
    brg_dataset *d = NULL;
    if (ids && mask) {
        brg_rng rng;
        brg_rng_seed(&rng, 1);
        for (int i = 0; i < rows * t; i++) {
            ids[i] = (int32_t)(brg_rng_next(&rng) % (uint64_t)vocab);
            mask[i] = (i % t) < t - ((i / t) % 3) ? 1.0f : 0.0f;
        }
        CHECK_OK(brg_dataset_from_rows(ids, masked ? mask : NULL, NULL, rows, t, &d));
    }
    free(ids);
    free(mask);
    return d;
}

#endif
