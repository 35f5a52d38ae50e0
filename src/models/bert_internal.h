/* BERT's parameter layout, shared by construction (bert.c) and the forward (bert_forward.c). */
#ifndef BRIGADE_MODELS_BERT_INTERNAL_H
#define BRIGADE_MODELS_BERT_INTERNAL_H

#include <cJSON.h>

#include "brigade/bert.h"

/* The model's config: the public struct plus config.json's label names, written back on save. */
typedef struct bert_model_config {
    brg_bert_config c;
    cJSON *id2label;
} bert_model_config;

/* Parameter indices follow construction order: embeddings, then PER_LAYER per layer, then the
 * head's. */
enum { E_WORD, E_POS, E_TYPE, E_LN_W, E_LN_B, EMB_PARAMS };
enum {
    L_Q_W, L_Q_B, L_K_W, L_K_B, L_V_W, L_V_B,
    L_AO_W, L_AO_B, L_ALN_W, L_ALN_B,
    L_I_W, L_I_B, L_O_W, L_O_B, L_OLN_W, L_OLN_B,
    PER_LAYER
};
/* Head parameters, from the head's first index. */
enum { MLM_DENSE_W, MLM_DENSE_B, MLM_LN_W, MLM_LN_B, MLM_BIAS, MLM_DECODER_W, MLM_DECODER_B };
enum { CLS_POOLER_W, CLS_POOLER_B, CLS_W, CLS_B };
enum { QA_W, QA_B };
enum { POOL_W, POOL_B };   /* BertModel */
enum { TOK_W, TOK_B };     /* token classification */
/* multiple choice: the classification layout (pooler, then a classifier with one output) */
enum { PT_POOL_W, PT_POOL_B, PT_NSP_W, PT_NSP_B, PT_MLM }; /* pretraining; the masked-LM head from PT_MLM */

brg_status bert_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b);
brg_loss_items bert_count_loss_items(const brg_model *m, const brg_tensor_map *batch);
/* BertForPreTraining's ops->outputs: prediction_logits and seq_relationship_logits. */
brg_status bert_pretraining_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                                    brg_arena *arena, brg_named_tensor *out, int max, int *n);
/* BertModel's ops->outputs: last_hidden_state and, with the pooler, pooler_output. */
brg_status bert_base_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n);

#endif
