/* Training and inference views of an IPUConfig, the batch-size factor, and string overrides
 * (upstream's update_from_string). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/ipu_config_internal.h"
#include "io/json.h"

/* ---- modes -------------------------------------------------------------------------------- */

void brg_ipu_config_train(brg_ipu_config *cfg) { cfg->mode = BRG_IPU_MODE_TRAINING; }
void brg_ipu_config_eval(brg_ipu_config *cfg) { cfg->mode = BRG_IPU_MODE_INFERENCE; }

const char *brg_ipu_mode_name(brg_ipu_mode mode) { return mode == BRG_IPU_MODE_INFERENCE ? "inference" : "training"; }

const char *brg_output_mode_name(brg_output_mode mode) {
    switch (mode) {
    case BRG_OUTPUT_MODE_ALL: return "all";
    case BRG_OUTPUT_MODE_SUM: return "sum";
    case BRG_OUTPUT_MODE_FINAL: return "final";
    case BRG_OUTPUT_MODE_DEFAULT: return "default";
    }
    return "?";
}

brg_status brg_ipu_mode_parse(const char *name, brg_ipu_mode *out) {
    if (strcmp(name, "training") == 0) return *out = BRG_IPU_MODE_TRAINING, BRG_OK;
    if (strcmp(name, "inference") == 0) return *out = BRG_IPU_MODE_INFERENCE, BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG,
                     "`IPUConfig` mode can only take values in ('training', 'inference'). You provided: value='%s'. "
                     "Use the `train` and `eval` methods instead to avoid error.",
                     name);
}

brg_status brg_ipu_config_set_mode(brg_ipu_config *cfg, const char *mode) {
    return brg_ipu_mode_parse(mode, &cfg->mode);
}

const char *brg_ipu_config_mode_name(brg_ipu_mode mode, const char *attr, char *buf, size_t len) {
    char twin[96];
    snprintf(twin, sizeof twin, "inference_%s", attr);
    bool managed = cfg_attr_find(attr) && cfg_attr_find(twin);
    snprintf(buf, len, "%s%s", managed && mode == BRG_IPU_MODE_INFERENCE ? "inference_" : "", attr);
    return buf;
}

void brg_ipu_config_view(const brg_ipu_config *c, brg_ipu_mode mode, brg_ipu_view *v) {
    brg_ipu_config *m = (brg_ipu_config *)c; /* the accessors only read through these */
    bool inference = mode == BRG_IPU_MODE_INFERENCE;
    v->mode = mode;
    v->replication_factor = inference ? c->inference_replication_factor : c->replication_factor;
    v->gradient_accumulation_steps = inference ? 1 : c->gradient_accumulation_steps;
    v->device_iterations = inference ? c->inference_device_iterations : c->device_iterations;
    v->output_mode = inference ? BRG_OUTPUT_MODE_ALL : c->output_mode;
    v->layers_per_ipu = cfg_layers(m, mode);
    v->ipus_per_replica = *cfg_ipus(m, mode);
    v->matmul_proportion = cfg_matmul(m, mode);
    v->embedding_serialization_factor = *cfg_factor(m, mode, true);
    v->serialized_embedding_splits_per_ipu = cfg_splits(m, mode, true);
    v->projection_serialization_factor = *cfg_factor(m, mode, false);
    v->serialized_projection_splits_per_ipu = cfg_splits(m, mode, false);
    v->parallelize_kwargs = inference ? c->inference_parallelize_kwargs : c->parallelize_kwargs;
}

brg_status brg_ipu_config_batch_size_factor(const brg_ipu_config *cfg, brg_ipu_mode mode, int64_t *out) {
    brg_ipu_view v;
    brg_ipu_config_view(cfg, mode, &v);
    int64_t f;
    if (__builtin_mul_overflow(v.replication_factor, v.gradient_accumulation_steps, &f) ||
        __builtin_mul_overflow(f, v.device_iterations, &f))
        return brg_error(BRG_ERR_INVALID_ARG,
                         "batch size factor overflows: replication_factor=%lld x gradient_accumulation_steps=%lld x "
                         "device_iterations=%lld (%s)",
                         (long long)v.replication_factor, (long long)v.gradient_accumulation_steps,
                         (long long)v.device_iterations, brg_ipu_mode_name(mode));
    *out = f;
    return BRG_OK;
}

/* ---- update_from_string ------------------------------------------------------------------- */

static bool word_in(const char *v, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (strcasecmp(v, words[i]) == 0) return true;
    return false;
}

static brg_status parse_bool(const char *k, const char *v, cJSON **out) {
    static const char *const yes[] = {"true", "1", "y", "yes", NULL};
    static const char *const no[] = {"false", "0", "n", "no", NULL};
    if (word_in(v, yes)) *out = cJSON_CreateTrue();
    else if (word_in(v, no)) *out = cJSON_CreateFalse();
    else return brg_error(BRG_ERR_INVALID_ARG, "Can't derive true or false from %s (key %s)", v, k);
    return BRG_OK;
}

/* Python's int(): surrounding blanks, a sign, digits with single underscores between them. */
static brg_status parse_int(const char *k, const char *v, cJSON **out) {
    const char *p = v;
    while (isspace((unsigned char)*p)) p++;
    bool neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    long long x = 0;
    int digits = 0;
    bool overflow = false;
    for (; isdigit((unsigned char)*p) || (*p == '_' && digits && isdigit((unsigned char)p[1])); p++) {
        if (*p == '_') continue;
        overflow |= __builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *p - '0', &x);
        digits++;
    }
    while (isspace((unsigned char)*p)) p++;
    if (!digits || *p)
        return brg_error(BRG_ERR_INVALID_ARG, "key %s: invalid literal for int() with base 10: '%s'", k, v);
    if (overflow || x > BRG_JSON_MAX_EXACT_INT)
        return brg_error(BRG_ERR_INVALID_ARG, "key %s: %s is out of range (brigade keeps integers within +/-2^53)", k, v);
    *out = cJSON_CreateNumber((double)(neg ? -x : x));
    return BRG_OK;
}

static brg_status parse_float(const char *k, const char *v, cJSON **out) {
    errno = 0;
    char *end;
    double d = strtod(v, &end);
    while (end != v && isspace((unsigned char)*end)) end++;
    if (end == v || *end || errno == ERANGE)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "key %s: could not convert string to float: '%s' (an override keeps the type of the "
                         "current value, a float here)",
                         k, v);
    *out = cJSON_CreateNumber(d);
    return BRG_OK;
}

/* Lists are written "[a b c]": blanks become commas, then it is read as JSON (as upstream). */
static brg_status parse_list(const char *k, const char *v, cJSON **out) {
    char *text = strdup(v);
    if (!text) return brg_error(BRG_ERR_OOM, "out of memory reading override %s", k);
    for (char *p = text; *p; p++)
        if (*p == ' ') *p = ',';
    char ctx[128];
    snprintf(ctx, sizeof ctx, "override %s=%s", k, v);
    brg_status st = brg_json_parse(text, strlen(text), ctx, out);
    free(text);
    return st;
}

static bool is_null(const brg_ipu_config *c, const attr_info *a) {
    const void *f = cfg_field_const(c, a);
    if (a->kind == K_OPT_INT) return *(const int64_t *)f == 0;
    if (a->kind == K_SEED) return !c->has_seed;
    if (a->kind == K_OPT_LIST) return !((const brg_ipu_list *)f)->present;
    return false;
}

/* Reads `v` with the type of the attribute's current value. */
static brg_status override_value(const brg_ipu_config *c, const attr_info *a, const char *k, const char *v,
                                 cJSON **out) {
    if (is_null(c, a) || a->kind == K_DICT)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "You can only update int, float, bool, list or string values in the config, got %s for key %s",
                         v, k);
    switch (a->kind) {
    case K_BOOL: return parse_bool(k, v, out);
    case K_INT:
    case K_OPT_INT:
    case K_SEED: return parse_int(k, v, out);
    case K_PROP:
        if (!((const brg_ipu_proportion *)cfg_field_const(c, a))->is_list) return parse_float(k, v, out);
        return parse_list(k, v, out);
    case K_LIST:
    case K_OPT_LIST: return parse_list(k, v, out);
    default: *out = cJSON_CreateString(v); return BRG_OK;
    }
}

/* Every item must be key=value before any is applied (upstream builds a dict first). */
static brg_status check_items(const char *overrides) {
    size_t len = strlen(overrides);
    if (len == 0 || overrides[0] == ',' || strstr(overrides, ",,") || overrides[len - 1] == ',')
        return brg_error(BRG_ERR_INVALID_ARG, "ipu config overrides '%s' hold an empty item", overrides);
    for (const char *p = overrides; *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (!eq || memchr(eq + 1, '=', n - (size_t)(eq + 1 - p)))
            return brg_error(BRG_ERR_INVALID_ARG,
                             "override '%.*s' is not of the form key=value (a list is written [1 2 3], with blanks)",
                             (int)n, p);
        p += n + (p[n] == ',');
    }
    return BRG_OK;
}

static brg_status apply_override(brg_ipu_config *c, const char *item) {
    const char *eq = strchr(item, '=');
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - item), item);
    const attr_info *a = cfg_attr_find(key);
    if (!a) return brg_error(BRG_ERR_INVALID_ARG, "Key %s isn't in the original config dict", key);
    cJSON *v = NULL;
    BRG_TRY(override_value(c, a, key, eq + 1, &v));
    if (!v) return brg_error(BRG_ERR_OOM, "out of memory reading override %s", key);
    brg_status st = cfg_set_value(c, a, v);
    cJSON_Delete(v);
    return st;
}

static brg_status apply_all(brg_ipu_config *c, char *text) {
    char *save = NULL;
    /* every comma separates two overrides, as upstream splits them */
    for (char *tok = strtok_r(text, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        BRG_TRY(apply_override(c, tok));
    /* unlike upstream, the cross-attribute checks run again */
    return brg_ipu_config_validate(c);
}

brg_status brg_ipu_config_update_from_string(brg_ipu_config *cfg, const char *overrides) {
    BRG_TRY(check_items(overrides));
    brg_ipu_config *c = malloc(sizeof *c); /* work on a copy: all overrides apply or none */
    char *text = strdup(overrides);
    brg_status st = c && text ? BRG_OK : brg_error(BRG_ERR_OOM, "out of memory applying overrides");
    if (st == BRG_OK) {
        *c = *cfg;
        st = apply_all(c, text);
    }
    if (st == BRG_OK) *cfg = *c;
    free(text);
    free(c);
    return st;
}
