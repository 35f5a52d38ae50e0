/* Masked-LM text as transformers' run_mlm.py prepares it: examples encoded with special tokens
 * (whose positions, like padding, are never masked), grouped into rows of seq_len with the tail
 * dropped, or one row per non-blank line (--line_by_line). Masks are drawn per step from the
 * stored rows (mlm_masking.c). */
#include <stdlib.h>
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "data/data_internal.h"
#include "data/records.h"
#include "data/text_rows.h"

static bool blank(const char *s) {
    for (; *s; s++)
        if (!strchr(" \t\r\n\v\f", *s)) return false;
    return true;
}

/* Appends the encoding's tokens to the rows, starting a row whenever one is full. */
static brg_status group(text_rows *rows, const brg_encoding *enc, const brg_text_format *fmt, int64_t line) {
    for (size_t i = 0; i < enc->n; i++) {
        if (rows->used == rows->seq) {
            BRG_TRY(text_rows_end(rows, fmt, line));
            BRG_TRY(text_rows_begin(rows));
        }
        text_rows_push(rows, enc, i);
    }
    return BRG_OK;
}

static brg_status read_examples(records *r, brg_tokenizer *tok, const brg_text_format *fmt, bool line_by_line,
                                text_rows *rows) {
    if (!line_by_line) BRG_TRY(text_rows_begin(rows));
    int64_t line = 0;
    for (;;) {
        const cJSON *obj;
        BRG_TRY(records_next(r, &obj, &line));
        if (!obj) break;
        const char *text;
        BRG_TRY(records_string(obj, line, "text", true, &text));
        if (line_by_line && blank(text)) continue;
        brg_encoding enc;
        brg_status st = brg_tokenizer_encode(tok, text, strlen(text), true, &enc);
        if (st != BRG_OK) return brg_error_wrap(st, "line %lld", (long long)line);
        st = line_by_line ? text_rows_add(rows, &enc, fmt, line) : group(rows, &enc, fmt, line);
        brg_encoding_free(&enc);
        BRG_TRY(st);
    }
    /* The last row counts only when full, as group_texts drops the remainder. */
    if (!line_by_line && rows->used == rows->seq) BRG_TRY(text_rows_end(rows, fmt, line));
    return BRG_OK;
}

static brg_status build(const text_rows *rows, const brg_text_format *fmt, const brg_mlm_masking *masking,
                        brg_dataset *d) {
    BRG_TRY(text_rows_columns(rows, fmt, d));
    const int64_t shape[2] = {rows->n, rows->seq};
    brg_tensor *labels_t;
    BRG_TRY(data_add_column(d, &labels_t, BRG_DTYPE_I32, 2, shape, "labels", NULL));
    int32_t *labels = labels_t->data;
    for (int64_t i = 0; i < rows->n * rows->seq; i++) labels[i] = -100;
    uint8_t *never = brg_arena_alloc(d->arena, (size_t)(rows->n * rows->seq), "never_mask");
    brg_mlm_masking *m = brg_arena_alloc(d->arena, sizeof *m, "masking");
    if (!never || !m) return brg_error(BRG_ERR_OOM, "no memory for the masking of %lld rows", (long long)rows->n);
    memcpy(never, rows->special, (size_t)(rows->n * rows->seq));
    *m = *masking;
    d->never_mask = never;
    d->masking = m;
    return BRG_OK;
}

brg_status brg_dataset_load_text_mlm(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                     const brg_mlm_masking *masking, bool line_by_line, brg_dataset **out) {
    *out = NULL;
    if (fmt->seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "rows of %lld tokens: give at least 1", (long long)fmt->seq_len);
    BRG_TRY(brg_mlm_masking_validate(masking));
    records *r;
    brg_status st = records_open(path, &r);
    if (st != BRG_OK) return brg_error_wrap(st, "dataset %s", path);
    text_tok_state saved;
    text_rows rows;
    text_rows_init(&rows, fmt->seq_len);
    st = text_tok_begin(tok, line_by_line ? (size_t)fmt->seq_len : 0, BRG_TRUNC_LONGEST_FIRST, &saved);
    if (st == BRG_OK) {
        st = read_examples(r, tok, fmt, line_by_line, &rows);
        text_tok_end(tok, &saved);
    }
    records_close(r);
    if (st == BRG_OK && rows.n == 0)
        st = line_by_line ? brg_error(BRG_ERR_FORMAT, "no examples in the file (every line is blank)")
                          : brg_error(BRG_ERR_INVALID_ARG, "the file's tokens make no row of %lld", (long long)fmt->seq_len);
    if (st == BRG_OK) st = data_dataset_new(out);
    if (st == BRG_OK && (st = build(&rows, fmt, masking, *out)) != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
    }
    text_rows_free(&rows);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "dataset %s", path);
}

void brg_dataset_fix_masks(brg_dataset *d) {
    if (!d->masking) return;
    const int64_t T = d->seq_len;
    int32_t *ids = brg_tensor_map_get(&d->columns, "input_ids")->data;
    int32_t *labels = brg_tensor_map_get(&d->columns, "labels")->data;
    for (int64_t r = 0; r < d->rows; r++)
        brg_mlm_mask_row(d->masking, 0, r, ids + r * T, d->never_mask + r * T, labels + r * T, T);
    d->masking = NULL;
}
