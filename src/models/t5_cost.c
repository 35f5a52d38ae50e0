/* What planning needs of T5 without its weights: the model built from config.json alone, and
 * each block's estimated cost for one micro-batch. */
#include <cJSON.h>
#include <string.h>

#include "io/json.h"
#include "models/model_cost.h"
#include "t5_internal.h"

/* The checkpoint is what decides the head's tie (see brg_t5_load_dir); from the config alone,
 * tie_word_embeddings is the best guess, and the hub's v1.1 configs say false for their
 * separate heads. */
brg_status brg_t5_create_dir(const char *dir, brg_model **out) {
    char path[4200];
    BRG_TRY(brg_json_config_path(dir, path, sizeof path));
    brg_t5_config cfg;
    BRG_TRY(brg_t5_config_load(path, &cfg));
    return brg_t5_create(&cfg, out);
}

/* ---- memory: t5.c's forward replayed through the ops' cost functions (keep the two in step:
 * tests/test_memory_plan.c holds the sum to what a device measures) ---- */

static void activation(const brg_t5_config *c, ops_cost *o, double n) {
    if (c->act == BRG_T5_ACT_RELU) ops_cost_relu(o, n);
    else ops_cost_activation(o, n);
}

/* x + dropout(o(attention(q(n), k(kv), v(kv)))), n = rms_norm(x): queries from Tq rows, keys and
 * values from Tk. */
static void attention_sublayer(const brg_t5_config *c, ops_cost *o, double B, double Tq, double Tk) {
    double C = (double)c->d_model, H = (double)c->num_heads, D = (double)c->d_kv, I = H * D;
    ops_cost_rms_norm(o, B * Tq, C);
    ops_cost_linear(o, B * Tq, C, I, false);
    ops_cost_linear(o, B * Tk, C, I, false);
    ops_cost_linear(o, B * Tk, C, I, false);
    ops_cost_split_heads(o, B * Tq * I);
    ops_cost_split_heads(o, B * Tk * I);
    ops_cost_split_heads(o, B * Tk * I);
    ops_cost_attention(o, B, H, Tq, Tk, D);
    ops_cost_merge_heads(o, B * Tq * I);
    ops_cost_linear(o, B * Tq, I, C, false);
    ops_cost_dropout(o, B * Tq * C, c->dropout_rate);
    ops_cost_add(o, B * Tq * C);
}

static void feed_forward(const brg_t5_config *c, ops_cost *o, double BT) {
    double C = (double)c->d_model, F = (double)c->d_ff;
    ops_cost_rms_norm(o, BT, C);
    ops_cost_linear(o, BT, C, F, false);
    activation(c, o, BT * F);
    if (c->is_gated_act) {
        ops_cost_linear(o, BT, C, F, false);
        ops_cost_mul(o, BT * F);
    }
    ops_cost_dropout(o, BT * F, c->dropout_rate);
    ops_cost_linear(o, BT, F, C, false);
    ops_cost_dropout(o, BT * C, c->dropout_rate);
    ops_cost_add(o, BT * C);
}

static void position_bias(const brg_t5_config *c, ops_cost *o, double T) {
    ops_cost_relative_position_buckets(o, T, T);
    ops_cost_relative_position_bias(o, (double)c->num_heads, T, T);
}

/* The decoder is as long as the encoder here (the block cost has one sequence length); its
 * input ids are derived from the labels. */
static void memory(const brg_model *m, int block, int64_t batch, int64_t seq, ops_cost *o) {
    const brg_t5_config *c = m->config;
    const brg_block *b = &m->blocks[block];
    double B = (double)batch, T = (double)seq, C = (double)c->d_model, BT = B * T;
    switch (b->kind) {
    case BRG_BLOCK_EMBEDDINGS:
        ops_cost_embedding(o, BT, C);
        ops_cost_dropout(o, BT * C, c->dropout_rate);
        o->out[0] = BT * C;
        break;
    case BRG_BLOCK_LAYER:
        o->in[0] = o->out[0] = BT * C;
        o->in_used[0] = true;
        if (b->layer < c->num_layers) {
            position_bias(c, o, T);
            attention_sublayer(c, o, B, T, T);
            feed_forward(c, o, BT);
            if (b->layer == c->num_layers - 1) { /* the encoder's final norm */
                ops_cost_rms_norm(o, BT, C);
                ops_cost_dropout(o, BT * C, c->dropout_rate);
            }
            break;
        }
        if (b->layer == c->num_layers) { /* the decoder starts from the labels, shifted */
            ops_cost_tensor(o, BT, sizeof(int32_t), false);
            ops_cost_embedding(o, BT, C);
            ops_cost_dropout(o, BT * C, c->dropout_rate);
        } else {
            o->in[1] = BT * C; /* the encoder output travels with the decoder's hidden states */
            o->in_used[1] = true;
        }
        position_bias(c, o, T);
        attention_sublayer(c, o, B, T, T); /* self */
        attention_sublayer(c, o, B, T, T); /* cross, over the encoder output */
        feed_forward(c, o, BT);
        break;
    case BRG_BLOCK_HEAD:
        o->in[0] = BT * C;
        o->in_used[0] = true;
        if (c->task == BRG_T5_ENCODER) break; /* T5EncoderModel's head hands the encoder output on */
        if (c->num_decoder_layers > 0) o->in[1] = BT * C; /* the encoder output, carried but unused */
        ops_cost_rms_norm(o, BT, C);
        ops_cost_dropout(o, BT * C, c->dropout_rate);
        if (c->scale_decoder_outputs) ops_cost_scale(o, BT * C);
        ops_cost_linear(o, BT, C, (double)c->vocab_size, false);
        ops_cost_cross_entropy_spent(o, BT, (double)c->vocab_size);
        break;
    }
}

/* Forward FLOPs (2 per multiply-add; matmuls and attention only), with the encoder and decoder
 * both `seq` tokens long; memory from the forward's ops (above). */
brg_status brg_t5_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out) {
    if (block < 0 || block >= m->n_blocks) return brg_error(BRG_ERR_INVALID_ARG, "T5 has no block %d", block);
    const brg_t5_config *c = m->config;
    const brg_block *b = &m->blocks[block];
    double C = (double)c->d_model, I = (double)(c->num_heads * c->d_kv), F = (double)c->d_ff;
    double V = (double)c->vocab_size, T = (double)seq, BT = (double)(batch * seq);
    double ff_mats = c->is_gated_act ? 3 : 2;
    out->layer = b->layer;
    switch (b->kind) {
    case BRG_BLOCK_EMBEDDINGS: out->flops = 0; break; /* a lookup */
    case BRG_BLOCK_LAYER:
        /* q, k, v, o and the two attention products; the feed-forward; cross-attention */
        out->flops = BT * (8 * C * I + 4 * T * I) + 2 * BT * C * F * ff_mats;
        if (b->layer >= c->num_layers) out->flops += BT * (8 * C * I + 4 * T * I);
        break;
    case BRG_BLOCK_HEAD: out->flops = c->task == BRG_T5_ENCODER ? 0 : 2 * BT * C * V; break;
    }
    model_cost_memory(memory, m, block, batch, seq, out);
    return BRG_OK;
}
