/* BERT as transformers' BertModel, BertForMaskedLM, BertForSequenceClassification,
 * BertForQuestionAnswering, BertForTokenClassification, BertForMultipleChoice and BertForPreTraining:
 * blocks "embeddings", "layer.0" ...
 * "layer.{L-1}", "head" (BertModel: the pooler, or nothing without one).
 *
 * Inputs (the bundle's named inputs, brg_bundle.inputs): input_ids I32 [B, T]; attention_mask
 * F32 [B, T] (optional); token_type_ids I32 [B, T] (optional, zeros when absent); labels:
 *   masked LM: I32 [B, T], -100 where no prediction counts;
 *   sequence classification: see brg_problem_type (I32 [B] or F32 [B] / [B, num_labels]);
 *   token classification: I32 [B, T], -100 where no prediction counts;
 *   multiple choice: I32 [B] (the right choice, -100 ignored), with input_ids, attention_mask and
 *   token_type_ids [B, num_choices, T];
 *   pretraining: the masked-LM labels I32 [B, T] in `labels` and next_sentence_label I32 [B] (0:
 *   sentence B follows A, 1: random; -100 ignored); the loss, as transformers computes it only
 *   when both are given, is masked-LM mean CE + next-sentence mean CE;
 *   question answering: start_positions I32 [B] and end_positions I32 [B] instead of labels
 *   (negative positions count as 0, positions past T are ignored, as transformers clamps them).
 *   With a global loss denominator (pipelined or accumulated runs: the number of examples) each
 *   cross-entropy is divided by twice that number, which is transformers' mean whenever no
 *   position lies past the sequence.
 * Outputs: logits [B, T, vocab] (masked LM), [B, num_labels] (classification), [B, T, num_labels]
 * (token classification), [B, num_choices] (multiple choice), or [B, T, 2] for question answering, whose [..., 0] is start_logits and
 * [..., 1] end_logits. BertModel has no labels and no loss; its logits pack, per row,
 * last_hidden_state [T, C] then pooler_output [C] ([B, T * C + C]; just last_hidden_state
 * [B, T, C] without a pooler): brg_model_outputs unpacks them by name. */
#ifndef BRIGADE_BERT_H
#define BRIGADE_BERT_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/encoder.h"
#include "brigade/model.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_bert_task {
    BRG_BERT_MASKED_LM = 0,             /* BertForMaskedLM */
    BRG_BERT_SEQUENCE_CLASSIFICATION,   /* BertForSequenceClassification */
    BRG_BERT_QUESTION_ANSWERING,        /* BertForQuestionAnswering */
    BRG_BERT_BASE,                      /* BertModel */
    BRG_BERT_TOKEN_CLASSIFICATION,      /* BertForTokenClassification */
    BRG_BERT_MULTIPLE_CHOICE,           /* BertForMultipleChoice */
    BRG_BERT_PRETRAINING,               /* BertForPreTraining (masked LM + next sentence) */
} brg_bert_task;

typedef struct brg_bert_config {
    brg_bert_task task;
    int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    int64_t max_position_embeddings, type_vocab_size;
    brg_activation hidden_act;
    char hidden_act_name[32]; /* as written in config.json */
    float hidden_dropout_prob, attention_probs_dropout_prob;
    float classifier_dropout; /* < 0: null, hidden_dropout_prob is used */
    float layer_norm_eps, initializer_range;
    int64_t pad_token_id;     /* < 0: null (no padding row) */
    bool tie_word_embeddings; /* masked LM: the decoder reads the word embeddings */
    int64_t num_labels;       /* classification outputs; 2 for question answering */
    brg_problem_type problem_type;
    /* BertModel: whether it has the pooler (transformers' add_pooling_layer; loading a folder
     * sets it from whether the checkpoint holds pooler.dense). True by default. */
    bool add_pooling_layer;
} brg_bert_config;

/* BertConfig's defaults (bert-base) for `task`. */
void brg_bert_config_default(brg_bert_config *cfg, brg_bert_task task);
/* Reads config.json: the task from architectures[0] (masked LM when absent), sizes, dropout,
 * hidden_act, num_labels (from id2label, else num_labels, else 2), problem_type. */
brg_status brg_bert_config_load(const char *path, brg_bert_config *cfg);
brg_status brg_bert_config_validate(const brg_bert_config *cfg);
/* "BertForMaskedLM", ... */
const char *brg_bert_architecture(brg_bert_task task);

/* Allocates parameters (zeroed) for `cfg`. */
brg_status brg_bert_create(const brg_bert_config *cfg, brg_model **out);
/* brg_model_init_weights, then the padding row of the word embeddings zeroed as transformers'
 * nn.Embedding(padding_idx) initialisation leaves it. */
void brg_bert_init_weights(brg_model *m, uint64_t seed);

/* Builds the model config.json in `dir` describes, weights zeroed (for planning). */
brg_status brg_bert_create_dir(const char *dir, brg_model **out);
/* Loads config.json and the weights of a BERT model folder as from_pretrained does (see
 * brg_load_options): names with or without the "bert." prefix; buffers (position_ids,
 * token_type_ids) and the pretraining heads' tensors skipped; other unused tensors reported on
 * stderr; a head the checkpoint lacks (a BertModel checkpoint in a head model) initialised from
 * seed 42 and reported on stderr. */
brg_status brg_bert_load_dir(const char *dir, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
