/* Padded rows of tokens for the text loaders: every row is seq tokens, padding after the text
 * (attention 0, type id 0), as transformers' padding="max_length" lays it out on the right. */
#include "data/text_rows.h"

#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

void text_rows_init(text_rows *r, int64_t seq) {
    memset(r, 0, sizeof *r);
    r->seq = seq;
}

void text_rows_free(text_rows *r) {
    free(r->ids);
    free(r->types);
    free(r->mask);
    free(r->special);
    memset(r, 0, sizeof *r);
}

static brg_status grow(text_rows *r) {
    int64_t cap = r->cap ? 2 * r->cap : 64;
    size_t n = (size_t)(cap * r->seq);
    int32_t *ids = realloc(r->ids, n * sizeof *ids);
    if (ids) r->ids = ids;
    int32_t *types = ids ? realloc(r->types, n * sizeof *types) : NULL;
    if (types) r->types = types;
    float *mask = types ? realloc(r->mask, n * sizeof *mask) : NULL;
    if (mask) r->mask = mask;
    uint8_t *special = mask ? realloc(r->special, n) : NULL;
    if (!special) return brg_error(BRG_ERR_OOM, "no memory for %lld rows of %lld tokens", (long long)cap, (long long)r->seq);
    r->special = special;
    r->cap = cap;
    return BRG_OK;
}

brg_status text_rows_begin(text_rows *r) {
    if (r->n == r->cap) BRG_TRY(grow(r));
    r->used = 0;
    return BRG_OK;
}

void text_rows_push(text_rows *r, const brg_encoding *enc, size_t i) {
    BRG_ASSERT(r->used < r->seq && i < enc->n);
    const int64_t at = r->n * r->seq + r->used++;
    r->ids[at] = enc->ids[i];
    r->types[at] = enc->type_ids[i];
    r->mask[at] = 1.0f;
    r->special[at] = enc->special_tokens_mask[i] != 0;
}

brg_status text_rows_end(text_rows *r, const brg_text_format *fmt, int64_t line) {
    const int64_t row = r->n * r->seq;
    for (int64_t t = 0; t < r->used; t++)
        if (r->ids[row + t] < 0 || r->ids[row + t] >= fmt->vocab_size)
            return brg_error(BRG_ERR_INVALID_ARG, "line %lld: token id %d is past the model's vocabulary of %lld",
                             (long long)line, r->ids[row + t], (long long)fmt->vocab_size);
    if (r->used < r->seq && fmt->pad_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "line %lld: %lld tokens need padding to %lld and there is no pad token (set pad_token_id in "
                         "config.json)",
                         (long long)line, (long long)r->used, (long long)r->seq);
    for (int64_t t = r->used; t < r->seq; t++) {
        r->ids[row + t] = fmt->pad_id;
        r->types[row + t] = 0;
        r->mask[row + t] = 0.0f;
        r->special[row + t] = 1;
    }
    r->n++;
    return BRG_OK;
}

brg_status text_rows_add(text_rows *r, const brg_encoding *enc, const brg_text_format *fmt, int64_t line) {
    BRG_TRY(text_rows_begin(r));
    for (size_t i = 0; i < enc->n; i++) text_rows_push(r, enc, i);
    return text_rows_end(r, fmt, line);
}

brg_status text_rows_columns(const text_rows *r, const brg_text_format *fmt, brg_dataset *d) {
    const int64_t shape[2] = {r->n, r->seq};
    d->rows = r->n;
    d->seq_len = r->seq;
    BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_I32, 2, shape, "input_ids", r->ids));
    BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_F32, 2, shape, "attention_mask", r->mask));
    if (fmt->token_type_ids)
        BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_I32, 2, shape, "token_type_ids", r->types));
    return BRG_OK;
}

brg_status text_tok_begin(brg_tokenizer *tok, size_t max_len, brg_trunc_strategy strategy, text_tok_state *saved) {
    saved->trunc = brg_tokenizer_get_truncation(tok);
    saved->pad = brg_tokenizer_get_padding(tok);
    brg_truncation t = {.enabled = max_len > 0, .max_length = max_len, .strategy = strategy};
    BRG_TRY(brg_tokenizer_set_truncation(tok, max_len > 0 ? &t : NULL));
    return brg_tokenizer_set_padding(tok, NULL);
}

void text_tok_end(brg_tokenizer *tok, const text_tok_state *saved) {
    brg_tokenizer_set_truncation(tok, &saved->trunc);
    brg_tokenizer_set_padding(tok, &saved->pad);
}
