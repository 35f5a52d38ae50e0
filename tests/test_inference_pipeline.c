/* The inference pipeline as a library call (brg_inference_*, brg_infer): a batch run as an
 * IPUConfig's inference_* attributes lay it out (one device, two stages, two replicas, both with
 * device iterations) gives the outputs of one forward over the whole batch, named outputs and
 * loss included; the IPUConfig -> runtime and trainer options mapping; bad batches and layouts
 * are clear errors. */
#include "brigade/pipeline.h"
#include "brigade/rng.h"
#include "kernels/kernels.h"
#include "test_util.h"

enum { ROWS = 12, T = 6, VOCAB = 41 };

static brg_model *tiny_gpt2(brg_gpt2_task task) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 3, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = VOCAB, c.task = task;
    c.initializer_range = 0.2f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 3);
    return m;
}

static brg_model *tiny_bert_base(void) {
    brg_bert_config c;
    brg_bert_config_default(&c, BRG_BERT_BASE);
    c.vocab_size = VOCAB, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 24, c.max_position_embeddings = 16, c.initializer_range = 0.2f;
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (m) brg_bert_init_weights(m, 4);
    return m;
}

typedef struct inputs {
    int32_t ids[ROWS * T], labels[ROWS * T];
    float mask[ROWS * T];
    brg_tensor t_ids, t_mask, t_labels;
} inputs;

/* `rows` rows of random ids, right padding of 0-2 positions, labels where attended. */
static brg_bundle make_inputs(inputs *in, int64_t rows, bool labels) {
    brg_rng rng;
    brg_rng_seed(&rng, 11);
    for (int i = 0; i < rows * T; i++) {
        in->ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
        in->mask[i] = i % T < T - (i / T) % 3 ? 1.0f : 0.0f;
        in->labels[i] = in->mask[i] == 0.0f ? -100 : in->ids[i];
    }
    const int64_t shape[2] = {rows, T};
    in->t_ids = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, in->ids);
    in->t_mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, in->mask);
    in->t_labels = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, in->labels);
    return (brg_bundle){.inputs = TEST_MAP("input_ids", &in->t_ids, "attention_mask", &in->t_mask, "labels",
                                           labels ? &in->t_labels : NULL)};
}

/* The reference: one forward over the whole batch on the host. */
static brg_status forward_whole(brg_model *m, brg_arena *a, brg_bundle *b, brg_named_tensor *named, int *n) {
    brg_tape *tape;
    BRG_TRY(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward(m, tape, b);
    brg_tape_destroy(tape);
    BRG_TRY(st);
    return brg_model_outputs(m, &b->inputs, b->logits, a, named, BRG_INFERENCE_MAX_OUTPUTS, n);
}

/* Every row is computed on its own, and brigade's GEMM kernels accumulate each element over K in
 * the same order whatever the rows (gemm_blocked.h), so a micro-batch's rows come out with the
 * bits of the whole batch's; OpenBLAS picks kernels by shape, so there only 1e-6. */
static double tolerance(void) { return strcmp(brg_gemm_backend(), "openblas") == 0 ? 1e-6 : 0.0; }

static void compare_tensor(const char *what, const char *name, const brg_tensor *want, const brg_tensor *got) {
    char a[64], b[64];
    if (!got || !brg_tensor_same_shape(want, got)) {
        CHECK_MSG(false, "%s: %s is %s, wanted %s", what, name, got ? brg_shape_str(got, a, sizeof a) : "missing",
                  brg_shape_str(want, b, sizeof b));
        return;
    }
    double d = test_max_abs_diff(want->data, got->data, (long)brg_tensor_numel(want));
    CHECK_MSG(d <= tolerance(), "%s: %s differs from one forward by %.3g", what, name, d);
}

typedef struct layout {
    const char *what, *json;
} layout;

static const layout layouts[] = {
    {"one device", "{}"},
    {"two stages", "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1]}"},
    {"two replicas", "{\"inference_replication_factor\": 2}"},
    {"two stages x two replicas x three iterations",
     "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1], \"inference_replication_factor\": 2, "
     "\"inference_device_iterations\": 3}"},
};

static void load_layout(const layout *l, brg_ipu_config *cfg) {
    CHECK_OK(brg_ipu_config_from_json(l->json, l->what, cfg));
    brg_ipu_config_eval(cfg);
}

/* Each layout gives the whole-batch forward's named outputs and loss. */
static void check_model(const char *name, brg_model *m, bool labels) {
    if (!m) return;
    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("host", 0, &arena));
    inputs in;
    brg_bundle whole = make_inputs(&in, ROWS, labels);
    brg_named_tensor want[BRG_INFERENCE_MAX_OUTPUTS];
    int n_want = 0;
    CHECK_OK(forward_whole(m, arena, &whole, want, &n_want));
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        char what[160];
        snprintf(what, sizeof what, "%s, %s", name, layouts[l].what);
        brg_ipu_config cfg;
        load_layout(&layouts[l], &cfg);
        brg_bundle batch = make_inputs(&in, ROWS, labels);
        brg_inference_outputs out;
        CHECK_OK(brg_infer(m, &cfg, &batch.inputs, arena, &out));
        CHECK_MSG(out.n_named == n_want, "%s: %d outputs, wanted %d", what, out.n_named, n_want);
        for (int i = 0; i < n_want && i < out.n_named; i++) {
            CHECK_MSG(strcmp(out.named[i].name, want[i].name) == 0, "%s: output %d is %s, wanted %s", what, i,
                      out.named[i].name, want[i].name);
            compare_tensor(what, want[i].name, want[i].tensor, out.named[i].tensor);
        }
        CHECK_MSG(!labels == !out.loss, "%s: a loss %s", what, out.loss ? "without labels" : "missing");
        /* the loss is a sum of micro-batch shares: rounding differs from the one mean */
        if (labels && out.loss && whole.loss)
            CHECK_NEAR(((float *)out.loss->data)[0], ((float *)whole.loss->data)[0], 1e-6);
    }
    brg_arena_destroy(arena);
}

/* One pipeline runs batches of any size that splits (and any sequence length) one after another. */
static void check_reuse(void) {
    brg_model *m = tiny_gpt2(BRG_GPT2_LM_HEAD);
    if (!m) return;
    brg_ipu_config cfg;
    load_layout(&layouts[3], &cfg);
    brg_inference *inf = NULL;
    CHECK_OK(brg_inference_create(m, &cfg, NULL, &inf));
    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("host", 0, &arena));
    if (inf && arena) {
        CHECK(brg_inference_batch_multiple(inf) == 6);
        CHECK(brg_inference_placement(inf)->n_devices == 2);
        for (int64_t rows = 6; rows <= ROWS; rows += 6) {
            inputs in;
            brg_bundle batch = make_inputs(&in, rows, false), whole = batch;
            brg_named_tensor want[BRG_INFERENCE_MAX_OUTPUTS];
            int n_want = 0;
            CHECK_OK(forward_whole(m, arena, &whole, want, &n_want));
            brg_inference_outputs out;
            CHECK_OK(brg_inference_run(inf, &batch.inputs, arena, &out));
            CHECK(out.logits && out.logits->ndim == 3 && out.logits->shape[0] == rows && out.logits->shape[2] == VOCAB);
            if (out.logits) compare_tensor("reused pipeline", "logits", want[0].tensor, out.logits);
        }
        inputs in;
        brg_bundle odd = make_inputs(&in, 4, false);
        brg_inference_outputs out;
        CHECK_ERR(brg_inference_run(inf, &odd.inputs, arena, &out), BRG_ERR_INVALID_ARG,
                  "the batch dimension (4) must be a multiple of inference_device_iterations (3) x "
                  "inference_replication_factor (2) = 6");
        /* an input whose rows are not the batch's */
        brg_bundle bad = make_inputs(&in, 6, false);
        brg_tensor short_mask = in.t_mask;
        short_mask.shape[0] = 3;
        TEST_PUT(&bad.inputs, "attention_mask", &short_mask);
        CHECK_ERR(brg_inference_run(inf, &bad.inputs, arena, &out), BRG_ERR_INVALID_ARG, "attention_mask has 3 rows, the batch 6");
    }
    brg_inference_destroy(inf);
    brg_arena_destroy(arena);
    brg_model_destroy(m);
}

static void check_bad_layouts(void) {
    brg_model *m = tiny_gpt2(BRG_GPT2_LM_HEAD);
    if (!m) return;
    brg_ipu_config cfg;
    brg_inference *inf = NULL;
    layout four = {"four stages", "{\"inference_ipus_per_replica\": 4, \"inference_layers_per_ipu\": [-1]}"};
    load_layout(&four, &cfg);
    CHECK_ERR(brg_inference_create(m, &cfg, NULL, &inf), BRG_ERR_INVALID_ARG, "leaves IPU 1 with no block to run");
    CHECK(inf == NULL);
    layout wrong = {"wrong count", "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [1, 1]}"};
    load_layout(&wrong, &cfg);
    CHECK_ERR(brg_inference_create(m, &cfg, NULL, &inf), BRG_ERR_INVALID_ARG, "inference_layers_per_ipu");
    int64_t micro = 0;
    load_layout(&layouts[3], &cfg);
    CHECK_OK(brg_inference_micro_batch(&cfg, 12, &micro));
    CHECK(micro == 2);
    CHECK_ERR(brg_inference_micro_batch(&cfg, 8, &micro), BRG_ERR_INVALID_ARG, "= 6");
    brg_model_destroy(m);
}

/* The options both modes give a placed model. */
static void check_options(void) {
    brg_model *m = tiny_gpt2(BRG_GPT2_LM_HEAD);
    if (!m) return;
    brg_ipu_config cfg;
    CHECK_OK(brg_ipu_config_from_json(
        "{\"ipus_per_replica\": 2, \"layers_per_ipu\": [2, 1], \"replication_factor\": 3, "
        "\"gradient_accumulation_steps\": 4, \"device_iterations\": 5, \"recompute_checkpoint_every_layer\": true, "
        "\"seed\": 7, \"output_mode\": \"sum\", \"inference_ipus_per_replica\": 1, \"inference_layers_per_ipu\": [-1], "
        "\"inference_replication_factor\": 2, "
        "\"inference_device_iterations\": 6}",
        "options", &cfg));
    brg_placement train = {0}, infer = {0};
    CHECK_OK(brg_model_parallelize(m, &cfg, BRG_IPU_MODE_TRAINING, &train));
    CHECK_OK(brg_model_parallelize(m, &cfg, BRG_IPU_MODE_INFERENCE, &infer));
    brg_runtime_options o;
    CHECK_OK(brg_runtime_options_from_ipu_config(&cfg, BRG_IPU_MODE_TRAINING, &train, &o));
    CHECK(o.replicas == 3 && o.stages == 2 && o.micro_batches == 4 && o.training && o.recompute);
    CHECK(o.block_stage == train.block_device && o.schedule == BRG_SCHEDULE_1F1B);
    CHECK_OK(brg_runtime_options_from_ipu_config(&cfg, BRG_IPU_MODE_INFERENCE, &infer, &o));
    CHECK(o.replicas == 2 && o.stages == 1 && o.micro_batches == 6 && !o.training && !o.recompute);
    CHECK_ERR(brg_runtime_options_from_ipu_config(&cfg, BRG_IPU_MODE_INFERENCE, &train, &o), BRG_ERR_INVALID_ARG,
              "placed for training, not for inference");
    brg_train_options t;
    brg_train_options_default(&t);
    t.micro_batch = 9;
    CHECK_OK(brg_train_options_from_ipu_config(&cfg, &train, &t));
    CHECK(t.replicas == 3 && t.stages == 2 && t.accumulation == 4 && t.device_iterations == 5);
    CHECK(t.output_mode == BRG_OUTPUT_MODE_SUM && t.recompute && t.seed == 7 && t.ipu_config == &cfg);
    CHECK(t.block_stage == train.block_device && t.micro_batch == 9); /* the rest is left alone */
    CHECK_ERR(brg_train_options_from_ipu_config(&cfg, &infer, &t), BRG_ERR_INVALID_ARG, "placed for inference");
    brg_placement_free(&train);
    brg_placement_free(&infer);
    brg_model_destroy(m);
}

int main(void) {
    brg_model *lm = tiny_gpt2(BRG_GPT2_LM_HEAD), *base = tiny_bert_base();
    check_model("GPT2LMHeadModel with labels", lm, true);
    check_model("GPT2LMHeadModel", lm, false);
    check_model("BertModel", base, false);
    brg_model_destroy(lm);
    brg_model_destroy(base);
    check_reuse();
    check_bad_layouts();
    check_options();
    return test_finish();
}
