/* GPT-2 (GPT2LMHeadModel): blocks "embeddings", "h.0" ... "h.{L-1}", "head". */
#ifndef BRIGADE_GPT2_H
#define BRIGADE_GPT2_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/model.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_gpt2_config {
    int64_t n_layer, n_head, n_embd, n_positions, vocab_size;
    int64_t n_inner; /* MLP width; 4 * n_embd when config.json has null */
    float layer_norm_epsilon;
    brg_activation activation;
    char activation_name[32]; /* as written in config.json */
    float embd_pdrop, attn_pdrop, resid_pdrop;
    float initializer_range;
    bool tie_word_embeddings;
    bool scale_attn_weights;
    bool scale_attn_by_inverse_layer_idx;
    int64_t bos_token_id, eos_token_id;
} brg_gpt2_config;

/* GPT2Config's defaults (the 124M model). */
void brg_gpt2_config_default(brg_gpt2_config *cfg);
/* Reads config.json; n_layer, n_head, n_embd, n_positions and vocab_size are required. */
brg_status brg_gpt2_config_load(const char *path, brg_gpt2_config *cfg);
brg_status brg_gpt2_config_validate(const brg_gpt2_config *cfg);

/* Allocates parameters (zeroed) for `cfg`. */
brg_status brg_gpt2_create(const brg_gpt2_config *cfg, brg_model **out);

/* Loads config.json and the weights of a GPT-2 model folder. */
brg_status brg_gpt2_load_dir(const char *dir, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
