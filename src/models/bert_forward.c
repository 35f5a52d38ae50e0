/* BERT's forward, block by block: embeddings (word + token type + position, LayerNorm), post-LN
 * encoder layers, and the task head (masked LM, pooled classification, span QA). */
#include <string.h>

#include "autograd/ops_pack.h"
#include "models/bert_internal.h"
#include "models/encoder_common.h"

static const brg_bert_config *cfg_of(const brg_model *m) { return &((const bert_model_config *)m->config)->c; }
static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }
static brg_tensor *LP(brg_model *m, int layer, int which) { return P(m, EMB_PARAMS + layer * PER_LAYER + which); }
static brg_tensor *HP(brg_model *m, int which) {
    return P(m, EMB_PARAMS + (int)cfg_of(m)->num_hidden_layers * PER_LAYER + which);
}

/* ---- embeddings ---- */

static brg_status check_ids(const brg_bert_config *c, const brg_bundle *b) {
    const brg_tensor *ids = brg_bundle_input(b, "input_ids");
    if (!ids || ids->dtype != BRG_DTYPE_I32 || ids->ndim != 2 || ids->shape[0] < 1 || ids->shape[1] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "input_ids must be I32 [batch, sequence]");
    if (ids->shape[1] > c->max_position_embeddings)
        return brg_error(BRG_ERR_INVALID_ARG, "sequence length %lld exceeds max_position_embeddings %lld",
                         (long long)ids->shape[1], (long long)c->max_position_embeddings);
    char s[128];
    const brg_tensor *tt = brg_bundle_input(b, "token_type_ids"), *mask = brg_bundle_input(b, "attention_mask");
    if (tt && (tt->dtype != BRG_DTYPE_I32 || !brg_tensor_same_shape(tt, ids)))
        return brg_error(BRG_ERR_INVALID_ARG, "token_type_ids must be I32 with the shape of input_ids, got %s %s",
                         brg_dtype_name(tt->dtype), brg_shape_str(tt, s, sizeof s));
    if (mask && (mask->dtype != BRG_DTYPE_F32 || !brg_tensor_same_shape(mask, ids)))
        return brg_error(BRG_ERR_INVALID_ARG, "attention_mask must be F32 with the shape of input_ids, got %s %s",
                         brg_dtype_name(mask->dtype), brg_shape_str(mask, s, sizeof s));
    for (int64_t i = 0; tt && i < brg_tensor_numel(tt); i++) {
        int32_t v = ((const int32_t *)tt->data)[i];
        if (v < 0 || v >= c->type_vocab_size)
            return brg_error(BRG_ERR_INVALID_ARG, "token_type_ids value %d at position %lld is outside [0, %lld)", v,
                             (long long)i, (long long)c->type_vocab_size);
    }
    return BRG_OK;
}

/* Positions 0..T-1 per row, or zeros (token types when none are given). */
static brg_status index_grid(brg_tape *tape, const brg_tensor *like, bool positions, brg_tensor **out) {
    int64_t B = like->shape[0], T = like->shape[1];
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 2, like->shape, false, positions ? "position ids" : "token types",
                                out));
    int32_t *d = (*out)->data;
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 0; t < T; t++) d[i * T + t] = positions ? (int32_t)t : 0;
    return BRG_OK;
}

static brg_status embeddings_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const brg_bert_config *c = cfg_of(m);
    brg_tensor *ids = brg_bundle_input(b, "input_ids");
    BRG_TRY(check_ids(c, b));
    brg_tensor *types = brg_bundle_input(b, "token_type_ids"), *pos_ids, *word, *type, *pos, *x, *x2, *n, *hidden;
    if (!types) BRG_TRY(index_grid(tape, ids, false, &types));
    BRG_TRY(index_grid(tape, ids, true, &pos_ids));
    int32_t pad = c->pad_token_id >= 0 ? (int32_t)c->pad_token_id : -1;
    BRG_TRY(brg_embedding_padded(tape, ids, P(m, E_WORD), pad, &word));
    BRG_TRY(brg_embedding(tape, types, P(m, E_TYPE), &type));
    BRG_TRY(brg_embedding(tape, pos_ids, P(m, E_POS), &pos));
    BRG_TRY(brg_add(tape, word, type, &x));
    BRG_TRY(brg_add(tape, x, pos, &x2));
    BRG_TRY(brg_layer_norm(tape, x2, P(m, E_LN_W), P(m, E_LN_B), c->layer_norm_eps, &n));
    BRG_TRY(brg_dropout(tape, n, c->hidden_dropout_prob, b->training, b->seed, enc_dropout_offset(0, 0), &hidden));
    return brg_bundle_carry(b, "hidden", hidden);
}

/* ---- encoder layer (post-LN) ---- */

static brg_status layer_forward(brg_model *m, int layer, brg_tape *tape, brg_bundle *b) {
    const brg_bert_config *c = cfg_of(m);
    int block = layer + 1;
    float eps = c->layer_norm_eps, p = c->hidden_dropout_prob;
    brg_tensor *x = brg_bundle_carried(b, "hidden"), *ctx, *ao, *ad, *r1, *x1, *ia, *o, *od, *r2, *out;
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach layer %d", layer);
    enc_attention_weights w = {LP(m, layer, L_Q_W), LP(m, layer, L_Q_B), LP(m, layer, L_K_W),
                               LP(m, layer, L_K_B), LP(m, layer, L_V_W), LP(m, layer, L_V_B)};
    BRG_TRY(enc_self_attention(tape, b, x, &w, c->num_attention_heads, c->attention_probs_dropout_prob,
                               enc_dropout_offset(block, 0), &ctx));
    BRG_TRY(brg_linear(tape, ctx, LP(m, layer, L_AO_W), LP(m, layer, L_AO_B), false, &ao));
    BRG_TRY(brg_dropout(tape, ao, p, b->training, b->seed, enc_dropout_offset(block, 1), &ad));
    BRG_TRY(brg_add(tape, ad, x, &r1));
    BRG_TRY(brg_layer_norm(tape, r1, LP(m, layer, L_ALN_W), LP(m, layer, L_ALN_B), eps, &x1));
    BRG_TRY(brg_linear_act(tape, x1, LP(m, layer, L_I_W), LP(m, layer, L_I_B), false, c->hidden_act, &ia));
    BRG_TRY(brg_linear(tape, ia, LP(m, layer, L_O_W), LP(m, layer, L_O_B), false, &o));
    BRG_TRY(brg_dropout(tape, o, p, b->training, b->seed, enc_dropout_offset(block, 2), &od));
    BRG_TRY(brg_add(tape, od, x1, &r2));
    BRG_TRY(brg_layer_norm(tape, r2, LP(m, layer, L_OLN_W), LP(m, layer, L_OLN_B), eps, &out));
    return brg_bundle_carry(b, "hidden", out);
}

/* ---- heads ---- */

/* The masked-LM head's scores [B, T, vocab]; its parameters start at head index `at`. */
static brg_status mlm_scores(brg_model *m, brg_tape *tape, brg_tensor *x, int at, brg_tensor **out) {
    const brg_bert_config *c = cfg_of(m);
    brg_tensor *a, *n;
    BRG_TRY(brg_linear_act(tape, x, HP(m, at + MLM_DENSE_W), HP(m, at + MLM_DENSE_B), false, c->hidden_act, &a));
    BRG_TRY(brg_layer_norm(tape, a, HP(m, at + MLM_LN_W), HP(m, at + MLM_LN_B), c->layer_norm_eps, &n));
    brg_tensor *w = c->tie_word_embeddings ? P(m, E_WORD) : HP(m, at + MLM_DECODER_W);
    brg_tensor *bias = c->tie_word_embeddings ? HP(m, at + MLM_BIAS) : HP(m, at + MLM_DECODER_B);
    return brg_linear(tape, n, w, bias, false, out);
}

static brg_status check_token_labels(const brg_tensor *l, const brg_tensor *x) {
    if (l->dtype != BRG_DTYPE_I32 || l->ndim != 2 || l->shape[0] != x->shape[0] || l->shape[1] != x->shape[1])
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be I32 with the shape of input_ids [%lld, %lld]",
                         (long long)x->shape[0], (long long)x->shape[1]);
    return BRG_OK;
}

static brg_status mlm_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    brg_tensor *labels = brg_bundle_input(b, "labels");
    BRG_TRY(mlm_scores(m, tape, x, 0, &b->logits));
    if (!labels) return BRG_OK;
    BRG_TRY(check_token_labels(labels, x));
    brg_tape_donate(tape, b->logits); /* the linear's backward reads no scores: the loss may spend them */
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

/* Masked-LM scores of every token and next-sentence scores of the pooled [CLS], packed per row;
 * with both labels, the sum of the two mean cross-entropies. */
static brg_status pretraining_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    brg_tensor *labels = brg_bundle_input(b, "labels"), *next = brg_bundle_input(b, "next_sentence_label");
    brg_tensor *scores, *first, *pooled, *act, *nsp, *lm, *ns;
    BRG_TRY(mlm_scores(m, tape, x, PT_MLM, &scores));
    BRG_TRY(brg_select(tape, x, 1, 0, &first));
    BRG_TRY(brg_linear(tape, first, HP(m, PT_POOL_W), HP(m, PT_POOL_B), false, &pooled));
    BRG_TRY(brg_tanh(tape, pooled, &act));
    BRG_TRY(brg_linear(tape, act, HP(m, PT_NSP_W), HP(m, PT_NSP_B), false, &nsp));
    BRG_TRY(brg_concat_rows(tape, scores, nsp, &b->logits));
    if (!labels && !next) return BRG_OK;
    if (!labels || !next)
        return brg_error(BRG_ERR_INVALID_ARG, "BertForPreTraining needs both labels and next_sentence_label "
                                              "(transformers computes its loss only with both), got only %s",
                         labels ? "labels" : "next_sentence_label");
    BRG_TRY(check_token_labels(labels, x));
    const brg_tensor *l = next;
    int64_t B = x->shape[0];
    if (l->dtype != BRG_DTYPE_I32 || brg_tensor_numel(l) != B || l->ndim != 1)
        return brg_error(BRG_ERR_INVALID_ARG, "next_sentence_label must be I32 [batch] = [%lld]", (long long)B);
    for (int64_t i = 0; i < B; i++) {
        int32_t v = ((const int32_t *)l->data)[i];
        if (v != -100 && v != 0 && v != 1)
            return brg_error(BRG_ERR_INVALID_ARG, "next_sentence_label[%lld] = %d is not 0, 1 (or -100)", (long long)i,
                             v);
    }
    /* Read before only by the concatenation, whose backward reads no input: the loss may spend them. */
    brg_tape_donate(tape, scores);
    BRG_TRY(brg_cross_entropy_share(tape, scores, labels, -100, b->loss_denominator, &lm));
    BRG_TRY(brg_cross_entropy_share(tape, nsp, next, -100, b->extra_loss_denominator, &ns));
    return brg_add(tape, lm, ns, &b->loss);
}

brg_status bert_pretraining_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                                    brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    (void)batch;
    int64_t V = cfg_of(m)->vocab_size, row = brg_tensor_numel(logits) / logits->shape[0], T = (row - 2) / V;
    int64_t ps[2] = {T, V}, two = 2;
    *n = 0;
    if (max < 2) return brg_error(BRG_ERR_INTERNAL, "no room for BertForPreTraining's outputs");
    brg_tensor *p, *s;
    BRG_TRY(brg_model_output_span(arena, logits, "prediction_logits", 0, 2, ps, &p));
    BRG_TRY(brg_model_output_span(arena, logits, "seq_relationship_logits", T * V, 1, &two, &s));
    out[(*n)++] = (brg_named_tensor){"prediction_logits", p};
    out[(*n)++] = (brg_named_tensor){"seq_relationship_logits", s};
    return BRG_OK;
}

static brg_status classification_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    const brg_bert_config *c = cfg_of(m);
    int block = m->n_blocks - 1;
    float p = c->classifier_dropout >= 0 ? c->classifier_dropout : c->hidden_dropout_prob;
    brg_tensor *first, *pooled, *act, *dropped;
    BRG_TRY(brg_select(tape, x, 1, 0, &first));
    BRG_TRY(brg_linear(tape, first, HP(m, CLS_POOLER_W), HP(m, CLS_POOLER_B), false, &pooled));
    BRG_TRY(brg_tanh(tape, pooled, &act));
    BRG_TRY(brg_dropout(tape, act, p, b->training, b->seed, enc_dropout_offset(block, 0), &dropped));
    BRG_TRY(brg_linear(tape, dropped, HP(m, CLS_W), HP(m, CLS_B), false, &b->logits));
    if (!brg_bundle_input(b, "labels")) return BRG_OK;
    return enc_sequence_loss(tape, b, b->logits, c->problem_type, &b->loss);
}

/* transformers clamps positions to [0, T] and ignores T, so a position past the sequence drops
 * out of the mean. Returns how many positions count. */
static brg_status clamped_positions(brg_tape *tape, const brg_tensor *pos, const char *name, int64_t B, int64_t T,
                                    brg_tensor **out, int64_t *counted) {
    if (!pos || pos->dtype != BRG_DTYPE_I32 || brg_tensor_numel(pos) != B || pos->ndim > 2 ||
        (pos->ndim == 2 && pos->shape[1] != 1))
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be I32 [batch] (%lld examples)%s", name, (long long)B,
                         pos ? "" : ": missing");
    int64_t shape[1] = {B};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 1, shape, false, name, out));
    int32_t *d = (*out)->data;
    const int32_t *s = pos->data;
    *counted = 0;
    for (int64_t i = 0; i < B; i++) {
        d[i] = s[i] < 0 ? 0 : s[i] > T ? (int32_t)T : s[i];
        *counted += d[i] != T;
    }
    return BRG_OK;
}

/* (start CE + end CE) / 2, each a share over its own counted positions, or over the global
 * batch's counts when they are given. */
static brg_status span_loss(brg_tape *tape, brg_bundle *b, brg_tensor *start, brg_tensor *end) {
    int64_t B = start->shape[0], T = start->shape[1], ns, ne;
    brg_tensor *ts, *te, *ls, *le;
    BRG_TRY(clamped_positions(tape, brg_bundle_input(b, "start_positions"), "start_positions", B, T, &ts, &ns));
    BRG_TRY(clamped_positions(tape, brg_bundle_input(b, "end_positions"), "end_positions", B, T, &te, &ne));
    double D = b->loss_denominator, E = b->extra_loss_denominator;
    BRG_TRY(brg_cross_entropy_share(tape, start, ts, (int32_t)T, 2.0 * (D > 0 ? D : (double)ns), &ls));
    BRG_TRY(brg_cross_entropy_share(tape, end, te, (int32_t)T, 2.0 * (E > 0 ? E : (double)ne), &le));
    return brg_add(tape, ls, le, &b->loss);
}

static brg_status qa_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    const brg_tensor *start_positions = brg_bundle_input(b, "start_positions");
    const brg_tensor *end_positions = brg_bundle_input(b, "end_positions");
    brg_tensor *start, *end;
    BRG_TRY(brg_linear(tape, x, HP(m, QA_W), HP(m, QA_B), false, &b->logits));
    if (!start_positions && !end_positions) return BRG_OK;
    if (!start_positions || !end_positions)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "question answering needs both start_positions and end_positions, got only %s",
                         start_positions ? "start_positions" : "end_positions");
    BRG_TRY(brg_select(tape, b->logits, 2, 0, &start));
    BRG_TRY(brg_select(tape, b->logits, 2, 1, &end));
    return span_loss(tape, b, start, end);
}

/* BertModel: the pooler (dense + tanh of the first token) packed after the hidden states of each
 * row; without a pooler the hidden states are the output. */
static brg_status base_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    if (!cfg_of(m)->add_pooling_layer) {
        b->logits = x;
        return BRG_OK;
    }
    brg_tensor *first, *pooled, *act;
    BRG_TRY(brg_select(tape, x, 1, 0, &first));
    BRG_TRY(brg_linear(tape, first, HP(m, POOL_W), HP(m, POOL_B), false, &pooled));
    BRG_TRY(brg_tanh(tape, pooled, &act));
    return brg_concat_rows(tape, x, act, &b->logits);
}

brg_status bert_base_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    (void)batch;
    const brg_bert_config *c = cfg_of(m);
    int64_t C = c->hidden_size, row = brg_tensor_numel(logits) / logits->shape[0];
    int64_t T = c->add_pooling_layer ? row / C - 1 : row / C;
    int64_t hs[2] = {T, C};
    *n = 0;
    if (max < 2) return brg_error(BRG_ERR_INTERNAL, "no room for BertModel's outputs");
    brg_tensor *h, *p;
    BRG_TRY(brg_model_output_span(arena, logits, "last_hidden_state", 0, 2, hs, &h));
    out[(*n)++] = (brg_named_tensor){"last_hidden_state", h};
    if (!c->add_pooling_layer) return BRG_OK;
    BRG_TRY(brg_model_output_span(arena, logits, "pooler_output", T * C, 1, &C, &p));
    out[(*n)++] = (brg_named_tensor){"pooler_output", p};
    return BRG_OK;
}

/* Dropout, then a linear layer per token; cross-entropy over the labels that are not -100. */
static brg_status token_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    const brg_bert_config *c = cfg_of(m);
    float p = c->classifier_dropout >= 0 ? c->classifier_dropout : c->hidden_dropout_prob;
    brg_tensor *labels = brg_bundle_input(b, "labels"), *dropped;
    BRG_TRY(brg_dropout(tape, x, p, b->training, b->seed, enc_dropout_offset(m->n_blocks - 1, 0), &dropped));
    BRG_TRY(brg_linear(tape, dropped, HP(m, TOK_W), HP(m, TOK_B), false, &b->logits));
    if (!labels) return BRG_OK;
    const brg_tensor *l = labels;
    if (l->dtype != BRG_DTYPE_I32 || l->ndim != 2 || l->shape[0] != x->shape[0] || l->shape[1] != x->shape[1])
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be I32 with the shape of input_ids [%lld, %lld]",
                         (long long)x->shape[0], (long long)x->shape[1]);
    for (int64_t i = 0; i < brg_tensor_numel(l); i++) {
        int32_t v = ((const int32_t *)l->data)[i];
        if (v != -100 && (v < 0 || v >= c->num_labels))
            return brg_error(BRG_ERR_INVALID_ARG, "labels value %d at position %lld is outside [0, %lld) (or -100)",
                             v, (long long)i, (long long)c->num_labels);
    }
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

/* Pooled [CLS] of each (example, choice) row, one score each, reshaped to [B, num_choices];
 * cross-entropy over the choices. */
static brg_status choice_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    const brg_bert_config *c = cfg_of(m);
    int block = m->n_blocks - 1;
    float p = c->classifier_dropout >= 0 ? c->classifier_dropout : c->hidden_dropout_prob;
    const brg_tensor *ids = brg_bundle_input(b, "input_ids");
    int64_t B = ids->shape[0], N = ids->shape[1], shape[2] = {B, N};
    brg_tensor *labels = brg_bundle_input(b, "labels"), *first, *pooled, *act, *dropped, *scores;
    BRG_TRY(brg_select(tape, x, 1, 0, &first));
    BRG_TRY(brg_linear(tape, first, HP(m, CLS_POOLER_W), HP(m, CLS_POOLER_B), false, &pooled));
    BRG_TRY(brg_tanh(tape, pooled, &act));
    BRG_TRY(brg_dropout(tape, act, p, b->training, b->seed, enc_dropout_offset(block, 0), &dropped));
    BRG_TRY(brg_linear(tape, dropped, HP(m, CLS_W), HP(m, CLS_B), false, &scores));
    BRG_TRY(brg_reshape(tape, scores, 2, shape, &b->logits));
    if (!labels) return BRG_OK;
    const brg_tensor *l = labels;
    if (l->dtype != BRG_DTYPE_I32 || brg_tensor_numel(l) != B || l->ndim != 1)
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be I32 [batch] = [%lld] (the right choice of each example)",
                         (long long)B);
    for (int64_t i = 0; i < B; i++) {
        int32_t v = ((const int32_t *)l->data)[i];
        if (v != -100 && (v < 0 || v >= N))
            return brg_error(BRG_ERR_INVALID_ARG, "labels[%lld] = %d is not a choice in [0, %lld) (or -100)",
                             (long long)i, v, (long long)N);
    }
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

static brg_status head_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    brg_tensor *x = brg_bundle_carried(b, "hidden");
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach the head");
    b->loss = NULL;
    switch (cfg_of(m)->task) {
    case BRG_BERT_MASKED_LM: return mlm_head(m, tape, b, x);
    case BRG_BERT_SEQUENCE_CLASSIFICATION: return classification_head(m, tape, b, x);
    case BRG_BERT_QUESTION_ANSWERING: return qa_head(m, tape, b, x);
    case BRG_BERT_BASE: return base_head(m, tape, b, x);
    case BRG_BERT_TOKEN_CLASSIFICATION: return token_head(m, tape, b, x);
    case BRG_BERT_MULTIPLE_CHOICE: return choice_head(m, tape, b, x);
    case BRG_BERT_PRETRAINING: return pretraining_head(m, tape, b, x);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown BERT task");
}

/* [B, N, T] as [B * N, T], sharing the data (NULL stays NULL). */
static brg_status flat_view(brg_tape *tape, brg_tensor *t, const char *name, brg_tensor **out) {
    *out = t;
    if (!t) return BRG_OK;
    char s[128];
    if (t->ndim != 3 || !brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be contiguous [batch, num_choices, sequence], got %s", name,
                         brg_shape_str(t, s, sizeof s));
    brg_tensor *v = brg_arena_alloc(brg_tape_arena(tape), sizeof *v, "multiple-choice view");
    if (!v) return brg_error(BRG_ERR_OOM, "out of memory viewing %s", name);
    int64_t shape[2] = {t->shape[0] * t->shape[1], t->shape[2]};
    *v = brg_tensor_wrap(t->dtype, 2, shape, t->data);
    v->name = t->name;
    *out = v;
    return BRG_OK;
}

/* Input `name` of `b` viewed flat in `flat` (absent stays absent). */
static brg_status flat_input(brg_tape *tape, const brg_bundle *b, const char *name, brg_bundle *flat) {
    brg_tensor *v;
    BRG_TRY(flat_view(tape, brg_bundle_input(b, name), name, &v));
    return brg_tensor_map_put(&flat->inputs, name, v);
}

/* BertForMultipleChoice runs the encoder on every (example, choice) pair as one row. */
static brg_status flat_inputs(brg_tape *tape, const brg_bundle *b, brg_bundle *flat) {
    const brg_tensor *ids = brg_bundle_input(b, "input_ids"), *mask = brg_bundle_input(b, "attention_mask");
    const brg_tensor *types = brg_bundle_input(b, "token_type_ids");
    *flat = *b;
    if (!ids) return brg_error(BRG_ERR_INVALID_ARG, "input_ids must be I32 [batch, num_choices, sequence]");
    BRG_TRY(flat_input(tape, b, "input_ids", flat));
    BRG_TRY(flat_input(tape, b, "attention_mask", flat));
    BRG_TRY(flat_input(tape, b, "token_type_ids", flat));
    if (!brg_tensor_same_shape(ids, mask ? mask : ids) || !brg_tensor_same_shape(ids, types ? types : ids))
        return brg_error(BRG_ERR_INVALID_ARG, "attention_mask and token_type_ids must have the shape of input_ids");
    return BRG_OK;
}

static brg_status encoder_block(brg_model *m, const brg_block *blk, brg_tape *tape, brg_bundle *b) {
    return blk->kind == BRG_BLOCK_EMBEDDINGS ? embeddings_forward(m, tape, b) : layer_forward(m, blk->layer, tape, b);
}

brg_status bert_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const brg_block *blk = &m->blocks[block];
    if (blk->kind == BRG_BLOCK_HEAD) return head_forward(m, tape, b);
    if (blk->kind != BRG_BLOCK_EMBEDDINGS && blk->kind != BRG_BLOCK_LAYER)
        return brg_error(BRG_ERR_INTERNAL, "unknown block kind");
    if (cfg_of(m)->task != BRG_BERT_MULTIPLE_CHOICE) return encoder_block(m, blk, tape, b);
    brg_bundle flat;
    BRG_TRY(flat_inputs(tape, b, &flat));
    BRG_TRY(encoder_block(m, blk, tape, &flat));
    return brg_bundle_carry(b, "hidden", brg_bundle_carried(&flat, "hidden"));
}

/* Labels that are not -100. */
static double counted_labels(const brg_tensor *labels) {
    int64_t n = 0;
    for (int64_t i = 0; labels && i < brg_tensor_numel(labels); i++) n += brg_tensor_get_int(labels, i) != -100;
    return (double)n;
}

/* Positions that count after transformers' clamp to [0, T]: those below T. */
static double counted_positions(const brg_tensor *pos, int64_t T) {
    int64_t n = 0;
    for (int64_t i = 0; pos && i < brg_tensor_numel(pos); i++) n += brg_tensor_get_int(pos, i) < T;
    return (double)n;
}

brg_loss_items bert_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    const brg_bert_config *c = cfg_of(m);
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    if (c->task == BRG_BERT_SEQUENCE_CLASSIFICATION)
        return (brg_loss_items){(double)enc_sequence_loss_items(labels, c->num_labels, c->problem_type), 0};
    if (c->task == BRG_BERT_QUESTION_ANSWERING) {
        const brg_tensor *ids = brg_tensor_map_get(batch, "input_ids");
        int64_t T = ids ? ids->shape[1] : 0;
        return (brg_loss_items){counted_positions(brg_tensor_map_get(batch, "start_positions"), T),
                                counted_positions(brg_tensor_map_get(batch, "end_positions"), T)};
    }
    if (c->task == BRG_BERT_BASE) return (brg_loss_items){0, 0};
    double extra =
        c->task == BRG_BERT_PRETRAINING ? counted_labels(brg_tensor_map_get(batch, "next_sentence_label")) : 0;
    /* token classification, multiple choice and masked LM: the labels that are not -100 */
    return (brg_loss_items){counted_labels(labels), extra};
}
