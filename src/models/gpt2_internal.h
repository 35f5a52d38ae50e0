/* GPT-2's parameter layout and the task heads, shared by gpt2.c and gpt2_heads.c. */
#ifndef BRIGADE_MODELS_GPT2_INTERNAL_H
#define BRIGADE_MODELS_GPT2_INTERNAL_H

#include <cJSON.h>

#include "brigade/gpt2.h"

/* The model's config: the public struct first (m->config reads as a brg_gpt2_config) and
 * config.json's label names, written back on save. */
typedef struct gpt2_model_config {
    brg_gpt2_config c;
    cJSON *id2label;
} gpt2_model_config;

/* Parameter indices follow construction order: wte, wpe, PER_LAYER per layer, ln_f weight and
 * bias, then the task head's. */
enum { P_WTE = 0, P_WPE = 1, PER_LAYER = 12 };
/* A layer's parameters, in order from 2 + layer * PER_LAYER. */
enum { L_LN1_W, L_LN1_B, L_ATTN_W, L_ATTN_B, L_APROJ_W, L_APROJ_B, L_LN2_W, L_LN2_B, L_FC_W, L_FC_B, L_MPROJ_W, L_MPROJ_B };

/* Builds the model config.json at `config_path` describes (weights zeroed). */
brg_status gpt2_create_path(const char *config_path, brg_model **out);

/* The heads after ln_f other than the LM head: `n` is ln_f's output [B, T, C], `head` the
 * index of the head's first parameter. */
brg_status gpt2_task_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *n, int head);
brg_loss_items gpt2_task_count_loss_items(const brg_model *m, const brg_tensor_map *batch);
/* GPT2Model's ops->outputs: last_hidden_state. */
brg_status gpt2_base_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n);

#endif
