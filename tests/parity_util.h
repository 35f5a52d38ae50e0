/* What every parity test against transformers shares: the tolerances, the largest difference of
 * an output, the per-parameter gradient comparison, and a main that checks the folders given as
 * arguments (make parity passes freshly generated ones) or else the committed fixtures. */
#ifndef BRIGADE_TEST_PARITY_UTIL_H
#define BRIGADE_TEST_PARITY_UTIL_H

#include <glob.h>

#include "test_util.h"

#define LOGITS_TOL 1e-4
#define LOSS_TOL 1e-5
#define GRAD_REL_TOL 1e-4

/* max |expected - got| over a fixture tensor (any float dtype) and brigade's F32 output of the
 * same shape; INFINITY (and a failed check) when the shapes differ. */
static inline double parity_max_diff(const brg_tensor *expected, const brg_tensor *got) {
    CHECK(got && brg_tensor_same_shape(expected, got));
    if (!got || !brg_tensor_same_shape(expected, got)) return INFINITY;
    long n = (long)brg_tensor_numel(expected);
    float *ref = malloc((size_t)(n > 0 ? n : 1) * sizeof *ref);
    brg_tensor rt = brg_tensor_wrap(BRG_DTYPE_F32, expected->ndim, expected->shape, ref);
    CHECK_OK(brg_tensor_copy(&rt, expected));
    double d = test_max_abs_diff(ref, got->data, n);
    free(ref);
    return d;
}

/* The fixture's expected.safetensors in dir (NULL, with a failed check, when it cannot be read). */
static inline brg_safetensors *parity_open_expected(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(path, &exp));
    return exp;
}

/* A forward's logits and loss against the fixture's "logits" and "loss". */
static inline void parity_check_logits_loss(const char *dir, const brg_safetensors *exp, const brg_bundle *b) {
    brg_tensor logits, loss;
    CHECK_OK(brg_safetensors_get(exp, "logits", &logits));
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    double d = parity_max_diff(&logits, b->logits);
    CHECK_MSG(d <= LOGITS_TOL, "%s: logits max diff %.3g", dir, d);
    double ref_loss = brg_tensor_get(&loss, 0), got = ((float *)b->loss->data)[0];
    CHECK_MSG(fabs(ref_loss - got) <= LOSS_TOL, "%s: loss %.8f vs transformers %.8f", dir, got, ref_loss);
    printf("%s: logits max diff %.2g, loss %.7f (transformers %.7f)\n", dir, d, got, ref_loss);
}

/* Largest |grad| over all of transformers' gradients. */
static inline double parity_global_grad_max(const brg_safetensors *exp) {
    double g = 0;
    for (size_t i = 0; i < brg_safetensors_count(exp); i++) {
        const char *name = brg_safetensors_name(exp, i);
        brg_tensor ref;
        if (strncmp(name, "grad.", 5) != 0 || brg_safetensors_get(exp, name, &ref) != BRG_OK) continue;
        for (int64_t k = 0; k < brg_tensor_numel(&ref); k++) g = fmax(g, fabs(brg_tensor_get(&ref, k)));
    }
    return g;
}

/* The parameter a fixture's "grad.NAME" belongs to: the one named NAME, else `prefix` + NAME
 * (GPT-2 fixtures of the base model leave out "transformer."). Only the parameter's own name
 * counts, not an alias (a tied weight's other name): transformers lists a tied weight once. */
static inline int parity_find_param(const brg_model *m, const char *name, const char *prefix) {
    char full[256];
    for (int attempt = 0; attempt < (prefix ? 2 : 1); attempt++) {
        snprintf(full, sizeof full, "%s%s", attempt ? prefix : "", name);
        int p = brg_model_find_param(m, full);
        if (p >= 0 && strcmp(m->params[p].name, full) == 0) return p;
    }
    return -1;
}

/* Every parameter's gradient against transformers', each within GRAD_REL_TOL of the tensor's
 * own largest entry. floor > 0 never takes that scale below floor x the model's largest
 * gradient: for gradients that are zero in exact arithmetic (attention key biases, a span
 * head's bias), where float32 leaves both sides with rounding noise. */
static inline void parity_compare_grads(const brg_model *m, const brg_safetensors *exp, const char *dir, double floor,
                                 const char *prefix) {
    int checked = 0;
    double least = floor > 0 ? floor * parity_global_grad_max(exp) : 0, worst = 0;
    for (size_t i = 0; i < brg_safetensors_count(exp); i++) {
        const char *name = brg_safetensors_name(exp, i);
        if (strncmp(name, "grad.", 5) != 0) continue;
        int p = parity_find_param(m, name + 5, prefix);
        CHECK_MSG(p >= 0, "%s: no parameter for %s", dir, name);
        if (p < 0) continue;
        brg_tensor ref;
        CHECK_OK(brg_safetensors_get(exp, name, &ref));
        brg_tensor *t = m->params[p].tensor;
        CHECK_MSG(brg_tensor_same_shape(&ref, t), "%s: %s shape", dir, name);
        if (!brg_tensor_same_shape(&ref, t)) continue;
        long n = (long)brg_tensor_numel(t);
        float *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
        brg_tensor rt = brg_tensor_wrap(BRG_DTYPE_F32, t->ndim, t->shape, r);
        CHECK_OK(brg_tensor_copy(&rt, &ref));
        double scale = test_max_abs(r, n), diff = test_max_abs_diff(r, t->grad, n);
        double unit = floor > 0 ? fmax(scale, least) : (scale > 0 ? scale : 1);
        CHECK_MSG(diff <= GRAD_REL_TOL * unit, "%s: %s max diff %.3g (max |grad| %.3g)", dir, name, diff, scale);
        worst = fmax(worst, diff / unit);
        free(r);
        checked++;
    }
    printf("%s: %d gradients, worst difference %.2g of the tensor's scale\n", dir, checked, worst);
    CHECK_MSG(checked == m->n_params, "%s: %d gradients checked, model has %d parameters", dir, checked, m->n_params);
}

/* Checks the folders given as arguments, else the committed ones matching `pattern` (at least
 * `expected_count` of them). */
static inline int parity_main(int argc, char **argv, const char *pattern, int expected_count, void (*check)(const char *)) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) check(argv[i]);
        return test_finish();
    }
    glob_t g;
    int found = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    CHECK_MSG(found >= expected_count, "expected %d fixtures matching %s (found %d)", expected_count, pattern, found);
    for (int i = 0; i < found; i++) check(g.gl_pathv[i]);
    if (found) globfree(&g);
    return test_finish();
}

#endif
