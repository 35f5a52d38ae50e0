/* The memory plan against what devices measure: for GPT-2, BERT, ViT and T5 at two micro-batch
 * shapes, one training step on one device and as a two-stage pipeline (1F1B with four
 * micro-batches, so the first stage holds two at once; GPipe, recomputation and two threads per
 * device once each; the other heads once each; bf16.32, bf16.16 and 16.16, whose products round
 * their operands into scratch, and whose pipelines with bf16 products pack their linear weights
 * once a step into bf16 panels where the CPU has AMX), and an inference pipeline (fp32, and bf16
 * once each), the plan's per-device peak (brg_train_plan_memory, which the budget check before
 * step 1 uses, and brg_plan_devices_with as brigade plan calls it) is within 10% of the device
 * arena's measured peak (parameters, gradients, optimizer state, activations and the kernels'
 * scratch), and never below it. A budget 10% above the plan trains; one with room for all but the
 * packed weights trains without them; one below that run's measured peak is refused before step
 * 1, naming the device and the bytes. Prints the table docs/reliability.md quotes. */
#include "autograd/ops_internal.h"
#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "brigade/schedule.h"
#include "brigade/t5.h"
#include "brigade/trainer.h"
#include "test_util.h"

enum { ROWS = 16, MAX_BLOCKS = 32 };

/* The models' vocabulary: small, or wide enough that the LM head's logits are most of a step's
 * activations (as GPT-2's 50257 are), where the loss writing their gradient over them shows. */
static int64_t vocab = 96;

typedef enum arch { GPT2, BERT, VIT, T5, N_ARCHS } arch;
static const char *const arch_names[N_ARCHS] = {"GPT-2", "BERT", "ViT", "T5"};

/* The head of each architecture a case trains: 0 is the LM head (GPT-2, T5: gated-GELU, untied),
 * masked LM (BERT), the classifier (ViT); else a brg_gpt2_task / brg_bert_task, or for T5 1 the
 * ReLU feed-forward with the tied head. */
static int task;

/* Tiny, but with every op at work: dropout on, several heads, an MLP wider than the model. */
static brg_model *make_model(arch a, int64_t image) {
    brg_model *m = NULL;
    switch (a) {
    case GPT2: {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_positions = 64, c.vocab_size = vocab;
        if (task) c.task = (brg_gpt2_task)task, c.num_labels = 5, c.pad_token_id = 0;
        CHECK_OK(brg_gpt2_create(&c, &m));
        break;
    }
    case BERT: {
        brg_bert_config c;
        brg_bert_config_default(&c, task ? (brg_bert_task)task : BRG_BERT_MASKED_LM);
        c.vocab_size = vocab, c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4;
        c.intermediate_size = 192, c.max_position_embeddings = 64;
        c.num_labels = task == BRG_BERT_SEQUENCE_CLASSIFICATION || task == BRG_BERT_TOKEN_CLASSIFICATION ? 5 : 2;
        CHECK_OK(brg_bert_create(&c, &m));
        break;
    }
    case VIT: {
        brg_vit_config c;
        brg_vit_config_default(&c);
        c.image_h = c.image_w = image, c.patch_h = c.patch_w = 4, c.num_channels = 3;
        c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.intermediate_size = 192;
        c.num_labels = 5;
        CHECK_OK(brg_vit_create(&c, &m));
        break;
    }
    case T5: {
        brg_t5_config c;
        brg_t5_config_default(&c);
        c.vocab_size = vocab, c.d_model = 64, c.d_kv = 16, c.num_heads = 4, c.d_ff = 160;
        c.num_layers = 2, c.num_decoder_layers = 2, c.dropout_rate = 0.1f;
        c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 16;
        c.decoder_start_token_id = 0, c.pad_token_id = 0;
        snprintf(c.feed_forward_proj, sizeof c.feed_forward_proj, task ? "relu" : "gated-gelu");
        c.is_gated_act = !task, c.act = task ? BRG_T5_ACT_RELU : BRG_T5_ACT_GELU_TANH;
        c.tie_word_embeddings = c.scale_decoder_outputs = task != 0;
        CHECK_OK(brg_t5_create(&c, &m));
        break;
    }
    case N_ARCHS: break;
    }
    if (m) brg_model_init_weights(m, 5);
    return m;
}

static brg_tensor *column(brg_dataset *d, const char *name, brg_dtype dt, int nd, const int64_t *shape) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(d->arena, dt, nd, shape, "column", &t));
    TEST_PUT(&d->columns, name, t);
    return t;
}

/* ROWS rows of the inputs and labels `a` trains on: T tokens (or image x image pixels). */
static brg_dataset *make_data(arch a, int64_t T, int64_t image) {
    brg_dataset *d = calloc(1, sizeof *d);
    CHECK_OK(brg_arena_create("dataset", 0, &d->arena));
    d->rows = ROWS;
    d->seq_len = a == VIT ? 0 : T;
    brg_rng rng;
    brg_rng_seed(&rng, 1);
    int64_t rt[2] = {ROWS, T}, r1[1] = {ROWS}, px[4] = {ROWS, 3, image, image};
    if (a == VIT) {
        float *p = column(d, "pixel_values", BRG_DTYPE_F32, 4, px)->data;
        int32_t *l = column(d, "labels", BRG_DTYPE_I32, 1, r1)->data;
        for (int64_t i = 0; i < ROWS * 3 * image * image; i++) p[i] = (float)brg_rng_normal(&rng);
        for (int i = 0; i < ROWS; i++) l[i] = i % 5;
        return d;
    }
    int32_t *ids = column(d, "input_ids", BRG_DTYPE_I32, 2, rt)->data;
    float *mask = column(d, "attention_mask", BRG_DTYPE_F32, 2, rt)->data;
    /* per row: sequence classification, question answering's start; else per token */
    const bool per_row = (a == GPT2 && task == BRG_GPT2_SEQUENCE_CLASSIFICATION) ||
                         (a == BERT && (task == BRG_BERT_SEQUENCE_CLASSIFICATION || task == BRG_BERT_QUESTION_ANSWERING));
    const bool classes = (a == GPT2 && task == BRG_GPT2_TOKEN_CLASSIFICATION) || (a == BERT && task == BRG_BERT_TOKEN_CLASSIFICATION);
    const bool spans = a == BERT && task == BRG_BERT_QUESTION_ANSWERING;
    int32_t *labels =
        column(d, spans ? "start_positions" : "labels", BRG_DTYPE_I32, per_row ? 1 : 2, per_row ? r1 : rt)->data;
    for (int64_t i = 0; i < ROWS * T; i++) {
        ids[i] = 1 + (int32_t)(brg_rng_next(&rng) % (vocab - 1));
        mask[i] = (i % T) < T - (i / T) % 3 ? 1.0f : 0.0f;
        if (!per_row) labels[i] = a == BERT && i % 3 ? -100 : classes ? ids[i] % 5 : ids[i];
    }
    for (int i = 0; per_row && i < ROWS; i++) labels[i] = (int32_t)(i % (task == BRG_BERT_QUESTION_ANSWERING && a == BERT ? T : 5));
    if (a == BERT && (task == BRG_BERT_QUESTION_ANSWERING || task == BRG_BERT_PRETRAINING)) {
        int32_t *extra = column(d, spans ? "end_positions" : "next_sentence_label", BRG_DTYPE_I32, 1, r1)->data;
        for (int i = 0; i < ROWS; i++) extra[i] = task == BRG_BERT_PRETRAINING ? i % 2 : (int32_t)((i * 3 + 1) % T);
    }
    if (a == BERT) {
        int32_t *types = column(d, "token_type_ids", BRG_DTYPE_I32, 2, rt)->data;
        for (int64_t i = 0; i < ROWS * T; i++) types[i] = (i % T) >= T / 2;
    }
    return d;
}

/* Embeddings on stage 0, the first half of the layers too, the rest and the head on stage 1. */
static void split(const brg_model *m, int stages, int *block_stage) {
    int layers = 0, seen = 0;
    for (int b = 0; b < m->n_blocks; b++) layers += m->blocks[b].kind == BRG_BLOCK_LAYER;
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        block_stage[b] = stages == 1 || blk->kind == BRG_BLOCK_EMBEDDINGS ? 0
                         : blk->kind == BRG_BLOCK_HEAD                   ? 1
                                                                         : seen++ < layers / 2 ? 0 : 1;
    }
}

typedef struct shape {
    int64_t B, T, image;
} shape;

typedef struct setup {
    int stages, accumulation;
    brg_schedule_kind schedule;
    bool recompute;
    const char *name;
    int threads; /* per device; 0: one */
    brg_precision precision;
} setup;

static int steps_done;
static void count_steps(void *ctx, int64_t step, double loss, float lr) {
    (void)ctx, (void)loss, (void)lr;
    steps_done = (int)step;
}

static void options(const brg_model *m, const shape *s, const setup *u, int *block_stage, brg_train_options *o) {
    brg_train_options_default(o);
    split(m, u->stages, block_stage);
    o->steps = 1, o->micro_batch = s->B, o->stages = u->stages, o->accumulation = u->accumulation;
    o->schedule = u->schedule, o->recompute = u->recompute, o->block_stage = block_stage, o->shuffle = false;
    o->intra_threads = u->threads;
    o->precision = u->precision;
    o->on_step = count_steps;
}

static double worst = 0;

static void row(const char *arch_name, const shape *s, const char *setup_name, int stage, double plan, double got) {
    double ratio = plan / got;
    if (fabs(ratio - 1) > worst) worst = fabs(ratio - 1);
    char what[64];
    if (s->image) snprintf(what, sizeof what, "%lld x %lldx%lld px", (long long)s->B, (long long)s->image, (long long)s->image);
    else snprintf(what, sizeof what, "%lld x %lld", (long long)s->B, (long long)s->T);
    printf("| %s | %s | %s | %d | %.1f | %.1f | %+.1f%% |\n", arch_name, what, setup_name, stage, plan / 1024, got / 1024,
           100 * (ratio - 1));
    CHECK_MSG(plan >= got && plan <= 1.10 * got, "%s %s %s stage %d: the plan says %.0f bytes, the device peaked at %.0f",
              arch_name, what, setup_name, stage, plan, got);
}

/* One training step: measured peaks against brg_train_plan_memory's. */
static void training(arch a, const shape *s, const setup *u) {
    brg_model *m = make_model(a, s->image);
    brg_dataset *d = make_data(a, s->T, s->image);
    if (!m || !d) return;
    int block_stage[MAX_BLOCKS];
    brg_train_options o;
    options(m, s, u, block_stage, &o);
    brg_device_plan plan[2];
    CHECK_OK(brg_train_plan_memory(m, d, &o, plan));
    brg_train_result r = {0};
    CHECK_OK(brg_train(m, d, &o, &r));
    for (int st = 0; st < u->stages; st++)
        row(arch_names[a], s, u->name, st, (double)plan[st].total_bytes, (double)r.stage_peak_bytes[st]);
    brg_dataset_free(d);
    brg_model_destroy(m);
}

/* The .16 modes hold activations and their gradients in half: the most one micro-batch holds on
 * a device is at most 0.55x fp32's, on both stages of a pipeline, for every architecture. */
static void half_micro_batch(arch a, const shape *s) {
    const setup fp32 = {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages", 0, BRG_PRECISION_32_32};
    const setup fp16 = {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages", 0, BRG_PRECISION_16_16};
    size_t bytes[2][2] = {{0}};
    for (int k = 0; k < 2; k++) {
        brg_model *m = make_model(a, s->image);
        brg_dataset *d = make_data(a, s->T, s->image);
        if (!m || !d) return;
        int block_stage[MAX_BLOCKS];
        brg_train_options o;
        options(m, s, k ? &fp16 : &fp32, block_stage, &o);
        brg_train_result r = {0};
        CHECK_OK(brg_train(m, d, &o, &r));
        for (int st = 0; st < 2; st++) bytes[k][st] = r.stage_micro_batch_bytes[st];
        brg_dataset_free(d);
        brg_model_destroy(m);
    }
    for (int st = 0; st < 2; st++) {
        const double ratio = (double)bytes[1][st] / (double)bytes[0][st];
        printf("%s stage %d: %zu bytes per micro-batch in 16.16, %zu in fp32 (%.3fx)\n", arch_names[a], st,
               bytes[1][st], bytes[0][st], ratio);
        CHECK_MSG(bytes[0][st] > 0 && ratio <= 0.55, "%s stage %d: 16.16 holds %.3fx fp32's per micro-batch",
                  arch_names[a], st, ratio);
    }
}

/* An inference pipeline of two stages over 2 micro-batches (every one kept until the call ends). */
static void inference(arch a, const shape *s, brg_dtype compute) {
    enum { M = 2 };
    brg_model *m = make_model(a, s->image);
    brg_dataset *d = make_data(a, s->T, s->image);
    if (!m || !d) return;
    int block_stage[MAX_BLOCKS];
    split(m, 2, block_stage);
    /* With a budget, as the plan is for: a budgeted device keeps the plain products and packs no
     * weights (runtime/packed_weights.h), so the plan does not count packed panels. */
    brg_runtime_options ro = {.replicas = 1, .stages = 2, .block_stage = block_stage, .micro_batches = M,
                              .schedule = BRG_SCHEDULE_GPIPE, .training = false, .device_memory = (size_t)1 << 40,
                              .compute_dtype = compute};
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &ro, &rt));
    brg_tensor views[M][BRG_TENSOR_MAP_MAX];
    brg_micro_batch mbs[M] = {{0}};
    /* every column: inference runs the default heads, whose data has no other inputs */
    for (int i = 0; i < M && rt; i++) brg_dataset_rows(d, i * s->B, s->B, views[i], &mbs[i]);
    float losses[M];
    if (rt) CHECK_OK(brg_runtime_infer(rt, mbs, NULL, NULL, losses));
    brg_block_cost costs[MAX_BLOCKS];
    brg_device_plan plan[2];
    int flight[2] = {M, M};
    brg_plan_options po = {.mode = BRG_IPU_MODE_INFERENCE, .in_flight = flight, .optimizer_state = 0,
                           .half_products = compute != BRG_DTYPE_F32};
    CHECK_OK(brg_model_block_costs(m, s->B, d->seq_len > 0 ? d->seq_len : 1, costs));
    CHECK_OK(brg_plan_devices_with(costs, m->n_blocks, block_stage, 2, &po, plan));
    for (int st = 0; rt && st < 2; st++) {
        brg_device_stats ds;
        brg_runtime_device_stats(rt, st, &ds);
        const char *what = compute == BRG_DTYPE_F32 ? "inference, 2 stages x 2 mb" : "inference bf16, 2 stages x 2 mb";
        row(arch_names[a], s, what, st, (double)plan[st].total_bytes, (double)ds.peak_bytes);
    }
    brg_runtime_destroy(rt);
    brg_dataset_free(d);
    brg_model_destroy(m);
}

static int64_t most_of(const brg_device_plan *plan) {
    return plan[0].total_bytes > plan[1].total_bytes ? plan[0].total_bytes : plan[1].total_bytes;
}

/* One step under `budget` (0: none), which must train; its stage peaks in peak[2]. */
static void train_under(brg_model *m, const brg_dataset *d, brg_train_options *o, size_t budget, size_t *peak) {
    o->device_memory = budget;
    brg_train_result r = {0};
    steps_done = 0;
    CHECK_OK(brg_train(m, d, o, &r));
    CHECK(steps_done == 1 && r.steps == 1);
    for (int s = 0; s < 2; s++) {
        peak[s] = r.stage_peak_bytes[s];
        CHECK_MSG(!budget || peak[s] <= budget, "stage %d peaked at %zu bytes over its budget of %zu", s, peak[s],
                  budget);
    }
}

/* --device-memory: 10% above the plan trains; below what the device needs is refused up front.
 * With 4 micro-batches a step of bf16 products the devices pack their linear weights once a step
 * (where the bf16 kernel has panels: AMX): the plan counts the panels, a budget with room for the
 * plain weights only trains without them, and only one below that is refused. */
static void budgets(void) {
    const shape s = {4, 32, 0};
    const setup u = {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages", 0, BRG_PRECISION_BF16_32};
    brg_model *m = make_model(GPT2, 0);
    brg_dataset *d = make_data(GPT2, s.T, 0);
    if (!m || !d) return;
    int block_stage[MAX_BLOCKS];
    brg_train_options o;
    options(m, &s, &u, block_stage, &o);
    brg_device_plan packed[2], plain[2];
    CHECK_OK(brg_train_plan_memory(m, d, &o, packed));
    o.device_memory = 1; /* no room for anything: the plan falls back to the plain weights */
    CHECK_OK(brg_train_plan_memory(m, d, &o, plain));
    const bool packs = brg_gemm_pack_layout_for(BRG_DTYPE_BF16) != BRG_GEMM_PACK_NONE;
    for (int st = 0; st < 2; st++) {
        printf("budgets: stage %d plans %lld bytes, %lld of them packed weights; %lld without them\n", st,
               (long long)packed[st].total_bytes, (long long)packed[st].packed_bytes, (long long)plain[st].total_bytes);
        CHECK_MSG(packs ? packed[st].packed_bytes > 0 : packed[st].packed_bytes == 0, "stage %d: %lld packed bytes", st,
                  (long long)packed[st].packed_bytes);
        CHECK(plain[st].packed_bytes == 0);
        CHECK(packed[st].total_bytes == plain[st].total_bytes + packed[st].packed_bytes);
    }

    size_t peak[2], plain_peak[2];
    train_under(m, d, &o, (size_t)(1.1 * (double)most_of(packed)), peak);
    /* Room for the plain weights only: no packs, and the devices' peaks drop by the panels. */
    const size_t tight = (size_t)(1.02 * (double)most_of(plain));
    CHECK(!packs || tight < (size_t)most_of(packed)); /* the run packs on every device or on none */
    train_under(m, d, &o, tight, plain_peak);
    for (int st = 0; st < 2; st++)
        CHECK_MSG(plain_peak[st] + (size_t)packed[st].packed_bytes == peak[st],
                  "stage %d peaked at %zu bytes without packed weights, %zu with %lld bytes of them", st,
                  plain_peak[st], peak[st], (long long)packed[st].packed_bytes);

    /* A byte short of what device 0 measured without packed weights: refused before step 1. */
    o.device_memory = plain_peak[0] - 1;
    steps_done = 0;
    brg_train_result r = {0};
    CHECK_ERR(brg_train(m, d, &o, &r), BRG_ERR_OOM, "device 0 (stage 0 of every replica) needs about");
    CHECK_MSG(strstr(brg_last_error(), "micro-batches in flight") && strstr(brg_last_error(), "but its budget is"),
              "%s", brg_last_error());
    CHECK(steps_done == 0 && r.steps == 0);
    brg_dataset_free(d);
    brg_model_destroy(m);
}

int main(void) {
    const shape text[2] = {{2, 16, 0}, {4, 32, 0}}, images[2] = {{2, 0, 16}, {4, 0, 32}};
    const setup setups[] = {
        {1, 1, BRG_SCHEDULE_1F1B, false, "1 device", 0, BRG_PRECISION_32_32},
        {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, 1F1B x 4 mb", 0, BRG_PRECISION_32_32},
    };
    printf("| model | micro-batch | run | stage | plan KiB | measured KiB | plan - measured |\n");
    printf("|---|---|---|---:|---:|---:|---:|\n");
    for (int a = 0; a < N_ARCHS; a++)
        for (int i = 0; i < 2; i++) {
            const shape *s = a == VIT ? &images[i] : &text[i];
            for (size_t k = 0; k < sizeof setups / sizeof setups[0]; k++) training((arch)a, s, &setups[k]);
            inference((arch)a, s, BRG_DTYPE_F32);
        }
    const setup gpipe = {2, 4, BRG_SCHEDULE_GPIPE, false, "2 stages, GPipe x 4 mb", 0, BRG_PRECISION_32_32};
    const setup recompute = {2, 4, BRG_SCHEDULE_1F1B, true, "2 stages, 1F1B x 4 mb, recompute", 0, BRG_PRECISION_32_32};
    const setup threads = {1, 1, BRG_SCHEDULE_1F1B, false, "1 device, 2 threads", 2, BRG_PRECISION_32_32};
    for (int a = 0; a < N_ARCHS; a++) {
        training((arch)a, a == VIT ? &images[1] : &text[1], &gpipe);
        training((arch)a, a == VIT ? &images[1] : &text[1], &recompute);
    }
    training(GPT2, &text[1], &threads);
    const setup half[] = {{1, 1, BRG_SCHEDULE_1F1B, false, "1 device, bf16.32", 0, BRG_PRECISION_BF16_32},
                          {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, 16.16", 0, BRG_PRECISION_16_16},
                          {2, 4, BRG_SCHEDULE_1F1B, true, "2 stages, 16.16, recompute", 0, BRG_PRECISION_16_16},
                          {1, 1, BRG_SCHEDULE_1F1B, false, "1 device, 2 threads, bf16.32", 2, BRG_PRECISION_BF16_32},
                          {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, bf16.32", 0, BRG_PRECISION_BF16_32},
                          {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, bf16.16", 0, BRG_PRECISION_BF16_16}};
    for (int a = 0; a < N_ARCHS; a++) {
        const shape *s = a == VIT ? &images[1] : &text[1];
        for (size_t k = 0; k < sizeof half / sizeof half[0]; k++) training((arch)a, s, &half[k]);
        inference((arch)a, s, BRG_DTYPE_BF16);
    }
    for (int a = 0; a < N_ARCHS; a++) half_micro_batch((arch)a, a == VIT ? &images[1] : &text[1]);
    /* half operands staged a few rows at a time (as an LM head's logits are): the plan follows */
    const int64_t bound = ops_set_stage_block_floats(200);
    const setup blocked = {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, 16.16, 200 floats staged", 0,
                           BRG_PRECISION_16_16};
    for (int a = 0; a < N_ARCHS; a++) training((arch)a, a == VIT ? &images[1] : &text[1], &blocked);
    ops_set_stage_block_floats(bound);
    /* the other heads, once each */
    const struct {
        arch a;
        int task;
        const char *name;
    } heads[] = {
        {GPT2, BRG_GPT2_SEQUENCE_CLASSIFICATION, "sequence classification"},
        {GPT2, BRG_GPT2_TOKEN_CLASSIFICATION, "token classification"},
        {BERT, BRG_BERT_SEQUENCE_CLASSIFICATION, "sequence classification"},
        {BERT, BRG_BERT_QUESTION_ANSWERING, "question answering"},
        {BERT, BRG_BERT_TOKEN_CLASSIFICATION, "token classification"},
        {BERT, BRG_BERT_PRETRAINING, "pretraining"},
        {T5, 1, "ReLU, tied head"},
    };
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
        task = heads[h].task;
        char n1[96], n2[96];
        snprintf(n1, sizeof n1, "%s, 1 device", heads[h].name);
        snprintf(n2, sizeof n2, "%s, 2 stages, 1F1B x 4 mb", heads[h].name);
        const setup one = {1, 1, BRG_SCHEDULE_1F1B, false, n1, 0, BRG_PRECISION_32_32};
        const setup two = {2, 4, BRG_SCHEDULE_1F1B, false, n2, 0, BRG_PRECISION_32_32};
        training(heads[h].a, &text[1], &one);
        training(heads[h].a, &text[1], &two);
    }
    task = 0;
    /* logits wider than the rest of the head: their gradient, spent over them, sets no peak */
    vocab = 8192;
    const setup wide[] = {{1, 1, BRG_SCHEDULE_1F1B, false, "1 device, 8192-token vocabulary", 0, BRG_PRECISION_32_32},
                          {2, 4, BRG_SCHEDULE_1F1B, false, "2 stages, 1F1B x 4 mb, 8192-token vocabulary", 0,
                           BRG_PRECISION_32_32}};
    for (int a = 0; a < N_ARCHS; a++)
        for (size_t k = 0; a != VIT && k < sizeof wide / sizeof wide[0]; k++) training((arch)a, &text[1], &wide[k]);
    task = BRG_BERT_PRETRAINING;
    const setup wide_pretraining = {1, 1, BRG_SCHEDULE_1F1B, false, "pretraining, 1 device, 8192-token vocabulary", 0,
                                    BRG_PRECISION_32_32};
    training(BERT, &text[1], &wide_pretraining);
    task = 0;
    vocab = 96;
    printf("largest difference: %.2f%%\n", 100 * worst);
    budgets();
    return test_finish();
}
