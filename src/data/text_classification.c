/* Sequence classification from text, as transformers' run_classification.py prepares it: each
 * example's "text" (and "text_pair") encoded with special tokens, truncated longest first and
 * padded to the row length; its "label" a class id, a label2id name, a number (regression) or a
 * list of classes (multi-label). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "data/data_internal.h"
#include "data/records.h"
#include "data/text_rows.h"

typedef enum label_kind { SINGLE_LABEL, REGRESSION, MULTI_LABEL } label_kind;

static label_kind kind_of(const brg_label_map *m) {
    if (m->problem == BRG_PROBLEM_REGRESSION || (m->problem == BRG_PROBLEM_AUTO && m->num_labels == 1)) return REGRESSION;
    return m->problem == BRG_PROBLEM_MULTI_LABEL ? MULTI_LABEL : SINGLE_LABEL;
}

/* The labels read so far: one int or float per example, or num_labels floats (multi-hot). */
typedef struct label_list {
    int32_t *ids;
    float *values;
    int64_t n, cap, width;
} label_list;

static brg_status labels_grow(label_list *l, bool floats) {
    if (l->n < l->cap) return BRG_OK;
    int64_t cap = l->cap ? 2 * l->cap : 64;
    void *grown = floats ? realloc(l->values, (size_t)(cap * l->width) * sizeof(float))
                         : realloc(l->ids, (size_t)cap * sizeof(int32_t));
    if (!grown) return brg_error(BRG_ERR_OOM, "no memory for %lld labels", (long long)cap);
    if (floats) l->values = grown;
    else l->ids = grown;
    l->cap = cap;
    return BRG_OK;
}

/* The names a message lists: the first few of label2id. */
static void list_names(const brg_label_map *m, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < m->n_names && at + 1 < len; i++) {
        int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", m->names[i]);
        if (w < 0) break;
        at += (size_t)w;
        if (i == 7 && m->n_names > 8) {
            snprintf(buf + (at < len ? at : len - 1), at < len ? len - at : 1, ", ...");
            break;
        }
    }
}

static bool integer_text(const char *s, int64_t *out) {
    char *end;
    if (!*s) return false;
    long long v = strtoll(s, &end, 10);
    *out = v;
    return *end == '\0';
}

/* One class: an integer id or a label2id name (a string that is no name but an integer is an
 * id: CSV values are strings). */
static brg_status class_id(const cJSON *v, int64_t line, const brg_label_map *m, int32_t *out) {
    int64_t id = -1;
    if (cJSON_IsString(v)) {
        bool named = false;
        for (int64_t i = 0; i < m->n_names && !named; i++)
            if (strcmp(m->names[i], v->valuestring) == 0) {
                id = m->ids[i];
                named = true;
            }
        if (!named && !integer_text(v->valuestring, &id)) {
            char names[256];
            list_names(m, names, sizeof names);
            return brg_error(BRG_ERR_FORMAT, "line %lld: label '%s' is not one of config.json's label2id names (%s)",
                             (long long)line, v->valuestring, m->n_names ? names : "none given");
        }
    } else if (cJSON_IsNumber(v)) {
        if (v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 1e15)
            return brg_error(BRG_ERR_FORMAT, "line %lld: label %g is not a class id (an integer)", (long long)line,
                             v->valuedouble);
        id = (int64_t)v->valuedouble;
    } else {
        return brg_error(BRG_ERR_FORMAT, "line %lld: label must be a class id or a label name", (long long)line);
    }
    if (id < 0 || id >= m->num_labels)
        return brg_error(BRG_ERR_FORMAT, "line %lld: label %lld is outside the model's %lld classes [0, %lld)",
                         (long long)line, (long long)id, (long long)m->num_labels, (long long)m->num_labels);
    *out = (int32_t)id;
    return BRG_OK;
}

static brg_status regression_value(const cJSON *v, int64_t line, float *out) {
    char *end = NULL;
    double d = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsString(v) ? strtod(v->valuestring, &end) : NAN;
    if (cJSON_IsString(v) && (!*v->valuestring || *end)) d = NAN;
    if (!isfinite(d))
        return brg_error(BRG_ERR_FORMAT, "line %lld: a regression model (num_labels 1) takes a number as label",
                         (long long)line);
    *out = (float)d;
    return BRG_OK;
}

static brg_status multi_hot(const cJSON *v, int64_t line, const brg_label_map *m, float *row) {
    if (!cJSON_IsArray(v))
        return brg_error(BRG_ERR_FORMAT, "line %lld: a multi-label model takes a list of labels (JSON), e.g. [0, 2]",
                         (long long)line);
    memset(row, 0, (size_t)m->num_labels * sizeof *row);
    for (const cJSON *e = v->child; e; e = e->next) {
        int32_t id;
        BRG_TRY(class_id(e, line, m, &id));
        row[id] = 1.0f;
    }
    return BRG_OK;
}

static brg_status add_label(label_list *l, const cJSON *obj, int64_t line, const brg_label_map *m, label_kind kind) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "label");
    if (!v || cJSON_IsNull(v)) return brg_error(BRG_ERR_FORMAT, "line %lld: missing field 'label'", (long long)line);
    BRG_TRY(labels_grow(l, kind != SINGLE_LABEL));
    brg_status st = kind == SINGLE_LABEL ? class_id(v, line, m, &l->ids[l->n])
                    : kind == REGRESSION ? regression_value(v, line, &l->values[l->n])
                                         : multi_hot(v, line, m, &l->values[l->n * l->width]);
    if (st == BRG_OK) l->n++;
    return st;
}

static brg_status encode_example(brg_tokenizer *tok, const cJSON *obj, int64_t line, brg_encoding *enc) {
    const char *text, *pair;
    BRG_TRY(records_string(obj, line, "text", true, &text));
    BRG_TRY(records_string(obj, line, "text_pair", false, &pair));
    if (pair && !*pair) pair = NULL; /* an empty CSV cell: no pair, as datasets reads it */
    brg_status st = pair ? brg_tokenizer_encode_pair(tok, text, strlen(text), pair, strlen(pair), true, enc)
                         : brg_tokenizer_encode(tok, text, strlen(text), true, enc);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "line %lld", (long long)line);
}

static brg_status read_examples(records *r, brg_tokenizer *tok, const brg_text_format *fmt, const brg_label_map *m,
                                text_rows *rows, label_list *labels) {
    const label_kind kind = kind_of(m);
    for (;;) {
        const cJSON *obj;
        int64_t line;
        BRG_TRY(records_next(r, &obj, &line));
        if (!obj) return BRG_OK;
        brg_encoding enc;
        BRG_TRY(encode_example(tok, obj, line, &enc));
        brg_status st = text_rows_add(rows, &enc, fmt, line);
        brg_encoding_free(&enc);
        BRG_TRY(st);
        BRG_TRY(add_label(labels, obj, line, m, kind));
    }
}

static brg_status build(const text_rows *rows, const label_list *labels, const brg_text_format *fmt, label_kind kind,
                        brg_dataset **out) {
    BRG_TRY(data_dataset_new(out));
    brg_status st = text_rows_columns(rows, fmt, *out);
    const int64_t shape[2] = {labels->n, labels->width};
    if (st == BRG_OK)
        st = kind == SINGLE_LABEL ? data_add_column(*out, NULL, BRG_DTYPE_I32, 1, shape, "labels", labels->ids)
                                  : data_add_column(*out, NULL, BRG_DTYPE_F32, kind == MULTI_LABEL ? 2 : 1, shape,
                                                    "labels", labels->values);
    if (st != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
    }
    return st;
}

brg_status brg_dataset_load_text_classification(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                                const brg_label_map *labels, brg_dataset **out) {
    *out = NULL;
    if (fmt->seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "rows of %lld tokens: give at least 1", (long long)fmt->seq_len);
    records *r;
    brg_status opened = records_open(path, &r);
    if (opened != BRG_OK) return brg_error_wrap(opened, "dataset %s", path);
    text_tok_state saved;
    text_rows rows;
    text_rows_init(&rows, fmt->seq_len);
    const label_kind kind = kind_of(labels);
    label_list list = {.width = kind == MULTI_LABEL ? labels->num_labels : 1};
    brg_status st = text_tok_begin(tok, (size_t)fmt->seq_len, BRG_TRUNC_LONGEST_FIRST, &saved);
    if (st == BRG_OK) {
        st = read_examples(r, tok, fmt, labels, &rows, &list);
        text_tok_end(tok, &saved);
    }
    if (st == BRG_OK && rows.n == 0) st = brg_error(BRG_ERR_FORMAT, "no examples in the file");
    if (st == BRG_OK) st = build(&rows, &list, fmt, kind, out);
    records_close(r);
    text_rows_free(&rows);
    free(list.ids);
    free(list.values);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "dataset %s", path);
}
