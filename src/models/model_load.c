/* Loading hub checkpoints as transformers' from_pretrained does (prefixed or bare names, buffers
 * skipped, unused tensors reported, a missing head initialised and reported), and unpacking a
 * forward's named outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/model.h"
#include "brigade/rng.h"
#include "models/model_internal.h"

static bool has_suffix(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static bool ignorable(const char *name, const brg_load_options *o) {
    for (int i = 0; o->ignore_suffixes && o->ignore_suffixes[i]; i++)
        if (has_suffix(name, o->ignore_suffixes[i])) return true;
    for (int i = 0; o->ignore_containing && o->ignore_containing[i]; i++)
        if (strstr(name, o->ignore_containing[i])) return true;
    return false;
}

/* The names a parameter may be stored under: its own; without the base-model prefix (a base
 * checkpoint in a head model); with it (a head checkpoint in the base model, whose names have
 * none). */
static int candidates(const char *name, const char *prefix, char out[3][2 * BRG_NAME_MAX]) {
    size_t lp = prefix ? strlen(prefix) : 0;
    int n = 0;
    snprintf(out[n++], sizeof out[0], "%s", name);
    if (lp && strncmp(name, prefix, lp) == 0) snprintf(out[n++], sizeof out[0], "%s", name + lp);
    else if (lp) snprintf(out[n++], sizeof out[0], "%s%s", prefix, name);
    return n;
}

/* The parameter a checkpoint name stands for, or -1. */
static int param_for(const brg_model *m, const char *name, const char *prefix) {
    char c[3][2 * BRG_NAME_MAX];
    int n = candidates(name, prefix, c);
    for (int i = 0; i < n; i++) {
        int p = brg_model_find_param(m, c[i]);
        if (p >= 0) return p;
    }
    return -1;
}

/* Where parameter `name` is stored (into `buf`), or NULL when absent. A checkpoint holding it
 * under two names is ambiguous. */
static brg_status stored_name(const brg_checkpoint *ckpt, const char *name, const char *prefix,
                              char buf[2 * BRG_NAME_MAX], const char **out) {
    char c[3][2 * BRG_NAME_MAX];
    int n = candidates(name, prefix, c), found = -1;
    for (int i = 0; i < n; i++) {
        if (!brg_checkpoint_has(ckpt, c[i])) continue;
        if (found >= 0)
            return brg_error(BRG_ERR_FORMAT, "the checkpoint holds both '%s' and '%s': which one is meant is ambiguous",
                             c[found], c[i]);
        found = i;
    }
    *out = NULL;
    if (found < 0) return BRG_OK;
    memcpy(buf, c[found], sizeof c[found]);
    *out = buf;
    return BRG_OK;
}

/* One stderr line listing names, in the words transformers uses. */
static void report(const char *lead, const char *const *names, int n, const char *tail) {
    fprintf(stderr, "%s [", lead);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s'%s'", i ? ", " : "", names[i]);
    fprintf(stderr, "]%s\n", tail);
}

static brg_status report_unused(const brg_model *m, const brg_checkpoint *ckpt, const char *source,
                                const brg_load_options *o) {
    size_t n = brg_checkpoint_count(ckpt);
    const char **unused = malloc((n + 1) * sizeof *unused);
    if (!unused) return brg_error(BRG_ERR_OOM, "out of memory listing %zu checkpoint tensors", n);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = brg_checkpoint_name(ckpt, i);
        if (param_for(m, name, o->base_prefix) < 0 && !ignorable(name, o)) unused[k++] = name;
    }
    if (k) {
        char lead[1200];
        snprintf(lead, sizeof lead, "brigade: some weights of the model checkpoint at %s were not used when "
                                    "initializing %s:", source, m->ops->architecture);
        report(lead, unused, k, "");
    }
    free(unused);
    return BRG_OK;
}

void brg_model_init_some(brg_model *m, uint64_t seed, const bool *which) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_params; i++) {
        if (!which[i]) continue;
        brg_param *p = &m->params[i];
        float *d = p->tensor->data;
        int64_t n = brg_tensor_numel(p->tensor);
        for (int64_t j = 0; j < n; j++)
            d[j] = p->init == BRG_INIT_NORMAL ? (float)(brg_rng_normal(&rng) * p->init_std)
                   : p->init == BRG_INIT_ONES ? 1.0f : 0.0f;
    }
}

/* Missing parameters: the task head's (in the last block and outside the base model, whose names
 * carry base_prefix) are initialised when allowed; any other is an error. */
static brg_status fill_missing(brg_model *m, const bool *missing, const char *source, const brg_load_options *o) {
    int head = m->n_blocks - 1, k = 0;
    size_t lp = o->base_prefix ? strlen(o->base_prefix) : 0;
    const char **names = malloc((size_t)m->n_params * sizeof *names);
    if (!names) return brg_error(BRG_ERR_OOM, "out of memory listing missing parameters");
    brg_status st = BRG_OK;
    for (int i = 0; i < m->n_params && st == BRG_OK; i++) {
        if (!missing[i]) continue;
        bool in_head = m->blocks[m->params[i].block].kind == BRG_BLOCK_HEAD && m->params[i].block == head &&
                       (!lp || strncmp(m->params[i].name, o->base_prefix, lp) != 0);
        if (!in_head || !o->init_missing_head)
            st = brg_error(BRG_ERR_FORMAT, "the checkpoint has no tensor '%s'", m->params[i].name);
        names[k++] = m->params[i].name;
    }
    if (st == BRG_OK && k) {
        brg_model_init_some(m, o->seed, missing);
        char lead[1200];
        snprintf(lead, sizeof lead, "brigade: some weights of %s were not initialized from the model checkpoint at %s "
                                    "and are newly initialized:", m->ops->architecture, source);
        report(lead, names, k, "\nbrigade: you should probably TRAIN this model on a down-stream task to be able to "
                               "use it for predictions and inference.");
    }
    free(names);
    return st;
}

brg_status brg_model_load_pretrained(brg_model *m, const brg_checkpoint *ckpt, const char *source,
                                     const brg_load_options *o) {
    bool *missing = calloc((size_t)m->n_params + 1, sizeof *missing);
    if (!missing) return brg_error(BRG_ERR_OOM, "out of memory loading %d parameters", m->n_params);
    brg_status st = BRG_OK;
    for (int i = 0; i < m->n_params && st == BRG_OK; i++) {
        const char *stored = NULL;
        char buf[2 * BRG_NAME_MAX];
        st = stored_name(ckpt, m->params[i].name, o->base_prefix, buf, &stored);
        if (st == BRG_OK && stored) st = model_load_param(&m->params[i], ckpt, stored);
        missing[i] = !stored;
    }
    if (st == BRG_OK) st = fill_missing(m, missing, source, o);
    if (st == BRG_OK) st = report_unused(m, ckpt, source, o);
    free(missing);
    return st;
}

brg_status brg_model_load_dir_pretrained(brg_model *m, const char *dir, const brg_load_options *opts,
                                         brg_model **out) {
    brg_checkpoint *ckpt = NULL;
    brg_status st = brg_checkpoint_open(dir, &ckpt);
    if (st == BRG_OK) {
        st = brg_model_load_pretrained(m, ckpt, dir, opts);
        brg_checkpoint_close(ckpt);
    }
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return brg_error_wrap(st, "loading %s", dir);
    }
    *out = m;
    return BRG_OK;
}

/* ---- outputs ---- */

brg_status brg_model_output_span(brg_arena *arena, const brg_tensor *packed, const char *name, int64_t offset,
                                 int ndim, const int64_t *shape, brg_tensor **out) {
    int64_t B = packed->shape[0], row = brg_tensor_numel(packed) / B, full[BRG_MAX_DIMS], n = 1;
    if (ndim + 1 > BRG_MAX_DIMS) return brg_error(BRG_ERR_INTERNAL, "output %s has too many dims", name);
    full[0] = B;
    for (int d = 0; d < ndim; d++) n *= full[d + 1] = shape[d];
    if (offset < 0 || offset + n > row)
        return brg_error(BRG_ERR_INTERNAL, "output %s [%lld, %lld) lies outside the %lld packed values per row", name,
                         (long long)offset, (long long)(offset + n), (long long)row);
    BRG_TRY(brg_tensor_new(arena, BRG_DTYPE_F32, ndim + 1, full, name, out));
    const float *src = packed->data;
    float *dst = (*out)->data;
    for (int64_t b = 0; b < B; b++) memcpy(dst + b * n, src + b * row + offset, (size_t)n * sizeof(float));
    return BRG_OK;
}

/* Column k of the logits' last dimension (question answering: start_logits, end_logits). */
static brg_status column(brg_arena *a, const brg_tensor *logits, int k, const char *name, brg_tensor **out) {
    int64_t parts = logits->shape[logits->ndim - 1], n = brg_tensor_numel(logits) / parts;
    BRG_TRY(brg_tensor_new(a, BRG_DTYPE_F32, logits->ndim - 1, logits->shape, name, out));
    const float *l = logits->data;
    for (int64_t i = 0; i < n; i++) ((float *)(*out)->data)[i] = l[i * parts + k];
    return BRG_OK;
}

brg_status brg_model_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    *n = 0;
    if (!logits) return brg_error(BRG_ERR_INTERNAL, "%s: the forward returned no outputs", m->ops->architecture);
    if (m->ops->outputs) return m->ops->outputs(m, batch, logits, arena, out, max, n);
    const char *const *names = m->ops->logits_names;
    if (!names) {
        if (max < 1) return brg_error(BRG_ERR_INTERNAL, "no room for the outputs");
        out[(*n)++] = (brg_named_tensor){"logits", (brg_tensor *)logits};
        return BRG_OK;
    }
    for (int k = 0; names[k]; k++) {
        if (k >= logits->shape[logits->ndim - 1] || *n >= max)
            return brg_error(BRG_ERR_INTERNAL, "%s: no logits column for %s", m->ops->architecture, names[k]);
        brg_tensor *part;
        BRG_TRY(column(arena, logits, k, names[k], &part));
        out[(*n)++] = (brg_named_tensor){names[k], part};
    }
    return BRG_OK;
}
