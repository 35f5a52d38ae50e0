/* brg_generation_config: transformers' defaults, the model's special tokens, generation_config.json
 * and the checks GenerationConfig.validate and generate() make. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/generate.h"
#include "brigade/precision.h"
#include "brigade/gpt2.h"
#include "brigade/t5.h"
#include "io/json.h"

void brg_generation_config_default(brg_generation_config *c) {
    memset(c, 0, sizeof *c);
    c->max_new_tokens = -1;
    c->max_length = -1;
    c->num_beams = 1;
    c->temperature = 1.0f;
    c->top_k = 50;
    c->top_p = 1.0f;
    c->typical_p = 1.0f;
    c->repetition_penalty = 1.0f;
    c->length_penalty = 1.0f;
    c->early_stopping = BRG_EARLY_STOPPING_FALSE;
    c->num_return_sequences = 1;
    c->pad_token_id = c->bos_token_id = c->decoder_start_token_id = -1;
    c->use_cache = true;
    c->compute_dtype = BRG_DTYPE_F32;
}

static void set_eos(brg_generation_config *c, const int64_t *ids, int n) {
    c->n_eos = 0;
    for (int i = 0; i < n && c->n_eos < BRG_GEN_MAX_EOS; i++)
        if (ids[i] >= 0 && ids[i] <= INT32_MAX) c->eos_token_ids[c->n_eos++] = (int32_t)ids[i];
}

static int32_t token_or_none(int64_t id) { return id >= 0 && id <= INT32_MAX ? (int32_t)id : -1; }

/* GenerationConfig.from_model_config: the special tokens of config.json. Ids outside the
 * vocabulary (GPT-2's default 50256 in a byte-level model) can never be generated and are
 * dropped. */
static void model_tokens(const brg_model *m, brg_generation_config *c) {
    const char *arch = m && m->ops ? m->ops->architecture : "";
    if (strncmp(arch, "GPT2", 4) == 0) {
        const brg_gpt2_config *g = m->config;
        c->bos_token_id = token_or_none(g->bos_token_id);
        c->pad_token_id = token_or_none(g->pad_token_id);
        set_eos(c, &g->eos_token_id, g->eos_token_id >= 0);
    } else if (strncmp(arch, "T5", 2) == 0) {
        const brg_t5_config *t = m->config;
        c->pad_token_id = token_or_none(t->pad_token_id);
        c->decoder_start_token_id = token_or_none(t->decoder_start_token_id);
        set_eos(c, t->eos_token_ids, t->n_eos);
    }
    const int64_t V = m ? m->vocab_size : INT32_MAX;
    int k = 0;
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] < V) c->eos_token_ids[k++] = c->eos_token_ids[i];
    c->n_eos = k;
    if (c->bos_token_id >= V) c->bos_token_id = -1;
    if (c->pad_token_id >= V) c->pad_token_id = -1;
    if (c->decoder_start_token_id >= V) c->decoder_start_token_id = -1;
}

brg_status brg_generation_config_for_model(const brg_model *model, const char *dir, brg_generation_config *cfg) {
    brg_generation_config_default(cfg);
    model_tokens(model, cfg);
    if (!dir) return BRG_OK;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/generation_config.json", dir) >= (int)sizeof path)
        return brg_error(BRG_ERR_INVALID_ARG, "model folder path too long: %s", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return BRG_OK; /* no file: the model's defaults */
    return brg_generation_config_update_from_file(cfg, path);
}

/* An id field: a non-negative integer, or null (unset). */
static brg_status get_token(const cJSON *j, const char *ctx, const char *key, int32_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) return BRG_OK;
    if (cJSON_IsNull(v)) {
        *out = -1;
        return BRG_OK;
    }
    int64_t id;
    if (!brg_json_integer(v, &id) || id < 0 || id > INT32_MAX)
        return brg_error(BRG_ERR_FORMAT, "%s: '%s' must be a token id (a non-negative integer) or null", ctx, key);
    *out = (int32_t)id;
    return BRG_OK;
}

/* eos_token_id: an id, a list of ids, or null. */
static brg_status get_eos(const cJSON *j, const char *ctx, brg_generation_config *c) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    if (!v) return BRG_OK;
    if (cJSON_IsNull(v)) {
        c->n_eos = 0;
        return BRG_OK;
    }
    int64_t ids[BRG_GEN_MAX_EOS];
    int n = 0;
    if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) > BRG_GEN_MAX_EOS)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: more than %d eos_token_id values", ctx, BRG_GEN_MAX_EOS);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!brg_json_integer(e, &ids[n]) || ids[n] < 0 || ids[n] > INT32_MAX)
                return brg_error(BRG_ERR_FORMAT, "%s: eos_token_id must hold token ids", ctx);
            n++;
        }
    } else if (!brg_json_integer(v, &ids[n++]) || ids[0] < 0 || ids[0] > INT32_MAX) {
        return brg_error(BRG_ERR_FORMAT, "%s: eos_token_id must be a token id, a list of them or null", ctx);
    }
    set_eos(c, ids, n);
    return BRG_OK;
}

static brg_status get_early_stopping(const cJSON *j, const char *ctx, brg_early_stopping *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "early_stopping");
    if (!v || cJSON_IsNull(v)) return BRG_OK;
    if (cJSON_IsBool(v)) *out = cJSON_IsTrue(v) ? BRG_EARLY_STOPPING_TRUE : BRG_EARLY_STOPPING_FALSE;
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "never") == 0) *out = BRG_EARLY_STOPPING_NEVER;
    else return brg_error(BRG_ERR_FORMAT, "%s: early_stopping must be true, false or \"never\"", ctx);
    return BRG_OK;
}

/* Settings that change what generate() returns and that brigade does not implement: refused
 * unless null or at the value that turns them off. */
static const struct {
    const char *key;
    double off; /* NAN: only null (or false) is off */
} unsupported[] = {
    {"min_p", NAN},           {"top_h", NAN},           {"epsilon_cutoff", 0},
    {"eta_cutoff", 0},        {"encoder_repetition_penalty", 1}, {"encoder_no_repeat_ngram_size", 0},
    {"bad_words_ids", NAN},   {"force_words_ids", NAN}, {"constraints", NAN},
    {"sequence_bias", NAN},   {"forced_bos_token_id", NAN}, {"forced_eos_token_id", NAN},
    {"suppress_tokens", NAN}, {"begin_suppress_tokens", NAN}, {"exponential_decay_length_penalty", NAN},
    {"renormalize_logits", NAN}, {"remove_invalid_values", NAN}, {"num_beam_groups", 1},
    {"diversity_penalty", 0}, {"penalty_alpha", NAN}, {"guidance_scale", 1},
    {"dola_layers", NAN},     {"watermarking_config", NAN}, {"token_healing", NAN},
    {"stop_strings", NAN},
};

static brg_status check_unsupported(const cJSON *j, const char *ctx) {
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, unsupported[i].key);
        if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) continue;
        if (cJSON_IsNumber(v) && v->valuedouble == unsupported[i].off) continue;
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: '%s' is set and brigade's generate does not implement it", ctx,
                         unsupported[i].key);
    }
    return BRG_OK;
}

static brg_status update(const cJSON *j, const char *ctx, brg_generation_config *c) {
    if (!cJSON_IsObject(j)) return brg_error(BRG_ERR_FORMAT, "%s: not a JSON object", ctx);
    BRG_TRY(check_unsupported(j, ctx));
    BRG_TRY(brg_json_get_int(j, ctx, "max_length", false, c->max_length, &c->max_length));
    BRG_TRY(brg_json_get_int(j, ctx, "max_new_tokens", false, c->max_new_tokens, &c->max_new_tokens));
    BRG_TRY(brg_json_get_int(j, ctx, "min_length", false, c->min_length, &c->min_length));
    BRG_TRY(brg_json_get_int(j, ctx, "min_new_tokens", false, c->min_new_tokens, &c->min_new_tokens));
    BRG_TRY(brg_json_get_bool(j, ctx, "do_sample", false, c->do_sample, &c->do_sample));
    BRG_TRY(brg_json_get_int(j, ctx, "num_beams", false, c->num_beams, &c->num_beams));
    BRG_TRY(brg_json_get_float(j, ctx, "temperature", false, c->temperature, &c->temperature));
    BRG_TRY(brg_json_get_int(j, ctx, "top_k", false, c->top_k, &c->top_k));
    BRG_TRY(brg_json_get_float(j, ctx, "top_p", false, c->top_p, &c->top_p));
    BRG_TRY(brg_json_get_float(j, ctx, "typical_p", false, c->typical_p, &c->typical_p));
    BRG_TRY(brg_json_get_float(j, ctx, "repetition_penalty", false, c->repetition_penalty, &c->repetition_penalty));
    BRG_TRY(brg_json_get_int(j, ctx, "no_repeat_ngram_size", false, c->no_repeat_ngram_size,
                             &c->no_repeat_ngram_size));
    BRG_TRY(brg_json_get_float(j, ctx, "length_penalty", false, c->length_penalty, &c->length_penalty));
    BRG_TRY(get_early_stopping(j, ctx, &c->early_stopping));
    BRG_TRY(brg_json_get_int(j, ctx, "num_return_sequences", false, c->num_return_sequences,
                             &c->num_return_sequences));
    BRG_TRY(get_eos(j, ctx, c));
    BRG_TRY(get_token(j, ctx, "pad_token_id", &c->pad_token_id));
    BRG_TRY(get_token(j, ctx, "bos_token_id", &c->bos_token_id));
    BRG_TRY(get_token(j, ctx, "decoder_start_token_id", &c->decoder_start_token_id));
    BRG_TRY(brg_json_get_bool(j, ctx, "use_cache", false, c->use_cache, &c->use_cache));
    return BRG_OK;
}

brg_status brg_generation_config_update_from_file(brg_generation_config *cfg, const char *path) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, 16u << 20, &j));
    brg_generation_config c = *cfg;
    brg_status st = update(j, path, &c);
    cJSON_Delete(j);
    if (st == BRG_OK) *cfg = c;
    return st;
}

brg_status brg_generation_config_update_from_json(brg_generation_config *cfg, const char *text, size_t len,
                                                  const char *ctx) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_parse(text, len, ctx, &j));
    brg_generation_config c = *cfg;
    brg_status st = brg_json_check_duplicates(j, ctx);
    if (st == BRG_OK) st = update(j, ctx, &c);
    cJSON_Delete(j);
    if (st == BRG_OK) *cfg = c;
    return st;
}

static brg_status check_token(const char *name, int32_t id, const brg_model *m) {
    if (m && id >= m->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG, "%s %d is outside the model's vocabulary [0, %lld)", name, (int)id,
                         (long long)m->vocab_size);
    return BRG_OK;
}

brg_status brg_generation_config_validate(const brg_generation_config *c, const brg_model *m) {
    BRG_TRY(brg_compute_dtype_check(c->compute_dtype));
    if (c->max_new_tokens == 0 || c->max_new_tokens < -1)
        return brg_error(BRG_ERR_INVALID_ARG, "max_new_tokens %lld: give at least 1", (long long)c->max_new_tokens);
    if (c->max_length == 0 || c->max_length < -1)
        return brg_error(BRG_ERR_INVALID_ARG, "max_length %lld: give at least 1", (long long)c->max_length);
    if (c->min_length < 0 || c->min_new_tokens < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "min_length and min_new_tokens cannot be negative");
    if (c->num_beams < 1 || c->num_beams > 1024)
        return brg_error(BRG_ERR_INVALID_ARG, "num_beams %lld: give 1 to 1024", (long long)c->num_beams);
    if (c->num_return_sequences < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "num_return_sequences %lld: give at least 1",
                         (long long)c->num_return_sequences);
    if (c->num_beams == 1 && !c->do_sample && c->num_return_sequences > 1)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "num_return_sequences %lld needs sampling or beam search (greedy search returns one)",
                         (long long)c->num_return_sequences);
    if (c->num_beams > 1 && c->num_return_sequences > c->num_beams)
        return brg_error(BRG_ERR_INVALID_ARG, "num_return_sequences %lld is more than num_beams %lld",
                         (long long)c->num_return_sequences, (long long)c->num_beams);
    if (c->do_sample && !(c->temperature > 0 && isfinite(c->temperature)))
        return brg_error(BRG_ERR_INVALID_ARG, "temperature %g: give a positive number", c->temperature);
    if (c->top_k < 0) return brg_error(BRG_ERR_INVALID_ARG, "top_k %lld cannot be negative", (long long)c->top_k);
    if (!(c->top_p >= 0 && c->top_p <= 1))
        return brg_error(BRG_ERR_INVALID_ARG, "top_p %g: give a number in [0, 1]", c->top_p);
    if (!(c->typical_p > 0 && c->typical_p <= 1))
        return brg_error(BRG_ERR_INVALID_ARG, "typical_p %g: give a number in (0, 1]", c->typical_p);
    if (!(c->repetition_penalty > 0 && isfinite(c->repetition_penalty)))
        return brg_error(BRG_ERR_INVALID_ARG, "repetition_penalty %g: give a positive number", c->repetition_penalty);
    if (c->no_repeat_ngram_size < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "no_repeat_ngram_size %lld cannot be negative",
                         (long long)c->no_repeat_ngram_size);
    if (!isfinite(c->length_penalty))
        return brg_error(BRG_ERR_INVALID_ARG, "length_penalty %g: give a finite number", c->length_penalty);
    if (c->n_eos < 0 || c->n_eos > BRG_GEN_MAX_EOS) return brg_error(BRG_ERR_INVALID_ARG, "n_eos %d", c->n_eos);
    for (int i = 0; i < c->n_eos; i++) {
        if (c->eos_token_ids[i] < 0) return brg_error(BRG_ERR_INVALID_ARG, "eos_token_id %d", (int)c->eos_token_ids[i]);
        BRG_TRY(check_token("eos_token_id", c->eos_token_ids[i], m));
    }
    BRG_TRY(check_token("pad_token_id", c->pad_token_id, m));
    BRG_TRY(check_token("bos_token_id", c->bos_token_id, m));
    BRG_TRY(check_token("decoder_start_token_id", c->decoder_start_token_id, m));
    return BRG_OK;
}
