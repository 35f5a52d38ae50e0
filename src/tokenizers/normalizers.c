/* Normalizers: parsing their tokenizer.json objects and applying them to an aligned string.
 * Every rewrite goes through tk_str_transform with the (char, change) lists `tokenizers`
 * builds, so offsets map back to the input exactly as in Python. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"
#include "tk_precompiled.h"

typedef enum {
    N_BERT, N_STRIP, N_STRIP_ACCENTS, N_NFC, N_NFD, N_NFKC, N_NFKD, N_SEQUENCE, N_LOWERCASE, N_NMT,
    N_PRECOMPILED, N_REPLACE, N_PREPEND, N_BYTELEVEL
} ntype;

struct tk_normalizer {
    ntype type;
    bool clean_text, chinese, lowercase, strip_left, strip_right;
    int strip_accents; /* -1: null, follow lowercase */
    tk_regex *re;
    char *content;     /* Replace's content, Prepend's prepend */
    tk_precompiled *pc;
    tk_normalizer **kids;
    size_t n_kids;
};

static const struct { const char *name; ntype type; } names[] = {
    {"BertNormalizer", N_BERT}, {"Strip", N_STRIP}, {"StripAccents", N_STRIP_ACCENTS}, {"NFC", N_NFC},
    {"NFD", N_NFD}, {"NFKC", N_NFKC}, {"NFKD", N_NFKD}, {"Sequence", N_SEQUENCE}, {"Lowercase", N_LOWERCASE},
    {"Nmt", N_NMT}, {"Precompiled", N_PRECOMPILED}, {"Replace", N_REPLACE}, {"Prepend", N_PREPEND},
    {"ByteLevel", N_BYTELEVEL},
};

void tk_normalizer_free(tk_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_kids; i++) tk_normalizer_free(n->kids[i]);
    free(n->kids);
    tk_regex_free(n->re);
    free(n->content);
    tk_precompiled_free(n->pc);
    free(n);
}

/* Replace / Split patterns: {"String": s} (literal) or {"Regex": r}. */
brg_status tk_parse_pattern(const cJSON *j, const char *ctx, tk_regex **out) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    if (cJSON_IsString(s)) return tk_regex_compile(s->valuestring, true, out);
    if (cJSON_IsString(r)) return tk_regex_compile(r->valuestring, false, out);
    return brg_error(BRG_ERR_FORMAT, "%s: 'pattern' must be {\"String\": ...} or {\"Regex\": ...}", ctx);
}

static brg_status parse_fields(const cJSON *j, tk_normalizer *n) {
    const char *ctx = "tokenizer.json normalizer";
    switch (n->type) {
    case N_BERT: {
        BRG_TRY(brg_json_get_bool(j, ctx, "clean_text", false, true, &n->clean_text));
        BRG_TRY(brg_json_get_bool(j, ctx, "handle_chinese_chars", false, true, &n->chinese));
        BRG_TRY(brg_json_get_bool(j, ctx, "lowercase", false, true, &n->lowercase));
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(j, "strip_accents");
        n->strip_accents = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : -1;
        return BRG_OK;
    }
    case N_STRIP:
        BRG_TRY(brg_json_get_bool(j, ctx, "strip_left", false, true, &n->strip_left));
        return brg_json_get_bool(j, ctx, "strip_right", false, true, &n->strip_right);
    case N_REPLACE: {
        const char *c;
        BRG_TRY(brg_json_get_string(j, "Replace normalizer", "content", true, NULL, &c));
        if (!(n->content = strdup(c))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        return tk_parse_pattern(j, "Replace normalizer", &n->re);
    }
    case N_PREPEND: {
        const char *c;
        BRG_TRY(brg_json_get_string(j, "Prepend normalizer", "prepend", true, NULL, &c));
        if (!(n->content = strdup(c))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        return BRG_OK;
    }
    case N_PRECOMPILED: {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "precompiled_charsmap");
        if (cJSON_IsNull(m) || (cJSON_IsString(m) && !m->valuestring[0])) return BRG_OK; /* identity */
        if (!cJSON_IsString(m))
            return brg_error(BRG_ERR_FORMAT, "Precompiled: 'precompiled_charsmap' must be a string");
        return tk_precompiled_parse(m->valuestring, &n->pc);
    }
    case N_SEQUENCE: {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "Sequence normalizer: 'normalizers' must be a list");
        int k = cJSON_GetArraySize(arr);
        n->kids = calloc((size_t)k + 1, sizeof *n->kids);
        if (!n->kids) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        for (const cJSON *e = arr->child; e; e = e->next) BRG_TRY(tk_normalizer_parse(e, &n->kids[n->n_kids++]));
        return BRG_OK;
    }
    default:
        return BRG_OK;
    }
}

brg_status tk_normalizer_parse(const cJSON *j, tk_normalizer **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    const char *type = tk_type_of(j);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(type, names[i].name) != 0) continue;
        tk_normalizer *n = calloc(1, sizeof *n);
        if (!n) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        n->type = names[i].type;
        brg_status st = parse_fields(j, n);
        if (st != BRG_OK) {
            tk_normalizer_free(n);
            return st;
        }
        *out = n;
        return BRG_OK;
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown normalizer type '%s'", type);
}

brg_status tk_normalizer_bert(bool lowercase, tk_normalizer **out) {
    tk_normalizer *n = calloc(1, sizeof *n);
    if (!n) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    *n = (tk_normalizer){.type = N_BERT, .clean_text = true, .chinese = true, .lowercase = lowercase,
                         .strip_accents = -1};
    *out = n;
    return BRG_OK;
}

/* NormalizedString::filter: a kept char absorbs the removed chars that follow it; removed
 * chars before the first kept one are the initial offset. */
static brg_status filter(tk_str *s, bool (*drop)(uint32_t)) {
    tk_changes ch = {0};
    size_t removed = 0, removed_start = 0;
    bool have_last = false;
    uint32_t last = 0;
    brg_status st = BRG_OK;
    for (size_t i = 0; i < s->n && st == BRG_OK; i++) {
        if (drop(s->c[i].cp)) {
            removed++;
            continue;
        }
        if (have_last) st = tk_changes_push(&ch, last, -(int32_t)removed);
        else removed_start = removed;
        last = s->c[i].cp;
        have_last = true;
        removed = 0;
    }
    if (st == BRG_OK && have_last) st = tk_changes_push(&ch, last, -(int32_t)removed);
    if (st == BRG_OK) st = tk_str_transform(s, &ch, removed_start);
    free(ch.v);
    return st;
}

static bool bert_drop(uint32_t c) {
    return c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && tk_is_other(c));
}

static bool nmt_drop(uint32_t c) {
    return (c >= 1 && c <= 8) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F;
}

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static brg_status chinese_pad(tk_str *s) {
    tk_changes ch = {0};
    brg_status st = BRG_OK;
    for (size_t i = 0; i < s->n && st == BRG_OK; i++) {
        uint32_t c = s->c[i].cp;
        if (!is_chinese(c)) {
            st = tk_changes_push(&ch, c, 0);
            continue;
        }
        st = tk_changes_push(&ch, ' ', 0);
        if (st == BRG_OK) st = tk_changes_push(&ch, c, 1);
        if (st == BRG_OK) st = tk_changes_push(&ch, ' ', 1);
    }
    if (st == BRG_OK) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    return st;
}

static brg_status lowercase(tk_str *s) {
    tk_changes ch = {0};
    brg_status st = BRG_OK;
    for (size_t i = 0; i < s->n && st == BRG_OK; i++) {
        uint32_t l[3];
        int k = tk_lowercase(s->c[i].cp, l);
        for (int j = 0; j < k && st == BRG_OK; j++) st = tk_changes_push(&ch, l[j], j > 0);
    }
    if (st == BRG_OK) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    return st;
}

static bool not_mn(uint32_t c) { return tk_is_mn(c); }
static bool is_mark(uint32_t c) { return tk_is_mark(c); }

static brg_status bert(const tk_normalizer *n, tk_str *s) {
    if (n->clean_text) {
        BRG_TRY(filter(s, bert_drop));
        for (size_t i = 0; i < s->n; i++)
            if (tk_is_whitespace(s->c[i].cp)) s->c[i].cp = ' ';
    }
    if (n->chinese) BRG_TRY(chinese_pad(s));
    bool strip = n->strip_accents < 0 ? n->lowercase : n->strip_accents == 1;
    if (strip) {
        BRG_TRY(tk_normalize_form(s, TK_NFD));
        BRG_TRY(filter(s, not_mn));
    }
    if (n->lowercase) BRG_TRY(lowercase(s));
    return BRG_OK;
}

static brg_status strip(tk_str *s, bool left, bool right) {
    size_t a = 0, b = s->n;
    if (left)
        while (a < b && tk_is_whitespace(s->c[a].cp)) a++;
    if (right)
        while (b > a && tk_is_whitespace(s->c[b - 1].cp)) b--;
    memmove(s->c, s->c + a, (b - a) * sizeof *s->c);
    s->n = b - a;
    return BRG_OK;
}

/* Every match is replaced by `content`, each new char aligned to the match's last char. */
static brg_status replace(const tk_normalizer *n, tk_str *s) {
    size_t *r, k;
    BRG_TRY(tk_regex_find(n->re, s, 0, s->n, &r, &k));
    tk_str content = {0}, out = {0};
    brg_status st = tk_str_from_utf8(&content, n->content, strlen(n->content), 0);
    size_t last = 0;
    for (size_t m = 0; m <= k && st == BRG_OK; m++) {
        size_t ms = m < k ? r[2 * m] : s->n, me = m < k ? r[2 * m + 1] : s->n;
        for (size_t i = last; i < ms && st == BRG_OK; i++) st = tk_str_push(&out, s->c[i].cp, s->c[i].os, s->c[i].oe);
        if (m == k) break;
        tk_char al = me >= 1 ? s->c[me - 1] : (tk_char){0, 0, 0};
        for (size_t i = 0; i < content.n && st == BRG_OK; i++) st = tk_str_push(&out, content.c[i].cp, al.os, al.oe);
        last = me;
    }
    free(r);
    tk_str_free(&content);
    if (st != BRG_OK) {
        tk_str_free(&out);
        return st;
    }
    tk_str_free(s);
    *s = out;
    return BRG_OK;
}

static brg_status prepend(const tk_normalizer *n, tk_str *s) {
    if (s->n == 0) return BRG_OK;
    tk_str p = {0};
    BRG_TRY(tk_str_from_utf8(&p, n->content, strlen(n->content), 0));
    tk_changes ch = {0};
    brg_status st = BRG_OK;
    for (size_t i = 0; i < p.n && st == BRG_OK; i++) st = tk_changes_push(&ch, p.c[i].cp, i != 0);
    if (st == BRG_OK && p.n) st = tk_changes_push(&ch, s->c[0].cp, 1);
    for (size_t i = 1; i < s->n && st == BRG_OK; i++) st = tk_changes_push(&ch, s->c[i].cp, 0);
    if (st == BRG_OK && p.n) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    tk_str_free(&p);
    return st;
}

/* The ByteLevel normalizer: every UTF-8 byte becomes its table char (extra bytes inserted). */
static brg_status byte_level(tk_str *s) {
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

static uint32_t nmt_map(uint32_t c) {
    if (c == 9 || c == 10 || c == 12 || c == 13 || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
        c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
        return ' ';
    return c;
}

brg_status tk_normalizer_apply(const tk_normalizer *n, tk_str *s) {
    if (!n) return BRG_OK;
    switch (n->type) {
    case N_BERT: return bert(n, s);
    case N_STRIP: return strip(s, n->strip_left, n->strip_right);
    case N_STRIP_ACCENTS: return filter(s, is_mark);
    case N_NFC: return tk_normalize_form(s, TK_NFC);
    case N_NFD: return tk_normalize_form(s, TK_NFD);
    case N_NFKC: return tk_normalize_form(s, TK_NFKC);
    case N_NFKD: return tk_normalize_form(s, TK_NFKD);
    case N_LOWERCASE: return lowercase(s);
    case N_NMT:
        BRG_TRY(filter(s, nmt_drop));
        for (size_t i = 0; i < s->n; i++) s->c[i].cp = nmt_map(s->c[i].cp);
        return BRG_OK;
    case N_PRECOMPILED: return n->pc ? tk_precompiled_apply(n->pc, s) : BRG_OK;
    case N_REPLACE: return replace(n, s);
    case N_PREPEND: return prepend(n, s);
    case N_BYTELEVEL: return byte_level(s);
    case N_SEQUENCE:
        for (size_t i = 0; i < n->n_kids; i++) BRG_TRY(tk_normalizer_apply(n->kids[i], s));
        return BRG_OK;
    }
    return BRG_OK;
}
