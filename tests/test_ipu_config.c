/* IPUConfig: defaults, derived values, modes, validators and overrides, ported from
 * optimum-graphcore's tests/test_ipu_configuration.py (IPUConfigTester,
 * IPUConfigExecutionModeTester, IPUConfigAttributeValidationTester). */
#include "test_util.h"

static brg_ipu_config cfg_, other_;

/* IPUConfig(**json) */
static brg_status make(const char *json) { return brg_ipu_config_from_json(json, NULL, &cfg_); }

/* create_mode_ipu_config: the attribute under its mode name, then the mode set. */
static brg_status make_mode(const char *attr, const char *value, brg_ipu_mode mode) {
    char name[96], json[512];
    brg_ipu_config_mode_name(mode, attr, name, sizeof name);
    snprintf(json, sizeof json, "{\"%s\": %s}", name, value);
    brg_status st = make(json);
    cfg_.mode = mode;
    return st;
}

static bool list_is(const brg_ipu_list *l, int n, const int *v) {
    if (!l->present || l->n != n) return false;
    for (int i = 0; i < n; i++)
        if (l->v[i] != v[i]) return false;
    return true;
}

#define LIST_IS(l, ...) list_is((l), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

static void test_attribute_default_values(void) {
    CHECK_OK(make("{\"layers_per_ipu\": [1, 2, 3]}"));
    CHECK(cfg_.ipus_per_replica == 3);

    CHECK_OK(make("{\"layers_per_ipu\": [1, 2, 3, 4], \"matmul_proportion\": [0.1, 0.2, 0.3, 0.4]}"));
    CHECK(cfg_.inference_matmul_proportion.is_list && cfg_.inference_matmul_proportion.n == 4);
    CHECK(cfg_.inference_matmul_proportion.v[0] == 0.1 && cfg_.inference_matmul_proportion.v[3] == 0.4);

    CHECK_OK(make("{\"layers_per_ipu\": [1, 2, 3, 4], \"matmul_proportion\": [0.1, 0.2, 0.3, 0.4], "
                  "\"inference_layers_per_ipu\": [3, 7]}"));
    CHECK(!cfg_.inference_matmul_proportion.is_list && cfg_.inference_matmul_proportion.v[0] == 0.2);
    CHECK(cfg_.inference_ipus_per_replica == 2);

    CHECK_OK(make("{\"ipus_per_replica\": 10}"));
    CHECK(cfg_.inference_ipus_per_replica == 10);

    CHECK_OK(make("{\"ipus_per_replica\": 10, \"inference_layers_per_ipu\": [1, 2, 3]}"));
    CHECK(cfg_.inference_ipus_per_replica == 3);

    CHECK_OK(make("{}"));
    CHECK(cfg_.projection_serialization_factor == 1 && cfg_.inference_projection_serialization_factor == 1);
    CHECK(cfg_.embedding_serialization_factor == 1 && cfg_.inference_embedding_serialization_factor == 1);

    /* falsy values fall back like Python's "x if x else ..." */
    CHECK_OK(make("{\"layers_per_ipu\": [2, 2], \"ipus_per_replica\": 0, \"inference_layers_per_ipu\": [], "
                  "\"inference_matmul_proportion\": 0.0}"));
    CHECK(cfg_.ipus_per_replica == 2 && LIST_IS(&cfg_.inference_layers_per_ipu, 2, 2));
    CHECK(cfg_.inference_matmul_proportion.v[0] == 0.2);
    /* splits given: the factor stays null */
    CHECK_OK(make("{\"ipus_per_replica\": 2, \"serialized_embedding_splits_per_ipu\": [1, 1]}"));
    CHECK(cfg_.embedding_serialization_factor == 0 && cfg_.inference_embedding_serialization_factor == 1);
}

static void test_defaults(void) {
    brg_ipu_config d;
    brg_ipu_config_init(&d);
    CHECK_OK(make("{}"));
    CHECK(brg_ipu_config_equal(&d, &cfg_));
    CHECK(d.replication_factor == 1 && d.inference_replication_factor == 1 && d.gradient_accumulation_steps == 1);
    CHECK(LIST_IS(&d.layers_per_ipu, -1) && LIST_IS(&d.inference_layers_per_ipu, -1));
    CHECK(d.ipus_per_replica == 1 && d.inference_ipus_per_replica == 1);
    CHECK(!d.optimizer_state_offchip && !d.replicated_tensor_sharding && d.enable_half_partials);
    CHECK(!d.matmul_proportion.is_list && d.matmul_proportion.v[0] == 0.2);
    CHECK(!d.serialized_embedding_splits_per_ipu.present && !d.serialized_projection_splits_per_ipu.present);
    CHECK(!d.recompute_checkpoint_every_layer && d.device_iterations == 1 && d.inference_device_iterations == 1);
    CHECK(d.output_mode == BRG_OUTPUT_MODE_FINAL && !d.has_seed && !d.auto_loss_scaling);
    CHECK(strcmp(d.executable_cache_dir, "") == 0 && !d.explicit_ir_inference);
    CHECK(strcmp(d.parallelize_kwargs, "{}") == 0 && strcmp(d.inference_parallelize_kwargs, "{}") == 0);
    CHECK(!d.execute_encoder_on_cpu_for_generation && d.mode == BRG_IPU_MODE_TRAINING && d.n_warnings == 0);
    int n = 0;
    while (brg_ipu_config_attributes[n]) n++;
    CHECK(n == 31);
}

static void test_batch_size_factor(void) {
    CHECK_OK(make("{\"replication_factor\": 4, \"gradient_accumulation_steps\": 8, \"device_iterations\": 2, "
                  "\"inference_replication_factor\": 2, \"inference_device_iterations\": 5, \"output_mode\": \"sum\"}"));
    int64_t f = 0;
    CHECK_OK(brg_ipu_config_batch_size_factor(&cfg_, BRG_IPU_MODE_TRAINING, &f));
    CHECK(f == 4 * 8 * 2);
    CHECK_OK(brg_ipu_config_batch_size_factor(&cfg_, BRG_IPU_MODE_INFERENCE, &f));
    CHECK(f == 2 * 1 * 5);
    brg_ipu_view v;
    brg_ipu_config_view(&cfg_, BRG_IPU_MODE_INFERENCE, &v);
    CHECK(v.gradient_accumulation_steps == 1 && v.output_mode == BRG_OUTPUT_MODE_ALL && v.replication_factor == 2);
    brg_ipu_config_view(&cfg_, BRG_IPU_MODE_TRAINING, &v);
    CHECK(v.gradient_accumulation_steps == 8 && v.output_mode == BRG_OUTPUT_MODE_SUM && v.device_iterations == 2);
}

static void test_mode_set(void) {
    CHECK_OK(make("{}"));
    CHECK(cfg_.mode == BRG_IPU_MODE_TRAINING);
    brg_ipu_config_train(&cfg_);
    CHECK(cfg_.mode == BRG_IPU_MODE_TRAINING);
    brg_ipu_config_eval(&cfg_);
    CHECK(cfg_.mode == BRG_IPU_MODE_INFERENCE);
    CHECK_ERR(brg_ipu_config_set_mode(&cfg_, "invalid"), BRG_ERR_INVALID_ARG, "`IPUConfig` mode can only take");
    CHECK(cfg_.mode == BRG_IPU_MODE_INFERENCE);
    CHECK_OK(brg_ipu_config_set_mode(&cfg_, "training"));
    CHECK(cfg_.mode == BRG_IPU_MODE_TRAINING);
    CHECK(strcmp(brg_ipu_mode_name(BRG_IPU_MODE_INFERENCE), "inference") == 0);
}

static void test_attr_mode_retrieval(void) {
    for (int m = 0; m < 2; m++) {
        brg_ipu_mode mode = (brg_ipu_mode)m;
        brg_ipu_view v;
        CHECK_OK(make_mode("layers_per_ipu", "[1, 2, 3, 4]", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(LIST_IS(v.layers_per_ipu, 1, 2, 3, 4));
        CHECK_OK(make_mode("matmul_proportion", "0.6", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(!v.matmul_proportion->is_list && v.matmul_proportion->v[0] == 0.6);
        CHECK_OK(make_mode("ipus_per_replica", "4", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(v.ipus_per_replica == 4);
        CHECK_OK(make_mode("serialized_projection_splits_per_ipu", "[4]", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(LIST_IS(v.serialized_projection_splits_per_ipu, 4) && v.projection_serialization_factor == 0);
        CHECK_OK(make_mode("serialized_embedding_splits_per_ipu", "[4]", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(LIST_IS(v.serialized_embedding_splits_per_ipu, 4));
        CHECK_OK(make_mode("projection_serialization_factor", "4", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(v.projection_serialization_factor == 4);
        CHECK_OK(make_mode("embedding_serialization_factor", "4", mode));
        brg_ipu_config_view(&cfg_, mode, &v);
        CHECK(v.embedding_serialization_factor == 4);
        /* the other mode keeps its own value */
        brg_ipu_config_view(&cfg_, mode ? BRG_IPU_MODE_TRAINING : BRG_IPU_MODE_INFERENCE, &v);
        CHECK(v.embedding_serialization_factor == 1);
    }
}

/* test_contents_geq_value_validator: the floor value passes, one below fails. */
static void geq_case(brg_ipu_mode mode, const char *attr, const char *ok, const char *bad) {
    char name[96], needle[160];
    brg_ipu_config_mode_name(mode, attr, name, sizeof name);
    CHECK_OK(make("{}"));
    cfg_.mode = mode;
    CHECK_OK(brg_ipu_config_set(&cfg_, name, ok));
    other_ = cfg_;
    snprintf(needle, sizeof needle, "`IPUConfig` attribute `%s` must ", name);
    CHECK_ERR(brg_ipu_config_set(&cfg_, name, bad), BRG_ERR_INVALID_ARG, needle);
    CHECK(strstr(brg_last_error(), ">=") != NULL);
    CHECK(brg_ipu_config_equal(&cfg_, &other_)); /* a refused value leaves the config as it was */
}

static void test_contents_geq_value_validator(void) {
    for (int m = 0; m < 2; m++) {
        brg_ipu_mode mode = (brg_ipu_mode)m;
        geq_case(mode, "layers_per_ipu", "[-1]", "[-2]");
        geq_case(mode, "matmul_proportion", "[0.2, 0.3, 0.0, 0.4]", "[0.2, 0.3, -1.0, 0.4]");
        geq_case(mode, "replication_factor", "1", "0");
        geq_case(mode, "gradient_accumulation_steps", "1", "0");
        geq_case(mode, "ipus_per_replica", "1", "0");
        geq_case(mode, "embedding_serialization_factor", "1", "0");
        geq_case(mode, "device_iterations", "1", "0");
        geq_case(mode, "projection_serialization_factor", "1", "0");
    }
    CHECK_ERR(make("{\"replication_factor\": 0}"), BRG_ERR_INVALID_ARG,
              "`IPUConfig` attribute `replication_factor` must be >= 1. You provided value=0");
    CHECK_ERR(make("{\"layers_per_ipu\": [4, -2]}"), BRG_ERR_INVALID_ARG,
              "`IPUConfig` attribute `layers_per_ipu` must have all elements >= -1. You provided value=[4, -2]");
}

static void test_output_mode_validator(void) {
    CHECK_ERR(make("{\"output_mode\": \"invalid\"}"), BRG_ERR_INVALID_ARG,
              "`IPUConfig` attribute `output_mode` can only take values in ('all', 'sum', 'final', 'default'). "
              "You provided: value='invalid'");
    const char *modes[] = {"all", "sum", "final", "default"};
    for (int i = 0; i < 4; i++) {
        char json[64];
        snprintf(json, sizeof json, "{\"output_mode\": \"%s\"}", modes[i]);
        CHECK_OK(make(json));
        CHECK(strcmp(brg_output_mode_name(cfg_.output_mode), modes[i]) == 0);
    }
}

static void test_serialized_splits_per_ipu_validator(void) {
    for (int m = 0; m < 2; m++)
        for (int emb = 0; emb < 2; emb++) {
            char attr[64], name[96], needle[256];
            snprintf(attr, sizeof attr, "serialized_%s_splits_per_ipu", emb ? "embedding" : "projection");
            brg_ipu_config_mode_name((brg_ipu_mode)m, attr, name, sizeof name);
            CHECK_OK(make("{}"));
            cfg_.mode = (brg_ipu_mode)m;
            snprintf(needle, sizeof needle, "`IPUConfig` attribute `%s` must have all elements >= 0", name);
            CHECK_ERR(brg_ipu_config_set(&cfg_, name, "[0, 2, 2, -1]"), BRG_ERR_INVALID_ARG, needle);
            snprintf(needle, sizeof needle, "`IPUConfig` attribute `%s=[0, 0]` must have atleast 1 split", name);
            CHECK_ERR(brg_ipu_config_set(&cfg_, name, "[0, 0]"), BRG_ERR_INVALID_ARG, needle);
            snprintf(needle, sizeof needle, "`IPUConfig` attribute `%s=[0, 3, 0, 2]` must have its splits on", name);
            CHECK_ERR(brg_ipu_config_set(&cfg_, name, "[0, 3, 0, 2]"), BRG_ERR_INVALID_ARG, needle);
            CHECK_OK(brg_ipu_config_set(&cfg_, name, "[0, 3, 1, 0]")); /* leading zeros are fine */
            CHECK_OK(brg_ipu_config_set(&cfg_, name, "null"));
        }
}

static void test_validate_ipu_config(void) {
    for (int m = 0; m < 2; m++) {
        brg_ipu_mode mode = (brg_ipu_mode)m;
        const char *p = mode ? "inference_" : "";
        char json[512], needle[256];
        snprintf(json, sizeof json, "{\"%sipus_per_replica\": 4, \"%smatmul_proportion\": [0.2, 0.2, 0.2, 0.2, 0.2]}",
                 p, p);
        CHECK_ERR(make(json), BRG_ERR_INVALID_ARG, "matmul_proportion=[0.2, 0.2, 0.2, 0.2, 0.2] should use the same number");
        snprintf(needle, sizeof needle, "%sipus_per_replica=4.", p);
        CHECK(strstr(brg_last_error(), needle) != NULL);

        snprintf(json, sizeof json, "{\"%sipus_per_replica\": 4, \"%slayers_per_ipu\": [2, 2, 2, 2, 2]}", p, p);
        CHECK_ERR(make(json), BRG_ERR_INVALID_ARG, "layers_per_ipu=[2, 2, 2, 2, 2] should use the same number");

        for (int emb = 0; emb < 2; emb++) {
            const char *layer = emb ? "embedding" : "projection";
            snprintf(json, sizeof json, "{\"%s%s_serialization_factor\": 2, \"%sserialized_%s_splits_per_ipu\": [1, 1]}",
                     p, layer, p, layer);
            snprintf(needle, sizeof needle, "Only one of `%s%s_serialization_factor` and `%sserialized_%s_splits_per_ipu`",
                     p, layer, p, layer);
            CHECK_ERR(make(json), BRG_ERR_INVALID_ARG, needle);
            snprintf(json, sizeof json, "{\"%sipus_per_replica\": 8, \"%sserialized_%s_splits_per_ipu\": [0, 0, 1, 1]}", p,
                     p, layer);
            snprintf(needle, sizeof needle, "%sserialized_%s_splits_per_ipu=[0, 0, 1, 1] should use the same number of IPUs as",
                     p, layer);
            CHECK_ERR(make(json), BRG_ERR_INVALID_ARG, needle);
        }
    }
    /* a wildcard defers the length check to placement */
    CHECK_OK(make("{\"ipus_per_replica\": 4, \"layers_per_ipu\": [1, -1]}"));
}

static void test_types_and_keys(void) {
    CHECK_ERR(make("{\"gradient_accumulation_steps\": \"16\"}"), BRG_ERR_INVALID_ARG,
              "`IPUConfig` attribute `gradient_accumulation_steps` must be an int. You provided value='16'");
    CHECK_ERR(make("{\"enable_half_partials\": 1}"), BRG_ERR_INVALID_ARG, "`enable_half_partials` must be a bool");
    CHECK_ERR(make("{\"layers_per_ipu\": [1.5, 2]}"), BRG_ERR_INVALID_ARG, "`layers_per_ipu` must be a list of ints");
    CHECK_ERR(make("{\"layers_per_ipu\": null}"), BRG_ERR_INVALID_ARG, "value=None");
    CHECK_ERR(make("{\"matmul_proportion\": \"0.2\"}"), BRG_ERR_INVALID_ARG, "a float or a list of floats");
    CHECK_ERR(make("{\"parallelize_kwargs\": [1]}"), BRG_ERR_INVALID_ARG, "`parallelize_kwargs` must be an object");
    CHECK_ERR(make("{\"replication_factor\": {\"pod4\": 1, \"pod16\": 4, \"default\": 1}}"), BRG_ERR_INVALID_ARG,
              "`replication_factor` has a per-pod-type value {'pod4': 1, 'pod16': 4, 'default': 1}");
    CHECK(strstr(brg_last_error(), "write one value instead, e.g. \"replication_factor\": 1") != NULL);
    CHECK_ERR(make("{\"layer_per_ipu\": [2, 2], \"foo\": \"x\", \"transformers_version\": \"4.29.2\"}"),
              BRG_ERR_INVALID_ARG, "IPUConfig received unknown arguments: layer_per_ipu=[2, 2], foo='x'");
    CHECK_ERR(make("[1]"), BRG_ERR_INVALID_ARG, "must be a JSON object");
    CHECK_ERR(make("{\"seed\": 1, \"seed\": 2}"), BRG_ERR_FORMAT, "seed");
    CHECK_OK(make("{\"transformers_version\": \"4.29.2\", \"optimum_version\": \"1.6.1\", \"model_type\": \"\", "
                  "\"_name_or_path\": \"x\", \"seed\": 7, \"parallelize_kwargs\": {\"b\": 1, \"a\": true}}"));
    CHECK(cfg_.has_seed && cfg_.seed == 7 && cfg_.n_warnings == 0);
    CHECK(strcmp(cfg_.parallelize_kwargs, "{\"a\":true,\"b\":1}") == 0);

    CHECK_OK(make("{\"sharded_execution_for_inference\": true, \"enable_half_first_order_momentum\": false}"));
    CHECK(cfg_.n_warnings == 1 && strstr(cfg_.warnings[0], "\"sharded_execution_for_inference\" parameter is deprecated"));
    CHECK_OK(make("{\"enable_half_first_order_momentum\": true, \"replicated_tensor_sharding\": true}"));
    CHECK(cfg_.n_warnings == 2 && strstr(cfg_.warnings[0], "\"enable_half_first_order_momentum\" parameter is deprecated"));
    CHECK(strstr(cfg_.warnings[1], "`replicated_tensor_sharding` is not used when `replication_factor=1`"));
    CHECK_ERR(brg_ipu_config_set(&cfg_, "no_such_attribute", "1"), BRG_ERR_INVALID_ARG, "no_such_attribute");
    CHECK_ERR(make("{\"ipus_per_replica\": 100000}"), BRG_ERR_INVALID_ARG, "`ipus_per_replica` must be <= 256");
}

static void test_update_from_string(void) {
    CHECK_OK(make("{}"));
    CHECK_OK(brg_ipu_config_update_from_string(
        &cfg_, "device_iterations=4,output_mode=all,layers_per_ipu=[1 2 3 4],ipus_per_replica=4,"
               "matmul_proportion=0.3,enable_half_partials=no,executable_cache_dir=disabled,"
               "gradient_accumulation_steps= 1_000 ,recompute_checkpoint_every_layer=Y"));
    CHECK(cfg_.device_iterations == 4 && cfg_.output_mode == BRG_OUTPUT_MODE_ALL);
    CHECK(LIST_IS(&cfg_.layers_per_ipu, 1, 2, 3, 4) && cfg_.ipus_per_replica == 4);
    CHECK(cfg_.matmul_proportion.v[0] == 0.3 && !cfg_.enable_half_partials);
    CHECK(strcmp(cfg_.executable_cache_dir, "disabled") == 0 && cfg_.gradient_accumulation_steps == 1000);
    CHECK(cfg_.recompute_checkpoint_every_layer);
    /* derived values are not recomputed (as upstream): inference keeps its own */
    CHECK(LIST_IS(&cfg_.inference_layers_per_ipu, -1) && cfg_.inference_ipus_per_replica == 1);

    other_ = cfg_;
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "device_iterations=2,foo=1"), BRG_ERR_INVALID_ARG,
              "Key foo isn't in the original config dict");
    CHECK(brg_ipu_config_equal(&cfg_, &other_) && cfg_.device_iterations == 4); /* all or nothing */
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "enable_half_partials=maybe"), BRG_ERR_INVALID_ARG,
              "Can't derive true or false from maybe (key enable_half_partials)");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "device_iterations=1.5"), BRG_ERR_INVALID_ARG,
              "invalid literal for int() with base 10: '1.5'");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "seed=3"), BRG_ERR_INVALID_ARG,
              "You can only update int, float, bool, list or string values in the config, got 3 for key seed");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "parallelize_kwargs={}"), BRG_ERR_INVALID_ARG,
              "You can only update int, float, bool, list or string values");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "matmul_proportion=[0.1 0.2 0.3 0.4]"), BRG_ERR_INVALID_ARG,
              "could not convert string to float: '[0.1 0.2 0.3 0.4]'");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "device_iterations=0"), BRG_ERR_INVALID_ARG,
              "`IPUConfig` attribute `device_iterations` must be >= 1. You provided value=0");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "output_mode=last"), BRG_ERR_INVALID_ARG, "value='last'");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "layers_per_ipu=[3 3]"), BRG_ERR_INVALID_ARG,
              "layers_per_ipu=[3, 3] should use the same number of IPUs as ipus_per_replica=4.");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "layers_per_ipu=[1,2]"), BRG_ERR_INVALID_ARG, "key=value");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "a=b=c"), BRG_ERR_INVALID_ARG, "key=value");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, ""), BRG_ERR_INVALID_ARG, "empty item");
    CHECK_ERR(brg_ipu_config_update_from_string(&cfg_, "device_iterations=2,"), BRG_ERR_INVALID_ARG, "empty item");
    CHECK(brg_ipu_config_equal(&cfg_, &other_));
    /* a list keeps its type; then the pair changes together */
    CHECK_OK(brg_ipu_config_update_from_string(&cfg_, "layers_per_ipu=[3 3],ipus_per_replica=2"));
    CHECK(LIST_IS(&cfg_.layers_per_ipu, 3, 3) && cfg_.ipus_per_replica == 2);
}

static void test_set_and_view_names(void) {
    char buf[96];
    CHECK(strcmp(brg_ipu_config_mode_name(BRG_IPU_MODE_INFERENCE, "layers_per_ipu", buf, sizeof buf),
                 "inference_layers_per_ipu") == 0);
    CHECK(strcmp(brg_ipu_config_mode_name(BRG_IPU_MODE_INFERENCE, "seed", buf, sizeof buf), "seed") == 0);
    CHECK(strcmp(brg_ipu_config_mode_name(BRG_IPU_MODE_TRAINING, "matmul_proportion", buf, sizeof buf),
                 "matmul_proportion") == 0);
    CHECK_OK(make("{}"));
    CHECK_OK(brg_ipu_config_set(&cfg_, "matmul_proportion", "[0.1, 0.2]")); /* no cross check on set */
    CHECK(cfg_.matmul_proportion.is_list && cfg_.matmul_proportion.n == 2);
    CHECK_ERR(brg_ipu_config_validate(&cfg_), BRG_ERR_INVALID_ARG,
              "matmul_proportion=[0.1, 0.2] should use the same number of IPUs as ipus_per_replica=1.");
    CHECK_ERR(brg_ipu_config_set(&cfg_, "seed", "[1"), BRG_ERR_FORMAT, "seed");
}

int main(void) {
    test_attribute_default_values();
    test_defaults();
    test_batch_size_factor();
    test_mode_set();
    test_attr_mode_retrieval();
    test_contents_geq_value_validator();
    test_output_mode_validator();
    test_serialized_splits_per_ipu_validator();
    test_validate_ipu_config();
    test_types_and_keys();
    test_update_from_string();
    test_set_and_view_names();
    return test_finish();
}
