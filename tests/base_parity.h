/* Shared by the parity tests: a model's named outputs against transformers', and the backward
 * of a base model (which has no loss) from the fixture's cotangents of its outputs. */
#ifndef BRIGADE_TEST_BASE_PARITY_H
#define BRIGADE_TEST_BASE_PARITY_H

#include "parity_util.h"

/* Every output brg_model_outputs names equals the fixture's tensor of that name (1e-4). */
static void bp_compare_outputs(const brg_model *m, const brg_bundle *b, const brg_safetensors *exp, brg_arena *a,
                               const char *dir) {
    brg_named_tensor outs[8];
    int n = 0;
    CHECK_OK(brg_model_outputs(m, &b->inputs, b->logits, a, outs, 8, &n));
    CHECK_MSG(n > 0, "%s: no outputs", dir);
    for (int k = 0; k < n; k++) {
        brg_tensor ref;
        CHECK_MSG(brg_safetensors_has(exp, outs[k].name), "%s: the fixture has no %s", dir, outs[k].name);
        if (!brg_safetensors_has(exp, outs[k].name)) continue;
        CHECK_OK(brg_safetensors_get(exp, outs[k].name, &ref));
        CHECK_MSG(brg_tensor_same_shape(&ref, outs[k].tensor), "%s: %s has another shape", dir, outs[k].name);
        if (!brg_tensor_same_shape(&ref, outs[k].tensor)) continue;
        double worst = 0;
        const float *g = outs[k].tensor->data;
        for (int64_t i = 0; i < brg_tensor_numel(&ref); i++) worst = fmax(worst, fabs(brg_tensor_get(&ref, i) - g[i]));
        CHECK_MSG(worst <= LOGITS_TOL, "%s: %s max diff %.3g", dir, outs[k].name, worst);
        printf("%s: %s max diff %.2g\n", dir, outs[k].name, worst);
    }
}

/* The fixture holds cotangent.<output> for base models. */
static bool bp_has_cotangents(const brg_safetensors *exp) {
    for (size_t i = 0; i < brg_safetensors_count(exp); i++)
        if (strncmp(brg_safetensors_name(exp, i), "cotangent.", 10) == 0) return true;
    return false;
}

/* Backward from the cotangents: the packed logits' gradient is, row by row, each output's
 * cotangent in the model's output order. Returns sum(output * cotangent), the fixture's "loss". */
static double bp_backward_cotangents(brg_model *m, brg_tape *tape, const brg_bundle *b, const brg_safetensors *exp,
                                     brg_arena *a, const char *dir) {
    brg_named_tensor outs[8];
    int n = 0;
    CHECK_OK(brg_model_outputs(m, &b->inputs, b->logits, a, outs, 8, &n));
    int64_t B = b->logits->shape[0], row = brg_tensor_numel(b->logits) / B, off = 0;
    float *d = calloc((size_t)(B * row), sizeof *d);
    double loss = 0;
    for (int k = 0; k < n && d; k++) {
        char name[160];
        snprintf(name, sizeof name, "cotangent.%s", outs[k].name);
        brg_tensor cot;
        CHECK_OK(brg_safetensors_get(exp, name, &cot));
        int64_t per = brg_tensor_numel(outs[k].tensor) / B;
        CHECK_MSG(brg_tensor_numel(&cot) == B * per, "%s: %s has %lld elements", dir, name,
                  (long long)brg_tensor_numel(&cot));
        if (brg_tensor_numel(&cot) != B * per) break;
        const float *o = outs[k].tensor->data;
        for (int64_t r = 0; r < B; r++)
            for (int64_t i = 0; i < per; i++) {
                double c = brg_tensor_get(&cot, r * per + i);
                d[r * row + off + i] = (float)c;
                loss += c * o[r * per + i];
            }
        off += per;
    }
    CHECK_MSG(off == row, "%s: the outputs cover %lld of the %lld packed values per row", dir, (long long)off,
              (long long)row);
    if (d && off == row) CHECK_OK(brg_tape_backward_from(tape, b->logits, d));
    free(d);
    return loss;
}

#endif
