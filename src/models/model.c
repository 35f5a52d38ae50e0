/* Architecture-independent model plumbing: parameter and block lists, init, load, save. */
#include "brigade/model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/rng.h"
#include "io/file_pair.h"
#include "io/json.h"
#include "models/model_internal.h"
#include "brigade/safetensors.h"

static brg_status grow(void **arr, int count, int *cap, size_t elem) {
    if (count < *cap) return BRG_OK;
    int ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return brg_error(BRG_ERR_OOM, "cannot grow the model's tables");
    *arr = p;
    *cap = ncap;
    return BRG_OK;
}

typedef struct model_alloc {
    int params_cap, aliases_cap, blocks_cap;
} model_alloc;

/* Capacities live after the public struct so the header stays free of bookkeeping. */
typedef struct model_full {
    brg_model m;
    model_alloc caps;
} model_full;

brg_status brg_model_create(const brg_model_ops *ops, void *config, brg_model **out) {
    model_full *f = calloc(1, sizeof *f);
    if (!f) return brg_error(BRG_ERR_OOM, "cannot allocate a model");
    f->m.ops = ops;
    f->m.config = config;
    brg_status st = brg_arena_create("parameters", BRG_ARENA_UNLIMITED, &f->m.arena);
    if (st != BRG_OK) {
        free(f);
        return st;
    }
    *out = &f->m;
    return BRG_OK;
}

void brg_model_destroy(brg_model *m) {
    if (!m) return;
    if (m->ops && m->ops->free_config) m->ops->free_config(m->config);
    brg_arena_destroy(m->arena);
    free(m->params);
    free(m->aliases);
    free(m->blocks);
    free((model_full *)m);
}

brg_status brg_model_add_block(brg_model *m, const char *name, brg_block_kind kind, int layer) {
    model_full *f = (model_full *)m;
    BRG_TRY(grow((void **)&m->blocks, m->n_blocks, &f->caps.blocks_cap, sizeof *m->blocks));
    brg_block *b = &m->blocks[m->n_blocks++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->kind = kind;
    b->layer = layer;
    return BRG_OK;
}

brg_status brg_model_add_param(brg_model *m, const char *name, int ndim, const int64_t *shape, brg_init_kind init,
                               float init_std, bool no_decay, int *index) {
    model_full *f = (model_full *)m;
    BRG_ASSERT(m->n_blocks > 0);
    if (strlen(name) >= BRG_NAME_MAX) return brg_error(BRG_ERR_INVALID_ARG, "parameter name too long: %s", name);
    BRG_TRY(grow((void **)&m->params, m->n_params, &f->caps.params_cap, sizeof *m->params));
    brg_param *p = &m->params[m->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    BRG_TRY(brg_tensor_new(m->arena, BRG_DTYPE_F32, ndim, shape, p->name, &p->tensor));
    p->tensor->grad_arena = m->arena; /* the gradient comes with the first backward */
    p->tensor->requires_grad = true;
    p->block = m->n_blocks - 1;
    p->init = init;
    p->init_std = init_std;
    p->no_decay = no_decay;
    if (index) *index = m->n_params;
    m->n_params++;
    return BRG_OK;
}

brg_status brg_model_add_alias(brg_model *m, const char *name, int param) {
    model_full *f = (model_full *)m;
    BRG_TRY(grow((void **)&m->aliases, m->n_aliases, &f->caps.aliases_cap, sizeof *m->aliases));
    brg_param_alias *a = &m->aliases[m->n_aliases++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->param = param;
    a->block = m->n_blocks - 1;
    return BRG_OK;
}

bool brg_model_block_uses(const brg_model *m, int block, int param) {
    if (m->params[param].block == block) return true;
    for (int i = 0; i < m->n_aliases; i++)
        if (m->aliases[i].param == param && m->aliases[i].block == block) return true;
    return false;
}

int brg_model_find_param(const brg_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return i;
    for (int i = 0; i < m->n_aliases; i++)
        if (strcmp(m->aliases[i].name, name) == 0) return m->aliases[i].param;
    return -1;
}

brg_tensor *brg_model_param(const brg_model *m, const char *name) {
    int i = brg_model_find_param(m, name);
    return i < 0 ? NULL : m->params[i].tensor;
}

void brg_model_init_weights(brg_model *m, uint64_t seed) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_params; i++) {
        brg_param *p = &m->params[i];
        float *d = p->tensor->data;
        int64_t n = brg_tensor_numel(p->tensor);
        for (int64_t j = 0; j < n; j++) {
            switch (p->init) {
            case BRG_INIT_NORMAL: d[j] = (float)(brg_rng_normal(&rng) * p->init_std); break;
            case BRG_INIT_ZEROS: d[j] = 0.0f; break;
            case BRG_INIT_ONES: d[j] = 1.0f; break;
            }
        }
    }
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* Maps a checkpoint name to a parameter index: exact, or with the base-model prefix added. */
static int param_for_checkpoint_name(const brg_model *m, const char *name, const char *base_prefix) {
    int i = brg_model_find_param(m, name);
    if (i >= 0 || !base_prefix || !*base_prefix) return i;
    char full[2 * BRG_NAME_MAX];
    if (snprintf(full, sizeof full, "%s%s", base_prefix, name) >= (int)sizeof full) return -1;
    return brg_model_find_param(m, full);
}

static const char *checkpoint_name_for(const brg_checkpoint *ckpt, const char *name, const char *base_prefix) {
    if (brg_checkpoint_has(ckpt, name)) return name;
    size_t lp = base_prefix ? strlen(base_prefix) : 0;
    if (lp && strncmp(name, base_prefix, lp) == 0 && brg_checkpoint_has(ckpt, name + lp)) return name + lp;
    return NULL;
}

brg_status model_load_param(brg_param *p, const brg_checkpoint *ckpt, const char *stored) {
    brg_tensor src;
    BRG_TRY(brg_checkpoint_get(ckpt, stored, &src));
    if (!brg_tensor_same_shape(&src, p->tensor)) {
        char a[128], b[128];
        return brg_error(BRG_ERR_FORMAT, "tensor %s has shape %s in the checkpoint, the config implies %s", stored,
                         brg_shape_str(&src, a, sizeof a), brg_shape_str(p->tensor, b, sizeof b));
    }
    if (src.dtype != BRG_DTYPE_F32 && src.dtype != BRG_DTYPE_F16 && src.dtype != BRG_DTYPE_BF16)
        return brg_error(BRG_ERR_FORMAT, "tensor %s is %s, expected a float type", stored, brg_dtype_name(src.dtype));
    return brg_tensor_copy(p->tensor, &src);
}

static bool ignorable(const char *name, const char *const *ignore_suffixes) {
    for (int i = 0; ignore_suffixes && ignore_suffixes[i]; i++)
        if (has_suffix(name, ignore_suffixes[i])) return true;
    return false;
}

brg_status brg_model_load_dir_weights(brg_model *m, const char *dir, const char *base_prefix,
                                      const char *const *ignore_suffixes, brg_model **out) {
    brg_checkpoint *ckpt = NULL;
    brg_status st = brg_checkpoint_open(dir, &ckpt);
    if (st == BRG_OK) {
        st = brg_model_load_weights(m, ckpt, base_prefix, ignore_suffixes);
        brg_checkpoint_close(ckpt);
    }
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return brg_error_wrap(st, "loading %s", dir);
    }
    *out = m;
    return BRG_OK;
}

brg_status brg_model_load_weights(brg_model *m, const brg_checkpoint *ckpt, const char *base_prefix,
                                  const char *const *ignore_suffixes) {
    for (size_t i = 0; i < brg_checkpoint_count(ckpt); i++) {
        const char *name = brg_checkpoint_name(ckpt, i);
        if (param_for_checkpoint_name(m, name, base_prefix) < 0 && !ignorable(name, ignore_suffixes))
            return brg_error(BRG_ERR_FORMAT, "unexpected tensor '%s' in the checkpoint (not a parameter of %s)", name,
                             m->ops->architecture);
    }
    for (int i = 0; i < m->n_params; i++) {
        brg_param *p = &m->params[i];
        const char *stored = checkpoint_name_for(ckpt, p->name, base_prefix);
        if (!stored) return brg_error(BRG_ERR_FORMAT, "the checkpoint has no tensor '%s'", p->name);
        BRG_TRY(model_load_param(p, ckpt, stored));
    }
    return BRG_OK;
}

static brg_status ensure_dir(const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return BRG_OK;
        return brg_error(BRG_ERR_IO, "%s exists and is not a directory", dir);
    }
    return brg_error(BRG_ERR_IO, "cannot create directory %s: %s", dir, strerror(errno));
}

/* The pair is written into a staging folder inside `dir` and switched in as one unit
 * (io/file_pair.h): a kill, a crash or a full disk at any moment leaves the old pair or the new
 * one, never new weights beside an old config.json. A folder this call created is removed again
 * when the save fails, so no folder is left holding half a model. */
static brg_status save_weights(const brg_model *m, const char *dir, brg_dtype dtype);
static brg_status set_config_dtype(const char *dir, brg_dtype dtype);

brg_status brg_model_save(const brg_model *m, const char *dir) { return brg_model_save_as(m, dir, BRG_DTYPE_F32); }

brg_status brg_model_save_as(const brg_model *m, const char *dir, brg_dtype dtype) {
    if (dtype != BRG_DTYPE_F32 && dtype != BRG_DTYPE_F16 && dtype != BRG_DTYPE_BF16)
        return brg_error(BRG_ERR_INVALID_ARG, "a model is saved as F32, F16 or BF16, not %s", brg_dtype_name(dtype));
    struct stat before;
    const bool existed = stat(dir, &before) == 0;
    BRG_TRY(ensure_dir(dir));
    brg_file_pair pair;
    brg_status st = brg_file_pair_begin(dir, "model.safetensors", "config.json", &pair);
    if (st == BRG_OK) st = save_weights(m, pair.staging, dtype);
    if (st == BRG_OK) st = m->ops->save_config(m, pair.staging);
    if (st == BRG_OK && dtype != BRG_DTYPE_F32) st = set_config_dtype(pair.staging, dtype);
    if (st == BRG_OK) st = brg_file_pair_commit(&pair);
    else brg_file_pair_abort(&pair);
    if (st != BRG_OK && !existed) rmdir(dir); /* only if empty: anything else in it is not ours to remove */
    return st;
}

/* config.json's torch_dtype (and transformers 5's dtype) for a model saved in a half type. */
static brg_status set_config_dtype(const char *dir, brg_dtype dtype) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return brg_error(BRG_ERR_INVALID_ARG, "output path too long: %s", dir);
    cJSON *j;
    BRG_TRY(brg_json_load_file(path, 1 << 24, &j));
    const char *name = dtype == BRG_DTYPE_F16 ? "float16" : "bfloat16";
    cJSON_DeleteItemFromObjectCaseSensitive(j, "torch_dtype");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "dtype");
    brg_status st = cJSON_AddStringToObject(j, "torch_dtype", name) ? BRG_OK
                                                                     : brg_error(BRG_ERR_OOM, "cannot edit %s", path);
    if (st == BRG_OK) st = brg_json_write_file_atomic(path, j);
    cJSON_Delete(j);
    return st;
}

/* A half copy of a parameter, in its own buffer (freed by the caller). */
static brg_status half_copy(const brg_tensor *src, brg_dtype dtype, brg_tensor *dst) {
    const int64_t n = brg_tensor_numel(src);
    uint16_t *bits = malloc((size_t)(n ? n : 1) * sizeof *bits);
    if (!bits) return brg_error(BRG_ERR_OOM, "cannot allocate a half copy of %s", src->name ? src->name : "a weight");
    const float *x = src->data;
    for (int64_t i = 0; i < n; i++) bits[i] = dtype == BRG_DTYPE_F16 ? brg_f32_to_f16(x[i]) : brg_f32_to_bf16(x[i]);
    *dst = brg_tensor_wrap(dtype, src->ndim, src->shape, bits);
    return BRG_OK;
}

static brg_status save_weights(const brg_model *m, const char *dir, brg_dtype dtype) {
    brg_named_tensor *list = calloc((size_t)m->n_params, sizeof *list);
    brg_tensor *copies = dtype != BRG_DTYPE_F32 ? calloc((size_t)m->n_params, sizeof *copies) : NULL;
    if (!list || (dtype != BRG_DTYPE_F32 && !copies)) {
        free(list);
        free(copies);
        return brg_error(BRG_ERR_OOM, "cannot allocate the tensor list");
    }
    brg_status st = BRG_OK;
    for (int i = 0; i < m->n_params; i++) {
        list[i] = (brg_named_tensor){m->params[i].name, m->params[i].tensor};
        if (copies && st == BRG_OK && (st = half_copy(m->params[i].tensor, dtype, &copies[i])) == BRG_OK)
            list[i].tensor = &copies[i];
    }
    char path[4096];
    if (snprintf(path, sizeof path, "%s/model.safetensors", dir) >= (int)sizeof path)
        st = brg_error(BRG_ERR_INVALID_ARG, "output path too long: %s", dir);
    /* transformers refuses safetensors files without format metadata. */
    brg_metadata_entry meta[1] = {{"format", "pt"}};
    if (st == BRG_OK) st = brg_safetensors_write(path, list, (size_t)m->n_params, meta, 1);
    for (int i = 0; copies && i < m->n_params; i++) free(copies[i].data);
    free(copies);
    free(list);
    return st;
}

brg_loss_items brg_model_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    brg_loss_items none = {0, 0};
    if (!brg_model_has_targets(m, batch) || !m->ops->count_loss_items) return none;
    return m->ops->count_loss_items(m, batch);
}

brg_status brg_model_zero_grad(brg_model *m) {
    for (int i = 0; i < m->n_params; i++) {
        brg_tensor *t = m->params[i].tensor;
        if (!t->grad) BRG_TRY(brg_tensor_ensure_grad(m->arena, t));
        memset(t->grad, 0, (size_t)brg_tensor_numel(t) * sizeof(float));
        t->grad_zero_pending = false;
    }
    return BRG_OK;
}

int64_t brg_model_num_parameters(const brg_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += brg_tensor_numel(m->params[i].tensor);
    return n;
}

brg_status brg_model_forward_blocks(brg_model *m, int first, int last, brg_tape *tape, brg_bundle *bundle) {
    if (first < 0 || last >= m->n_blocks || first > last)
        return brg_error(BRG_ERR_INVALID_ARG, "block range [%d, %d] outside the model's %d blocks", first, last,
                         m->n_blocks);
    for (int b = first; b <= last; b++) {
        brg_status st = m->ops->forward_block(m, b, tape, bundle);
        if (st != BRG_OK) return brg_error_wrap(st, "%s", m->blocks[b].name);
    }
    return BRG_OK;
}

brg_status brg_model_forward(brg_model *m, brg_tape *tape, brg_bundle *bundle) {
    return brg_model_forward_blocks(m, 0, m->n_blocks - 1, tape, bundle);
}

brg_status model_parse_architecture(const cJSON *j, const char *ctx, const char *const *names, int n, int *index) {
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(j, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    *index = 0;
    if (!first) return BRG_OK;
    if (!cJSON_IsString(first)) return brg_error(BRG_ERR_FORMAT, "%s: architectures[0] must be a string", ctx);
    char known[1024] = "";
    for (int t = 0; t < n; t++) {
        if (strcmp(first->valuestring, names[t]) == 0) {
            *index = t;
            return BRG_OK;
        }
        size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", t ? ", " : "", names[t]);
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (%s)", ctx, first->valuestring, known);
}
