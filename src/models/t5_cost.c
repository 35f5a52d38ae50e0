/* What planning needs of T5 without its weights: the model built from config.json alone, and
 * each block's estimated cost for one micro-batch. */
#include <cJSON.h>
#include <string.h>

#include "io/json.h"
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

/* Parameters the block reads through an alias from a block that owns them. */
static void tied_reads(const brg_model *m, int block, brg_block_cost *out) {
    out->tied_params = 0;
    out->tied_owner = -1;
    for (int i = 0; i < m->n_aliases; i++) {
        const brg_param_alias *a = &m->aliases[i];
        int owner = m->params[a->param].block;
        if (a->block != block || owner == block) continue;
        out->tied_params += brg_tensor_numel(m->params[a->param].tensor);
        out->tied_owner = owner;
    }
}

/* Forward FLOPs (2 per multiply-add; matmuls and attention only) and saved FP32 elements, with
 * the encoder and decoder both `seq` tokens long. The fused attention keeps one statistic per
 * query row, not the [T, T] probabilities; each layer keeps its [H, T, T] position bias. */
brg_status brg_t5_block_cost(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out) {
    if (block < 0 || block >= m->n_blocks) return brg_error(BRG_ERR_INVALID_ARG, "T5 has no block %d", block);
    const brg_t5_config *c = m->config;
    const brg_block *b = &m->blocks[block];
    double C = (double)c->d_model, I = (double)(c->num_heads * c->d_kv), F = (double)c->d_ff;
    double V = (double)c->vocab_size, T = (double)seq, BT = (double)(batch * seq);
    double ff_mats = c->is_gated_act ? 3 : 2, ff_saved = c->is_gated_act ? 4 : 2;
    double bias = (double)c->num_heads * T * T, saved = 0, input = BT * C;
    out->layer = b->layer;
    tied_reads(m, block, out);
    bool decoder = b->kind == BRG_BLOCK_LAYER && b->layer >= c->num_layers;
    switch (b->kind) {
    case BRG_BLOCK_EMBEDDINGS:
        out->flops = 0;       /* a lookup */
        saved = BT * (C + 1); /* ids, dropout mask */
        input = BT;
        break;
    case BRG_BLOCK_LAYER:
        /* q, k, v, o and the two attention products; the feed-forward */
        out->flops = BT * (8 * C * I + 4 * T * I) + 2 * BT * C * F * ff_mats;
        /* residual input, norm output, q, k, v, context; feed-forward activations; statistics */
        saved = BT * (2 * C + 4 * I + F * ff_saved + 2 * C + 3) + bias;
        if (decoder) {
            out->flops += BT * (8 * C * I + 4 * T * I); /* cross-attention */
            saved += BT * (2 * C + 4 * I + 2);
            input = 2 * BT * C; /* hidden states and the encoder output */
        }
        if (b->layer == c->num_layers - 1) saved += BT * (C + 1); /* the encoder's final norm */
        break;
    case BRG_BLOCK_HEAD:
        if (c->task == BRG_T5_ENCODER) { /* T5EncoderModel's head hands the encoder output on */
            out->flops = 0;
            break;
        }
        out->flops = 2 * BT * C * V;
        saved = BT * (2 * C + 2 + V); /* final norm in/out and statistics, the logits' softmax */
        break;
    }
    out->saved_bytes = (int64_t)(4 * saved);
    out->input_bytes = (int64_t)(4 * input);
    return BRG_OK;
}
