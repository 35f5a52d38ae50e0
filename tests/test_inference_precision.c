/* Forward passes in a half compute type (brg_inference_options.compute_dtype; brigade forward and
 * embed --precision X.32) on tools/precision_fixtures.py's tiny GPT-2, BERT, ViT and T5 and their
 * data. The first global batch (8 rows) is the batch PyTorch's first training step scored, on the
 * same initial weights, so its loss must be within 1% of the fixture's step-0 loss under autocast
 * (bf16.32, 16.32) and within 1e-4 of float32's.
 *
 * Close is not enough (a run that ignored the type would be close too): the logits must differ
 * from float32's, and equal bit for bit a forward on the calling thread with brg_compute_dtype_set
 * (the meaning of the mode: every product on rounded operands with fp32 sums), whether the
 * pipeline is one device, two stages, or two stages x two replicas with two threads per device.
 * A type that is not a compute type is refused, by the inference pipeline and the task pipelines. */
#include "brigade/dataset.h"
#include "brigade/pipeline.h"
#include "brigade/precision.h"
#include "brigade/task_pipeline.h"
#include "kernels/kernels.h"
#include "test_util.h"

enum { ROWS = 8 };

static const struct {
    const char *what, *json;
    int threads;
} layouts[] = {
    {"one device", "{}", 0},
    {"two stages", "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1]}", 0},
    {"two stages x two replicas, 2 threads each",
     "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1], \"inference_replication_factor\": 2}", 2},
};

typedef struct scored {
    float *logits;
    int64_t n;
    double loss;
} scored;

/* The batch forward on this thread in `compute`: the reference. */
static bool forward_here(brg_model *m, const brg_tensor_map *batch, brg_dtype compute, scored *out) {
    brg_arena *arena = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("reference", 0, &arena));
    if (arena) CHECK_OK(brg_tape_create(arena, &tape));
    if (!tape) return brg_arena_destroy(arena), false;
    brg_tape_set_grad_enabled(tape, false);
    brg_bundle b = {.inputs = *batch};
    const brg_dtype before = brg_compute_dtype_set(compute);
    const brg_status st = brg_model_forward(m, tape, &b);
    brg_compute_dtype_set(before);
    CHECK_OK(st);
    bool ok = st == BRG_OK && b.logits && b.loss;
    if (ok) {
        out->n = brg_tensor_numel(b.logits);
        out->logits = malloc((size_t)out->n * sizeof(float));
        memcpy(out->logits, b.logits->data, (size_t)out->n * sizeof(float));
        out->loss = ((const float *)b.loss->data)[0];
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    return ok;
}

/* brigade's GEMM kernels give each element of a product the same bits whatever its rows; OpenBLAS
 * (CPUs without AVX2) picks kernels by shape, so a batch split over replicas is only close. */
static bool exact(void) { return strcmp(brg_gemm_backend(), "openblas") != 0; }

/* How far the pipeline may be from the reference where it is not exact: float32 sums in another
 * order, and in a half mode the half ulp those move a rounded operand by now and then. */
static double noise(brg_dtype compute) {
    switch (compute) {
    case BRG_DTYPE_BF16: return 0x1p-8;
    case BRG_DTYPE_F16: return 0x1p-11;
    default: return 1e-6;
    }
}

/* The pipeline's logits equal the reference's bits (within noise() on OpenBLAS); its loss (the
 * micro-batches' shares summed) its value within noise(). */
static void pipelined(brg_model *m, const brg_tensor_map *batch, brg_dtype compute, const scored *ref,
                      const char *name) {
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        brg_ipu_config cfg;
        CHECK_OK(brg_ipu_config_from_json(layouts[l].json, layouts[l].what, &cfg));
        brg_ipu_config_eval(&cfg);
        const brg_inference_options o = {.intra_threads = layouts[l].threads, .compute_dtype = compute};
        brg_inference *inf = NULL;
        brg_arena *arena = NULL;
        CHECK_OK(brg_inference_create(m, &cfg, &o, &inf));
        CHECK_OK(brg_arena_create("host", 0, &arena));
        brg_inference_outputs out = {0};
        if (inf && arena) CHECK_OK(brg_inference_run(inf, batch, arena, &out));
        const bool shaped = out.logits && brg_tensor_numel(out.logits) == ref->n;
        CHECK_MSG(shaped, "%s %s, %s: no logits of the reference's size", name, brg_dtype_name(compute),
                  layouts[l].what);
        if (shaped && exact())
            CHECK_MSG(memcmp(out.logits->data, ref->logits, (size_t)ref->n * sizeof(float)) == 0,
                      "%s %s, %s: the logits are not the calling thread's", name, brg_dtype_name(compute),
                      layouts[l].what);
        else if (shaped)
            CHECK_MSG(test_max_abs_diff(out.logits->data, ref->logits, (long)ref->n) <=
                          noise(compute) * test_max_abs(ref->logits, (long)ref->n),
                      "%s %s, %s: the logits are %g from the calling thread's", name, brg_dtype_name(compute),
                      layouts[l].what, test_max_abs_diff(out.logits->data, ref->logits, (long)ref->n));
        if (out.loss) CHECK_NEAR(((const float *)out.loss->data)[0], ref->loss, noise(compute) * fabs(ref->loss));
        brg_inference_destroy(inf);
        brg_arena_destroy(arena);
    }
}

static double torch_loss(const brg_safetensors *exp, const char *mode) {
    char key[64];
    snprintf(key, sizeof key, "loss.%s", mode);
    int64_t n = 0;
    float *v = test_read_f32(exp, key, &n);
    const double loss = v && n > 0 ? v[0] : NAN;
    free(v);
    return loss;
}

static void check_model(const char *name) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/precision_%s", name);
    brg_model *m = NULL;
    brg_dataset *d = NULL;
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    snprintf(path, sizeof path, "%s/data.safetensors", dir);
    if (m) CHECK_OK(brg_dataset_load(path, m, 0, &d));
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    CHECK_OK(brg_safetensors_open(path, &exp));
    if (!m || !d || !exp) goto done;
    brg_tensor views[BRG_TENSOR_MAP_MAX];
    brg_tensor_map batch = {0};
    brg_dataset_rows(d, 0, ROWS, views, &batch);

    scored fp32 = {0};
    if (!forward_here(m, &batch, BRG_DTYPE_F32, &fp32)) goto done;
    const double want32 = torch_loss(exp, "32.32");
    CHECK_MSG(fabs(fp32.loss - want32) <= 1e-4 * fabs(want32), "%s float32: loss %.7g, PyTorch %.7g", name, fp32.loss,
              want32);
    pipelined(m, &batch, BRG_DTYPE_F32, &fp32, name);
    const struct {
        brg_dtype type;
        const char *mode;
    } halves[] = {{BRG_DTYPE_BF16, "bf16.32"}, {BRG_DTYPE_F16, "16.32"}};
    for (int h = 0; h < 2; h++) {
        scored half = {0};
        if (!forward_here(m, &batch, halves[h].type, &half)) continue;
        const double want = torch_loss(exp, halves[h].mode);
        CHECK_MSG(fabs(half.loss - want) <= 0.01 * fabs(want), "%s %s: loss %.7g, PyTorch under autocast %.7g", name,
                  halves[h].mode, half.loss, want);
        CHECK_MSG(memcmp(half.logits, fp32.logits, (size_t)fp32.n * sizeof(float)) != 0,
                  "%s %s: the logits are float32's", name, halves[h].mode);
        printf("%-5s %-8s loss %.6f  PyTorch %.6f  (float32 %.6f)\n", name, halves[h].mode, half.loss, want, fp32.loss);
        pipelined(m, &batch, halves[h].type, &half, name);
        free(half.logits);
    }
    free(fp32.logits);

    brg_ipu_config cfg;
    CHECK_OK(brg_ipu_config_from_json("{}", "one device", &cfg));
    brg_ipu_config_eval(&cfg);
    const brg_inference_options bad = {.compute_dtype = BRG_DTYPE_I32};
    brg_inference *inf = NULL;
    CHECK_ERR(brg_inference_create(m, &cfg, &bad, &inf), BRG_ERR_INVALID_ARG,
              "products compute in F32, F16 or BF16, not I32");
    CHECK(inf == NULL);
done:
    brg_safetensors_close(exp);
    brg_dataset_free(d);
    brg_model_destroy(m);
}

/* Task pipelines take the type from their inference options: one that is not a compute type is
 * refused; a half type reaches the forward passes and, for a task that generates, its decode. */
static void task_options(void) {
    brg_task_options o;
    brg_task_options_default(&o);
    o.inference.compute_dtype = BRG_DTYPE_I32;
    brg_task_pipeline *p = NULL;
    CHECK_ERR(brg_task_pipeline_create("text-classification", "tests/fixtures/pipeline/text_classification", &o, &p),
              BRG_ERR_INVALID_ARG, "products compute in F32, F16 or BF16, not I32");
    o.inference.compute_dtype = BRG_DTYPE_BF16;
    CHECK_OK(brg_task_pipeline_create("text-generation", "tests/fixtures/generate_gpt2", &o, &p));
    brg_task_pipeline_destroy(p);
    p = NULL;
    CHECK_OK(brg_task_pipeline_create("text-classification", "tests/fixtures/pipeline/text_classification", &o, &p));
    brg_task_pipeline_destroy(p);
}

int main(void) {
    task_options();
    const char *models[] = {"gpt2", "bert", "vit", "t5"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i]);
    return test_finish();
}
