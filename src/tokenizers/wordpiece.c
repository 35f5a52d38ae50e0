/* The WordPiece model (BERT): greedy longest-match-first over each word, "##" on pieces after
 * the first; a word with any unmatched remainder, or longer than max_input_chars_per_word
 * characters, is one unknown token. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

struct tk_wordpiece {
    tk_vocab vocab;
    char **rev;  /* id -> token */
    size_t n_rev;
    char *unk, *prefix;
    size_t max_chars;
};

void tk_wordpiece_free(tk_wordpiece *w) {
    if (!w) return;
    tk_vocab_free(&w->vocab);
    free(w->rev);
    free(w->unk);
    free(w->prefix);
    free(w);
}

/* The reverse table points at the vocab's keys; where two tokens share an id the later one
 * wins, as Rust's HashMap inversion leaves one of them. */
/* No tokenizer has this many tokens: a larger id is a broken file, and sizing the reverse table
 * by it would ask for gigabytes (found by fuzz_tokenizer). */
#define TK_MAX_ID ((1 << 24) - 1)

brg_status tk_build_rev(const tk_vocab *v, char ***rev, size_t *n_rev, const char *what) {
    int32_t max = -1;
    for (size_t i = 0; i < v->cap; i++)
        if (v->keys[i] && v->vals[i] > max) max = v->vals[i];
    if (max > TK_MAX_ID)
        return brg_error(BRG_ERR_FORMAT, "tokenizer: %s vocabulary id %d is out of range (at most %d)", what, max,
                         TK_MAX_ID);
    *n_rev = (size_t)(max + 1);
    *rev = calloc(*n_rev + 1, sizeof **rev);
    if (!*rev) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (%s)", what);
    for (size_t i = 0; i < v->cap; i++)
        if (v->keys[i]) (*rev)[v->vals[i]] = v->keys[i];
    return BRG_OK;
}

brg_status tk_wordpiece_new(tk_vocab *vocab, const char *unk, const char *prefix, size_t max_chars,
                            tk_wordpiece **out) {
    tk_wordpiece *w = calloc(1, sizeof *w);
    if (!w) {
        tk_vocab_free(vocab);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    w->vocab = *vocab;
    *vocab = (tk_vocab){0};
    w->unk = strdup(unk);
    w->prefix = strdup(prefix);
    w->max_chars = max_chars;
    brg_status st = (w->unk && w->prefix) ? tk_build_rev(&w->vocab, &w->rev, &w->n_rev, "WordPiece")
                                          : brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    if (st != BRG_OK) {
        tk_wordpiece_free(w);
        return st;
    }
    *out = w;
    return BRG_OK;
}

/* A JSON object token -> id into a vocab; ids must be non-negative integers. */
brg_status tk_vocab_from_json(const cJSON *obj, const char *ctx, tk_vocab *v) {
    if (!cJSON_IsObject(obj)) return brg_error(BRG_ERR_FORMAT, "%s: 'vocab' must be an object of token: id", ctx);
    for (const cJSON *e = obj->child; e; e = e->next) {
        int64_t id;
        if (!brg_json_integer(e, &id) || id < 0 || id > INT32_MAX) {
            tk_vocab_free(v);
            return brg_error(BRG_ERR_FORMAT, "%s: vocab entry '%s' has id out of range (not an integer in [0, 2^31))",
                             ctx, e->string);
        }
        brg_status st = tk_vocab_put(v, e->string, strlen(e->string), (int32_t)id);
        if (st != BRG_OK) {
            tk_vocab_free(v);
            return st;
        }
    }
    return BRG_OK;
}

brg_status tk_wordpiece_parse(const cJSON *j, tk_wordpiece **out) {
    const char *ctx = "WordPiece model", *unk, *prefix;
    int64_t max_chars;
    BRG_TRY(brg_json_get_string(j, ctx, "unk_token", false, "[UNK]", &unk));
    BRG_TRY(brg_json_get_string(j, ctx, "continuing_subword_prefix", false, "##", &prefix));
    BRG_TRY(brg_json_get_int(j, ctx, "max_input_chars_per_word", false, 100, &max_chars));
    if (max_chars < 0) return brg_error(BRG_ERR_FORMAT, "%s: max_input_chars_per_word must be >= 0", ctx);
    tk_vocab v = {0};
    BRG_TRY(tk_vocab_from_json(cJSON_GetObjectItemCaseSensitive(j, "vocab"), ctx, &v));
    return tk_wordpiece_new(&v, unk, prefix, (size_t)max_chars, out);
}

static brg_status unk_token(const tk_wordpiece *w, size_t n, tk_tokens *out) {
    int32_t id = tk_vocab_get(&w->vocab, w->unk, strlen(w->unk));
    if (id < 0) return brg_error(BRG_ERR_FORMAT, "WordPiece: unk_token '%s' is not in the vocabulary", w->unk);
    return tk_tokens_push(out, id, w->unk, strlen(w->unk), 0, n);
}

brg_status tk_wordpiece_tokenize(const tk_wordpiece *w, const tk_str *s, tk_tokens *out) {
    if (s->n > w->max_chars) return unk_token(w, s->n, out);
    size_t *pos;
    char *text = tk_str_utf8(s, 0, s->n, &pos);
    size_t plen = strlen(w->prefix);
    char *buf = text ? malloc(plen + pos[s->n] + 1) : NULL;
    if (!buf) {
        free(text);
        free(text ? pos : NULL);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (WordPiece)");
    }
    tk_tokens pieces = {0};
    brg_status st = BRG_OK;
    bool bad = false;
    for (size_t start = 0; start < s->n && st == BRG_OK && !bad;) {
        size_t end = s->n, hit = 0;
        int32_t id = -1;
        for (; end > start; end--) {
            size_t k = 0;
            if (start > 0) memcpy(buf, w->prefix, plen), k = plen;
            memcpy(buf + k, text + pos[start], pos[end] - pos[start]);
            k += pos[end] - pos[start];
            id = tk_vocab_get(&w->vocab, buf, k);
            if (id >= 0) {
                hit = k;
                break;
            }
        }
        if (id < 0) {
            bad = true;
            break;
        }
        st = tk_tokens_push(&pieces, id, buf, hit, start, end);
        start = end;
    }
    if (st == BRG_OK && bad) st = unk_token(w, s->n, out);
    for (size_t i = 0; i < pieces.n && st == BRG_OK && !bad; i++) {
        st = tk_tokens_push(out, pieces.v[i].id, pieces.v[i].value, strlen(pieces.v[i].value), pieces.v[i].s,
                            pieces.v[i].e);
    }
    tk_tokens_free(&pieces);
    free(text);
    free(pos);
    free(buf);
    return st;
}

const tk_vocab *tk_wordpiece_vocab(const tk_wordpiece *w) { return &w->vocab; }
const char *tk_wordpiece_prefix(const tk_wordpiece *w) { return w->prefix; }

const char *const *tk_wordpiece_rev(const tk_wordpiece *w, size_t *n) {
    *n = w->n_rev;
    return (const char *const *)w->rev;
}
