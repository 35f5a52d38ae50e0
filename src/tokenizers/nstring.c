/* The aligned string every tokenizer stage works on (code points + original byte ranges), the
 * transformation rule that keeps alignments as `tokenizers` keeps them, UTF-8 helpers, and the
 * small growable arrays (splits, tokens, encodings) the pipeline passes along. */
#include <stdlib.h>
#include <string.h>

#include "tk_internal.h"

#define GROW(arr, n, cap, what)                                                         \
    do {                                                                                \
        if ((n) == (cap)) {                                                             \
            size_t nc_ = (cap) ? (cap) * 2 : 16;                                        \
            void *p_ = realloc((arr), nc_ * sizeof *(arr));                             \
            if (!p_) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (%s)", what); \
            (arr) = p_;                                                                 \
            (cap) = nc_;                                                                \
        }                                                                               \
    } while (0)

brg_status tk_str_push(tk_str *s, uint32_t cp, uint32_t os, uint32_t oe) {
    GROW(s->c, s->n, s->cap, "text");
    s->c[s->n++] = (tk_char){cp, os, oe};
    return BRG_OK;
}

void tk_str_free(tk_str *s) {
    free(s->c);
    *s = (tk_str){0};
}

brg_status tk_str_copy(tk_str *dst, const tk_str *src, size_t from, size_t to) {
    *dst = (tk_str){0};
    for (size_t i = from; i < to; i++) BRG_TRY(tk_str_push(dst, src->c[i].cp, src->c[i].os, src->c[i].oe));
    return BRG_OK;
}

size_t tk_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length and value of a well-formed sequence at b[0..n), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *b, size_t n, uint32_t *cp) {
    unsigned char c = b[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((b[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (b[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

size_t tk_utf8_decode(const char *s, size_t len, uint32_t *cp) {
    size_t k = utf8_seq((const unsigned char *)s, len, cp);
    if (k == 0) {
        *cp = 0xFFFD;
        return 1;
    }
    return k;
}

brg_status tk_str_from_utf8(tk_str *s, const char *text, size_t len, uint32_t base) {
    *s = (tk_str){0};
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = utf8_seq((const unsigned char *)text + i, len - i, &cp);
        if (k == 0) {
            tk_str_free(s);
            return brg_error(BRG_ERR_INVALID_ARG, "invalid UTF-8 at byte %zu", i);
        }
        BRG_TRY(tk_str_push(s, cp, base + (uint32_t)i, base + (uint32_t)(i + k)));
        i += k;
    }
    return BRG_OK;
}

char *tk_str_utf8(const tk_str *s, size_t from, size_t to, size_t **byte_pos) {
    char *out = malloc((to - from) * 4 + 1);
    size_t *pos = byte_pos ? malloc((to - from + 1) * sizeof *pos) : NULL;
    if (!out || (byte_pos && !pos)) {
        free(out);
        free(pos);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = from; i < to; i++) {
        if (pos) pos[i - from] = o;
        o += tk_utf8_encode(s->c[i].cp, out + o);
    }
    if (pos) pos[to - from] = o;
    out[o] = 0;
    if (byte_pos) *byte_pos = pos;
    return out;
}

char *tk_utf8_lossy(const unsigned char *b, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_seq(b + i, n - i, &cp);
        if (k) {
            memcpy(out + o, b + i, k);
            o += k;
            i += k;
            continue;
        }
        /* A maximal invalid prefix: the lead byte plus the continuation bytes that could still
         * have completed it (Unicode's "substitution of maximal subparts", as Rust does). */
        size_t len = 1;
        unsigned char c = b[i];
        size_t want = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
        for (size_t j = 1; j < want && i + j < n; j++) {
            unsigned char d = b[i + j];
            unsigned char lo = 0x80, hi = 0xBF;
            if (j == 1) {
                if (c == 0xE0) lo = 0xA0;
                else if (c == 0xED) hi = 0x9F;
                else if (c == 0xF0) lo = 0x90;
                else if (c == 0xF4) hi = 0x8F;
            }
            if (d < lo || d > hi) break;
            len++;
        }
        o += tk_utf8_encode(0xFFFD, out + o);
        i += len;
    }
    out[o] = 0;
    return out;
}

brg_status tk_changes_push(tk_changes *c, uint32_t cp, int32_t change) {
    GROW(c->v, c->n, c->cap, "normalization");
    c->v[c->n++] = (tk_change){cp, change};
    return BRG_OK;
}

brg_status tk_str_transform(tk_str *s, const tk_changes *ch, size_t initial_offset) {
    tk_str out = {0};
    size_t idx = initial_offset; /* next input char to be replaced */
    for (size_t i = 0; i < ch->n; i++) {
        int32_t change = ch->v[i].change;
        tk_char al = {0, 0, 0};
        if (change > 0) {
            /* Inserted characters share the alignment of the input char before them. */
            if (idx >= 1 && idx - 1 < s->n) al = s->c[idx - 1];
        } else if (idx < s->n) {
            al = s->c[idx];
            idx += 1 + (size_t)(-change);
        }
        brg_status st = tk_str_push(&out, ch->v[i].cp, al.os, al.oe);
        if (st != BRG_OK) {
            tk_str_free(&out);
            return st;
        }
    }
    tk_str_free(s);
    *s = out;
    return BRG_OK;
}

brg_status tk_splits_push(tk_splits *sp, tk_str *s, int32_t token_id) {
    if (sp->n == sp->cap) {
        size_t nc = sp->cap ? sp->cap * 2 : 16;
        tk_split *p = realloc(sp->v, nc * sizeof *p);
        if (!p) {
            tk_str_free(s);
            return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (splits)");
        }
        sp->v = p;
        sp->cap = nc;
    }
    sp->v[sp->n++] = (tk_split){*s, token_id};
    *s = (tk_str){0};
    return BRG_OK;
}

void tk_splits_free(tk_splits *sp) {
    for (size_t i = 0; i < sp->n; i++) tk_str_free(&sp->v[i].s);
    free(sp->v);
    *sp = (tk_splits){0};
}

brg_status tk_tokens_push(tk_tokens *t, int32_t id, const char *value, size_t vlen, size_t s, size_t e) {
    GROW(t->v, t->n, t->cap, "tokens");
    char *v = malloc(vlen + 1);
    if (!v) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (token)");
    memcpy(v, value, vlen);
    v[vlen] = 0;
    t->v[t->n++] = (tk_token){id, v, s, e};
    return BRG_OK;
}

void tk_tokens_free(tk_tokens *t) {
    for (size_t i = 0; i < t->n; i++) free(t->v[i].value);
    free(t->v);
    *t = (tk_tokens){0};
}

brg_status tk_enc_push(tk_enc *e, const tk_entry *entry, const char *tok) {
    GROW(e->v, e->n, e->cap, "encoding");
    char *t = strdup(tok ? tok : "");
    if (!t) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (encoding)");
    e->v[e->n] = *entry;
    e->v[e->n++].tok = t;
    return BRG_OK;
}

void tk_enc_free(tk_enc *e) {
    for (size_t i = 0; i < e->n; i++) free(e->v[i].tok);
    free(e->v);
    *e = (tk_enc){0};
}

const char *tk_type_of(const cJSON *j) {
    const cJSON *t = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "type") : NULL;
    return cJSON_IsString(t) ? t->valuestring : "<missing>";
}
