/* A classifier's classes from config.json, read as transformers' PretrainedConfig reads them:
 * num_labels is id2label's size (else num_labels, else 2); label2id maps names to ids, and a
 * config without label2id has id2label's names. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/checkpoint.h"
#include "brigade/dataset.h"
#include "io/json.h"

void brg_label_map_free(brg_label_map *m) {
    for (int64_t i = 0; m->names && i < m->n_names; i++) free(m->names[i]);
    free(m->names);
    free(m->ids);
    memset(m, 0, sizeof *m);
}

static brg_status read_problem(const cJSON *j, const char *ctx, brg_problem_type *out) {
    const char *name = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "problem_type", false, NULL, &name));
    *out = BRG_PROBLEM_AUTO;
    if (!name) return BRG_OK;
    const brg_problem_type all[] = {BRG_PROBLEM_REGRESSION, BRG_PROBLEM_SINGLE_LABEL, BRG_PROBLEM_MULTI_LABEL};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, brg_problem_type_name(all[i])) == 0) *out = all[i];
    if (*out == BRG_PROBLEM_AUTO)
        return brg_error(BRG_ERR_FORMAT, "%s: problem_type '%s' is not one of regression, single_label_classification, "
                         "multi_label_classification", ctx, name);
    return BRG_OK;
}

/* One (name, id) entry of label2id, or of id2label read the other way round. */
static brg_status add_name(brg_label_map *m, const char *ctx, const char *name, const char *id_text, const cJSON *id) {
    int64_t v = -1;
    char *end = NULL;
    if (id) {
        if (!brg_json_integer(id, &v)) return brg_error(BRG_ERR_FORMAT, "%s: label2id['%s'] is not an integer", ctx, name);
    } else {
        v = strtoll(id_text, &end, 10);
        if (!*id_text || *end) return brg_error(BRG_ERR_FORMAT, "%s: id2label key '%s' is not an integer", ctx, id_text);
    }
    if (v < 0 || v >= m->num_labels)
        return brg_error(BRG_ERR_FORMAT, "%s: label '%s' has id %lld, outside [0, num_labels = %lld)", ctx, name,
                         (long long)v, (long long)m->num_labels);
    m->ids[m->n_names] = v;
    if (!(m->names[m->n_names] = strdup(name))) return brg_error(BRG_ERR_OOM, "no memory for label names");
    m->n_names++;
    return BRG_OK;
}

static brg_status read_names(const cJSON *j, const char *ctx, brg_label_map *m) {
    const cJSON *label2id = cJSON_GetObjectItemCaseSensitive(j, "label2id");
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    const bool by_name = cJSON_IsObject(label2id) && cJSON_GetArraySize(label2id) > 0;
    const cJSON *table = by_name ? label2id : cJSON_IsObject(id2label) ? id2label : NULL;
    if (!table) return BRG_OK;
    int n = cJSON_GetArraySize(table);
    m->names = calloc((size_t)n, sizeof *m->names);
    m->ids = calloc((size_t)n, sizeof *m->ids);
    if (!m->names || !m->ids) return brg_error(BRG_ERR_OOM, "no memory for label names");
    for (const cJSON *e = table->child; e; e = e->next) {
        if (by_name) BRG_TRY(add_name(m, ctx, e->string, NULL, e));
        else if (!cJSON_IsString(e)) return brg_error(BRG_ERR_FORMAT, "%s: id2label['%s'] is not a string", ctx, e->string);
        else BRG_TRY(add_name(m, ctx, e->valuestring, e->string, NULL));
    }
    return BRG_OK;
}

static brg_status read_map(const cJSON *j, const char *ctx, brg_label_map *m) {
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    int64_t n = 2;
    BRG_TRY(brg_json_get_int(j, ctx, "num_labels", false, 2, &n));
    if (cJSON_IsObject(id2label) && cJSON_GetArraySize(id2label) > 0) n = cJSON_GetArraySize(id2label);
    if (n < 1) return brg_error(BRG_ERR_FORMAT, "%s: num_labels must be at least 1 (got %lld)", ctx, (long long)n);
    m->num_labels = n;
    BRG_TRY(read_problem(j, ctx, &m->problem));
    return read_names(j, ctx, m);
}

brg_status brg_label_map_load(const char *model_dir, brg_label_map *out) {
    memset(out, 0, sizeof *out);
    char dir[4096], path[4200];
    BRG_TRY(brg_hf_resolve(model_dir, dir, sizeof dir));
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, &j));
    brg_status st = read_map(j, path, out);
    cJSON_Delete(j);
    if (st != BRG_OK) brg_label_map_free(out);
    return st;
}
