/* Internal JSON helpers over cJSON: strict loading (the rules Python's json module applies to
 * the files brigade shares with transformers), typed field getters whose messages name the
 * file and the field, atomic writes. Not part of the public API. */
#ifndef BRIGADE_IO_JSON_H
#define BRIGADE_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "brigade/status.h"

/* Largest integer a JSON number can carry exactly through a double. */
#define BRG_JSON_MAX_EXACT_INT 9007199254740992LL /* 2^53 */

/* A generous cap for config-like files (config.json, ipu_config.json, index files). */
#define BRG_JSON_DEFAULT_MAX_BYTES ((size_t)64 << 20)

/* True when `s[0..len)` is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). On failure *bad_offset (if given) is the offset of the first bad byte. */
bool brg_utf8_valid(const char *s, size_t len, size_t *bad_offset);

/* Parses `len` bytes (need not be NUL-terminated) as one complete JSON value. Stricter than
 * cJSON alone: rejects invalid UTF-8, a byte-order mark, control characters outside JSON
 * whitespace and raw control characters inside strings, and anything after the value. `ctx`
 * names the input in messages. BRG_ERR_FORMAT on failure. Duplicate keys are not checked here. */
brg_status brg_json_parse(const char *text, size_t len, const char *ctx, cJSON **out);

/* BRG_ERR_FORMAT naming the key if any object in `root` (recursively) has a key twice: cJSON
 * keeps the first and Python keeps the last, so such a file means different things to each. */
brg_status brg_json_check_duplicates(const cJSON *root, const char *ctx);

/* Reads a whole file (at most max_bytes), parses it with brg_json_parse and rejects duplicate
 * keys. Messages name `path` and, for syntax errors, the line and column. Free with cJSON_Delete. */
brg_status brg_json_load_file(const char *path, size_t max_bytes, cJSON **out);

/* Typed getters. `obj` must be a JSON object; `ctx` names it in messages ("config.json").
 * A missing key, or one whose value is null (as HF configs write unset fields), gives `def`
 * unless `required`, in which case the message is "<ctx>: missing field '<key>'". A value of
 * the wrong type is BRG_ERR_FORMAT naming the field, the expected type and what was found. */
brg_status brg_json_get_int(const cJSON *obj, const char *ctx, const char *key, bool required, int64_t def,
                            int64_t *out);
brg_status brg_json_get_double(const cJSON *obj, const char *ctx, const char *key, bool required, double def,
                               double *out);
/* The same, rounded to float (HF configs' dropout rates and epsilons). */
brg_status brg_json_get_float(const cJSON *obj, const char *ctx, const char *key, bool required, float def,
                              float *out);
brg_status brg_json_get_bool(const cJSON *obj, const char *ctx, const char *key, bool required, bool def,
                             bool *out);
/* *out points into `obj` (valid while the tree lives) or is `def`. */
brg_status brg_json_get_string(const cJSON *obj, const char *ctx, const char *key, bool required,
                               const char *def, const char **out);

/* The shortest "%g" spelling of `d` that reads back exactly ("1.5", "1e+300"), for messages. */
const char *brg_json_number_str(double d, char *buf, size_t len);

/* True when `item` is a number with an integral value in [-2^53, 2^53]; stores it in *out. */
bool brg_json_integer(const cJSON *item, int64_t *out);

/* Writes `root` pretty-printed (with a final newline) through brg_atomic_file (io/atomic_file.h). */
brg_status brg_json_write_file_atomic(const char *path, const cJSON *root);

/* A model folder's config.json: `path` receives dir/config.json (an error when it does not fit
 * in path_len); load parses it, write writes `root` there atomically and frees it either way. */
brg_status brg_json_config_path(const char *dir, char *path, size_t path_len);
brg_status brg_json_load_config(const char *dir, char *path, size_t path_len, cJSON **out);
brg_status brg_json_write_config(cJSON *root, const char *dir);

#endif
