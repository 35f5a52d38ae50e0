/* Tokenizers as Hugging Face `tokenizers` runs them, loaded from a model folder's
 * tokenizer.json (or from vocab.txt for BERT, vocab.json + merges.txt for GPT-2).
 *
 * Results equal the Python `tokenizers` library's id for id. Offsets are what Python's
 * `Encoding.offsets` gives: [start, end) in Unicode code points of the input text (not bytes),
 * (0, 0) for tokens a post-processor or padding inserted. */
#ifndef BRIGADE_TOKENIZER_H
#define BRIGADE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_tokenizer brg_tokenizer;

/* One encoded input: parallel arrays of n entries, owned by the encoding. */
typedef struct brg_encoding {
    size_t n;
    int32_t *ids;
    char **tokens;             /* NUL-terminated UTF-8 token strings */
    int64_t (*offsets)[2];     /* code point offsets into the input, as Python reports them */
    int32_t *type_ids;
    int32_t *attention_mask;   /* 0 only for padding */
    int32_t *special_tokens_mask; /* 1 for post-processor and padding tokens */
    int32_t *word_ids;         /* -1 where Python has None */
    int32_t *sequence_ids;     /* 0 or 1 (pair), -1 for inserted tokens */
} brg_encoding;

typedef enum brg_trunc_strategy {
    BRG_TRUNC_LONGEST_FIRST = 0,
    BRG_TRUNC_ONLY_FIRST,
    BRG_TRUNC_ONLY_SECOND,
} brg_trunc_strategy;

typedef struct brg_truncation {
    bool enabled;
    size_t max_length;
    size_t stride; /* kept for the file's sake; overflowing windows are not returned */
    brg_trunc_strategy strategy;
    bool left;     /* direction Left: drop tokens from the start */
} brg_truncation;

typedef struct brg_padding {
    bool enabled;
    size_t fixed_length;     /* 0 = BatchLongest (a single encoding is never padded then) */
    size_t pad_to_multiple_of;
    bool left;
    int32_t pad_id, pad_type_id;
    char pad_token[64];
} brg_padding;

/* `path` is a tokenizer.json file or a folder holding tokenizer.json, vocab.txt (BERT
 * WordPiece; tokenizer_config.json's do_lower_case is honoured) or vocab.json + merges.txt
 * (GPT-2 byte-level BPE). The truncation and padding stored in tokenizer.json are applied by
 * encode, as the Python `tokenizers.Tokenizer` does. */
brg_status brg_tokenizer_load(const char *path, brg_tokenizer **out);
/* Copies the tokenizer files of a model folder (tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, vocab.txt, vocab.json, merges.txt, spiece.model, added_tokens.json:
 * those present) into another, each atomically; *copied counts them. */
brg_status brg_tokenizer_copy_files(const char *from_dir, const char *to_dir, int *copied);
void brg_tokenizer_free(brg_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 (invalid UTF-8 is BRG_ERR_INVALID_ARG naming the byte offset).
 * `pair` may be NULL; add_special_tokens runs the post-processor's template. */
brg_status brg_tokenizer_encode(const brg_tokenizer *tok, const char *text, size_t len, bool add_special_tokens,
                                brg_encoding *out);
brg_status brg_tokenizer_encode_pair(const brg_tokenizer *tok, const char *a, size_t a_len, const char *b,
                                     size_t b_len, bool add_special_tokens, brg_encoding *out);
void brg_encoding_free(brg_encoding *enc);

/* Ids unknown to the tokenizer are dropped, as `tokenizers` does. *text is malloc'd. */
brg_status brg_tokenizer_decode(const brg_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special_tokens,
                                char **text);

/* Token strings joined through the tokenizer's decoder, as Python's `tokenizer.decoder.decode(
 * tokens)` (transformers' convert_tokens_to_string): no id lookup, nothing skipped, tokens
 * outside the vocabulary kept as they are; without a decoder, joined by single spaces. */
brg_status brg_tokenizer_decode_tokens(const brg_tokenizer *tok, const char *const *tokens, size_t n, char **text);

/* The model's kind: "WordPiece", "BPE", "Unigram" or "WordLevel". */
const char *brg_tokenizer_model_type(const brg_tokenizer *tok);
/* The model's continuing_subword_prefix ("##" for WordPiece; BPE's when tokenizer.json sets
 * one); NULL when the model has none. */
const char *brg_tokenizer_continuing_subword_prefix(const brg_tokenizer *tok);

/* Replace the truncation / padding taken from tokenizer.json (NULL disables). */
brg_status brg_tokenizer_set_truncation(brg_tokenizer *tok, const brg_truncation *t);
brg_status brg_tokenizer_set_padding(brg_tokenizer *tok, const brg_padding *p);
/* The truncation and padding encode applies now (to put back after changing them). */
brg_truncation brg_tokenizer_get_truncation(const brg_tokenizer *tok);
brg_padding brg_tokenizer_get_padding(const brg_tokenizer *tok);

/* true: special tokens typed in the text are tokenized as ordinary text (Python's
 * `tokenizer.encode_special_tokens = True`, transformers' `split_special_tokens`). Default false. */
void brg_tokenizer_set_encode_special_tokens(brg_tokenizer *tok, bool on);

/* Vocabulary size including added tokens (Python's get_vocab_size(with_added_tokens=True)). */
size_t brg_tokenizer_vocab_size(const brg_tokenizer *tok);
/* -1 when absent. */
int32_t brg_tokenizer_token_to_id(const brg_tokenizer *tok, const char *token);
/* NULL when absent; the string lives as long as the tokenizer. */
const char *brg_tokenizer_id_to_token(const brg_tokenizer *tok, int32_t id);

#ifdef __cplusplus
}
#endif
#endif
