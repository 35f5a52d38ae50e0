/* GPT-2 against transformers: logits, loss and every parameter gradient from fixtures that
 * tools/gpt2_fixtures.py wrote. With arguments, checks those fixture folders instead (make
 * parity passes freshly generated ones). */
#include <glob.h>

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
        if (p < 0) {
            char full[256];
            snprintf(full, sizeof full, "transformer.%s", name + 5);
            p = brg_model_find_param(m, full);
        }
        CHECK_MSG(p >= 0, "%s: no parameter for %s", dir, name);
        if (p < 0) continue;
        brg_tensor ref;
        CHECK_OK(brg_safetensors_get(exp, name, &ref));
        brg_tensor *t = m->params[p].tensor;
        CHECK_MSG(brg_tensor_same_shape(&ref, t), "%s: %s shape", dir, name);
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

static void check_fixture(const char *dir) {
    char path[1024];
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    if (!m) return;
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(path, &exp));
    if (!exp) return;
    brg_arena *a;
    CHECK_OK(brg_arena_create("device 0", 0, &a));
    brg_tensor ids, mask, labels, logits, loss;
    CHECK_OK(brg_safetensors_get(exp, "input_ids", &ids));
    bool has_mask = brg_safetensors_has(exp, "attention_mask");
    if (has_mask) CHECK_OK(brg_safetensors_get(exp, "attention_mask", &mask));
    CHECK_OK(brg_safetensors_get(exp, "labels", &labels));
    CHECK_OK(brg_safetensors_get(exp, "logits", &logits));
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    brg_bundle b;
    CHECK_OK(brg_inputs_from_tensors(m, a, &ids, has_mask ? &mask : NULL, &labels, &b));
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_model_zero_grad(m);
    CHECK_OK(brg_model_forward(m, tape, &b));
    CHECK_OK(brg_tape_backward(tape, b.loss));
    long n = (long)brg_tensor_numel(&logits);
    CHECK(brg_tensor_same_shape(&logits, b.logits));
    float *ref = malloc((size_t)n * sizeof *ref);
    brg_tensor rt = brg_tensor_wrap(BRG_DTYPE_F32, logits.ndim, logits.shape, ref);
    CHECK_OK(brg_tensor_copy(&rt, &logits));
    double d = test_max_abs_diff(ref, b.logits->data, n);
    CHECK_MSG(d <= LOGITS_TOL, "%s: logits max diff %.3g", dir, d);
    double ref_loss = brg_tensor_get(&loss, 0), got = ((float *)b.loss->data)[0];
    CHECK_MSG(fabs(ref_loss - got) <= LOSS_TOL, "%s: loss %.8f vs transformers %.8f", dir, got, ref_loss);
    printf("%s: logits max diff %.2g, loss %.7f (transformers %.7f)\n", dir, d, got, ref_loss);
    compare_grads(m, exp, dir);
    free(ref);
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
    int found = glob("tests/fixtures/gpt2_*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    CHECK_MSG(found >= 3, "expected the committed GPT-2 fixtures under tests/fixtures (found %d)", found);
    for (int i = 0; i < found; i++) check_fixture(g.gl_pathv[i]);
    if (found) globfree(&g);
    return test_finish();
}
