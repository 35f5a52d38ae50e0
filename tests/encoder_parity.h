/* BERT and ViT against transformers: outputs, loss and every parameter gradient from fixtures that
 * tools/bert_vit_fixtures.py wrote, plus a save / reload round trip of each fixture model. Shared by
 * test_bert_parity and test_vit_parity; either accepts any fixture folder (the model comes from
 * what the inputs hold: pixel_values means ViT). */
#ifndef BRIGADE_TEST_ENCODER_PARITY_H
#define BRIGADE_TEST_ENCODER_PARITY_H

#include "base_parity.h"

/* Contiguous I32 copy of an integer tensor (I64 in the fixtures), values unchecked: out-of-range
 * positions are part of what is tested. */
static brg_tensor *ep_i32(brg_arena *a, const brg_tensor *src) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, src->ndim, src->shape, "input", &t));
    if (!t) return NULL;
    for (int64_t i = 0; i < brg_tensor_numel(src); i++) ((int32_t *)t->data)[i] = (int32_t)brg_tensor_get_int(src, i);
    return t;
}

static brg_tensor *ep_f32(brg_arena *a, const brg_tensor *src) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, src->ndim, src->shape, "input", &t));
    if (t) CHECK_OK(brg_tensor_copy(t, src));
    return t;
}

/* The fixture's input `name` converted for the bundle (NULL when absent). */
static brg_tensor *ep_input(brg_arena *a, const brg_safetensors *exp, const char *name) {
    if (!brg_safetensors_has(exp, name)) return NULL;
    brg_tensor src;
    CHECK_OK(brg_safetensors_get(exp, name, &src));
    bool is_float = src.dtype == BRG_DTYPE_F32 || strcmp(name, "attention_mask") == 0;
    return is_float ? ep_f32(a, &src) : ep_i32(a, &src);
}

static void ep_bundle(brg_arena *a, const brg_safetensors *exp, brg_bundle *b) {
    static const char *const names[] = {"input_ids", "attention_mask",  "token_type_ids", "pixel_values",
                                        "labels",    "start_positions", "end_positions",  "next_sentence_label"};
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        TEST_PUT(&b->inputs, names[i], ep_input(a, exp, names[i]));
}

static brg_status ep_load(const char *dir, bool vit, brg_model **m) {
    return vit ? brg_vit_load_dir(dir, m) : brg_bert_load_dir(dir, m);
}

/* brigade's save reloads to the same parameters (and config). */
static void ep_round_trip(brg_model *m, bool vit, const char *dir) {
    char out[1024];
    const char *base = strrchr(dir, '/');
    snprintf(out, sizeof out, "%s/encoder_parity_%s", test_tmp_dir(), base ? base + 1 : dir);
    CHECK_OK(brg_model_save(m, out));
    brg_model *back = NULL;
    CHECK_OK(ep_load(out, vit, &back));
    if (!back) return;
    CHECK_MSG(back->n_params == m->n_params && back->n_aliases == m->n_aliases &&
                  strcmp(back->ops->architecture, m->ops->architecture) == 0,
              "%s: the saved model reloads with a different layout", dir);
    for (int p = 0; p < m->n_params && p < back->n_params; p++)
        CHECK_MSG(memcmp(back->params[p].tensor->data, m->params[p].tensor->data,
                         brg_tensor_nbytes(m->params[p].tensor)) == 0,
                  "%s: %s changed through save and load", dir, m->params[p].name);
    brg_model_destroy(back);
}

static void ep_check_fixture(const char *dir) {
    brg_safetensors *exp = parity_open_expected(dir);
    if (!exp) return;
    bool vit = brg_safetensors_has(exp, "pixel_values");
    brg_model *m = NULL;
    CHECK_OK(ep_load(dir, vit, &m));
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("device 0", 0, &a));
    brg_tape *tape = NULL;
    if (m && a) CHECK_OK(brg_tape_create(a, &tape));
    if (!m || !tape) goto done;
    brg_bundle b;
    ep_bundle(a, exp, &b);
    brg_model_zero_grad(m);
    CHECK_OK(brg_model_forward(m, tape, &b));
    /* a base model's "loss" is sum(output x cotangent), a sum over every output: checked relative */
    bool base = bp_has_cotangents(exp);
    CHECK_MSG(base || b.loss != NULL, "%s: no loss", dir);
    if (!base && !b.loss) goto done;
    double got = base ? bp_backward_cotangents(m, tape, &b, exp, a, dir) : ((float *)b.loss->data)[0];
    if (!base) CHECK_OK(brg_tape_backward(tape, b.loss));
    bp_compare_outputs(m, &b, exp, a, dir);
    brg_tensor loss;
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    double ref = brg_tensor_get(&loss, 0);
    CHECK_MSG(fabs(ref - got) <= LOSS_TOL * (base ? fmax(1.0, fabs(ref)) : 1.0), "%s: loss %.8f vs transformers %.8f",
              dir, got, ref);
    printf("%s: loss %.7f (transformers %.7f)\n", dir, got, ref);
    /* A tensor's scale is never taken below 1% of the model's largest gradient: key biases and
     * the span head's bias have gradients that are zero up to float32 rounding. */
    parity_compare_grads(m, exp, dir, 1e-2, NULL);
    ep_round_trip(m, vit, dir);
done:
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

#endif
