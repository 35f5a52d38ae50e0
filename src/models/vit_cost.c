/* ViT's block costs for plans: forward FLOPs (2 per multiply-add, matmuls and attention only)
 * and memory, by replaying vit.c's forward through the ops' cost functions. Keep the two in
 * step: tests/test_memory_plan.c holds the sum to what a device measures. Images have no
 * sequence length: the patches follow from config.json. */
#include "brigade/vit.h"
#include "models/model_cost.h"

/* vit.c's model config begins with the public struct. */
static const brg_vit_config *cfg_of(const brg_model *m) { return m->config; }

static void embeddings(const brg_vit_config *c, double B, ops_cost *o) {
    double C = (double)c->hidden_size, N = (double)brg_vit_num_patches(c);
    double K = (double)(c->num_channels * c->patch_h * c->patch_w);
    ops_cost_patch_unfold(o, B * N * K);
    ops_cost_reshape(o, C * K); /* the projection weight as a matrix: its gradient is per micro-batch */
    ops_cost_linear(o, B * N, K, C, false);
    ops_cost_prepend_token(o, B * (N + 1) * C);
    ops_cost_add_broadcast(o, B * (N + 1) * C);
    ops_cost_dropout(o, B * (N + 1) * C, c->hidden_dropout_prob);
    o->out[0] = B * (N + 1) * C;
}

static void layer(const brg_vit_config *c, double B, ops_cost *o) {
    double C = (double)c->hidden_size, I = (double)c->intermediate_size, S = (double)brg_vit_num_patches(c) + 1;
    double BS = B * S;
    float p = c->hidden_dropout_prob;
    ops_cost_layer_norm(o, BS, C);
    model_cost_self_attention(o, B, S, C, (double)c->num_attention_heads);
    ops_cost_linear(o, BS, C, C, false);
    ops_cost_dropout(o, BS * C, p);
    ops_cost_add(o, BS * C);
    ops_cost_layer_norm(o, BS, C);
    ops_cost_linear_act(o, BS, C, I, false, true);
    ops_cost_linear(o, BS, I, C, false);
    ops_cost_dropout(o, BS * C, p);
    ops_cost_add(o, BS * C);
    o->in[0] = o->out[0] = BS * C;
    o->in_used[0] = true;
}

static void head(const brg_vit_config *c, double B, ops_cost *o) {
    double C = (double)c->hidden_size, S = (double)brg_vit_num_patches(c) + 1, L = (double)c->num_labels;
    o->in[0] = B * S * C;
    o->in_used[0] = true;
    if (c->task == BRG_VIT_BASE) { /* final norm, pooler over [CLS], both packed per row */
        double P = (double)(c->pooler_output_size > 0 ? c->pooler_output_size : c->hidden_size);
        ops_cost_layer_norm(o, B * S, C);
        ops_cost_select(o, B * C);
        ops_cost_linear(o, B, C, P, false);
        ops_cost_activation(o, B * P);
        ops_cost_concat_rows(o, B * (S * C + P));
        return;
    }
    ops_cost_select(o, B * C);
    ops_cost_layer_norm(o, B, C);
    ops_cost_linear(o, B, C, L, false);
    model_cost_sequence_loss(o, B, L, c->problem_type);
}

static void memory(const brg_model *m, int block, int64_t batch, int64_t seq, ops_cost *o) {
    (void)seq;
    const brg_vit_config *c = cfg_of(m);
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: embeddings(c, (double)batch, o); break;
    case BRG_BLOCK_LAYER: layer(c, (double)batch, o); break;
    case BRG_BLOCK_HEAD: head(c, (double)batch, o); break;
    }
}

brg_status vit_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out) {
    const brg_vit_config *c = cfg_of(m);
    double C = (double)c->hidden_size, I = (double)c->intermediate_size, N = (double)brg_vit_num_patches(c);
    double B = (double)batch, S = N + 1, K = (double)(c->num_channels * c->patch_h * c->patch_w);
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: out->flops = 2 * B * N * K * C; break; /* the patch projection */
    case BRG_BLOCK_LAYER: out->flops = B * S * (8 * C * C + 4 * C * I) + 4 * B * S * S * C; break;
    case BRG_BLOCK_HEAD: out->flops = 2 * B * C * (double)(c->task == BRG_VIT_BASE ? C : c->num_labels); break;
    }
    model_cost_memory(memory, m, block, batch, seq, out);
    return BRG_OK;
}
