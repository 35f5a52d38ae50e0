/* Examples of .jsonl, .csv and plain text files as JSON objects, so every text loader reads its
 * fields one way whatever the file. */
#include "data/records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/csv.h"
#include "io/json.h"

struct records {
    records_kind kind;
    FILE *f;
    csv_reader csv;
    char **header;
    size_t n_columns;
    char *line;
    size_t line_cap;
    int64_t line_no;
    cJSON *current;
};

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static brg_status check_utf8(const char *s, int64_t line) {
    size_t bad;
    if (!brg_utf8_valid(s, strlen(s), &bad))
        return brg_error(BRG_ERR_FORMAT, "line %lld: not valid UTF-8 (byte %zu of the line)", (long long)line, bad);
    return BRG_OK;
}

static brg_status read_header(records *r) {
    bool eof;
    BRG_TRY(csv_next(&r->csv, &eof));
    if (eof) return brg_error(BRG_ERR_FORMAT, "empty CSV file: expected a header line naming the columns");
    r->n_columns = r->csv.n_fields;
    r->header = calloc(r->n_columns, sizeof *r->header);
    if (!r->header) return brg_error(BRG_ERR_OOM, "no memory for the CSV header");
    for (size_t i = 0; i < r->n_columns; i++) {
        BRG_TRY(check_utf8(r->csv.fields[i], r->csv.record_line));
        for (size_t k = 0; k < i; k++)
            if (strcmp(r->header[k], r->csv.fields[i]) == 0)
                return brg_error(BRG_ERR_FORMAT, "line %lld: the header names column '%s' twice",
                                 (long long)r->csv.record_line, r->header[k]);
        if (!(r->header[i] = strdup(r->csv.fields[i]))) return brg_error(BRG_ERR_OOM, "no memory for the CSV header");
    }
    return BRG_OK;
}

brg_status records_open(const char *path, records **out) {
    *out = NULL;
    records *r = calloc(1, sizeof *r);
    if (!r) return brg_error(BRG_ERR_OOM, "no memory to read it");
    r->kind = ends_with(path, ".jsonl") ? RECORDS_JSONL : ends_with(path, ".csv") ? RECORDS_CSV : RECORDS_LINES;
    r->f = fopen(path, "rb");
    if (!r->f) {
        free(r);
        return brg_error(errno == ENOENT ? BRG_ERR_NOT_FOUND : BRG_ERR_IO, "cannot open it: %s", strerror(errno));
    }
    brg_status st = BRG_OK;
    if (r->kind == RECORDS_CSV) {
        csv_init(&r->csv, r->f);
        st = read_header(r);
    }
    if (st != BRG_OK) records_close(r);
    else *out = r;
    return st;
}

void records_close(records *r) {
    if (!r) return;
    if (r->kind == RECORDS_CSV) csv_free(&r->csv);
    for (size_t i = 0; r->header && i < r->n_columns; i++) free(r->header[i]);
    free(r->header);
    if (r->f) fclose(r->f);
    free(r->line);
    cJSON_Delete(r->current);
    free(r);
}

records_kind records_kind_of(const records *r) { return r->kind; }

/* The next line without its line break; false at the end of the file. */
static bool next_line(records *r, size_t *len) {
    ssize_t n = getline(&r->line, &r->line_cap, r->f);
    if (n < 0) return false;
    r->line_no++;
    if (n && r->line[n - 1] == '\n') r->line[--n] = '\0';
    if (n && r->line[n - 1] == '\r') r->line[--n] = '\0';
    *len = (size_t)n;
    return true;
}

static brg_status parse_json_line(records *r) {
    char ctx[48];
    snprintf(ctx, sizeof ctx, "line %lld", (long long)r->line_no);
    BRG_TRY(check_utf8(r->line, r->line_no));
    const char *end = NULL;
    r->current = cJSON_ParseWithOpts(r->line, &end, true);
    if (!r->current)
        return brg_error(BRG_ERR_FORMAT, "%s: invalid JSON at column %zu", ctx,
                         (size_t)((end ? end : r->line) - r->line) + 1);
    if (!cJSON_IsObject(r->current)) return brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", ctx);
    return brg_json_check_duplicates(r->current, ctx);
}

static brg_status next_jsonl(records *r, bool *eof) {
    size_t len;
    while ((*eof = !next_line(r, &len)) == false) {
        size_t i = 0;
        while (i < len && (r->line[i] == ' ' || r->line[i] == '\t')) i++;
        if (i < len) return parse_json_line(r); /* blank lines separate nothing */
    }
    return BRG_OK;
}

static brg_status next_text_line(records *r, bool *eof) {
    size_t len;
    if ((*eof = !next_line(r, &len))) return BRG_OK;
    BRG_TRY(check_utf8(r->line, r->line_no));
    r->current = cJSON_CreateObject();
    if (!r->current || !cJSON_AddStringToObject(r->current, "text", r->line))
        return brg_error(BRG_ERR_OOM, "line %lld: no memory", (long long)r->line_no);
    return BRG_OK;
}

static brg_status next_csv(records *r, bool *eof) {
    BRG_TRY(csv_next(&r->csv, eof));
    if (*eof) return BRG_OK;
    r->line_no = r->csv.record_line;
    if (r->csv.n_fields != r->n_columns)
        return brg_error(BRG_ERR_FORMAT, "line %lld: %zu fields, but the header names %zu columns",
                         (long long)r->line_no, r->csv.n_fields, r->n_columns);
    r->current = cJSON_CreateObject();
    if (!r->current) return brg_error(BRG_ERR_OOM, "line %lld: no memory", (long long)r->line_no);
    for (size_t i = 0; i < r->n_columns; i++) {
        BRG_TRY(check_utf8(r->csv.fields[i], r->line_no));
        if (!cJSON_AddStringToObject(r->current, r->header[i], r->csv.fields[i]))
            return brg_error(BRG_ERR_OOM, "line %lld: no memory", (long long)r->line_no);
    }
    return BRG_OK;
}

brg_status records_next(records *r, const cJSON **obj, int64_t *line) {
    cJSON_Delete(r->current);
    r->current = NULL;
    *obj = NULL;
    bool eof = false;
    brg_status st = r->kind == RECORDS_JSONL ? next_jsonl(r, &eof)
                    : r->kind == RECORDS_CSV ? next_csv(r, &eof)
                                             : next_text_line(r, &eof);
    *line = r->line_no;
    if (st == BRG_OK && !eof && ferror(r->f)) st = brg_error(BRG_ERR_IO, "line %lld: read failed", (long long)r->line_no);
    if (st == BRG_OK && eof && ferror(r->f)) st = brg_error(BRG_ERR_IO, "read failed after line %lld", (long long)r->line_no);
    if (st == BRG_OK && !eof) *obj = r->current;
    return st;
}

brg_status records_string(const cJSON *obj, int64_t line, const char *key, bool required, const char **out) {
    char ctx[48];
    snprintf(ctx, sizeof ctx, "line %lld", (long long)line);
    return brg_json_get_string(obj, ctx, key, required, NULL, out);
}
