/* T5's config.json: T5Config's fields, defaults and derived values (feed_forward_proj into an
 * activation and a gating flag; the tie/scale pair as transformers 5 reads it), validation, and
 * writing it back with the keys brigade does not interpret kept. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "models/model_internal.h"
#include "t5_internal.h"

/* In brg_t5_task order. */
static const char *const architectures[] = {"T5ForConditionalGeneration", "T5EncoderModel"};
enum { N_TASKS = sizeof architectures / sizeof architectures[0] };

const char *t5_architecture(brg_t5_task task) { return (unsigned)task < N_TASKS ? architectures[task] : "?"; }

void brg_t5_config_default(brg_t5_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 32128;
    c->d_model = 512;
    c->d_kv = 64;
    c->d_ff = 2048;
    c->num_heads = 8;
    c->num_layers = c->num_decoder_layers = 6;
    c->relative_attention_num_buckets = 32;
    c->relative_attention_max_distance = 128;
    c->n_positions = 512;
    c->dropout_rate = 0.1f;
    c->layer_norm_epsilon = 1e-6f;
    c->initializer_factor = 1.0f;
    snprintf(c->feed_forward_proj, sizeof c->feed_forward_proj, "relu");
    snprintf(c->dense_act_fn, sizeof c->dense_act_fn, "relu");
    c->act = BRG_T5_ACT_RELU;
    c->tie_word_embeddings = true;
    c->scale_decoder_outputs = true;
    c->pad_token_id = 0;
    c->decoder_start_token_id = -1;
    c->eos_token_ids[0] = 1;
    c->n_eos = 1;
}

static brg_status activation_of(const char *name, const char *ctx, const char *field, brg_t5_act *out) {
    if (strcmp(name, "relu") == 0) *out = BRG_T5_ACT_RELU;
    else if (strcmp(name, "gelu") == 0) *out = BRG_T5_ACT_GELU_ERF;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_fast") == 0)
        *out = BRG_T5_ACT_GELU_TANH;
    else
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: %s activation '%s' is not supported (relu, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)",
                         ctx, field, name);
    return BRG_OK;
}

static brg_status copy_name(char *dst, size_t len, const char *src, const char *ctx, const char *field) {
    if (strlen(src) >= len) return brg_error(BRG_ERR_INVALID_ARG, "%s: %s '%s' is too long", ctx, field, src);
    snprintf(dst, len, "%s", src);
    return BRG_OK;
}

/* "{act}" or "gated-{act}"; "gated-gelu" means gelu_new (T5 v1.1's checkpoints say so). The
 * derived dense_act_fn and is_gated_act give way to explicit keys, as in T5Config. */
static brg_status parse_feed_forward(const cJSON *j, const char *ctx, brg_t5_config *c) {
    const char *ffp = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "feed_forward_proj", false, "relu", &ffp));
    BRG_TRY(copy_name(c->feed_forward_proj, sizeof c->feed_forward_proj, ffp, ctx, "feed_forward_proj"));
    const char *dash = strchr(ffp, '-');
    const char *act = ffp;
    c->is_gated_act = false;
    if (dash) {
        if (strncmp(ffp, "gated-", 6) != 0 || strchr(dash + 1, '-'))
            return brg_error(BRG_ERR_INVALID_ARG,
                             "%s: feed_forward_proj '%s' is not of the form 'gated-{ACT_FN}' or '{ACT_FN}'", ctx, ffp);
        c->is_gated_act = true;
        act = dash + 1;
    }
    if (strcmp(ffp, "gated-gelu") == 0) act = "gelu_new";
    BRG_TRY(brg_json_get_string(j, ctx, "dense_act_fn", false, act, &act));
    BRG_TRY(brg_json_get_bool(j, ctx, "is_gated_act", false, c->is_gated_act, &c->is_gated_act));
    BRG_TRY(copy_name(c->dense_act_fn, sizeof c->dense_act_fn, act, ctx, "dense_act_fn"));
    return activation_of(act, ctx, "dense_act_fn", &c->act);
}

static brg_status parse_eos(const cJSON *j, const char *ctx, brg_t5_config *c) {
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    c->eos_is_list = cJSON_IsArray(eos);
    if (!c->eos_is_list) {
        c->n_eos = eos && cJSON_IsNull(eos) ? 0 : 1;
        return brg_json_get_int(j, ctx, "eos_token_id", false, 1, &c->eos_token_ids[0]);
    }
    c->n_eos = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, eos) {
        if (c->n_eos == BRG_T5_MAX_EOS)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: eos_token_id lists more than %d ids", ctx, BRG_T5_MAX_EOS);
        if (!brg_json_integer(item, &c->eos_token_ids[c->n_eos]))
            return brg_error(BRG_ERR_FORMAT, "%s: eos_token_id must hold integers", ctx);
        c->n_eos++;
    }
    return BRG_OK;
}

static brg_status parse_sizes(const cJSON *j, const char *ctx, brg_t5_config *c) {
    BRG_TRY(brg_json_get_int(j, ctx, "vocab_size", false, c->vocab_size, &c->vocab_size));
    BRG_TRY(brg_json_get_int(j, ctx, "d_model", false, c->d_model, &c->d_model));
    BRG_TRY(brg_json_get_int(j, ctx, "d_kv", false, c->d_kv, &c->d_kv));
    BRG_TRY(brg_json_get_int(j, ctx, "d_ff", false, c->d_ff, &c->d_ff));
    BRG_TRY(brg_json_get_int(j, ctx, "num_heads", false, c->num_heads, &c->num_heads));
    BRG_TRY(brg_json_get_int(j, ctx, "num_layers", false, c->num_layers, &c->num_layers));
    BRG_TRY(brg_json_get_int(j, ctx, "num_decoder_layers", false, c->num_layers, &c->num_decoder_layers));
    BRG_TRY(brg_json_get_int(j, ctx, "relative_attention_num_buckets", false, c->relative_attention_num_buckets,
                             &c->relative_attention_num_buckets));
    BRG_TRY(brg_json_get_int(j, ctx, "relative_attention_max_distance", false, c->relative_attention_max_distance,
                             &c->relative_attention_max_distance));
    BRG_TRY(brg_json_get_int(j, ctx, "n_positions", false, c->n_positions, &c->n_positions));
    BRG_TRY(brg_json_get_float(j, ctx, "dropout_rate", false, c->dropout_rate, &c->dropout_rate));
    BRG_TRY(brg_json_get_float(j, ctx, "layer_norm_epsilon", false, c->layer_norm_epsilon, &c->layer_norm_epsilon));
    return brg_json_get_float(j, ctx, "initializer_factor", false, c->initializer_factor, &c->initializer_factor);
}

static brg_status parse_roles(const cJSON *j, const char *ctx, brg_t5_config *c) {
    bool is_decoder = false, is_enc_dec = true;
    BRG_TRY(brg_json_get_bool(j, ctx, "is_decoder", false, false, &is_decoder));
    BRG_TRY(brg_json_get_bool(j, ctx, "is_encoder_decoder", false, true, &is_enc_dec));
    /* T5EncoderModel writes is_encoder_decoder false into the config it saves */
    if (c->task == BRG_T5_ENCODER) is_enc_dec = true;
    if (is_decoder || !is_enc_dec)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: only the encoder-decoder T5 is supported (is_decoder %s, "
                         "is_encoder_decoder %s)", ctx, is_decoder ? "true" : "false", is_enc_dec ? "true" : "false");
    BRG_TRY(brg_json_get_int(j, ctx, "pad_token_id", false, -1, &c->pad_token_id));
    if (!cJSON_GetObjectItemCaseSensitive(j, "pad_token_id")) c->pad_token_id = 0;
    BRG_TRY(brg_json_get_int(j, ctx, "decoder_start_token_id", false, -1, &c->decoder_start_token_id));
    BRG_TRY(parse_eos(j, ctx, c));
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    BRG_TRY(brg_json_get_bool(j, ctx, "tie_word_embeddings", false, true, &c->tie_word_embeddings));
    bool scale_default = !(cJSON_IsBool(tie) && !c->tie_word_embeddings);
    return brg_json_get_bool(j, ctx, "scale_decoder_outputs", false, scale_default, &c->scale_decoder_outputs);
}

brg_status t5_config_parse(const cJSON *j, const char *ctx, brg_t5_config *c) {
    brg_t5_config_default(c);
    if (!cJSON_IsObject(j)) return brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", ctx);
    int task;
    BRG_TRY(model_parse_architecture(j, ctx, architectures, N_TASKS, &task));
    c->task = (brg_t5_task)task;
    BRG_TRY(parse_sizes(j, ctx, c));
    BRG_TRY(parse_feed_forward(j, ctx, c));
    BRG_TRY(parse_roles(j, ctx, c));
    brg_status st = brg_t5_config_validate(c);
    return st == BRG_OK ? st : brg_error_wrap(st, "%s", ctx);
}

brg_status brg_t5_config_load(const char *path, brg_t5_config *cfg) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j));
    brg_status st = t5_config_parse(j, path, cfg);
    cJSON_Delete(j);
    return st;
}

static brg_status check_positive(const char *field, int64_t v) {
    if (v < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: %s must be at least 1 (got %lld)", field, (long long)v);
    return BRG_OK;
}

static brg_status check_token(const char *field, int64_t v, int64_t vocab) {
    if (v < -1 || v >= vocab)
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: %s %lld is outside the vocabulary (%lld ids)", field,
                         (long long)v, (long long)vocab);
    return BRG_OK;
}

brg_status brg_t5_config_validate(const brg_t5_config *c) {
    if ((unsigned)c->task >= N_TASKS) return brg_error(BRG_ERR_INVALID_ARG, "T5 config: unknown task %d", (int)c->task);
    BRG_TRY(check_positive("vocab_size", c->vocab_size));
    BRG_TRY(check_positive("d_model", c->d_model));
    BRG_TRY(check_positive("d_kv", c->d_kv));
    BRG_TRY(check_positive("d_ff", c->d_ff));
    BRG_TRY(check_positive("num_heads", c->num_heads));
    BRG_TRY(check_positive("num_layers", c->num_layers));
    BRG_TRY(check_positive("num_decoder_layers", c->num_decoder_layers));
    BRG_TRY(check_positive("n_positions", c->n_positions));
    if (c->vocab_size > INT32_MAX || c->num_layers + c->num_decoder_layers > 100000)
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: vocab_size or the number of layers is out of range");
    /* Fewer buckets, or a max_distance inside the exact range, makes transformers divide by
     * log(1) = 0 and index with garbage. */
    if (c->relative_attention_num_buckets < 4 ||
        c->relative_attention_max_distance <= c->relative_attention_num_buckets / 2)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "T5 config: relative_attention_num_buckets (%lld) must be at least 4 and "
                         "relative_attention_max_distance (%lld) greater than half of it",
                         (long long)c->relative_attention_num_buckets, (long long)c->relative_attention_max_distance);
    if (!(c->dropout_rate >= 0 && c->dropout_rate < 1))
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: dropout_rate %g not in [0, 1)", c->dropout_rate);
    if (!(c->layer_norm_epsilon > 0))
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: layer_norm_epsilon must be > 0 (got %g)",
                         c->layer_norm_epsilon);
    if (!(c->initializer_factor >= 0))
        return brg_error(BRG_ERR_INVALID_ARG, "T5 config: initializer_factor must be >= 0");
    BRG_TRY(check_token("pad_token_id", c->pad_token_id, c->vocab_size));
    BRG_TRY(check_token("decoder_start_token_id", c->decoder_start_token_id, c->vocab_size));
    if (c->n_eos < 0 || c->n_eos > BRG_T5_MAX_EOS) return brg_error(BRG_ERR_INVALID_ARG, "T5 config: bad eos count");
    return BRG_OK;
}

/* ---- writing ---- */

/* The shortest decimal that reads back as the same float ("1e-06", not 9.99999997e-07), and
 * always spelled as a float ("1.0"): transformers 5 rejects an integer in a float-typed field. */
static void add_float(cJSON *j, const char *key, float v) {
    char buf[48];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
    cJSON_AddRawToObject(j, key, buf);
}

static void add_token(cJSON *j, const char *key, int64_t v) {
    if (v < 0) cJSON_AddNullToObject(j, key);
    else cJSON_AddNumberToObject(j, key, (double)v);
}

static void add_fields(cJSON *j, const brg_t5_config *c) {
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(t5_architecture(c->task)));
    cJSON_AddStringToObject(j, "model_type", "t5");
    cJSON_AddNumberToObject(j, "d_ff", (double)c->d_ff);
    cJSON_AddNumberToObject(j, "d_kv", (double)c->d_kv);
    cJSON_AddNumberToObject(j, "d_model", (double)c->d_model);
    add_token(j, "decoder_start_token_id", c->decoder_start_token_id);
    cJSON_AddStringToObject(j, "dense_act_fn", c->dense_act_fn);
    add_float(j, "dropout_rate", c->dropout_rate);
    if (c->eos_is_list) {
        cJSON *eos = cJSON_AddArrayToObject(j, "eos_token_id");
        for (int i = 0; i < c->n_eos; i++) cJSON_AddItemToArray(eos, cJSON_CreateNumber((double)c->eos_token_ids[i]));
    } else {
        add_token(j, "eos_token_id", c->n_eos ? c->eos_token_ids[0] : -1);
    }
    cJSON_AddStringToObject(j, "feed_forward_proj", c->feed_forward_proj);
    add_float(j, "initializer_factor", c->initializer_factor);
    cJSON_AddBoolToObject(j, "is_encoder_decoder", c->task != BRG_T5_ENCODER);
    cJSON_AddBoolToObject(j, "is_gated_act", c->is_gated_act);
    add_float(j, "layer_norm_epsilon", c->layer_norm_epsilon);
    cJSON_AddNumberToObject(j, "num_decoder_layers", (double)c->num_decoder_layers);
    cJSON_AddNumberToObject(j, "num_heads", (double)c->num_heads);
    cJSON_AddNumberToObject(j, "num_layers", (double)c->num_layers);
    if (c->n_positions != 512) cJSON_AddNumberToObject(j, "n_positions", (double)c->n_positions);
    add_token(j, "pad_token_id", c->pad_token_id);
    cJSON_AddNumberToObject(j, "relative_attention_max_distance", (double)c->relative_attention_max_distance);
    cJSON_AddNumberToObject(j, "relative_attention_num_buckets", (double)c->relative_attention_num_buckets);
    cJSON_AddBoolToObject(j, "scale_decoder_outputs", c->scale_decoder_outputs);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
}

/* Keys brigade writes replace the loaded ones; "dtype" is transformers 5's name for torch_dtype. */
static bool written_here(const cJSON *j, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(j, key) != NULL || strcmp(key, "dtype") == 0;
}

brg_status t5_config_save(const brg_t5_config *c, const cJSON *extra, const char *dir) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return brg_error(BRG_ERR_OOM, "cannot build config.json");
    add_fields(j, c);
    const cJSON *item;
    if (extra)
        cJSON_ArrayForEach(item, extra) {
            if (item->string && !written_here(j, item->string))
                cJSON_AddItemToObject(j, item->string, cJSON_Duplicate(item, true));
        }
    return brg_json_write_config(j, dir);
}
