/* GPT-2 against transformers: logits, loss and every parameter gradient from fixtures that
 * tools/gpt2_fixtures.py wrote. With arguments, checks those fixture folders instead (make
 * parity passes freshly generated ones). */
#include "parity_util.h"

static void check_fixture(const char *dir) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    brg_safetensors *exp = m ? parity_open_expected(dir) : NULL;
    brg_arena *a = NULL;
    if (exp) CHECK_OK(brg_arena_create("device 0", 0, &a));
    if (a) {
        brg_tensor ids, mask, labels;
        CHECK_OK(brg_safetensors_get(exp, "input_ids", &ids));
        bool has_mask = brg_safetensors_has(exp, "attention_mask");
        if (has_mask) CHECK_OK(brg_safetensors_get(exp, "attention_mask", &mask));
        CHECK_OK(brg_safetensors_get(exp, "labels", &labels));
        brg_bundle b;
        CHECK_OK(brg_inputs_from_tensors(m, a, &ids, has_mask ? &mask : NULL, &labels, &b));
        brg_tape *tape;
        CHECK_OK(brg_tape_create(a, &tape));
        brg_model_zero_grad(m);
        CHECK_OK(brg_model_forward(m, tape, &b));
        CHECK_OK(brg_tape_backward(tape, b.loss));
        parity_check_logits_loss(dir, exp, &b);
        parity_compare_grads(m, exp, dir, 0, "transformer.");
        brg_tape_destroy(tape);
    }
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/gpt2_*", 3, check_fixture); }
