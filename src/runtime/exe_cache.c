/* The executable cache's start: a valid entry gives the model its weights and the pipeline its
 * placement straight from the mapped file; otherwise the model is loaded and prepared as usual and
 * the entry written after the first output (brigade/exe_cache.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/checkpoint.h"
#include "brigade/ranks.h"
#include "brigade/registry.h"
#include "brigade/trace.h"
#include "exe_cache_internal.h"
#include "packed_weights.h"

struct brg_cached_inference {
    brg_model *model;
    brg_inference *inf;
    bool enabled, hit;
    bool unconfirmed; /* a hit whose payload is still being checked (confirm_later) */
    brg_cached_inference_request rq;
    exe_entry entry;
    exe_key key;
    const char *tool;
    char path[PATH_MAX];
    char unkeyed[768]; /* why no key could be made, said once the model has loaded */
};

static bool cache_requested(const brg_ipu_config *cfg) {
    const char *d = cfg->executable_cache_dir;
    return d[0] && strcmp(d, "disabled") != 0;
}

/* mkdir -p, then a write check: a folder we cannot write turns the cache off for this start. */
static bool usable_dir(const char *dir, char *why, size_t len) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return snprintf(why, len, "path too long"), false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return snprintf(why, len, "%s", strerror(errno)), false;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return snprintf(why, len, "%s", strerror(errno)), false;
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return snprintf(why, len, "not a directory"), false;
    if (access(buf, W_OK | X_OK) != 0) return snprintf(why, len, "%s", strerror(errno)), false;
    return true;
}

/* One entry per model folder and command: a changed key is then a stale entry, said and
 * replaced, not a second file. */
static void entry_path(brg_cached_inference *c, const char *cache_dir, const char *dir) {
    char real[PATH_MAX];
    const char *id = realpath(dir, real) ? real : dir;
    const char *base = strrchr(id, '/');
    base = base && base[1] ? base + 1 : id;
    char name[48];
    snprintf(name, sizeof name, "%.32s", base);
    for (char *p = name; *p; p++)
        if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z')))
            *p = '_';
    if (snprintf(c->path, sizeof c->path, "%s/%s-%s-%016llx.brgexe", cache_dir, c->tool, name,
                 (unsigned long long)exe_hash_of(id, strlen(id), 0)) >= (int)sizeof c->path)
        c->path[0] = '\0'; /* too long: no entry */
}

static void warn(const brg_cached_inference *c, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "brigade %s: warning: ", c->tool);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* The entry's weights become the model's: each parameter points into the mapping. */
static brg_status adopt_entry(brg_cached_inference *c, const brg_cached_inference_request *rq) {
    BRG_TRY(brg_model_create_from_config(rq->model_ref, &c->model));
    if (c->entry.n_params != c->model->n_params)
        return brg_error(BRG_ERR_FORMAT, "%s holds %d parameters, the model has %d", c->path, c->entry.n_params,
                         c->model->n_params);
    for (int p = 0; p < c->model->n_params; p++) {
        brg_tensor *t = c->model->params[p].tensor;
        if (c->entry.param[2 * p + 1] != (uint64_t)brg_tensor_numel(t))
            return brg_error(BRG_ERR_FORMAT, "%s: parameter %s has another size", c->path, c->model->params[p].name);
        t->data = (char *)c->entry.map + c->entry.param[2 * p];
    }
    brg_inference_options o = rq->opts ? *rq->opts : (brg_inference_options){0};
    o.share_params = true;
    BRG_TRY(brg_inference_create_placed(c->model, rq->cfg, &o, &c->entry.placement, &c->inf));
    /* The devices read the entry's panels instead of packing their weights again. */
    for (int i = 0; i < c->entry.n_packs; i++) {
        const uint64_t *row = c->entry.pack + (size_t)i * EXE_PACK_FIELDS;
        const packed_weight_record r = {(int)row[EXE_PACK_PARAM], (brg_gemm_pack_layout)row[EXE_PACK_LAYOUT],
                                        row[EXE_PACK_TRANS_B] != 0, (int64_t)row[EXE_PACK_K], (int64_t)row[EXE_PACK_N],
                                        (int64_t)row[EXE_PACK_LDB], (const char *)c->entry.map + row[EXE_PACK_OFFSET],
                                        row[EXE_PACK_BYTES], row[EXE_PACK_DEVICES]};
        packed_weights_adopt(inference_runtime(c->inf), &r);
    }
    return BRG_OK;
}

static void say_hit(const brg_cached_inference *c) {
    fprintf(stderr, "brigade %s: executable cache hit: %s (weights, placement, per-device copies and "
                    "packed weights prepared already)\n", c->tool, c->path);
}

static void drop_entry(brg_cached_inference *c) {
    brg_inference_destroy(c->inf);
    brg_model_destroy(c->model); /* before the mapping its parameters point into goes */
    c->inf = NULL;
    c->model = NULL;
    exe_entry_unmap(&c->entry);
}

/* A valid entry's start; false (with the reason said) when there is none to use. */
static bool start_from_entry(brg_cached_inference *c, const brg_cached_inference_request *rq) {
    char why[256];
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    exe_load_result r = exe_entry_load(c->path, &c->key, &c->entry, rq->confirm_later, why, sizeof why);
    if (r == EXE_LOAD_INVALID) warn(c, "executable cache entry %s is %s: rebuilding it", c->path, why);
    if (r != EXE_LOAD_HIT) return false;
    brg_status st = adopt_entry(c, rq);
    if (st != BRG_OK) {
        warn(c, "executable cache entry %s cannot be used (%s): rebuilding it", c->path, brg_last_error());
        drop_entry(c);
        return false;
    }
    if (t0) brg_trace_named("executable cache load", t0, -1);
    c->unconfirmed = rq->confirm_later;
    if (!c->unconfirmed) say_hit(c);
    return true;
}

/* The model loaded and its pipeline prepared as without the cache. The model is this start's alone
 * and never written: the devices compute on its weights (counted in each budget as their own)
 * instead of copying them, as a cached start does; what they need besides is their packed
 * weights. */
static brg_status start_fresh(brg_cached_inference *c, const brg_cached_inference_request *rq) {
    brg_inference_options o = rq->opts ? *rq->opts : (brg_inference_options){0};
    o.share_params = true;
    BRG_TRY(brg_model_load(rq->model_ref, &c->model));
    return brg_inference_create(c->model, rq->cfg, &o, &c->inf);
}

static void prepare_key(brg_cached_inference *c, const brg_cached_inference_request *rq) {
    char why[256], dir[4096];
    c->enabled = cache_requested(rq->cfg) && brg_ranks_size() <= 1;
    if (c->enabled && !usable_dir(rq->cfg->executable_cache_dir, why, sizeof why)) {
        warn(c, "executable_cache_dir '%s' is not usable (%s): running uncached", rq->cfg->executable_cache_dir, why);
        c->enabled = false;
    }
    /* A model that cannot be read is the load's error to report, in its one line; only a model
     * that loads all the same gets the warning. */
    if (c->enabled && (brg_hf_resolve(rq->model_ref, dir, sizeof dir) != BRG_OK ||
                       exe_key_compute(rq, dir, &c->key) != BRG_OK)) {
        snprintf(c->unkeyed, sizeof c->unkeyed, "%s", brg_last_error());
        c->enabled = false;
    }
    if (c->enabled) entry_path(c, rq->cfg->executable_cache_dir, dir);
    if (c->enabled && !c->path[0]) {
        warn(c, "executable_cache_dir '%s' is too long a path%s: running uncached", rq->cfg->executable_cache_dir, "");
        c->enabled = false;
    }
}

brg_status brg_cached_inference_open(const brg_cached_inference_request *rq, brg_cached_inference **out) {
    *out = NULL;
    brg_cached_inference *c = calloc(1, sizeof *c);
    if (!c) return brg_error(BRG_ERR_OOM, "cannot allocate the inference start");
    c->tool = rq->tool ? rq->tool : "inference";
    c->rq = *rq;
    prepare_key(c, rq);
    c->hit = c->enabled && start_from_entry(c, rq);
    brg_status st = BRG_OK;
    if (!c->hit) {
        st = start_fresh(c, rq);
        if (st == BRG_OK && c->unkeyed[0])
            warn(c, "cannot key the executable cache (%s): running uncached%s", c->unkeyed, "");
    }
    if (st != BRG_OK) {
        brg_cached_inference_close(c);
        return st;
    }
    *out = c;
    return BRG_OK;
}

brg_model *brg_cached_inference_model(const brg_cached_inference *c) { return c->model; }
brg_inference *brg_cached_inference_pipeline(const brg_cached_inference *c) { return c->inf; }
bool brg_cached_inference_hit(const brg_cached_inference *c) { return c->hit; }

brg_status brg_cached_inference_confirm(brg_cached_inference *c, bool *again) {
    *again = false;
    if (!c->unconfirmed) return BRG_OK;
    c->unconfirmed = false;
    char why[256];
    if (exe_entry_confirm(&c->entry, why, sizeof why)) {
        say_hit(c);
        return BRG_OK;
    }
    warn(c, "executable cache entry %s is %s: rebuilding it", c->path, why);
    drop_entry(c);
    c->hit = false;
    *again = true;
    return start_fresh(c, &c->rq);
}

void brg_cached_inference_store(brg_cached_inference *c) {
    if (!c->enabled || c->hit) return;
    packed_weight_record *packs = NULL;
    int n_packs = 0;
    brg_status st = packed_weights_collect(inference_runtime(c->inf), &packs, &n_packs);
    if (st == BRG_OK)
        st = exe_entry_write(c->path, &c->key, c->model, brg_inference_placement(c->inf), packs, n_packs);
    free(packs);
    if (st != BRG_OK) warn(c, "cannot write the executable cache entry (%s): this run stays uncached%s",
                           brg_last_error(), "");
    else fprintf(stderr, "brigade %s: executable cache entry written: %s\n", c->tool, c->path);
    c->enabled = false; /* once */
}

void brg_cached_inference_close(brg_cached_inference *c) {
    if (!c) return;
    drop_entry(c);
    free(c);
}
