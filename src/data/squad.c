/* SQuAD examples from both forms they are shared in: the nested .json file the dataset was
 * published as, and the flattened rows (one JSON object a line) the hub's datasets hold. */
#include "data/squad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "data/records.h"
#include "io/json.h"

/* SQuAD v2.0's train file is 40 MB; a file past this is not one. */
#define SQUAD_MAX_BYTES ((size_t)1 << 30)

struct squad_reader {
    records *lines; /* the flattened form; NULL for the nested one */
    cJSON *root;
    const cJSON *articles, *paragraphs, *qas;
    int article, paragraph, qa; /* the next qa is qas[qa] of paragraphs[paragraph] of articles[article] */
};

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

bool squad_open_names_path(const char *path) { return ends_with(path, ".json"); }

static brg_status open_nested(const char *path, squad_reader *r) {
    BRG_TRY(brg_json_load_file(path, SQUAD_MAX_BYTES, &r->root));
    r->articles = cJSON_GetObjectItemCaseSensitive(r->root, "data");
    if (!cJSON_IsArray(r->articles))
        return brg_error(BRG_ERR_FORMAT, "%s: a SQuAD file is {\"data\": [{\"paragraphs\": [...]}, ...]}: no \"data\" list",
                         path);
    r->article = r->paragraph = r->qa = -1;
    return BRG_OK;
}

brg_status squad_open(const char *path, squad_reader **out) {
    *out = NULL;
    squad_reader *r = calloc(1, sizeof *r);
    if (!r) return brg_error(BRG_ERR_OOM, "no memory to read it");
    brg_status st;
    if (ends_with(path, ".json")) {
        st = open_nested(path, r);
    } else {
        st = records_open(path, &r->lines);
        if (st == BRG_OK && records_kind_of(r->lines) != RECORDS_JSONL)
            st = brg_error(BRG_ERR_FORMAT, "question answering reads SQuAD's .json file or its rows as .jsonl");
    }
    if (st != BRG_OK) squad_close(r);
    else *out = r;
    return st;
}

void squad_close(squad_reader *r) {
    if (!r) return;
    records_close(r->lines);
    cJSON_Delete(r->root);
    free(r);
}

/* A list field of `obj`, named in messages by `where`. */
static brg_status list_field(const cJSON *obj, const char *where, const char *key, const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*out) return brg_error(BRG_ERR_FORMAT, "%s: missing field '%s'", where, key);
    if (!cJSON_IsArray(*out)) return brg_error(BRG_ERR_FORMAT, "%s: field '%s' must be a list", where, key);
    return BRG_OK;
}

static brg_status object_at(const cJSON *list, int i, const char *where, const cJSON **out) {
    *out = cJSON_GetArrayItem(list, i);
    if (!cJSON_IsObject(*out)) return brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", where);
    return BRG_OK;
}

static brg_status common_fields(const cJSON *obj, squad_example *ex) {
    BRG_TRY(brg_json_get_string(obj, ex->where, "id", false, NULL, &ex->id));
    return brg_json_get_string(obj, ex->where, "question", true, NULL, &ex->question);
}

/* ---- the nested form ---- */

/* Moves to the next qa, entering the next paragraph or article when one is used up; false at the end. */
static brg_status advance(squad_reader *r, bool *more) {
    char where[128];
    while (!r->qas || ++r->qa >= cJSON_GetArraySize(r->qas)) {
        r->qas = NULL;
        r->qa = -1;
        while (!r->paragraphs || ++r->paragraph >= cJSON_GetArraySize(r->paragraphs)) {
            r->paragraphs = NULL;
            r->paragraph = -1;
            if (++r->article >= cJSON_GetArraySize(r->articles)) {
                *more = false;
                return BRG_OK;
            }
            const cJSON *a;
            snprintf(where, sizeof where, "data[%d]", r->article);
            BRG_TRY(object_at(r->articles, r->article, where, &a));
            BRG_TRY(list_field(a, where, "paragraphs", &r->paragraphs));
        }
        const cJSON *p;
        snprintf(where, sizeof where, "data[%d].paragraphs[%d]", r->article, r->paragraph);
        BRG_TRY(object_at(r->paragraphs, r->paragraph, where, &p));
        BRG_TRY(list_field(p, where, "qas", &r->qas));
    }
    *more = true;
    return BRG_OK;
}

static brg_status nested_answer(const cJSON *qa, squad_example *ex) {
    const cJSON *answers, *first;
    BRG_TRY(list_field(qa, ex->where, "answers", &answers));
    if (cJSON_GetArraySize(answers) == 0) return BRG_OK; /* unanswerable */
    char where[192];
    snprintf(where, sizeof where, "%s: answers[0]", ex->where);
    BRG_TRY(object_at(answers, 0, where, &first));
    BRG_TRY(brg_json_get_string(first, where, "text", true, NULL, &ex->answer));
    return brg_json_get_int(first, where, "answer_start", true, 0, &ex->answer_start);
}

static brg_status next_nested(squad_reader *r, squad_example *ex, bool *done) {
    bool more;
    BRG_TRY(advance(r, &more));
    if ((*done = !more)) return BRG_OK;
    const cJSON *p = cJSON_GetArrayItem(r->paragraphs, r->paragraph), *qa;
    snprintf(ex->where, sizeof ex->where, "data[%d].paragraphs[%d]", r->article, r->paragraph);
    BRG_TRY(brg_json_get_string(p, ex->where, "context", true, NULL, &ex->context));
    snprintf(ex->where, sizeof ex->where, "data[%d].paragraphs[%d].qas[%d]", r->article, r->paragraph, r->qa);
    BRG_TRY(object_at(r->qas, r->qa, ex->where, &qa));
    BRG_TRY(brg_json_get_string(qa, ex->where, "id", false, NULL, &ex->id));
    if (ex->id) { /* the id names the question for whoever looks for it in the file */
        const size_t n = strlen(ex->where);
        snprintf(ex->where + n, sizeof ex->where - n, " (id %.40s)", ex->id);
    }
    BRG_TRY(common_fields(qa, ex));
    return nested_answer(qa, ex);
}

/* ---- the flattened form ---- */

static brg_status flat_answer(const cJSON *obj, squad_example *ex) {
    const cJSON *answers = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    if (!answers) return brg_error(BRG_ERR_FORMAT, "%s: missing field 'answers'", ex->where);
    if (!cJSON_IsObject(answers))
        return brg_error(BRG_ERR_FORMAT, "%s: field 'answers' must be {\"text\": [...], \"answer_start\": [...]}",
                         ex->where);
    const cJSON *texts, *starts;
    BRG_TRY(list_field(answers, ex->where, "text", &texts));
    BRG_TRY(list_field(answers, ex->where, "answer_start", &starts));
    if (cJSON_GetArraySize(texts) != cJSON_GetArraySize(starts))
        return brg_error(BRG_ERR_FORMAT, "%s: answers has %d texts and %d answer_start values", ex->where,
                         cJSON_GetArraySize(texts), cJSON_GetArraySize(starts));
    if (!texts->child) return BRG_OK; /* unanswerable */
    if (!cJSON_IsString(texts->child))
        return brg_error(BRG_ERR_FORMAT, "%s: answers' text must be a list of strings", ex->where);
    if (!brg_json_integer(starts->child, &ex->answer_start))
        return brg_error(BRG_ERR_FORMAT, "%s: answers' answer_start must be a list of integers", ex->where);
    ex->answer = texts->child->valuestring;
    return BRG_OK;
}

static brg_status next_flat(squad_reader *r, squad_example *ex, bool *done) {
    const cJSON *obj;
    int64_t line;
    BRG_TRY(records_next(r->lines, &obj, &line));
    if ((*done = obj == NULL)) return BRG_OK;
    snprintf(ex->where, sizeof ex->where, "line %lld", (long long)line);
    BRG_TRY(common_fields(obj, ex));
    BRG_TRY(brg_json_get_string(obj, ex->where, "context", true, NULL, &ex->context));
    return flat_answer(obj, ex);
}

brg_status squad_next(squad_reader *r, squad_example *ex, bool *done) {
    memset(ex, 0, sizeof *ex);
    return r->lines ? next_flat(r, ex, done) : next_nested(r, ex, done);
}
