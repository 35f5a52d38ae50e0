/* The model registry, parallelize / deparallelize, the device-allocation log and block costs. */
#include <sys/stat.h>

#include "test_util.h"

#define GPT2 "tests/fixtures/gpt2_tiny"

static brg_ipu_config cfg_;

static char *print_to_string(const brg_model *m, const brg_placement *p) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    brg_placement_print(f, m, p);
    fclose(f);
    return text;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* ---- a registered architecture (BERT-like block layout, no compute) ----------------------- */

static const brg_model_ops bertish_ops = {.architecture = "ToyBlocksForTesting"};

static brg_status bertish_load(const char *dir, brg_model **out) {
    brg_model *m;
    BRG_TRY(brg_model_create(&bertish_ops, NULL, &m));
    int64_t shape[1] = {8};
    brg_status st = brg_model_add_block(m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1);
    if (st == BRG_OK) st = brg_model_add_param(m, "bert.embeddings.word_embeddings.weight", 1, shape, BRG_INIT_ZEROS, 0, false, NULL);
    for (int l = 0; st == BRG_OK && l < 3; l++) { /* two encoder layers, then one decoder layer */
        char name[64];
        snprintf(name, sizeof name, l < 2 ? "encoder.layer.%d" : "decoder.layer.%d", l < 2 ? l : l - 2);
        st = brg_model_add_block(m, name, BRG_BLOCK_LAYER, l);
    }
    if (st == BRG_OK) st = brg_model_add_block(m, "head", BRG_BLOCK_HEAD, -1);
    if (st != BRG_OK) brg_model_destroy(m);
    else *out = m;
    return st;
}

static void test_lookup(void) {
    const brg_model_arch *a = brg_model_arch_find("GPT2LMHeadModel", NULL);
    CHECK(a && strcmp(a->model_type, "gpt2") == 0 && a->load_dir && a->create_dir && a->block_cost);
    CHECK(brg_model_arch_find(NULL, "gpt2") == a && brg_model_arch_find("", "gpt2") == a);
    CHECK(brg_model_arch_find("GPT2DoubleHeadsModel", "gpt2") == NULL); /* architectures wins */
    CHECK(brg_model_arch_find("ToyBlocksForTesting", "toy-blocks") == NULL);
    char names[512];
    CHECK(strncmp(brg_model_arch_names(names, sizeof names), "GPT2LMHeadModel, BertForMaskedLM", 32) == 0);
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(GPT2, &m));
    CHECK(m && brg_model_arch_of(m) == a);
    brg_model_destroy(m);
}

static void test_unknown_and_register(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/bertish", test_tmp_dir());
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, "{\"architectures\": [\"ToyBlocksForTesting\"], \"model_type\": \"toy-blocks\"}");
    brg_model *m = NULL;
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_UNSUPPORTED,
              "architecture 'ToyBlocksForTesting' (model_type 'toy-blocks') is not supported; supported: GPT2LMHeadModel");

    CHECK_ERR(brg_register_model(NULL), BRG_ERR_INVALID_ARG, "load_dir");
    brg_model_arch arch = {.architecture = "ToyBlocksForTesting", .model_type = "toy-blocks", .load_dir = bertish_load};
    char before[512], names[512];
    brg_model_arch_names(before, sizeof before);
    CHECK_OK(brg_register_model(&arch));
    brg_model_arch_names(names, sizeof names);
    CHECK(strncmp(names, before, strlen(before)) == 0 && strcmp(names + strlen(before), ", ToyBlocksForTesting") == 0);
    CHECK(brg_model_arch_find(NULL, "toy-blocks") != NULL);
    CHECK_OK(brg_model_load(dir, &m));
    CHECK(m && strcmp(m->ops->architecture, "ToyBlocksForTesting") == 0);
    brg_model_destroy(m);
    m = NULL;
    CHECK_OK(brg_model_create_from_config(dir, &m)); /* no create_dir: falls back to load_dir */
    brg_model *m2 = m;

    /* upstream BERT wording by default: "Embedding --> IPU 0", "Encoder 0  --> IPU 0" */
    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [2, 1]}", NULL, &cfg_));
    brg_placement p;
    CHECK_OK(brg_model_parallelize(m2, &cfg_, BRG_IPU_MODE_TRAINING, &p));
    char *text = print_to_string(m2, &p);
    CHECK_MSG(text && strcmp(text, "-------------------- Device Allocation --------------------\n"
                                   "Embedding --> IPU 0\n"
                                   "Encoder 0  --> IPU 0\n"
                                   "Encoder 1  --> IPU 0\n"
                                   "Encoder 2  --> IPU 1\n"
                                   "Head --> IPU 1\n"
                                   "-----------------------------------------------------------\n") == 0,
              "%s", text ? text : "(null)");
    free(text);
    brg_placement_free(&p);

    /* registering the same name again replaces the entry */
    arch.labels = (brg_alloc_labels){{"Embeddings ", NULL, NULL}, "Block", "   ", "LM head ", "Decoder", "decoder.",
                                     "--- allocation ---", "---"};
    strcpy(before, names);
    CHECK_OK(brg_register_model(&arch));
    CHECK(strcmp(brg_model_arch_names(names, sizeof names), before) == 0);
    CHECK_OK(brg_model_parallelize(m2, &cfg_, BRG_IPU_MODE_TRAINING, &p));
    text = print_to_string(m2, &p);
    CHECK_MSG(text && strcmp(text, "--- allocation ---\n"
                                   "Embeddings --> IPU 0\n"
                                   "Block 0    --> IPU 0\n"
                                   "Block 1    --> IPU 0\n"
                                   "Decoder 0    --> IPU 1\n"
                                   "LM head --> IPU 1\n"
                                   "---\n") == 0,
              "%s", text ? text : "(null)");
    free(text);
    brg_placement_free(&p);
    brg_model_destroy(m2);
    brg_model *m3 = NULL;
    CHECK_OK(brg_model_load(dir, &m3));
    brg_model_destroy(m3);
    brg_model_destroy(NULL);
}

/* The other built-in architectures print upstream's wording for their Pipelined* classes. */
static void test_builtin_labels(void) {
    const brg_model_arch *t5 = brg_model_arch_find("T5ForConditionalGeneration", NULL);
    CHECK(t5 && t5->load_dir && strcmp(t5->model_type, "t5") == 0);
    CHECK(brg_model_arch_find("BertForSequenceClassification", NULL) && brg_model_arch_find("ViTForImageClassification", NULL));
    CHECK(brg_model_arch_find(NULL, "bert") == brg_model_arch_find("BertForMaskedLM", NULL));
    brg_model *m = NULL;
    CHECK_OK(brg_model_load("tests/fixtures/t5_relu_tied", &m));
    if (!m) return;
    brg_placement p;
    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 1, 1, 1]}", NULL, &cfg_));
    CHECK_OK(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p));
    char *text = print_to_string(m, &p);
    CHECK_MSG(text && strcmp(text, "-------------------- Device Allocation --------------------\n"
                                   "Embedding  --> IPU 0\n"
                                   "Encoder 0  --> IPU 0\n"
                                   "Encoder 1  --> IPU 1\n"
                                   "Decoder 0  --> IPU 2\n"
                                   "Decoder 1  --> IPU 3\n"
                                   "LM Head Output --> IPU 3\n"
                                   "-----------------------------------------------------------\n") == 0,
              "%s", text ? text : "(null)");
    free(text);
    brg_placement_free(&p);
    /* generation runs encoder and decoder as two pipelines: a power-of-two cut */
    brg_ipu_config enc, dec;
    CHECK_OK(brg_ipu_config_split_encoder_decoder(&cfg_, 2, 2, &enc, &dec));
    CHECK(enc.ipus_per_replica == 2 && dec.ipus_per_replica == 2);
    brg_model_destroy(m);
}

static void test_parallelize_gpt2(void) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(GPT2, &m));
    if (!m) return;
    brg_placement p;
    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 1], \"inference_layers_per_ipu\": [2]}", NULL, &cfg_));
    CHECK_OK(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p));
    CHECK(p.n_devices == 2 && p.n_blocks == 4 && p.n_layers == 2);
    CHECK(p.block_device[0] == 0 && p.block_device[1] == 0 && p.block_device[2] == 1 && p.block_device[3] == 1);
    CHECK(p.layer_device[0] == 0 && p.layer_device[1] == 1);
    char *text = print_to_string(m, &p);
    /* upstream PipelinedGPT2LMHeadModel's wording; brigade's head sits on the last device */
    CHECK_MSG(text && strcmp(text, "-------------------- Device Allocation --------------------\n"
                                   "Token Embedding     --> IPU 0\n"
                                   "Position Embedding  --> IPU 0\n"
                                   "Layer 0             --> IPU 0\n"
                                   "Layer 1             --> IPU 1\n"
                                   "Head                --> IPU 1\n"
                                   "-----------------------------------------------------------\n") == 0,
              "%s", text ? text : "(null)");
    free(text);
    brg_placement_free(&p);
    CHECK(p.block_device == NULL);

    CHECK_OK(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_INFERENCE, &p));
    CHECK(p.n_devices == 1 && p.block_device[3] == 0 && p.mode == BRG_IPU_MODE_INFERENCE);
    brg_placement_free(&p);
    CHECK(cfg_.mode == BRG_IPU_MODE_TRAINING); /* the caller's config is not switched */

    /* Upstream's expansion puts both layers on the last of 4 IPUs ([0, 0, 0, 2]); IPUs 1 and 2 would
     * run nothing, so parallelize (and with it plan and train) refuses, naming the first. */
    CHECK_OK(brg_ipu_config_from_json("{\"ipus_per_replica\": 4}", NULL, &cfg_));
    int layer_ipu[2], count = 0;
    CHECK_OK(brg_ipu_config_get_layer_ipu(&cfg_, 2, layer_ipu, 2, &count));
    CHECK(count == 2 && layer_ipu[0] == 3 && layer_ipu[1] == 3);
    CHECK_ERR(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p), BRG_ERR_INVALID_ARG,
              "layers_per_ipu=[-1] places [0, 0, 0, 2] layers on the 4 IPUs of this 2-layer model, which leaves IPU 1 "
              "with no block to run");
    CHECK(p.block_device == NULL);

    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 2]}", NULL, &cfg_));
    CHECK_ERR(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p), BRG_ERR_INVALID_ARG,
              "layers_per_ipu does not define the correct number of layers for the current model");
    CHECK_OK(brg_ipu_config_from_json("{\"execute_encoder_on_cpu_for_generation\": true}", NULL, &cfg_));
    CHECK_ERR(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p), BRG_ERR_UNSUPPORTED,
              "execute_encoder_on_cpu_for_generation");
    brg_model_destroy(m);
}

static void test_deparallelize(void) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(GPT2, &m));
    if (!m) return;
    brg_named_tensor *sd = NULL;
    size_t n = 0;
    CHECK_OK(brg_model_deparallelize(m, &sd, &n));
    CHECK(n == (size_t)m->n_params && n == 2 + 2 * 12 + 2);
    int64_t total = 0;
    bool has_lm_head = false, same = true;
    for (size_t i = 0; i < n; i++) {
        total += brg_tensor_numel(sd[i].tensor);
        has_lm_head |= strcmp(sd[i].name, "lm_head.weight") == 0;
        same &= sd[i].tensor == m->params[i].tensor && strcmp(sd[i].name, m->params[i].name) == 0;
    }
    CHECK(same && !has_lm_head); /* the tied head is stored once, as transformers saves it */
    CHECK(strcmp(sd[0].name, "transformer.wte.weight") == 0 && strcmp(sd[n - 1].name, "transformer.ln_f.bias") == 0);
    CHECK(total == brg_model_num_parameters(m));
    free(sd);
    brg_model_destroy(m);
}

static void test_block_costs(void) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(GPT2, &m));
    if (!m) return;
    brg_block_cost c[4];
    CHECK_OK(brg_model_block_costs(m, 2, 8, c));
    int64_t C = 32, F = 128, V = 101, H = 4, B = 2, T = 8, BT = 16;
    CHECK(c[0].params == V * C + 16 * C && c[0].layer == -1 && c[0].tied_owner == -1);
    CHECK(c[1].params == 12 * C * C + 13 * C && c[1].layer == 0 && c[2].layer == 1);
    CHECK(c[3].params == 2 * C && c[3].tied_params == V * C && c[3].tied_owner == 0);
    CHECK(c[0].params + c[1].params + c[2].params + c[3].params == brg_model_num_parameters(m));
    CHECK_NEAR(c[1].flops, (double)(BT * (8 * C * C + 4 * C * F) + 4 * BT * T * C), 0);
    CHECK_NEAR(c[3].flops, (double)(2 * BT * C * V), 0);
    /* memory as the arena counts it: every op's output (13 to 16 [BT, C] tensors as dropout is off or
     * on, two [BT, F]), headers, contexts and statistics; no [T, T] probabilities (the attention is
     * fused); tests/test_memory_plan.c checks the sums against measured peaks */
    (void)H, (void)B;
    const int64_t hdr = 192, D = 4 * BT * C;
    CHECK(c[1].saved_bytes >= 4 * BT * (13 * C + 2 * F) && c[1].saved_bytes <= 4 * BT * (16 * C + 2 * F) + 40 * hdr);
    CHECK(c[1].grad_bytes >= 4 * BT * (12 * C + F) && c[1].grad_bytes <= c[1].saved_bytes);
    CHECK(c[1].input_bytes == hdr + D && c[1].input_grad_bytes == D && c[0].input_bytes == 0);
    CHECK(c[1].recompute_bytes == 2 * hdr + 4 * D); /* input copy and output, each with its gradient */
    CHECK(c[1].scratch_bytes[2] == 4 * BT * F && c[3].scratch_bytes[3] == 8 * BT && c[1].forward_scratch_bytes[2] == 0);
    CHECK(c[1].param_tensors == 12 && c[1].param_bytes >= 4 * c[1].params);
    CHECK_ERR(brg_model_block_costs(m, 0, 8, c), BRG_ERR_INVALID_ARG, "micro-batch size 0");

    /* the whole plan: embeddings + layer 0 on device 0, layer 1 + head on device 1 */
    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 1]}", NULL, &cfg_));
    brg_placement p;
    CHECK_OK(brg_model_parallelize(m, &cfg_, BRG_IPU_MODE_TRAINING, &p));
    brg_device_plan d[2];
    CHECK_OK(brg_plan_devices(c, 4, p.block_device, 2, BRG_IPU_MODE_TRAINING, false, d));
    CHECK(d[1].params == c[2].params + c[3].params + V * C); /* the head's copy of the tied embedding */
    CHECK(d[0].optimizer_bytes == 2 * (c[0].param_bytes + c[1].param_bytes));
    brg_placement_free(&p);
    brg_model_destroy(m);
}

static void test_create_from_config(void) {
    char dir[512], cmd[2400];
    snprintf(dir, sizeof dir, "%s/gpt2-config-only", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && sed '/\"architectures\"/,/\\],/d' " GPT2
             "/config.json > '%s/config.json' && ! grep -q architectures '%s/config.json'", dir, dir, dir, dir);
    CHECK(system(cmd) == 0);
    brg_model *m = NULL;
    CHECK_OK(brg_model_create_from_config(dir, &m)); /* model_type only, no weights */
    CHECK(m && m->n_blocks == 4 && strcmp(m->ops->architecture, "GPT2LMHeadModel") == 0);
    brg_model_destroy(m);
    m = NULL;
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_NOT_FOUND, "");
}

int main(void) {
    test_lookup();
    test_unknown_and_register();
    test_builtin_labels();
    test_parallelize_gpt2();
    test_deparallelize();
    test_block_costs();
    test_create_from_config();
    return test_finish();
}
