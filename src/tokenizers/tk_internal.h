/* Internals of the tokenizers (src/tokenizers/): the aligned string every stage works on, the
 * vocabulary map, and the component types tokenizer.c wires together. Not public API. */
#ifndef BRIGADE_TK_INTERNAL_H
#define BRIGADE_TK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "brigade/status.h"
#include "brigade/tokenizer.h"

/* ---- aligned strings (nstring.c) -------------------------------------------------------- */

/* One code point of normalized text and the byte range [os, oe) of the original input it came
 * from. `tokenizers` keeps one alignment per normalized byte, but every byte of a character
 * always gets the same one, so one per code point carries the same information. */
typedef struct tk_char {
    uint32_t cp;
    uint32_t os, oe;
} tk_char;

typedef struct tk_str {
    tk_char *c;
    size_t n, cap;
} tk_str;

/* One output character of a transformation and how it relates to the input, with the meaning
 * of `tokenizers`' NormalizedString::transform: 0 replaces the next input char, +1 is inserted
 * (aligned to the previous input char), -k replaces the next char and removes k more. */
typedef struct tk_change {
    uint32_t cp;
    int32_t change;
} tk_change;

typedef struct tk_changes {
    tk_change *v;
    size_t n, cap;
} tk_changes;

brg_status tk_str_push(tk_str *s, uint32_t cp, uint32_t os, uint32_t oe);
void tk_str_free(tk_str *s);
brg_status tk_str_copy(tk_str *dst, const tk_str *src, size_t from, size_t to);
/* Decodes valid UTF-8 into code points aligned to themselves (offsets relative to `base`). */
brg_status tk_str_from_utf8(tk_str *s, const char *text, size_t len, uint32_t base);
/* The text as malloc'd UTF-8 (NULL on OOM); *byte_pos (optional, n+1 entries, malloc'd)
 * receives the byte offset of each char. */
char *tk_str_utf8(const tk_str *s, size_t from, size_t to, size_t **byte_pos);

brg_status tk_changes_push(tk_changes *c, uint32_t cp, int32_t change);
/* Replaces s with the transformation; `initial_offset` input chars are removed first. */
brg_status tk_str_transform(tk_str *s, const tk_changes *ch, size_t initial_offset);

size_t tk_utf8_encode(uint32_t cp, char out[4]);
/* Decodes one code point of valid UTF-8 at s[0..len); returns its byte length. */
size_t tk_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Lossy decode of arbitrary bytes (each invalid sequence -> U+FFFD, as Rust from_utf8_lossy). */
char *tk_utf8_lossy(const unsigned char *b, size_t n);

/* ---- Unicode predicates (unicode.c), as the Rust crates `tokenizers` uses define them ---- */
bool tk_is_whitespace(uint32_t cp);   /* Rust char::is_whitespace (White_Space) */
bool tk_is_bert_punct(uint32_t cp);   /* ASCII punctuation or category P* */
bool tk_is_punct(uint32_t cp);        /* category P* (unicode_categories is_punctuation) */
bool tk_is_other(uint32_t cp);        /* Cc | Cf | Co */
bool tk_is_mn(uint32_t cp);
bool tk_is_mark(uint32_t cp);         /* Mn | Mc | Me */
bool tk_is_word_char(uint32_t cp);    /* Rust regex \w */
bool tk_is_digit(uint32_t cp);        /* Rust char::is_numeric */
/* Full lowercase (Rust char::to_lowercase): returns the count written (1..3). */
int tk_lowercase(uint32_t cp, uint32_t out[3]);
typedef enum { TK_NFC, TK_NFD, TK_NFKC, TK_NFKD } tk_nf;
brg_status tk_normalize_form(tk_str *s, tk_nf form);
/* Grapheme cluster boundaries: *ends (malloc'd) gets the end index of each cluster. */
brg_status tk_graphemes(const tk_str *s, size_t **ends, size_t *count);

/* ---- vocabulary map (vocab.c) ------------------------------------------------------------ */
typedef struct tk_vocab {
    char **keys;
    size_t *lens;  /* strlen of each key (probes compare lengths first) */
    int32_t *vals;
    size_t cap, count;
} tk_vocab;

brg_status tk_vocab_put(tk_vocab *v, const char *key, size_t klen, int32_t id);
int32_t tk_vocab_get(const tk_vocab *v, const char *key, size_t klen); /* -1 when absent */
void tk_vocab_free(tk_vocab *v);

/* ---- regex (regex.c): PCRE2 with Unicode properties ------------------------------------- */
typedef struct tk_regex tk_regex;
brg_status tk_regex_compile(const char *pattern, bool literal, tk_regex **out);
void tk_regex_free(tk_regex *re);
/* Non-overlapping matches over the char string, as char index ranges (malloc'd pairs). */
brg_status tk_regex_find(const tk_regex *re, const tk_str *s, size_t from, size_t to, size_t **ranges,
                         size_t *count);

/* ---- splits: the pre-tokenized string ---------------------------------------------------- */
typedef struct tk_split {
    tk_str s;
    int32_t token_id; /* an added token already found here, or -1 */
} tk_split;

typedef struct tk_splits {
    tk_split *v;
    size_t n, cap;
} tk_splits;

brg_status tk_splits_push(tk_splits *sp, tk_str *s, int32_t token_id); /* takes s */
void tk_splits_free(tk_splits *sp);

/* ---- components --------------------------------------------------------------------------- */
typedef struct tk_normalizer tk_normalizer;
typedef struct tk_pretok tk_pretok;
typedef struct tk_model tk_model;
typedef struct tk_post tk_post;
typedef struct tk_decoder tk_decoder;

brg_status tk_normalizer_parse(const cJSON *j, tk_normalizer **out);
brg_status tk_normalizer_apply(const tk_normalizer *n, tk_str *s);
void tk_normalizer_free(tk_normalizer *n);
/* A BertNormalizer built from code (vocab.txt folders). */
brg_status tk_normalizer_bert(bool lowercase, tk_normalizer **out);

brg_status tk_pretok_parse(const cJSON *j, tk_pretok **out);
/* Splits every split of `sp` without a token further. */
brg_status tk_pretok_apply(const tk_pretok *p, tk_splits *sp);
void tk_pretok_free(tk_pretok *p);
brg_status tk_pretok_simple(const char *type, bool add_prefix_space, tk_pretok **out);

/* One token a model produced: id, string and its char range [s, e) within the split. */
typedef struct tk_token {
    int32_t id;
    char *value;
    size_t s, e;
} tk_token;

typedef struct tk_tokens {
    tk_token *v;
    size_t n, cap;
} tk_tokens;

brg_status tk_tokens_push(tk_tokens *t, int32_t id, const char *value, size_t vlen, size_t s, size_t e);
void tk_tokens_free(tk_tokens *t);

brg_status tk_model_parse(const cJSON *j, tk_model **out);
brg_status tk_model_tokenize(const tk_model *m, const tk_str *s, tk_tokens *out);
int32_t tk_model_token_to_id(const tk_model *m, const char *tok, size_t len);
const char *tk_model_id_to_token(const tk_model *m, int32_t id);
size_t tk_model_vocab_size(const tk_model *m);
/* "WordPiece", "BPE", "Unigram" or "WordLevel". */
const char *tk_model_type_name(const tk_model *m);
/* The model's continuing_subword_prefix as Python's `model.continuing_subword_prefix` gives it
 * (WordPiece's, BPE's when set); NULL when it has none. */
const char *tk_model_subword_prefix(const tk_model *m);
void tk_model_free(tk_model *m);
brg_status tk_model_wordpiece_from_vocab(tk_vocab *vocab, const char *unk, tk_model **out); /* takes vocab */
brg_status tk_model_bpe_from_files(const char *vocab_json, const char *merges_txt, tk_model **out);

/* The per-model implementations (wordpiece.c, bpe.c, unigram.c) behind tk_model. */
typedef struct tk_wordpiece tk_wordpiece;
typedef struct tk_bpe tk_bpe;
typedef struct tk_unigram tk_unigram;
brg_status tk_wordpiece_parse(const cJSON *j, tk_wordpiece **out);
brg_status tk_wordpiece_new(tk_vocab *vocab, const char *unk, const char *prefix, size_t max_chars,
                            tk_wordpiece **out);
brg_status tk_wordpiece_tokenize(const tk_wordpiece *w, const tk_str *s, tk_tokens *out);
void tk_wordpiece_free(tk_wordpiece *w);
const tk_vocab *tk_wordpiece_vocab(const tk_wordpiece *w);
const char *const *tk_wordpiece_rev(const tk_wordpiece *w, size_t *n);
const char *tk_wordpiece_prefix(const tk_wordpiece *w);

brg_status tk_bpe_parse(const cJSON *j, tk_bpe **out);
brg_status tk_bpe_from_files(const char *vocab_json, const char *merges_txt, tk_bpe **out);
brg_status tk_bpe_tokenize(const tk_bpe *b, const tk_str *s, tk_tokens *out);
void tk_bpe_free(tk_bpe *b);
const tk_vocab *tk_bpe_vocab(const tk_bpe *b);
const char *const *tk_bpe_rev(const tk_bpe *b, size_t *n);
const char *tk_bpe_prefix(const tk_bpe *b); /* NULL when unset */

brg_status tk_unigram_parse(const cJSON *j, tk_unigram **out);
brg_status tk_unigram_tokenize(const tk_unigram *u, const tk_str *s, tk_tokens *out);
void tk_unigram_free(tk_unigram *u);
const tk_vocab *tk_unigram_vocab(const tk_unigram *u);
const char *const *tk_unigram_rev(const tk_unigram *u, size_t *n);

/* ---- encodings while they are built (tokenizer.c, post_processors.c) --------------------- */
typedef struct tk_entry {
    int32_t id;
    char *tok;
    int64_t os, oe; /* code point offsets once a sequence is finished */
    int32_t word, type, special, attn, seq;
} tk_entry;

typedef struct tk_enc {
    tk_entry *v;
    size_t n, cap;
} tk_enc;

brg_status tk_enc_push(tk_enc *e, const tk_entry *entry, const char *tok); /* copies tok */
void tk_enc_free(tk_enc *e);

brg_status tk_post_parse(const cJSON *j, tk_post **out);
/* Number of tokens process() adds for one sequence or a pair. */
size_t tk_post_added(const tk_post *p, bool pair);
/* Combines a (and b, may be NULL) into out; a and b may be modified (offset trimming). */
brg_status tk_post_process(const tk_post *p, tk_enc *a, tk_enc *b, bool add_special, tk_enc *out);
void tk_post_free(tk_post *p);
/* BRG_ERR_FORMAT naming the token when a special token's id is not one `known` accepts. */
brg_status tk_post_validate(const tk_post *p, bool (*known)(const void *ctx, int32_t id), const void *ctx);
/* BERT's [CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP] for vocab.txt folders. */
brg_status tk_post_bert(const char *cls, int32_t cls_id, const char *sep, int32_t sep_id, tk_post **out);
brg_status tk_post_bytelevel(tk_post **out);

brg_status tk_decoder_parse(const cJSON *j, tk_decoder **out);
/* Rewrites the token strings in place (the list may shrink); tokens are malloc'd strings. */
brg_status tk_decoder_apply(const tk_decoder *d, char ***toks, size_t *n);
void tk_decoder_free(tk_decoder *d);
brg_status tk_decoder_simple(const char *type, tk_decoder **out);

/* ---- added tokens (added_tokens.c) ---------------------------------------------------------- */
typedef struct tk_added {
    char *content;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
    tk_str norm; /* what is matched: content, normalized when `normalized` */
    char *decoded; /* the string decode and id_to_token use: the normalized form when it
                    * differs from content, else NULL (= content), as `tokenizers` >= 0.23 */
} tk_added;

typedef struct tk_added_vocab {
    tk_added *v;
    size_t n, cap;
    bool encode_special; /* special tokens are not matched in text */
} tk_added_vocab;

brg_status tk_added_parse(const cJSON *arr, tk_added_vocab *av);
brg_status tk_added_push(tk_added_vocab *av, const char *content, int32_t id, bool special);
/* Computes the normalized forms once the normalizer is known. */
brg_status tk_added_prepare(tk_added_vocab *av, const tk_normalizer *norm);
/* Added-token extraction + per-segment normalization of one input. */
brg_status tk_added_extract(const tk_added_vocab *av, const tk_normalizer *norm, tk_str *input, tk_splits *out);
void tk_added_free(tk_added_vocab *av);

/* ---- the ByteLevel byte <-> char table (byte_level.c) ------------------------------------- */
uint32_t tk_byte_to_char(uint8_t b);
int tk_char_to_byte(uint32_t cp); /* -1 when not in the table */

/* Names a JSON value's "type" for messages ("<missing>" when absent). */
const char *tk_type_of(const cJSON *j);


/* ---- assembling a tokenizer (tokenizer.c) and the folder loaders (legacy.c) ---------------- */
typedef struct tk_parts {
    tk_normalizer *normalizer;
    tk_pretok *pretok;
    tk_model *model;
    tk_post *post;
    tk_decoder *decoder;
    tk_added_vocab added;
} tk_parts;

void tk_parts_free(tk_parts *p);
/* Takes the parts (freed on failure too); resolves added-token ids against the model. */
brg_status tk_tokenizer_new(tk_parts *p, brg_tokenizer **out);
brg_status tk_load_bert_vocab(const char *dir, brg_tokenizer **out);
brg_status tk_load_gpt2_files(const char *dir, brg_tokenizer **out);
brg_status tk_parse_pattern(const cJSON *j, const char *ctx, tk_regex **out);

#endif
