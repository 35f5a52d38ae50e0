/* Shared internals of src/config: the attribute table, the per-attribute setter, and the
 * Python-style formatting used for messages and for the saved JSON. Not part of the public API. */
#ifndef BRIGADE_CONFIG_INTERNAL_H
#define BRIGADE_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "brigade/ipu_config.h"

/* ---- attributes ------------------------------------------------------------------------- */

typedef enum attr_kind {
    K_INT,         /* int */
    K_OPT_INT,     /* Optional[int] kept as 0 for null (serialization factors) */
    K_SEED,        /* Optional[int] with a separate presence flag */
    K_BOOL,
    K_STR,
    K_OUTPUT_MODE, /* str restricted to all/sum/final/default */
    K_LIST,        /* List[int] */
    K_OPT_LIST,    /* Optional[List[int]]: the serialized splits */
    K_PROP,        /* Union[float, List[float]] */
    K_DICT,        /* Dict[str, Any], kept as compact JSON text */
} attr_kind;

typedef struct attr_info {
    const char *name;
    attr_kind kind;
    int floor;      /* lower bound of the value or of every element */
    bool has_floor;
    size_t offset;  /* of the field in brg_ipu_config */
} attr_info;

const attr_info *cfg_attr_find(const char *name);
const attr_info *cfg_attr_at(int i); /* NULL past the end */

/* The field an attribute lives in. */
void *cfg_field(brg_ipu_config *cfg, const attr_info *a);
const void *cfg_field_const(const brg_ipu_config *cfg, const attr_info *a);

/* setattr: type check, then the attribute's validators; `cfg` is unchanged on failure. */
brg_status cfg_set_value(brg_ipu_config *cfg, const attr_info *a, const cJSON *value);

/* The attribute's current value as JSON (floats as raw nodes carrying Python's repr, so that
 * 1.0 stays a float when printed). NULL only when out of memory. */
cJSON *cfg_attr_to_json(const brg_ipu_config *cfg, const attr_info *a);

/* Appends a warning (deduplicated; silently dropped past BRG_IPU_MAX_WARNINGS). */
void cfg_warn(brg_ipu_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Mode-resolved fields, writable (placement splits write through them). */
brg_ipu_list *cfg_layers(brg_ipu_config *cfg, brg_ipu_mode mode);
int64_t *cfg_ipus(brg_ipu_config *cfg, brg_ipu_mode mode);
brg_ipu_proportion *cfg_matmul(brg_ipu_config *cfg, brg_ipu_mode mode);
brg_ipu_list *cfg_splits(brg_ipu_config *cfg, brg_ipu_mode mode, bool embedding);
int64_t *cfg_factor(brg_ipu_config *cfg, brg_ipu_mode mode, bool embedding);

/* ---- Python-style text ------------------------------------------------------------------ */

typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool oom;
} strbuf;

void sb_puts(strbuf *b, const char *s);
void sb_putn(strbuf *b, const char *s, size_t n);
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the text (caller frees); NULL after an allocation failure. */
char *sb_take(strbuf *b);
void sb_free(strbuf *b);

/* repr(float): shortest round-trip digits, "1.0", "1e-05", "1e+16". */
const char *py_float_repr(double d, char *buf, size_t len);

/* repr() of a JSON value as Python would show it after json.loads (None, True, 'text', [1, 2],
 * {'k': 1}); integral numbers print as ints. Truncated with "..." to fit `len`. */
const char *py_repr_json(const cJSON *v, char *buf, size_t len);
const char *py_repr_list(const brg_ipu_list *l, char *buf, size_t len);
const char *py_repr_prop(const brg_ipu_proportion *p, char *buf, size_t len);

/* json.dumps(v, indent=2, sort_keys=True) (ASCII only, as Python's default). Raw nodes are
 * printed verbatim. */
void py_json_dump(strbuf *b, const cJSON *v, int indent);

#endif
