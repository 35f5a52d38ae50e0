/* T5 as transformers' T5ForConditionalGeneration: pre-norm blocks with RMS norms, unscaled
 * attention with a relative position bias from each stack's first layer, ReLU or gated-GELU
 * feed-forward, cross-attention over the encoder output, and an LM head tied to the shared
 * embedding (with the decoder output rescaled by d_model^-0.5) or separate. Block layout and
 * the bundle's use: see brigade/t5.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/precision.h"
#include "io/json.h"
#include "t5_internal.h"

static const t5_state *state_of(const brg_model *m) { return m->config; }
static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }

/* Each dropout site gets its own key range so masks never repeat within a micro-batch. */
enum { SITE_EMBED, SITE_SELF_PROBS, SITE_SELF_OUT, SITE_CROSS_PROBS, SITE_CROSS_OUT, SITE_FF_INNER, SITE_FF_OUT,
       SITE_FINAL };
static uint64_t dropout_offset(int block, int site) { return ((uint64_t)block * 16 + (uint64_t)site) << 40; }

static brg_status dropout(brg_bundle *b, const brg_t5_config *c, int block, int site, brg_tensor *x,
                          brg_tape *tape, brg_tensor **y) {
    return brg_dropout(tape, x, c->dropout_rate, b->training, b->seed, dropout_offset(block, site), y);
}

/* ---- inputs ---- */

static brg_status check_ids(const brg_tensor *t, const char *name) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "T5 needs %s", name);
    if (t->dtype != BRG_DTYPE_I32 || t->ndim != 2 || !brg_tensor_is_contiguous(t) || t->shape[0] < 1 || t->shape[1] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be a contiguous I32 [batch, sequence] tensor", name);
    return BRG_OK;
}

static brg_status check_mask(const brg_tensor *mask, const char *name, int64_t B, int64_t T) {
    if (!mask) return BRG_OK;
    if (mask->dtype != BRG_DTYPE_F32 || mask->ndim != 2 || mask->shape[0] != B || mask->shape[1] != T)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be F32 [%lld, %lld]", name, (long long)B, (long long)T);
    return BRG_OK;
}

/* transformers' _shift_right: decoder_start_token_id first, labels moved one to the right, -100
 * replaced by pad_token_id. */
static brg_status shift_right(brg_tape *tape, const brg_t5_config *c, const brg_tensor *labels, brg_tensor **out) {
    if (c->decoder_start_token_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "decoder_input_ids are not given and config.json has no "
                         "decoder_start_token_id to derive them from labels");
    if (c->pad_token_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "decoder_input_ids are not given and config.json has no pad_token_id "
                         "to replace -100 in the shifted labels");
    int64_t B = labels->shape[0], T = labels->shape[1];
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 2, labels->shape, false, "decoder_input_ids", out));
    const int32_t *l = labels->data;
    int32_t *d = (*out)->data;
    for (int64_t i = 0; i < B; i++) {
        d[i * T] = (int32_t)c->decoder_start_token_id;
        for (int64_t t = 1; t < T; t++) {
            int32_t v = l[i * T + t - 1];
            if (v != -100 && (v < 0 || v >= c->vocab_size))
                return brg_error(BRG_ERR_INVALID_ARG,
                                 "labels[%lld][%lld] = %d is neither -100 nor a token id below %lld", (long long)i,
                                 (long long)(t - 1), v, (long long)c->vocab_size);
            d[i * T + t] = v == -100 ? (int32_t)c->pad_token_id : v;
        }
    }
    return BRG_OK;
}

static brg_status decoder_ids(brg_tape *tape, const brg_t5_config *c, const brg_bundle *b, brg_tensor **out) {
    brg_tensor *dec = brg_bundle_input(b, "decoder_input_ids"), *labels = brg_bundle_input(b, "labels");
    if (dec) {
        BRG_TRY(check_ids(dec, "decoder_input_ids"));
        *out = dec;
        return BRG_OK;
    }
    if (!labels) return brg_error(BRG_ERR_INVALID_ARG, "T5 needs decoder_input_ids or labels to derive them from");
    BRG_TRY(check_ids(labels, "labels"));
    return shift_right(tape, c, labels, out);
}

/* ---- sub-layers ---- */

typedef struct attn_call {
    const t5_attn_idx *w;
    brg_tensor *x, *kv; /* queries from x, keys and values from kv */
    bool causal;
    brg_tensor *key_mask, *bias;
    int block, probs_site;
} attn_call;

static brg_status attention(brg_model *m, brg_tape *tape, brg_bundle *b, const attn_call *a, brg_tensor **out) {
    const brg_t5_config *c = &state_of(m)->cfg;
    int64_t H = c->num_heads, D = c->d_kv;
    brg_tensor *pq, *pk, *pv, *q, *k, *v, *att, *merged;
    BRG_TRY(brg_linear(tape, a->x, P(m, a->w->q), NULL, false, &pq));
    BRG_TRY(brg_linear(tape, a->kv, P(m, a->w->k), NULL, false, &pk));
    BRG_TRY(brg_linear(tape, a->kv, P(m, a->w->v), NULL, false, &pv));
    BRG_TRY(brg_split_heads(tape, pq, 0, H, D, &q));
    BRG_TRY(brg_split_heads(tape, pk, 0, H, D, &k));
    BRG_TRY(brg_split_heads(tape, pv, 0, H, D, &v));
    /* T5 folds no 1/sqrt(d_kv) into the scores. */
    brg_attention_opts opts = {.scale = 1.0f, .causal = a->causal, .key_mask = a->key_mask, .bias = a->bias,
                               .dropout = b->training ? c->dropout_rate : 0.0f, .seed = b->seed,
                               .offset = dropout_offset(a->block, a->probs_site)};
    BRG_TRY(brg_attention(tape, q, k, v, &opts, &att));
    BRG_TRY(brg_merge_heads(tape, att, &merged));
    return brg_linear(tape, merged, P(m, a->w->o), NULL, false, out);
}

/* x + dropout(attention(layer_norm(x), kv)); kv NULL means self-attention. */
static brg_status attention_sublayer(brg_model *m, brg_tape *tape, brg_bundle *b, attn_call *a, int out_site,
                                     brg_tensor **out) {
    const brg_t5_config *c = &state_of(m)->cfg;
    brg_tensor *x = a->x, *n, *att, *dropped;
    BRG_TRY(brg_rms_norm(tape, x, P(m, a->w->ln), c->layer_norm_epsilon, &n));
    a->x = n;
    a->kv = a->kv ? a->kv : n;
    BRG_TRY(attention(m, tape, b, a, &att));
    BRG_TRY(dropout(b, c, a->block, out_site, att, tape, &dropped));
    return brg_add(tape, x, dropped, out);
}

static brg_status activation(const brg_t5_config *c, brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    switch (c->act) {
    case BRG_T5_ACT_RELU: return brg_relu(tape, x, y);
    case BRG_T5_ACT_GELU_ERF: return brg_activation_op(tape, x, BRG_ACT_GELU_ERF, y);
    case BRG_T5_ACT_GELU_TANH: return brg_activation_op(tape, x, BRG_ACT_GELU_TANH, y);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown T5 activation");
}

/* x + dropout(wo(dropout(act(wi(n))))) or, gated, wo(act(wi_0(n)) * wi_1(n)), n = layer_norm(x). */
static brg_status feed_forward(brg_model *m, brg_tape *tape, brg_bundle *b, const t5_layer_idx *w, int block,
                               brg_tensor *x, brg_tensor **out) {
    const brg_t5_config *c = &state_of(m)->cfg;
    brg_tensor *n, *h, *a, *inner, *proj, *dropped;
    BRG_TRY(brg_rms_norm(tape, x, P(m, w->ff_ln), c->layer_norm_epsilon, &n));
    if (c->is_gated_act) {
        brg_tensor *lin;
        BRG_TRY(brg_linear(tape, n, P(m, w->wi_0), NULL, false, &h));
        BRG_TRY(activation(c, tape, h, &a));
        BRG_TRY(brg_linear(tape, n, P(m, w->wi_1), NULL, false, &lin));
        BRG_TRY(brg_mul(tape, a, lin, &inner));
    } else {
        BRG_TRY(brg_linear(tape, n, P(m, w->wi), NULL, false, &h));
        BRG_TRY(activation(c, tape, h, &inner));
    }
    BRG_TRY(dropout(b, c, block, SITE_FF_INNER, inner, tape, &inner));
    BRG_TRY(brg_linear(tape, inner, P(m, w->wo), NULL, false, &proj));
    BRG_TRY(dropout(b, c, block, SITE_FF_OUT, proj, tape, &dropped));
    return brg_add(tape, x, dropped, out);
}

/* transformers clamps a half T5's hidden states after each sublayer (T5Block); brigade does so
 * whenever the products run in fp16, where a value past fp16's range would overflow next. */
static brg_status overflow_guard(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    if (brg_compute_dtype() != BRG_DTYPE_F16) return *y = x, BRG_OK;
    return brg_fp16_overflow_guard(tape, x, y);
}

static brg_status position_bias(brg_model *m, brg_tape *tape, int table, int64_t T, bool bidirectional,
                                brg_tensor **bias) {
    const brg_t5_config *c = &state_of(m)->cfg;
    brg_tensor *buckets;
    BRG_TRY(brg_relative_position_buckets(tape, T, T, bidirectional, c->relative_attention_num_buckets,
                                          c->relative_attention_max_distance, &buckets));
    return brg_relative_position_bias(tape, P(m, table), buckets, bias);
}

static brg_status check_hidden(const brg_tensor *h, const char *what, int64_t B, int64_t T, int64_t C) {
    if (!h) return brg_error(BRG_ERR_INVALID_ARG, "no %s reaches this block", what);
    if (h->ndim != 3 || h->shape[0] != B || h->shape[1] != T || h->shape[2] != C)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be [%lld, %lld, %lld]", what, (long long)B, (long long)T,
                         (long long)C);
    return BRG_OK;
}

/* ---- blocks ---- */

static brg_status encoder_embeddings(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const t5_state *s = state_of(m);
    brg_tensor *ids = brg_bundle_input(b, "input_ids");
    BRG_TRY(check_ids(ids, "input_ids"));
    BRG_TRY(check_mask(brg_bundle_input(b, "attention_mask"), "attention_mask", ids->shape[0], ids->shape[1]));
    brg_tensor *x, *hidden;
    BRG_TRY(brg_embedding(tape, ids, P(m, s->shared), &x));
    BRG_TRY(dropout(b, &s->cfg, 0, SITE_EMBED, x, tape, &hidden));
    return brg_bundle_carry(b, "hidden", hidden);
}

static brg_status encoder_layer(brg_model *m, int layer, int block, brg_tape *tape, brg_bundle *b) {
    const t5_state *s = state_of(m);
    const t5_layer_idx *w = &s->layers[layer];
    const brg_tensor *ids = brg_bundle_input(b, "input_ids");
    brg_tensor *mask = brg_bundle_input(b, "attention_mask"), *hidden = brg_bundle_carried(b, "hidden");
    BRG_TRY(check_ids(ids, "input_ids"));
    int64_t B = ids->shape[0], T = ids->shape[1];
    BRG_TRY(check_mask(mask, "attention_mask", B, T));
    BRG_TRY(check_hidden(hidden, "encoder hidden state", B, T, s->cfg.d_model));
    brg_tensor *bias, *r, *h;
    BRG_TRY(position_bias(m, tape, w->rel_bias, T, true, &bias));
    attn_call a = {&w->self, hidden, NULL, false, mask, bias, block, SITE_SELF_PROBS};
    BRG_TRY(attention_sublayer(m, tape, b, &a, SITE_SELF_OUT, &r));
    BRG_TRY(overflow_guard(tape, r, &r));
    BRG_TRY(feed_forward(m, tape, b, w, block, r, &h));
    BRG_TRY(overflow_guard(tape, h, &h));
    if (layer + 1 < s->cfg.num_layers) return brg_bundle_carry(b, "hidden", h);
    /* The last encoder layer ends the stack: its output is the encoder output. */
    brg_tensor *n, *out;
    BRG_TRY(brg_rms_norm(tape, h, P(m, s->enc_final_ln), s->cfg.layer_norm_epsilon, &n));
    BRG_TRY(dropout(b, &s->cfg, block, SITE_FINAL, n, tape, &out));
    return brg_bundle_carry(b, "hidden", out);
}

/* The first decoder block turns the encoder output into encoder_hidden and starts the decoder's
 * hidden states from the decoder tokens. */
static brg_status start_decoder(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const t5_state *s = state_of(m);
    const brg_tensor *input_ids = brg_bundle_input(b, "input_ids");
    brg_tensor *encoded = brg_bundle_carried(b, "hidden");
    BRG_TRY(check_hidden(encoded, "encoder output", input_ids->shape[0], input_ids->shape[1], s->cfg.d_model));
    brg_tensor *ids, *x, *hidden;
    BRG_TRY(decoder_ids(tape, &s->cfg, b, &ids));
    if (ids->shape[0] != input_ids->shape[0])
        return brg_error(BRG_ERR_INVALID_ARG, "decoder_input_ids has batch %lld, input_ids %lld",
                         (long long)ids->shape[0], (long long)input_ids->shape[0]);
    BRG_TRY(brg_embedding(tape, ids, P(m, s->shared), &x));
    BRG_TRY(brg_bundle_carry(b, "encoder_hidden", encoded));
    BRG_TRY(dropout(b, &s->cfg, block, SITE_EMBED, x, tape, &hidden));
    return brg_bundle_carry(b, "hidden", hidden);
}

/* The decoder length: decoder_input_ids' when given, else labels'. */
static int64_t decoder_length(const brg_bundle *b) {
    const brg_tensor *dec = brg_bundle_input(b, "decoder_input_ids");
    const brg_tensor *t = dec ? dec : brg_bundle_input(b, "labels");
    return t && t->ndim == 2 ? t->shape[1] : -1;
}

static brg_status decoder_layer(brg_model *m, int layer, int block, brg_tape *tape, brg_bundle *b) {
    const t5_state *s = state_of(m);
    const t5_layer_idx *w = &s->layers[s->cfg.num_layers + layer];
    const brg_tensor *ids = brg_bundle_input(b, "input_ids");
    brg_tensor *mask = brg_bundle_input(b, "attention_mask");
    brg_tensor *dec_mask = brg_bundle_input(b, "decoder_attention_mask");
    BRG_TRY(check_ids(ids, "input_ids"));
    int64_t B = ids->shape[0], Te = ids->shape[1], Td = decoder_length(b), C = s->cfg.d_model;
    if (Td < 1) return brg_error(BRG_ERR_INVALID_ARG, "T5 needs decoder_input_ids or labels to derive them from");
    BRG_TRY(check_mask(mask, "attention_mask", B, Te));
    if (layer == 0) BRG_TRY(start_decoder(m, block, tape, b));
    /* read after start_decoder, which hands the encoder output on and starts the decoder's */
    brg_tensor *hidden = brg_bundle_carried(b, "hidden"), *encoded = brg_bundle_carried(b, "encoder_hidden");
    BRG_TRY(check_hidden(hidden, "decoder hidden state", B, Td, C));
    BRG_TRY(check_hidden(encoded, "encoder output (encoder_hidden)", B, Te, C));
    BRG_TRY(check_mask(dec_mask, "decoder_attention_mask", B, Td));
    brg_tensor *bias, *r1, *r2;
    BRG_TRY(position_bias(m, tape, w->rel_bias, Td, false, &bias));
    attn_call self = {&w->self, hidden, NULL, true, dec_mask, bias, block, SITE_SELF_PROBS};
    BRG_TRY(attention_sublayer(m, tape, b, &self, SITE_SELF_OUT, &r1));
    BRG_TRY(overflow_guard(tape, r1, &r1));
    attn_call cross = {&w->cross, r1, encoded, false, mask, NULL, block, SITE_CROSS_PROBS};
    BRG_TRY(attention_sublayer(m, tape, b, &cross, SITE_CROSS_OUT, &r2));
    BRG_TRY(overflow_guard(tape, r2, &r2));
    brg_tensor *h, *out;
    BRG_TRY(feed_forward(m, tape, b, w, block, r2, &h));
    BRG_TRY(overflow_guard(tape, h, &out));
    return brg_bundle_carry(b, "hidden", out);
}

static brg_status head(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const t5_state *s = state_of(m);
    const brg_t5_config *c = &s->cfg;
    brg_tensor *hidden = brg_bundle_carried(b, "hidden"), *labels = brg_bundle_input(b, "labels");
    if (!hidden || hidden->ndim != 3 || hidden->shape[2] != c->d_model)
        return brg_error(BRG_ERR_INVALID_ARG, "no decoder hidden state [B, Td, %lld] reaches the head",
                         (long long)c->d_model);
    brg_tensor *n, *d, *x;
    BRG_TRY(brg_rms_norm(tape, hidden, P(m, s->dec_final_ln), c->layer_norm_epsilon, &n));
    BRG_TRY(dropout(b, c, block, SITE_FINAL, n, tape, &d));
    x = d;
    if (c->scale_decoder_outputs) BRG_TRY(brg_scale(tape, d, (float)(1.0 / sqrt((double)c->d_model)), &x));
    BRG_TRY(brg_linear(tape, x, P(m, s->lm_head), NULL, false, &b->logits));
    b->loss = NULL;
    if (!labels) return BRG_OK;
    BRG_TRY(check_ids(labels, "labels"));
    if (labels->shape[0] != x->shape[0] || labels->shape[1] != x->shape[1])
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be [%lld, %lld], the decoder's batch and length",
                         (long long)x->shape[0], (long long)x->shape[1]);
    brg_tape_donate(tape, b->logits); /* the linear's backward reads no logits: the loss may spend them */
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

brg_status t5_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const brg_block *blk = &m->blocks[block];
    int64_t Le = state_of(m)->cfg.num_layers;
    switch (blk->kind) {
    case BRG_BLOCK_EMBEDDINGS: return encoder_embeddings(m, tape, b);
    case BRG_BLOCK_LAYER:
        if (blk->layer < Le) return encoder_layer(m, blk->layer, block, tape, b);
        return decoder_layer(m, blk->layer - (int)Le, block, tape, b);
    case BRG_BLOCK_HEAD: return head(m, block, tape, b);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown block kind");
}

/* No shift: every label that is not -100 counts. */
static brg_loss_items t5_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    (void)m;
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    int64_t n = 0, total = brg_tensor_numel(labels);
    for (int64_t i = 0; i < total; i++) n += brg_tensor_get_int(labels, i) != -100;
    return (brg_loss_items){(double)n, 0};
}

static brg_status t5_save_config(const brg_model *m, const char *dir) {
    const t5_state *s = state_of(m);
    return t5_config_save(&s->cfg, s->extra, dir);
}

void t5_free_config(void *p) {
    t5_state *s = p;
    if (!s) return;
    cJSON_Delete(s->extra);
    free(s->layers);
    free(s);
}

static const brg_input_decl t5_inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},
    {.name = "decoder_input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "decoder_attention_mask", .kind = BRG_INPUT_MASK, .like = "decoder_input_ids",
     .needs = "decoder_input_ids"},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL}, /* the end */
};
/* The encoder output travels on beside the decoder's hidden states, for cross-attention. */
static const char *const t5_carried[] = {"hidden", "encoder_hidden", NULL};

static const brg_model_ops t5_ops = {
    .architecture = "T5ForConditionalGeneration",
    .forward_block = t5_forward_block,
    .save_config = t5_save_config,
    .free_config = t5_free_config,
    .count_loss_items = t5_count_loss_items,
    .inputs = t5_inputs,
    .carried = t5_carried,
    .token_loss = true,
};

/* ---- construction ---- */

typedef struct builder {
    brg_model *m;
    t5_state *s;
    char prefix[64]; /* "encoder.block.3." */
} builder;

static brg_status add(builder *bd, const char *suffix, int64_t rows, int64_t cols, brg_init_kind init, float std,
                      int *index) {
    char name[BRG_NAME_MAX];
    if (snprintf(name, sizeof name, "%s%s", bd->prefix, suffix) >= (int)sizeof name)
        return brg_error(BRG_ERR_INVALID_ARG, "parameter name too long: %s%s", bd->prefix, suffix);
    int64_t shape[2] = {rows, cols};
    bool norm = cols == 0; /* the 1-d layer-norm weights, which the Trainer keeps out of weight decay */
    return brg_model_add_param(bd->m, name, norm ? 1 : 2, shape, init, std, norm, index);
}

static brg_status add_norm(builder *bd, const char *suffix, int *index) {
    return add(bd, suffix, bd->s->cfg.d_model, 0, BRG_INIT_ONES, 0.0f, index);
}

/* The std of each weight is T5PreTrainedModel._init_weights'. */
static brg_status add_attention(builder *bd, const char *sub, t5_attn_idx *w) {
    const brg_t5_config *c = &bd->s->cfg;
    int64_t C = c->d_model, inner = c->num_heads * c->d_kv;
    float f = c->initializer_factor;
    char n[96];
#define ATTN(field, rows, cols, std)                                 \
    snprintf(n, sizeof n, "%s.%s.weight", sub, #field);              \
    BRG_TRY(add(bd, n, rows, cols, BRG_INIT_NORMAL, std, &w->field))
    ATTN(q, inner, C, f / sqrtf((float)(C * c->d_kv)));
    ATTN(k, inner, C, f / sqrtf((float)C));
    ATTN(v, inner, C, f / sqrtf((float)C));
    ATTN(o, C, inner, f / sqrtf((float)inner));
#undef ATTN
    return BRG_OK;
}

static brg_status add_relative_bias(builder *bd, int layer, int *table) {
    const brg_t5_config *c = &bd->s->cfg;
    const char *suffix = "layer.0.SelfAttention.relative_attention_bias.weight";
    if (layer == 0)
        return add(bd, suffix, c->relative_attention_num_buckets, c->num_heads, BRG_INIT_NORMAL,
                   c->initializer_factor / sqrtf((float)c->d_model), table);
    char name[BRG_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", bd->prefix, suffix);
    return brg_model_add_alias(bd->m, name, *table);
}

static brg_status add_feed_forward(builder *bd, int sub, t5_layer_idx *w) {
    const brg_t5_config *c = &bd->s->cfg;
    int64_t C = c->d_model, F = c->d_ff;
    float f = c->initializer_factor, in_std = f / sqrtf((float)C), out_std = f / sqrtf((float)F);
    char n[96];
    w->wi = w->wi_0 = w->wi_1 = -1;
    if (c->is_gated_act) {
        snprintf(n, sizeof n, "layer.%d.DenseReluDense.wi_0.weight", sub);
        BRG_TRY(add(bd, n, F, C, BRG_INIT_NORMAL, in_std, &w->wi_0));
        snprintf(n, sizeof n, "layer.%d.DenseReluDense.wi_1.weight", sub);
        BRG_TRY(add(bd, n, F, C, BRG_INIT_NORMAL, in_std, &w->wi_1));
    } else {
        snprintf(n, sizeof n, "layer.%d.DenseReluDense.wi.weight", sub);
        BRG_TRY(add(bd, n, F, C, BRG_INIT_NORMAL, in_std, &w->wi));
    }
    snprintf(n, sizeof n, "layer.%d.DenseReluDense.wo.weight", sub);
    BRG_TRY(add(bd, n, C, F, BRG_INIT_NORMAL, out_std, &w->wo));
    snprintf(n, sizeof n, "layer.%d.layer_norm.weight", sub);
    return add_norm(bd, n, &w->ff_ln);
}

static brg_status add_layer(builder *bd, bool decoder, int layer, int *table) {
    const char *stack = decoder ? "decoder" : "encoder";
    t5_layer_idx *w = &bd->s->layers[(decoder ? bd->s->cfg.num_layers : 0) + layer];
    char name[48];
    snprintf(name, sizeof name, "%s.block.%d", stack, layer);
    BRG_TRY(brg_model_add_block(bd->m, name, BRG_BLOCK_LAYER, (int)(decoder ? bd->s->cfg.num_layers : 0) + layer));
    snprintf(bd->prefix, sizeof bd->prefix, "%s.", name);
    if (decoder && layer == 0) BRG_TRY(brg_model_add_alias(bd->m, "decoder.embed_tokens.weight", bd->s->shared));
    BRG_TRY(add_attention(bd, "layer.0.SelfAttention", &w->self));
    BRG_TRY(add_relative_bias(bd, layer, table));
    w->rel_bias = *table;
    BRG_TRY(add_norm(bd, "layer.0.layer_norm.weight", &w->self.ln));
    w->cross = (t5_attn_idx){-1, -1, -1, -1, -1};
    if (decoder) {
        BRG_TRY(add_attention(bd, "layer.1.EncDecAttention", &w->cross));
        BRG_TRY(add_norm(bd, "layer.1.layer_norm.weight", &w->cross.ln));
    }
    BRG_TRY(add_feed_forward(bd, decoder ? 2 : 1, w));
    bd->prefix[0] = '\0';
    if (!decoder && layer + 1 == bd->s->cfg.num_layers)
        BRG_TRY(add_norm(bd, "encoder.final_layer_norm.weight", &bd->s->enc_final_ln));
    return BRG_OK;
}

static brg_status build(builder *bd) {
    const brg_t5_config *c = &bd->s->cfg;
    float f = c->initializer_factor;
    bd->prefix[0] = '\0';
    BRG_TRY(brg_model_add_block(bd->m, "encoder.embeddings", BRG_BLOCK_EMBEDDINGS, -1));
    BRG_TRY(add(bd, "shared.weight", c->vocab_size, c->d_model, BRG_INIT_NORMAL, f, &bd->s->shared));
    BRG_TRY(brg_model_add_alias(bd->m, "encoder.embed_tokens.weight", bd->s->shared));
    int enc_table = -1, dec_table = -1;
    for (int l = 0; l < c->num_layers; l++) BRG_TRY(add_layer(bd, false, l, &enc_table));
    /* T5EncoderModel: the encoder's output is the model's; its head holds nothing */
    if (c->task == BRG_T5_ENCODER) return brg_model_add_block(bd->m, "head", BRG_BLOCK_HEAD, -1);
    for (int l = 0; l < c->num_decoder_layers; l++) BRG_TRY(add_layer(bd, true, l, &dec_table));
    BRG_TRY(brg_model_add_block(bd->m, "head", BRG_BLOCK_HEAD, -1));
    BRG_TRY(add_norm(bd, "decoder.final_layer_norm.weight", &bd->s->dec_final_ln));
    if (!c->tie_word_embeddings)
        return add(bd, "lm_head.weight", c->vocab_size, c->d_model, BRG_INIT_NORMAL, f, &bd->s->lm_head);
    bd->s->lm_head = bd->s->shared;
    return brg_model_add_alias(bd->m, "lm_head.weight", bd->s->shared);
}

/* Takes ownership of `extra` (NULL allowed), on failure too. */
static brg_status create(const brg_t5_config *cfg, cJSON *extra, brg_model **out) {
    brg_status st = brg_t5_config_validate(cfg);
    t5_state *s = st == BRG_OK ? calloc(1, sizeof *s) : NULL;
    if (s) s->layers = calloc((size_t)(cfg->num_layers + cfg->num_decoder_layers), sizeof *s->layers);
    if (st == BRG_OK && (!s || !s->layers)) st = brg_error(BRG_ERR_OOM, "cannot allocate the T5 config");
    if (st != BRG_OK) {
        if (s) free(s->layers);
        free(s);
        cJSON_Delete(extra);
        return st;
    }
    s->cfg = *cfg;
    s->extra = extra;
    brg_model *m;
    st = brg_model_create(cfg->task == BRG_T5_ENCODER ? &t5_encoder_ops : &t5_ops, s, &m);
    if (st != BRG_OK) {
        t5_free_config(s);
        return st;
    }
    m->vocab_size = cfg->vocab_size;
    m->max_positions = cfg->n_positions;
    builder bd = {.m = m, .s = s};
    st = build(&bd);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status brg_t5_create(const brg_t5_config *cfg, brg_model **out) { return create(cfg, NULL, out); }

int brg_t5_first_decoder_block(const brg_model *model) { return 1 + (int)state_of(model)->cfg.num_layers; }

/* ---- loading a folder ---- */

static bool same_values(const brg_tensor *a, const brg_tensor *b) {
    if (!brg_tensor_same_shape(a, b)) return false;
    if (a->dtype == b->dtype) return memcmp(a->data, b->data, brg_tensor_nbytes(a)) == 0;
    for (int64_t i = 0; i < brg_tensor_numel(a); i++)
        if (brg_tensor_get(a, i) != brg_tensor_get(b, i)) return false;
    return true;
}

/* transformers 5 ties the LM head to the shared embedding unless the checkpoint stores an
 * lm_head.weight with other values (T5 v1.1), whatever tie_word_embeddings says. */
static brg_status head_is_tied(const brg_checkpoint *ckpt, bool *tied) {
    *tied = true;
    if (!brg_checkpoint_has(ckpt, "lm_head.weight") || !brg_checkpoint_has(ckpt, "shared.weight")) return BRG_OK;
    brg_tensor head_w, shared;
    BRG_TRY(brg_checkpoint_get(ckpt, "lm_head.weight", &head_w));
    BRG_TRY(brg_checkpoint_get(ckpt, "shared.weight", &shared));
    *tied = same_values(&head_w, &shared);
    return BRG_OK;
}

static brg_status load_config(const char *dir, brg_t5_config *cfg, cJSON **json) {
    char path[4096];
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, json));
    brg_status st = t5_config_parse(*json, path, cfg);
    if (st != BRG_OK) {
        cJSON_Delete(*json);
        *json = NULL;
    }
    return st;
}

static brg_status load_weights(const char *dir, brg_t5_config *cfg, cJSON *json, brg_model **out) {
    brg_checkpoint *ckpt;
    brg_status st = brg_checkpoint_open(dir, &ckpt);
    if (st != BRG_OK) {
        cJSON_Delete(json);
        return st;
    }
    st = cfg->task == BRG_T5_ENCODER ? BRG_OK : head_is_tied(ckpt, &cfg->tie_word_embeddings);
    brg_model *m = NULL;
    if (st == BRG_OK) st = create(cfg, json, &m);
    else cJSON_Delete(json);
    if (st == BRG_OK) {
        /* transformers drops this key when it meets it (_keys_to_ignore_on_load_unexpected). */
        static const char *const ignore[] = {"decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",
                                             NULL};
        st = cfg->task == BRG_T5_ENCODER ? t5_encoder_load_weights(m, ckpt, dir)
                                         : brg_model_load_weights(m, ckpt, NULL, ignore);
        if (st != BRG_OK) brg_model_destroy(m);
        else *out = m;
    }
    brg_checkpoint_close(ckpt);
    return st;
}

brg_status brg_t5_load_dir(const char *dir, brg_model **out) {
    brg_t5_config cfg;
    cJSON *json = NULL;
    brg_status st = load_config(dir, &cfg, &json);
    if (st == BRG_OK) st = load_weights(dir, &cfg, json, out);
    return st == BRG_OK ? st : brg_error_wrap(st, "loading %s", dir);
}
