/* Pipelined and replicated runs give the single-device loss and gradients. */
#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "runtime_util.h"

enum { ROWS = 8, T = 8, VOCAB = 37 };

static brg_model *tiny_gpt2(void) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = VOCAB;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0;
    c.initializer_range = 0.2f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    brg_model_init_weights(m, 5);
    /* LayerNorm weights and biases start at 1 and 0; move them so their gradients matter. */
    brg_rng rng;
    brg_rng_seed(&rng, 9);
    for (int p = 0; p < m->n_params; p++)
        if (m->params[p].init != BRG_INIT_NORMAL) {
            float *d = m->params[p].tensor->data;
            for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++) d[i] += 0.1f * (float)brg_rng_normal(&rng);
        }
    return m;
}

typedef struct data {
    int32_t ids[ROWS * T], labels[ROWS * T];
    float mask[ROWS * T];
} data;

static void make_data(data *d) {
    brg_rng rng;
    brg_rng_seed(&rng, 1);
    for (int i = 0; i < ROWS * T; i++) {
        d->ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
        int row = i / T, t = i % T;
        d->mask[i] = t < T - (row % 3) ? 1.0f : 0.0f; /* right padding of 0-2 positions */
        d->labels[i] = d->mask[i] == 0.0f || i % 5 == 0 ? -100 : d->ids[i];
    }
}

/* Splits the rows into replicas x micro-batches (PopTorch's [accumulation, replica, micro]
 * order), with `labels` standing for the data's labels. */
typedef struct batches {
    brg_micro_batch mbs[8];
    brg_tensor ids[8], mask[8], labels[8];
    brg_loss_items denom;
} batches;

static void split(brg_model *m, const data *d, const int32_t *labels, int replicas, int micro_batches, batches *b) {
    int n_mb = replicas * micro_batches, rows = ROWS / n_mb;
    int64_t shape[2] = {rows, T};
    for (int r = 0; r < replicas; r++)
        for (int a = 0; a < micro_batches; a++) {
            int slot = r * micro_batches + a, first = (a * replicas + r) * rows;
            b->ids[slot] = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, (void *)(d->ids + first * T));
            b->mask[slot] = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, (void *)(d->mask + first * T));
            b->labels[slot] = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, (void *)(labels + first * T));
            b->mbs[slot] = TEST_MAP("input_ids", &b->ids[slot], "attention_mask", &b->mask[slot], "labels",
                                    &b->labels[slot]);
        }
    brg_tensor all_labels = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){ROWS, T}, (void *)labels);
    brg_tensor_map whole = TEST_MAP("labels", &all_labels);
    b->denom = brg_model_count_loss_items(m, &whole);
}

/* Runs the rows split as the layout says; collects the loss sum and each parameter's reduced
 * gradient. */
static void run(brg_model *m, const data *d, const layout *l, result *out) {
    brg_runtime_options o = layout_options(l);
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    if (!rt) return;
    batches b;
    split(m, d, d->labels, l->replicas, l->micro_batches, &b);
    float losses[8];
    CHECK_OK(brg_runtime_run(rt, b.mbs, &b.denom, 1, losses));
    out->loss = 0;
    for (int i = 0; i < l->replicas * l->micro_batches; i++) out->loss += losses[i];
    collect_grads(rt, m, out);
    brg_runtime_destroy(rt);
}

/* Every gradient equal to ref's (== on floats), or all zero when ref is NULL. */
static void check_grads(const brg_model *m, const result *ref, const result *got, const char *what) {
    for (int p = 0; p < m->n_params; p++) {
        int64_t n = brg_tensor_numel(m->params[p].tensor), bad = 0;
        for (int64_t i = 0; i < n; i++) bad += got->grads[p][i] != (ref ? ref->grads[p][i] : 0.0f);
        CHECK_MSG(bad == 0, "%s: %lld entries of %s's gradient differ", what, (long long)bad, m->params[p].name);
    }
}

/* brg_runtime_zero_grads defers the clearing to the next run: a run after it gives the same
 * gradients as a fresh runtime, a run whose labels are all ignored (no backward at all) leaves
 * every gradient at exactly zero, and nothing of an earlier step leaks into a later one. */
static void check_zero_between_runs(brg_model *m, const data *d, int stages, const int *block_stage) {
    brg_runtime_options o = {.replicas = 2, .stages = stages, .block_stage = block_stage, .micro_batches = 2,
                             .schedule = BRG_SCHEDULE_1F1B, .training = true};
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    if (!rt) return;
    int32_t ignored[ROWS * T];
    for (int i = 0; i < ROWS * T; i++) ignored[i] = -100;
    batches real, none;
    split(m, d, d->labels, 2, 2, &real);
    split(m, d, ignored, 2, 2, &none);
    float losses[8];
    result first, again, empty, after;
    CHECK_OK(brg_runtime_run(rt, real.mbs, &real.denom, 1, losses));
    collect_grads(rt, m, &first);
    CHECK_OK(brg_runtime_zero_grads(rt));
    CHECK_OK(brg_runtime_run(rt, real.mbs, &real.denom, 1, losses));
    collect_grads(rt, m, &again);
    check_grads(m, &first, &again, "the same batch after zero_grads");
    CHECK_OK(brg_runtime_zero_grads(rt));
    CHECK_OK(brg_runtime_run(rt, none.mbs, &none.denom, 1, losses));
    collect_grads(rt, m, &empty);
    check_grads(m, NULL, &empty, "a batch without counted labels");
    CHECK_OK(brg_runtime_zero_grads(rt));
    CHECK_OK(brg_runtime_run(rt, real.mbs, &real.denom, 1, losses));
    collect_grads(rt, m, &after);
    check_grads(m, &first, &after, "the batch again after an empty step");
    free_result(m, &first), free_result(m, &again), free_result(m, &empty), free_result(m, &after);
    brg_runtime_destroy(rt);
}

/* The forward-only pipeline returns the logits of one full-batch forward pass. */
static void check_inference(brg_model *m, const data *d) {
    int64_t shape[2] = {ROWS, T}, half[2] = {ROWS / 2, T};
    brg_tensor ids = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, (void *)d->ids);
    brg_tensor mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, (void *)d->mask);
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_bundle b = {.inputs = TEST_MAP("input_ids", &ids, "attention_mask", &mask)};
    CHECK_OK(brg_model_forward(m, tape, &b));
    int two[4] = {0, 0, 1, 1};
    brg_runtime_options o = {.replicas = 1, .stages = 2, .block_stage = two, .micro_batches = 2, .training = false};
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    brg_tensor i0 = brg_tensor_wrap(BRG_DTYPE_I32, 2, half, (void *)d->ids);
    brg_tensor i1 = brg_tensor_wrap(BRG_DTYPE_I32, 2, half, (void *)(d->ids + ROWS / 2 * T));
    brg_tensor m0 = brg_tensor_wrap(BRG_DTYPE_F32, 2, half, (void *)d->mask);
    brg_tensor m1 = brg_tensor_wrap(BRG_DTYPE_F32, 2, half, (void *)(d->mask + ROWS / 2 * T));
    brg_micro_batch mbs[2] = {TEST_MAP("input_ids", &i0, "attention_mask", &m0),
                              TEST_MAP("input_ids", &i1, "attention_mask", &m1)};
    long n = ROWS * T * VOCAB;
    float *logits = calloc((size_t)n, sizeof *logits);
    float *sinks[2] = {logits, logits + n / 2};
    if (rt) CHECK_OK(brg_runtime_infer(rt, mbs, NULL, sinks, NULL));
    CHECK_MSG(test_max_abs_diff(logits, b.logits->data, n) < 1e-5, "pipelined logits differ by %g",
              test_max_abs_diff(logits, b.logits->data, n));
    brg_runtime_destroy(rt);
    free(logits);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

static const int ONE[4] = {0, 0, 0, 0}, FOUR[4] = {0, 1, 2, 3}, TWO[4] = {0, 0, 1, 1};

/* 1F1B keeps at most stages - stage micro-batches in flight and reuses their memory; GPipe
 * holds all eight at once. */
static void check_activation_memory(brg_model *m, const data *d, const result *single) {
    const layout l1f1b = {1, 2, 8, TWO, BRG_SCHEDULE_1F1B, .what = "8 micro-batches, 1F1B"};
    const layout lgpipe = {1, 2, 8, TWO, BRG_SCHEDULE_GPIPE, .what = "8 micro-batches, GPipe"};
    result one_f, gpipe;
    run(m, d, &l1f1b, &one_f);
    run(m, d, &lgpipe, &gpipe);
    compare(m, single, &one_f, l1f1b.what);
    compare(m, single, &gpipe, lgpipe.what);
    CHECK_MSG(2 * one_f.activation_peak < gpipe.activation_peak, "1F1B activation peak %zu, GPipe %zu",
              one_f.activation_peak, gpipe.activation_peak);
    printf("activation peak over 8 micro-batches: 1F1B %zu bytes, GPipe %zu\n", one_f.activation_peak,
           gpipe.activation_peak);
    free_result(m, &one_f);
    free_result(m, &gpipe);
}

/* recompute_checkpoint_every_layer: the same numbers, less activation memory. */
static void check_recomputation(brg_model *m, const data *d, const result *single) {
    const layout plain_l = {1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .what = "2 stages"};
    const layout again_l = {1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .recompute = true, .what = "recomputation, 2 stages"};
    result plain, recomputed;
    run(m, d, &plain_l, &plain);
    run(m, d, &again_l, &recomputed);
    compare(m, single, &recomputed, again_l.what);
    CHECK(recomputed.loss == plain.loss);
    CHECK_MSG(recomputed.activation_peak < plain.activation_peak, "recomputation peak %zu bytes, without %zu",
              recomputed.activation_peak, plain.activation_peak);
    printf("activation peak: %zu bytes without recomputation, %zu with\n", plain.activation_peak,
           recomputed.activation_peak);
    free_result(m, &plain);
    free_result(m, &recomputed);
}

/* params_in_model: replica 0's devices compute on the model's own memory for the parameters
 * their stage owns (the rest, tied copies and other replicas, on copies of their own), with the
 * losses, gradients and memory peaks that copies give; writing the weights back is a no-op. */
static void check_params_in_model(brg_model *m, const data *d) {
    const layout l = {2, 2, 2, TWO, BRG_SCHEDULE_1F1B, .what = "2 replicas x 2 stages"};
    brg_runtime_options copies = layout_options(&l), in_model = copies;
    in_model.params_in_model = true;
    brg_runtime *rt[2] = {NULL, NULL};
    CHECK_OK(brg_runtime_create(m, &copies, &rt[0]));
    CHECK_OK(brg_runtime_create(m, &in_model, &rt[1]));
    if (!rt[0] || !rt[1]) return;
    int shared = 0;
    for (int dv = 0; dv < brg_runtime_device_count(rt[1]); dv++) {
        brg_device_info info;
        brg_device_get_info(brg_runtime_device(rt[1], dv), &info);
        for (int p = 0; p < m->n_params; p++) {
            if (!info.holds[p]) continue;
            bool owner = info.replica == 0 && TWO[m->params[p].block] == info.stage;
            bool same = info.view->params[p].tensor->data == m->params[p].tensor->data;
            CHECK_MSG(same == owner, "device %d: %s %s the model's memory", dv, m->params[p].name,
                      same ? "shares" : "does not share");
            shared += same;
        }
    }
    CHECK(shared == m->n_params);
    batches b;
    split(m, d, d->labels, l.replicas, l.micro_batches, &b);
    result got[2];
    for (int k = 0; k < 2; k++) {
        float losses[8];
        CHECK_OK(brg_runtime_run(rt[k], b.mbs, &b.denom, 1, losses));
        got[k].loss = 0;
        for (int i = 0; i < 4; i++) got[k].loss += losses[i];
        collect_grads(rt[k], m, &got[k]);
    }
    CHECK(got[0].loss == got[1].loss);
    check_grads(m, &got[0], &got[1], "params_in_model");
    CHECK(got[0].activation_peak == got[1].activation_peak);
    for (int dv = 0; dv < brg_runtime_device_count(rt[1]); dv++) {
        brg_device_stats a, c;
        brg_runtime_device_stats(rt[0], dv, &a);
        brg_runtime_device_stats(rt[1], dv, &c);
        CHECK_MSG(a.peak_bytes == c.peak_bytes, "device %d peaks at %zu with copies, %zu on the model's memory", dv,
                  a.peak_bytes, c.peak_bytes);
    }
    CHECK_OK(brg_runtime_sync_to_model(rt[1]));
    for (int k = 0; k < 2; k++) {
        free_result(m, &got[k]);
        brg_runtime_destroy(rt[k]);
    }
}

/* The host model holds no gradients of its own while devices train (they would double the
 * memory of a run); brg_model_zero_grad gives every parameter a cleared one on request. */
static void check_host_gradients_lazy(brg_model *m) {
    for (int p = 0; p < m->n_params; p++) CHECK(m->params[p].tensor->grad == NULL);
    brg_model *fresh = tiny_gpt2();
    CHECK_OK(brg_model_zero_grad(fresh));
    for (int p = 0; p < fresh->n_params; p++) {
        const brg_tensor *t = fresh->params[p].tensor;
        CHECK(t->grad != NULL && test_max_abs(t->grad, (long)brg_tensor_numel(t)) == 0.0);
    }
    brg_model_destroy(fresh);
}

int main(void) {
    brg_model *m = tiny_gpt2();
    data d;
    make_data(&d);
    result single;
    run(m, &d, &(layout){1, 1, 1, ONE, BRG_SCHEDULE_1F1B, .what = "one device"}, &single);
    CHECK(single.loss > 1.0);
    const layout others[] = {
        {1, 4, 4, FOUR, BRG_SCHEDULE_1F1B, .what = "4 stages, 1F1B"},
        {1, 4, 2, FOUR, BRG_SCHEDULE_GPIPE, .what = "4 stages, GPipe, 2 micro-batches"},
        {2, 1, 1, ONE, BRG_SCHEDULE_1F1B, .what = "2 replicas"},
        {2, 2, 2, TWO, BRG_SCHEDULE_1F1B, .what = "2 replicas x 2 stages"},
        {1, 1, 8, ONE, BRG_SCHEDULE_1F1B, .what = "8 micro-batches on one device"},
        {1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .intra_threads = 2, .what = "2 stages x 2 threads per device"},
        {2, 4, 1, FOUR, BRG_SCHEDULE_GPIPE, .recompute = true, .what = "recomputation, 4 stages x 2 replicas"},
    };
    check_layouts_against(m, &d, run, &single, others, (int)(sizeof others / sizeof others[0]), "");
    check_activation_memory(m, &d, &single);
    check_recomputation(m, &d, &single);
    check_inference(m, &d);
    check_zero_between_runs(m, &d, 1, ONE);
    check_zero_between_runs(m, &d, 2, TWO);
    check_params_in_model(m, &d);
    check_host_gradients_lazy(m);
    free_result(m, &single);
    brg_model_destroy(m);
    return test_finish();
}
