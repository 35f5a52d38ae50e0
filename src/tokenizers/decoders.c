/* Decoders: token strings back to text (WordPiece's "##" joins, ByteLevel's byte table,
 * Metaspace's "▁", BPEDecoder's suffix, ByteFallback, Fuse, Strip, Replace, Sequence). */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

typedef enum { D_WORDPIECE, D_BYTELEVEL, D_METASPACE, D_BPE, D_SEQUENCE, D_REPLACE, D_FUSE, D_STRIP,
               D_BYTEFALLBACK, D_CTC } dtype;

struct tk_decoder {
    dtype type;
    char *prefix;     /* WordPiece prefix, BPEDecoder suffix, Strip content, Replace content,
                       * CTC pad_token */
    char *delimiter;  /* CTC word_delimiter_token */
    bool cleanup, prepend;
    uint32_t replacement;
    int64_t start, stop;
    tk_regex *re;
    tk_decoder **kids;
    size_t n_kids;
};

brg_status tk_parse_pattern(const cJSON *j, const char *ctx, tk_regex **out);

void tk_decoder_free(tk_decoder *d) {
    if (!d) return;
    free(d->prefix);
    free(d->delimiter);
    tk_regex_free(d->re);
    for (size_t i = 0; i < d->n_kids; i++) tk_decoder_free(d->kids[i]);
    free(d->kids);
    free(d);
}

static brg_status dup_field(const cJSON *j, const char *ctx, const char *key, const char *def, char **out) {
    const char *s;
    BRG_TRY(brg_json_get_string(j, ctx, key, def == NULL, def, &s));
    if (!(*out = strdup(s))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    return BRG_OK;
}

static brg_status parse_fields(const cJSON *j, tk_decoder *d) {
    switch (d->type) {
    case D_WORDPIECE:
        BRG_TRY(dup_field(j, "WordPiece decoder", "prefix", "##", &d->prefix));
        return brg_json_get_bool(j, "WordPiece decoder", "cleanup", false, true, &d->cleanup);
    case D_BPE:
        return dup_field(j, "BPEDecoder", "suffix", "</w>", &d->prefix);
    case D_METASPACE: {
        const char *r;
        BRG_TRY(brg_json_get_string(j, "Metaspace decoder", "replacement", false, "\xe2\x96\x81", &r));
        tk_utf8_decode(r, strlen(r), &d->replacement);
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme");
        const cJSON *aps = cJSON_GetObjectItemCaseSensitive(j, "add_prefix_space");
        d->prepend = cJSON_IsString(ps) ? strcmp(ps->valuestring, "never") != 0 : !cJSON_IsFalse(aps);
        return BRG_OK;
    }
    case D_STRIP:
        BRG_TRY(dup_field(j, "Strip decoder", "content", " ", &d->prefix));
        BRG_TRY(brg_json_get_int(j, "Strip decoder", "start", false, 0, &d->start));
        return brg_json_get_int(j, "Strip decoder", "stop", false, 0, &d->stop);
    case D_CTC:
        BRG_TRY(dup_field(j, "CTC decoder", "pad_token", "<pad>", &d->prefix));
        BRG_TRY(dup_field(j, "CTC decoder", "word_delimiter_token", "|", &d->delimiter));
        return brg_json_get_bool(j, "CTC decoder", "cleanup", false, true, &d->cleanup);
    case D_REPLACE:
        BRG_TRY(dup_field(j, "Replace decoder", "content", NULL, &d->prefix));
        return tk_parse_pattern(j, "Replace decoder", &d->re);
    case D_SEQUENCE: {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "decoders");
        if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "Sequence decoder needs a 'decoders' list");
        d->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *d->kids);
        if (!d->kids) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        for (const cJSON *e = arr->child; e; e = e->next) {
            BRG_TRY(tk_decoder_parse(e, &d->kids[d->n_kids]));
            if (d->kids[d->n_kids]) d->n_kids++;
        }
        return BRG_OK;
    }
    default:
        return BRG_OK;
    }
}

static const struct { const char *name; dtype type; } names[] = {
    {"WordPiece", D_WORDPIECE}, {"ByteLevel", D_BYTELEVEL}, {"Metaspace", D_METASPACE}, {"BPEDecoder", D_BPE},
    {"Sequence", D_SEQUENCE}, {"Replace", D_REPLACE}, {"Fuse", D_FUSE}, {"Strip", D_STRIP},
    {"ByteFallback", D_BYTEFALLBACK}, {"CTC", D_CTC},
};

brg_status tk_decoder_parse(const cJSON *j, tk_decoder **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    const char *type = tk_type_of(j);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(type, names[i].name) != 0) continue;
        tk_decoder *d = calloc(1, sizeof *d);
        if (!d) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        d->type = names[i].type;
        brg_status st = parse_fields(j, d);
        if (st != BRG_OK) {
            tk_decoder_free(d);
            return st;
        }
        *out = d;
        return BRG_OK;
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown decoder type '%s'", type);
}

brg_status tk_decoder_simple(const char *type, tk_decoder **out) {
    tk_decoder *d = calloc(1, sizeof *d);
    if (!d) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    d->type = strcmp(type, "WordPiece") == 0 ? D_WORDPIECE : D_BYTELEVEL;
    d->cleanup = true;
    if (d->type == D_WORDPIECE && !(d->prefix = strdup("##"))) {
        free(d);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    *out = d;
    return BRG_OK;
}

/* ---- string helpers -------------------------------------------------------------------------- */

/* Rust's str::replace with an empty pattern, which matches at every character boundary: `to`
 * before every character and at the end ("ab" -> " a b " for " "). */
static char *insert_everywhere(const char *s, const char *to) {
    size_t tl = strlen(to), chars = 0, len = strlen(s);
    for (const char *p = s; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
    char *out = malloc(len + (chars + 1) * tl + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = s;; p++) {
        if (!*p || ((unsigned char)*p & 0xC0) != 0x80) memcpy(o, to, tl), o += tl;
        if (!*p) break;
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* s with every occurrence of `from` replaced by `to` (malloc'd; NULL on OOM). */
static char *replace_all(const char *s, const char *from, const char *to) {
    if (!*from) return insert_everywhere(s, to); /* strstr would find "" at the same place forever */
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    for (const char *p = s; (p = strstr(p, from)); p += fl) n++;
    char *out = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = s;;) {
        const char *q = strstr(p, from);
        if (!q) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, tl);
        o += tl;
        p = q + fl;
    }
    return out;
}

static brg_status set_tok(char **slot, char *v) {
    if (!v) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
    free(*slot);
    *slot = v;
    return BRG_OK;
}

/* WordPiece's cleanup, applied to one token string. */
static brg_status cleanup(char **slot) {
    static const char *rules[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                     {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},
                                     {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        BRG_TRY(set_tok(slot, replace_all(*slot, rules[r][0], rules[r][1])));
    return BRG_OK;
}

static brg_status wordpiece(const tk_decoder *d, char **t, size_t n) {
    size_t pl = strlen(d->prefix);
    for (size_t i = 0; i < n; i++) {
        if (i != 0) {
            char *v;
            if (pl && strncmp(t[i], d->prefix, pl) == 0) v = strdup(t[i] + pl);
            else if ((v = malloc(strlen(t[i]) + 2))) v[0] = ' ', strcpy(v + 1, t[i]);
            BRG_TRY(set_tok(&t[i], v));
        }
        if (d->cleanup) BRG_TRY(cleanup(&t[i]));
    }
    return BRG_OK;
}

/* CTC (wav2vec2): repeats collapse, pads vanish, the word delimiter becomes a space. */
static brg_status ctc(const tk_decoder *d, char **t, size_t *n) {
    size_t w = 0;
    for (size_t i = 0; i < *n; i++) {
        if (w > 0 && strcmp(t[i], t[w - 1]) == 0) free(t[i]);
        else t[w++] = t[i];
    }
    *n = w;
    for (size_t i = 0; i < *n; i++) {
        BRG_TRY(set_tok(&t[i], replace_all(t[i], d->prefix, "")));
        if (d->cleanup) {
            BRG_TRY(cleanup(&t[i]));
            BRG_TRY(set_tok(&t[i], replace_all(t[i], d->delimiter, " ")));
        }
    }
    w = 0;
    for (size_t i = 0; i < *n; i++) {
        if (t[i][0]) t[w++] = t[i];
        else free(t[i]);
    }
    *n = w;
    return BRG_OK;
}

static brg_status byte_level(char ***toks, size_t *n) {
    size_t total = 0;
    for (size_t i = 0; i < *n; i++) total += strlen((*toks)[i]);
    unsigned char *bytes = malloc(total + 1);
    if (!bytes) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
    size_t o = 0;
    for (size_t i = 0; i < *n; i++) {
        const char *t = (*toks)[i];
        size_t len = strlen(t), start = o;
        bool all = true;
        for (size_t k = 0; k < len && all;) {
            uint32_t cp;
            k += tk_utf8_decode(t + k, len - k, &cp);
            int b = tk_char_to_byte(cp);
            if (b < 0) all = false;
            else bytes[o++] = (unsigned char)b;
        }
        if (!all) {
            o = start;
            memcpy(bytes + o, t, len);
            o += len;
        }
    }
    char *text = tk_utf8_lossy(bytes, o);
    free(bytes);
    if (!text) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
    for (size_t i = 0; i < *n; i++) free((*toks)[i]);
    (*toks)[0] = text;
    *n = 1;
    return BRG_OK;
}

static brg_status metaspace(const tk_decoder *d, char **t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(t[i]), o = 0;
        char *v = malloc(len + 1);
        if (!v) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
        for (size_t k = 0; k < len;) {
            uint32_t cp;
            size_t cl = tk_utf8_decode(t[i] + k, len - k, &cp);
            if (cp == d->replacement) {
                if (!(i == 0 && d->prepend)) v[o++] = ' ';
            } else {
                memcpy(v + o, t[i] + k, cl);
                o += cl;
            }
            k += cl;
        }
        v[o] = 0;
        BRG_TRY(set_tok(&t[i], v));
    }
    return BRG_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "<0xAB>" (either case, as Rust's from_str_radix reads it) -> 0xAB, else -1. */
static int hex_byte(const char *t) {
    if (strlen(t) != 6 || strncmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
    int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Runs of <0xXX> tokens become their UTF-8 text, or one U+FFFD per token when invalid. */
static brg_status byte_fallback(char **t, size_t *n) {
    unsigned char *buf = malloc(*n + 1);
    if (!buf) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
    size_t w = 0;
    brg_status st = BRG_OK;
    for (size_t i = 0; i < *n;) {
        if (st != BRG_OK || hex_byte(t[i]) < 0) { /* after a failure, only keep ownership */
            t[w++] = t[i++];
            continue;
        }
        size_t j = i, k = 0;
        while (j < *n && hex_byte(t[j]) >= 0) buf[k++] = (unsigned char)hex_byte(t[j++]);
        bool valid = brg_utf8_valid((const char *)buf, k, NULL);
        for (size_t q = i; q < j; q++) free(t[q]);
        size_t from = w;
        if (valid) {
            char *v = malloc(k + 1);
            if (v) memcpy(v, buf, k), v[k] = 0;
            t[w++] = v;
        } else {
            for (size_t q = i; q < j; q++) t[w++] = strdup("\xef\xbf\xbd");
        }
        /* A failed allocation leaves NULL entries, which the caller frees like the others. */
        for (size_t q = from; q < w; q++)
            if (!t[q]) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
        i = j;
    }
    free(buf);
    *n = w;
    return st;
}

static brg_status fuse(char **t, size_t *n) {
    if (*n == 0) return BRG_OK;
    size_t total = 0;
    for (size_t i = 0; i < *n; i++) total += strlen(t[i]);
    char *v = malloc(total + 1), *o = v;
    if (!v) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
    for (size_t i = 0; i < *n; i++) {
        size_t l = strlen(t[i]);
        memcpy(o, t[i], l);
        o += l;
        free(t[i]);
    }
    *o = 0;
    t[0] = v;
    *n = 1;
    return BRG_OK;
}

/* Strip: up to `start` leading and `stop` trailing copies of the content char. */
static brg_status strip(const tk_decoder *d, char **t, size_t n) {
    size_t cl = strlen(d->prefix);
    for (size_t i = 0; i < n && cl; i++) {
        char *s = t[i];
        size_t len = strlen(s), a = 0, b = len;
        for (int64_t k = 0; k < d->start && a + cl <= b && strncmp(s + a, d->prefix, cl) == 0; k++) a += cl;
        for (int64_t k = 0; k < d->stop && b >= a + cl && strncmp(s + b - cl, d->prefix, cl) == 0; k++) b -= cl;
        memmove(s, s + a, b - a);
        s[b - a] = 0;
    }
    return BRG_OK;
}

static brg_status replace(const tk_decoder *d, char **t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        tk_str s;
        BRG_TRY(tk_str_from_utf8(&s, t[i], strlen(t[i]), 0));
        size_t *r = NULL, k = 0;
        brg_status st = tk_regex_find(d->re, &s, 0, s.n, &r, &k);
        size_t cap = strlen(t[i]) + k * strlen(d->prefix) + 1, o = 0, last = 0;
        char *v = st == BRG_OK ? malloc(cap) : NULL;
        if (st == BRG_OK && !v) st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
        for (size_t m = 0; m <= k && st == BRG_OK; m++) {
            size_t ms = m < k ? r[2 * m] : s.n;
            char *piece = tk_str_utf8(&s, last, ms, NULL);
            if (!piece) {
                st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory (decode)");
                break;
            }
            strcpy(v + o, piece);
            o += strlen(piece);
            free(piece);
            if (m < k) {
                strcpy(v + o, d->prefix);
                o += strlen(d->prefix);
                last = r[2 * m + 1];
            }
        }
        free(r);
        tk_str_free(&s);
        if (st != BRG_OK) {
            free(v);
            return st;
        }
        BRG_TRY(set_tok(&t[i], v));
    }
    return BRG_OK;
}

static brg_status bpe(const tk_decoder *d, char **t, size_t n) {
    for (size_t i = 0; i < n; i++) BRG_TRY(set_tok(&t[i], replace_all(t[i], d->prefix, i + 1 == n ? "" : " ")));
    return BRG_OK;
}

brg_status tk_decoder_apply(const tk_decoder *d, char ***toks, size_t *n) {
    if (!d) return BRG_OK;
    switch (d->type) {
    case D_WORDPIECE: return wordpiece(d, *toks, *n);
    case D_BYTELEVEL: return *n ? byte_level(toks, n) : BRG_OK;
    case D_METASPACE: return metaspace(d, *toks, *n);
    case D_BPE: return bpe(d, *toks, *n);
    case D_REPLACE: return replace(d, *toks, *n);
    case D_FUSE: return fuse(*toks, n);
    case D_STRIP: return strip(d, *toks, *n);
    case D_BYTEFALLBACK: return byte_fallback(*toks, n);
    case D_CTC: return ctc(d, *toks, n);
    case D_SEQUENCE:
        for (size_t i = 0; i < d->n_kids; i++) BRG_TRY(tk_decoder_apply(d->kids[i], toks, n));
        return BRG_OK;
    }
    return BRG_OK;
}
