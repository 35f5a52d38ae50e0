/* Pre-tokenizers: cut each split (a segment between added tokens) into words, with
 * `tokenizers`' delimiter behaviours (Removed, Isolated, MergedWith*, Contiguous). */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

typedef enum { P_BERT, P_BYTELEVEL, P_WHITESPACE, P_WS_SPLIT, P_METASPACE, P_PUNCT, P_DIGITS, P_SPLIT,
               P_SEQUENCE, P_CHAR_DELIM, P_FIXED } ptype;
typedef enum { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS } behavior;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

struct tk_pretok {
    ptype type;
    bool add_prefix_space, use_regex, individual_digits, invert, split;
    behavior behavior;
    prepend_scheme scheme;
    uint32_t replacement; /* Metaspace; CharDelimiterSplit's delimiter */
    int64_t length;       /* FixedLength */
    tk_regex *re;
    tk_pretok **kids;
    size_t n_kids;
};

/* GPT-2's pattern with Oniguruma's \s spelled out (PCRE2's \s lacks U+0085). */
#define WS "\\t-\\r\\x{85}\\p{Z}"
static const char *gpt2_pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS
                                  "]+(?![^" WS "])|[" WS "]+";

void tk_pretok_free(tk_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_kids; i++) tk_pretok_free(p->kids[i]);
    free(p->kids);
    tk_regex_free(p->re);
    free(p);
}

brg_status tk_parse_pattern(const cJSON *j, const char *ctx, tk_regex **out);

static brg_status parse_behavior(const cJSON *j, const char *ctx, behavior def, behavior *out) {
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *b;
    BRG_TRY(brg_json_get_string(j, ctx, "behavior", false, names[def], &b));
    for (int i = 0; i < 5; i++)
        if (strcmp(b, names[i]) == 0) {
            *out = (behavior)i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_FORMAT, "%s: unknown behavior '%s'", ctx, b);
}

static brg_status one_char(const cJSON *j, const char *ctx, const char *key, const char *def, uint32_t *out) {
    const char *s;
    BRG_TRY(brg_json_get_string(j, ctx, key, def == NULL, def, &s));
    uint32_t cp;
    size_t k = tk_utf8_decode(s, strlen(s), &cp);
    if (!s[0] || s[k]) return brg_error(BRG_ERR_FORMAT, "%s: '%s' must be one character, not '%s'", ctx, key, s);
    *out = cp;
    return BRG_OK;
}

static brg_status parse_metaspace(const cJSON *j, tk_pretok *p) {
    const char *ctx = "Metaspace pre-tokenizer";
    BRG_TRY(one_char(j, ctx, "replacement", "\xe2\x96\x81", &p->replacement));
    BRG_TRY(brg_json_get_bool(j, ctx, "split", false, true, &p->split));
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme");
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(j, "add_prefix_space");
    p->scheme = PREPEND_ALWAYS;
    if (cJSON_IsString(ps)) {
        if (strcmp(ps->valuestring, "first") == 0) p->scheme = PREPEND_FIRST;
        else if (strcmp(ps->valuestring, "never") == 0) p->scheme = PREPEND_NEVER;
        else if (strcmp(ps->valuestring, "always") != 0)
            return brg_error(BRG_ERR_FORMAT, "%s: unknown prepend_scheme '%s'", ctx, ps->valuestring);
    } else if (cJSON_IsFalse(aps)) {
        p->scheme = PREPEND_NEVER; /* files older than prepend_scheme */
    }
    return BRG_OK;
}

static brg_status parse_fields(const cJSON *j, tk_pretok *p) {
    const char *ctx = "tokenizer.json pre_tokenizer";
    switch (p->type) {
    case P_BYTELEVEL:
        BRG_TRY(brg_json_get_bool(j, "ByteLevel pre-tokenizer", "add_prefix_space", false, true, &p->add_prefix_space));
        return brg_json_get_bool(j, "ByteLevel pre-tokenizer", "use_regex", false, true, &p->use_regex);
    case P_METASPACE:
        return parse_metaspace(j, p);
    case P_PUNCT:
        return parse_behavior(j, "Punctuation pre-tokenizer", B_ISOLATED, &p->behavior);
    case P_DIGITS:
        return brg_json_get_bool(j, "Digits pre-tokenizer", "individual_digits", false, false, &p->individual_digits);
    case P_CHAR_DELIM:
        return one_char(j, "CharDelimiterSplit pre-tokenizer", "delimiter", NULL, &p->replacement);
    case P_FIXED:
        BRG_TRY(brg_json_get_int(j, "FixedLength pre-tokenizer", "length", false, 5, &p->length));
        if (p->length < 1) return brg_error(BRG_ERR_FORMAT, "FixedLength pre-tokenizer: length must be >= 1");
        return BRG_OK;
    case P_SPLIT:
        BRG_TRY(parse_behavior(j, "Split pre-tokenizer", B_REMOVED, &p->behavior));
        BRG_TRY(brg_json_get_bool(j, "Split pre-tokenizer", "invert", false, false, &p->invert));
        return tk_parse_pattern(j, "Split pre-tokenizer", &p->re);
    case P_SEQUENCE: {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "%s: Sequence needs a 'pretokenizers' list", ctx);
        p->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *p->kids);
        if (!p->kids) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        for (const cJSON *e = arr->child; e; e = e->next) BRG_TRY(tk_pretok_parse(e, &p->kids[p->n_kids++]));
        return BRG_OK;
    }
    default:
        return BRG_OK;
    }
}

static const struct { const char *name; ptype type; } names[] = {
    {"BertPreTokenizer", P_BERT}, {"ByteLevel", P_BYTELEVEL}, {"Whitespace", P_WHITESPACE},
    {"WhitespaceSplit", P_WS_SPLIT}, {"Metaspace", P_METASPACE}, {"Punctuation", P_PUNCT}, {"Digits", P_DIGITS},
    {"Split", P_SPLIT}, {"Sequence", P_SEQUENCE}, {"CharDelimiterSplit", P_CHAR_DELIM}, {"FixedLength", P_FIXED},
};

static brg_status finish(tk_pretok *p, tk_pretok **out) {
    if (p->type == P_BYTELEVEL && p->use_regex) {
        brg_status st = tk_regex_compile(gpt2_pattern, false, &p->re);
        if (st != BRG_OK) {
            tk_pretok_free(p);
            return st;
        }
    }
    *out = p;
    return BRG_OK;
}

brg_status tk_pretok_parse(const cJSON *j, tk_pretok **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    const char *type = tk_type_of(j);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(type, names[i].name) != 0) continue;
        tk_pretok *p = calloc(1, sizeof *p);
        if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        p->type = names[i].type;
        brg_status st = parse_fields(j, p);
        if (st != BRG_OK) {
            tk_pretok_free(p);
            return st;
        }
        return finish(p, out);
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown pre_tokenizer type '%s'", type);
}

brg_status tk_pretok_simple(const char *type, bool add_prefix_space, tk_pretok **out) {
    tk_pretok *p = calloc(1, sizeof *p);
    if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    p->type = strcmp(type, "ByteLevel") == 0 ? P_BYTELEVEL : P_BERT;
    p->add_prefix_space = add_prefix_space;
    p->use_regex = true;
    return finish(p, out);
}

/* ---- splitting ------------------------------------------------------------------------------ */

typedef struct piece {
    size_t s, e;
    bool match;
} piece;

typedef struct pieces {
    piece *v;
    size_t n, cap;
} pieces;

static brg_status piece_push(pieces *p, size_t s, size_t e, bool match) {
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 16;
        piece *q = realloc(p->v, nc * sizeof *q);
        if (!q) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (pre-tokenizer)");
        p->v = q;
        p->cap = nc;
    }
    p->v[p->n++] = (piece){s, e, match};
    return BRG_OK;
}

/* Match ranges -> alternating (gap, match) pieces covering [0, n). */
static brg_status cover(const size_t *r, size_t k, size_t n, pieces *out) {
    size_t last = 0;
    for (size_t m = 0; m < k; m++) {
        if (last < r[2 * m]) BRG_TRY(piece_push(out, last, r[2 * m], false));
        BRG_TRY(piece_push(out, r[2 * m], r[2 * m + 1], true));
        last = r[2 * m + 1];
    }
    if (last < n || n == 0) BRG_TRY(piece_push(out, last, n, false));
    return BRG_OK;
}

/* NormalizedString::split's behaviours; `keep` marks what survives. */
static brg_status apply_behavior(pieces *in, behavior b, pieces *out) {
    bool prev = false;
    if (b == B_MERGED_NEXT) {
        for (size_t i = in->n; i-- > 0;) {
            piece p = in->v[i];
            if (p.match && !prev && out->n) out->v[out->n - 1].s = p.s;
            else BRG_TRY(piece_push(out, p.s, p.e, false));
            prev = p.match;
        }
        for (size_t i = 0; i < out->n / 2; i++) {
            piece t = out->v[i];
            out->v[i] = out->v[out->n - 1 - i];
            out->v[out->n - 1 - i] = t;
        }
        return BRG_OK;
    }
    for (size_t i = 0; i < in->n; i++) {
        piece p = in->v[i];
        if (b == B_REMOVED) BRG_TRY(piece_push(out, p.s, p.e, p.match));
        else if (b == B_ISOLATED) BRG_TRY(piece_push(out, p.s, p.e, false));
        else if (b == B_CONTIGUOUS && p.match == prev && out->n) out->v[out->n - 1].e = p.e;
        else if (b == B_MERGED_PREV && p.match && !prev && out->n) out->v[out->n - 1].e = p.e;
        else BRG_TRY(piece_push(out, p.s, p.e, false));
        prev = p.match;
    }
    return BRG_OK;
}

static brg_status emit(const tk_str *s, const size_t *r, size_t k, behavior b, bool invert, tk_splits *out) {
    pieces all = {0}, kept = {0};
    brg_status st = cover(r, k, s->n, &all);
    if (st == BRG_OK && invert)
        for (size_t i = 0; i < all.n; i++) all.v[i].match = !all.v[i].match;
    if (st == BRG_OK) st = apply_behavior(&all, b, &kept);
    for (size_t i = 0; i < kept.n && st == BRG_OK; i++) {
        if (kept.v[i].match || kept.v[i].s == kept.v[i].e) continue;
        tk_str part;
        st = tk_str_copy(&part, s, kept.v[i].s, kept.v[i].e);
        if (st == BRG_OK) st = tk_splits_push(out, &part, -1);
    }
    free(all.v);
    free(kept.v);
    return st;
}

typedef bool (*char_pred)(const tk_pretok *p, uint32_t c);

static bool pred_ws(const tk_pretok *p, uint32_t c) { return tk_is_whitespace(c); }
static bool pred_punct(const tk_pretok *p, uint32_t c) { return tk_is_bert_punct(c); }
static bool pred_digit(const tk_pretok *p, uint32_t c) { return tk_is_digit(c); }
static bool pred_delim(const tk_pretok *p, uint32_t c) { return c == p->replacement; }

/* Every char satisfying `pred` is one match (Pattern for Fn(char) -> bool). */
static brg_status split_chars(const tk_pretok *p, const tk_str *s, char_pred pred, behavior b, tk_splits *out) {
    size_t *r = malloc((s->n + 1) * 2 * sizeof *r), k = 0;
    if (!r) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (pre-tokenizer)");
    for (size_t i = 0; i < s->n; i++)
        if (pred(p, s->c[i].cp)) r[2 * k] = i, r[2 * k + 1] = i + 1, k++;
    brg_status st = emit(s, r, k, b, false, out);
    free(r);
    return st;
}

/* Whitespace: the regex \w+|[^\w\s]+ as runs of one class; whitespace is dropped. */
static brg_status split_whitespace(const tk_str *s, tk_splits *out) {
    for (size_t i = 0; i < s->n;) {
        uint32_t c = s->c[i].cp;
        if (tk_is_whitespace(c) && !tk_is_word_char(c)) {
            i++;
            continue;
        }
        bool word = tk_is_word_char(c);
        size_t j = i + 1;
        while (j < s->n && (word ? tk_is_word_char(s->c[j].cp)
                                 : !tk_is_word_char(s->c[j].cp) && !tk_is_whitespace(s->c[j].cp)))
            j++;
        tk_str part;
        BRG_TRY(tk_str_copy(&part, s, i, j));
        BRG_TRY(tk_splits_push(out, &part, -1));
        i = j;
    }
    return BRG_OK;
}

static brg_status split_regex(const tk_pretok *p, const tk_str *s, behavior b, tk_splits *out) {
    size_t *r = NULL, k = 0;
    BRG_TRY(tk_regex_find(p->re, s, 0, s->n, &r, &k));
    brg_status st = emit(s, r, k, b, p->invert, out);
    free(r);
    return st;
}

static brg_status prepend_char(tk_str *s, uint32_t c) {
    tk_changes ch = {0};
    brg_status st = tk_changes_push(&ch, c, 0);
    for (size_t i = 0; i < s->n && st == BRG_OK; i++) st = tk_changes_push(&ch, s->c[i].cp, i == 0);
    if (st == BRG_OK) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    return st;
}

static brg_status metaspace(const tk_pretok *p, tk_str *s, tk_splits *out) {
    for (size_t i = 0; i < s->n; i++)
        if (s->c[i].cp == ' ') s->c[i].cp = p->replacement;
    bool starts = s->n && s->c[0].cp == p->replacement;
    bool first = s->n && s->c[0].os == 0;
    if (s->n && !starts && (p->scheme == PREPEND_ALWAYS || (p->scheme == PREPEND_FIRST && first)))
        BRG_TRY(prepend_char(s, p->replacement));
    if (!p->split) {
        tk_str whole;
        BRG_TRY(tk_str_copy(&whole, s, 0, s->n));
        return tk_splits_push(out, &whole, -1);
    }
    tk_pretok delim = {.replacement = p->replacement};
    return split_chars(&delim, s, pred_delim, B_MERGED_NEXT, out);
}

static brg_status byte_map(tk_str *s) {
    tk_changes ch = {0};
    brg_status st = BRG_OK;
    for (size_t i = 0; i < s->n && st == BRG_OK; i++) {
        char b[4];
        size_t k = tk_utf8_encode(s->c[i].cp, b);
        for (size_t j = 0; j < k && st == BRG_OK; j++) st = tk_changes_push(&ch, tk_byte_to_char((uint8_t)b[j]), j > 0);
    }
    if (st == BRG_OK) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    return st;
}

static brg_status byte_level(const tk_pretok *p, tk_str *s, tk_splits *out) {
    if (p->add_prefix_space && s->n && s->c[0].cp != ' ') BRG_TRY(prepend_char(s, ' '));
    size_t first = out->n;
    if (p->use_regex) {
        BRG_TRY(split_regex(p, s, B_ISOLATED, out));
    } else {
        tk_str whole;
        BRG_TRY(tk_str_copy(&whole, s, 0, s->n));
        BRG_TRY(tk_splits_push(out, &whole, -1));
    }
    for (size_t i = first; i < out->n; i++) BRG_TRY(byte_map(&out->v[i].s));
    return BRG_OK;
}

/* FixedLength: chunks of `length` chars. */
static brg_status fixed_length(const tk_pretok *p, const tk_str *s, tk_splits *out) {
    for (size_t i = 0; i < s->n; i += (size_t)p->length) {
        size_t e = i + (size_t)p->length < s->n ? i + (size_t)p->length : s->n;
        tk_str part;
        BRG_TRY(tk_str_copy(&part, s, i, e));
        BRG_TRY(tk_splits_push(out, &part, -1));
    }
    return BRG_OK;
}

/* One split through one (non-Sequence) pre-tokenizer. */
static brg_status split_one(const tk_pretok *p, tk_str *s, tk_splits *out) {
    switch (p->type) {
    case P_BERT: {
        tk_splits words = {0};
        brg_status st = split_chars(p, s, pred_ws, B_REMOVED, &words);
        for (size_t i = 0; i < words.n && st == BRG_OK; i++)
            st = split_chars(p, &words.v[i].s, pred_punct, B_ISOLATED, out);
        tk_splits_free(&words);
        return st;
    }
    case P_BYTELEVEL: return byte_level(p, s, out);
    case P_WHITESPACE: return split_whitespace(s, out);
    case P_WS_SPLIT: return split_chars(p, s, pred_ws, B_REMOVED, out);
    case P_METASPACE: return metaspace(p, s, out);
    case P_PUNCT: return split_chars(p, s, pred_punct, p->behavior, out);
    case P_DIGITS: return split_chars(p, s, pred_digit, p->individual_digits ? B_ISOLATED : B_CONTIGUOUS, out);
    case P_CHAR_DELIM: return split_chars(p, s, pred_delim, B_REMOVED, out);
    case P_SPLIT: return split_regex(p, s, p->behavior, out);
    case P_FIXED: return fixed_length(p, s, out);
    case P_SEQUENCE: break;
    }
    return BRG_OK;
}

brg_status tk_pretok_apply(const tk_pretok *p, tk_splits *sp) {
    if (!p) return BRG_OK;
    if (p->type == P_SEQUENCE) {
        for (size_t i = 0; i < p->n_kids; i++) BRG_TRY(tk_pretok_apply(p->kids[i], sp));
        return BRG_OK;
    }
    tk_splits out = {0};
    brg_status st = BRG_OK;
    for (size_t i = 0; i < sp->n && st == BRG_OK; i++) {
        if (sp->v[i].token_id >= 0) {
            st = tk_splits_push(&out, &sp->v[i].s, sp->v[i].token_id);
            continue;
        }
        st = split_one(p, &sp->v[i].s, &out);
    }
    if (st != BRG_OK) {
        tk_splits_free(&out);
        return st;
    }
    tk_splits_free(sp);
    *sp = out;
    return BRG_OK;
}
