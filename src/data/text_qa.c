/* Question answering as transformers' run_qa.py prepare_train_features makes its features: the
 * left-stripped question and the context encoded as a pair; a context too long for the row is
 * cut into windows (only_second truncation with return_overflowing_tokens: each window starts
 * row - doc_stride context tokens after the previous one, every one holding the whole
 * question); each window's start/end positions are the tokens covering the first answer's
 * characters, found from the offsets as run_qa walks them, or the CLS token where the window
 * does not hold the whole answer. */
#include <stdlib.h>
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "data/data_internal.h"
#include "data/squad.h"
#include "data/text_rows.h"

/* ---- characters: SQuAD's answer_start counts code points, as Python's str does ---- */

/* The code point at s (0 at the end) and its length in bytes; the text is valid UTF-8. */
static uint32_t decode(const char *s, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) {
        *len = u[0] ? 1 : 0;
        return u[0];
    }
    *len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : 2;
    uint32_t c = u[0] & (0x3F >> (*len - 1));
    for (size_t i = 1; i < *len; i++) c = (c << 6) | (u[i] & 0x3F);
    return c;
}

/* Python's str.isspace. */
static bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* run_qa's question.lstrip(): long runs of left spaces would waste the row's tokens. */
static const char *lstrip(const char *s) {
    size_t len;
    while (*s && is_space(decode(s, &len))) s += len;
    return s;
}

static int64_t code_points(const char *s) {
    int64_t n = 0;
    for (size_t len; *s; s += len, n++) decode(s, &len);
    return n;
}

/* The byte offset of code point `cp` of s (s has at least cp of them). */
static size_t byte_offset(const char *s, int64_t cp) {
    size_t at = 0, len;
    for (int64_t i = 0; i < cp; i++, at += len) decode(s + at, &len);
    return at;
}

/* The answer's characters [*start, *end) of the context: inside it and spelling the answer. */
static brg_status answer_span(const squad_example *ex, int64_t *start, int64_t *end) {
    const int64_t n_context = code_points(ex->context), n_answer = code_points(ex->answer);
    if (ex->answer_start < 0 || ex->answer_start + n_answer > n_context)
        return brg_error(BRG_ERR_FORMAT, "%s: answer_start %lld puts the answer's %lld characters outside the context (%lld characters)",
                         ex->where, (long long)ex->answer_start, (long long)n_answer, (long long)n_context);
    const char *at = ex->context + byte_offset(ex->context, ex->answer_start);
    const size_t shown = byte_offset(at, n_answer);
    if (shown != strlen(ex->answer) || memcmp(at, ex->answer, shown) != 0)
        return brg_error(BRG_ERR_FORMAT, "%s: answer '%.60s' is not the context's text at answer_start %lld ('%.*s')",
                         ex->where, ex->answer, (long long)ex->answer_start, (int)(shown < 60 ? shown : 60), at);
    *start = ex->answer_start;
    *end = ex->answer_start + n_answer;
    return BRG_OK;
}

/* ---- features ---- */

typedef struct qa_features {
    text_rows rows;
    int32_t *start, *end; /* start_positions, end_positions, one per row */
    int64_t cap;
} qa_features;

static brg_status positions_grow(qa_features *f) {
    if (f->rows.n < f->cap) return BRG_OK;
    const int64_t cap = f->cap ? 2 * f->cap : 64;
    int32_t *start = realloc(f->start, (size_t)cap * sizeof *start);
    if (start) f->start = start;
    int32_t *end = start ? realloc(f->end, (size_t)cap * sizeof *end) : NULL;
    if (!end) return brg_error(BRG_ERR_OOM, "no memory for %lld answer positions", (long long)cap);
    f->end = end;
    f->cap = cap;
    return BRG_OK;
}

/* What every window of one example shares: the full pair encoding and where its context lies. */
typedef struct qa_example {
    const squad_example *ex;
    const brg_encoding *enc;
    size_t context_first, context_end; /* enc's tokens of sequence 1: [first, end) */
    bool answered;
    int64_t start_char, end_char;
} qa_example;

typedef struct qa_setup {
    const brg_text_format *fmt;
    int64_t doc_stride;
    int32_t cls_id; /* -1: the tokenizer has none */
} qa_setup;

static void context_span(const brg_encoding *e, size_t *first, size_t *end) {
    *first = *end = e->n;
    for (size_t i = 0; i < e->n; i++)
        if (e->sequence_ids[i] == 1) {
            if (*first == e->n) *first = i;
            *end = i + 1;
        }
    if (*first == e->n) *first = *end = e->n; /* no context tokens: everything is the question's */
}

/* run_qa's walk over the window's offsets (offsets[i] of its row, (0, 0) past the tokens). */
static void answer_tokens(const int64_t (*off)[2], int64_t T, int64_t first, int64_t last, const qa_example *q,
                          int32_t cls, int32_t *start, int32_t *end) {
    *start = *end = cls;
    if (!q->answered || last < first) return;
    if (!(off[first][0] <= q->start_char && off[last][1] >= q->end_char)) return;
    while (first < T && off[first][0] <= q->start_char) first++;
    while (last >= 0 && off[last][1] >= q->end_char) last--;
    *start = (int32_t)(first - 1);
    *end = (int32_t)(last + 1);
}

/* The row of one window: the question's part of the encoding, context tokens [from, to), the rest. */
static brg_status add_window(qa_features *f, const qa_example *q, const qa_setup *s, size_t from, size_t to) {
    const brg_encoding *e = q->enc;
    const int64_t T = s->fmt->seq_len;
    const size_t n = q->context_first + (to - from) + (e->n - q->context_end);
    if ((int64_t)n < T && s->fmt->pad_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %zu tokens need padding to %lld and there is no pad token (set "
                         "pad_token_id in config.json)", q->ex->where, n, (long long)T);
    BRG_TRY(text_rows_begin(&f->rows));
    BRG_TRY(positions_grow(f));
    int64_t (*off)[2] = calloc((size_t)T, sizeof *off);
    if (!off) return brg_error(BRG_ERR_OOM, "no memory for a row's offsets");
    int32_t cls = 0;
    bool found_cls = false;
    for (size_t i = 0; i < e->n; i++) {
        const bool question_side = i < q->context_first || i >= q->context_end;
        if (!question_side && (i < q->context_first + from || i >= q->context_first + to)) continue;
        const int64_t at = f->rows.used;
        off[at][0] = e->offsets[i][0];
        off[at][1] = e->offsets[i][1];
        if (!found_cls && e->ids[i] == s->cls_id) {
            cls = (int32_t)at;
            found_cls = true;
        }
        text_rows_push(&f->rows, e, i);
    }
    const int64_t first = (int64_t)q->context_first, last = first + (int64_t)(to - from) - 1;
    answer_tokens((const int64_t(*)[2])off, T, first, last, q, cls, &f->start[f->rows.n], &f->end[f->rows.n]);
    free(off);
    return text_rows_end(&f->rows, s->fmt, 0); /* ids and padding were checked, naming the example */
}

/* One row, or windows of `room` context tokens, each `room - doc_stride` after the last. */
static brg_status add_windows(qa_features *f, const qa_example *q, const qa_setup *s) {
    const size_t n_context = q->context_end - q->context_first, T = (size_t)s->fmt->seq_len;
    if (q->enc->n <= T) return add_window(f, q, s, 0, n_context);
    const size_t fixed = q->enc->n - n_context;
    if (fixed >= T)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: the question and special tokens take %zu of the %zu tokens of a "
                         "row: no room for the context", q->ex->where, fixed, T);
    const size_t room = T - fixed;
    if ((size_t)s->doc_stride >= room)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: --doc-stride %lld must be less than the %zu context tokens a row "
                         "holds next to this question", q->ex->where, (long long)s->doc_stride, room);
    for (size_t from = 0;; from += room - (size_t)s->doc_stride) {
        const size_t to = from + room < n_context ? from + room : n_context;
        BRG_TRY(add_window(f, q, s, from, to));
        if (to == n_context) return BRG_OK;
    }
}

static brg_status check_ids(const brg_encoding *e, const squad_example *ex, const brg_text_format *fmt) {
    for (size_t i = 0; i < e->n; i++)
        if (e->ids[i] < 0 || e->ids[i] >= fmt->vocab_size)
            return brg_error(BRG_ERR_INVALID_ARG, "%s: token id %d is past the model's vocabulary of %lld", ex->where,
                             e->ids[i], (long long)fmt->vocab_size);
    return BRG_OK;
}

static brg_status add_example(qa_features *f, brg_tokenizer *tok, const squad_example *ex, const qa_setup *s) {
    qa_example q = {.ex = ex, .answered = ex->answer != NULL};
    if (q.answered) BRG_TRY(answer_span(ex, &q.start_char, &q.end_char));
    const char *question = lstrip(ex->question);
    brg_encoding enc;
    brg_status st = brg_tokenizer_encode_pair(tok, question, strlen(question), ex->context, strlen(ex->context), true, &enc);
    if (st != BRG_OK) return brg_error_wrap(st, "%s", ex->where);
    q.enc = &enc;
    context_span(&enc, &q.context_first, &q.context_end);
    st = check_ids(&enc, ex, s->fmt);
    if (st == BRG_OK) st = add_windows(f, &q, s);
    brg_encoding_free(&enc);
    return st;
}

static brg_status read_examples(squad_reader *r, brg_tokenizer *tok, const qa_setup *s, qa_features *f) {
    for (;;) {
        squad_example ex;
        bool done;
        BRG_TRY(squad_next(r, &ex, &done));
        if (done) return BRG_OK;
        BRG_TRY(add_example(f, tok, &ex, s));
    }
}

static brg_status build(const qa_features *f, const brg_text_format *fmt, brg_dataset *d) {
    BRG_TRY(text_rows_columns(&f->rows, fmt, d));
    const int64_t shape[1] = {f->rows.n};
    BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_I32, 1, shape, "start_positions", f->start));
    return data_add_column(d, NULL, BRG_DTYPE_I32, 1, shape, "end_positions", f->end);
}

static int32_t cls_token(const brg_tokenizer *tok) {
    const int32_t id = brg_tokenizer_token_to_id(tok, "[CLS]");
    return id >= 0 ? id : brg_tokenizer_token_to_id(tok, "<s>");
}

brg_status brg_dataset_load_text_qa(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                    int64_t doc_stride, brg_dataset **out) {
    *out = NULL;
    if (fmt->seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "rows of %lld tokens: give at least 1", (long long)fmt->seq_len);
    if (doc_stride < 0) return brg_error(BRG_ERR_INVALID_ARG, "--doc-stride %lld: give at least 0", (long long)doc_stride);
    squad_reader *r;
    brg_status st = squad_open(path, &r);
    if (st != BRG_OK && squad_open_names_path(path)) return brg_error_wrap(st, "dataset");
    if (st != BRG_OK) return brg_error_wrap(st, "dataset %s", path);
    const qa_setup setup = {.fmt = fmt, .doc_stride = doc_stride, .cls_id = cls_token(tok)};
    qa_features f = {0};
    text_rows_init(&f.rows, fmt->seq_len);
    text_tok_state saved;
    st = text_tok_begin(tok, 0, BRG_TRUNC_ONLY_SECOND, &saved); /* windows are cut here, not by the tokenizer */
    if (st == BRG_OK) {
        st = read_examples(r, tok, &setup, &f);
        text_tok_end(tok, &saved);
    }
    squad_close(r);
    if (st == BRG_OK && f.rows.n == 0) st = brg_error(BRG_ERR_FORMAT, "no examples in the file");
    if (st == BRG_OK) st = data_dataset_new(out);
    if (st == BRG_OK && (st = build(&f, fmt, *out)) != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
    }
    text_rows_free(&f.rows);
    free(f.start);
    free(f.end);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "dataset %s", path);
}
