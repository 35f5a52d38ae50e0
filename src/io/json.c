/* JSON helpers: strict parsing on top of cJSON, typed getters, atomic file writes.
 *
 * cJSON alone is more lenient than the Python json module that writes and reads the same files
 * in transformers: it skips a byte-order mark, treats every byte <= 0x20 as whitespace, takes
 * raw control characters inside strings and keeps duplicate keys. A file that Python would
 * reject (or read differently) must not load silently here, so those cases are checked first. */
#include "core/str.h"
#include "io/json.h"
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- strings ---------------------------------------------------------------------------- */


bool brg_utf8_valid(const char *s, size_t len, size_t *bad_offset) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; min = 0x10000; }
        else goto bad;
        if (len - i <= n) goto bad;
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) goto bad;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad;
        i += n + 1;
    }
    return true;
bad:
    if (bad_offset) *bad_offset = i;
    return false;
}

/* ---- parsing ---------------------------------------------------------------------------- */

static void line_col(const char *s, size_t off, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static brg_status syntax_error(const char *text, size_t off, const char *ctx, const char *what) {
    size_t line, col;
    line_col(text, off, &line, &col);
    return brg_error(BRG_ERR_FORMAT, "%s: invalid JSON at line %zu, column %zu (byte %zu): %s", ctx, line, col, off,
                     what);
}

/* The lexical rules cJSON does not enforce. Escapes are skipped, not decoded: cJSON checks them. */
static brg_status check_lexical(const char *text, size_t len, const char *ctx) {
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
            else if (c < 0x20) return syntax_error(text, i, ctx, "raw control character inside a string");
        } else if (c == '"') {
            in_string = true;
        } else if (c == 0xef && i == 0) {
            return syntax_error(text, i, ctx, "starts with a UTF-8 byte-order mark");
        } else if (c >= 0x80 || (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r')) {
            char what[64];
            snprintf(what, sizeof what, "unexpected byte 0x%02x outside a string", c);
            return syntax_error(text, i, ctx, what);
        }
    }
    return BRG_OK;
}

static bool all_whitespace(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return false;
    return true;
}

brg_status brg_json_parse(const char *text, size_t len, const char *ctx, cJSON **out) {
    *out = NULL;
    size_t bad;
    if (!brg_utf8_valid(text, len, &bad))
        return brg_error(BRG_ERR_FORMAT, "%s: not valid UTF-8 (byte %zu)", ctx, bad);
    if (all_whitespace(text, len)) return brg_error(BRG_ERR_FORMAT, "%s: empty, expected a JSON value", ctx);
    BRG_TRY(check_lexical(text, len, ctx));
    /* cJSON needs the terminating NUL inside the length it is given to accept the end. */
    char *copy = malloc(len + 1);
    if (!copy) return brg_error(BRG_ERR_OOM, "%s: no memory for %zu bytes of JSON", ctx, len);
    memcpy(copy, text, len);
    copy[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    brg_status st = BRG_OK;
    if (!root) {
        size_t off = end && end >= copy ? (size_t)(end - copy) : 0;
        st = syntax_error(copy, off > len ? len : off, ctx, "not valid JSON here");
    }
    free(copy);
    *out = root;
    return st;
}

static int compare_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorting keeps this O(n log n): tokenizer vocabularies have tens of thousands of keys. */
static brg_status check_object_keys(const cJSON *obj, const char *ctx) {
    size_t n = (size_t)cJSON_GetArraySize(obj);
    if (n < 2) return BRG_OK;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) return brg_error(BRG_ERR_OOM, "%s: no memory to check %zu keys", ctx, n);
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[i++] = c->string ? c->string : "";
    qsort(keys, n, sizeof *keys, compare_keys);
    brg_status st = BRG_OK;
    for (i = 1; i < n && st == BRG_OK; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) st = brg_error(BRG_ERR_FORMAT, "%s: duplicate key '%s'", ctx, keys[i]);
    free(keys);
    return st;
}

brg_status brg_json_check_duplicates(const cJSON *root, const char *ctx) {
    if (cJSON_IsObject(root)) BRG_TRY(check_object_keys(root, ctx));
    if (cJSON_IsObject(root) || cJSON_IsArray(root))
        for (const cJSON *c = root->child; c; c = c->next) BRG_TRY(brg_json_check_duplicates(c, ctx));
    return BRG_OK;
}

static brg_status read_whole_file(const char *path, size_t max_bytes, char **out, size_t *out_len) {
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return brg_error(errno == ENOENT ? BRG_ERR_NOT_FOUND : BRG_ERR_IO, "cannot open %s: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(fp);
        return brg_error(BRG_ERR_IO, "cannot read %s: it is a directory", path);
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    brg_status s = buf ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory to read %s", path);
    while (s == BRG_OK) {
        if (len == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) { s = brg_error(BRG_ERR_OOM, "no memory to read %s", path); break; }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (len > max_bytes)
            s = brg_error(BRG_ERR_FORMAT, "%s is larger than %zu bytes, the most brigade reads for this file", path,
                          max_bytes);
        else if (got == 0 && ferror(fp))
            s = brg_error(BRG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        else if (got == 0)
            break;
    }
    fclose(fp);
    if (s != BRG_OK) {
        free(buf);
        return s;
    }
    *out = buf;
    *out_len = len;
    return BRG_OK;
}

brg_status brg_json_load_file(const char *path, size_t max_bytes, cJSON **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    BRG_TRY(read_whole_file(path, max_bytes, &text, &len));
    cJSON *root;
    brg_status s = brg_json_parse(text, len, path, &root);
    free(text);
    if (s == BRG_OK) s = brg_json_check_duplicates(root, path);
    if (s != BRG_OK) {
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    return BRG_OK;
}

/* ---- typed getters ---------------------------------------------------------------------- */

const char *brg_json_number_str(double d, char *buf, size_t len) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, d);
        if (strtod(buf, NULL) == d) break;
    }
    return buf;
}

static const char *describe(const cJSON *item, char *buf, size_t len) {
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsBool(item)) return cJSON_IsTrue(item) ? "true" : "false";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    if (cJSON_IsNumber(item)) return brg_json_number_str(item->valuedouble, buf, len);
    return "an unknown value";
}

/* *item is NULL when the field is absent or null and not required. */
static brg_status find_field(const cJSON *obj, const char *ctx, const char *key, bool required,
                             const cJSON **item) {
    *item = NULL;
    if (!cJSON_IsObject(obj)) return brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", ctx);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (it && !cJSON_IsNull(it)) {
        *item = it;
        return BRG_OK;
    }
    if (required)
        return brg_error(BRG_ERR_FORMAT, "%s: missing field '%s'%s", ctx, key, it ? " (it is null)" : "");
    return BRG_OK;
}

static brg_status wrong_type(const char *ctx, const char *key, const char *want, const cJSON *item) {
    char buf[40];
    return brg_error(BRG_ERR_FORMAT, "%s: field '%s' must be %s, got %s", ctx, key, want,
                     describe(item, buf, sizeof buf));
}

bool brg_json_integer(const cJSON *item, int64_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double d = item->valuedouble;
    /* The range test comes first: it also rejects NaN and infinities before the cast. */
    if (!(d >= -(double)BRG_JSON_MAX_EXACT_INT && d <= (double)BRG_JSON_MAX_EXACT_INT)) return false;
    int64_t v = (int64_t)d;
    if ((double)v != d) return false;
    *out = v;
    return true;
}

brg_status brg_json_get_int(const cJSON *obj, const char *ctx, const char *key, bool required, int64_t def,
                            int64_t *out) {
    const cJSON *it;
    BRG_TRY(find_field(obj, ctx, key, required, &it));
    if (!it) {
        *out = def;
        return BRG_OK;
    }
    if (!cJSON_IsNumber(it)) return wrong_type(ctx, key, "an integer", it);
    if (!brg_json_integer(it, out)) {
        double d = it->valuedouble;
        if (d >= -(double)BRG_JSON_MAX_EXACT_INT && d <= (double)BRG_JSON_MAX_EXACT_INT)
            return wrong_type(ctx, key, "an integer", it);
        char buf[40];
        return brg_error(BRG_ERR_FORMAT, "%s: field '%s' = %s is out of range (integers must be within +/-2^53)", ctx,
                         key, brg_json_number_str(d, buf, sizeof buf));
    }
    return BRG_OK;
}

brg_status brg_json_get_double(const cJSON *obj, const char *ctx, const char *key, bool required, double def,
                               double *out) {
    const cJSON *it;
    BRG_TRY(find_field(obj, ctx, key, required, &it));
    if (!it) {
        *out = def;
        return BRG_OK;
    }
    if (!cJSON_IsNumber(it)) return wrong_type(ctx, key, "a number", it);
    *out = it->valuedouble;
    return BRG_OK;
}

brg_status brg_json_get_float(const cJSON *obj, const char *ctx, const char *key, bool required, float def,
                              float *out) {
    double v;
    BRG_TRY(brg_json_get_double(obj, ctx, key, required, def, &v));
    *out = (float)v;
    return BRG_OK;
}

brg_status brg_json_get_bool(const cJSON *obj, const char *ctx, const char *key, bool required, bool def,
                             bool *out) {
    const cJSON *it;
    BRG_TRY(find_field(obj, ctx, key, required, &it));
    if (!it) {
        *out = def;
        return BRG_OK;
    }
    if (!cJSON_IsBool(it)) return wrong_type(ctx, key, "true or false", it);
    *out = cJSON_IsTrue(it);
    return BRG_OK;
}

brg_status brg_json_get_string(const cJSON *obj, const char *ctx, const char *key, bool required,
                               const char *def, const char **out) {
    const cJSON *it;
    BRG_TRY(find_field(obj, ctx, key, required, &it));
    if (!it) {
        *out = def;
        return BRG_OK;
    }
    if (!cJSON_IsString(it)) return wrong_type(ctx, key, "a string", it);
    *out = it->valuestring;
    return BRG_OK;
}

brg_status brg_json_config_path(const char *dir, char *path, size_t path_len) {
    if (snprintf(path, path_len, "%s/config.json", dir) >= (int)path_len)
        return brg_error(BRG_ERR_INVALID_ARG, "model path too long: %s", dir);
    return BRG_OK;
}

brg_status brg_json_load_config(const char *dir, char *path, size_t path_len, cJSON **out) {
    BRG_TRY(brg_json_config_path(dir, path, path_len));
    return brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, out);
}

brg_status brg_json_write_config(cJSON *root, const char *dir) {
    char path[4096];
    brg_status st = brg_json_config_path(dir, path, sizeof path);
    if (st == BRG_OK) st = brg_json_write_file_atomic(path, root);
    cJSON_Delete(root);
    return st;
}

brg_status brg_json_write_file_atomic(const char *path, const cJSON *root) {
    char *text = cJSON_Print(root);
    if (!text) return brg_error(BRG_ERR_OOM, "cannot format JSON for %s", path);
    brg_atomic_file f;
    brg_status s = brg_atomic_file_open(path, &f);
    if (s == BRG_OK) s = brg_atomic_file_write(&f, text, strlen(text));
    if (s == BRG_OK) s = brg_atomic_file_write(&f, "\n", 1);
    if (s == BRG_OK) s = brg_atomic_file_commit(&f);
    free(text);
    return s;
}
