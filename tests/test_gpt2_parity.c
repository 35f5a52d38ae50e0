/* GPT-2 against transformers: outputs, loss and every parameter gradient from fixtures that
 * tools/gpt2_fixtures.py wrote (GPT2LMHeadModel, GPT2Model, GPT2ForSequenceClassification,
 * GPT2ForTokenClassification). With arguments, checks those fixture folders instead (make parity
 * passes freshly generated ones). */
#include "base_parity.h"

static void check_fixture(const char *dir) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    brg_safetensors *exp = m ? parity_open_expected(dir) : NULL;
    brg_arena *a = NULL;
    if (exp) CHECK_OK(brg_arena_create("device 0", 0, &a));
    if (a) {
        brg_tensor ids, mask, labels;
        CHECK_OK(brg_safetensors_get(exp, "input_ids", &ids));
        bool has_mask = brg_safetensors_has(exp, "attention_mask"), has_labels = brg_safetensors_has(exp, "labels");
        if (has_mask) CHECK_OK(brg_safetensors_get(exp, "attention_mask", &mask));
        if (has_labels) CHECK_OK(brg_safetensors_get(exp, "labels", &labels));
        brg_bundle b = {0};
        CHECK_OK(brg_inputs_from_tensors(m, a, &ids, has_mask ? &mask : NULL, has_labels ? &labels : NULL, &b.inputs));
        brg_tape *tape;
        CHECK_OK(brg_tape_create(a, &tape));
        brg_model_zero_grad(m);
        CHECK_OK(brg_model_forward(m, tape, &b));
        bool base = bp_has_cotangents(exp);
        CHECK_MSG(base || b.loss, "%s: no loss", dir);
        if (base || b.loss) {
            double got = base ? bp_backward_cotangents(m, tape, &b, exp, a, dir) : ((float *)b.loss->data)[0];
            if (!base) CHECK_OK(brg_tape_backward(tape, b.loss));
            bp_compare_outputs(m, &b, exp, a, dir);
            brg_tensor loss;
            CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
            double ref = brg_tensor_get(&loss, 0);
            /* a base model's "loss" is sum(output x cotangent) over every output: checked relative */
            CHECK_MSG(fabs(ref - got) <= LOSS_TOL * (base ? fmax(1.0, fabs(ref)) : 1.0),
                      "%s: loss %.8f vs transformers %.8f", dir, got, ref);
            printf("%s: loss %.7f (transformers %.7f)\n", dir, got, ref);
            parity_compare_grads(m, exp, dir, 0, "transformer.");
        }
        brg_tape_destroy(tape);
    }
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/gpt2_*", 7, check_fixture); }
