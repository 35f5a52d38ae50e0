/* IPUConfig as JSON: the saved form (every attribute, sorted keys, Python's layout) and the
 * per-mode view that `brigade config show --mode` prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/ipu_config_internal.h"
#include "io/atomic_file.h"
#include "io/dirs.h"
#include "io/json.h"

static brg_status dump(const cJSON *root, char **out) {
    strbuf b = {0};
    py_json_dump(&b, root, 0);
    sb_puts(&b, "\n");
    *out = sb_take(&b);
    return *out ? BRG_OK : brg_error(BRG_ERR_OOM, "out of memory formatting an IPUConfig");
}

static brg_status add(cJSON *obj, const char *key, cJSON *v) {
    if (!v || !cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        return brg_error(BRG_ERR_OOM, "out of memory formatting IPUConfig attribute %s", key);
    }
    return BRG_OK;
}

brg_status brg_ipu_config_to_json(const brg_ipu_config *cfg, char **out) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return brg_error(BRG_ERR_OOM, "out of memory formatting an IPUConfig");
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && cfg_attr_at(i); i++)
        st = add(root, cfg_attr_at(i)->name, cfg_attr_to_json(cfg, cfg_attr_at(i)));
    if (st == BRG_OK) st = dump(root, out);
    cJSON_Delete(root);
    return st;
}

/* One mode's attributes under their plain names: managed ones resolved to that mode's field. */
static brg_status add_view_attrs(cJSON *root, const brg_ipu_config *cfg, brg_ipu_mode mode) {
    brg_ipu_view v;
    brg_ipu_config_view(cfg, mode, &v);
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && cfg_attr_at(i); i++) {
        const attr_info *a = cfg_attr_at(i);
        if (strncmp(a->name, "inference_", 10) == 0) continue;
        char name[96];
        /* every attribute with an inference_ twin resolves to it, replication_factor included */
        const attr_info *src = cfg_attr_find(brg_ipu_config_mode_name(mode, a->name, name, sizeof name));
        st = add(root, a->name, cfg_attr_to_json(cfg, src));
    }
    /* settings that a run of this mode takes regardless of the file */
    if (st == BRG_OK && mode == BRG_IPU_MODE_INFERENCE) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "gradient_accumulation_steps");
        cJSON_DeleteItemFromObjectCaseSensitive(root, "output_mode");
        st = add(root, "gradient_accumulation_steps", cJSON_CreateNumber(1));
        if (st == BRG_OK) st = add(root, "output_mode", cJSON_CreateString(brg_output_mode_name(v.output_mode)));
    }
    return st;
}

brg_status brg_ipu_config_view_to_json(const brg_ipu_config *cfg, brg_ipu_mode mode, char **out) {
    int64_t factor;
    BRG_TRY(brg_ipu_config_batch_size_factor(cfg, mode, &factor));
    cJSON *root = cJSON_CreateObject();
    if (!root) return brg_error(BRG_ERR_OOM, "out of memory formatting an IPUConfig");
    brg_status st = add(root, "mode", cJSON_CreateString(brg_ipu_mode_name(mode)));
    if (st == BRG_OK) st = add(root, "batch_size_factor", cJSON_CreateNumber((double)factor));
    if (st == BRG_OK) st = add_view_attrs(root, cfg, mode);
    if (st == BRG_OK) st = dump(root, out);
    cJSON_Delete(root);
    return st;
}

brg_status brg_ipu_config_write_file(const brg_ipu_config *cfg, const char *path) {
    char *text;
    BRG_TRY(brg_ipu_config_to_json(cfg, &text));
    brg_atomic_file f;
    brg_status st = brg_atomic_file_open(path, &f);
    if (st == BRG_OK) st = brg_atomic_file_write(&f, text, strlen(text));
    if (st == BRG_OK) st = brg_atomic_file_commit(&f);
    free(text);
    return st;
}

brg_status brg_ipu_config_save_pretrained(const brg_ipu_config *cfg, const char *dir) {
    brg_status made = brg_dirs_create(dir);
    if (made == BRG_ERR_INVALID_ARG) /* upstream's words */
        return brg_error(BRG_ERR_INVALID_ARG, "Provided path (%s) should be a directory, not a file", dir);
    BRG_TRY(made);
    char path[4200];
    snprintf(path, sizeof path, "%s/ipu_config.json", dir);
    return brg_ipu_config_write_file(cfg, path);
}

/* ---- equality ----------------------------------------------------------------------------- */

static bool list_eq(const brg_ipu_list *a, const brg_ipu_list *b) {
    if (a->present != b->present || a->n != b->n) return false;
    return memcmp(a->v, b->v, (size_t)a->n * sizeof a->v[0]) == 0;
}

static bool prop_eq(const brg_ipu_proportion *a, const brg_ipu_proportion *b) {
    if (a->is_list != b->is_list || a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->v[i] != b->v[i]) return false;
    return true;
}

static bool attr_eq(const brg_ipu_config *x, const brg_ipu_config *y, const attr_info *a) {
    const void *p = cfg_field_const(x, a), *q = cfg_field_const(y, a);
    switch (a->kind) {
    case K_INT:
    case K_OPT_INT: return *(const int64_t *)p == *(const int64_t *)q;
    case K_SEED: return x->has_seed == y->has_seed && x->seed == y->seed;
    case K_BOOL: return *(const bool *)p == *(const bool *)q;
    case K_STR:
    case K_DICT: return strcmp(p, q) == 0;
    case K_OUTPUT_MODE: return *(const brg_output_mode *)p == *(const brg_output_mode *)q;
    case K_LIST:
    case K_OPT_LIST: return list_eq(p, q);
    case K_PROP: return prop_eq(p, q);
    }
    return false;
}

bool brg_ipu_config_equal(const brg_ipu_config *a, const brg_ipu_config *b) {
    for (int i = 0; cfg_attr_at(i); i++)
        if (!attr_eq(a, b, cfg_attr_at(i))) return false;
    return true;
}
