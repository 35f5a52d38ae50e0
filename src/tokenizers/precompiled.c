/* The Precompiled normalizer: SentencePiece's compiled character map (a Darts-clone double
 * array over UTF-8 keys plus a pool of NUL-terminated replacements), applied the way
 * `tokenizers` applies it: per grapheme cluster, the whole cluster when it is shorter than 6
 * bytes and some key is a prefix of it, otherwise character by character. */
#include <stdlib.h>
#include <string.h>

#include "tk_internal.h"
#include "tk_precompiled.h"

struct tk_precompiled {
    uint32_t *units;
    size_t n_units;
    char *pool;
    size_t pool_len;
};

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static brg_status b64_decode(const char *s, unsigned char **out, size_t *len) {
    size_t n = strlen(s), o = 0;
    unsigned char *b = malloc(n / 4 * 3 + 3);
    if (!b) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (charsmap)");
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(b);
            return brg_error(BRG_ERR_FORMAT, "Precompiled: precompiled_charsmap is not base64 (byte %zu)", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out = b;
    *len = o;
    return BRG_OK;
}

brg_status tk_precompiled_parse(const char *b64, tk_precompiled **out) {
    unsigned char *blob = NULL;
    size_t len = 0;
    BRG_TRY(b64_decode(b64, &blob, &len));
    uint32_t t = len >= 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                                (uint32_t)blob[3] << 24
                          : 0;
    if (len < 8 || (size_t)t + 4 > len || t % 4 || t == 0) {
        free(blob);
        return brg_error(BRG_ERR_FORMAT, "Precompiled: precompiled_charsmap is malformed (trie size %u of %zu bytes)",
                         t, len);
    }
    tk_precompiled *p = calloc(1, sizeof *p);
    if (p) {
        p->n_units = t / 4;
        p->units = malloc(t);
        p->pool_len = len - 4 - t;
        p->pool = malloc(p->pool_len + 1);
    }
    if (!p || !p->units || !p->pool) {
        free(blob);
        tk_precompiled_free(p);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (charsmap)");
    }
    for (size_t i = 0; i < p->n_units; i++) {
        const unsigned char *u = blob + 4 + 4 * i;
        p->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(p->pool, blob + 4 + t, p->pool_len);
    p->pool[p->pool_len] = 0; /* a pool missing its last NUL still ends */
    free(blob);
    *out = p;
    return BRG_OK;
}

void tk_precompiled_free(tk_precompiled *p) {
    if (!p) return;
    free(p->units);
    free(p->pool);
    free(p);
}

static uint32_t unit_offset(uint32_t u) {
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* The replacement of the shortest key that is a prefix of key[0..n), or NULL. */
static const char *lookup(const tk_precompiled *p, const char *key, size_t n) {
    size_t pos = unit_offset(p->units[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= p->n_units) return NULL;
        uint32_t u = p->units[pos];
        if ((u & 0x800000FFu) != c) return NULL;
        pos ^= unit_offset(u);
        if (pos >= p->n_units) return NULL;
        if ((u >> 8) & 1) {
            uint32_t v = p->units[pos] & 0x7FFFFFFFu;
            return v < p->pool_len ? p->pool + v : NULL;
        }
    }
    return NULL;
}

/* `tokenizers`' replace(): new chars replace old ones one for one; extra new chars are
 * insertions; fewer new chars make the last change absorb the removed ones. */
static brg_status replace(tk_changes *ch, size_t old_count, const char *repl) {
    tk_str r = {0};
    BRG_TRY(tk_str_from_utf8(&r, repl, strlen(repl), 0));
    brg_status st = BRG_OK;
    for (size_t i = 0; i < r.n && st == BRG_OK; i++) st = tk_changes_push(ch, r.c[i].cp, 0);
    long diff = (long)r.n - (long)old_count;
    if (diff > 0)
        for (size_t i = 0; i < (size_t)diff; i++) ch->v[ch->n - 1 - i].change = 1;
    else if (diff < 0 && ch->n > 0)
        ch->v[ch->n - 1].change += (int32_t)diff;
    tk_str_free(&r);
    return st;
}

brg_status tk_precompiled_apply(const tk_precompiled *p, tk_str *s) {
    size_t *ends, ng;
    BRG_TRY(tk_graphemes(s, &ends, &ng));
    tk_changes ch = {0};
    bool modified = false;
    brg_status st = BRG_OK;
    for (size_t g = 0, start = 0; g < ng && st == BRG_OK; start = ends[g++]) {
        size_t end = ends[g];
        char *bytes = tk_str_utf8(s, start, end, NULL);
        if (!bytes) {
            st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory (charsmap)");
            break;
        }
        size_t blen = strlen(bytes);
        const char *repl = blen < 6 ? lookup(p, bytes, blen) : NULL;
        free(bytes);
        if (repl) {
            modified = true;
            st = replace(&ch, end - start, repl);
            continue;
        }
        for (size_t i = start; i < end && st == BRG_OK; i++) {
            char one[4];
            size_t k = tk_utf8_encode(s->c[i].cp, one);
            const char *r = lookup(p, one, k);
            if (r) {
                modified = true;
                st = replace(&ch, 1, r);
            } else {
                st = tk_changes_push(&ch, s->c[i].cp, 0);
            }
        }
    }
    free(ends);
    if (st == BRG_OK && modified) st = tk_str_transform(s, &ch, 0);
    free(ch.v);
    return st;
}
