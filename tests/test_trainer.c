/* Training pipelined and replicated gives the one-device numbers; resume is exact. */
#include "brigade/rng.h"
#include "brigade/trainer.h"
#include "test_util.h"

enum { ROWS = 16, T = 8, VOCAB = 37, STEPS = 10 };

static brg_model *tiny_gpt2(void) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = VOCAB;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 5);
    return m;
}

static brg_dataset *make_data(void) {
    int32_t ids[ROWS * T];
    float mask[ROWS * T];
    brg_rng rng;
    brg_rng_seed(&rng, 1);
    for (int i = 0; i < ROWS * T; i++) {
        ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
        mask[i] = (i % T) < T - ((i / T) % 3) ? 1.0f : 0.0f;
    }
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_from_rows(ids, mask, NULL, ROWS, T, &d));
    return d;
}

typedef struct run_out {
    double losses[STEPS];
    float *weights[64];
    int n_params;
} run_out;

static void record(void *ctx, int64_t step, double loss, float lr) {
    (void)lr;
    run_out *o = ctx;
    if (step >= 1 && step <= STEPS) o->losses[step - 1] = loss;
}

static void base_options(brg_train_options *o, run_out *out) {
    brg_train_options_default(o);
    o->steps = STEPS;
    o->shuffle = false;
    o->seed = 3;
    /* Adam turns rounding noise in a zero gradient (GPT-2's key bias gets exactly zero: softmax
     * ignores a per-row constant) into steps of size ~lr, so weights of runs that sum in
     * different orders drift apart by about lr x steps x 1e-3 there; 1e-3 keeps that < 1e-5. */
    o->optimizer.lr = 1e-3;
    o->optimizer.weight_decay = 0.01;
    o->lr_schedule.kind = BRG_LR_SCHEDULE_LINEAR;
    o->lr_schedule.warmup_steps = 2;
    o->max_grad_norm = 1.0f;
    o->on_step = record;
    o->on_step_ctx = out;
}

static void train(brg_train_options *o, const brg_dataset *d, run_out *out) {
    brg_model *m = tiny_gpt2();
    if (!m) return;
    brg_train_result r;
    CHECK_OK(brg_train(m, d, o, &r));
    out->n_params = m->n_params;
    for (int p = 0; p < m->n_params; p++) {
        size_t bytes = brg_tensor_nbytes(m->params[p].tensor);
        out->weights[p] = malloc(bytes);
        memcpy(out->weights[p], m->params[p].tensor->data, bytes);
    }
    brg_model_destroy(m);
}

static void free_out(run_out *o) {
    for (int p = 0; p < o->n_params; p++) free(o->weights[p]);
}

static void compare(const run_out *ref, const run_out *got, const char *what, double tol) {
    brg_model *m = tiny_gpt2();
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(fabs(ref->losses[s] - got->losses[s]) <= tol, "%s: step %d loss %.9f vs %.9f", what, s + 1,
                  got->losses[s], ref->losses[s]);
    for (int p = 0; m && p < m->n_params; p++) {
        long n = (long)brg_tensor_numel(m->params[p].tensor);
        double d = test_max_abs_diff(ref->weights[p], got->weights[p], n);
        CHECK_MSG(d <= tol, "%s: %s differs by %.3g after %d steps", what, m->params[p].name, d, STEPS);
    }
    brg_model_destroy(m);
}

static void test_parallel_matches_single(const brg_dataset *d) {
    run_out single = {0}, r = {0};
    brg_train_options o;
    base_options(&o, &single);
    o.micro_batch = 8;
    train(&o, d, &single);
    CHECK(single.losses[STEPS - 1] < single.losses[0]);

    int four[4] = {0, 1, 2, 3};
    base_options(&o, &r);
    o.micro_batch = 2, o.accumulation = 4, o.stages = 4, o.block_stage = four;
    train(&o, d, &r);
    compare(&single, &r, "layers_per_ipu [1,1,1,1]", 1e-5);
    free_out(&r);

    base_options(&o, &r);
    o.micro_batch = 4, o.replicas = 2;
    train(&o, d, &r);
    compare(&single, &r, "replication_factor 2", 1e-5);
    free_out(&r);

    base_options(&o, &r);
    o.micro_batch = 1, o.replicas = 2, o.accumulation = 4, o.stages = 4, o.block_stage = four;
    o.schedule = BRG_SCHEDULE_GPIPE;
    train(&o, d, &r);
    compare(&single, &r, "4 stages x 2 replicas, GPipe", 1e-5);
    free_out(&r);
    free_out(&single);
}

static void test_resume_is_exact(const brg_dataset *d) {
    char straight[1024], half[1024];
    snprintf(straight, sizeof straight, "%s/trainer-straight", test_tmp_dir());
    snprintf(half, sizeof half, "%s/trainer-half", test_tmp_dir());
    run_out a = {0}, b = {0};
    brg_train_options o;
    int two[4] = {0, 0, 1, 1};
    base_options(&o, &a);
    o.micro_batch = 2, o.accumulation = 2, o.stages = 2, o.block_stage = two, o.shuffle = true;
    o.output_dir = straight;
    train(&o, d, &a);

    base_options(&o, &b);
    o.micro_batch = 2, o.accumulation = 2, o.stages = 2, o.block_stage = two, o.shuffle = true;
    o.steps = 5;
    o.lr_schedule.total_steps = STEPS; /* the schedule of the full run */
    o.output_dir = half;
    train(&o, d, &b);
    free_out(&b);
    base_options(&o, &b);
    o.micro_batch = 2, o.accumulation = 2, o.stages = 2, o.block_stage = two, o.shuffle = true;
    o.resume_dir = half;
    o.output_dir = half;
    train(&o, d, &b);
    for (int p = 0; p < a.n_params; p++) {
        brg_model *m = tiny_gpt2();
        size_t bytes = brg_tensor_nbytes(m->params[p].tensor);
        CHECK_MSG(memcmp(a.weights[p], b.weights[p], bytes) == 0, "resumed %s differs", m->params[p].name);
        brg_model_destroy(m);
    }
    for (int s = 5; s < STEPS; s++) CHECK(a.losses[s] == b.losses[s]);
    /* The checkpoint is a model folder transformers-style tools (and brigade) load back. */
    brg_model *loaded = NULL;
    CHECK_OK(brg_model_load(straight, &loaded));
    if (loaded) CHECK(memcmp(loaded->params[0].tensor->data, a.weights[0], brg_tensor_nbytes(loaded->params[0].tensor)) == 0);
    brg_model_destroy(loaded);
    free_out(&a);
    free_out(&b);
}

static void test_budget_too_small(const brg_dataset *d) {
    brg_train_options o;
    run_out r = {0};
    base_options(&o, &r);
    o.micro_batch = 8;
    o.device_memory = 4096;
    brg_model *m = tiny_gpt2();
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_OOM, "device 0 (stage 0 of every replica) needs about");
    brg_model_destroy(m);
}

int main(void) {
    brg_dataset *d = make_data();
    test_parallel_matches_single(d);
    test_resume_is_exact(d);
    test_budget_too_small(d);
    brg_dataset_free(d);
    return test_finish();
}
