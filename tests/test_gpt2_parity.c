/* GPT-2 against transformers: logits, loss and every parameter gradient from fixtures that
 * tools/gpt2_fixtures.py wrote. With arguments, checks those fixture folders instead (make
 * parity passes freshly generated ones). */
#include "parity_util.h"

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
    double d = parity_max_diff(&logits, b.logits);
    CHECK_MSG(d <= LOGITS_TOL, "%s: logits max diff %.3g", dir, d);
    double ref_loss = brg_tensor_get(&loss, 0), got = ((float *)b.loss->data)[0];
    CHECK_MSG(fabs(ref_loss - got) <= LOSS_TOL, "%s: loss %.8f vs transformers %.8f", dir, got, ref_loss);
    printf("%s: logits max diff %.2g, loss %.7f (transformers %.7f)\n", dir, d, got, ref_loss);
    parity_compare_grads(m, exp, dir, 0, "transformer.");
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/gpt2_*", 3, check_fixture); }
