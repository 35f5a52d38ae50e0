/* GPT-2's block costs for plans: forward FLOPs (2 per multiply-add, matmuls and attention only;
 * docs/config.md gives the formulas) and memory, by replaying gpt2.c's and gpt2_heads.c's forward
 * through the ops' cost functions. Keep the two in step: tests/test_memory_plan.c holds the sum
 * to what a device measures. */
#include "models/gpt2_internal.h"
#include "models/model_cost.h"

static const brg_gpt2_config *cfg_of(const brg_model *m) { return m->config; }

static void embeddings(const brg_gpt2_config *c, double BT, ops_cost *o) {
    double C = (double)c->n_embd;
    ops_cost_embedding(o, BT, C);                     /* tokens */
    ops_cost_tensor(o, BT, sizeof(int32_t), false);  /* position ids */
    ops_cost_embedding(o, BT, C);                     /* positions */
    ops_cost_add_donated(o, BT * C);
    ops_cost_dropout_donated(o, BT * C, c->embd_pdrop);
    o->out[0] = BT * C;
}

static void layer(const brg_gpt2_config *c, double B, double T, ops_cost *o) {
    double C = (double)c->n_embd, H = (double)c->n_head, F = (double)(c->n_inner ? c->n_inner : 4 * c->n_embd);
    double BT = B * T;
    ops_cost_layer_norm(o, BT, C);
    ops_cost_linear(o, BT, C, 3 * C, true);
    for (int i = 0; i < 3; i++) ops_cost_split_heads(o, BT * C);
    ops_cost_attention(o, B, H, T, T, C / H);
    ops_cost_merge_heads(o, BT * C);
    ops_cost_linear(o, BT, C, C, true);
    ops_cost_dropout_donated(o, BT * C, c->resid_pdrop);
    ops_cost_add_donated(o, BT * C);
    ops_cost_layer_norm(o, BT, C);
    ops_cost_linear_act(o, BT, C, F, true, true);
    ops_cost_linear(o, BT, F, C, true);
    ops_cost_dropout_donated(o, BT * C, c->resid_pdrop);
    ops_cost_add_donated(o, BT * C);
    o->in[0] = o->out[0] = BT * C;
    o->in_used[0] = true;
}

static void head(const brg_gpt2_config *c, double B, double T, ops_cost *o) {
    double C = (double)c->n_embd, BT = B * T, L = (double)c->num_labels;
    o->in[0] = BT * C;
    o->in_used[0] = true;
    ops_cost_layer_norm(o, BT, C);
    switch (c->task) {
    case BRG_GPT2_LM_HEAD:
        ops_cost_linear(o, BT, C, (double)c->vocab_size, false);
        ops_cost_tensor(o, BT, sizeof(int32_t), false); /* shifted labels */
        ops_cost_cross_entropy_spent(o, BT, (double)c->vocab_size);
        break;
    case BRG_GPT2_BASE: break;
    case BRG_GPT2_SEQUENCE_CLASSIFICATION:
        ops_cost_tensor(o, B, sizeof(int32_t), false); /* last non-pad positions */
        ops_cost_gather_positions(o, B * C);
        ops_cost_linear(o, B, C, L, false);
        model_cost_sequence_loss(o, B, L, c->problem_type);
        break;
    case BRG_GPT2_TOKEN_CLASSIFICATION:
        ops_cost_dropout(o, BT * C, c->classifier_dropout >= 0 ? c->classifier_dropout : 0.1f);
        ops_cost_linear(o, BT, C, L, false);
        ops_cost_cross_entropy(o, BT);
        break;
    }
}

static void memory(const brg_model *m, int block, int64_t batch, int64_t seq, ops_cost *o) {
    const brg_gpt2_config *c = cfg_of(m);
    double B = (double)batch, T = (double)seq;
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: embeddings(c, B * T, o); break;
    case BRG_BLOCK_LAYER: layer(c, B, T, o); break;
    case BRG_BLOCK_HEAD: head(c, B, T, o); break;
    }
}

brg_status gpt2_block_cost(const brg_model *m, int block, int64_t B, int64_t T, brg_block_cost *out) {
    const brg_gpt2_config *c = cfg_of(m);
    double C = (double)c->n_embd, F = (double)(c->n_inner ? c->n_inner : 4 * c->n_embd);
    double V = (double)c->vocab_size, BT = (double)(B * T);
    const brg_block *b = &m->blocks[block];
    switch (b->kind) {
    case BRG_BLOCK_EMBEDDINGS: out->flops = BT * C; break; /* token + position embedding sum */
    case BRG_BLOCK_LAYER: out->flops = BT * (8 * C * C + 4 * C * F) + 4 * BT * (double)T * C; break;
    case BRG_BLOCK_HEAD: {
        /* the task head's width: the vocabulary, the labels, or nothing (GPT2Model) */
        double L = c->task == BRG_GPT2_LM_HEAD ? V : c->task == BRG_GPT2_BASE ? 0 : (double)c->num_labels;
        double rows = c->task == BRG_GPT2_SEQUENCE_CLASSIFICATION ? (double)B : BT;
        out->flops = 2 * rows * C * L; /* a tied lm_head: brg_model_block_costs finds it */
        break;
    }
    }
    model_cost_memory(memory, m, block, B, T, out);
    return BRG_OK;
}
