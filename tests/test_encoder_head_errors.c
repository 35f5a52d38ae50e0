/* Bad input to the base models and the newer heads (BERT token classification, multiple choice,
 * pretraining; GPT-2 sequence and token classification) is an error that says what is wrong, and
 * the base models' outputs come out by name with the right shapes. */
#include "test_util.h"

enum { B = 2, T = 5, VOCAB = 17, LABELS = 3 };

static brg_model *bert(brg_bert_task task) {
    brg_bert_config c;
    brg_bert_config_default(&c, task);
    c.vocab_size = VOCAB, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 12, c.max_position_embeddings = 8, c.num_labels = LABELS;
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0f;
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (m) brg_bert_init_weights(m, 1);
    return m;
}

static brg_model *gpt2(brg_gpt2_task task, int64_t pad) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.task = task, c.vocab_size = VOCAB, c.n_embd = 8, c.n_layer = 1, c.n_head = 2, c.n_positions = 8;
    c.num_labels = LABELS, c.pad_token_id = pad;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 2);
    return m;
}

static brg_tensor *ints(brg_arena *a, int nd, const int64_t *shape, int32_t value) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, nd, shape, "input", &t));
    for (int64_t i = 0; t && i < brg_tensor_numel(t); i++) ((int32_t *)t->data)[i] = value + (int32_t)(i % 3);
    return t;
}

/* Runs the forward of `m` on `b` (no gradients). */
static brg_status forward(brg_model *m, brg_arena *a, brg_bundle *b) {
    brg_tape *tape = NULL;
    BRG_TRY(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward(m, tape, b);
    brg_tape_destroy(tape);
    return st;
}

static void test_bert_heads(brg_arena *a) {
    int64_t bt[2] = {B, T}, b1[1] = {B}, bnt[3] = {B, 3, T};
    brg_model *tok = bert(BRG_BERT_TOKEN_CLASSIFICATION), *mc = bert(BRG_BERT_MULTIPLE_CHOICE);
    brg_model *pt = bert(BRG_BERT_PRETRAINING), *base = bert(BRG_BERT_BASE);
    if (!tok || !mc || !pt || !base) return;
    brg_bundle b = {.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1), "labels", ints(a, 2, bt, LABELS))};
    CHECK_ERR(forward(tok, a, &b), BRG_ERR_INVALID_ARG, "labels value 3 at position 0 is outside [0, 3)");
    TEST_PUT(&b.inputs, "labels", ints(a, 1, b1, 0));
    CHECK_ERR(forward(tok, a, &b), BRG_ERR_INVALID_ARG, "labels must be I32 with the shape of input_ids");
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1))};
    CHECK_ERR(forward(mc, a, &b), BRG_ERR_INVALID_ARG, "input_ids must be contiguous [batch, num_choices, sequence]");
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 3, bnt, 1), "labels", ints(a, 1, b1, 3))};
    CHECK_ERR(forward(mc, a, &b), BRG_ERR_INVALID_ARG, "labels[0] = 3 is not a choice in [0, 3)");
    TEST_PUT(&b.inputs, "labels", ints(a, 1, b1, 0));
    CHECK_OK(forward(mc, a, &b));
    CHECK(b.logits && b.logits->ndim == 2 && b.logits->shape[0] == B && b.logits->shape[1] == 3 && b.loss);
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1), "labels", ints(a, 2, bt, 0))};
    CHECK_ERR(forward(pt, a, &b), BRG_ERR_INVALID_ARG, "needs both labels and next_sentence_label");
    TEST_PUT(&b.inputs, "next_sentence_label", ints(a, 1, b1, 1));
    CHECK_ERR(forward(pt, a, &b), BRG_ERR_INVALID_ARG, "next_sentence_label[1] = 2 is not 0, 1");
    TEST_PUT(&b.inputs, "next_sentence_label", ints(a, 1, b1, 0));
    CHECK_OK(forward(pt, a, &b));
    brg_named_tensor outs[8];
    int n = 0;
    CHECK_OK(brg_model_outputs(pt, &b.inputs, b.logits, a, outs, 8, &n));
    CHECK(n == 2 && strcmp(outs[0].name, "prediction_logits") == 0 && outs[0].tensor->shape[2] == VOCAB &&
          strcmp(outs[1].name, "seq_relationship_logits") == 0 && outs[1].tensor->shape[1] == 2);
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1))};
    CHECK_OK(forward(base, a, &b));
    CHECK_OK(brg_model_outputs(base, &b.inputs, b.logits, a, outs, 8, &n));
    CHECK(n == 2 && strcmp(outs[0].name, "last_hidden_state") == 0 && outs[0].tensor->ndim == 3 &&
          outs[0].tensor->shape[1] == T && outs[0].tensor->shape[2] == 8 && strcmp(outs[1].name, "pooler_output") == 0 &&
          outs[1].tensor->ndim == 2);
    /* the pooled row is tanh of a dense layer: inside (-1, 1) */
    for (int64_t i = 0; n == 2 && i < brg_tensor_numel(outs[1].tensor); i++)
        CHECK(fabsf(((const float *)outs[1].tensor->data)[i]) < 1.0f);
    CHECK(base->ops->inputs && brg_model_count_loss_items(base, &b.inputs).labels == 0);
    brg_model_destroy(tok), brg_model_destroy(mc), brg_model_destroy(pt), brg_model_destroy(base);
}

/* GPT-2's sequence classifier reads the rightmost token that is not the pad id (0 for a row of
 * padding only): the logits of a padded row equal those of its unpadded prefix. */
static void test_gpt2_heads(brg_arena *a) {
    int64_t bt[2] = {B, T}, b1[1] = {B}, one[2] = {1, 3};
    brg_model *nopad = gpt2(BRG_GPT2_SEQUENCE_CLASSIFICATION, -1), *seq = gpt2(BRG_GPT2_SEQUENCE_CLASSIFICATION, 0);
    brg_model *tok = gpt2(BRG_GPT2_TOKEN_CLASSIFICATION, -1);
    if (!nopad || !seq || !tok) return;
    brg_bundle b = {.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1))};
    CHECK_ERR(forward(nopad, a, &b), BRG_ERR_INVALID_ARG, "cannot handle batch sizes > 1 (got 2 rows) if no padding");
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1))};
    int32_t *ids = brg_bundle_input(&b, "input_ids")->data;
    ids[3] = ids[4] = 0; /* row 0: three tokens, then padding */
    CHECK_OK(forward(seq, a, &b));
    brg_bundle prefix = {.inputs = TEST_MAP("input_ids", ints(a, 2, one, 1))};
    memcpy(brg_bundle_input(&prefix, "input_ids")->data, ids, 3 * sizeof(int32_t));
    CHECK_OK(forward(seq, a, &prefix));
    if (b.logits && prefix.logits)
        CHECK(test_max_abs_diff(b.logits->data, prefix.logits->data, LABELS) < 1e-6);
    TEST_PUT(&b.inputs, "labels", ints(a, 1, b1, 0));
    CHECK_OK(forward(seq, a, &b));
    CHECK(b.loss && brg_model_count_loss_items(seq, &b.inputs).labels == B);
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", ints(a, 2, bt, 1), "labels", ints(a, 2, bt, LABELS))};
    CHECK_ERR(forward(tok, a, &b), BRG_ERR_INVALID_ARG, "labels value 3 at position 0 is outside [0, 3)");
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.num_labels = 0;
    CHECK_ERR(brg_gpt2_config_validate(&c), BRG_ERR_INVALID_ARG, "num_labels (0)");
    brg_model_destroy(nopad), brg_model_destroy(seq), brg_model_destroy(tok);
}

int main(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    if (!a) return test_finish();
    test_bert_heads(a);
    test_gpt2_heads(a);
    brg_arena_destroy(a);
    return test_finish();
}
