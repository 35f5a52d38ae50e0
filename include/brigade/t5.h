/* T5 (T5ForConditionalGeneration, and T5EncoderModel: its encoder alone), t5 and t5 v1.1 variants.
 *
 * Blocks, in order (Le = num_layers encoder layers, Ld = num_decoder_layers):
 *   0                  "encoder.embeddings"  BRG_BLOCK_EMBEDDINGS, layer -1
 *   1 + i              "encoder.block.{i}"   BRG_BLOCK_LAYER, layer i          (i < Le)
 *   1 + Le + j         "decoder.block.{j}"   BRG_BLOCK_LAYER, layer Le + j     (j < Ld)
 *   1 + Le + Ld        "head"                BRG_BLOCK_HEAD,  layer -1
 * A layer block's `layer` is its index in the encoder-then-decoder list of Le + Ld layers, the
 * list one layers_per_ipu places ([-1] spreads all Le + Ld evenly), so
 * block_stage[b] = get_layer_ipu(cfg, Le + Ld)[blocks[b].layer] for layer blocks, 0 for the
 * embeddings and the last stage for the head.
 *
 * What each block does with the bundle (hidden and encoder_hidden are its carried tensors,
 * brg_bundle.carried; the rest its named inputs, brg_bundle.inputs):
 *   encoder.embeddings   hidden = dropout(shared[input_ids])
 *   encoder.block.i      hidden = encoder layer i (hidden); the last one also applies the
 *                        encoder's final_layer_norm and dropout, so its hidden is the encoder output
 *   decoder.block.0      encoder_hidden = hidden (the encoder output), then
 *                        hidden = dropout(shared[decoder_input_ids]), then decoder layer 0
 *   decoder.block.j      hidden = decoder layer j (hidden, encoder_hidden)
 *   head                 logits = lm_head(scale * dropout(final_layer_norm(hidden))); loss when
 *                        labels are given
 * The encoder output travels on to the later decoder stages in encoder_hidden, and its gradient
 * (from every decoder layer's cross-attention) travels back the same way.
 *
 * Inputs read (the bundle's named inputs, brg_bundle.inputs): input_ids [B, Te] (required),
 * attention_mask [B, Te] (optional, encoder padding, also masks the cross-attention keys),
 * decoder_input_ids [B, Td] (optional: derived from labels by shifting right with
 * decoder_start_token_id, -100 becoming pad_token_id), decoder_attention_mask [B, Td] (optional),
 * labels [B, Td] (ids or -100; the loss is the mean cross-entropy over the labels that are not
 * -100, no shift).
 *
 * Shared weights: shared.weight (owned by the embeddings block) is read by decoder.block.0 under
 * the name decoder.embed_tokens.weight and, when tied, by the head as lm_head.weight. Each stack's
 * relative_attention_bias lives in its layer 0 and later layers read it through an alias named
 * like it would be in that layer ("encoder.block.3.layer.0.SelfAttention.relative_attention_bias
 * .weight"), so a stage holding only later layers gets its own copy and the runtime sums the
 * gradients of all copies.
 *
 * T5EncoderModel has the encoder's blocks only (shared embedding, encoder.block.*, the final layer
 * norm in the last of them) and a head with no parameters: its logits are last_hidden_state
 * [B, Te, d_model], named so by brg_model_outputs. It reads input_ids and attention_mask, has no
 * labels and no loss, and loads as from_pretrained does (see brg_t5_load_dir).
 *
 * model->config points to a brg_t5_config. */
#ifndef BRIGADE_T5_H
#define BRIGADE_T5_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/model.h"
#include "brigade/placement.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_t5_act {
    BRG_T5_ACT_RELU = 0,
    BRG_T5_ACT_GELU_ERF,  /* "gelu" */
    BRG_T5_ACT_GELU_TANH, /* "gelu_new", "gelu_pytorch_tanh", "gelu_fast" */
} brg_t5_act;

#define BRG_T5_MAX_EOS 8

typedef enum brg_t5_task {
    BRG_T5_CONDITIONAL_GENERATION = 0, /* T5ForConditionalGeneration */
    BRG_T5_ENCODER,                    /* T5EncoderModel */
} brg_t5_task;

typedef struct brg_t5_config {
    int64_t vocab_size, d_model, d_kv, d_ff, num_heads;
    int64_t num_layers, num_decoder_layers;
    int64_t relative_attention_num_buckets, relative_attention_max_distance;
    /* model->max_positions: config.json's n_positions, else 512 (T5's pre-training length).
     * The forward itself takes any length (positions are relative); input checks, batching and
     * planning need one. */
    int64_t n_positions;
    float dropout_rate, layer_norm_epsilon, initializer_factor;
    char feed_forward_proj[32]; /* "relu", "gated-gelu", ... as written */
    char dense_act_fn[32];      /* the activation's name, derived from feed_forward_proj */
    bool is_gated_act;          /* wi_0 / wi_1 (gated) instead of wi */
    brg_t5_act act;
    /* The LM head reads shared.weight. transformers 5 always ties unless the checkpoint stores a
     * different lm_head.weight: brg_t5_load_dir decides from the checkpoint. */
    bool tie_word_embeddings;
    /* Multiply the decoder output by d_model^-0.5 before the LM head (original T5; v1.1 does
     * not). config.json's scale_decoder_outputs, else tie_word_embeddings != false. */
    bool scale_decoder_outputs;
    int64_t pad_token_id;           /* -1: none */
    int64_t decoder_start_token_id; /* -1: none (then decoder_input_ids must be given) */
    int64_t eos_token_ids[BRG_T5_MAX_EOS];
    int n_eos;
    bool eos_is_list;
    brg_t5_task task; /* from architectures[0]; T5ForConditionalGeneration when absent */
} brg_t5_config;

/* T5Config's defaults (t5-small). */
void brg_t5_config_default(brg_t5_config *cfg);
/* Reads config.json: missing fields take T5Config's defaults; feed_forward_proj is "{act}" or
 * "gated-{act}" with act relu, gelu, gelu_new, gelu_pytorch_tanh or gelu_fast. T5EncoderModel
 * accepts is_encoder_decoder false (what transformers saves for it). */
brg_status brg_t5_config_load(const char *path, brg_t5_config *cfg);
brg_status brg_t5_config_validate(const brg_t5_config *cfg);

/* Allocates parameters (zeroed) for `cfg`; brg_model_init_weights gives transformers' init. */
brg_status brg_t5_create(const brg_t5_config *cfg, brg_model **out);

/* Loads config.json and the weights of a T5ForConditionalGeneration or T5EncoderModel folder.
 * config.json keys brigade does not interpret (task_specific_params, ...) are kept and written
 * back on save. T5ForConditionalGeneration loads strictly; T5EncoderModel as from_pretrained
 * does (see brg_load_options): a full checkpoint's decoder.* tensors skipped silently (as
 * transformers' _keys_to_ignore_on_load_unexpected), any other unused tensor (an untied
 * lm_head.weight) reported on stderr, a missing tensor an error. */
brg_status brg_t5_load_dir(const char *dir, brg_model **out);

/* Index of the first block of the decoder (1 + num_layers; T5EncoderModel: its head). */
int brg_t5_first_decoder_block(const brg_model *model);

/* For planning (brg_model_arch's create_dir and block_cost): the model from config.json alone,
 * weights zeroed, the head tied as tie_word_embeddings says; and one block's estimated cost for
 * `batch` sequences of `seq` tokens (encoder and decoder alike). */
brg_status brg_t5_create_dir(const char *dir, brg_model **out);
brg_status brg_t5_block_cost(const brg_model *model, int block, int64_t batch, int64_t seq, brg_block_cost *out);

#ifdef __cplusplus
}
#endif
#endif
