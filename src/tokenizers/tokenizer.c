/* The tokenizer: loading tokenizer.json, and the encode pipeline of `tokenizers` (added tokens
 * and normalization, pre-tokenization, model, truncation, post-processing, padding), decode,
 * and offsets converted to code points as the Python binding reports them. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/checkpoint.h"
#include "core/str.h"
#include "io/json.h"
#include "tk_internal.h"

struct brg_tokenizer {
    tk_parts p;
    brg_truncation trunc;
    brg_padding pad;
};

void tk_parts_free(tk_parts *p) {
    tk_normalizer_free(p->normalizer);
    tk_pretok_free(p->pretok);
    tk_model_free(p->model);
    tk_post_free(p->post);
    tk_decoder_free(p->decoder);
    tk_added_free(&p->added);
    *p = (tk_parts){0};
}

void brg_tokenizer_free(brg_tokenizer *tok) {
    if (!tok) return;
    tk_parts_free(&tok->p);
    free(tok);
}

/* Ids as AddedVocabulary::add_tokens gives them (the file's "id" fields only make
 * `tokenizers` warn when they differ): a content seen before, in this list or in the model's
 * vocabulary, keeps that id; every other token takes the next id after the model's. */
static void assign_added_ids(tk_parts *p) {
    int32_t next = (int32_t)tk_model_vocab_size(p->model);
    for (size_t i = 0; i < p->added.n; i++) {
        tk_added *a = &p->added.v[i];
        int32_t id = -1;
        for (size_t j = 0; j < i && id < 0; j++)
            if (strcmp(p->added.v[j].content, a->content) == 0) id = p->added.v[j].id;
        if (id < 0) id = tk_model_token_to_id(p->model, a->content, strlen(a->content));
        a->id = id >= 0 ? id : next++;
    }
}

static bool known_id(const void *ctx, int32_t id) {
    const tk_parts *p = ctx;
    for (size_t i = 0; i < p->added.n; i++)
        if (p->added.v[i].id == id) return true;
    return tk_model_id_to_token(p->model, id) != NULL;
}

brg_status tk_tokenizer_new(tk_parts *p, brg_tokenizer **out) {
    assign_added_ids(p);
    /* A template id no token has would reach the model as an out-of-range input id. */
    brg_status st = tk_post_validate(p->post, known_id, p);
    if (st == BRG_OK) st = tk_added_prepare(&p->added, p->normalizer);
    brg_tokenizer *t = st == BRG_OK ? calloc(1, sizeof *t) : NULL;
    if (st == BRG_OK && !t) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    if (st != BRG_OK) {
        tk_parts_free(p);
        return st;
    }
    t->p = *p;
    *p = (tk_parts){0};
    *out = t;
    return BRG_OK;
}

static brg_status parse_truncation(const cJSON *j, brg_truncation *t) {
    const char *ctx = "tokenizer.json truncation", *dir, *strat;
    *t = (brg_truncation){0};
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    int64_t max_length, stride;
    BRG_TRY(brg_json_get_int(j, ctx, "max_length", false, 512, &max_length));
    BRG_TRY(brg_json_get_int(j, ctx, "stride", false, 0, &stride));
    BRG_TRY(brg_json_get_string(j, ctx, "direction", false, "Right", &dir));
    BRG_TRY(brg_json_get_string(j, ctx, "strategy", false, "LongestFirst", &strat));
    if (max_length < 0 || stride < 0) return brg_error(BRG_ERR_FORMAT, "%s: max_length and stride must be >= 0", ctx);
    t->enabled = true;
    t->max_length = (size_t)max_length;
    t->stride = (size_t)stride;
    t->left = strcmp(dir, "Left") == 0;
    if (strcmp(strat, "LongestFirst") == 0) t->strategy = BRG_TRUNC_LONGEST_FIRST;
    else if (strcmp(strat, "OnlyFirst") == 0) t->strategy = BRG_TRUNC_ONLY_FIRST;
    else if (strcmp(strat, "OnlySecond") == 0) t->strategy = BRG_TRUNC_ONLY_SECOND;
    else return brg_error(BRG_ERR_FORMAT, "%s: unknown strategy '%s'", ctx, strat);
    return BRG_OK;
}

static brg_status parse_padding(const cJSON *j, brg_padding *p) {
    const char *ctx = "tokenizer.json padding", *dir, *tok;
    *p = (brg_padding){0};
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    int64_t id, type_id, multiple;
    BRG_TRY(brg_json_get_int(j, ctx, "pad_id", false, 0, &id));
    BRG_TRY(brg_json_get_int(j, ctx, "pad_type_id", false, 0, &type_id));
    BRG_TRY(brg_json_get_int(j, ctx, "pad_to_multiple_of", false, 0, &multiple));
    BRG_TRY(brg_json_get_string(j, ctx, "direction", false, "Right", &dir));
    BRG_TRY(brg_json_get_string(j, ctx, "pad_token", false, "[PAD]", &tok));
    const cJSON *strategy = cJSON_GetObjectItemCaseSensitive(j, "strategy");
    const cJSON *fixed = cJSON_GetObjectItemCaseSensitive(strategy, "Fixed");
    int64_t n = 0;
    if (fixed && (!brg_json_integer(fixed, &n) || n < 0))
        return brg_error(BRG_ERR_FORMAT, "%s: strategy Fixed must be a length >= 0", ctx);
    if (id < 0 || id > INT32_MAX || multiple < 0 || strlen(tok) >= sizeof p->pad_token)
        return brg_error(BRG_ERR_FORMAT, "%s: pad_id, pad_to_multiple_of or pad_token out of range", ctx);
    *p = (brg_padding){.enabled = true, .fixed_length = (size_t)n, .pad_to_multiple_of = (size_t)multiple,
                       .left = strcmp(dir, "Left") == 0, .pad_id = (int32_t)id, .pad_type_id = (int32_t)type_id};
    strcpy(p->pad_token, tok);
    return BRG_OK;
}

static brg_status from_json(const cJSON *root, brg_tokenizer **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "1.0") == 0))
        return brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown tokenizer version (only \"1.0\" exists)");
    tk_parts p = {0};
    brg_truncation trunc;
    brg_padding pad;
    brg_status st = tk_model_parse(cJSON_GetObjectItemCaseSensitive(root, "model"), &p.model);
    if (st == BRG_OK) st = tk_normalizer_parse(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &p.normalizer);
    if (st == BRG_OK) st = tk_pretok_parse(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &p.pretok);
    if (st == BRG_OK) st = tk_post_parse(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &p.post);
    if (st == BRG_OK) st = tk_decoder_parse(cJSON_GetObjectItemCaseSensitive(root, "decoder"), &p.decoder);
    if (st == BRG_OK) st = tk_added_parse(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), &p.added);
    if (st == BRG_OK) st = parse_truncation(cJSON_GetObjectItemCaseSensitive(root, "truncation"), &trunc);
    if (st == BRG_OK) st = parse_padding(cJSON_GetObjectItemCaseSensitive(root, "padding"), &pad);
    if (st != BRG_OK) {
        tk_parts_free(&p);
        return st;
    }
    BRG_TRY(tk_tokenizer_new(&p, out));
    (*out)->trunc = trunc;
    (*out)->pad = pad;
    return BRG_OK;
}

static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

brg_status brg_tokenizer_load(const char *path, brg_tokenizer **out) {
    *out = NULL;
    struct stat sb;
    char resolved[4096];
    if (stat(path, &sb) != 0) {
        /* Not a path: a hub id in the local Hugging Face cache, as for models. */
        BRG_TRY(brg_hf_resolve(path, resolved, sizeof resolved));
        path = resolved;
        if (stat(path, &sb) != 0) return brg_error(BRG_ERR_NOT_FOUND, "tokenizer: %s does not exist", path);
    }
    char *file = S_ISDIR(sb.st_mode) ? brg_str_printf("%s/tokenizer.json", path) : strdup(path);
    if (!file) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    brg_status st;
    if (is_file(file)) {
        cJSON *root = NULL;
        st = brg_json_load_file(file, (size_t)512 << 20, &root);
        if (st == BRG_OK) st = from_json(root, out);
        if (st != BRG_OK) brg_error_wrap(st, "%s", file);
        cJSON_Delete(root);
    } else if (S_ISDIR(sb.st_mode)) {
        char *vt = brg_str_printf("%s/vocab.txt", path), *vj = brg_str_printf("%s/vocab.json", path);
        char *mt = brg_str_printf("%s/merges.txt", path);
        if (!vt || !vj || !mt) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        else if (is_file(vt)) st = tk_load_bert_vocab(path, out);
        else if (is_file(vj) && is_file(mt)) st = tk_load_gpt2_files(path, out);
        else st = brg_error(BRG_ERR_NOT_FOUND, "%s has no tokenizer.json, vocab.txt or vocab.json + merges.txt", path);
        free(vt);
        free(vj);
        free(mt);
    } else {
        st = brg_error(BRG_ERR_NOT_FOUND, "tokenizer: %s is not a file or folder", path);
    }
    free(file);
    return st;
}

/* ---- encode ------------------------------------------------------------------------------------ */

/* BytesToCharOffsetConverter: a byte offset -> index of the char holding it; an end at the
 * text's end maps past the last char; a start at the end stays in bytes (as Python does). */
static void to_chars(const size_t *char_of, size_t len, int64_t *s, int64_t *e) {
    if ((size_t)*s >= len) return;
    int64_t start = (int64_t)char_of[*s];
    int64_t end = (size_t)*e < len ? (int64_t)char_of[*e] : (*e > 0 ? (int64_t)char_of[*e - 1] + 1 : start + 1);
    *s = start;
    *e = end;
}

static brg_status split_tokens(const brg_tokenizer *t, const tk_split *sp, tk_tokens *out) {
    if (sp->token_id < 0) return tk_model_tokenize(t->p.model, &sp->s, out);
    char *text = tk_str_utf8(&sp->s, 0, sp->s.n, NULL);
    if (!text) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    brg_status st = tk_tokens_push(out, sp->token_id, text, strlen(text), 0, sp->s.n);
    free(text);
    return st;
}

/* One sequence through normalization, pre-tokenization and the model. */
static brg_status encode_one(const brg_tokenizer *t, const char *text, size_t len, int32_t seq, tk_enc *out) {
    tk_str input;
    BRG_TRY(tk_str_from_utf8(&input, text, len, 0));
    tk_splits sp = {0};
    brg_status st = tk_added_extract(&t->p.added, t->p.normalizer, &input, &sp);
    tk_str_free(&input);
    if (st == BRG_OK) st = tk_pretok_apply(t->p.pretok, &sp);
    size_t *char_of = st == BRG_OK ? malloc((len + 1) * sizeof *char_of) : NULL;
    if (st == BRG_OK && !char_of) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    for (size_t i = 0, c = 0; st == BRG_OK && i < len; c++) {
        uint32_t cp;
        size_t k = tk_utf8_decode(text + i, len - i, &cp);
        for (size_t j = 0; j < k; j++) char_of[i + j] = c;
        i += k;
    }
    for (size_t w = 0; w < sp.n && st == BRG_OK; w++) {
        tk_tokens toks = {0};
        const tk_str *s = &sp.v[w].s;
        st = split_tokens(t, &sp.v[w], &toks);
        for (size_t k = 0; k < toks.n && st == BRG_OK; k++) {
            tk_token *tk = &toks.v[k];
            int64_t os = tk->s < s->n ? s->c[tk->s].os : (s->n ? s->c[s->n - 1].oe : 0);
            int64_t oe = tk->e > tk->s ? s->c[tk->e - 1].oe : os;
            to_chars(char_of, len, &os, &oe);
            tk_entry e = {.id = tk->id, .os = os, .oe = oe, .word = (int32_t)w, .type = seq, .attn = 1, .seq = seq};
            st = tk_enc_push(out, &e, tk->value);
        }
        tk_tokens_free(&toks);
    }
    free(char_of);
    tk_splits_free(&sp);
    return st;
}

static void truncate_to(tk_enc *e, size_t n, bool left) {
    if (e->n <= n) return;
    size_t drop = e->n - n;
    if (left) {
        for (size_t i = 0; i < drop; i++) free(e->v[i].tok);
        memmove(e->v, e->v + drop, n * sizeof *e->v);
    } else {
        for (size_t i = n; i < e->n; i++) free(e->v[i].tok);
    }
    e->n = n;
}

/* truncate_encodings: LongestFirst gives the longer sequence the odd extra token. */
static brg_status truncate(const brg_truncation *tr, size_t added, tk_enc *a, tk_enc *b) {
    /* `tokenizers` computes max_length - added in wrapping unsigned arithmetic: a limit below
     * the number of special tokens truncates nothing. */
    if (!tr->enabled || tr->max_length < added) return BRG_OK;
    size_t max = tr->max_length - added;
    if (max == 0) { /* nothing fits: both sequences become empty, whatever the strategy */
        truncate_to(a, 0, tr->left);
        if (b) truncate_to(b, 0, tr->left);
        return BRG_OK;
    }
    size_t total = a->n + (b ? b->n : 0);
    if (total <= max) return BRG_OK;
    size_t excess = total - max;
    if (!b) {
        if (tr->strategy == BRG_TRUNC_ONLY_SECOND)
            return brg_error(BRG_ERR_INVALID_ARG, "truncation only_second needs a pair of sequences");
        truncate_to(a, max, tr->left);
        return BRG_OK;
    }
    if (tr->strategy == BRG_TRUNC_LONGEST_FIRST) {
        bool swap = a->n > b->n;
        size_t n1 = swap ? b->n : a->n, n2 = swap ? a->n : b->n;
        n2 = n1 > max ? n1 : (n1 > max - n1 ? n1 : max - n1);
        if (n1 + n2 > max) n1 = max / 2, n2 = n1 + max % 2;
        truncate_to(a, swap ? n2 : n1, tr->left);
        truncate_to(b, swap ? n1 : n2, tr->left);
        return BRG_OK;
    }
    tk_enc *target = tr->strategy == BRG_TRUNC_ONLY_FIRST ? a : b;
    if (target->n <= excess)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "truncation: sequence to truncate too short to respect max_length %zu", tr->max_length);
    truncate_to(target, target->n - excess, tr->left);
    return BRG_OK;
}

static brg_status pad(const brg_padding *p, tk_enc *e) {
    if (!p->enabled) return BRG_OK;
    size_t target = p->fixed_length ? p->fixed_length : e->n;
    if (p->pad_to_multiple_of && target % p->pad_to_multiple_of)
        target += p->pad_to_multiple_of - target % p->pad_to_multiple_of;
    if (e->n >= target) return BRG_OK;
    size_t add = target - e->n, old = e->n;
    tk_entry pe = {.id = p->pad_id, .word = -1, .type = p->pad_type_id, .special = 1, .attn = 0, .seq = -1};
    for (size_t i = 0; i < add; i++) BRG_TRY(tk_enc_push(e, &pe, p->pad_token));
    if (p->left) {
        tk_entry *tmp = malloc(add * sizeof *tmp);
        if (!tmp) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        memcpy(tmp, e->v + old, add * sizeof *tmp);
        memmove(e->v + add, e->v, old * sizeof *tmp);
        memcpy(e->v, tmp, add * sizeof *tmp);
        free(tmp);
    }
    return BRG_OK;
}

static brg_status export(tk_enc *e, brg_encoding *out) {
    size_t n = e->n;
    *out = (brg_encoding){.n = n};
    out->ids = calloc(n + 1, sizeof *out->ids);
    out->tokens = calloc(n + 1, sizeof *out->tokens);
    out->offsets = calloc(n + 1, sizeof *out->offsets);
    out->type_ids = calloc(n + 1, sizeof(int32_t));
    out->attention_mask = calloc(n + 1, sizeof(int32_t));
    out->special_tokens_mask = calloc(n + 1, sizeof(int32_t));
    out->word_ids = calloc(n + 1, sizeof(int32_t));
    out->sequence_ids = calloc(n + 1, sizeof(int32_t));
    if (!out->ids || !out->tokens || !out->offsets || !out->type_ids || !out->attention_mask ||
        !out->special_tokens_mask || !out->word_ids || !out->sequence_ids) {
        brg_encoding_free(out);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        tk_entry *x = &e->v[i];
        out->ids[i] = x->id;
        out->tokens[i] = x->tok; /* ownership moves */
        x->tok = NULL;
        out->offsets[i][0] = x->os;
        out->offsets[i][1] = x->oe;
        out->type_ids[i] = x->type;
        out->attention_mask[i] = x->attn;
        out->special_tokens_mask[i] = x->special;
        out->word_ids[i] = x->word;
        out->sequence_ids[i] = x->seq;
    }
    return BRG_OK;
}

static brg_status check_utf8(const char *text, size_t len, const char *what) {
    size_t bad;
    /* Alignments hold 32-bit byte offsets. */
    if (len > UINT32_MAX) return brg_error(BRG_ERR_INVALID_ARG, "%s is longer than 4 GiB", what);
    if (!brg_utf8_valid(text, len, &bad))
        return brg_error(BRG_ERR_INVALID_ARG, "%s is not valid UTF-8 (bad byte 0x%02x at byte offset %zu)", what,
                         (unsigned char)text[bad], bad);
    return BRG_OK;
}

brg_status brg_tokenizer_encode_pair(const brg_tokenizer *tok, const char *a, size_t a_len, const char *b,
                                     size_t b_len, bool add_special_tokens, brg_encoding *out) {
    *out = (brg_encoding){0};
    BRG_TRY(check_utf8(a, a_len, b ? "the first sequence" : "the text"));
    if (b) BRG_TRY(check_utf8(b, b_len, "the second sequence"));
    tk_enc ea = {0}, eb = {0}, all = {0};
    brg_status st = encode_one(tok, a, a_len, 0, &ea);
    if (st == BRG_OK && b) st = encode_one(tok, b, b_len, 1, &eb);
    size_t added = add_special_tokens ? tk_post_added(tok->p.post, b != NULL) : 0;
    if (st == BRG_OK) st = truncate(&tok->trunc, added, &ea, b ? &eb : NULL);
    if (st == BRG_OK) st = tk_post_process(tok->p.post, &ea, b ? &eb : NULL, add_special_tokens, &all);
    if (st == BRG_OK) st = pad(&tok->pad, &all);
    if (st == BRG_OK) st = export(&all, out);
    tk_enc_free(&ea);
    tk_enc_free(&eb);
    tk_enc_free(&all);
    return st;
}

brg_status brg_tokenizer_encode(const brg_tokenizer *tok, const char *text, size_t len, bool add_special_tokens,
                                brg_encoding *out) {
    return brg_tokenizer_encode_pair(tok, text, len, NULL, 0, add_special_tokens, out);
}

void brg_encoding_free(brg_encoding *enc) {
    if (!enc) return;
    for (size_t i = 0; enc->tokens && i < enc->n; i++) free(enc->tokens[i]);
    free(enc->ids);
    free(enc->tokens);
    free(enc->offsets);
    free(enc->type_ids);
    free(enc->attention_mask);
    free(enc->special_tokens_mask);
    free(enc->word_ids);
    free(enc->sequence_ids);
    *enc = (brg_encoding){0};
}

/* ---- vocabulary and decode ----------------------------------------------------------------------- */

static const tk_added *added_by_id(const brg_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->p.added.n; i++)
        if (t->p.added.v[i].id == id) return &t->p.added.v[i];
    return NULL;
}

const char *brg_tokenizer_id_to_token(const brg_tokenizer *tok, int32_t id) {
    const tk_added *a = added_by_id(tok, id);
    if (a) return a->decoded ? a->decoded : a->content;
    return tk_model_id_to_token(tok->p.model, id);
}

int32_t brg_tokenizer_token_to_id(const brg_tokenizer *tok, const char *token) {
    for (size_t i = 0; i < tok->p.added.n; i++)
        if (strcmp(tok->p.added.v[i].content, token) == 0) return tok->p.added.v[i].id;
    return tk_model_token_to_id(tok->p.model, token, strlen(token));
}

size_t brg_tokenizer_vocab_size(const brg_tokenizer *tok) {
    size_t n = tk_model_vocab_size(tok->p.model);
    for (size_t i = 0; i < tok->p.added.n; i++)
        if (tk_model_id_to_token(tok->p.model, tok->p.added.v[i].id) == NULL) n++;
    return n;
}

static bool is_special(const brg_tokenizer *t, const char *token) {
    for (size_t i = 0; i < t->p.added.n; i++)
        if (t->p.added.v[i].special && strcmp(t->p.added.v[i].content, token) == 0) return true;
    return false;
}

/* The decoder over token strings (takes toks[0..k), freed here), joined into *text. */
static brg_status decode_strings(const brg_tokenizer *tok, char **toks, size_t k, brg_status st, char **text) {
    bool decoded = tok->p.decoder != NULL;
    if (st == BRG_OK) st = tk_decoder_apply(tok->p.decoder, &toks, &k);
    size_t total = 1;
    for (size_t i = 0; i < k && st == BRG_OK; i++) total += strlen(toks[i]) + 1;
    char *out = st == BRG_OK ? malloc(total) : NULL;
    if (st == BRG_OK && !out) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    if (out) {
        /* Without a decoder, tokens are joined by single spaces. */
        size_t o = 0;
        for (size_t i = 0; i < k; i++) {
            if (!decoded && i) out[o++] = ' ';
            size_t l = strlen(toks[i]);
            memcpy(out + o, toks[i], l);
            o += l;
        }
        out[o] = 0;
    }
    for (size_t i = 0; i < k; i++) free(toks[i]);
    free(toks);
    *text = out;
    return st;
}

brg_status brg_tokenizer_decode(const brg_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special_tokens,
                                char **text) {
    *text = NULL;
    char **toks = calloc(n + 1, sizeof *toks);
    if (!toks) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    size_t k = 0;
    brg_status st = BRG_OK;
    for (size_t i = 0; i < n && st == BRG_OK; i++) {
        const char *t = brg_tokenizer_id_to_token(tok, ids[i]);
        if (!t || (skip_special_tokens && is_special(tok, t))) continue;
        if (!(toks[k++] = strdup(t))) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    return decode_strings(tok, toks, k, st, text);
}

brg_status brg_tokenizer_decode_tokens(const brg_tokenizer *tok, const char *const *tokens, size_t n, char **text) {
    *text = NULL;
    char **toks = calloc(n + 1, sizeof *toks);
    if (!toks) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    size_t k = 0;
    brg_status st = BRG_OK;
    for (size_t i = 0; i < n && st == BRG_OK; i++)
        if (!(toks[k++] = strdup(tokens[i]))) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    return decode_strings(tok, toks, k, st, text);
}

const char *brg_tokenizer_model_type(const brg_tokenizer *tok) { return tk_model_type_name(tok->p.model); }

const char *brg_tokenizer_continuing_subword_prefix(const brg_tokenizer *tok) {
    return tk_model_subword_prefix(tok->p.model);
}

brg_status brg_tokenizer_set_truncation(brg_tokenizer *tok, const brg_truncation *t) {
    if (t && t->enabled && t->stride >= t->max_length && t->max_length > 0)
        return brg_error(BRG_ERR_INVALID_ARG, "truncation: stride %zu must be below max_length %zu", t->stride,
                         t->max_length);
    tok->trunc = t ? *t : (brg_truncation){0};
    return BRG_OK;
}

void brg_tokenizer_set_encode_special_tokens(brg_tokenizer *tok, bool on) {
    tok->p.added.encode_special = on;
}

brg_status brg_tokenizer_set_padding(brg_tokenizer *tok, const brg_padding *p) {
    tok->pad = p ? *p : (brg_padding){0};
    return BRG_OK;
}

brg_truncation brg_tokenizer_get_truncation(const brg_tokenizer *tok) { return tok->trunc; }

brg_padding brg_tokenizer_get_padding(const brg_tokenizer *tok) { return tok->pad; }
