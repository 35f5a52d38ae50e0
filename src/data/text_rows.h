/* Rows of token ids padded to one length, built one token at a time from encodings, and the
 * columns they become (internal to src/data). */
#ifndef BRIGADE_DATA_TEXT_ROWS_H
#define BRIGADE_DATA_TEXT_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"

typedef struct text_rows {
    int64_t seq, n, cap; /* row length, rows, rows allocated */
    int64_t used;        /* tokens in the row being built */
    int32_t *ids, *types;
    float *mask;
    uint8_t *special; /* 1: a token the post-processor or padding put there */
} text_rows;

void text_rows_init(text_rows *r, int64_t seq);
void text_rows_free(text_rows *r);

/* Starts a row; push adds token i of enc to it (at most seq tokens a row); end pads it to seq with
 * fmt->pad_id and checks its ids against fmt->vocab_size, naming `line` when they do not fit. */
brg_status text_rows_begin(text_rows *r);
void text_rows_push(text_rows *r, const brg_encoding *enc, size_t i);
brg_status text_rows_end(text_rows *r, const brg_text_format *fmt, int64_t line);
/* begin, every token of enc, end. */
brg_status text_rows_add(text_rows *r, const brg_encoding *enc, const brg_text_format *fmt, int64_t line);

/* input_ids, attention_mask and (fmt->token_type_ids) token_type_ids columns [n, seq] of `d`,
 * whose rows and seq_len it sets. */
brg_status text_rows_columns(const text_rows *r, const brg_text_format *fmt, brg_dataset *d);

/* The tokenizer's truncation and padding, replaced for a loader's encodes and put back after. */
typedef struct text_tok_state {
    brg_truncation trunc;
    brg_padding pad;
} text_tok_state;
/* Truncation to max_len tokens (special tokens included) with `strategy`, none when max_len is
 * 0; no padding (rows are padded here). */
brg_status text_tok_begin(brg_tokenizer *tok, size_t max_len, brg_trunc_strategy strategy, text_tok_state *saved);
void text_tok_end(brg_tokenizer *tok, const text_tok_state *saved);

#endif
