/* IPUConfig files: published configs load with their derived values, invalid ones fail naming
 * the attribute, and saving writes optimum's layout and loads back identical. */
#include <sys/stat.h>
#include <unistd.h>

#include "config/ipu_config_internal.h"
#include "test_util.h"

#define FIX "tests/fixtures/ipu_configs"

static brg_ipu_config a_, b_;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static bool file_has(const char *path, const char *needle) {
    char *s = read_text(path);
    bool ok = s && strstr(s, needle);
    free(s);
    return ok;
}

/* load -> save -> load gives the same config, and saving again gives the same bytes. */
static void check_round_trip(const char *ref) {
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/rt1.json", test_tmp_dir());
    snprintf(p2, sizeof p2, "%s/rt2.json", test_tmp_dir());
    CHECK_OK(brg_ipu_config_load(ref, &a_));
    CHECK_OK(brg_ipu_config_write_file(&a_, p1));
    CHECK_OK(brg_ipu_config_load(p1, &b_));
    CHECK_MSG(brg_ipu_config_equal(&a_, &b_), "%s does not round-trip", ref);
    CHECK_OK(brg_ipu_config_write_file(&b_, p2));
    char *t1 = read_text(p1), *t2 = read_text(p2);
    CHECK(t1 && t2 && strcmp(t1, t2) == 0);
    int keys = 0;
    for (const char *s = t1; s && (s = strstr(s, "\n  \"")); s++) keys++;
    CHECK_MSG(keys == 31, "%s saved %d top-level keys", ref, keys);
    CHECK(t1 && !strstr(t1, "transformers_version") && !strstr(t1, "optimum_version"));
    free(t1);
    free(t2);
}

static void test_bert_large(void) {
    CHECK_OK(brg_ipu_config_load(FIX "/bert-large-ipu", &a_)); /* a folder holding ipu_config.json */
    CHECK(a_.layers_per_ipu.n == 4 && a_.layers_per_ipu.v[0] == 3 && a_.layers_per_ipu.v[3] == 7);
    CHECK(a_.ipus_per_replica == 4 && a_.inference_ipus_per_replica == 4);
    CHECK(a_.matmul_proportion.is_list && a_.matmul_proportion.n == 4 && a_.matmul_proportion.v[1] == 0.15);
    CHECK(a_.inference_matmul_proportion.is_list && a_.inference_matmul_proportion.v[0] == 0.1);
    CHECK(a_.replication_factor == 4 && a_.gradient_accumulation_steps == 512 && a_.inference_device_iterations == 4);
    CHECK(a_.embedding_serialization_factor == 2 && a_.inference_embedding_serialization_factor == 1);
    CHECK(a_.has_seed && a_.seed == 42 && a_.optimizer_state_offchip && a_.recompute_checkpoint_every_layer);
    CHECK(a_.n_warnings == 0);
    int layer_ipu[24], n = 0;
    CHECK_OK(brg_ipu_config_get_layer_ipu(&a_, 24, layer_ipu, 24, &n));
    CHECK(n == 24 && layer_ipu[2] == 0 && layer_ipu[3] == 1 && layer_ipu[23] == 3);
    CHECK_OK(brg_ipu_config_load(FIX "/bert-large-ipu/ipu_config.json", &b_)); /* the file itself */
    CHECK(brg_ipu_config_equal(&a_, &b_));
    check_round_trip(FIX "/bert-large-ipu");
}

static void test_gpt2_small(void) {
    CHECK_OK(brg_ipu_config_load(FIX "/gpt2-small-ipu.json", &a_));
    CHECK(a_.layers_per_ipu.n == 4 && a_.layers_per_ipu.v[0] == 0 && a_.ipus_per_replica == 4);
    /* inference on one IPU: its IPU count and matmul proportion are derived */
    CHECK(a_.inference_layers_per_ipu.n == 1 && a_.inference_layers_per_ipu.v[0] == 12);
    CHECK(a_.inference_ipus_per_replica == 1);
    CHECK(!a_.inference_matmul_proportion.is_list && a_.inference_matmul_proportion.v[0] == 0.2);
    CHECK(a_.embedding_serialization_factor == 4 && a_.projection_serialization_factor == 1);
    CHECK(a_.n_warnings == 1 && strstr(a_.warnings[0], "`replicated_tensor_sharding` is not used"));
    int64_t f;
    CHECK_OK(brg_ipu_config_batch_size_factor(&a_, BRG_IPU_MODE_TRAINING, &f));
    CHECK(f == 128);
    CHECK_OK(brg_ipu_config_batch_size_factor(&a_, BRG_IPU_MODE_INFERENCE, &f));
    CHECK(f == 4);
    check_round_trip(FIX "/gpt2-small-ipu.json");
}

static void test_other_published(void) {
    CHECK_OK(brg_ipu_config_load(FIX "/t5-small-ipu.json", &a_));
    CHECK(a_.inference_ipus_per_replica == 2 && a_.inference_matmul_proportion.n == 2);
    check_round_trip(FIX "/t5-small-ipu.json");
    CHECK_OK(brg_ipu_config_load(FIX "/trainer-test.json", &a_));
    CHECK(a_.ipus_per_replica == 4 && a_.layers_per_ipu.n == 1 && a_.layers_per_ipu.v[0] == -1);
    CHECK(a_.inference_ipus_per_replica == 4 && a_.output_mode == BRG_OUTPUT_MODE_ALL);
    CHECK(strcmp(a_.executable_cache_dir, "disabled") == 0);
    int layer_ipu[8], n;
    CHECK_OK(brg_ipu_config_get_layer_ipu(&a_, 8, layer_ipu, 8, &n));
    CHECK(n == 8 && layer_ipu[1] == 0 && layer_ipu[2] == 1 && layer_ipu[7] == 3);
    check_round_trip(FIX "/trainer-test.json");
    CHECK_OK(brg_ipu_config_load(FIX "/deprecated-keys.json", &a_));
    CHECK(a_.n_warnings == 2);
    CHECK(strstr(a_.warnings[0], "sharded_execution_for_inference") && strstr(a_.warnings[1], "enable_half_first_order_momentum"));
    check_round_trip(FIX "/deprecated-keys.json");
}

static void test_invalid(void) {
    CHECK_ERR(brg_ipu_config_load(FIX "/legacy-pod-type.json", &a_), BRG_ERR_INVALID_ARG,
              "`replication_factor` has a per-pod-type value");
    CHECK(strstr(brg_last_error(), "legacy-pod-type.json") != NULL);
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/unknown-key.json", &a_), BRG_ERR_INVALID_ARG,
              "unknown argument: layer_per_ipu=[2, 2]");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/matmul-length.json", &a_), BRG_ERR_INVALID_ARG,
              "matmul_proportion=[0.1, 0.15, 0.15] should use the same number of IPUs as ipus_per_replica=4.");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/output-mode.json", &a_), BRG_ERR_INVALID_ARG, "value='last'");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/splits-not-consecutive.json", &a_), BRG_ERR_INVALID_ARG,
              "`serialized_embedding_splits_per_ipu=[3, 0, 2, 0]` must have its splits on consecutive IPUs");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/factor-and-splits.json", &a_), BRG_ERR_INVALID_ARG,
              "Only one of `projection_serialization_factor` and `serialized_projection_splits_per_ipu`");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/negative-layers.json", &a_), BRG_ERR_INVALID_ARG,
              "`layers_per_ipu` must have all elements >= -1. You provided value=[4, -2]");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/wrong-type.json", &a_), BRG_ERR_INVALID_ARG,
              "`gradient_accumulation_steps` must be an int. You provided value='16'");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/replication-zero.json", &a_), BRG_ERR_INVALID_ARG,
              "`replication_factor` must be >= 1. You provided value=0");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/not-an-object.json", &a_), BRG_ERR_INVALID_ARG, "JSON object");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid/syntax.json", &a_), BRG_ERR_FORMAT, "syntax.json");
    CHECK_ERR(brg_ipu_config_load(FIX "/invalid", &a_), BRG_ERR_NOT_FOUND, "holds no ipu_config.json");
    CHECK_ERR(brg_ipu_config_load("no-such-org/no-such-config", &a_), BRG_ERR_NOT_FOUND, "no-such-org/no-such-config");
}

/* Python's json.dumps(indent=2, sort_keys=True) of the same values, committed as fixtures. */
static void test_saved_layout(void) {
    char *text = NULL, *want = read_text(FIX "/default.json");
    brg_ipu_config_init(&a_);
    CHECK_OK(brg_ipu_config_to_json(&a_, &text));
    CHECK_MSG(text && want && strcmp(text, want) == 0, "default config:\n%s", text ? text : "(null)");
    free(text);
    free(want);
    text = NULL;
    want = read_text(FIX "/every-kind.json");
    CHECK_OK(brg_ipu_config_load(FIX "/every-kind.json", &a_));
    CHECK_OK(brg_ipu_config_to_json(&a_, &text));
    CHECK_MSG(text && want && strcmp(text, want) == 0, "every-kind:\n%s", text ? text : "(null)");
    free(text);
    free(want);
}

/* repr(float) of Python 3 for values at the edges of its fixed/exponent switch. */
static void test_float_repr(void) {
    const double v[] = {0.1, 1e16, 1e-5, 123.456, 0.0001, 1e15, 2.5e-7, -0.0, 5e-324, 1.7976931348623157e308,
                        0.1 + 0.2, 100.0, 12345678901234567.0, -1.5, 9999999999999998.0, 1e-4 * 0.99};
    const char *want[] = {"0.1", "1e+16", "1e-05", "123.456", "0.0001", "1000000000000000.0", "2.5e-07", "-0.0",
                          "5e-324", "1.7976931348623157e+308", "0.30000000000000004", "100.0", "1.2345678901234568e+16",
                          "-1.5", "9999999999999998.0", "9.900000000000001e-05"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char buf[64];
        py_float_repr(v[i], buf, sizeof buf);
        CHECK_MSG(strcmp(buf, want[i]) == 0, "repr(%.17g) = %s, wanted %s", v[i], buf, want[i]);
    }
}

static void test_view_json(void) {
    char *text = NULL;
    CHECK_OK(brg_ipu_config_load(FIX "/gpt2-small-ipu.json", &a_));
    CHECK_OK(brg_ipu_config_view_to_json(&a_, BRG_IPU_MODE_INFERENCE, &text));
    CHECK(text && strstr(text, "\"mode\": \"inference\""));
    CHECK(text && strstr(text, "\"layers_per_ipu\": [\n    12\n  ]"));
    CHECK(text && strstr(text, "\"ipus_per_replica\": 1,") && strstr(text, "\"matmul_proportion\": 0.2,"));
    CHECK(text && strstr(text, "\"device_iterations\": 4,") && strstr(text, "\"output_mode\": \"all\""));
    CHECK(text && strstr(text, "\"gradient_accumulation_steps\": 1,") && strstr(text, "\"batch_size_factor\": 4,"));
    CHECK(text && !strstr(text, "inference_"));
    free(text);
    CHECK_OK(brg_ipu_config_view_to_json(&a_, BRG_IPU_MODE_TRAINING, &text));
    CHECK(text && strstr(text, "\"ipus_per_replica\": 4,") && strstr(text, "\"batch_size_factor\": 128,"));
    free(text);
}

static void test_save_pretrained_and_hub(void) {
    char dir[512], path[600], cmd[4096];
    snprintf(dir, sizeof dir, "%s/saved-cfg/nested", test_tmp_dir());
    CHECK_OK(brg_ipu_config_load(FIX "/bert-large-ipu", &a_));
    CHECK_OK(brg_ipu_config_save_pretrained(&a_, dir));
    CHECK_OK(brg_ipu_config_load(dir, &b_));
    CHECK(brg_ipu_config_equal(&a_, &b_));
    snprintf(path, sizeof path, "%s/ipu_config.json", dir);
    CHECK(file_has(path, "\"layers_per_ipu\": [\n    3,\n    7,"));
    CHECK_ERR(brg_ipu_config_save_pretrained(&a_, path), BRG_ERR_INVALID_ARG, "should be a directory, not a file");

    /* a hub id resolved offline from a Hugging Face cache laid out as huggingface_hub does */
    char cache[512];
    snprintf(cache, sizeof cache, "%s/hf-cache", test_tmp_dir());
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && mkdir -p '%s/models--Graphcore--gpt2-small-ipu/snapshots/%s' "
             "'%s/models--Graphcore--gpt2-small-ipu/refs' && printf %s > '%s/models--Graphcore--gpt2-small-ipu/refs/main' "
             "&& cp " FIX "/gpt2-small-ipu.json '%s/models--Graphcore--gpt2-small-ipu/snapshots/%s/ipu_config.json'",
             cache, cache, commit, cache, commit, cache, cache, commit);
    CHECK(system(cmd) == 0);
    setenv("HF_HUB_CACHE", cache, 1);
    CHECK_OK(brg_ipu_config_load("Graphcore/gpt2-small-ipu", &a_));
    CHECK(a_.layers_per_ipu.n == 4 && a_.gradient_accumulation_steps == 128);
    CHECK_ERR(brg_ipu_config_load("Graphcore/bert-base-ipu", &a_), BRG_ERR_NOT_FOUND, "Graphcore/bert-base-ipu");
    unsetenv("HF_HUB_CACHE");
}

int main(void) {
    test_bert_large();
    test_gpt2_small();
    test_other_published();
    test_invalid();
    test_saved_layout();
    test_float_repr();
    test_view_json();
    test_save_pretrained_and_hub();
    return test_finish();
}
