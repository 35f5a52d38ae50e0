/* Regular expressions for the pre-tokenizers and Replace through PCRE2 (UTF + Unicode
 * properties). tokenizer.json patterns are Oniguruma's, whose syntax PCRE2 shares for what
 * these files use; matching runs on the code points of an aligned string. */
#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tk_internal.h"

struct tk_regex {
    pcre2_code *code;
};

brg_status tk_regex_compile(const char *pattern, bool literal, tk_regex **out) {
    tk_str p = {0};
    BRG_TRY(tk_str_from_utf8(&p, pattern, strlen(pattern), 0));
    PCRE2_UCHAR32 *buf = malloc((p.n + 1) * sizeof *buf);
    if (!buf) {
        tk_str_free(&p);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (regex)");
    }
    for (size_t i = 0; i < p.n; i++) buf[i] = p.c[i].cp;
    int err = 0;
    PCRE2_SIZE erroff = 0;
    /* PCRE2_LITERAL takes UTF but no other option. */
    uint32_t opts = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
    pcre2_code *code = pcre2_compile(buf, p.n, opts, &err, &erroff, NULL);
    free(buf);
    tk_str_free(&p);
    if (!code) {
        PCRE2_UCHAR32 msg[256];
        char m8[512];
        pcre2_get_error_message(err, msg, 256);
        size_t o = 0;
        for (size_t i = 0; msg[i] && o + 4 < sizeof m8; i++) o += tk_utf8_encode(msg[i], m8 + o);
        m8[o] = 0;
        return brg_error(BRG_ERR_FORMAT, "bad regex '%s': %s at %zu", pattern, m8, (size_t)erroff);
    }
    tk_regex *re = malloc(sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (regex)");
    }
    re->code = code;
    *out = re;
    return BRG_OK;
}

void tk_regex_free(tk_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

brg_status tk_regex_find(const tk_regex *re, const tk_str *s, size_t from, size_t to, size_t **ranges,
                         size_t *count) {
    size_t n = to - from, cap = 16, k = 0;
    PCRE2_UCHAR32 *buf = malloc((n + 1) * sizeof *buf);
    size_t *r = malloc(cap * 2 * sizeof *r);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    brg_status st = (buf && r && md) ? BRG_OK : brg_error(BRG_ERR_OOM, "tokenizer: out of memory (regex)");
    for (size_t i = 0; st == BRG_OK && i < n; i++) buf[i] = s->c[from + i].cp;
    for (size_t pos = 0; st == BRG_OK && pos <= n;) {
        int rc = pcre2_match(re->code, buf, n, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            st = brg_error(BRG_ERR_INTERNAL, "regex match failed (%d)", rc);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty matches split nothing; step past them as Rust's find_iter does */
            pos = me + 1;
            continue;
        }
        if (k == cap) {
            size_t *p = realloc(r, cap * 4 * sizeof *r);
            if (!p) {
                st = brg_error(BRG_ERR_OOM, "tokenizer: out of memory (regex)");
                break;
            }
            r = p;
            cap *= 2;
        }
        r[2 * k] = from + ms;
        r[2 * k + 1] = from + me;
        k++;
        pos = me;
    }
    free(buf);
    if (md) pcre2_match_data_free(md);
    if (st != BRG_OK) {
        free(r);
        return st;
    }
    *ranges = r;
    *count = k;
    return BRG_OK;
}
