/* Shared by the pipeline tests: gather what a runtime run left on its devices and compare it
 * with a one-device run. */
#ifndef BRIGADE_TEST_RUNTIME_UTIL_H
#define BRIGADE_TEST_RUNTIME_UTIL_H

#include "brigade/runtime.h"
#include "test_util.h"

#define RU_MAX_PARAMS 256

/* How a run is laid out over devices. */
typedef struct layout {
    int replicas, stages, micro_batches;
    const int *block_stage;
    brg_schedule_kind kind;
    bool recompute;    /* recompute_checkpoint_every_layer */
    int intra_threads; /* 0: one thread per device */
    const char *what;  /* names the layout in messages */
} layout;

/* Training options of a layout. */
static inline brg_runtime_options layout_options(const layout *l) {
    return (brg_runtime_options){.replicas = l->replicas, .stages = l->stages, .block_stage = l->block_stage,
                                 .micro_batches = l->micro_batches, .schedule = l->kind, .training = true,
                                 .recompute = l->recompute, .intra_threads = l->intra_threads};
}

typedef struct result {
    double loss;
    float *grads[RU_MAX_PARAMS];
    size_t activation_peak; /* summed over devices */
} result;

/* Every parameter's reduced gradient (every copy must hold the same one) and the devices'
 * activation peaks. */
static void collect_grads(brg_runtime *rt, const brg_model *m, result *out) {
    BRG_ASSERT(m->n_params <= RU_MAX_PARAMS);
    for (int p = 0; p < m->n_params; p++) {
        int64_t n = brg_tensor_numel(m->params[p].tensor);
        out->grads[p] = calloc((size_t)n, sizeof(float));
        bool first = true;
        for (int dv = 0; dv < brg_runtime_device_count(rt); dv++) {
            brg_device_info info;
            brg_device_get_info(brg_runtime_device(rt, dv), &info);
            if (!info.holds[p]) continue;
            const float *g = info.view->params[p].tensor->grad;
            if (first) memcpy(out->grads[p], g, (size_t)n * sizeof(float));
            else
                CHECK_MSG(memcmp(out->grads[p], g, (size_t)n * sizeof(float)) == 0, "copies of %s differ",
                          m->params[p].name);
            first = false;
        }
        CHECK_MSG(!first, "no device holds %s", m->params[p].name);
    }
    out->activation_peak = 0;
    for (int dv = 0; dv < brg_runtime_device_count(rt); dv++) {
        brg_device_stats st;
        brg_runtime_device_stats(rt, dv, &st);
        out->activation_peak += st.activation_peak_bytes;
    }
}

static void free_result(const brg_model *m, result *r) {
    for (int p = 0; p < m->n_params; p++) free(r->grads[p]);
}

/* Loss within 1e-5 and every gradient within 1e-5 of its scale (at least 1). */
static void compare(const brg_model *m, const result *ref, const result *got, const char *what) {
    CHECK_MSG(fabs(ref->loss - got->loss) <= 1e-5, "%s: loss %.8f vs single device %.8f", what, got->loss, ref->loss);
    for (int p = 0; p < m->n_params; p++) {
        if (!ref->grads[p] || !got->grads[p]) continue;
        long n = (long)brg_tensor_numel(m->params[p].tensor);
        double scale = test_max_abs(ref->grads[p], n), d = test_max_abs_diff(ref->grads[p], got->grads[p], n);
        CHECK_MSG(d <= 1e-5 * (scale > 1 ? scale : 1), "%s: %s gradient differs by %.3g", what, m->params[p].name, d);
    }
}

/* Runs each layout of `list` and compares it with `single` (one device), prefixing messages
 * with `name`; `run` is the test's own way of feeding its model. */
typedef struct data data;
typedef void (*ru_run_fn)(brg_model *m, const data *d, const layout *l, result *out);
static void check_layouts_against(brg_model *m, const data *d, ru_run_fn run, const result *single,
                                  const layout *list, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        result r;
        run(m, d, &list[i], &r);
        char what[128];
        snprintf(what, sizeof what, "%s%s%s", name, *name ? ": " : "", list[i].what);
        compare(m, single, &r, what);
        free_result(m, &r);
    }
}

#endif
