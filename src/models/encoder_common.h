/* Internal pieces BERT and ViT share: config.json fields, self-attention, the sequence-level
 * loss, and the label names kept for saving. */
#ifndef BRIGADE_MODELS_ENCODER_COMMON_H
#define BRIGADE_MODELS_ENCODER_COMMON_H

#include <cJSON.h>

#include "brigade/encoder.h"
#include "brigade/model.h"
#include "brigade/ops.h"

/* ---- config.json (read and written with io/json.h's brg_json_load_config / write_config) ---- */
/* hidden_act: "gelu" (erf), "gelu_new" / "gelu_pytorch_tanh" / "gelu_fast" (tanh). */
brg_status enc_parse_activation(const char *name, const char *ctx, brg_activation *act, char *name_out,
                                size_t name_len);
/* num_labels from id2label (its size), else num_labels, else 2; problem_type. */
brg_status enc_read_labels(const cJSON *j, const char *ctx, int64_t *num_labels, brg_problem_type *problem);
/* Adds id2label / label2id (the names in `names` when it has num_labels entries, else
 * LABEL_i) and problem_type when set. */
void enc_write_labels(cJSON *j, const cJSON *names, int64_t num_labels, brg_problem_type problem);
/* A copy of config.json's id2label (NULL when absent), to write the same names back. */
cJSON *enc_copy_id2label(const cJSON *j);
/* Adds a float config value as the shortest decimal that reads back to it (0.1, not
 * 0.10000000149011612). */
void enc_add_float(cJSON *j, const char *key, float v);

/* ---- forward ---- */

/* Each dropout site gets its own key range so masks never repeat within a micro-batch. */
uint64_t enc_dropout_offset(int block, int site);

typedef struct enc_attention_weights {
    brg_tensor *wq, *bq, *wk, *bk, *wv, *bv; /* nn.Linear [out, in]; biases may be NULL */
} enc_attention_weights;

/* Bidirectional multi-head self-attention of x [B, T, C]: the merged heads [B, T, C] before the
 * output projection, masking keys where the input attention_mask is 0, with dropout on the attention
 * probabilities in training. */
brg_status enc_self_attention(brg_tape *tape, const brg_bundle *b, brg_tensor *x, const enc_attention_weights *w,
                              int64_t heads, float attn_dropout, uint64_t dropout_offset, brg_tensor **out);

/* ---- sequence-level loss (BertForSequenceClassification, ViTForImageClassification) ---- */

/* The loss of logits [B, num_labels] against the input labels, as transformers'
 * ForSequenceClassificationLoss, shared over b->loss_denominator examples (or labels != -100
 * for single-label classification). */
brg_status enc_sequence_loss(brg_tape *tape, const brg_bundle *b, brg_tensor *logits, brg_problem_type problem,
                             brg_tensor **loss);
/* What count_loss_items returns for those heads. */
int64_t enc_sequence_loss_items(const brg_tensor *labels, int64_t num_labels, brg_problem_type problem);

#endif
