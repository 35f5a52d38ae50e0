/* T5 against transformers: logits, loss and every parameter gradient from fixtures that
 * tools/t5_fixtures.py wrote; then the model saved by brigade loads back with the same logits.
 * With arguments, checks those fixture folders instead (make parity passes freshly generated
 * ones). */
#include <glob.h>

#include "brigade/t5.h"
#include "test_util.h"

#define LOGITS_TOL 1e-4
#define LOSS_TOL 1e-5
#define GRAD_REL_TOL 1e-4

static void compare_grads(const brg_model *m, const brg_safetensors *exp, const char *dir) {
    int checked = 0;
    for (size_t i = 0; i < brg_safetensors_count(exp); i++) {
        const char *name = brg_safetensors_name(exp, i);
        if (strncmp(name, "grad.", 5) != 0) continue;
        int p = brg_model_find_param(m, name + 5);
        CHECK_MSG(p >= 0 && strcmp(m->params[p].name, name + 5) == 0, "%s: no parameter for %s", dir, name);
        if (p < 0) continue;
        brg_tensor ref;
        CHECK_OK(brg_safetensors_get(exp, name, &ref));
        brg_tensor *t = m->params[p].tensor;
        CHECK_MSG(brg_tensor_same_shape(&ref, t), "%s: %s shape", dir, name);
        if (!brg_tensor_same_shape(&ref, t)) continue;
        long n = (long)brg_tensor_numel(t);
        float *r = malloc((size_t)n * sizeof *r);
        brg_tensor rt = brg_tensor_wrap(BRG_DTYPE_F32, t->ndim, t->shape, r);
        CHECK_OK(brg_tensor_copy(&rt, &ref));
        double scale = test_max_abs(r, n), diff = test_max_abs_diff(r, t->grad, n);
        CHECK_MSG(diff <= GRAD_REL_TOL * (scale > 0 ? scale : 1), "%s: %s max diff %.3g (max |grad| %.3g)", dir, name,
                  diff, scale);
        free(r);
        checked++;
    }
    CHECK_MSG(checked == m->n_params, "%s: %d gradients checked, model has %d parameters", dir, checked, m->n_params);
}

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
    b->input_ids = ids_input(a, exp, "input_ids", m->vocab_size, 0);
    b->attention_mask = mask_input(a, exp, "attention_mask");
    b->decoder_input_ids = ids_input(a, exp, "decoder_input_ids", m->vocab_size, 0);
    b->decoder_attention_mask = mask_input(a, exp, "decoder_attention_mask");
    b->labels = ids_input(a, exp, "labels", m->vocab_size, -100);
}

static double logits_diff(const brg_tensor *expected, const brg_tensor *got) {
    CHECK(brg_tensor_same_shape(expected, got));
    if (!brg_tensor_same_shape(expected, got)) return INFINITY;
    long n = (long)brg_tensor_numel(expected);
    float *ref = malloc((size_t)n * sizeof *ref);
    brg_tensor rt = brg_tensor_wrap(BRG_DTYPE_F32, expected->ndim, expected->shape, ref);
    CHECK_OK(brg_tensor_copy(&rt, expected));
    double d = test_max_abs_diff(ref, got->data, n);
    free(ref);
    return d;
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
                  c0->act == c1->act && again->n_params == m->n_params,
              "%s: the saved model reads back differently", dir);
    brg_arena *a;
    CHECK_OK(brg_arena_create("round trip", 0, &a));
    brg_bundle b;
    fill_bundle(again, a, exp, &b);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward(again, tape, &b));
    if (b.logits) CHECK_MSG(logits_diff(logits, b.logits) <= LOGITS_TOL, "%s: logits after a save and load", dir);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_model_destroy(again);
}

static void check_fixture(const char *dir) {
    char path[1024];
    brg_model *m = NULL;
    CHECK_OK(brg_t5_load_dir(dir, &m));
    if (!m) return;
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(path, &exp));
    if (!exp) return;
    brg_arena *a;
    CHECK_OK(brg_arena_create("device 0", 0, &a));
    brg_bundle b;
    fill_bundle(m, a, exp, &b);
    brg_tensor logits, loss;
    CHECK_OK(brg_safetensors_get(exp, "logits", &logits));
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_model_zero_grad(m);
    CHECK_OK(brg_model_forward(m, tape, &b));
    if (b.loss) {
        CHECK_OK(brg_tape_backward(tape, b.loss));
        double d = logits_diff(&logits, b.logits);
        CHECK_MSG(d <= LOGITS_TOL, "%s: logits max diff %.3g", dir, d);
        double ref_loss = brg_tensor_get(&loss, 0), got = ((float *)b.loss->data)[0];
        CHECK_MSG(fabs(ref_loss - got) <= LOSS_TOL, "%s: loss %.8f vs transformers %.8f", dir, got, ref_loss);
        printf("%s: logits max diff %.2g, loss %.7f (transformers %.7f)\n", dir, d, got, ref_loss);
        compare_grads(m, exp, dir);
        check_round_trip(m, exp, &logits, dir);
    }
    CHECK_MSG(b.loss != NULL, "%s: no loss", dir);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) check_fixture(argv[i]);
        return test_finish();
    }
    glob_t g;
    int found = glob("tests/fixtures/t5_*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    CHECK_MSG(found >= 2, "expected the committed T5 fixtures under tests/fixtures (found %d)", found);
    for (int i = 0; i < found; i++) check_fixture(g.gl_pathv[i]);
    if (found) globfree(&g);
    return test_finish();
}
