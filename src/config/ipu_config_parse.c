/* IPUConfig construction: defaults, IPUConfig(**dict) with upstream's fallbacks in upstream's
 * order (so the first error reported is the one optimum-graphcore would raise), and loading from
 * a file, a folder or the local Hugging Face cache. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/checkpoint.h"
#include "config/ipu_config_internal.h"
#include "io/json.h"

/* Keys upstream accepts and drops: those of a default transformers PretrainedConfig (4.29)
 * plus optimum's version stamp. Hub configs carry some of them (transformers_version,
 * optimum_version, model_type). */
static const char *const ignored_keys[] = {
    "return_dict", "output_hidden_states", "output_attentions", "torchscript", "torch_dtype", "use_bfloat16",
    "tf_legacy_loss", "pruned_heads", "tie_word_embeddings", "is_encoder_decoder", "is_decoder",
    "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
    "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "chunk_size_feed_forward",
    "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "architectures", "finetuning_task", "id2label", "label2id", "tokenizer_class", "prefix", "bos_token_id",
    "pad_token_id", "eos_token_id", "sep_token_id", "decoder_start_token_id", "task_specific_params",
    "problem_type", "_name_or_path", "transformers_version", "model_type", "optimum_version", NULL,
};

/* Still popped by upstream, with a warning when set. */
static const struct {
    const char *key;
    const char *warning;
} deprecated_keys[] = {
    {"sharded_execution_for_inference",
     "The \"sharded_execution_for_inference\" parameter is deprecated, sharded execution is always used during "
     "inference"},
    {"enable_half_first_order_momentum", "The \"enable_half_first_order_momentum\" parameter is deprecated"},
};

static bool in_list(const char *const *list, const char *key) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0) return true;
    return false;
}

static bool is_deprecated(const char *key) {
    for (size_t i = 0; i < sizeof deprecated_keys / sizeof deprecated_keys[0]; i++)
        if (strcmp(deprecated_keys[i].key, key) == 0) return true;
    return false;
}

void brg_ipu_config_init(brg_ipu_config *c) {
    memset(c, 0, sizeof *c);
    c->replication_factor = c->inference_replication_factor = c->gradient_accumulation_steps = 1;
    c->layers_per_ipu = (brg_ipu_list){.present = true, .n = 1, .v = {-1}};
    c->inference_layers_per_ipu = c->layers_per_ipu;
    c->ipus_per_replica = c->inference_ipus_per_replica = 1;
    c->matmul_proportion = (brg_ipu_proportion){.is_list = false, .n = 1, .v = {0.2}};
    c->inference_matmul_proportion = c->matmul_proportion;
    c->enable_half_partials = true;
    c->embedding_serialization_factor = c->inference_embedding_serialization_factor = 1;
    c->projection_serialization_factor = c->inference_projection_serialization_factor = 1;
    c->device_iterations = c->inference_device_iterations = 1;
    c->output_mode = BRG_OUTPUT_MODE_FINAL;
    snprintf(c->parallelize_kwargs, sizeof c->parallelize_kwargs, "{}");
    snprintf(c->inference_parallelize_kwargs, sizeof c->inference_parallelize_kwargs, "{}");
    c->mode = BRG_IPU_MODE_TRAINING;
}

/* ---- IPUConfig(**d) ----------------------------------------------------------------------- */

/* Python truthiness of a JSON value ("x if x else fallback"). */
static bool truthy(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != '\0';
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
    return true;
}

static const cJSON *item(const cJSON *d, const char *key) { return cJSON_GetObjectItemCaseSensitive(d, key); }

/* Sets `key` from d when present (null included: a non-optional attribute then fails its type
 * check, as upstream's typeguard does). */
static brg_status set_if_given(brg_ipu_config *c, const cJSON *d, const char *key) {
    const cJSON *v = item(d, key);
    return v ? cfg_set_value(c, cfg_attr_find(key), v) : BRG_OK;
}

static brg_status set_number(brg_ipu_config *c, const char *key, double x) {
    cJSON *n = cJSON_CreateNumber(x);
    if (!n) return brg_error(BRG_ERR_OOM, "out of memory setting %s", key);
    brg_status st = cfg_set_value(c, cfg_attr_find(key), n);
    cJSON_Delete(n);
    return st;
}

static bool all_wildcards(const brg_ipu_list *l) { return l->n == 1 && l->v[0] == -1; }

/* Steps 2-5 of upstream's __init__: layer lists, IPU counts and matmul proportions, each
 * falling back to what was already set. */
static brg_status set_pipeline(brg_ipu_config *c, const cJSON *d) {
    BRG_TRY(set_if_given(c, d, "layers_per_ipu"));
    const cJSON *ilpi = item(d, "inference_layers_per_ipu");
    if (truthy(ilpi)) BRG_TRY(cfg_set_value(c, cfg_attr_find("inference_layers_per_ipu"), ilpi));
    else c->inference_layers_per_ipu = c->layers_per_ipu;

    const cJSON *ipr = item(d, "ipus_per_replica");
    if (truthy(ipr)) BRG_TRY(cfg_set_value(c, cfg_attr_find("ipus_per_replica"), ipr));
    else BRG_TRY(set_number(c, "ipus_per_replica", c->layers_per_ipu.n));

    int64_t fallback = c->ipus_per_replica;
    if (fallback == c->layers_per_ipu.n || !all_wildcards(&c->inference_layers_per_ipu))
        fallback = c->inference_layers_per_ipu.n;
    const cJSON *iipr = item(d, "inference_ipus_per_replica");
    if (truthy(iipr)) BRG_TRY(cfg_set_value(c, cfg_attr_find("inference_ipus_per_replica"), iipr));
    else BRG_TRY(set_number(c, "inference_ipus_per_replica", (double)fallback));

    BRG_TRY(set_if_given(c, d, "matmul_proportion"));
    const cJSON *imp = item(d, "inference_matmul_proportion");
    if (truthy(imp)) {
        BRG_TRY(cfg_set_value(c, cfg_attr_find("inference_matmul_proportion"), imp));
    } else {
        c->inference_matmul_proportion = c->matmul_proportion;
        /* a per-IPU list only carries over when inference uses as many IPUs */
        if (c->matmul_proportion.is_list && c->matmul_proportion.n != c->inference_ipus_per_replica)
            c->inference_matmul_proportion = (brg_ipu_proportion){.is_list = false, .n = 1, .v = {0.2}};
    }
    return BRG_OK;
}

static brg_status set_remaining(brg_ipu_config *c, const cJSON *d) {
    static const char *const keys[] = {
        "replication_factor", "inference_replication_factor",
        "embedding_serialization_factor", "inference_embedding_serialization_factor",
        "serialized_embedding_splits_per_ipu", "inference_serialized_embedding_splits_per_ipu",
        "projection_serialization_factor", "inference_projection_serialization_factor",
        "serialized_projection_splits_per_ipu", "inference_serialized_projection_splits_per_ipu",
        NULL,
    };
    static const char *const later[] = {
        "gradient_accumulation_steps", "device_iterations", "inference_device_iterations",
        "optimizer_state_offchip", "replicated_tensor_sharding", "auto_loss_scaling", "enable_half_partials",
        "executable_cache_dir", "explicit_ir_inference", "recompute_checkpoint_every_layer", "output_mode", NULL,
    };
    /* an absent factor stays null until validation decides between factor and splits */
    c->embedding_serialization_factor = c->inference_embedding_serialization_factor = 0;
    c->projection_serialization_factor = c->inference_projection_serialization_factor = 0;
    for (int i = 0; keys[i]; i++) BRG_TRY(set_if_given(c, d, keys[i]));
    for (size_t i = 0; i < sizeof deprecated_keys / sizeof deprecated_keys[0]; i++)
        if (truthy(item(d, deprecated_keys[i].key))) cfg_warn(c, "%s", deprecated_keys[i].warning);
    for (int i = 0; later[i]; i++) BRG_TRY(set_if_given(c, d, later[i]));
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "inference_parallelize_kwargs" : "parallelize_kwargs";
        const cJSON *v = item(d, key);
        if (truthy(v)) BRG_TRY(cfg_set_value(c, cfg_attr_find(key), v));
    }
    return set_if_given(c, d, "execute_encoder_on_cpu_for_generation");
}

static brg_status reject_unknown(const cJSON *d) {
    strbuf b = {0};
    int n = 0;
    for (const cJSON *it = d->child; it; it = it->next) {
        if (cfg_attr_find(it->string) || is_deprecated(it->string) || in_list(ignored_keys, it->string)) continue;
        char r[160];
        sb_printf(&b, "%s%s=%s", n++ ? ", " : "", it->string, py_repr_json(it, r, sizeof r));
    }
    if (n == 0) return BRG_OK;
    char *text = sb_take(&b);
    brg_status st = brg_error(BRG_ERR_INVALID_ARG, "IPUConfig received unknown argument%s: %s", n > 1 ? "s" : "",
                              text ? text : "?");
    free(text);
    return st;
}

static brg_status from_object(const cJSON *d, brg_ipu_config *out) {
    if (!cJSON_IsObject(d)) return brg_error(BRG_ERR_INVALID_ARG, "an IPUConfig must be a JSON object");
    brg_ipu_config c;
    brg_ipu_config_init(&c);
    BRG_TRY(set_if_given(&c, d, "seed"));
    BRG_TRY(set_pipeline(&c, d));
    BRG_TRY(set_remaining(&c, d));
    BRG_TRY(reject_unknown(d));
    BRG_TRY(brg_ipu_config_validate(&c));
    *out = c;
    return BRG_OK;
}

brg_status brg_ipu_config_from_json(const char *json, const char *ctx, brg_ipu_config *cfg) {
    const char *name = ctx && *ctx ? ctx : "ipu_config";
    cJSON *d;
    BRG_TRY(brg_json_parse(json, strlen(json), name, &d));
    brg_status st = brg_json_check_duplicates(d, name);
    if (st == BRG_OK) st = from_object(d, cfg);
    cJSON_Delete(d);
    if (st != BRG_OK && ctx && *ctx) brg_error_wrap(st, "%s", ctx);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

static bool is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

brg_status brg_ipu_config_load(const char *ref, brg_ipu_config *cfg) {
    char path[4200];
    if (is_regular_file(ref)) {
        snprintf(path, sizeof path, "%s", ref);
    } else {
        char dir[4096];
        brg_status st = brg_hf_resolve(ref, dir, sizeof dir);
        if (st != BRG_OK) return brg_error_wrap(st, "IPU config '%s' is not a file, a folder or a cached hub id", ref);
        snprintf(path, sizeof path, "%s/ipu_config.json", dir);
        if (!is_regular_file(path))
            return brg_error(BRG_ERR_NOT_FOUND, "%s holds no ipu_config.json (looked for %s)", ref, path);
    }
    cJSON *d;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &d));
    brg_status st = from_object(d, cfg);
    cJSON_Delete(d);
    if (st != BRG_OK) return brg_error_wrap(st, "%s", path);
    return BRG_OK;
}
