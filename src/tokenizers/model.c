/* The model behind a tokenizer: WordPiece, BPE, Unigram or WordLevel, chosen by "type". */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

typedef enum { M_WORDPIECE, M_BPE, M_UNIGRAM, M_WORDLEVEL } mtype;

struct tk_model {
    mtype type;
    tk_wordpiece *wp;
    tk_bpe *bpe;
    tk_unigram *uni;
    tk_vocab wl_vocab; /* WordLevel */
    char **wl_rev;
    size_t wl_n;
    char *wl_unk;
};

brg_status tk_build_rev(const tk_vocab *v, char ***rev, size_t *n_rev, const char *what);
brg_status tk_vocab_from_json(const cJSON *obj, const char *ctx, tk_vocab *v);

void tk_model_free(tk_model *m) {
    if (!m) return;
    tk_wordpiece_free(m->wp);
    tk_bpe_free(m->bpe);
    tk_unigram_free(m->uni);
    tk_vocab_free(&m->wl_vocab);
    free(m->wl_rev);
    free(m->wl_unk);
    free(m);
}

static brg_status parse_wordlevel(const cJSON *j, tk_model *m) {
    const char *unk;
    BRG_TRY(brg_json_get_string(j, "WordLevel model", "unk_token", false, "<unk>", &unk));
    if (!(m->wl_unk = strdup(unk))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    BRG_TRY(tk_vocab_from_json(cJSON_GetObjectItemCaseSensitive(j, "vocab"), "WordLevel model", &m->wl_vocab));
    return tk_build_rev(&m->wl_vocab, &m->wl_rev, &m->wl_n, "WordLevel");
}

brg_status tk_model_parse(const cJSON *j, tk_model **out) {
    if (!cJSON_IsObject(j)) return brg_error(BRG_ERR_FORMAT, "tokenizer.json: 'model' is missing or not an object");
    const char *type = tk_type_of(j);
    tk_model *m = calloc(1, sizeof *m);
    if (!m) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    brg_status st;
    /* Files written before "type" was serialised for models are recognised by their fields. */
    bool untyped = strcmp(type, "<missing>") == 0;
    if (strcmp(type, "WordPiece") == 0 || (untyped && cJSON_GetObjectItemCaseSensitive(j, "max_input_chars_per_word")))
        m->type = M_WORDPIECE, st = tk_wordpiece_parse(j, &m->wp);
    else if (strcmp(type, "BPE") == 0 || (untyped && cJSON_GetObjectItemCaseSensitive(j, "merges")))
        m->type = M_BPE, st = tk_bpe_parse(j, &m->bpe);
    else if (strcmp(type, "Unigram") == 0 || (untyped && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "vocab"))))
        m->type = M_UNIGRAM, st = tk_unigram_parse(j, &m->uni);
    else if (strcmp(type, "WordLevel") == 0)
        m->type = M_WORDLEVEL, st = parse_wordlevel(j, m);
    else
        st = brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown model type '%s'", type);
    if (st != BRG_OK) {
        tk_model_free(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status tk_model_wordpiece_from_vocab(tk_vocab *vocab, const char *unk, tk_model **out) {
    tk_model *m = calloc(1, sizeof *m);
    if (!m) {
        tk_vocab_free(vocab);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    m->type = M_WORDPIECE;
    brg_status st = tk_wordpiece_new(vocab, unk, "##", 100, &m->wp);
    if (st != BRG_OK) {
        free(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status tk_model_bpe_from_files(const char *vocab_json, const char *merges_txt, tk_model **out) {
    tk_model *m = calloc(1, sizeof *m);
    if (!m) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    m->type = M_BPE;
    brg_status st = tk_bpe_from_files(vocab_json, merges_txt, &m->bpe);
    if (st != BRG_OK) {
        free(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status tk_model_tokenize(const tk_model *m, const tk_str *s, tk_tokens *out) {
    switch (m->type) {
    case M_WORDPIECE: return tk_wordpiece_tokenize(m->wp, s, out);
    case M_BPE: return tk_bpe_tokenize(m->bpe, s, out);
    case M_UNIGRAM: return tk_unigram_tokenize(m->uni, s, out);
    case M_WORDLEVEL: break;
    }
    char *text = tk_str_utf8(s, 0, s->n, NULL);
    if (!text) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    int32_t id = tk_vocab_get(&m->wl_vocab, text, strlen(text));
    brg_status st;
    if (id >= 0) st = tk_tokens_push(out, id, text, strlen(text), 0, s->n);
    else if ((id = tk_vocab_get(&m->wl_vocab, m->wl_unk, strlen(m->wl_unk))) >= 0)
        st = tk_tokens_push(out, id, m->wl_unk, strlen(m->wl_unk), 0, s->n);
    else st = brg_error(BRG_ERR_FORMAT, "WordLevel: unk_token '%s' is not in the vocabulary", m->wl_unk);
    free(text);
    return st;
}

static const tk_vocab *vocab_of(const tk_model *m) {
    switch (m->type) {
    case M_WORDPIECE: return tk_wordpiece_vocab(m->wp);
    case M_BPE: return tk_bpe_vocab(m->bpe);
    case M_UNIGRAM: return tk_unigram_vocab(m->uni);
    case M_WORDLEVEL: break;
    }
    return &m->wl_vocab;
}

static const char *const *rev_of(const tk_model *m, size_t *n) {
    switch (m->type) {
    case M_WORDPIECE: return tk_wordpiece_rev(m->wp, n);
    case M_BPE: return tk_bpe_rev(m->bpe, n);
    case M_UNIGRAM: return tk_unigram_rev(m->uni, n);
    case M_WORDLEVEL: break;
    }
    *n = m->wl_n;
    return (const char *const *)m->wl_rev;
}

int32_t tk_model_token_to_id(const tk_model *m, const char *tok, size_t len) {
    return tk_vocab_get(vocab_of(m), tok, len);
}

const char *tk_model_id_to_token(const tk_model *m, int32_t id) {
    size_t n;
    const char *const *rev = rev_of(m, &n);
    return id >= 0 && (size_t)id < n ? rev[id] : NULL;
}

/* Python's get_vocab_size(False): the number of distinct tokens (BPE/WordPiece: map size). */
size_t tk_model_vocab_size(const tk_model *m) {
    if (m->type == M_UNIGRAM) {
        size_t n;
        rev_of(m, &n);
        return n;
    }
    return vocab_of(m)->count;
}

const char *tk_model_type_name(const tk_model *m) {
    static const char *const names[] = {"WordPiece", "BPE", "Unigram", "WordLevel"};
    return names[m->type];
}

const char *tk_model_subword_prefix(const tk_model *m) {
    if (m->type == M_WORDPIECE) return tk_wordpiece_prefix(m->wp);
    if (m->type == M_BPE) return tk_bpe_prefix(m->bpe);
    return NULL;
}
