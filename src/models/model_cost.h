/* Block costs for memory plans: an architecture replays a block's forward through the ops' cost
 * functions (autograd/ops_cost.h), once as training records it and once as inference runs it,
 * and model_cost_memory turns the two into brg_block_cost's memory fields. */
#ifndef BRIGADE_MODELS_MODEL_COST_H
#define BRIGADE_MODELS_MODEL_COST_H

#include "autograd/ops_cost.h"
#include "brigade/encoder.h"
#include "brigade/model.h"
#include "brigade/placement.h"

/* Block `block`'s forward for `batch` sequences of `seq` tokens, through ops_cost_*, in the
 * mode c->record / c->dropout say; sets c->in / c->out. */
typedef void (*model_cost_fn)(const brg_model *m, int block, int64_t batch, int64_t seq, ops_cost *c);

/* Fills out's memory fields (all but param_bytes, which brg_model_block_costs counts). */
void model_cost_memory(model_cost_fn fn, const brg_model *m, int block, int64_t batch, int64_t seq,
                       brg_block_cost *out);

/* transformers' sequence-classification loss (enc_sequence_loss) of [rows, labels] logits. */
void model_cost_sequence_loss(ops_cost *c, double rows, double labels, brg_problem_type problem);

/* enc_self_attention over x [B, T, C] with H heads (BERT, ViT). */
void model_cost_self_attention(ops_cost *c, double B, double T, double C, double H);

/* The architectures' brg_model_arch.block_cost (gpt2_cost.c, bert_cost.c, vit_cost.c; T5's is
 * brg_t5_block_cost in t5_cost.c). */
brg_status gpt2_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out);
brg_status bert_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out);
brg_status vit_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out);

#endif
