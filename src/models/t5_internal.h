/* Shared between the T5 model files: the model's private state behind model->config. */
#ifndef BRIGADE_T5_INTERNAL_H
#define BRIGADE_T5_INTERNAL_H

#include <cJSON.h>

#include "brigade/t5.h"

/* Parameter indices of one attention sub-layer and of one whole layer (-1: absent). */
typedef struct t5_attn_idx {
    int q, k, v, o, ln;
} t5_attn_idx;

typedef struct t5_layer_idx {
    t5_attn_idx self, cross; /* cross: decoder layers only */
    int rel_bias;            /* the stack's relative_attention_bias (owned by its layer 0) */
    int wi, wi_0, wi_1, wo, ff_ln;
} t5_layer_idx;

typedef struct t5_state {
    brg_t5_config cfg; /* first, so that model->config reads as a brg_t5_config */
    cJSON *extra;      /* config.json as loaded (keys brigade does not interpret), or NULL */
    t5_layer_idx *layers; /* num_layers encoder layers, then num_decoder_layers decoder layers */
    int shared, enc_final_ln, dec_final_ln, lm_head;
} t5_state;

brg_status t5_config_parse(const cJSON *j, const char *ctx, brg_t5_config *cfg);
/* "T5ForConditionalGeneration" or "T5EncoderModel". */
const char *t5_architecture(brg_t5_task task);
/* Writes dir/config.json: cfg's fields over the keys of `extra` (may be NULL). */
brg_status t5_config_save(const brg_t5_config *cfg, const cJSON *extra, const char *dir);

/* What T5EncoderModel shares with T5ForConditionalGeneration (t5.c): the blocks' forward (the
 * embeddings and encoder layers are the same code), freeing the state. */
brg_status t5_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b);
void t5_free_config(void *state);
/* T5EncoderModel (t5_encoder.c): its ops, and loading its weights from a checkpoint. */
extern const brg_model_ops t5_encoder_ops;
brg_status t5_encoder_load_weights(brg_model *m, const brg_checkpoint *ckpt, const char *source);

#endif
