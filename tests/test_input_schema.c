/* The input schema: a batch is a table of named tensors, models declare what they take and what
 * a stage hands the next, and everything between the file and the blocks goes by those
 * declarations. A toy model with inputs no built-in model has (input_features, speaker: floats)
 * and a second carried tensor ("context", made by the first block and read by the head) is
 * loaded, checked, pipelined over two stages (with and without recomputation) and trained, with
 * nothing outside the model's own code knowing its names. */
#include "test_util.h"

#include <unistd.h>

#include "runtime_util.h"

enum { FEATURES = 6, CLASSES = 3, ROWS = 8, N_LAYERS = 2 };
enum { P_IN, P_SPEAKER, P_LAYER0, P_HEAD = P_LAYER0 + N_LAYERS };

static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }

static brg_status embeddings(brg_model *m, brg_tape *tape, brg_bundle *b) {
    brg_tensor *h, *context;
    BRG_TRY(brg_linear(tape, brg_bundle_input(b, "input_features"), P(m, P_IN), NULL, false, &h));
    BRG_TRY(brg_linear(tape, brg_bundle_input(b, "speaker"), P(m, P_SPEAKER), NULL, false, &context));
    BRG_TRY(brg_bundle_carry(b, "hidden", h));
    return brg_bundle_carry(b, "context", context);
}

static brg_status layer(brg_model *m, int l, brg_tape *tape, brg_bundle *b) {
    brg_tensor *t, *y, *x = brg_bundle_carried(b, "hidden");
    BRG_TRY(brg_linear(tape, x, P(m, P_LAYER0 + l), NULL, false, &t));
    BRG_TRY(brg_tanh(tape, t, &t));
    BRG_TRY(brg_add(tape, x, t, &y));
    return brg_bundle_carry(b, "hidden", y);
}

static brg_status head(brg_model *m, brg_tape *tape, brg_bundle *b) {
    brg_tensor *context = brg_bundle_carried(b, "context"), *x;
    if (!context) return brg_error(BRG_ERR_INVALID_ARG, "the head got no context");
    BRG_TRY(brg_add(tape, brg_bundle_carried(b, "hidden"), context, &x));
    BRG_TRY(brg_linear(tape, x, P(m, P_HEAD), NULL, false, &b->logits));
    b->loss = NULL;
    const brg_tensor *labels = brg_bundle_input(b, "labels");
    if (!labels) return BRG_OK;
    return brg_cross_entropy_share(tape, b->logits, (brg_tensor *)labels, -100, b->loss_denominator, &b->loss);
}

/* Blocks: embeddings, the layers, the head. */
static brg_status forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    if (block == 0) return embeddings(m, tape, b);
    return block == m->n_blocks - 1 ? head(m, tape, b) : layer(m, block - 1, tape, b);
}

static brg_loss_items count(const brg_model *m, const brg_tensor_map *batch) {
    (void)m;
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    int64_t n = 0;
    for (int64_t i = 0; i < brg_tensor_numel(labels); i++) n += brg_tensor_get_int(labels, i) != -100;
    return (brg_loss_items){(double)n, 0};
}

/* The model's whole schema: two inputs of a kind no built-in model takes, a target, and what
 * its stages hand each other. */
static const brg_input_decl toy_inputs[] = {
    {.name = "input_features", .kind = BRG_INPUT_FLOATS},
    {.name = "speaker", .kind = BRG_INPUT_FLOATS},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL},
};
static const char *const toy_carried[] = {"hidden", "context", NULL};
static const char *const hidden_only[] = {"hidden", NULL};

static const brg_model_ops toy_ops = {.architecture = "ToySpeakerClassifier", .forward_block = forward_block,
                                      .count_loss_items = count, .inputs = toy_inputs, .carried = toy_carried};
/* The same model forgetting to declare "context": a stage boundary would drop it. */
static const brg_model_ops undeclared_ops = {.architecture = "ToyUndeclared", .forward_block = forward_block,
                                             .count_loss_items = count, .inputs = toy_inputs,
                                             .carried = hidden_only};

/* Declarations that go wrong, each caught where it bites: an input that needs another, one shaped
 * as an input nobody gives, a class id past its classes, a first input that cannot size the
 * batch, and carried lists that are empty, too long or too long a name. */
static const brg_input_decl odd_inputs[] = {
    {.name = "input_features", .kind = BRG_INPUT_FLOATS},
    {.name = "speaker", .kind = BRG_INPUT_FLOATS, .needs = "speaker_id"},
    {.name = "speaker_id", .kind = BRG_INPUT_CLASSES, .classes = 4},
    {.name = "frame_mask", .kind = BRG_INPUT_MASK, .like = "frames"},
    {.name = NULL},
};
static const brg_input_decl labels_first[] = {{.name = "labels", .kind = BRG_INPUT_LABELS}, {.name = NULL}};
static const char *const no_carried[] = {NULL};
static const char *const five_carried[] = {"hidden", "a", "b", "c", "d", NULL};
static const char *const long_carried[] = {"hidden", "a_name_of_forty_eight_characters_is_one_too_many_", NULL};
static const brg_model_ops odd_ops = {.architecture = "ToyOdd", .forward_block = forward_block,
                                      .count_loss_items = count, .inputs = odd_inputs, .carried = toy_carried};
static const brg_model_ops labels_first_ops = {.architecture = "ToyLabelsFirst", .forward_block = forward_block,
                                               .count_loss_items = count, .inputs = labels_first};
static const brg_model_ops no_carried_ops = {.architecture = "ToyNoCarried", .forward_block = forward_block,
                                             .count_loss_items = count, .inputs = toy_inputs, .carried = no_carried};
static const brg_model_ops five_carried_ops = {.architecture = "ToyFiveCarried", .forward_block = forward_block,
                                               .count_loss_items = count, .inputs = toy_inputs,
                                               .carried = five_carried};
static const brg_model_ops long_carried_ops = {.architecture = "ToyLongCarried", .forward_block = forward_block,
                                               .count_loss_items = count, .inputs = toy_inputs,
                                               .carried = long_carried};

static brg_model *build(const brg_model_ops *ops) {
    brg_model *m;
    BRG_ASSERT(brg_model_create(ops, NULL, &m) == BRG_OK);
    m->vocab_size = 1;
    m->max_positions = 1;
    const int64_t square[2] = {FEATURES, FEATURES}, head_w[2] = {CLASSES, FEATURES};
    BRG_ASSERT(brg_model_add_block(m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1) == BRG_OK);
    BRG_ASSERT(brg_model_add_param(m, "in.weight", 2, square, BRG_INIT_NORMAL, 0.5f, false, NULL) == BRG_OK);
    BRG_ASSERT(brg_model_add_param(m, "speaker.weight", 2, square, BRG_INIT_NORMAL, 0.5f, false, NULL) == BRG_OK);
    for (int l = 0; l < N_LAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layers.%d", l);
        BRG_ASSERT(brg_model_add_block(m, name, BRG_BLOCK_LAYER, l) == BRG_OK);
        snprintf(name, sizeof name, "layers.%d.weight", l);
        BRG_ASSERT(brg_model_add_param(m, name, 2, square, BRG_INIT_NORMAL, 0.5f, false, NULL) == BRG_OK);
    }
    BRG_ASSERT(brg_model_add_block(m, "head", BRG_BLOCK_HEAD, -1) == BRG_OK);
    BRG_ASSERT(brg_model_add_param(m, "head.weight", 2, head_w, BRG_INIT_NORMAL, 0.5f, false, NULL) == BRG_OK);
    brg_model_init_weights(m, 7);
    return m;
}

static void check_map(void) {
    brg_tensor_map m = {0};
    brg_tensor a = {0}, b = {0}, c = {0};
    CHECK(brg_tensor_map_get(&m, "x") == NULL && brg_tensor_map_rows(&m) == 0);
    CHECK_OK(brg_tensor_map_put(&m, "input_ids", &a));
    CHECK_OK(brg_tensor_map_put(&m, "labels", &b));
    CHECK_OK(brg_tensor_map_put(&m, "input_ids", &c)); /* replaced in place */
    CHECK(m.n == 2 && strcmp(m.items[0].name, "input_ids") == 0 && brg_tensor_map_get(&m, "input_ids") == &c);
    CHECK_OK(brg_tensor_map_put(&m, "input_ids", NULL)); /* removed; the others keep their order */
    CHECK(m.n == 1 && brg_tensor_map_get(&m, "input_ids") == NULL && brg_tensor_map_get(&m, "labels") == &b);
    CHECK_OK(brg_tensor_map_put(&m, "absent", NULL));
    CHECK(m.n == 1);
    char long_name[BRG_TENSOR_NAME_MAX + 1];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_ERR(brg_tensor_map_put(&m, long_name, &a), BRG_ERR_INVALID_ARG, "a tensor name must have 1 to 47");
    CHECK_ERR(brg_tensor_map_put(&m, "", &a), BRG_ERR_INVALID_ARG, "a tensor name must have");
    for (int i = m.n; i < BRG_TENSOR_MAP_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        CHECK_OK(brg_tensor_map_put(&m, name, &a));
    }
    CHECK_ERR(brg_tensor_map_put(&m, "one_more", &a), BRG_ERR_INVALID_ARG, "more than 16 named tensors");
    CHECK(m.n == BRG_TENSOR_MAP_MAX && brg_tensor_map_get(&m, "one_more") == NULL);
    int64_t shape[2] = {5, 2};
    float data[10] = {0};
    brg_tensor_map rows = {0};
    brg_tensor t = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, data);
    CHECK_OK(brg_tensor_map_put(&rows, "x", &t));
    CHECK(brg_tensor_map_rows(&rows) == 5);
}

/* PopTorch deals a step's micro-batches out to the replicas in turn: [a, replica, micro]. */
static void check_row_layout(void) {
    CHECK(brg_micro_batch_first_row(0, 0, 2, 4) == 0);
    CHECK(brg_micro_batch_first_row(0, 1, 2, 4) == 4);
    CHECK(brg_micro_batch_first_row(1, 0, 2, 4) == 8);
    CHECK(brg_micro_batch_first_row(3, 1, 2, 4) == 28);
}

typedef struct batch {
    float features[ROWS * FEATURES], speaker[ROWS * FEATURES];
    int64_t labels[ROWS];
} batch;

static void make_batch(batch *b) {
    for (int i = 0; i < ROWS * FEATURES; i++) {
        b->features[i] = (float)sin(0.37 * i);
        b->speaker[i] = (float)cos(0.11 * i * i);
    }
    for (int i = 0; i < ROWS; i++) b->labels[i] = i % 4 == 3 ? -100 : i % CLASSES;
}

/* The batch as a safetensors file holding `names` (a subset, to test what is missing). */
static void write_file(const char *path, const batch *b, const char *const *names, const brg_tensor *override) {
    int64_t fs[2] = {ROWS, FEATURES}, ls[1] = {ROWS};
    brg_tensor f = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->features);
    brg_tensor s = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->speaker);
    brg_tensor l = brg_tensor_wrap(BRG_DTYPE_I64, 1, ls, (void *)b->labels);
    brg_named_tensor list[4];
    size_t n = 0;
    for (const char *const *name = names; *name; name++) {
        const brg_tensor *t = strcmp(*name, "input_features") == 0 ? &f : strcmp(*name, "speaker") == 0 ? &s : &l;
        if (override && strcmp(*name, "speaker") == 0) t = override;
        list[n++] = (brg_named_tensor){*name, t};
    }
    BRG_ASSERT(brg_safetensors_write(path, list, n, NULL, 0) == BRG_OK);
}

static brg_status load(const brg_model *m, brg_arena *arena, const char *path, brg_tensor_map *out) {
    brg_safetensors *f;
    BRG_TRY(brg_safetensors_open(path, &f));
    brg_status st = brg_inputs_load(m, arena, f, out);
    brg_safetensors_close(f);
    return st;
}

static void check_loading(const brg_model *m, const batch *b, const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/in.safetensors", dir);
    brg_arena *arena;
    BRG_ASSERT(brg_arena_create("test", 0, &arena) == BRG_OK);
    brg_tensor_map in;
    write_file(path, b, (const char *const[]){"labels", "speaker", "input_features", NULL}, NULL);
    CHECK_OK(load(m, arena, path, &in));
    /* declaration order, the integer labels as I32, the floats as they were */
    CHECK(in.n == 3 && strcmp(in.items[0].name, "input_features") == 0 && strcmp(in.items[2].name, "labels") == 0);
    const brg_tensor *labels = brg_tensor_map_get(&in, "labels"), *speaker = brg_tensor_map_get(&in, "speaker");
    CHECK(labels && labels->dtype == BRG_DTYPE_I32 && ((int32_t *)labels->data)[3] == -100);
    CHECK(speaker && speaker->dtype == BRG_DTYPE_F32 && memcmp(speaker->data, b->speaker, sizeof b->speaker) == 0);
    CHECK(brg_model_has_targets(m, &in));
    CHECK(brg_model_count_loss_items(m, &in).labels == 6);

    write_file(path, b, (const char *const[]){"speaker", "labels", NULL}, NULL);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG, "the inputs have no 'input_features' tensor");
    int64_t wrong_rows[2] = {ROWS - 1, FEATURES};
    brg_tensor short_speaker = brg_tensor_wrap(BRG_DTYPE_F32, 2, wrong_rows, (void *)b->speaker);
    write_file(path, b, (const char *const[]){"input_features", "speaker", NULL}, &short_speaker);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG, "speaker has shape [7, 6]: its first dimension must be");
    int64_t ints_shape[1] = {ROWS};
    brg_tensor int_speaker = brg_tensor_wrap(BRG_DTYPE_I64, 1, ints_shape, (void *)b->labels);
    write_file(path, b, (const char *const[]){"input_features", "speaker", NULL}, &int_speaker);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG, "speaker must be a float tensor, not I64");
    /* a name the model does not declare, with the ones it does */
    int64_t one[1] = {ROWS};
    brg_tensor extra = brg_tensor_wrap(BRG_DTYPE_I64, 1, one, (void *)b->labels);
    brg_named_tensor odd[2] = {{"input_features", &extra}, {"pixel_mask", &extra}};
    BRG_ASSERT(brg_safetensors_write(path, odd, 2, NULL, 0) == BRG_OK);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG,
              "unexpected input tensor 'pixel_mask' (ToySpeakerClassifier takes: input_features, speaker, labels)");
    unlink(path);
    brg_arena_destroy(arena);
}

/* The batch split into 2 micro-batches, by name. */
static void micro_batches(const batch *b, brg_tensor tensors[2][3], brg_micro_batch mbs[2]) {
    int64_t fs[2] = {ROWS / 2, FEATURES}, ls[1] = {ROWS / 2};
    static int32_t labels[ROWS];
    for (int i = 0; i < ROWS; i++) labels[i] = (int32_t)b->labels[i];
    for (int k = 0; k < 2; k++) {
        tensors[k][0] = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)(b->features + k * ROWS / 2 * FEATURES));
        tensors[k][1] = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)(b->speaker + k * ROWS / 2 * FEATURES));
        tensors[k][2] = brg_tensor_wrap(BRG_DTYPE_I32, 1, ls, labels + k * ROWS / 2);
        mbs[k] = (brg_micro_batch){0};
        CHECK_OK(brg_tensor_map_put(&mbs[k], "input_features", &tensors[k][0]));
        CHECK_OK(brg_tensor_map_put(&mbs[k], "speaker", &tensors[k][1]));
        CHECK_OK(brg_tensor_map_put(&mbs[k], "labels", &tensors[k][2]));
    }
}

static double train_step(brg_model *m, const brg_micro_batch *mbs, const layout *l, result *out) {
    brg_runtime_options o = layout_options(l);
    brg_runtime *rt;
    float losses[2] = {0};
    brg_loss_items denom = {6, 0};
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    if (!rt) return 0;
    CHECK_OK(brg_runtime_run(rt, mbs, &denom, 3, losses));
    collect_grads(rt, m, out);
    out->loss = (double)losses[0] + (double)losses[1];
    brg_runtime_destroy(rt);
    return out->loss;
}

/* Both carried tensors cross the stage boundary and their gradients come back: two stages (and
 * two stages recomputing their layers) give the single device's loss and gradients bit for bit,
 * in particular speaker.weight's, whose only path to the loss is "context". */
static void check_training(brg_model *m, const batch *b) {
    brg_tensor tensors[2][3];
    brg_micro_batch mbs[2];
    micro_batches(b, tensors, mbs);
    const int one_stage[4] = {0, 0, 0, 0}, two_stages[4] = {0, 0, 1, 1};
    layout single = {1, 1, 2, one_stage, BRG_SCHEDULE_1F1B, false, 0, "1 device"};
    layout piped = {1, 2, 2, two_stages, BRG_SCHEDULE_1F1B, false, 0, "2 stages"};
    layout recomputed = {1, 2, 2, two_stages, BRG_SCHEDULE_1F1B, true, 0, "2 stages, recomputed"};
    result ref = {0}, got = {0}, again = {0};
    train_step(m, mbs, &single, &ref);
    CHECK(ref.loss > 0.1);
    const long n = (long)brg_tensor_numel(m->params[P_SPEAKER].tensor);
    CHECK(ref.grads[P_SPEAKER] && test_max_abs(ref.grads[P_SPEAKER], n) > 1e-3);
    train_step(m, mbs, &piped, &got);
    train_step(m, mbs, &recomputed, &again);
    for (int p = 0; p < m->n_params; p++) {
        size_t bytes = (size_t)brg_tensor_numel(m->params[p].tensor) * sizeof(float);
        CHECK_MSG(ref.grads[p] && got.grads[p] && memcmp(ref.grads[p], got.grads[p], bytes) == 0,
                  "2 stages: %s's gradient differs from one device's", m->params[p].name);
        CHECK_MSG(ref.grads[p] && again.grads[p] && memcmp(ref.grads[p], again.grads[p], bytes) == 0,
                  "2 stages recomputed: %s's gradient differs from one device's", m->params[p].name);
    }
    CHECK(ref.loss == got.loss && ref.loss == again.loss);
    free_result(m, &ref);
    free_result(m, &got);
    free_result(m, &again);
}

/* Inference through the IPUConfig pipeline takes the batch by name and splits it, whatever the
 * names: 2 stages x 2 device iterations give one device's logits. */
static void check_inference(brg_model *m, const batch *b) {
    brg_tensor_map in = {0};
    int64_t fs[2] = {ROWS, FEATURES};
    brg_tensor f = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->features);
    brg_tensor s = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->speaker);
    CHECK_OK(brg_tensor_map_put(&in, "input_features", &f));
    CHECK_OK(brg_tensor_map_put(&in, "speaker", &s));
    brg_ipu_config one, two;
    CHECK_OK(brg_ipu_config_from_json("{}", "one", &one));
    CHECK_OK(brg_ipu_config_from_json("{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [1, 1], "
                                      "\"inference_device_iterations\": 2}",
                                      "two", &two));
    brg_arena *arena;
    BRG_ASSERT(brg_arena_create("test", 0, &arena) == BRG_OK);
    brg_inference_outputs a = {0}, c = {0};
    CHECK_OK(brg_infer(m, &one, &in, arena, &a));
    CHECK_OK(brg_infer(m, &two, &in, arena, &c));
    CHECK(a.logits && c.logits && a.logits->shape[0] == ROWS && a.logits->shape[1] == CLASSES);
    CHECK(a.logits && c.logits && memcmp(a.logits->data, c.logits->data, brg_tensor_nbytes(a.logits)) == 0);
    CHECK(a.loss == NULL); /* no target given */
    brg_tensor_map missing = {0};
    CHECK_OK(brg_tensor_map_put(&missing, "speaker", &s));
    CHECK_ERR(brg_infer(m, &one, &missing, arena, &a), BRG_ERR_INVALID_ARG, "the batch has no input_features");

    /* a model that carries a tensor it does not declare fails at the stage boundary, by name */
    brg_model *undeclared = build(&undeclared_ops);
    CHECK_OK(brg_infer(undeclared, &one, &in, arena, &a)); /* one stage: nothing crosses */
    CHECK_ERR(brg_infer(undeclared, &two, &in, arena, &c), BRG_ERR_INTERNAL,
              "stage 0 carries 'context', which ToyUndeclared does not declare");
    brg_model_destroy(undeclared);
    brg_arena_destroy(arena);
}

static void check_odd_declarations(const batch *b, const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/odd.safetensors", dir);
    brg_arena *arena;
    BRG_ASSERT(brg_arena_create("test", 0, &arena) == BRG_OK);
    int64_t fs[2] = {ROWS, FEATURES}, rows[1] = {ROWS};
    int64_t ids[ROWS] = {0, 1, 2, 3, 0, 1, 2, 7};
    brg_tensor f = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->features);
    brg_tensor s = brg_tensor_wrap(BRG_DTYPE_F32, 2, fs, (void *)b->speaker);
    brg_tensor id = brg_tensor_wrap(BRG_DTYPE_I64, 1, rows, ids);
    brg_model *m = build(&odd_ops);
    brg_tensor_map in;
    brg_named_tensor no_id[2] = {{"input_features", &f}, {"speaker", &s}};
    BRG_ASSERT(brg_safetensors_write(path, no_id, 2, NULL, 0) == BRG_OK);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG, "speaker needs speaker_id");
    brg_named_tensor bad_id[3] = {{"input_features", &f}, {"speaker", &s}, {"speaker_id", &id}};
    BRG_ASSERT(brg_safetensors_write(path, bad_id, 3, NULL, 0) == BRG_OK);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG, "speaker_id[7] = 7 is out of range [0, 4)");
    ids[7] = -100; /* ignored, as transformers ignores it */
    BRG_ASSERT(brg_safetensors_write(path, bad_id, 3, NULL, 0) == BRG_OK);
    CHECK_OK(load(m, arena, path, &in));
    brg_named_tensor mask[2] = {{"input_features", &f}, {"frame_mask", &f}};
    BRG_ASSERT(brg_safetensors_write(path, mask, 2, NULL, 0) == BRG_OK);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INVALID_ARG,
              "frame_mask is shaped as frames, which the inputs do not have");
    brg_model_destroy(m);
    m = build(&labels_first_ops);
    brg_named_tensor labels[1] = {{"labels", &id}};
    BRG_ASSERT(brg_safetensors_write(path, labels, 1, NULL, 0) == BRG_OK);
    CHECK_ERR(load(m, arena, path, &in), BRG_ERR_INTERNAL, "ToyLabelsFirst's first input labels must be token ids");
    brg_model_destroy(m);
    const brg_model_ops *carried[3] = {&no_carried_ops, &five_carried_ops, &long_carried_ops};
    const char *why[3] = {"ToyNoCarried declares no carried tensor", "ToyFiveCarried declares more than 4 carried",
                          "ToyLongCarried declares a carried tensor name of 48 characters or more"};
    for (int k = 0; k < 3; k++) {
        m = build(carried[k]);
        const int one_stage[4] = {0, 0, 0, 0};
        brg_runtime_options o = {.replicas = 1, .stages = 1, .micro_batches = 1, .training = true};
        brg_runtime *rt = NULL;
        CHECK_ERR(brg_runtime_create(m, &o, &rt), BRG_ERR_INVALID_ARG, "no block_stage"); /* the placement first */
        o.block_stage = one_stage;
        CHECK_ERR(brg_runtime_create(m, &o, &rt), BRG_ERR_INVALID_ARG, why[k]);
        CHECK(rt == NULL);
        brg_model_destroy(m);
    }
    unlink(path);
    brg_arena_destroy(arena);
}

int main(void) {
    (void)check_layouts_against; /* this test compares bits itself */
    check_map();
    check_row_layout();
    char dir[] = "/tmp/brigade-schema-XXXXXX";
    BRG_ASSERT(mkdtemp(dir));
    batch b;
    make_batch(&b);
    brg_model *m = build(&toy_ops);
    check_loading(m, &b, dir);
    check_training(m, &b);
    check_inference(m, &b);
    check_odd_declarations(&b, dir);
    brg_model_destroy(m);
    rmdir(dir);
    return test_finish();
}
