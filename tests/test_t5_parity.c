/* T5 against transformers: logits, loss and every parameter gradient from fixtures that
 * tools/t5_fixtures.py wrote (T5EncoderModel: last_hidden_state and the gradients of
 * sum(last_hidden_state x cotangent)); then the model saved by brigade loads back with the same
 * outputs. With arguments, checks those fixture folders instead (make parity passes freshly
 * generated ones). */
#include "base_parity.h"
#include "brigade/t5.h"

/* Integer inputs as the blocks take them (I32, range-checked); masks as F32. */
static brg_tensor *ids_input(brg_arena *a, const brg_safetensors *exp, const char *name, int64_t vocab,
                             int64_t allowed) {
    if (!brg_safetensors_has(exp, name)) return NULL;
    brg_tensor src, *out = NULL;
    CHECK_OK(brg_safetensors_get(exp, name, &src));
    CHECK_OK(brg_inputs_to_i32(a, &src, name, 0, vocab, allowed, &out));
    return out;
}

static brg_tensor *mask_input(brg_arena *a, const brg_safetensors *exp, const char *name) {
    if (!brg_safetensors_has(exp, name)) return NULL;
    brg_tensor src, *out = NULL;
    CHECK_OK(brg_safetensors_get(exp, name, &src));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, src.ndim, src.shape, name, &out));
    if (out) CHECK_OK(brg_tensor_copy(out, &src));
    return out;
}

static void fill_bundle(const brg_model *m, brg_arena *a, const brg_safetensors *exp, brg_bundle *b) {
    memset(b, 0, sizeof *b);
    TEST_PUT(&b->inputs, "input_ids", ids_input(a, exp, "input_ids", m->vocab_size, 0));
    TEST_PUT(&b->inputs, "attention_mask", mask_input(a, exp, "attention_mask"));
    TEST_PUT(&b->inputs, "decoder_input_ids", ids_input(a, exp, "decoder_input_ids", m->vocab_size, 0));
    TEST_PUT(&b->inputs, "decoder_attention_mask", mask_input(a, exp, "decoder_attention_mask"));
    TEST_PUT(&b->inputs, "labels", ids_input(a, exp, "labels", m->vocab_size, -100));
}

/* Saving and loading again keeps the weights, the tie decision and the config's meaning. */
static void check_round_trip(brg_model *m, const brg_safetensors *exp, const brg_tensor *logits, const char *dir) {
    char out[1024];
    const char *base = strrchr(dir, '/');
    snprintf(out, sizeof out, "%s/t5_round_trip_%s", test_tmp_dir(), base ? base + 1 : dir);
    CHECK_OK(brg_model_save(m, out));
    brg_model *again = NULL;
    CHECK_OK(brg_t5_load_dir(out, &again));
    if (!again) return;
    const brg_t5_config *c0 = m->config, *c1 = again->config;
    CHECK_MSG(c0->tie_word_embeddings == c1->tie_word_embeddings &&
                  c0->scale_decoder_outputs == c1->scale_decoder_outputs && c0->is_gated_act == c1->is_gated_act &&
                  c0->act == c1->act && c0->task == c1->task && again->n_params == m->n_params,
              "%s: the saved model reads back differently", dir);
    brg_arena *a;
    CHECK_OK(brg_arena_create("round trip", 0, &a));
    brg_bundle b;
    fill_bundle(again, a, exp, &b);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward(again, tape, &b));
    if (b.logits) CHECK_MSG(parity_max_diff(logits, b.logits) <= LOGITS_TOL, "%s: logits after a save and load", dir);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_model_destroy(again);
}

/* T5EncoderModel: its output and the gradients of sum(output x cotangent) (its fixture "loss"). */
static void check_encoder(brg_model *m, brg_tape *tape, brg_bundle *b, const brg_safetensors *exp, brg_arena *a,
                          const char *dir) {
    double got = bp_backward_cotangents(m, tape, b, exp, a, dir);
    bp_compare_outputs(m, b, exp, a, dir);
    brg_tensor loss, hidden;
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    double ref = brg_tensor_get(&loss, 0);
    CHECK_MSG(fabs(ref - got) <= LOSS_TOL * fmax(1.0, fabs(ref)), "%s: sum(output x cotangent) %.8f vs %.8f", dir,
              got, ref);
    printf("%s: sum(output x cotangent) %.7f (transformers %.7f)\n", dir, got, ref);
    parity_compare_grads(m, exp, dir, 0, NULL);
    CHECK_OK(brg_safetensors_get(exp, "last_hidden_state", &hidden));
    check_round_trip(m, exp, &hidden, dir);
}

static void check_fixture(const char *dir) {
    brg_model *m = NULL;
    CHECK_OK(brg_t5_load_dir(dir, &m));
    if (!m) return;
    brg_safetensors *exp = parity_open_expected(dir);
    if (!exp) {
        brg_model_destroy(m);
        return;
    }
    brg_arena *a;
    CHECK_OK(brg_arena_create("device 0", 0, &a));
    brg_bundle b;
    fill_bundle(m, a, exp, &b);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_model_zero_grad(m);
    CHECK_OK(brg_model_forward(m, tape, &b));
    bool encoder = bp_has_cotangents(exp);
    if (encoder) CHECK(strcmp(m->ops->architecture, "T5EncoderModel") == 0);
    if (encoder && b.logits) check_encoder(m, tape, &b, exp, a, dir);
    brg_tensor logits;
    if (!encoder) CHECK_OK(brg_safetensors_get(exp, "logits", &logits));
    if (!encoder && b.loss) {
        CHECK_OK(brg_tape_backward(tape, b.loss));
        parity_check_logits_loss(dir, exp, &b);
        parity_compare_grads(m, exp, dir, 0, NULL);
        check_round_trip(m, exp, &logits, dir);
    }
    CHECK_MSG(encoder || b.loss != NULL, "%s: no loss", dir);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/t5_*", 4, check_fixture); }
