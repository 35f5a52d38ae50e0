/* Training pipelined and replicated gives the one-device numbers; resume is exact. */
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/rng.h"
#include "brigade/trainer.h"
#include "kernels/kernels.h"
#include "test_util.h"
#include "trainer_util.h"
#include "train/checkpoint_dir.h"

enum { ROWS = 16, T = 8, VOCAB = 37, STEPS = 10 };

typedef struct run_out {
    double losses[STEPS];
    float *weights[64];
    int n_params;
    brg_train_result r;
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
    brg_model *m = tu_tiny_gpt2(VOCAB);
    if (!m) return;
    CHECK_OK(brg_train(m, d, o, &out->r));
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
    brg_model *m = tu_tiny_gpt2(VOCAB);
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

/* Several micro-batches a step: the devices pack their linear weights once per step (after each
 * update, so a stale pack changes step 2 on) and every micro-batch's forward and input gradient
 * read the panels. Losses and weights are bit for bit those of the same run with a budget that
 * has room for the plain weights only (no packs), on one thread per device and on two, in bf16.32
 * (the AMX kernel's bf16 panels, where the CPU has them) and in fp32 (which packs nothing); the
 * packing run's devices hold the plan's panels on top. */
static void packed_weights_step(const brg_dataset *d, brg_precision precision, int threads) {
    int two[4] = {0, 0, 1, 1};
    const brg_dtype compute = brg_precision_compute_dtype(precision);
    /* bf16 products pack where this CPU's bf16 kernel has panels (AMX); fp32 ones never do */
    const bool packs = brg_plan_packs_weights(4, compute) && brg_gemm_pack_layout_for(compute) != BRG_GEMM_PACK_NONE;
    char what[64];
    snprintf(what, sizeof what, "packed weights, %s, %d thread(s)", brg_precision_name(precision), threads);
    run_out packed = {0}, plain = {0};
    brg_train_options o;
    base_options(&o, &packed);
    o.micro_batch = 2, o.accumulation = 4, o.stages = 2, o.block_stage = two, o.intra_threads = threads;
    o.precision = precision;
    brg_model *m = tu_tiny_gpt2(VOCAB);
    brg_device_plan with[2], without[2];
    CHECK_OK(brg_train_plan_memory(m, d, &o, with));
    o.device_memory = 1; /* no room: the plan without packed weights */
    CHECK_OK(brg_train_plan_memory(m, d, &o, without));
    brg_model_destroy(m);
    o.device_memory = 0;
    train(&o, d, &packed);
    base_options(&o, &plain);
    o.micro_batch = 2, o.accumulation = 4, o.stages = 2, o.block_stage = two, o.intra_threads = threads;
    o.precision = precision;
    o.device_memory =
        (size_t)(without[0].total_bytes > without[1].total_bytes ? without[0].total_bytes : without[1].total_bytes);
    train(&o, d, &plain);
    compare(&plain, &packed, what, 0);
    for (int s = 0; s < 2; s++) {
        CHECK_MSG(packs == (with[s].packed_bytes > 0), "%s: stage %d plans %lld bytes of packed weights", what, s,
                  (long long)with[s].packed_bytes);
        CHECK_MSG(packed.r.stage_peak_bytes[s] == plain.r.stage_peak_bytes[s] + (size_t)with[s].packed_bytes,
                  "%s: stage %d peaked at %zu bytes packing, %zu plain, with %lld planned for the panels", what, s,
                  packed.r.stage_peak_bytes[s], plain.r.stage_peak_bytes[s], (long long)with[s].packed_bytes);
    }
    free_out(&packed);
    free_out(&plain);
}

static void test_packed_weights_step(const brg_dataset *d) {
    for (int threads = 1; threads <= 2; threads++) {
        packed_weights_step(d, BRG_PRECISION_32_32, threads);
        packed_weights_step(d, BRG_PRECISION_BF16_32, threads);
    }
}

static void test_resume_is_exact(const brg_dataset *d) {
    char straight[1024], half[1024];
    snprintf(straight, sizeof straight, "%s/trainer-straight", test_tmp_dir());
    snprintf(half, sizeof half, "%s/trainer-half", test_tmp_dir());
    /* --resume takes the newest checkpoint in the folder: start from an empty one. */
    char rm[2100];
    snprintf(rm, sizeof rm, "rm -rf '%s' '%s'", straight, half);
    CHECK(system(rm) == 0);
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
        brg_model *m = tu_tiny_gpt2(VOCAB);
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

static bool exists(const char *dir, const char *name) {
    char path[2100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Checkpoints are whole checkpoint-N folders (the newest save_total_limit of them kept, each with
 * every file, no temporaries left); the final model sits in the output folder itself; a set whose
 * parts disagree on the step is refused on resume, naming both steps. */
static void test_checkpoint_folders(const brg_dataset *d) {
    char out[1024], rm[1100];
    snprintf(out, sizeof out, "%s/trainer-folders", test_tmp_dir());
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    CHECK(system(rm) == 0);
    run_out a = {0};
    brg_train_options o;
    base_options(&o, &a);
    o.micro_batch = 2;
    o.output_dir = out;
    o.save_every = 3;
    o.save_total_limit = 2;
    train(&o, d, &a);
    free_out(&a);
    /* Saved at 3, 6, 9 and 10 (the end): the two newest stay. */
    CHECK(!exists(out, "checkpoint-3") && !exists(out, "checkpoint-6"));
    CHECK(exists(out, "checkpoint-9") && exists(out, "checkpoint-10"));
    const char *files[] = {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"};
    char ckpt[1100];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint-10", out);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        CHECK_MSG(exists(ckpt, files[i]), "checkpoint-10 lacks %s", files[i]);
    CHECK(exists(out, "config.json") && exists(out, "model.safetensors"));
    CHECK_MSG(!exists(out, "optimizer.safetensors"), "the final folder should hold the model only");
    char find[1100];
    snprintf(find, sizeof find, "ls '%s' | grep -q tmp", out);
    CHECK_MSG(system(find) != 0, "a temporary checkpoint folder was left in %s", out);
    CHECK_OK(brg_ckpt_dir_check(ckpt));

    /* Resumed at its last step, a run saves that step's checkpoint again: the old folder is
     * replaced whole, and what is left is complete. */
    base_options(&o, &a);
    o.micro_batch = 2, o.output_dir = out, o.resume_dir = out, o.save_total_limit = 2;
    brg_model *again = tu_tiny_gpt2(VOCAB);
    CHECK_OK(brg_train(again, d, &o, NULL));
    brg_model_destroy(again);
    CHECK_OK(brg_ckpt_dir_check(ckpt));
    CHECK_MSG(system(find) != 0, "a temporary or an old copy was left in %s", out);

    /* A mixed set: checkpoint-10's trainer state from checkpoint-9. */
    char cp[2300];
    snprintf(cp, sizeof cp, "cp '%s/checkpoint-9/trainer_state.json' '%s/trainer_state.json'", out, ckpt);
    CHECK(system(cp) == 0);
    base_options(&o, &a);
    o.micro_batch = 2;
    o.steps = 12;
    o.resume_dir = out;
    brg_model *m = tu_tiny_gpt2(VOCAB);
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_FORMAT, "optimizer state is at step 10 and its trainer state at step 9");
    brg_model_destroy(m);
    /* Told to resume from a folder with no checkpoint at all. */
    char empty[1100];
    snprintf(empty, sizeof empty, "%s/empty", out);
    CHECK(mkdir(empty, 0777) == 0);
    o.resume_dir = empty;
    m = tu_tiny_gpt2(VOCAB);
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_NOT_FOUND, "holds no complete checkpoint");
    brg_model_destroy(m);
}

static float lrs[16];
static void record_lr(void *ctx, int64_t step, double loss, float lr) {
    (void)ctx, (void)loss;
    if (step >= 1 && step <= 16) lrs[step - 1] = lr;
}

/* A resumed run keeps the original run's LR schedule (a linear decay over its 4 steps has ended,
 * so steps 5-8 run at lr 0) unless given a schedule length of its own. */
static void test_resume_keeps_schedule(const brg_dataset *d) {
    char out[1024], rm[1100];
    snprintf(out, sizeof out, "%s/trainer-schedule", test_tmp_dir());
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    for (int pass = 0; pass < 2; pass++) {
        CHECK(system(rm) == 0);
        run_out a = {0};
        brg_train_options o;
        base_options(&o, &a);
        o.micro_batch = 2, o.steps = 4, o.output_dir = out;
        train(&o, d, &a);
        free_out(&a);
        base_options(&o, &a);
        o.micro_batch = 2, o.steps = 8, o.resume_dir = out;
        o.on_step = record_lr;
        if (pass == 1) o.lr_schedule.total_steps = 8;
        memset(lrs, 0xff, sizeof lrs);
        brg_model *m = tu_tiny_gpt2(VOCAB);
        CHECK_OK(brg_train(m, d, &o, NULL));
        brg_model_destroy(m);
        for (int s = 4; s < 8; s++)
            CHECK_MSG(pass == 0 ? lrs[s] == 0.0f : lrs[s] > 0.0f, "pass %d: lr at step %d is %g", pass, s + 1,
                      (double)lrs[s]);
    }
}

static void test_budget_too_small(const brg_dataset *d) {
    brg_train_options o;
    run_out r = {0};
    base_options(&o, &r);
    o.micro_batch = 8;
    o.device_memory = 4096;
    brg_model *m = tu_tiny_gpt2(VOCAB);
    CHECK_ERR(brg_train(m, d, &o, NULL), BRG_ERR_OOM, "device 0 (stage 0 of every replica) needs about");
    brg_model_destroy(m);
}

/* ---- divergence: a model whose gradient (or loss) turns NaN at a chosen step ---- */

typedef enum { POISON_GRAD, POISON_LOSS } poison_kind;
static struct {
    brg_model_ops ops;
    const brg_model_ops *inner;
    poison_kind kind;
    int at_call, calls; /* head forwards so far; one per step with a single micro-batch */
} poison;

typedef struct poison_ctx {
    brg_tensor *param;
} poison_ctx;

/* Runs first in backward (it is recorded last), before any real gradient lands. */
static brg_status poison_backward(brg_tape *tape, void *ctx) {
    poison_ctx *c = ctx;
    brg_status st = BRG_OK;
    float *g = brg_tape_grad(tape, c->param, &st);
    if (g) g[0] += NAN;
    return st;
}

static brg_status poisoned_forward(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    BRG_TRY(poison.inner->forward_block(m, block, tape, b));
    if (m->blocks[block].kind != BRG_BLOCK_HEAD || ++poison.calls != poison.at_call) return BRG_OK;
    if (poison.kind == POISON_LOSS) {
        ((float *)b->loss->data)[0] = NAN;
        return BRG_OK;
    }
    poison_ctx *c = brg_tape_record(tape, poison_backward, sizeof *c);
    if (!c) return brg_error(BRG_ERR_OOM, "poison node");
    c->param = m->params[m->n_params - 1].tensor;
    return BRG_OK;
}

static void read_file(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* A NaN at step 3 stops the run there: the model keeps the weights of step 2 (those of a clean
 * two-step run, bit for bit), the error names the step, and the log's line for step 3 carries
 * null for what is not finite and an "error" field. */
static void test_divergence_stops(const brg_dataset *d, poison_kind kind) {
    const char *what = kind == POISON_GRAD ? "NaN gradient" : "NaN loss";
    run_out clean = {0}, r = {0};
    brg_train_options o;
    base_options(&o, &clean);
    o.micro_batch = 8;
    o.steps = 2;
    o.lr_schedule.total_steps = STEPS;
    train(&o, d, &clean);

    char log[1024], text[4096];
    snprintf(log, sizeof log, "%s/trainer-diverged.jsonl", test_tmp_dir());
    base_options(&o, &r);
    o.micro_batch = 8;
    o.lr_schedule.total_steps = STEPS;
    o.log_path = log;
    brg_model *m = tu_tiny_gpt2(VOCAB);
    if (!m) return;
    poison.inner = m->ops;
    poison.ops = *m->ops;
    poison.ops.forward_block = poisoned_forward;
    poison.kind = kind, poison.at_call = 3, poison.calls = 0;
    m->ops = &poison.ops;
    brg_train_result res;
    CHECK_ERR(brg_train(m, d, &o, &res), BRG_ERR_DIVERGED, "training diverged at step 3");
    CHECK_MSG(strstr(brg_last_error(), kind == POISON_GRAD ? "gradient norm NaN" : "loss is NaN"), "%s: %s", what,
              brg_last_error());
    CHECK_MSG(res.steps == 2, "%s: result.steps %lld", what, (long long)res.steps);
    for (int p = 0; p < m->n_params && p < clean.n_params; p++)
        CHECK_MSG(memcmp(clean.weights[p], m->params[p].tensor->data, brg_tensor_nbytes(m->params[p].tensor)) == 0,
                  "%s: %s changed by the refused step", what, m->params[p].name);
    read_file(log, text, sizeof text);
    const char *line3 = strstr(text, "{\"step\": 3,");
    CHECK_MSG(line3 && strstr(line3, "\"error\": \"diverged") && !strstr(text, "nan") && !strstr(text, "inf"),
              "%s: log %s", what, text);
    CHECK_MSG(line3 && strstr(line3, kind == POISON_GRAD ? "\"grad_norm\": null" : "\"loss\": null"), "%s: log %s",
              what, text);
    brg_model_destroy(m);
    free_out(&clean);
}

int main(void) {
    brg_dataset *d = tu_token_rows(ROWS, T, VOCAB, true);
    test_parallel_matches_single(d);
    test_packed_weights_step(d);
    test_resume_is_exact(d);
    test_checkpoint_folders(d);
    test_resume_keeps_schedule(d);
    test_budget_too_small(d);
    test_divergence_stops(d, POISON_GRAD);
    test_divergence_stops(d, POISON_LOSS);
    brg_dataset_free(d);
    return test_finish();
}
