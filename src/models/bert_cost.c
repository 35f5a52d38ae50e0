/* BERT's block costs for plans: forward FLOPs (2 per multiply-add, matmuls and attention only)
 * and memory, by replaying bert_forward.c through the ops' cost functions. Keep the two in step:
 * tests/test_memory_plan.c holds the sum to what a device measures. */
#include "models/bert_internal.h"
#include "models/model_cost.h"

static const brg_bert_config *cfg_of(const brg_model *m) { return &((const bert_model_config *)m->config)->c; }

/* Multiple choice runs the encoder over flattened [B * N, T] views of its inputs. */
static void choice_views(const brg_bert_config *c, ops_cost *o) {
    if (c->task == BRG_BERT_MULTIPLE_CHOICE) o->fwd += 3 * ops_cost_align((double)sizeof(brg_tensor));
}

static void embeddings(const brg_bert_config *c, double BT, ops_cost *o) {
    double C = (double)c->hidden_size;
    choice_views(c, o);
    ops_cost_tensor(o, BT, sizeof(int32_t), false); /* token types, when the batch has none */
    ops_cost_tensor(o, BT, sizeof(int32_t), false); /* position ids */
    ops_cost_embedding_padded(o, BT, C);
    ops_cost_embedding(o, BT, C);
    ops_cost_embedding(o, BT, C);
    ops_cost_add(o, BT * C);
    ops_cost_add(o, BT * C);
    ops_cost_layer_norm(o, BT, C);
    ops_cost_dropout(o, BT * C, c->hidden_dropout_prob);
    o->out[0] = BT * C;
}

static void layer(const brg_bert_config *c, double B, double T, ops_cost *o) {
    double C = (double)c->hidden_size, I = (double)c->intermediate_size, BT = B * T;
    float p = c->hidden_dropout_prob;
    choice_views(c, o);
    model_cost_self_attention(o, B, T, C, (double)c->num_attention_heads);
    ops_cost_linear(o, BT, C, C, false);
    ops_cost_dropout(o, BT * C, p);
    ops_cost_add(o, BT * C);
    ops_cost_layer_norm(o, BT, C);
    ops_cost_linear_act(o, BT, C, I, false, true);
    ops_cost_linear(o, BT, I, C, false);
    ops_cost_dropout(o, BT * C, p);
    ops_cost_add(o, BT * C);
    ops_cost_layer_norm(o, BT, C);
    o->in[0] = o->out[0] = BT * C;
    o->in_used[0] = true;
}

static void mlm_scores(const brg_bert_config *c, double BT, ops_cost *o) {
    double C = (double)c->hidden_size;
    ops_cost_linear_act(o, BT, C, C, false, true);
    ops_cost_layer_norm(o, BT, C);
    ops_cost_linear(o, BT, C, (double)c->vocab_size, false);
}

/* select [CLS], dense, tanh */
static void pooler(const brg_bert_config *c, double B, ops_cost *o) {
    double C = (double)c->hidden_size;
    ops_cost_select(o, B * C);
    ops_cost_linear(o, B, C, C, false);
    ops_cost_tanh(o, B * C);
}

static void head(const brg_bert_config *c, double B, double T, ops_cost *o) {
    double C = (double)c->hidden_size, BT = B * T, L = (double)c->num_labels, V = (double)c->vocab_size;
    float p = c->classifier_dropout >= 0 ? c->classifier_dropout : c->hidden_dropout_prob;
    o->in[0] = BT * C;
    o->in_used[0] = true;
    switch (c->task) {
    case BRG_BERT_MASKED_LM:
        mlm_scores(c, BT, o);
        ops_cost_cross_entropy_spent(o, BT, V);
        break;
    case BRG_BERT_SEQUENCE_CLASSIFICATION:
        pooler(c, B, o);
        ops_cost_dropout(o, B * C, p);
        ops_cost_linear(o, B, C, L, false);
        model_cost_sequence_loss(o, B, L, c->problem_type);
        break;
    case BRG_BERT_QUESTION_ANSWERING:
        ops_cost_linear(o, BT, C, 2, false);
        ops_cost_select(o, BT);
        ops_cost_select(o, BT);
        for (int i = 0; i < 2; i++) {
            ops_cost_tensor(o, B, sizeof(int32_t), false); /* clamped positions */
            ops_cost_cross_entropy(o, B);
        }
        ops_cost_add(o, 1);
        break;
    case BRG_BERT_BASE:
        if (!c->add_pooling_layer) break;
        pooler(c, B, o);
        ops_cost_concat_rows(o, B * (T * C + C));
        break;
    case BRG_BERT_TOKEN_CLASSIFICATION:
        ops_cost_dropout(o, BT * C, p);
        ops_cost_linear(o, BT, C, L, false);
        ops_cost_cross_entropy(o, BT);
        break;
    case BRG_BERT_MULTIPLE_CHOICE: /* B here is examples x choices */
        pooler(c, B, o);
        ops_cost_dropout(o, B * C, p);
        ops_cost_linear(o, B, C, 1, false);
        ops_cost_reshape(o, B);
        ops_cost_cross_entropy(o, B);
        break;
    case BRG_BERT_PRETRAINING:
        mlm_scores(c, BT, o);
        pooler(c, B, o);
        ops_cost_linear(o, B, C, 2, false);
        ops_cost_concat_rows(o, B * (T * V + 2));
        /* the packed logits are only an output (the losses read the scores): no gradient */
        if (o->record) o->grad -= ops_cost_align(B * (T * V + 2) * sizeof(float));
        ops_cost_cross_entropy_spent(o, BT, V);
        ops_cost_cross_entropy(o, B);
        ops_cost_add(o, 1);
        break;
    }
}

static void memory(const brg_model *m, int block, int64_t batch, int64_t seq, ops_cost *o) {
    const brg_bert_config *c = cfg_of(m);
    double B = (double)batch, T = (double)seq;
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: embeddings(c, B * T, o); break;
    case BRG_BLOCK_LAYER: layer(c, B, T, o); break;
    case BRG_BLOCK_HEAD: head(c, B, T, o); break;
    }
}

brg_status bert_block_cost(const brg_model *m, int block, int64_t B, int64_t T, brg_block_cost *out) {
    const brg_bert_config *c = cfg_of(m);
    double C = (double)c->hidden_size, I = (double)c->intermediate_size, BT = (double)(B * T);
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: out->flops = 2 * BT * C; break; /* the three embeddings' sum */
    case BRG_BLOCK_LAYER: out->flops = BT * (8 * C * C + 4 * C * I) + 4 * BT * (double)T * C; break;
    case BRG_BLOCK_HEAD: {
        double V = (double)c->vocab_size, L = (double)c->num_labels, Bd = (double)B;
        switch (c->task) {
        case BRG_BERT_MASKED_LM: out->flops = 2 * BT * C * (C + V); break;
        case BRG_BERT_PRETRAINING: out->flops = 2 * BT * C * (C + V) + 2 * Bd * C * (C + 2); break;
        case BRG_BERT_QUESTION_ANSWERING: out->flops = 2 * BT * C * 2; break;
        case BRG_BERT_TOKEN_CLASSIFICATION: out->flops = 2 * BT * C * L; break;
        case BRG_BERT_BASE: out->flops = c->add_pooling_layer ? 2 * Bd * C * C : 0; break;
        default: out->flops = 2 * Bd * C * (C + L); break; /* pooler and classifier */
        }
        break;
    }
    }
    model_cost_memory(memory, m, block, B, T, out);
    return BRG_OK;
}
