/* Sentence embeddings as sentence-transformers computes them from a folder it saved: the
 * transformer's last_hidden_state, pooled (1_Pooling/config.json: mean over the attended tokens,
 * the CLS token, the max, or the mean times sqrt(length)), then L2-normalised when the folder
 * has a 2_Normalize module (modules.json). */
#ifndef BRIGADE_SENTENCE_EMBEDDING_H
#define BRIGADE_SENTENCE_EMBEDDING_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/status.h"

typedef enum brg_pooling {
    BRG_POOLING_MEAN = 0,      /* pooling_mode_mean_tokens */
    BRG_POOLING_CLS,           /* pooling_mode_cls_token */
    BRG_POOLING_MAX,           /* pooling_mode_max_tokens */
    BRG_POOLING_MEAN_SQRT_LEN, /* pooling_mode_mean_sqrt_len_tokens */
} brg_pooling;

typedef struct brg_sentence_config {
    brg_pooling pooling;
    bool normalize;
    int64_t max_seq_length; /* sentence_bert_config.json; 0: the model's positions */
    int64_t dimension;      /* word_embedding_dimension; 0: not given */
} brg_sentence_config;

/* Reads DIR/modules.json (a Transformer module at the folder's root, then Pooling and optional
 * Normalize), DIR/<pooling path>/config.json and DIR/sentence_bert_config.json. A folder without
 * modules.json is a plain transformers model: mean pooling, no normalisation (what
 * sentence-transformers does with one); its sentence_bert_config.json is read if it has one. One pooling mode only; unknown module types are an
 * error naming them. */
brg_status brg_sentence_config_load(const char *dir, brg_sentence_config *out);

/* out[b, :] = the pooled (and normalised) embedding of row b of hidden [B, T, C], over the tokens
 * whose mask [B, T] is non-zero (NULL: all). Sums in double. */
brg_status brg_sentence_pool(const brg_sentence_config *cfg, const float *hidden, const float *mask, int64_t B,
                             int64_t T, int64_t C, float *out);

#endif
