/* Sharded optimizer state (ZeRO-1, replicated_tensor_sharding) and off-chip state
 * (optimizer_state_offchip): the weights and checkpoints are the unsharded run's byte for byte,
 * the state per device falls by the replica count (measured and planned), the budget leaves
 * off-chip state out, and checkpoints resume into any layout with the same weights and state. */
#include <stdio.h>
#include <stdlib.h>

#include "brigade/optim.h"
#include "brigade/rng.h"
#include "brigade/trainer.h"
#include "test_util.h"
#include "trainer_util.h"

enum { ROWS = 16, T = 8, VOCAB = 37, STEPS = 6, MAX_PARAMS = 64 };

/* A run's layout: replicas x stages (blocks split in two halves on 2 stages), micro-batches. */
typedef struct layout {
    int replicas, stages, accumulation;
    int64_t micro;
    bool shard, offchip;
    const char *what;
} layout;

static int two_stages[8] = {0, 0, 1, 1};

static void options(brg_train_options *o, const layout *l) {
    brg_train_options_default(o);
    o->steps = STEPS;
    o->shuffle = true;
    o->seed = 3;
    o->optimizer.lr = 1e-3;
    o->optimizer.weight_decay = 0.01;
    o->lr_schedule.warmup_steps = 2;
    o->lr_schedule.total_steps = STEPS;
    o->max_grad_norm = 1.0f;
    o->replicas = l->replicas, o->stages = l->stages, o->accumulation = l->accumulation, o->micro_batch = l->micro;
    o->block_stage = l->stages == 2 ? two_stages : NULL;
    o->shard_optimizer_state = l->shard;
    o->optimizer_state_offchip = l->offchip;
}

typedef struct run_out {
    float *weights[MAX_PARAMS];
    int n_params;
    brg_train_result r;
    brg_status st;
} run_out;

static void run(const brg_train_options *o, const brg_dataset *d, run_out *out) {
    memset(out, 0, sizeof *out);
    brg_model *m = tu_tiny_gpt2(VOCAB);
    if (!m) return;
    out->st = brg_train(m, d, o, &out->r);
    out->n_params = m->n_params < MAX_PARAMS ? m->n_params : MAX_PARAMS;
    for (int p = 0; p < out->n_params; p++) {
        size_t bytes = brg_tensor_nbytes(m->params[p].tensor);
        out->weights[p] = malloc(bytes);
        memcpy(out->weights[p], m->params[p].tensor->data, bytes);
    }
    brg_model_destroy(m);
}

static void free_out(run_out *o) {
    for (int p = 0; p < o->n_params; p++) free(o->weights[p]);
}

static void same_weights(const run_out *a, const run_out *b, const char *what) {
    brg_model *m = tu_tiny_gpt2(VOCAB);
    CHECK(a->n_params == b->n_params);
    for (int p = 0; m && p < a->n_params && p < b->n_params; p++)
        CHECK_MSG(memcmp(a->weights[p], b->weights[p], brg_tensor_nbytes(m->params[p].tensor)) == 0,
                  "%s: %s differs (by up to %.3g)", what, m->params[p].name,
                  test_max_abs_diff(a->weights[p], b->weights[p], (long)brg_tensor_numel(m->params[p].tensor)));
    brg_model_destroy(m);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)(n > 0 ? n : 1));
    *len = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

/* Two files with the same bytes. */
static void same_file(const char *a, const char *b, const char *what) {
    size_t la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    CHECK_MSG(x && y && la > 0 && la == lb && memcmp(x, y, la) == 0, "%s: %s and %s differ", what, a, b);
    free(x);
    free(y);
}

static void fresh_dir(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/zero-%s", test_tmp_dir(), name);
    char rm[2200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", buf);
    CHECK(system(rm) == 0);
}

static void ckpt_file(char *buf, size_t len, const char *dir, int step, const char *file) {
    snprintf(buf, len, "%s/checkpoint-%d/%s", dir, step, file);
}

/* ---- the optimizer's shards ---- */

static void test_shard_slots(void) {
    enum { N = 11, PARTS = 3 };
    float grad[N], whole[N], parts[N];
    for (int i = 0; i < N; i++) {
        grad[i] = 0.1f * (float)(i - 5);
        whole[i] = parts[i] = 0.5f - 0.07f * (float)i;
    }
    parts[4] = whole[4] = -0.0f;
    brg_optimizer_config c = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    c.weight_decay = 0.1;
    brg_optimizer *full = NULL, *shard[PARTS] = {0};
    CHECK_OK(brg_optimizer_create(&c, NULL, &full));
    CHECK_OK(brg_optimizer_add_param(full, whole, grad, N, true, "w"));
    size_t shard_bytes = 0;
    for (int r = 0; r < PARTS; r++) {
        int64_t first, count;
        brg_shard_range(N, r, PARTS, &first, &count);
        CHECK_OK(brg_optimizer_create(&c, NULL, &shard[r]));
        CHECK_OK(brg_optimizer_add_param_shard(shard[r], parts, grad, N, first, count, true, "w"));
        CHECK(brg_optimizer_state_offset(shard[r], 0) == first);
        CHECK(brg_optimizer_state_param_numel(shard[r], 0) == N);
        CHECK(brg_optimizer_state_numel(shard[r], 0) == count);
        CHECK(strcmp(brg_optimizer_state_name(shard[r], 0), "w.exp_avg") == 0);
        shard_bytes += brg_optimizer_state_bytes(shard[r]);
    }
    CHECK(brg_optimizer_state_bytes(full) == 2 * N * sizeof(float));
    CHECK(shard_bytes == brg_optimizer_state_bytes(full));
    for (int s = 0; s < 3; s++) {
        CHECK_OK(brg_optimizer_step(full, 1e-2f));
        for (int r = 0; r < PARTS; r++) CHECK_OK(brg_optimizer_step(shard[r], 1e-2f));
    }
    CHECK_MSG(memcmp(whole, parts, sizeof whole) == 0, "the shards' updates differ from the whole parameter's");
    /* each shard updates its own elements only */
    float before[N];
    memcpy(before, parts, sizeof parts);
    CHECK_OK(brg_optimizer_step(shard[1], 1e-2f));
    int64_t first, count;
    brg_shard_range(N, 1, PARTS, &first, &count);
    for (int i = 0; i < N; i++)
        if (i < first || i >= first + count) CHECK(memcmp(&before[i], &parts[i], sizeof(float)) == 0);
    CHECK_ERR(brg_optimizer_add_param_shard(full, whole, grad, N, 8, 4, true, "v"), BRG_ERR_INVALID_ARG,
              "lies outside its 11 elements");
    /* a parameter smaller than the replicas: some shards are empty */
    brg_optimizer *empty = NULL;
    CHECK_OK(brg_optimizer_create(&c, NULL, &empty));
    CHECK_OK(brg_optimizer_add_param_shard(empty, whole, grad, N, N, 0, true, "w"));
    CHECK(brg_optimizer_state_numel(empty, 0) == 0 && brg_optimizer_state_bytes(empty) == 0);
    memcpy(before, whole, sizeof whole);
    CHECK_OK(brg_optimizer_step(empty, 1e-2f));
    CHECK(memcmp(before, whole, sizeof whole) == 0);
    brg_optimizer_destroy(empty);
    brg_optimizer *lamb = NULL;
    brg_optimizer_config lc = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    CHECK_OK(brg_optimizer_create(&lc, NULL, &lamb));
    CHECK_ERR(brg_optimizer_add_param_shard(lamb, whole, grad, N, 0, 4, true, "w"), BRG_ERR_INVALID_ARG,
              "LAMB cannot shard its state");
    brg_optimizer_destroy(lamb);
    for (int r = 0; r < PARTS; r++) brg_optimizer_destroy(shard[r]);
    brg_optimizer_destroy(full);
}

/* ---- sharded runs equal the unsharded ones ---- */

static void test_sharded_equals_unsharded(const brg_dataset *d, layout l, brg_precision precision) {
    char plain_dir[1024], shard_dir[1024], a[2048], b[2048], what[256];
    snprintf(what, sizeof what, "%s, %s", l.what, brg_precision_name(precision));
    fresh_dir(plain_dir, sizeof plain_dir, "plain");
    fresh_dir(shard_dir, sizeof shard_dir, "sharded");
    brg_train_options o;
    run_out plain, sharded;
    l.shard = false;
    options(&o, &l);
    o.precision = precision;
    o.output_dir = plain_dir;
    run(&o, d, &plain);
    CHECK_OK(plain.st);
    l.shard = true;
    options(&o, &l);
    o.precision = precision;
    o.output_dir = shard_dir;
    run(&o, d, &sharded);
    CHECK_MSG(sharded.st == BRG_OK, "%s: %s", what, brg_last_error());
    same_weights(&plain, &sharded, what);
    /* the checkpoint gathers the shards into the unsharded run's file */
    ckpt_file(a, sizeof a, plain_dir, STEPS, "optimizer.safetensors");
    ckpt_file(b, sizeof b, shard_dir, STEPS, "optimizer.safetensors");
    same_file(a, b, what);
    /* measured: the most state a device held falls by the replica count (within 10%) */
    double ratio = (double)plain.r.optimizer_state_bytes / (double)sharded.r.optimizer_state_bytes;
    CHECK_MSG(ratio > 0.9 * l.replicas && ratio < 1.1 * l.replicas, "%s: state per device %zu -> %zu (x%.3f)", what,
              plain.r.optimizer_state_bytes, sharded.r.optimizer_state_bytes, ratio);
    /* planned: the same fall */
    brg_device_plan p_plain[2], p_shard[2];
    brg_model *m = tu_tiny_gpt2(VOCAB);
    l.shard = false;
    options(&o, &l);
    CHECK_OK(brg_train_plan_memory(m, d, &o, p_plain));
    l.shard = true;
    options(&o, &l);
    CHECK_OK(brg_train_plan_memory(m, d, &o, p_shard));
    for (int s = 0; s < l.stages; s++) {
        double planned = (double)p_plain[s].optimizer_bytes / (double)p_shard[s].optimizer_bytes;
        CHECK_MSG(planned > 0.9 * l.replicas && planned < 1.1 * l.replicas, "%s: planned state x%.3f", what, planned);
        CHECK(p_plain[s].total_bytes - p_shard[s].total_bytes ==
              p_plain[s].optimizer_bytes - p_shard[s].optimizer_bytes);
    }
    brg_model_destroy(m);
    free_out(&plain);
    free_out(&sharded);
}

static void test_lamb_refused(const brg_dataset *d) {
    layout l = {2, 1, 1, 2, true, false, "lamb"};
    brg_train_options o;
    options(&o, &l);
    o.optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_LAMB);
    brg_model *m = tu_tiny_gpt2(VOCAB);
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_INVALID_ARG, "replicated_tensor_sharding does not work with LAMB");
    brg_model_destroy(m);
}

/* ---- checkpoints into any layout ---- */

/* Resumes `from` (a checkpoint at step STEPS / 2) under layout `l` without a further step: the
 * checkpoint it writes holds the same weights and optimizer state, byte for byte. */
static void resume_without_steps(const brg_dataset *d, const char *from, layout l) {
    char out[1024], a[2048], b[2048];
    fresh_dir(out, sizeof out, "relayout");
    brg_train_options o;
    options(&o, &l);
    o.steps = STEPS / 2;
    o.resume_dir = from;
    o.output_dir = out;
    run_out r;
    run(&o, d, &r);
    CHECK_MSG(r.st == BRG_OK, "resume into %s: %s", l.what, brg_last_error());
    const char *files[] = {"optimizer.safetensors", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        ckpt_file(a, sizeof a, from, STEPS / 2, files[i]);
        ckpt_file(b, sizeof b, out, STEPS / 2, files[i]);
        same_file(a, b, l.what);
    }
    free_out(&r);
}

static void test_any_layout(const brg_dataset *d) {
    /* 4 rows per step in every layout */
    const layout saved = {2, 2, 1, 2, true, false, "2 replicas x 2 stages, sharded"};
    const layout into[] = {
        {1, 1, 2, 2, false, false, "1 device"},
        {1, 2, 4, 1, false, false, "1 replica x 2 stages"},
        {4, 1, 1, 1, true, false, "4 replicas, sharded"},
        {4, 2, 1, 1, false, false, "4 replicas x 2 stages"},
        {2, 1, 2, 1, true, true, "2 replicas, sharded, off-chip"},
    };
    char dir[1024];
    fresh_dir(dir, sizeof dir, "saved");
    brg_train_options o;
    options(&o, &saved);
    o.steps = STEPS / 2;
    o.output_dir = dir;
    run_out r;
    run(&o, d, &r);
    CHECK_OK(r.st);
    free_out(&r);
    for (size_t i = 0; i < sizeof into / sizeof *into; i++) resume_without_steps(d, dir, into[i]);
}

/* The same layout sharded and not, in turns: the run goes on as if uninterrupted. */
static void test_resume_switches_sharding(const brg_dataset *d, bool first_sharded) {
    layout l = {2, 1, 1, 2, false, false, "2 replicas"};
    brg_train_options o;
    run_out straight, resumed;
    options(&o, &l);
    run(&o, d, &straight);
    CHECK_OK(straight.st);
    char dir[1024];
    fresh_dir(dir, sizeof dir, "switch");
    l.shard = first_sharded;
    options(&o, &l);
    o.steps = STEPS / 2;
    o.output_dir = dir;
    run(&o, d, &resumed);
    CHECK_OK(resumed.st);
    free_out(&resumed);
    l.shard = !first_sharded;
    options(&o, &l);
    o.resume_dir = dir;
    run(&o, d, &resumed);
    CHECK_OK(resumed.st);
    same_weights(&straight, &resumed, first_sharded ? "sharded, then resumed unsharded" : "unsharded, then sharded");
    free_out(&straight);
    free_out(&resumed);
}

/* ---- off-chip state ---- */

static void test_offchip(const brg_dataset *d) {
    layout l = {1, 2, 2, 2, false, false, "1 replica x 2 stages"};
    brg_train_options o;
    options(&o, &l);
    brg_model *m = tu_tiny_gpt2(VOCAB);
    brg_device_plan plan[2], off[2];
    /* The plans without packed weights (a budget too small for them): the budgets below are
     * derived from what a device needs at least. */
    o.device_memory = 1;
    CHECK_OK(brg_train_plan_memory(m, d, &o, plan));
    o.device_memory = 0;
    brg_model_destroy(m);
    run_out normal, offchip;
    run(&o, d, &normal);
    CHECK_OK(normal.st);
    /* a budget that fits every device without its state, and not with it */
    size_t budget = 0;
    for (int s = 0; s < 2; s++) {
        size_t without = (size_t)(plan[s].total_bytes - plan[s].optimizer_bytes);
        if (without > budget) budget = without;
    }
    for (int s = 0; s < 2; s++) CHECK(budget < (size_t)plan[s].total_bytes || plan[s].optimizer_bytes == 0);
    o.device_memory = budget;
    m = tu_tiny_gpt2(VOCAB);
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_OOM, "needs about");
    brg_model_destroy(m);
    l.offchip = true;
    options(&o, &l);
    m = tu_tiny_gpt2(VOCAB);
    o.device_memory = 1;
    CHECK_OK(brg_train_plan_memory(m, d, &o, off));
    o.device_memory = 0;
    brg_model_destroy(m);
    for (int s = 0; s < 2; s++) {
        CHECK(off[s].optimizer_offchip && off[s].optimizer_bytes == plan[s].optimizer_bytes);
        CHECK(off[s].total_bytes == plan[s].total_bytes - plan[s].optimizer_bytes);
    }
    o.device_memory = budget;
    run(&o, d, &offchip);
    CHECK_MSG(offchip.st == BRG_OK, "off-chip under the tight budget: %s", brg_last_error());
    CHECK(offchip.r.optimizer_state_offchip && offchip.r.optimizer_state_bytes == normal.r.optimizer_state_bytes);
    same_weights(&normal, &offchip, "off-chip state");
    /* the device arenas no longer hold the state */
    for (int s = 0; s < 2; s++)
        CHECK_MSG(offchip.r.stage_peak_bytes[s] + (size_t)plan[s].optimizer_bytes / 2 < normal.r.stage_peak_bytes[s],
                  "stage %d's arena peak %zu with off-chip state, %zu without", s, offchip.r.stage_peak_bytes[s],
                  normal.r.stage_peak_bytes[s]);
    free_out(&normal);
    free_out(&offchip);
}

int main(void) {
    brg_dataset *d = tu_token_rows(ROWS, T, VOCAB, true);
    test_shard_slots();
    test_sharded_equals_unsharded(d, (layout){2, 1, 2, 1, false, false, "2 replicas"}, BRG_PRECISION_32_32);
    test_sharded_equals_unsharded(d, (layout){4, 1, 1, 1, false, false, "4 replicas"}, BRG_PRECISION_32_32);
    test_sharded_equals_unsharded(d, (layout){2, 2, 2, 1, false, false, "2 replicas x 2 stages"}, BRG_PRECISION_32_32);
    test_sharded_equals_unsharded(d, (layout){2, 2, 1, 2, false, false, "2 replicas x 2 stages"}, BRG_PRECISION_16_16);
    test_sharded_equals_unsharded(d, (layout){4, 1, 1, 1, false, false, "4 replicas"}, BRG_PRECISION_BF16_16);
    test_lamb_refused(d);
    test_any_layout(d);
    test_resume_switches_sharding(d, true);
    test_resume_switches_sharding(d, false);
    test_offchip(d);
    brg_dataset_free(d);
    return test_finish();
}
