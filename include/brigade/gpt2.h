/* GPT-2 as transformers' GPT2LMHeadModel, GPT2Model, GPT2ForSequenceClassification and
 * GPT2ForTokenClassification: blocks "embeddings", "h.0" ... "h.{L-1}", "head" (ln_f and the task
 * head).
 *
 * Inputs (the bundle's named inputs, brg_bundle.inputs): input_ids I32 [B, T]; attention_mask F32
 * [B, T] (optional); labels: LM I32 [B, T] (shifted inside, -100 ignored); sequence classification
 * as brg_problem_type (I32 [B], F32 [B] or [B, num_labels]), read at the last token that is not
 * pad_token_id in each row (position 0 when a row is all padding; without a pad_token_id only one
 * row per batch, its last token, as transformers); token classification I32 [B, T], -100 ignored.
 * Outputs: logits [B, T, vocab], [B, num_labels] or [B, T, num_labels]; GPT2Model has no labels
 * and its logits are last_hidden_state [B, T, C] (after ln_f), named so by brg_model_outputs. */
#ifndef BRIGADE_GPT2_H
#define BRIGADE_GPT2_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/encoder.h"
#include "brigade/model.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_gpt2_task {
    BRG_GPT2_LM_HEAD = 0,              /* GPT2LMHeadModel */
    BRG_GPT2_BASE,                     /* GPT2Model */
    BRG_GPT2_SEQUENCE_CLASSIFICATION,  /* GPT2ForSequenceClassification */
    BRG_GPT2_TOKEN_CLASSIFICATION,     /* GPT2ForTokenClassification */
} brg_gpt2_task;

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
    brg_gpt2_task task;          /* from architectures[0]; the LM head when absent */
    int64_t pad_token_id;        /* < 0: null */
    int64_t num_labels;          /* classification heads: from id2label, else num_labels, else 2 */
    brg_problem_type problem_type;
    float classifier_dropout;    /* token classification; < 0: null (0.1, as transformers) */
} brg_gpt2_config;

/* "GPT2LMHeadModel", ... */
const char *brg_gpt2_architecture(brg_gpt2_task task);

/* GPT2Config's defaults (the 124M model). */
void brg_gpt2_config_default(brg_gpt2_config *cfg);
/* Reads config.json; n_layer, n_head, n_embd, n_positions and vocab_size are required. */
brg_status brg_gpt2_config_load(const char *path, brg_gpt2_config *cfg);
brg_status brg_gpt2_config_validate(const brg_gpt2_config *cfg);

/* Allocates parameters (zeroed) for `cfg`. */
brg_status brg_gpt2_create(const brg_gpt2_config *cfg, brg_model **out);

/* Loads config.json and the weights of a GPT-2 model folder as from_pretrained does (see
 * brg_load_options): names with or without "transformer."; old attention-mask buffers skipped;
 * other unused tensors reported on stderr; a head the checkpoint lacks (a GPT2Model checkpoint in
 * a classification model) initialised from seed 42 and reported on stderr. */
brg_status brg_gpt2_load_dir(const char *dir, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
