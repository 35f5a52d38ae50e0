/* RFC 4180 CSV, one record at a time. The fields of a record live in one buffer (NUL after
 * each), so a record costs no allocation once the buffers have grown to the longest one. */
#include "data/csv.h"

#include <stdlib.h>
#include <string.h>

void csv_init(csv_reader *r, FILE *f) {
    memset(r, 0, sizeof *r);
    r->f = f;
}

void csv_free(csv_reader *r) {
    free(r->buf);
    free(r->starts);
    free(r->fields);
    memset(r, 0, sizeof *r);
}

static brg_status put(csv_reader *r, char c) {
    if (r->buf_len == r->buf_cap) {
        size_t cap = r->buf_cap ? 2 * r->buf_cap : 256;
        char *grown = realloc(r->buf, cap);
        if (!grown) return brg_error(BRG_ERR_OOM, "line %lld: no memory for a CSV record", (long long)r->record_line);
        r->buf = grown;
        r->buf_cap = cap;
    }
    r->buf[r->buf_len++] = c;
    return BRG_OK;
}

static brg_status start_field(csv_reader *r) {
    if (r->n_fields == r->fields_cap) {
        size_t cap = r->fields_cap ? 2 * r->fields_cap : 16;
        size_t *starts = realloc(r->starts, cap * sizeof *starts);
        if (starts) r->starts = starts;
        char **fields = starts ? realloc(r->fields, cap * sizeof *fields) : NULL;
        if (!fields) return brg_error(BRG_ERR_OOM, "line %lld: no memory for a CSV record", (long long)r->record_line);
        r->fields = fields;
        r->fields_cap = cap;
    }
    r->starts[r->n_fields++] = r->buf_len;
    return BRG_OK;
}

/* A UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name. */
static void skip_bom(csv_reader *r) {
    r->started = true;
    unsigned char head[3];
    if (fread(head, 1, 3, r->f) == 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) return;
    rewind(r->f);
}

/* After '\r': a CRLF pair is one line break; a lone CR ends the record too. */
static void eat_lf(csv_reader *r) {
    int d = getc(r->f);
    if (d != '\n' && d != EOF) ungetc(d, r->f);
}

enum { AT_START, UNQUOTED, QUOTED, QUOTE_SEEN };

static brg_status parse_record(csv_reader *r) {
    int state = AT_START;
    int64_t quote_line = 0;
    BRG_TRY(start_field(r));
    for (;;) {
        int c = getc(r->f);
        if (state == QUOTED) {
            if (c == EOF)
                return brg_error(BRG_ERR_FORMAT, "line %lld: a quoted field is not closed before the end of the file",
                                 (long long)quote_line);
            if (c == '"') state = QUOTE_SEEN;
            else {
                if (c == '\n') r->line++;
                BRG_TRY(put(r, (char)c));
            }
            continue;
        }
        if (state == AT_START && c == '"') {
            state = QUOTED;
            quote_line = r->line;
            continue;
        }
        if (state == QUOTE_SEEN && c == '"') { /* a doubled quote inside quotes */
            BRG_TRY(put(r, '"'));
            state = QUOTED;
            continue;
        }
        if (c == ',') {
            BRG_TRY(put(r, '\0'));
            BRG_TRY(start_field(r));
            state = AT_START;
            continue;
        }
        if (c == '\n' || c == '\r' || c == EOF) {
            if (c == '\r') eat_lf(r);
            return put(r, '\0');
        }
        if (state == QUOTE_SEEN)
            return brg_error(BRG_ERR_FORMAT, "line %lld: text after the closing quote of field %zu (a quote inside a "
                             "quoted field is written twice: \"\")", (long long)r->line, r->n_fields);
        if (c == '"')
            return brg_error(BRG_ERR_FORMAT, "line %lld: a quote inside unquoted field %zu (quote the whole field "
                             "and write the quote twice: \"\")", (long long)r->line, r->n_fields);
        state = UNQUOTED;
        BRG_TRY(put(r, (char)c));
    }
}

brg_status csv_next(csv_reader *r, bool *eof) {
    if (!r->started) skip_bom(r);
    *eof = false;
    for (;;) {
        r->buf_len = 0;
        r->n_fields = 0;
        int c = getc(r->f);
        if (c == EOF) {
            if (ferror(r->f)) return brg_error(BRG_ERR_IO, "line %lld: read failed", (long long)r->line + 1);
            *eof = true;
            return BRG_OK;
        }
        r->line++;
        r->record_line = r->line;
        if (c == '\r') eat_lf(r);
        if (c == '\n' || c == '\r') continue; /* a blank line holds no record */
        ungetc(c, r->f);
        BRG_TRY(parse_record(r));
        if (ferror(r->f)) return brg_error(BRG_ERR_IO, "line %lld: read failed", (long long)r->line);
        for (size_t i = 0; i < r->n_fields; i++) r->fields[i] = r->buf + r->starts[i];
        return BRG_OK;
    }
}
