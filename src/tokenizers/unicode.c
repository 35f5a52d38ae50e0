/* Unicode for the tokenizers through utf8proc: the character predicates `tokenizers` uses (Rust
 * std and the unicode_categories crate), full lowercasing, the four normalization forms with
 * alignments kept per character, and grapheme clusters (for the Precompiled normalizer). */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tk_internal.h"

static utf8proc_propval_t category(uint32_t cp) {
    return utf8proc_category((utf8proc_int32_t)cp);
}

bool tk_is_whitespace(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

bool tk_is_punct(uint32_t cp) {
    utf8proc_propval_t c = category(cp);
    return c == UTF8PROC_CATEGORY_PC || c == UTF8PROC_CATEGORY_PD || c == UTF8PROC_CATEGORY_PS ||
           c == UTF8PROC_CATEGORY_PE || c == UTF8PROC_CATEGORY_PI || c == UTF8PROC_CATEGORY_PF ||
           c == UTF8PROC_CATEGORY_PO;
}

bool tk_is_bert_punct(uint32_t cp) {
    bool ascii = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                 (cp >= 0x7B && cp <= 0x7E);
    return ascii || tk_is_punct(cp);
}

bool tk_is_other(uint32_t cp) {
    utf8proc_propval_t c = category(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO;
}

bool tk_is_mn(uint32_t cp) {
    return category(cp) == UTF8PROC_CATEGORY_MN;
}

bool tk_is_mark(uint32_t cp) {
    utf8proc_propval_t c = category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool tk_is_digit(uint32_t cp) {
    utf8proc_propval_t c = category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

/* Rust regex's \w: Alphabetic, marks, decimal numbers, connector punctuation, join controls.
 * Alphabetic is letters + Nl + Other_Alphabetic; the latter are marks except the circled
 * letters, which are So. */
bool tk_is_word_char(uint32_t cp) {
    if (cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9)) return true;
    switch (category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

int tk_lowercase(uint32_t cp, uint32_t out[3]) {
    /* The one unconditional multi-char lowercase mapping in SpecialCasing.txt. */
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

static int ccc(uint32_t cp) {
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

/* Decomposition as unicode-normalization-alignments emits it: each char's decomposition
 * (change 0 for its first char, +1 for the others), then canonical ordering, a stable sort
 * of every run of non-starters by combining class; the changes travel with their chars. */
static brg_status decompose(const tk_str *s, bool compat, tk_changes *out) {
    utf8proc_option_t opt = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    for (size_t i = 0; i < s->n; i++) {
        utf8proc_int32_t buf[32];
        int boundclass = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)s->c[i].cp, buf, 32, opt, &boundclass);
        if (k < 1 || k > 32) {
            buf[0] = (utf8proc_int32_t)s->c[i].cp;
            k = 1;
        }
        for (utf8proc_ssize_t j = 0; j < k; j++) BRG_TRY(tk_changes_push(out, (uint32_t)buf[j], j > 0));
    }
    for (size_t i = 1; i < out->n; i++) {
        int ci = ccc(out->v[i].cp);
        if (ci == 0) continue;
        for (size_t j = i; j > 0; j--) {
            int cp = ccc(out->v[j - 1].cp);
            if (cp == 0 || cp <= ci) break;
            tk_change t = out->v[j - 1];
            out->v[j - 1] = out->v[j];
            out->v[j] = t;
        }
    }
    return BRG_OK;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
    utf8proc_ssize_t k = utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    return k == 1 ? (uint32_t)buf[0] : 0;
}

static brg_status flush(tk_changes *out, tk_change *k, bool *have, tk_changes *pending) {
    if (*have) BRG_TRY(tk_changes_push(out, k->cp, k->change));
    *have = false;
    for (size_t i = 0; i < pending->n; i++) BRG_TRY(tk_changes_push(out, pending->v[i].cp, pending->v[i].change));
    pending->n = 0;
    return BRG_OK;
}

/* Canonical composition with the crate's bookkeeping: a composite takes the change
 * k + c - 1 of its parts; blocked or uncomposable marks wait in `pending` and follow it. */
static brg_status recompose(const tk_changes *in, tk_changes *out) {
    tk_changes pending = {0};
    tk_change k = {0, 0};
    bool have = false;
    int last = -1; /* combining class of the last pending mark, -1: none */
    brg_status st = BRG_OK;
    for (size_t i = 0; i < in->n && st == BRG_OK; i++) {
        tk_change c = in->v[i];
        int cls = ccc(c.cp);
        uint32_t r;
        if (!have) {
            if (cls != 0) st = tk_changes_push(out, c.cp, c.change);
            else k = c, have = true;
        } else if (last >= 0 && last >= cls) {
            if (cls == 0) {
                st = flush(out, &k, &have, &pending);
                k = c, have = true, last = -1;
            } else {
                st = tk_changes_push(&pending, c.cp, c.change);
                last = cls;
            }
        } else if ((r = compose_pair(k.cp, c.cp)) != 0) {
            k = (tk_change){r, k.change + c.change - 1};
        } else if (last < 0 && cls == 0) {
            st = tk_changes_push(out, k.cp, k.change);
            k = c;
        } else {
            st = tk_changes_push(&pending, c.cp, c.change);
            last = cls;
        }
    }
    if (st == BRG_OK) st = flush(out, &k, &have, &pending);
    free(pending.v);
    return st;
}

brg_status tk_normalize_form(tk_str *s, tk_nf form) {
    tk_changes d = {0}, c = {0};
    brg_status st = decompose(s, form == TK_NFKC || form == TK_NFKD, &d);
    bool comp = form == TK_NFC || form == TK_NFKC;
    if (st == BRG_OK && comp) st = recompose(&d, &c);
    if (st == BRG_OK) st = tk_str_transform(s, comp ? &c : &d, 0);
    free(d.v);
    free(c.v);
    return st;
}

brg_status tk_graphemes(const tk_str *s, size_t **ends, size_t *count) {
    size_t *e = malloc((s->n + 1) * sizeof *e), n = 0;
    if (!e) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (graphemes)");
    utf8proc_int32_t state = 0;
    for (size_t i = 1; i <= s->n; i++) {
        if (i == s->n ||
            utf8proc_grapheme_break_stateful((utf8proc_int32_t)s->c[i - 1].cp, (utf8proc_int32_t)s->c[i].cp, &state))
            e[n++] = i;
    }
    *ends = e;
    *count = n;
    return BRG_OK;
}
