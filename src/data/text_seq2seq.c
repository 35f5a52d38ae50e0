/* Seq2seq text as transformers' run_summarization.py prepares it: source_prefix + "source"
 * encoded with special tokens, truncated and padded to the row length; "target" encoded the
 * same way to max_target_length, its padding -100 so the loss skips it. The model shifts the
 * labels right into its decoder inputs (T5's _shift_right), so no decoder column is stored. */
#include <stdlib.h>
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "data/data_internal.h"
#include "data/records.h"
#include "data/text_rows.h"

/* Truncation to `len` tokens for the next encodes (sources and targets have their own). */
static brg_status truncate_to(brg_tokenizer *tok, int64_t len) {
    brg_truncation t = {.enabled = true, .max_length = (size_t)len, .strategy = BRG_TRUNC_LONGEST_FIRST};
    return brg_tokenizer_set_truncation(tok, &t);
}

static brg_status encode_source(brg_tokenizer *tok, const char *prefix, const char *source, int64_t line,
                                brg_encoding *enc) {
    const size_t np = strlen(prefix), ns = strlen(source);
    char *text = malloc(np + ns + 1);
    if (!text) return brg_error(BRG_ERR_OOM, "line %lld: no memory for the source", (long long)line);
    memcpy(text, prefix, np);
    memcpy(text + np, source, ns + 1);
    brg_status st = brg_tokenizer_encode(tok, text, np + ns, true, enc);
    free(text);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "line %lld", (long long)line);
}

static brg_status add_row(text_rows *rows, brg_encoding *enc, const brg_text_format *fmt, int64_t line) {
    brg_status st = text_rows_add(rows, enc, fmt, line);
    brg_encoding_free(enc);
    return st;
}

static brg_status add_example(brg_tokenizer *tok, const cJSON *obj, int64_t line, const brg_text_format *fmt,
                              const brg_text_format *target_fmt, const brg_seq2seq_format *s2s, text_rows *sources,
                              text_rows *targets) {
    const char *source, *target;
    BRG_TRY(records_string(obj, line, "source", true, &source));
    BRG_TRY(records_string(obj, line, "target", true, &target));
    brg_encoding enc;
    BRG_TRY(truncate_to(tok, fmt->seq_len));
    BRG_TRY(encode_source(tok, s2s->source_prefix ? s2s->source_prefix : "", source, line, &enc));
    BRG_TRY(add_row(sources, &enc, fmt, line));
    BRG_TRY(truncate_to(tok, s2s->max_target_length));
    brg_status st = brg_tokenizer_encode(tok, target, strlen(target), true, &enc);
    if (st != BRG_OK) return brg_error_wrap(st, "line %lld", (long long)line);
    return add_row(targets, &enc, target_fmt, line);
}

static brg_status read_examples(records *r, brg_tokenizer *tok, const brg_text_format *fmt,
                                const brg_seq2seq_format *s2s, text_rows *sources, text_rows *targets) {
    /* Target padding becomes -100, so targets pad with any id, whether or not there is a pad token. */
    brg_text_format target_fmt = *fmt;
    target_fmt.seq_len = s2s->max_target_length;
    if (target_fmt.pad_id < 0) target_fmt.pad_id = 0;
    for (;;) {
        const cJSON *obj;
        int64_t line;
        BRG_TRY(records_next(r, &obj, &line));
        if (!obj) return BRG_OK;
        BRG_TRY(add_example(tok, obj, line, fmt, &target_fmt, s2s, sources, targets));
    }
}

static brg_status build(const text_rows *sources, const text_rows *targets, const brg_text_format *fmt,
                        brg_dataset *d) {
    BRG_TRY(text_rows_columns(sources, fmt, d));
    const int64_t shape[2] = {targets->n, targets->seq};
    brg_tensor *labels_t;
    BRG_TRY(data_add_column(d, &labels_t, BRG_DTYPE_I32, 2, shape, "labels", targets->ids));
    int32_t *labels = labels_t->data;
    for (int64_t i = 0; i < targets->n * targets->seq; i++)
        if (targets->mask[i] == 0.0f) labels[i] = -100;
    return BRG_OK;
}

brg_status brg_dataset_load_text_seq2seq(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                         const brg_seq2seq_format *s2s, brg_dataset **out) {
    *out = NULL;
    if (fmt->seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "rows of %lld tokens: give at least 1", (long long)fmt->seq_len);
    if (s2s->max_target_length < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "targets of %lld tokens: give at least 1", (long long)s2s->max_target_length);
    records *r;
    brg_status st = records_open(path, &r);
    if (st != BRG_OK) return brg_error_wrap(st, "dataset %s", path);
    text_tok_state saved;
    text_rows sources, targets;
    text_rows_init(&sources, fmt->seq_len);
    text_rows_init(&targets, s2s->max_target_length);
    st = text_tok_begin(tok, (size_t)fmt->seq_len, BRG_TRUNC_LONGEST_FIRST, &saved);
    if (st == BRG_OK) {
        st = read_examples(r, tok, fmt, s2s, &sources, &targets);
        text_tok_end(tok, &saved);
    }
    records_close(r);
    if (st == BRG_OK && sources.n == 0) st = brg_error(BRG_ERR_FORMAT, "no examples in the file");
    if (st == BRG_OK) st = data_dataset_new(out);
    if (st == BRG_OK && (st = build(&sources, &targets, fmt, *out)) != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
    }
    text_rows_free(&sources);
    text_rows_free(&targets);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "dataset %s", path);
}
