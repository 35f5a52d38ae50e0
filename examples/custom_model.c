/* A custom architecture in a few dozen lines, trained pipelined over two devices.
 *
 * "ToyMLPForNextToken" predicts the next token from the current one: token embedding, a stack of
 * residual MLP layers (LayerNorm -> Linear -> GELU -> Linear, added back), then a LayerNorm and a
 * head tied to the embedding. Its data is the rule next = (token + 3) mod vocab, which it learns
 * in a few hundred steps. The program
 *   1. declares the model: parameters named as a transformers state dict would name them, and
 *      blocks (embeddings, one per layer, head) so brigade can place them on devices;
 *   2. registers it, so brigade's loaders, `plan` and placement know it by name;
 *   3. places it with an IPUConfig (layers_per_ipu [-1] over 2 IPUs) and trains it with the
 *      trainer, pipelined (1F1B) with 4 micro-batches per step.
 * Build: part of `make`; run: build/example_custom_model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/brigade.h"
#include "brigade/registry.h"
#include "brigade/trainer.h"

enum { VOCAB = 32, WIDTH = 32, LAYERS = 4, SEQ = 8, ROWS = 256 };

/* Parameter indices follow the order they are added in build(). */
enum { P_EMB = 0, PER_LAYER = 6 };
enum { L_LN_W, L_LN_B, L_UP_W, L_UP_B, L_DOWN_W, L_DOWN_B };
static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }
static brg_tensor *LP(brg_model *m, int l, int k) { return P(m, 1 + l * PER_LAYER + k); }
static int head_first(void) { return 1 + LAYERS * PER_LAYER; }

/* Inputs come by name (b->inputs); the hidden state travels from block to block, and from
 * device to device, as the carried tensor "hidden". */
static brg_status embeddings(brg_model *m, brg_tape *tape, brg_bundle *b) {
    brg_tensor *h;
    BRG_TRY(brg_embedding(tape, brg_bundle_input(b, "input_ids"), P(m, P_EMB), &h));
    return brg_bundle_carry(b, "hidden", h);
}

static brg_status layer(brg_model *m, int l, brg_tape *tape, brg_bundle *b) {
    brg_tensor *h = brg_bundle_carried(b, "hidden"), *n, *act, *down;
    BRG_TRY(brg_layer_norm(tape, h, LP(m, l, L_LN_W), LP(m, l, L_LN_B), 1e-5f, &n));
    /* gelu(n @ W_up + b_up), the bias add and the activation in one pass */
    BRG_TRY(brg_linear_act(tape, n, LP(m, l, L_UP_W), LP(m, l, L_UP_B), false, BRG_ACT_GELU_ERF, &act));
    BRG_TRY(brg_linear(tape, act, LP(m, l, L_DOWN_W), LP(m, l, L_DOWN_B), false, &down));
    BRG_TRY(brg_add(tape, h, down, &h));
    return brg_bundle_carry(b, "hidden", h);
}

/* Position t predicts label t (the data already holds the next token); -100 is ignored. */
static brg_status head(brg_model *m, brg_tape *tape, brg_bundle *b) {
    brg_tensor *n;
    int h = head_first();
    BRG_TRY(brg_layer_norm(tape, brg_bundle_carried(b, "hidden"), P(m, h), P(m, h + 1), 1e-5f, &n));
    BRG_TRY(brg_linear(tape, n, P(m, P_EMB), NULL, false, &b->logits)); /* tied to the embedding */
    b->loss = NULL;
    brg_tensor *labels = brg_bundle_input(b, "labels");
    if (!labels) return BRG_OK;
    return brg_cross_entropy_share(tape, b->logits, labels, -100, b->loss_denominator, &b->loss);
}

static brg_status forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    switch (m->blocks[block].kind) {
    case BRG_BLOCK_EMBEDDINGS: return embeddings(m, tape, b);
    case BRG_BLOCK_LAYER: return layer(m, m->blocks[block].layer, tape, b);
    case BRG_BLOCK_HEAD: return head(m, tape, b);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown block");
}

/* The loss is a mean over labels that are not -100: micro-batches share it by the global count. */
static brg_loss_items count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    (void)m;
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    int64_t n = 0;
    for (int64_t i = 0; i < brg_tensor_numel(labels); i++) n += ((const int32_t *)labels->data)[i] != -100;
    return (brg_loss_items){(double)n, 0};
}

static brg_status save_config(const brg_model *m, const char *dir) {
    (void)m;
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return brg_error(BRG_ERR_IO, "cannot write %s", path);
    fprintf(f, "{\"architectures\": [\"ToyMLPForNextToken\"], \"model_type\": \"toy-mlp\", \"vocab_size\": %d,"
               " \"hidden_size\": %d, \"num_hidden_layers\": %d}\n", VOCAB, WIDTH, LAYERS);
    return fclose(f) == 0 ? BRG_OK : brg_error(BRG_ERR_IO, "cannot write %s", path);
}

/* The inputs, as transformers' forward names them: what brigade checks them against, and which
 * of them are loss targets (a batch with labels has a loss). */
static const brg_input_decl inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL}, /* the end */
};
static const brg_model_ops toy_ops = {.architecture = "ToyMLPForNextToken", .forward_block = forward_block,
                                      .save_config = save_config, .count_loss_items = count_loss_items,
                                      .inputs = inputs};

static brg_status build(brg_model **out) {
    brg_model *m;
    BRG_TRY(brg_model_create(&toy_ops, NULL, &m));
    m->vocab_size = VOCAB;
    m->max_positions = SEQ;
    int64_t emb[2] = {VOCAB, WIDTH}, w[2] = {WIDTH, WIDTH}, v[1] = {WIDTH};
    char name[BRG_NAME_MAX];
    brg_status st = brg_model_add_block(m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1);
    if (st == BRG_OK) st = brg_model_add_param(m, "embed.weight", 2, emb, BRG_INIT_NORMAL, 0.5f, false, NULL);
    for (int l = 0; st == BRG_OK && l < LAYERS; l++) {
        snprintf(name, sizeof name, "layers.%d", l);
        st = brg_model_add_block(m, name, BRG_BLOCK_LAYER, l);
        const char *suffix[PER_LAYER] = {"norm.weight", "norm.bias", "up.weight", "up.bias", "down.weight", "down.bias"};
        for (int k = 0; st == BRG_OK && k < PER_LAYER; k++) {
            snprintf(name, sizeof name, "layers.%d.%s", l, suffix[k]);
            bool weight = k == L_UP_W || k == L_DOWN_W;
            brg_init_kind init = weight ? BRG_INIT_NORMAL : k == L_LN_W ? BRG_INIT_ONES : BRG_INIT_ZEROS;
            st = brg_model_add_param(m, name, weight ? 2 : 1, weight ? w : v, init, 0.2f, !weight, NULL);
        }
    }
    if (st == BRG_OK) st = brg_model_add_block(m, "head", BRG_BLOCK_HEAD, -1);
    if (st == BRG_OK) st = brg_model_add_param(m, "norm.weight", 1, v, BRG_INIT_ONES, 0, true, NULL);
    if (st == BRG_OK) st = brg_model_add_param(m, "norm.bias", 1, v, BRG_INIT_ZEROS, 0, true, NULL);
    if (st == BRG_OK) st = brg_model_add_alias(m, "lm_head.weight", P_EMB); /* the head reads the embedding */
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    brg_model_init_weights(m, 1);
    *out = m;
    return BRG_OK;
}

/* Folders this model saved (config.json + model.safetensors) load back by name. */
static brg_status load_dir(const char *dir, brg_model **out) {
    BRG_TRY(build(out));
    brg_checkpoint *ckpt;
    brg_status st = brg_checkpoint_open(dir, &ckpt);
    if (st == BRG_OK) {
        st = brg_model_load_weights(*out, ckpt, NULL, NULL);
        brg_checkpoint_close(ckpt);
    }
    if (st != BRG_OK) brg_model_destroy(*out);
    return st;
}

static brg_dataset *make_data(void) {
    static int32_t ids[ROWS * SEQ], labels[ROWS * SEQ];
    brg_rng rng;
    brg_rng_seed(&rng, 2);
    for (int i = 0; i < ROWS * SEQ; i++) {
        ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
        labels[i] = (ids[i] + 3) % VOCAB;
    }
    brg_dataset *d = NULL;
    return brg_dataset_from_rows(ids, NULL, labels, ROWS, SEQ, &d) == BRG_OK ? d : NULL;
}

static int fail(const char *what) {
    fprintf(stderr, "custom_model: %s: %s\n", what, brg_last_error());
    return 1;
}

int main(void) {
    /* 2. register: brg_model_load now finds folders whose config.json names the architecture */
    brg_model_arch arch = {.architecture = "ToyMLPForNextToken", .model_type = "toy-mlp", .load_dir = load_dir};
    brg_model *m = NULL;
    if (brg_register_model(&arch) != BRG_OK) return fail("register");
    if (build(&m) != BRG_OK) return fail("build");

    /* 3. place with an IPUConfig and train pipelined */
    brg_ipu_config cfg;
    brg_ipu_config_init(&cfg);
    const char *json = "{\"ipus_per_replica\": 2, \"layers_per_ipu\": [-1], \"gradient_accumulation_steps\": 4}";
    brg_placement place = {0};
    if (brg_ipu_config_from_json(json, "example", &cfg) != BRG_OK) return fail("ipu config");
    if (brg_model_parallelize(m, &cfg, BRG_IPU_MODE_TRAINING, &place) != BRG_OK) return fail("parallelize");
    brg_placement_print(stdout, m, &place);

    brg_dataset *data = make_data();
    if (!data) return fail("data");
    brg_train_options o;
    brg_train_options_default(&o);
    o.stages = place.n_devices;
    o.block_stage = place.block_device;
    o.accumulation = 4;
    o.micro_batch = 8;
    o.steps = 300;
    o.optimizer.lr = 1e-2;
    o.progress = stdout;
    brg_train_result r;
    if (brg_train(m, data, &o, &r) != BRG_OK) return fail("train");
    printf("final loss %.4f (started near ln(%d) = %.2f)\n", r.last_loss, VOCAB, log(VOCAB));
    int ok = r.last_loss < 0.1;
    printf("%s\n", ok ? "learned next = token + 3" : "did not learn the rule");

    /* the trained model saves as a folder and loads back through the registry */
    char dir[] = "/tmp/brigade-toy-XXXXXX";
    brg_model *again = NULL;
    if (!mkdtemp(dir) || brg_model_save(m, dir) != BRG_OK || brg_model_load(dir, &again) != BRG_OK)
        return fail("save and load");
    ok &= memcmp(again->params[0].tensor->data, m->params[0].tensor->data, brg_tensor_nbytes(m->params[0].tensor)) == 0;
    printf("saved to %s and loaded back as %s\n", dir, again->ops->architecture);
    brg_model_destroy(again);
    char path[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
    remove(dir);
    brg_placement_free(&place);
    brg_dataset_free(data);
    brg_model_destroy(m);
    return ok ? 0 : 1;
}
