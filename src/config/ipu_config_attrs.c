/* IPUConfig attributes: the table of names and types, and setting one attribute with the type
 * check and validators that optimum-graphcore's __setattr__ runs on every assignment. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/ipu_config_internal.h"
#include "io/json.h"

#define F(field) offsetof(brg_ipu_config, field)

/* upstream's __init__ order; floors from its _contents_geq_value_validator registrations. */
static const attr_info attrs[] = {
    {"replication_factor", K_INT, 1, true, F(replication_factor)},
    {"inference_replication_factor", K_INT, 1, true, F(inference_replication_factor)},
    {"gradient_accumulation_steps", K_INT, 1, true, F(gradient_accumulation_steps)},
    {"layers_per_ipu", K_LIST, -1, true, F(layers_per_ipu)},
    {"inference_layers_per_ipu", K_LIST, -1, true, F(inference_layers_per_ipu)},
    {"ipus_per_replica", K_INT, 1, true, F(ipus_per_replica)},
    {"inference_ipus_per_replica", K_INT, 1, true, F(inference_ipus_per_replica)},
    {"optimizer_state_offchip", K_BOOL, 0, false, F(optimizer_state_offchip)},
    {"replicated_tensor_sharding", K_BOOL, 0, false, F(replicated_tensor_sharding)},
    {"matmul_proportion", K_PROP, 0, true, F(matmul_proportion)},
    {"inference_matmul_proportion", K_PROP, 0, true, F(inference_matmul_proportion)},
    {"enable_half_partials", K_BOOL, 0, false, F(enable_half_partials)},
    {"embedding_serialization_factor", K_OPT_INT, 1, true, F(embedding_serialization_factor)},
    {"inference_embedding_serialization_factor", K_OPT_INT, 1, true, F(inference_embedding_serialization_factor)},
    {"serialized_embedding_splits_per_ipu", K_OPT_LIST, 0, true, F(serialized_embedding_splits_per_ipu)},
    {"inference_serialized_embedding_splits_per_ipu", K_OPT_LIST, 0, true,
     F(inference_serialized_embedding_splits_per_ipu)},
    {"projection_serialization_factor", K_OPT_INT, 1, true, F(projection_serialization_factor)},
    {"inference_projection_serialization_factor", K_OPT_INT, 1, true, F(inference_projection_serialization_factor)},
    {"serialized_projection_splits_per_ipu", K_OPT_LIST, 0, true, F(serialized_projection_splits_per_ipu)},
    {"inference_serialized_projection_splits_per_ipu", K_OPT_LIST, 0, true,
     F(inference_serialized_projection_splits_per_ipu)},
    {"recompute_checkpoint_every_layer", K_BOOL, 0, false, F(recompute_checkpoint_every_layer)},
    {"device_iterations", K_INT, 1, true, F(device_iterations)},
    {"inference_device_iterations", K_INT, 1, true, F(inference_device_iterations)},
    {"output_mode", K_OUTPUT_MODE, 0, false, F(output_mode)},
    {"seed", K_SEED, 0, false, F(seed)},
    {"auto_loss_scaling", K_BOOL, 0, false, F(auto_loss_scaling)},
    {"executable_cache_dir", K_STR, 0, false, F(executable_cache_dir)},
    {"explicit_ir_inference", K_BOOL, 0, false, F(explicit_ir_inference)},
    {"parallelize_kwargs", K_DICT, 0, false, F(parallelize_kwargs)},
    {"inference_parallelize_kwargs", K_DICT, 0, false, F(inference_parallelize_kwargs)},
    {"execute_encoder_on_cpu_for_generation", K_BOOL, 0, false, F(execute_encoder_on_cpu_for_generation)},
};

#define N_ATTRS ((int)(sizeof attrs / sizeof attrs[0]))

const char *const brg_ipu_config_attributes[] = {
    "replication_factor", "inference_replication_factor", "gradient_accumulation_steps", "layers_per_ipu",
    "inference_layers_per_ipu", "ipus_per_replica", "inference_ipus_per_replica", "optimizer_state_offchip",
    "replicated_tensor_sharding", "matmul_proportion", "inference_matmul_proportion", "enable_half_partials",
    "embedding_serialization_factor", "inference_embedding_serialization_factor",
    "serialized_embedding_splits_per_ipu", "inference_serialized_embedding_splits_per_ipu",
    "projection_serialization_factor", "inference_projection_serialization_factor",
    "serialized_projection_splits_per_ipu", "inference_serialized_projection_splits_per_ipu",
    "recompute_checkpoint_every_layer", "device_iterations", "inference_device_iterations", "output_mode", "seed",
    "auto_loss_scaling", "executable_cache_dir", "explicit_ir_inference", "parallelize_kwargs",
    "inference_parallelize_kwargs", "execute_encoder_on_cpu_for_generation", NULL,
};

const attr_info *cfg_attr_find(const char *name) {
    for (int i = 0; i < N_ATTRS; i++)
        if (strcmp(attrs[i].name, name) == 0) return &attrs[i];
    return NULL;
}

const attr_info *cfg_attr_at(int i) { return i >= 0 && i < N_ATTRS ? &attrs[i] : NULL; }

void *cfg_field(brg_ipu_config *cfg, const attr_info *a) { return (char *)cfg + a->offset; }
const void *cfg_field_const(const brg_ipu_config *cfg, const attr_info *a) { return (const char *)cfg + a->offset; }

void cfg_warn(brg_ipu_config *cfg, const char *fmt, ...) {
    char msg[BRG_IPU_WARNING_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (int i = 0; i < cfg->n_warnings; i++)
        if (strcmp(cfg->warnings[i], msg) == 0) return;
    if (cfg->n_warnings < BRG_IPU_MAX_WARNINGS) memcpy(cfg->warnings[cfg->n_warnings++], msg, sizeof msg);
}

/* ---- mode-resolved fields (upstream's ManagedAttribute) --------------------------------- */

static bool inf(brg_ipu_mode mode) { return mode == BRG_IPU_MODE_INFERENCE; }

brg_ipu_list *cfg_layers(brg_ipu_config *c, brg_ipu_mode m) {
    return inf(m) ? &c->inference_layers_per_ipu : &c->layers_per_ipu;
}
int64_t *cfg_ipus(brg_ipu_config *c, brg_ipu_mode m) {
    return inf(m) ? &c->inference_ipus_per_replica : &c->ipus_per_replica;
}
brg_ipu_proportion *cfg_matmul(brg_ipu_config *c, brg_ipu_mode m) {
    return inf(m) ? &c->inference_matmul_proportion : &c->matmul_proportion;
}
brg_ipu_list *cfg_splits(brg_ipu_config *c, brg_ipu_mode m, bool emb) {
    if (emb) return inf(m) ? &c->inference_serialized_embedding_splits_per_ipu : &c->serialized_embedding_splits_per_ipu;
    return inf(m) ? &c->inference_serialized_projection_splits_per_ipu : &c->serialized_projection_splits_per_ipu;
}
int64_t *cfg_factor(brg_ipu_config *c, brg_ipu_mode m, bool emb) {
    if (emb) return inf(m) ? &c->inference_embedding_serialization_factor : &c->embedding_serialization_factor;
    return inf(m) ? &c->inference_projection_serialization_factor : &c->projection_serialization_factor;
}

/* ---- type checks -------------------------------------------------------------------------- */

static const char *kind_wants(attr_kind k) {
    switch (k) {
    case K_INT: return "an int";
    case K_OPT_INT:
    case K_SEED: return "an int or null";
    case K_BOOL: return "a bool (true or false)";
    case K_STR:
    case K_OUTPUT_MODE: return "a string";
    case K_LIST: return "a list of ints";
    case K_OPT_LIST: return "a list of ints or null";
    case K_PROP: return "a float or a list of floats";
    case K_DICT: return "an object";
    }
    return "?";
}

static bool is_pod_key(const char *k) {
    return strcmp(k, "default") == 0 || (strncmp(k, "pod", 3) == 0 && k[3] >= '1' && k[3] <= '9');
}

/* Configs written for optimum-graphcore < 0.7 gave one value per pod type. */
static brg_status legacy_pod_value(const attr_info *a, const cJSON *v) {
    const cJSON *pick = cJSON_GetObjectItemCaseSensitive(v, "default");
    if (!pick) pick = v->child;
    char given[256], sugg[128];
    return brg_error(BRG_ERR_INVALID_ARG,
                     "`IPUConfig` attribute `%s` has a per-pod-type value %s; optimum-graphcore 0.7 removed "
                     "per-pod values: write one value instead, e.g. \"%s\": %s",
                     a->name, py_repr_json(v, given, sizeof given), a->name,
                     pick ? py_repr_json(pick, sugg, sizeof sugg) : "1");
}

static brg_status wrong_type(const attr_info *a, const cJSON *v) {
    if (cJSON_IsObject(v) && a->kind != K_DICT && v->child && is_pod_key(v->child->string)) return legacy_pod_value(a, v);
    char given[256];
    return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` must be %s. You provided value=%s", a->name,
                     kind_wants(a->kind), py_repr_json(v, given, sizeof given));
}

/* Integral JSON numbers only: true/false are not ints here, though Python's bool is one. */
static bool json_int(const cJSON *v, int64_t *out) { return cJSON_IsNumber(v) && brg_json_integer(v, out); }

/* ---- validators --------------------------------------------------------------------------- */

static brg_status below_floor(const attr_info *a, const cJSON *v, bool list) {
    char given[256];
    return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` must %s >= %d. You provided value=%s", a->name,
                     list ? "have all elements" : "be", a->floor, py_repr_json(v, given, sizeof given));
}

/* Limits of brigade's representation (upstream's Python ints have none). */
static brg_status too_large(const attr_info *a, const cJSON *v, long long max) {
    char given[256];
    return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` must be <= %lld in brigade. You provided value=%s",
                     a->name, max, py_repr_json(v, given, sizeof given));
}

/* serialized_*_splits_per_ipu: at least one split, and the splits on consecutive IPUs. */
static brg_status check_splits(const attr_info *a, const brg_ipu_list *l) {
    char r[512];
    long long sum = 0;
    for (int i = 0; i < l->n; i++) sum += l->v[i];
    if (sum < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s=%s` must have atleast 1 split on 1 IPU.",
                         a->name, py_repr_list(l, r, sizeof r));
    for (int i = 0; i + 1 < l->n; i++) {
        long long rest = 0;
        for (int j = i + 1; j < l->n; j++) rest += l->v[j];
        if (l->v[i] != 0 && l->v[i + 1] == 0 && rest != 0)
            return brg_error(BRG_ERR_INVALID_ARG,
                             "`IPUConfig` attribute `%s=%s` must have its splits on consecutive IPUs.", a->name,
                             py_repr_list(l, r, sizeof r));
    }
    return BRG_OK;
}

/* ---- setting one attribute ---------------------------------------------------------------- */

static brg_status set_int(const attr_info *a, const cJSON *v, int64_t *dst) {
    int64_t x;
    if (!json_int(v, &x)) return wrong_type(a, v);
    if (a->has_floor && x < a->floor) return below_floor(a, v, false);
    long long max = strstr(a->name, "ipus_per_replica") ? BRG_IPU_LIST_MAX : INT32_MAX;
    if (x > max) return too_large(a, v, max);
    *dst = x;
    return BRG_OK;
}

static brg_status set_list(const attr_info *a, const cJSON *v, brg_ipu_list *dst) {
    if (a->kind == K_OPT_LIST && cJSON_IsNull(v)) {
        memset(dst, 0, sizeof *dst);
        return BRG_OK;
    }
    if (!cJSON_IsArray(v)) return wrong_type(a, v);
    brg_ipu_list l = {.present = true};
    const cJSON *it;
    int64_t x;
    cJSON_ArrayForEach(it, v) if (!json_int(it, &x)) return wrong_type(a, v); /* every item, then values */
    cJSON_ArrayForEach(it, v) {
        json_int(it, &x);
        if (x < a->floor) return below_floor(a, v, true);
        if (x > INT_MAX) return too_large(a, v, INT_MAX);
        if (l.n == BRG_IPU_LIST_MAX) {
            char given[256];
            return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` has more than %d entries (brigade's limit). "
                             "You provided value=%s", a->name, BRG_IPU_LIST_MAX, py_repr_json(v, given, sizeof given));
        }
        l.v[l.n++] = (int)x;
    }
    if (a->kind == K_OPT_LIST) BRG_TRY(check_splits(a, &l));
    *dst = l;
    return BRG_OK;
}

static brg_status prop_value(const attr_info *a, const cJSON *whole, const cJSON *it, double *out) {
    if (!cJSON_IsNumber(it)) return wrong_type(a, whole);
    if (!isfinite(it->valuedouble)) {
        char given[256];
        return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` must be finite. You provided value=%s",
                         a->name, py_repr_json(whole, given, sizeof given));
    }
    if (it->valuedouble < a->floor) return below_floor(a, whole, cJSON_IsArray(whole));
    *out = it->valuedouble;
    return BRG_OK;
}

static brg_status set_prop(const attr_info *a, const cJSON *v, brg_ipu_proportion *dst) {
    brg_ipu_proportion p = {0};
    if (!cJSON_IsArray(v)) {
        BRG_TRY(prop_value(a, v, v, &p.v[0]));
        p.n = 1;
        *dst = p;
        return BRG_OK;
    }
    p.is_list = true;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) if (!cJSON_IsNumber(it)) return wrong_type(a, v);
    cJSON_ArrayForEach(it, v) {
        if (p.n == BRG_IPU_LIST_MAX) return too_large(a, v, BRG_IPU_LIST_MAX);
        BRG_TRY(prop_value(a, v, it, &p.v[p.n]));
        p.n++;
    }
    *dst = p;
    return BRG_OK;
}

static brg_status set_text(const attr_info *a, const cJSON *v, char *dst) {
    if (!cJSON_IsString(v)) return wrong_type(a, v);
    if (strlen(v->valuestring) >= BRG_IPU_TEXT_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` is longer than %d bytes (brigade's limit)",
                         a->name, BRG_IPU_TEXT_MAX - 1);
    snprintf(dst, BRG_IPU_TEXT_MAX, "%s", v->valuestring);
    return BRG_OK;
}

static brg_status set_output_mode(const attr_info *a, const cJSON *v, brg_output_mode *dst) {
    static const char *const names[] = {"all", "sum", "final", "default"};
    if (!cJSON_IsString(v)) return wrong_type(a, v);
    for (int i = 0; i < 4; i++)
        if (strcmp(v->valuestring, names[i]) == 0) {
            *dst = (brg_output_mode)i;
            return BRG_OK;
        }
    char given[256];
    return brg_error(BRG_ERR_INVALID_ARG,
                     "`IPUConfig` attribute `output_mode` can only take values in ('all', 'sum', 'final', 'default'). "
                     "You provided: value=%s", py_repr_json(v, given, sizeof given));
}

/* Object keys sorted at every level, so that equal dicts have equal text. */
static void sort_object_keys(cJSON *v) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return;
    for (cJSON *it = v->child; it; it = it->next) sort_object_keys(it);
    if (!cJSON_IsObject(v)) return;
    /* insertion sort on the linked list: kwargs objects are small */
    cJSON *sorted = NULL;
    while (v->child) {
        cJSON *it = v->child;
        v->child = it->next;
        cJSON **pp = &sorted;
        while (*pp && strcmp((*pp)->string, it->string) <= 0) pp = &(*pp)->next;
        it->next = *pp;
        *pp = it;
    }
    v->child = sorted;
    cJSON *prev = NULL, *last = NULL;
    for (cJSON *it = sorted; it; it = it->next) {
        it->prev = prev;
        prev = last = it;
    }
    if (sorted) sorted->prev = last; /* cJSON keeps the tail in the head's prev */
}

static brg_status set_dict(const attr_info *a, const cJSON *v, char *dst) {
    if (!cJSON_IsObject(v)) return wrong_type(a, v);
    cJSON *copy = cJSON_Duplicate(v, true);
    if (!copy) return brg_error(BRG_ERR_OOM, "cannot copy `IPUConfig` attribute `%s`", a->name);
    sort_object_keys(copy);
    char *text = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    if (!text) return brg_error(BRG_ERR_OOM, "cannot format `IPUConfig` attribute `%s`", a->name);
    brg_status st = BRG_OK;
    if (strlen(text) >= BRG_IPU_TEXT_MAX)
        st = brg_error(BRG_ERR_INVALID_ARG, "`IPUConfig` attribute `%s` is longer than %d bytes as JSON (brigade's limit)",
                       a->name, BRG_IPU_TEXT_MAX - 1);
    else
        snprintf(dst, BRG_IPU_TEXT_MAX, "%s", text);
    free(text);
    return st;
}

static brg_status set_bool(const attr_info *a, const cJSON *v, bool *dst) {
    if (!cJSON_IsBool(v)) return wrong_type(a, v);
    *dst = cJSON_IsTrue(v);
    return BRG_OK;
}

static brg_status set_seed(const attr_info *a, const cJSON *v, brg_ipu_config *cfg) {
    if (cJSON_IsNull(v)) {
        cfg->has_seed = false;
        cfg->seed = 0;
        return BRG_OK;
    }
    int64_t x;
    if (!json_int(v, &x)) return wrong_type(a, v);
    cfg->has_seed = true;
    cfg->seed = x;
    return BRG_OK;
}

brg_status cfg_set_value(brg_ipu_config *cfg, const attr_info *a, const cJSON *v) {
    void *f = cfg_field(cfg, a);
    switch (a->kind) {
    case K_INT: return set_int(a, v, f);
    case K_OPT_INT:
        if (cJSON_IsNull(v)) return *(int64_t *)f = 0, BRG_OK;
        return set_int(a, v, f);
    case K_SEED: return set_seed(a, v, cfg);
    case K_BOOL: return set_bool(a, v, f);
    case K_STR: return set_text(a, v, f);
    case K_OUTPUT_MODE: return set_output_mode(a, v, f);
    case K_LIST:
    case K_OPT_LIST: return set_list(a, v, f);
    case K_PROP: return set_prop(a, v, f);
    case K_DICT: return set_dict(a, v, f);
    }
    return brg_error(BRG_ERR_INTERNAL, "attribute %s has no setter", a->name);
}

brg_status brg_ipu_config_set(brg_ipu_config *cfg, const char *name, const char *json_value) {
    const attr_info *a = cfg_attr_find(name);
    if (!a) return brg_error(BRG_ERR_INVALID_ARG, "IPUConfig has no attribute '%s'", name);
    cJSON *v;
    BRG_TRY(brg_json_parse(json_value, strlen(json_value), name, &v));
    brg_status st = cfg_set_value(cfg, a, v);
    cJSON_Delete(v);
    return st;
}

/* ---- current values as JSON --------------------------------------------------------------- */

static cJSON *float_node(double d) {
    char f[40];
    return cJSON_CreateRaw(py_float_repr(d, f, sizeof f));
}

static cJSON *list_json(const brg_ipu_list *l) {
    if (!l->present) return cJSON_CreateNull();
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < l->n; i++)
        if (!cJSON_AddItemToArray(arr, cJSON_CreateNumber(l->v[i]))) return cJSON_Delete(arr), NULL;
    return arr;
}

static cJSON *prop_json(const brg_ipu_proportion *p) {
    if (!p->is_list) return float_node(p->v[0]);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < p->n; i++)
        if (!cJSON_AddItemToArray(arr, float_node(p->v[i]))) return cJSON_Delete(arr), NULL;
    return arr;
}

cJSON *cfg_attr_to_json(const brg_ipu_config *cfg, const attr_info *a) {
    const void *f = cfg_field_const(cfg, a);
    switch (a->kind) {
    case K_INT: return cJSON_CreateNumber((double)*(const int64_t *)f);
    case K_OPT_INT: {
        int64_t x = *(const int64_t *)f;
        return x ? cJSON_CreateNumber((double)x) : cJSON_CreateNull();
    }
    case K_SEED: return cfg->has_seed ? cJSON_CreateNumber((double)cfg->seed) : cJSON_CreateNull();
    case K_BOOL: return cJSON_CreateBool(*(const bool *)f);
    case K_STR: return cJSON_CreateString((const char *)f);
    case K_OUTPUT_MODE: return cJSON_CreateString(brg_output_mode_name(*(const brg_output_mode *)f));
    case K_LIST:
    case K_OPT_LIST: return list_json(f);
    case K_PROP: return prop_json(f);
    case K_DICT: return cJSON_Parse((const char *)f);
    }
    return NULL;
}
