/* The trainer in the half precision modes: automatic loss scaling backs off from a scale that
 * overflows and the run converges, a static scale that overflows stops the run, .16 runs save
 * half weights that load again, the automatic scale survives a resume, and stochastic rounding
 * reproduces on any placement. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/ops_internal.h"
#include "brigade/model.h"
#include "brigade/safetensors.h"
#include "brigade/trace.h"
#include "brigade/trainer.h"
#include "test_util.h"

#define DIR "tests/fixtures/train_gpt2"
#define STEPS 12

typedef struct record {
    double loss[STEPS];
} record;

static void on_step(void *ctx, int64_t step, double loss, float lr) {
    (void)lr;
    record *r = ctx;
    if (step >= 1 && step <= STEPS) r->loss[step - 1] = loss;
}

typedef struct run_setup {
    brg_precision precision;
    float loss_scaling;
    bool auto_scaling;
    int stochastic;
    int stages;
    int64_t steps, save_every;
    const char *output, *resume, *log;
    int accumulation;          /* 0: 2 */
    bool recompute;            /* recompute_checkpoint_every_layer */
    bool sgd;                  /* SGD at lr 0.1 instead of AdamW at 1e-3 */
    brg_train_result *result;  /* optional */
} run_setup;

static brg_status train(const run_setup *s, record *rec, brg_model **kept) {
    brg_model *m = NULL;
    brg_dataset *d = NULL;
    CHECK_OK(brg_model_load(DIR, &m));
    CHECK_OK(brg_dataset_load(DIR "/data.safetensors", m, 0, &d));
    if (!m || !d) return BRG_ERR_INTERNAL;
    brg_train_options o;
    brg_train_options_default(&o);
    static const int two[4] = {0, 0, 1, 1};
    o.stages = s->stages ? s->stages : 1, o.block_stage = o.stages == 2 ? two : NULL;
    o.accumulation = s->accumulation ? s->accumulation : 2, o.micro_batch = 4, o.steps = s->steps ? s->steps : STEPS,
    o.shuffle = false;
    o.optimizer.lr = 1e-3;
    if (s->sgd) {
        o.optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
        o.optimizer.lr = 0.1f;
    }
    o.precision = s->precision, o.loss_scaling = s->loss_scaling, o.auto_loss_scaling = s->auto_scaling;
    o.stochastic_rounding = s->stochastic;
    o.recompute = s->recompute;
    o.output_dir = s->output, o.save_every = s->save_every, o.resume_dir = s->resume, o.log_path = s->log;
    o.overwrite_output = true;
    o.on_step = on_step, o.on_step_ctx = rec;
    brg_status st = brg_train(m, d, &o, s->result);
    brg_dataset_free(d);
    if (kept) *kept = m;
    else brg_model_destroy(m);
    return st;
}

/* The log's lines (steps only, not evaluations) as parsed JSON; *n their count. */
static cJSON **read_log(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "no log at %s", path);
    static cJSON *lines[64];
    *n = 0;
    char buf[4096];
    while (f && fgets(buf, sizeof buf, f) && *n < 64) {
        cJSON *j = cJSON_Parse(buf);
        CHECK_MSG(j != NULL, "log line is not JSON: %s", buf);
        if (j) lines[(*n)++] = j;
    }
    if (f) fclose(f);
    return lines;
}

static void free_log(cJSON **lines, int n) {
    for (int i = 0; i < n; i++) cJSON_Delete(lines[i]);
}

static double num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static bool skipped(const cJSON *j) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "skipped")); }

/* Started at 2^22 the scaled fp16 gradients overflow: those steps are skipped and the scale
 * halves each time until they fit; from there every step applies and the loss falls. */
static void test_auto_backs_off(brg_precision precision) {
    char log[] = "/tmp/brigade-precision-log-XXXXXX";
    int fd = mkstemp(log);
    CHECK(fd >= 0);
    close(fd);
    record rec = {0};
    run_setup s = {.precision = precision, .loss_scaling = 0x1p22f, .auto_scaling = true, .log = log};
    CHECK_OK(train(&s, &rec, NULL));
    int n;
    cJSON **lines = read_log(log, &n);
    CHECK_MSG(n == STEPS, "%d log lines", n);
    int skips = 0;
    double scale = 0x1p22;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(num(lines[i], "loss_scale") == scale, "step %d: loss_scale %g, expected %g", i + 1,
                  num(lines[i], "loss_scale"), scale);
        if (skipped(lines[i])) skips++, scale /= 2;
    }
    CHECK_MSG(skipped(lines[0]) && skips <= STEPS / 2, "%s: %d of %d steps skipped (the first: %d)",
              brg_precision_name(precision), skips, STEPS, skipped(lines[0]));
    /* the data repeats every 3 steps; the first steps were skipped, so step 3 saw the initial
     * weights on the rows the last step sees */
    const int before = 2;
    CHECK_MSG(skipped(lines[0]) && skipped(lines[1]) && rec.loss[STEPS - 1] < rec.loss[before] - 0.02,
              "%s: loss %.4f at step %d -> %.4f at step %d on the same rows", brg_precision_name(precision),
              rec.loss[before], before + 1, rec.loss[STEPS - 1], STEPS);
    printf("%s: automatic loss scaling skipped %d steps (2^22 -> 2^%d), loss %.4f -> %.4f\n",
           brg_precision_name(precision), skips, 22 - skips, rec.loss[before], rec.loss[STEPS - 1]);
    free_log(lines, n);
    unlink(log);
}

static void test_static_overflow_stops(void) {
    record rec = {0};
    run_setup s = {.precision = BRG_PRECISION_16_16, .loss_scaling = 0x1p40f};
    CHECK_ERR(train(&s, &rec, NULL), BRG_ERR_DIVERGED, "with the loss scaled by 1.09951e+12 the gradients overflowed");
    /* the same scale in bf16 fits: bf16 has fp32's range */
    s.precision = BRG_PRECISION_BF16_16;
    CHECK_OK(train(&s, &rec, NULL));
}

static bool half_representable(brg_dtype t, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float r = t == BRG_DTYPE_F16 ? brg_f16_to_f32(brg_f32_to_f16(x[i])) : brg_bf16_to_f32(brg_f32_to_bf16(x[i]));
        if (r != x[i]) return false;
    }
    return true;
}

/* A .16 run's model is saved in the half type with torch_dtype saying so, and loads back to the
 * weights the run ended with. */
static void test_save_as_refuses(void) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(DIR, &m));
    if (!m) return;
    CHECK_ERR(brg_model_save_as(m, "/tmp/brigade-precision-never", BRG_DTYPE_I32), BRG_ERR_INVALID_ARG,
              "a model is saved as F32, F16 or BF16, not I32");
    CHECK(access("/tmp/brigade-precision-never", F_OK) != 0);
    brg_model_destroy(m);
}

static void test_half_checkpoint(brg_precision precision, const char *dtype_name, const char *torch_dtype) {
    char out[] = "/tmp/brigade-precision-out-XXXXXX";
    CHECK(mkdtemp(out) != NULL);
    record rec = {0};
    brg_model *trained = NULL;
    run_setup s = {.precision = precision, .loss_scaling = 1024, .output = out, .steps = 4};
    CHECK_OK(train(&s, &rec, &trained));
    if (!trained) return;
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(path, &f));
    brg_tensor t;
    if (f) {
        CHECK_OK(brg_safetensors_get(f, "transformer.h.0.attn.c_attn.weight", &t));
        CHECK_MSG(strcmp(brg_dtype_name(t.dtype), dtype_name) == 0, "saved as %s", brg_dtype_name(t.dtype));
        brg_safetensors_close(f);
    }
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *cf = fopen(path, "r");
    char text[8192] = "";
    if (cf) text[fread(text, 1, sizeof text - 1, cf)] = '\0', fclose(cf);
    cJSON *cfg = cJSON_Parse(text);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(cfg, "torch_dtype");
    CHECK_MSG(cJSON_IsString(dt) && strcmp(dt->valuestring, torch_dtype) == 0, "config.json's torch_dtype is not %s",
              torch_dtype);
    cJSON_Delete(cfg);
    brg_model *loaded = NULL;
    CHECK_OK(brg_model_load(out, &loaded));
    for (int p = 0; loaded && p < trained->n_params; p++) {
        const brg_tensor *a = trained->params[p].tensor, *b = loaded->params[p].tensor;
        CHECK_MSG(half_representable(brg_precision_master_dtype(precision), a->data, brg_tensor_numel(a)),
                  "%s: %s holds values the half type cannot", brg_precision_name(precision), trained->params[p].name);
        CHECK_MSG(memcmp(a->data, b->data, brg_tensor_nbytes(a)) == 0, "%s reloads differently",
                  trained->params[p].name);
    }
    brg_model_destroy(loaded);
    brg_model_destroy(trained);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK(system(cmd) == 0);
}

/* Resumed from a checkpoint, an automatic scale goes on where it was: the same scales, skips and
 * losses as the run that was not interrupted. */
static void test_resume_keeps_scale(void) {
    char out[] = "/tmp/brigade-precision-resume-XXXXXX", log1[600], log2[600];
    CHECK(mkdtemp(out) != NULL);
    snprintf(log1, sizeof log1, "%s.whole.jsonl", out);
    snprintf(log2, sizeof log2, "%s.resumed.jsonl", out);
    record whole = {0}, resumed = {0};
    run_setup s = {.precision = BRG_PRECISION_16_32, .loss_scaling = 0x1p24f, .auto_scaling = true, .steps = 10,
                   .output = out, .save_every = 5, .log = log1};
    CHECK_OK(train(&s, &whole, NULL));
    char ckpt[700];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint-5", out);
    s.resume = ckpt, s.log = log2, s.save_every = 0;
    CHECK_OK(train(&s, &resumed, NULL));
    int n1, n2;
    cJSON **a = read_log(log1, &n1);
    cJSON *first[64];
    memcpy(first, a, sizeof(cJSON *) * (size_t)n1);
    cJSON **b = read_log(log2, &n2);
    /* the resumed log appends to nothing here: it holds the steps after the checkpoint */
    CHECK_MSG(n1 == 10 && n2 >= 5, "%d and %d log lines", n1, n2);
    for (int i = 0; n2 >= 5 && i < 5; i++) {
        const cJSON *x = first[5 + i], *y = b[n2 - 5 + i];
        CHECK_MSG(num(x, "loss_scale") == num(y, "loss_scale") && skipped(x) == skipped(y),
                  "step %d: scale %g vs resumed %g", 6 + i, num(x, "loss_scale"), num(y, "loss_scale"));
        CHECK_MSG(whole.loss[5 + i] == resumed.loss[5 + i], "step %d: loss %.9g vs resumed %.9g", 6 + i,
                  whole.loss[5 + i], resumed.loss[5 + i]);
    }
    int skips = 0;
    for (int i = 0; i < n1; i++) skips += skipped(first[i]);
    CHECK_MSG(skips >= 1, "no step skipped at 2^24: the test would not see a restored scale");
    /* A checkpoint whose loss scale is not a positive number is refused, naming the field. */
    char state[800];
    snprintf(state, sizeof state, "%s/trainer_state.json", ckpt);
    FILE *sf = fopen(state, "r");
    static char text[1 << 16];
    size_t len = sf ? fread(text, 1, sizeof text - 1, sf) : 0;
    if (sf) fclose(sf);
    text[len] = '\0';
    cJSON *js = cJSON_Parse(text);
    CHECK(js != NULL && cJSON_GetObjectItemCaseSensitive(js, "loss_scale") != NULL);
    if (js) {
        cJSON_ReplaceItemInObjectCaseSensitive(js, "loss_scale", cJSON_CreateNumber(-4));
        char *bad = cJSON_Print(js);
        sf = fopen(state, "w");
        if (sf && bad) fputs(bad, sf);
        if (sf) fclose(sf);
        free(bad);
        cJSON_Delete(js);
    }
    record ignored = {0};
    s.log = NULL;
    CHECK_ERR(train(&s, &ignored, NULL), BRG_ERR_FORMAT, "loss_scale must be a positive number");
    free_log(first, n1);
    free_log(b, n2);
    unlink(log1);
    unlink(log2);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK(system(cmd) == 0);
}

/* Stochastic rounding draws from (seed, step, parameter, element): two runs agree, and so do one
 * device and a two-stage pipeline; rounding to nearest gives other weights. */
static void test_stochastic_reproduces(void) {
    record one = {0}, again = {0}, piped = {0}, nearest = {0};
    run_setup s = {.precision = BRG_PRECISION_BF16_16, .stochastic = -1};
    CHECK_OK(train(&s, &one, NULL));
    CHECK_OK(train(&s, &again, NULL));
    s.stages = 2;
    CHECK_OK(train(&s, &piped, NULL));
    s.stages = 1, s.stochastic = 0;
    CHECK_OK(train(&s, &nearest, NULL));
    bool differs = false;
    for (int i = 0; i < STEPS; i++) {
        CHECK_MSG(one.loss[i] == again.loss[i], "step %d: %.9g vs %.9g on a second run", i + 1, one.loss[i],
                  again.loss[i]);
        CHECK_MSG(fabs(one.loss[i] - piped.loss[i]) <= 1e-5 * fabs(one.loss[i]),
                  "step %d: %.9g on one device, %.9g over two stages", i + 1, one.loss[i], piped.loss[i]);
        differs |= one.loss[i] != nearest.loss[i];
    }
    CHECK_MSG(differs, "stochastic rounding (the .16 default) gave the losses of rounding to nearest");
}

/* The bytes the trace's "send forward" events carried (stage 0 to stage 1: the hidden states). */
static double forward_send_bytes(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "no trace at %s", path);
    if (!f) return 0;
    static char text[1 << 22];
    const size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    cJSON *j = cJSON_Parse(text), *events = cJSON_GetObjectItemCaseSensitive(j, "traceEvents");
    double bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(name) && strncmp(name->valuestring, "send forward", 12) == 0)
            bytes += num(cJSON_GetObjectItemCaseSensitive(e, "args"), "bytes");
    }
    cJSON_Delete(j);
    return bytes;
}

/* The .16 modes hold activations and their gradients in the half type: the most a micro-batch
 * holds on a device is at most 0.55x fp32's (the .32 modes: fp32's), and the hidden states a stage
 * sends the next are half the bytes, where the .32 modes send fp32. */
static void test_half_activations(void) {
    static const brg_precision modes[] = {BRG_PRECISION_32_32, BRG_PRECISION_BF16_32, BRG_PRECISION_16_16,
                                          BRG_PRECISION_BF16_16};
    double act[4] = {0}, sent[4] = {0};
    for (int i = 0; i < 4; i++) {
        brg_train_result r = {0};
        record ignored = {0};
        char trace[64];
        snprintf(trace, sizeof trace, "/tmp/brg_half_act_%d.json", (int)getpid());
        run_setup s = {.precision = modes[i], .stochastic = 0, .steps = 2, .accumulation = 1, .result = &r};
        CHECK_OK(train(&s, &ignored, NULL));
        act[i] = (double)r.stage_micro_batch_bytes[0];
        s.stages = 2;
        CHECK_OK(brg_trace_start(trace, "test_train_precision"));
        CHECK_OK(train(&s, &ignored, NULL));
        CHECK_OK(brg_trace_finish());
        sent[i] = forward_send_bytes(trace);
        unlink(trace);
        printf("%s: %.0f bytes per micro-batch (%.3fx fp32's), stage 0 sent %.0f bytes forward\n",
               brg_precision_name(modes[i]), act[i], act[i] / act[0], sent[i]);
    }
    CHECK_MSG(sent[0] > 0, "the two-stage run sent nothing forward");
    CHECK_MSG(sent[1] == sent[0], "bf16.32 sent %.0f bytes forward, fp32 %.0f", sent[1], sent[0]);
    CHECK_MSG(act[1] == act[0], "bf16.32 holds %.0f bytes per micro-batch, fp32 %.0f", act[1], act[0]);
    for (int i = 2; i < 4; i++) {
        CHECK_MSG(act[i] <= 0.55 * act[0], "%s holds %.0f bytes of activations, fp32 %.0f (%.3fx)",
                  brg_precision_name(modes[i]), act[i], act[0], act[i] / act[0]);
        CHECK_MSG(sent[i] == sent[0] / 2, "%s sent %.0f bytes forward, fp32 %.0f", brg_precision_name(modes[i]),
                  sent[i], sent[0]);
    }
}

/* Wide half operands (an LM head's logits) are staged a block of rows at a time: with the bound at
 * one row, every linear layer and the loss take that path here; the losses stay those of one pass
 * up to the order of fp32 sums (the weights' gradients summed block by block). */
static void test_blocked_staging(brg_precision precision) {
    record whole = {0}, blocked = {0};
    run_setup s = {.precision = precision, .stochastic = 0, .sgd = true};
    CHECK_OK(train(&s, &whole, NULL));
    const int64_t bound = ops_set_stage_block_floats(1);
    CHECK_OK(train(&s, &blocked, NULL));
    s.stages = 2;
    record piped = {0};
    CHECK_OK(train(&s, &piped, NULL));
    ops_set_stage_block_floats(bound);
    /* SGD: AdamW's normalised steps would turn the blocks' other fp32 rounding of a gradient near
     * zero into a step of full size the other way, and the small model's runs would drift apart
     * (4% by step 11); the two placements stage the same blocks and stay together. */
    for (int i = 0; i < STEPS; i++) {
        const bool close = fabs(blocked.loss[i] - whole.loss[i]) <= 1e-3 * whole.loss[i];
        CHECK_MSG(isfinite(blocked.loss[i]) && close,
                  "%s step %d: %.9g staged by rows, %.9g at once", brg_precision_name(precision), i + 1,
                  blocked.loss[i], whole.loss[i]);
        CHECK_MSG(fabs(piped.loss[i] - blocked.loss[i]) <= 1e-5 * fabs(blocked.loss[i]),
                  "%s step %d: %.9g over two stages, %.9g on one device", brg_precision_name(precision), i + 1,
                  piped.loss[i], blocked.loss[i]);
    }
}

/* Recomputation rebuilds each layer from its half input during backward: the same losses, bit for
 * bit, on one device and over two stages. */
static void test_half_recompute(brg_precision precision) {
    record kept = {0}, rebuilt = {0}, piped = {0};
    run_setup s = {.precision = precision, .stochastic = 0};
    CHECK_OK(train(&s, &kept, NULL));
    s.recompute = true;
    CHECK_OK(train(&s, &rebuilt, NULL));
    s.stages = 2;
    CHECK_OK(train(&s, &piped, NULL));
    for (int i = 0; i < STEPS; i++)
        CHECK_MSG(rebuilt.loss[i] == kept.loss[i] && piped.loss[i] == kept.loss[i],
                  "%s step %d: %.9g recomputed, %.9g recomputed over two stages, %.9g kept",
                  brg_precision_name(precision), i + 1, rebuilt.loss[i], piped.loss[i], kept.loss[i]);
}

int main(void) {
    test_half_activations();
    test_half_recompute(BRG_PRECISION_16_16);
    test_half_recompute(BRG_PRECISION_BF16_16);
    test_blocked_staging(BRG_PRECISION_16_16);
    test_blocked_staging(BRG_PRECISION_BF16_16);
    test_auto_backs_off(BRG_PRECISION_16_16);
    test_auto_backs_off(BRG_PRECISION_16_32);
    test_static_overflow_stops();
    test_save_as_refuses();
    test_half_checkpoint(BRG_PRECISION_16_16, "F16", "float16");
    test_half_checkpoint(BRG_PRECISION_BF16_16, "BF16", "bfloat16");
    test_resume_keeps_scale();
    test_stochastic_reproduces();
    return test_finish();
}
