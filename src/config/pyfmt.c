/* Python-style text for IPUConfig: values in messages look like upstream's (value=[0, 3, 0, 2],
 * value='invalid'), and saved files have the exact layout of json.dumps(indent=2,
 * sort_keys=True), so a config saved by brigade reads the same as one saved by optimum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/ipu_config_internal.h"
#include "io/json.h"

/* ---- growable strings ------------------------------------------------------------------- */

static bool sb_reserve(strbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void sb_putn(strbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_puts(strbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *sb_take(strbuf *b) {
    if (b->oom) {
        sb_free(b);
        return NULL;
    }
    if (!b->s) sb_puts(b, "");
    char *s = b->s;
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void sb_free(strbuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

/* Copies into a fixed buffer, ending in "..." when it does not fit. */
static const char *sb_copy_out(strbuf *b, char *buf, size_t len) {
    if (len == 0) return buf;
    const char *s = b->oom || !b->s ? "" : b->s;
    size_t n = strlen(s);
    if (n < len) {
        memcpy(buf, s, n + 1);
    } else {
        size_t keep = len > 4 ? len - 4 : 0;
        memcpy(buf, s, keep);
        snprintf(buf + keep, len - keep, "...");
    }
    sb_free(b);
    return buf;
}

/* ---- floats ----------------------------------------------------------------------------- */

/* The shortest "%.*e" that reads back exactly: its digits (no dot) and decimal exponent. */
static void shortest_digits(double d, char *digits, size_t dlen, int *exp10) {
    char tmp[40];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, d);
        if (strtod(tmp, NULL) == d) break;
    }
    char *e = strchr(tmp, 'e');
    *exp10 = e ? atoi(e + 1) : 0;
    size_t n = 0;
    for (const char *p = tmp; *p && p != e && n + 1 < dlen; p++)
        if (*p >= '0' && *p <= '9') digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0') n--; /* Python drops trailing zeros */
    digits[n] = '\0';
}

const char *py_float_repr(double d, char *buf, size_t len) {
    if (isnan(d)) return snprintf(buf, len, "nan"), buf;
    if (isinf(d)) return snprintf(buf, len, d < 0 ? "-inf" : "inf"), buf;
    strbuf b = {0};
    if (signbit(d)) sb_puts(&b, "-");
    char dg[24];
    int x = 0;
    if (d == 0) snprintf(dg, sizeof dg, "0");
    else shortest_digits(fabs(d), dg, sizeof dg, &x);
    int nd = (int)strlen(dg);
    if (x < -4 || x >= 16) { /* repr switches to exponent form outside [1e-4, 1e16) */
        sb_putn(&b, dg, 1);
        if (nd > 1) sb_printf(&b, ".%s", dg + 1);
        sb_printf(&b, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (x < 0) {
        sb_puts(&b, "0.");
        for (int i = 0; i < -x - 1; i++) sb_puts(&b, "0");
        sb_puts(&b, dg);
    } else {
        for (int i = 0; i <= x; i++) sb_putn(&b, i < nd ? dg + i : "0", 1);
        sb_printf(&b, ".%s", nd > x + 1 ? dg + x + 1 : "0");
    }
    return sb_copy_out(&b, buf, len);
}

/* ---- repr of values --------------------------------------------------------------------- */

static void repr_string(strbuf *b, const char *s) {
    /* Python picks double quotes only when the text holds a single quote and no double one. */
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    sb_putn(b, &q, 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\' || *p == (unsigned char)q) sb_printf(b, "\\%c", *p);
        else if (*p == '\n') sb_puts(b, "\\n");
        else if (*p == '\t') sb_puts(b, "\\t");
        else if (*p == '\r') sb_puts(b, "\\r");
        else if (*p < 0x20 || *p == 0x7f) sb_printf(b, "\\x%02x", *p);
        else sb_putn(b, (const char *)p, 1);
    }
    sb_putn(b, &q, 1);
}

static void repr_number(strbuf *b, double d) {
    int64_t i;
    cJSON tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.type = cJSON_Number;
    tmp.valuedouble = d;
    char f[40];
    if (brg_json_integer(&tmp, &i)) sb_printf(b, "%lld", (long long)i);
    else sb_puts(b, py_float_repr(d, f, sizeof f));
}

static void repr_json(strbuf *b, const cJSON *v) {
    if (!v || cJSON_IsNull(v)) return sb_puts(b, "None");
    if (cJSON_IsTrue(v)) return sb_puts(b, "True");
    if (cJSON_IsFalse(v)) return sb_puts(b, "False");
    if (cJSON_IsNumber(v)) return repr_number(b, v->valuedouble);
    if (cJSON_IsString(v)) return repr_string(b, v->valuestring);
    if (cJSON_IsRaw(v)) return sb_puts(b, v->valuestring);
    bool obj = cJSON_IsObject(v);
    sb_puts(b, obj ? "{" : "[");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, v) {
        if (i++) sb_puts(b, ", ");
        if (obj) {
            repr_string(b, it->string);
            sb_puts(b, ": ");
        }
        repr_json(b, it);
    }
    sb_puts(b, obj ? "}" : "]");
}

const char *py_repr_json(const cJSON *v, char *buf, size_t len) {
    strbuf b = {0};
    repr_json(&b, v);
    return sb_copy_out(&b, buf, len);
}

const char *py_repr_list(const brg_ipu_list *l, char *buf, size_t len) {
    strbuf b = {0};
    if (!l->present) {
        sb_puts(&b, "None");
    } else {
        sb_puts(&b, "[");
        for (int i = 0; i < l->n; i++) sb_printf(&b, "%s%d", i ? ", " : "", l->v[i]);
        sb_puts(&b, "]");
    }
    return sb_copy_out(&b, buf, len);
}

const char *py_repr_prop(const brg_ipu_proportion *p, char *buf, size_t len) {
    strbuf b = {0};
    char f[40];
    if (!p->is_list) {
        sb_puts(&b, py_float_repr(p->v[0], f, sizeof f));
    } else {
        sb_puts(&b, "[");
        for (int i = 0; i < p->n; i++) sb_printf(&b, "%s%s", i ? ", " : "", py_float_repr(p->v[i], f, sizeof f));
        sb_puts(&b, "]");
    }
    return sb_copy_out(&b, buf, len);
}

/* ---- json.dumps(indent=2, sort_keys=True) ----------------------------------------------- */

/* Decodes one UTF-8 sequence (input already validated by the loader); returns its length. */
static int utf8_decode(const unsigned char *p, unsigned *cp) {
    if (p[0] < 0x80) return *cp = p[0], 1;
    if ((p[0] & 0xe0) == 0xc0 && p[1]) return *cp = ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu), 2;
    if ((p[0] & 0xf0) == 0xe0 && p[1] && p[2])
        return *cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu), 3;
    if ((p[0] & 0xf8) == 0xf0 && p[1] && p[2] && p[3])
        return *cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu), 4;
    return *cp = 0xfffd, 1;
}

static void dump_string(strbuf *b, const char *s) {
    sb_puts(b, "\"");
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned cp;
        int n = utf8_decode(p, &cp);
        p += n;
        switch (cp) {
        case '"': sb_puts(b, "\\\""); continue;
        case '\\': sb_puts(b, "\\\\"); continue;
        case '\n': sb_puts(b, "\\n"); continue;
        case '\r': sb_puts(b, "\\r"); continue;
        case '\t': sb_puts(b, "\\t"); continue;
        case '\b': sb_puts(b, "\\b"); continue;
        case '\f': sb_puts(b, "\\f"); continue;
        default: break;
        }
        if (cp >= 0x10000) { /* ensure_ascii writes astral characters as a surrogate pair */
            cp -= 0x10000;
            sb_printf(b, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
        } else if (cp < 0x20 || cp > 0x7e) {
            sb_printf(b, "\\u%04x", cp);
        } else {
            char c = (char)cp;
            sb_putn(b, &c, 1);
        }
    }
    sb_puts(b, "\"");
}

static int cmp_keys(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static void newline(strbuf *b, int level) {
    sb_puts(b, "\n");
    for (int i = 0; i < level * 2; i++) sb_puts(b, " ");
}

static void dump_container(strbuf *b, const cJSON *v, int level) {
    bool obj = cJSON_IsObject(v);
    int n = cJSON_GetArraySize(v);
    if (n == 0) return sb_puts(b, obj ? "{}" : "[]");
    const cJSON **items = malloc((size_t)n * sizeof *items);
    if (!items) {
        b->oom = true;
        return;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) items[i++] = it;
    if (obj) qsort(items, (size_t)n, sizeof *items, cmp_keys);
    sb_puts(b, obj ? "{" : "[");
    for (i = 0; i < n; i++) {
        if (i) sb_puts(b, ",");
        newline(b, level + 1);
        if (obj) {
            dump_string(b, items[i]->string);
            sb_puts(b, ": ");
        }
        py_json_dump(b, items[i], level + 1);
    }
    newline(b, level);
    sb_puts(b, obj ? "}" : "]");
    free(items);
}

void py_json_dump(strbuf *b, const cJSON *v, int level) {
    if (cJSON_IsNull(v)) return sb_puts(b, "null");
    if (cJSON_IsTrue(v)) return sb_puts(b, "true");
    if (cJSON_IsFalse(v)) return sb_puts(b, "false");
    if (cJSON_IsRaw(v)) return sb_puts(b, v->valuestring);
    if (cJSON_IsNumber(v)) return repr_number(b, v->valuedouble);
    if (cJSON_IsString(v)) return dump_string(b, v->valuestring);
    dump_container(b, v, level);
}
