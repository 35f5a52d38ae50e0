/* GPT-2's heads other than the LM head, after ln_f: GPT2Model (the hidden states are the
 * output), GPT2ForSequenceClassification (score at the last non-pad token of each row) and
 * GPT2ForTokenClassification (dropout, then a linear layer per token). */
#include "autograd/ops_pack.h"
#include "models/encoder_common.h"
#include "models/gpt2_internal.h"

static const brg_gpt2_config *cfg_of(const brg_model *m) { return m->config; }

/* transformers' rule: the rightmost token that is not pad_token_id (0 when a row is all
 * padding); without a pad token, the last position, and only for a batch of one row. */
static brg_status last_positions(brg_tape *tape, const brg_gpt2_config *c, const brg_tensor *ids, brg_tensor **out) {
    int64_t B = ids->shape[0], T = ids->shape[1], shape[1] = {B};
    if (c->pad_token_id < 0 && B != 1)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "GPT2ForSequenceClassification cannot handle batch sizes > 1 (got %lld rows) if no padding "
                         "token is defined: set pad_token_id in config.json",
                         (long long)B);
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 1, shape, false, "last non-pad positions", out));
    const int32_t *id = ids->data;
    int32_t *pos = (*out)->data;
    for (int64_t r = 0; r < B; r++) {
        pos[r] = c->pad_token_id < 0 ? (int32_t)(T - 1) : 0;
        for (int64_t t = 0; c->pad_token_id >= 0 && t < T; t++)
            if (id[r * T + t] != c->pad_token_id) pos[r] = (int32_t)t;
    }
    return BRG_OK;
}

static brg_status sequence_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *n, int head) {
    const brg_gpt2_config *c = cfg_of(m);
    brg_tensor *pos, *last;
    BRG_TRY(last_positions(tape, c, brg_bundle_input(b, "input_ids"), &pos));
    /* score has no bias, so scoring the selected rows equals selecting the scored rows */
    BRG_TRY(brg_gather_positions(tape, n, pos, &last));
    BRG_TRY(brg_linear(tape, last, m->params[head].tensor, NULL, false, &b->logits));
    if (!brg_bundle_input(b, "labels")) return BRG_OK;
    return enc_sequence_loss(tape, b, b->logits, c->problem_type, &b->loss);
}

static brg_status token_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *n, int head) {
    const brg_gpt2_config *c = cfg_of(m);
    brg_tensor *labels = brg_bundle_input(b, "labels");
    float p = c->classifier_dropout >= 0 ? c->classifier_dropout : 0.1f;
    brg_tensor *dropped;
    uint64_t offset = enc_dropout_offset(m->n_blocks - 1, 0);
    BRG_TRY(brg_dropout(tape, n, p, b->training, b->seed, offset, &dropped));
    BRG_TRY(brg_linear(tape, dropped, m->params[head].tensor, m->params[head + 1].tensor, false, &b->logits));
    if (!labels) return BRG_OK;
    const brg_tensor *l = labels;
    if (l->dtype != BRG_DTYPE_I32 || !brg_tensor_same_shape(l, brg_bundle_input(b, "input_ids")))
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be I32 with the shape of input_ids [%lld, %lld]",
                         (long long)n->shape[0], (long long)n->shape[1]);
    for (int64_t i = 0; i < brg_tensor_numel(l); i++) {
        int32_t v = ((const int32_t *)l->data)[i];
        if (v != -100 && (v < 0 || v >= c->num_labels))
            return brg_error(BRG_ERR_INVALID_ARG, "labels value %d at position %lld is outside [0, %lld) (or -100)",
                             v, (long long)i, (long long)c->num_labels);
    }
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

brg_status gpt2_task_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *n, int head) {
    switch (cfg_of(m)->task) {
    case BRG_GPT2_BASE: b->logits = n; return BRG_OK;
    case BRG_GPT2_SEQUENCE_CLASSIFICATION: return sequence_head(m, tape, b, n, head);
    case BRG_GPT2_TOKEN_CLASSIFICATION: return token_head(m, tape, b, n, head);
    case BRG_GPT2_LM_HEAD: break;
    }
    return brg_error(BRG_ERR_INTERNAL, "GPT-2 task %d has no task head", (int)cfg_of(m)->task);
}

brg_loss_items gpt2_task_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    const brg_gpt2_config *c = cfg_of(m);
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    if (c->task == BRG_GPT2_SEQUENCE_CLASSIFICATION)
        return (brg_loss_items){(double)enc_sequence_loss_items(labels, c->num_labels, c->problem_type), 0};
    if (c->task != BRG_GPT2_TOKEN_CLASSIFICATION) return (brg_loss_items){0, 0};
    int64_t k = 0;
    for (int64_t i = 0; i < brg_tensor_numel(labels); i++) k += brg_tensor_get_int(labels, i) != -100;
    return (brg_loss_items){(double)k, 0};
}

brg_status gpt2_base_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    (void)m, (void)batch, (void)arena;
    *n = 0;
    if (max < 1) return brg_error(BRG_ERR_INTERNAL, "no room for GPT2Model's outputs");
    out[(*n)++] = (brg_named_tensor){"last_hidden_state", logits};
    return BRG_OK;
}
