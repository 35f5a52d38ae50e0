/* T5EncoderModel: T5's encoder stack on its own (shared embedding, encoder blocks, the final
 * layer norm), whose output is last_hidden_state. Its embeddings and layers are
 * T5ForConditionalGeneration's (t5.c builds them and runs them); what is its own is the head that
 * hands the encoder output on, the outputs' name, and from_pretrained's loading rules. */
#include "brigade/t5.h"
#include "t5_internal.h"

/* The last encoder layer has already normalised its output: that is the model's output. */
static brg_status encoder_output(const brg_model *m, brg_bundle *b) {
    const brg_t5_config *c = m->config;
    brg_tensor *h = brg_bundle_carried(b, "hidden");
    if (!h || h->ndim != 3 || h->shape[2] != c->d_model)
        return brg_error(BRG_ERR_INVALID_ARG, "no encoder output [B, Te, %lld] reaches the head",
                         (long long)c->d_model);
    b->logits = h;
    b->loss = NULL;
    return BRG_OK;
}

static brg_status encoder_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    if (m->blocks[block].kind == BRG_BLOCK_HEAD) return encoder_output(m, b);
    return t5_forward_block(m, block, tape, b);
}

static brg_status encoder_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                                  brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    (void)m, (void)batch, (void)arena;
    *n = 0;
    if (max < 1) return brg_error(BRG_ERR_INTERNAL, "no room for T5EncoderModel's outputs");
    out[(*n)++] = (brg_named_tensor){"last_hidden_state", (brg_tensor *)logits};
    return BRG_OK;
}

/* No labels, so nothing counts towards a loss. */
static brg_loss_items encoder_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    (void)m, (void)batch;
    return (brg_loss_items){0, 0};
}

static brg_status encoder_save_config(const brg_model *m, const char *dir) {
    const t5_state *s = m->config;
    return t5_config_save(&s->cfg, s->extra, dir);
}

static const brg_input_decl encoder_inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},
    {.name = NULL}, /* the end */
};

const brg_model_ops t5_encoder_ops = {
    .architecture = "T5EncoderModel",
    .forward_block = encoder_forward_block,
    .save_config = encoder_save_config,
    .free_config = t5_free_config,
    .count_loss_items = encoder_count_loss_items,
    .inputs = encoder_inputs,
    .outputs = encoder_outputs,
};

brg_status t5_encoder_load_weights(brg_model *m, const brg_checkpoint *ckpt, const char *source) {
    /* A full T5 checkpoint's decoder goes unused without a word, as transformers' T5EncoderModel
     * ignores every key matching "decoder"; its lm_head.weight (untied) is reported. */
    static const char *const ignore[] = {"decoder", NULL};
    brg_load_options o = {.ignore_containing = ignore};
    return brg_model_load_pretrained(m, ckpt, source, &o);
}
