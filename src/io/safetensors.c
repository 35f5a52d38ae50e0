/* safetensors reading and writing. The validation follows the reference reader
 * (safetensors/src/tensor.rs: read_metadata + Metadata::validate) check for check, so a file
 * brigade accepts is one transformers accepts, and a file that opens here cannot make a later
 * read run past the mapping. */
#include "core/str.h"
#include "brigade/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/json.h"

#define BUFFER_SOURCE "<buffer>"
#define HEADER_PREFIX 8u
#define MAX_EXACT ((uint64_t)BRG_JSON_MAX_EXACT_INT)

typedef struct entry {
    char *name;
    brg_dtype dtype;
    int ndim;
    int64_t shape[BRG_MAX_DIMS];
    uint64_t begin, end;
} entry;

struct brg_safetensors {
    char *source;
    void *map; /* NULL for a caller-owned buffer */
    size_t map_len;
    const unsigned char *data; /* start of the byte buffer, just after the header */
    entry *entries;            /* in data order */
    size_t n;
    entry **by_name; /* the entries sorted by name, for lookups */
    char **meta_keys;
    char **meta_values;
    size_t n_meta;
};

/* Every dtype the format defines, in the order of the reference's Dtype enum (the writer's sort
 * key), so that a valid file using one brigade does not compute with gets "not supported"
 * rather than "unknown". */
static const char *const safetensors_dtypes[] = {
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "I16",  "U16", "F16",     "BF16",    "I32", "U32", "F32",     "C64",     "F64",     "I64",         "U64",
};


static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void write_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- header entries --------------------------------------------------------------------- */

static brg_status parse_dtype(const cJSON *v, const char *src, const char *name, brg_dtype *out) {
    if (!cJSON_IsString(v)) return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"dtype\" must be a string", src, name);
    for (int i = 0; i < BRG_DTYPE_COUNT; i++) {
        if (strcmp(v->valuestring, brg_dtype_name((brg_dtype)i)) == 0) {
            *out = (brg_dtype)i;
            return BRG_OK;
        }
    }
    for (size_t i = 0; i < sizeof safetensors_dtypes / sizeof *safetensors_dtypes; i++)
        if (strcmp(v->valuestring, safetensors_dtypes[i]) == 0)
            return brg_error(BRG_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s, which brigade does not support (it computes with F32, "
                             "F16, BF16, I32, I64 and BOOL; convert the file)",
                             src, name, v->valuestring);
    return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' has unknown dtype '%s'", src, name, v->valuestring);
}

/* JSON numbers arrive as doubles: anything past 2^53 may already have been rounded. */
static brg_status parse_uint(const cJSON *v, const char *src, const char *name, const char *field, uint64_t *out) {
    if (!cJSON_IsNumber(v))
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"%s\" must hold non-negative integers, found a non-number",
                         src, name, field);
    double d = v->valuedouble;
    char buf[40];
    if (d < 0)
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"%s\" holds a negative value (%s)", src, name, field,
                         brg_json_number_str(d, buf, sizeof buf));
    if (!(d <= (double)MAX_EXACT))
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"%s\" value %s is too large (at most 2^53)", src, name,
                         field, brg_json_number_str(d, buf, sizeof buf));
    if ((double)(uint64_t)d != d)
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"%s\" holds %s, which is not an integer", src, name, field,
                         brg_json_number_str(d, buf, sizeof buf));
    *out = (uint64_t)d;
    return BRG_OK;
}

static brg_status parse_shape(const cJSON *v, const char *src, const char *name, entry *e) {
    if (!cJSON_IsArray(v)) return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"shape\" must be an array", src, name);
    int ndim = cJSON_GetArraySize(v);
    if (ndim > BRG_MAX_DIMS)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions; brigade supports at most %d", src,
                         name, ndim, BRG_MAX_DIMS);
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        uint64_t dim;
        BRG_TRY(parse_uint(c, src, name, "shape", &dim));
        e->shape[d++] = (int64_t)dim;
    }
    e->ndim = ndim;
    return BRG_OK;
}

static brg_status parse_offsets(const cJSON *v, const char *src, const char *name, entry *e) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be an array of two integers [begin, end]",
                         src, name);
    BRG_TRY(parse_uint(v->child, src, name, "data_offsets", &e->begin));
    return parse_uint(v->child->next, src, name, "data_offsets", &e->end);
}

static brg_status parse_entry(const cJSON *item, const char *src, entry *e) {
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' must be a JSON object with dtype, shape and data_offsets", src,
                         name);
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *found[3] = {NULL, NULL, NULL};
    for (const cJSON *c = item->child; c; c = c->next) {
        int k = 0;
        while (k < 3 && strcmp(c->string, fields[k]) != 0) k++;
        if (k == 3)
            return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' has unknown field '%s' (expected dtype, shape, data_offsets)",
                             src, name, c->string);
        if (found[k]) return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' has field '%s' twice", src, name, fields[k]);
        found[k] = c;
    }
    for (int k = 0; k < 3; k++)
        if (!found[k]) return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", src, name, fields[k]);
    BRG_TRY(parse_dtype(found[0], src, name, &e->dtype));
    BRG_TRY(parse_shape(found[1], src, name, e));
    BRG_TRY(parse_offsets(found[2], src, name, e));
    e->name = strdup(name);
    if (!e->name) return brg_error(BRG_ERR_OOM, "%s: no memory for tensor names", src);
    return BRG_OK;
}

/* The reference reads "__metadata__" as Option<HashMap<String, String>>: null means none. */
static brg_status parse_metadata(brg_safetensors *st, const cJSON *item, bool *seen) {
    if (*seen) return brg_error(BRG_ERR_FORMAT, "%s: \"__metadata__\" appears twice", st->source);
    *seen = true;
    if (cJSON_IsNull(item)) return BRG_OK;
    if (!cJSON_IsObject(item))
        return brg_error(BRG_ERR_FORMAT, "%s: \"__metadata__\" must be an object of strings", st->source);
    size_t n = (size_t)cJSON_GetArraySize(item);
    st->meta_keys = calloc(n + 1, sizeof *st->meta_keys);
    st->meta_values = calloc(n + 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values) return brg_error(BRG_ERR_OOM, "%s: no memory for metadata", st->source);
    for (const cJSON *c = item->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return brg_error(BRG_ERR_FORMAT, "%s: \"__metadata__\" value of '%s' must be a string (metadata maps strings to strings)",
                             st->source, c->string);
        size_t i = st->n_meta++;
        st->meta_keys[i] = strdup(c->string);
        st->meta_values[i] = strdup(c->valuestring);
        if (!st->meta_keys[i] || !st->meta_values[i])
            return brg_error(BRG_ERR_OOM, "%s: no memory for metadata", st->source);
    }
    char *ctx = brg_str_printf("%s: \"__metadata__\"", st->source);
    if (!ctx) return brg_error(BRG_ERR_OOM, "%s: no memory for metadata", st->source);
    brg_status s = brg_json_check_duplicates(item, ctx);
    free(ctx);
    return s;
}

/* ---- whole-header checks ---------------------------------------------------------------- */

static int compare_data_order(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int compare_name_ptr(const void *pa, const void *pb) {
    return strcmp((*(const entry *const *)pa)->name, (*(const entry *const *)pb)->name);
}

/* Built after the entries are in data order (it points into that array). */
static brg_status build_name_index(brg_safetensors *st) {
    st->by_name = malloc((st->n ? st->n : 1) * sizeof *st->by_name);
    if (!st->by_name) return brg_error(BRG_ERR_OOM, "%s: no memory for the tensor index", st->source);
    for (size_t i = 0; i < st->n; i++) st->by_name[i] = &st->entries[i];
    qsort(st->by_name, st->n, sizeof *st->by_name, compare_name_ptr);
    for (size_t i = 1; i < st->n; i++)
        if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0)
            return brg_error(BRG_ERR_FORMAT, "%s: tensor name '%s' appears twice in the header", st->source,
                             st->by_name[i]->name);
    return BRG_OK;
}

static brg_status check_entry_bytes(const brg_safetensors *st, const entry *e) {
    uint64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < e->ndim; d++) {
        uint64_t dim = (uint64_t)e->shape[d];
        if (dim && numel > UINT64_MAX / dim) overflow = true;
        numel *= dim;
        if (overflow) break;
    }
    uint64_t size = brg_dtype_size(e->dtype);
    if (overflow || numel > UINT64_MAX / size)
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': the size of its shape overflows 64 bits", st->source, e->name);
    if (e->end - e->begin != numel * size)
        return brg_error(BRG_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                         " bytes, but %" PRIu64 " %s elements need %" PRIu64,
                         st->source, e->name, e->begin, e->end, e->end - e->begin, numel, brg_dtype_name(e->dtype),
                         numel * size);
    return BRG_OK;
}

/* Sorted by offsets, each tensor must begin where the previous ended: this one test rejects
 * gaps, overlaps and data shared between tensors, as the reference does. */
static brg_status check_layout(const brg_safetensors *st, uint64_t *data_len) {
    uint64_t expect = 0;
    for (size_t i = 0; i < st->n; i++) {
        const entry *e = &st->entries[i];
        if (e->end < e->begin)
            return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                             st->source, e->name, e->begin, e->end);
        if (e->begin != expect)
            return brg_error(BRG_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] %s (tensor data must be packed "
                             "from offset 0, the previous tensor ends at %" PRIu64 ")",
                             st->source, e->name, e->begin, e->end,
                             e->begin < expect ? "overlap the previous tensor" : "leave a gap", expect);
        BRG_TRY(check_entry_bytes(st, e));
        expect = e->end;
    }
    *data_len = expect;
    return BRG_OK;
}

/* serde rejects 1.0, 1e3 or -0 where an integer is expected; cJSON reads them all as doubles,
 * so the spelling is checked on the text. Run once the entries validated: by then every value
 * outside a string is a number, null or punctuation, so '.', 'e', 'E' and '-' belong to a
 * number. */
static brg_status check_integer_spelling(const char *h, size_t len, const char *src) {
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '-') {
            return brg_error(BRG_ERR_FORMAT,
                             "%s: header byte %zu: a number written with a sign, fraction or exponent; shapes and "
                             "offsets must be plain non-negative integers",
                             src, i);
        }
    }
    return BRG_OK;
}

static brg_status parse_header_json(brg_safetensors *st, const char *header, size_t len) {
    size_t bad;
    if (!brg_utf8_valid(header, len, &bad))
        return brg_error(BRG_ERR_FORMAT, "%s: header is not valid UTF-8 (byte %zu of the header)", st->source, bad);
    char *ctx = brg_str_printf("%s: header", st->source);
    if (!ctx) return brg_error(BRG_ERR_OOM, "%s: no memory", st->source);
    cJSON *root;
    brg_status s = brg_json_parse(header, len, ctx, &root);
    free(ctx);
    BRG_TRY(s);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return brg_error(BRG_ERR_FORMAT, "%s: header must be a JSON object", st->source);
    }
    size_t count = (size_t)cJSON_GetArraySize(root);
    if (!(st->entries = calloc(count ? count : 1, sizeof *st->entries)))
        s = brg_error(BRG_ERR_OOM, "%s: no memory for %zu tensor entries", st->source, count);
    bool seen_meta = false;
    for (const cJSON *c = root->child; c && s == BRG_OK; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            s = parse_metadata(st, c, &seen_meta);
        } else {
            s = parse_entry(c, st->source, &st->entries[st->n]);
            if (s == BRG_OK) st->n++;
        }
    }
    cJSON_Delete(root);
    return s;
}

static brg_status too_small(const char *src, size_t len) {
    return brg_error(BRG_ERR_FORMAT, "%s: %zu bytes is too small for a safetensors file (it starts with an 8-byte header length)",
                     src, len);
}

static brg_status parse_into(brg_safetensors *st, const unsigned char *buf, size_t len) {
    if (len < HEADER_PREFIX) return too_small(st->source, len);
    uint64_t n = read_le64(buf);
    if (n > BRG_SAFETENSORS_MAX_HEADER)
        return brg_error(BRG_ERR_FORMAT, "%s: header too large (%" PRIu64 " bytes, at most %u)", st->source, n,
                         BRG_SAFETENSORS_MAX_HEADER);
    if (n > len - HEADER_PREFIX)
        return brg_error(BRG_ERR_FORMAT, "%s: header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                         st->source, n, len);
    const char *header = (const char *)buf + HEADER_PREFIX;
    BRG_TRY(parse_header_json(st, header, (size_t)n));
    qsort(st->entries, st->n, sizeof *st->entries, compare_data_order);
    BRG_TRY(build_name_index(st));
    uint64_t data_len = 0;
    BRG_TRY(check_layout(st, &data_len));
    BRG_TRY(check_integer_spelling(header, (size_t)n, st->source));
    uint64_t need = HEADER_PREFIX + n + data_len; /* cannot overflow: n <= 1e8, data_len <= 2^53 */
    if (need < len)
        return brg_error(BRG_ERR_FORMAT, "%s: %" PRIu64 " unexpected bytes after the last tensor's data (file is %zu bytes)",
                         st->source, (uint64_t)len - need, len);
    if (need > len)
        return brg_error(BRG_ERR_FORMAT, "%s: truncated: the header describes %" PRIu64 " bytes of tensor data but only %"
                         PRIu64 " follow it",
                         st->source, data_len, (uint64_t)len - HEADER_PREFIX - n);
    st->data = buf + HEADER_PREFIX + n;
    return BRG_OK;
}

static brg_status parse_source(const void *buf, size_t len, const char *source, brg_safetensors **out) {
    *out = NULL;
    brg_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->source = strdup(source))) {
        free(st);
        return brg_error(BRG_ERR_OOM, "%s: no memory", source);
    }
    brg_status s = parse_into(st, buf, len);
    if (s != BRG_OK) {
        brg_safetensors_close(st);
        return s;
    }
    *out = st;
    return BRG_OK;
}

/* ---- public reading API ----------------------------------------------------------------- */

brg_status brg_safetensors_parse(const void *buf, size_t len, brg_safetensors **out) {
    if (!buf && len) return brg_error(BRG_ERR_INVALID_ARG, "brg_safetensors_parse: NULL buffer of %zu bytes", len);
    return parse_source(buf ? buf : "", len, BUFFER_SOURCE, out);
}

brg_status brg_safetensors_open(const char *path, brg_safetensors **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return brg_error(errno == ENOENT ? BRG_ERR_NOT_FOUND : BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return brg_error(BRG_ERR_IO, "cannot read %s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len < HEADER_PREFIX) {
        close(fd);
        return too_small(path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return brg_error(BRG_ERR_IO, "cannot map %s: %s", path, strerror(map_errno));
    brg_status s = parse_source(map, len, path, out);
    if (s != BRG_OK) {
        munmap(map, len);
        return s;
    }
    (*out)->map = map;
    (*out)->map_len = len;
    return BRG_OK;
}

void brg_safetensors_close(brg_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) free(st->entries[i].name);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->entries);
    free(st->by_name);
    if (st->map) munmap(st->map, st->map_len);
    free(st->source);
    free(st);
}

const char *brg_safetensors_source(const brg_safetensors *st) { return st->source; }

size_t brg_safetensors_count(const brg_safetensors *st) { return st->n; }

const char *brg_safetensors_name(const brg_safetensors *st, size_t i) {
    BRG_ASSERT(i < st->n);
    return st->entries[i].name;
}

static const entry *find(const brg_safetensors *st, const char *name) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const entry *e = st->by_name[mid];
        int c = strcmp(name, e->name);
        if (c == 0) return e;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

bool brg_safetensors_has(const brg_safetensors *st, const char *name) { return find(st, name) != NULL; }

brg_status brg_safetensors_get(const brg_safetensors *st, const char *name, brg_tensor *out) {
    const entry *e = find(st, name);
    if (!e) return brg_error(BRG_ERR_NOT_FOUND, "tensor '%s' is not in %s", name, st->source);
    *out = brg_tensor_wrap(e->dtype, e->ndim, e->shape, (void *)(st->data + e->begin));
    out->name = e->name;
    return BRG_OK;
}

const char *brg_safetensors_metadata(const brg_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

size_t brg_safetensors_metadata_count(const brg_safetensors *st) { return st->n_meta; }

const char *brg_safetensors_metadata_key(const brg_safetensors *st, size_t i) {
    BRG_ASSERT(i < st->n_meta);
    return st->meta_keys[i];
}

const char *brg_safetensors_metadata_value(const brg_safetensors *st, size_t i) {
    BRG_ASSERT(i < st->n_meta);
    return st->meta_values[i];
}

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct planned {
    const char *name;
    const brg_tensor *t;
    int rank; /* position in the reference's Dtype enum */
    uint64_t begin, end;
} planned;

static int compare_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The reference writer sorts by its Dtype enum, descending, then by name. The enum is in
 * increasing alignment order, so big dtypes come first and stay aligned; within one width it
 * puts F32 before I32 and BF16 before F16, and following it exactly keeps files byte-identical. */
static int dtype_rank(brg_dtype dtype) {
    for (size_t i = 0; i < sizeof safetensors_dtypes / sizeof *safetensors_dtypes; i++)
        if (strcmp(safetensors_dtypes[i], brg_dtype_name(dtype)) == 0) return (int)i;
    BRG_ASSERT(!"brigade dtype missing from the safetensors list");
    return -1;
}

static int compare_write_order(const void *pa, const void *pb) {
    const planned *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank > b->rank ? -1 : 1;
    return strcmp(a->name, b->name);
}

static brg_status check_unique(const char **names, size_t n, const char *path, const char *what) {
    qsort(names, n, sizeof *names, compare_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return brg_error(BRG_ERR_INVALID_ARG, "writing %s: %s '%s' appears twice", path, what, names[i]);
    return BRG_OK;
}

static brg_status check_write_tensor(const char *path, const brg_named_tensor *nt, size_t i, uint64_t *nbytes) {
    if (!nt->name || !*nt->name) return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor %zu has an empty name", path, i);
    if (strcmp(nt->name, "__metadata__") == 0)
        return brg_error(BRG_ERR_INVALID_ARG, "writing %s: \"__metadata__\" is reserved and cannot name a tensor", path);
    if (!brg_utf8_valid(nt->name, strlen(nt->name), NULL))
        return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor %zu's name is not valid UTF-8", path, i);
    const brg_tensor *t = nt->tensor;
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor '%s' is NULL", path, nt->name);
    if (t->dtype < 0 || t->dtype >= BRG_DTYPE_COUNT || t->ndim < 0 || t->ndim > BRG_MAX_DIMS)
        return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor '%s' has a bad dtype or rank", path, nt->name);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || (uint64_t)t->shape[d] > MAX_EXACT)
            return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor '%s' has dimension %" PRId64, path, nt->name,
                             t->shape[d]);
        if (t->shape[d] && numel > MAX_EXACT / (uint64_t)t->shape[d])
            return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor '%s' is too large", path, nt->name);
        numel *= (uint64_t)t->shape[d];
    }
    *nbytes = numel * brg_dtype_size(t->dtype);
    if (*nbytes && !t->data)
        return brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor '%s' has no data", path, nt->name);
    return BRG_OK;
}

static brg_status check_metadata_args(const char *path, const brg_metadata_entry *meta, size_t n_meta) {
    if (n_meta && !meta) return brg_error(BRG_ERR_INVALID_ARG, "writing %s: NULL metadata", path);
    for (size_t i = 0; i < n_meta; i++) {
        if (!meta[i].key || !*meta[i].key || !meta[i].value)
            return brg_error(BRG_ERR_INVALID_ARG, "writing %s: metadata entry %zu has an empty key or a NULL value", path, i);
        if (!brg_utf8_valid(meta[i].key, strlen(meta[i].key), NULL) ||
            !brg_utf8_valid(meta[i].value, strlen(meta[i].value), NULL))
            return brg_error(BRG_ERR_INVALID_ARG, "writing %s: metadata '%s' is not valid UTF-8", path, meta[i].key);
    }
    const char **keys = malloc((n_meta ? n_meta : 1) * sizeof *keys);
    if (!keys) return brg_error(BRG_ERR_OOM, "writing %s: no memory", path);
    for (size_t i = 0; i < n_meta; i++) keys[i] = meta[i].key;
    brg_status s = check_unique(keys, n_meta, path, "metadata key");
    free(keys);
    return s;
}

/* Validates the arguments and lays the tensors out; *plan is in write order. */
static brg_status plan_write(const char *path, const brg_named_tensor *tensors, size_t n, planned **plan) {
    *plan = NULL;
    if (n && !tensors) return brg_error(BRG_ERR_INVALID_ARG, "writing %s: NULL tensor list", path);
    planned *p = calloc(n ? n : 1, sizeof *p);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    brg_status s = p && names ? BRG_OK : brg_error(BRG_ERR_OOM, "writing %s: no memory", path);
    for (size_t i = 0; i < n && s == BRG_OK; i++) {
        uint64_t bytes = 0;
        s = check_write_tensor(path, &tensors[i], i, &bytes);
        if (s != BRG_OK) break;
        /* the byte count waits in `end` until the offsets are known */
        p[i] = (planned){tensors[i].name, tensors[i].tensor, dtype_rank(tensors[i].tensor->dtype), 0, bytes};
        names[i] = tensors[i].name;
    }
    if (s == BRG_OK) s = check_unique(names, n, path, "tensor name");
    free(names);
    if (s == BRG_OK) qsort(p, n, sizeof *p, compare_write_order);
    uint64_t offset = 0;
    for (size_t i = 0; i < n && s == BRG_OK; i++) {
        uint64_t len = p[i].end;
        if (len > MAX_EXACT - offset)
            s = brg_error(BRG_ERR_INVALID_ARG, "writing %s: tensor data exceeds 2^53 bytes", path);
        p[i].begin = offset;
        p[i].end = offset += len;
    }
    if (s != BRG_OK) {
        free(p);
        return s;
    }
    *plan = p;
    return BRG_OK;
}

/* Numbers go in as raw text: cJSON would print offsets past 2^31 through %g. */
static bool add_uint(cJSON *array, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    cJSON *item = cJSON_CreateRaw(buf);
    if (item && cJSON_AddItemToArray(array, item)) return true;
    cJSON_Delete(item);
    return false;
}

static bool add_item(cJSON *obj, const char *key, cJSON *item) {
    if (item && cJSON_AddItemToObject(obj, key, item)) return true;
    cJSON_Delete(item);
    return false;
}

static bool add_tensor_json(cJSON *root, const planned *p) {
    cJSON *obj = cJSON_CreateObject();
    if (!add_item(root, p->name, obj)) return false;
    cJSON *shape = cJSON_CreateArray(), *offsets = cJSON_CreateArray();
    bool ok = add_item(obj, "dtype", cJSON_CreateString(brg_dtype_name(p->t->dtype)));
    ok = add_item(obj, "shape", shape) && ok;
    ok = add_item(obj, "data_offsets", offsets) && ok;
    for (int d = 0; ok && d < p->t->ndim; d++) ok = add_uint(shape, (uint64_t)p->t->shape[d]);
    return ok && add_uint(offsets, p->begin) && add_uint(offsets, p->end);
}

/* The JSON text padded with spaces to a multiple of 8 bytes, as the reference writer does. */
static brg_status build_header(const char *path, const planned *p, size_t n, const brg_metadata_entry *meta,
                               size_t n_meta, char **out, size_t *out_len) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && n_meta) {
        cJSON *m = cJSON_CreateObject();
        ok = add_item(root, "__metadata__", m);
        for (size_t i = 0; ok && i < n_meta; i++) ok = add_item(m, meta[i].key, cJSON_CreateString(meta[i].value));
    }
    for (size_t i = 0; ok && i < n; i++) ok = add_tensor_json(root, &p[i]);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return brg_error(BRG_ERR_OOM, "writing %s: no memory for the header", path);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    if (padded > BRG_SAFETENSORS_MAX_HEADER) {
        free(text);
        return brg_error(BRG_ERR_INVALID_ARG, "writing %s: header too large (%zu bytes, at most %u)", path, padded,
                         BRG_SAFETENSORS_MAX_HEADER);
    }
    char *buf = realloc(text, padded + 1);
    if (!buf) {
        free(text);
        return brg_error(BRG_ERR_OOM, "writing %s: no memory for the header", path);
    }
    memset(buf + len, ' ', padded - len);
    *out = buf;
    *out_len = padded;
    return BRG_OK;
}

/* Gathers a strided tensor element by element through a bounded buffer. */
static brg_status write_strided(brg_atomic_file *f, const brg_tensor *t) {
    enum { CHUNK = 1 << 16 }; /* a multiple of every element size */
    size_t es = brg_dtype_size(t->dtype), fill = 0;
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        brg_atomic_file_abort(f);
        return brg_error(BRG_ERR_OOM, "writing a strided tensor: no memory");
    }
    int64_t idx[BRG_MAX_DIMS] = {0}, off = 0, numel = brg_tensor_numel(t);
    brg_status s = BRG_OK;
    for (int64_t k = 0; k < numel && s == BRG_OK; k++) {
        memcpy(buf + fill, (const unsigned char *)t->data + off * (int64_t)es, es);
        fill += es;
        if (fill == CHUNK) {
            s = brg_atomic_file_write(f, buf, fill);
            fill = 0;
        }
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    if (s == BRG_OK) s = brg_atomic_file_write(f, buf, fill);
    free(buf);
    return s;
}

static brg_status write_body(brg_atomic_file *f, const char *header, size_t header_len, const planned *p, size_t n) {
    unsigned char prefix[HEADER_PREFIX];
    write_le64(prefix, header_len);
    BRG_TRY(brg_atomic_file_write(f, prefix, sizeof prefix));
    BRG_TRY(brg_atomic_file_write(f, header, header_len));
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(p[i].end - p[i].begin);
        if (len == 0) continue;
        if (brg_tensor_is_contiguous(p[i].t)) BRG_TRY(brg_atomic_file_write(f, p[i].t->data, len));
        else BRG_TRY(write_strided(f, p[i].t));
    }
    return BRG_OK;
}

brg_status brg_safetensors_write(const char *path, const brg_named_tensor *tensors, size_t n,
                                 const brg_metadata_entry *meta, size_t n_meta) {
    if (!path || !*path) return brg_error(BRG_ERR_INVALID_ARG, "brg_safetensors_write: empty path");
    BRG_TRY(check_metadata_args(path, meta, n_meta));
    planned *plan;
    BRG_TRY(plan_write(path, tensors, n, &plan));
    char *header = NULL;
    size_t header_len = 0;
    brg_status s = build_header(path, plan, n, meta, n_meta, &header, &header_len);
    if (s != BRG_OK) {
        free(plan);
        return s;
    }
    brg_atomic_file f;
    s = brg_atomic_file_open(path, &f);
    if (s == BRG_OK) s = write_body(&f, header, header_len, plan, n); /* aborts f on failure */
    if (s == BRG_OK) s = brg_atomic_file_commit(&f);
    free(header);
    free(plan);
    return s;
}
