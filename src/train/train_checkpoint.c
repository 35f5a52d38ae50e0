/* Checkpoints: the model as a Hugging Face folder (deparallelized: the same names as the input,
 * tied weights once), the optimizer state of every distinct parameter, and the trainer's step.
 * Every file is written atomically; resuming restores all three exactly. */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/checkpoint.h"
#include "brigade/safetensors.h"
#include "io/json.h"
#include "trainer_internal.h"

#define OPTIMIZER_FILE "optimizer.safetensors"
#define STATE_FILE "trainer_state.json"

static brg_status path_in(char *buf, size_t len, const char *dir, const char *file) {
    if ((size_t)snprintf(buf, len, "%s/%s", dir, file) >= len)
        return brg_error(BRG_ERR_INVALID_ARG, "path too long: %s/%s", dir, file);
    return BRG_OK;
}

/* The parameter a state tensor belongs to: its name minus the last ".<state key>". */
static int state_param(const brg_model *m, const char *state_name) {
    const char *dot = strrchr(state_name, '.');
    if (!dot) return -1;
    char name[BRG_NAME_MAX];
    size_t n = (size_t)(dot - state_name);
    if (n >= sizeof name) return -1;
    memcpy(name, state_name, n);
    name[n] = '\0';
    return brg_model_find_param(m, name);
}

/* Replica 0's copy on the owning block's stage stands for every copy (they are identical);
 * with sharded state (ZeRO-1) every replica's copy there holds its own shard. */
static bool is_owner_copy(const trainer *t, int device, int param) {
    brg_device_info info;
    brg_device_get_info(brg_runtime_device(t->rt, device), &info);
    return (info.replica == 0 || t->opts.shard_optimizer_state) &&
           t->block_stage[t->model->params[param].block] == info.stage;
}

/* What each device contributes to the optimizer file: the state of its owner copies, as flat
 * views (headers in views[device]). */
typedef struct state_gather {
    trainer *t;
    brg_tensor **views; /* [devices][state count] */
} state_gather;

static int list_state(brg_device *dev, void *arg, brg_named_tensor *list, int cap) {
    state_gather *g = arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    brg_optimizer *opt = g->t->optimizers[info.id];
    int n = 0;
    for (int i = 0; i < brg_optimizer_state_count(opt); i++) {
        const char *name = brg_optimizer_state_name(opt, i);
        int p = state_param(g->t->model, name);
        if (p < 0 || !is_owner_copy(g->t, info.id, p) || brg_optimizer_state_numel(opt, i) == 0) continue;
        if (n < cap) {
            int64_t numel = brg_optimizer_state_numel(opt, i);
            g->views[info.id][n] = brg_tensor_wrap(BRG_DTYPE_F32, 1, &numel, brg_optimizer_state_data(opt, i));
            list[n] = (brg_named_tensor){name, &g->views[info.id][n]};
        }
        n++;
    }
    return n;
}

/* The gathered shards of one state tensor, in replica order (the devices' order), joined into
 * one tensor of the parameter's size in `host`: the file is the same whatever the sharding. */
static brg_status join_shards(const trainer *t, brg_arena *host, brg_named_tensor *list, size_t n, size_t at) {
    const char *name = list[at].name;
    const int p = state_param(t->model, name);
    const int64_t whole = p < 0 ? 0 : brg_tensor_numel(t->model->params[p].tensor);
    int64_t have = 0;
    for (size_t i = at; i < n; i++)
        if (list[i].name && strcmp(list[i].name, name) == 0) have += brg_tensor_numel(list[i].tensor);
    if (have != whole)
        return brg_error(BRG_ERR_INTERNAL, "optimizer state %s: the shards hold %lld of its %lld elements", name,
                         (long long)have, (long long)whole);
    if (brg_tensor_numel(list[at].tensor) == whole) return BRG_OK;
    float *joined;
    BRG_TRY(brg_arena_alloc_into(host, (size_t)whole * sizeof(float), name, (void **)&joined));
    int64_t filled = 0;
    for (size_t i = at; i < n; i++) {
        if (!list[i].name || strcmp(list[i].name, name) != 0) continue;
        const int64_t k = brg_tensor_numel(list[i].tensor);
        memcpy(joined + filled, list[i].tensor->data, (size_t)k * sizeof(float));
        filled += k;
        if (i > at) list[i].name = NULL; /* taken: dropped below */
    }
    brg_tensor *view = brg_arena_alloc(host, sizeof *view, "optimizer state view");
    if (!view) return brg_error(BRG_ERR_OOM, "cannot join the shards of %s", name);
    *view = brg_tensor_wrap(BRG_DTYPE_F32, 1, &whole, joined);
    list[at].tensor = view;
    return BRG_OK;
}

/* Joins every sharded state tensor, in place: *n shrinks to one entry per name. */
static brg_status join_all_shards(const trainer *t, brg_arena *host, brg_named_tensor *list, size_t *n) {
    for (size_t i = 0; i < *n; i++) {
        if (list[i].name) BRG_TRY(join_shards(t, host, list, *n, i));
    }
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++)
        if (list[i].name) list[kept++] = list[i];
    *n = kept;
    return BRG_OK;
}

static brg_status write_optimizer(trainer *t, const char *dir, const brg_named_tensor *list, size_t n) {
    char step[32], path[4096];
    snprintf(step, sizeof step, "%lld", (long long)brg_optimizer_get_step(t->optimizers[0]));
    brg_metadata_entry meta[2] = {{"optimizer", brg_optimizer_kind_name(t->opts.optimizer.kind)}, {"step", step}};
    BRG_TRY(path_in(path, sizeof path, dir, OPTIMIZER_FILE));
    return brg_safetensors_write(path, list, n, meta, 2);
}

/* The owners' state, gathered onto the host through the runtime, then written. */
static brg_status save_optimizer(trainer *t, const char *dir) {
    int devices = brg_runtime_device_count(t->rt);
    state_gather g = {t, calloc((size_t)devices, sizeof *g.views)};
    brg_status st = g.views ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot list the optimizer state");
    for (int d = 0; st == BRG_OK && d < devices; d++) {
        int count = t->optimizers[d] ? brg_optimizer_state_count(t->optimizers[d]) : 0; /* NULL: another rank's */
        g.views[d] = calloc((size_t)(count ? count : 1), sizeof **g.views);
        if (!g.views[d]) st = brg_error(BRG_ERR_OOM, "cannot list the optimizer state");
    }
    brg_arena *host = NULL;
    if (st == BRG_OK) st = brg_arena_create("checkpoint", 0, &host);
    brg_named_tensor *list = NULL;
    size_t n = 0;
    if (st == BRG_OK) st = brg_runtime_gather(t->rt, list_state, &g, host, &list, &n);
    if (st == BRG_OK && dir) st = join_all_shards(t, host, list, &n);
    if (st == BRG_OK && dir) st = write_optimizer(t, dir, list, n); /* no dir: another rank's part of the gather */
    for (int d = 0; g.views && d < devices; d++) free(g.views[d]);
    free(g.views);
    if (host) brg_arena_destroy(host);
    return st;
}

static brg_status save_state(trainer *t, const char *dir) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return brg_error(BRG_ERR_OOM, "cannot build %s", STATE_FILE);
    cJSON_AddNumberToObject(j, "global_step", (double)t->step);
    cJSON_AddNumberToObject(j, "max_steps", (double)t->total_steps);
    cJSON_AddNumberToObject(j, "lr_schedule_steps", (double)t->opts.lr_schedule.total_steps);
    cJSON_AddNumberToObject(j, "rows_per_step", (double)t->order.rows_per_step);
    cJSON_AddNumberToObject(j, "seed", (double)t->opts.seed);
    cJSON_AddBoolToObject(j, "shuffle", t->opts.shuffle);
    cJSON_AddStringToObject(j, "precision", brg_precision_name(t->opts.precision));
    if (t->scaler.active) {
        cJSON_AddNumberToObject(j, "loss_scale", (double)t->scaler.scale);
        cJSON_AddNumberToObject(j, "loss_scale_clean_steps", (double)t->scaler.clean);
        /* global_step minus these is the optimizer's step count (brg_ckpt_dir_check) */
        cJSON_AddNumberToObject(j, "skipped_steps", (double)t->scaler.skipped);
    }
    if (t->order.steps_per_epoch > 0)
        cJSON_AddNumberToObject(j, "epoch", (double)t->step / (double)t->order.steps_per_epoch);
    cJSON_AddItemToObject(j, "log_history",
                          t->log_history ? cJSON_Duplicate(t->log_history, true) : cJSON_CreateArray());
    char path[4096];
    brg_status st = path_in(path, sizeof path, dir, STATE_FILE);
    if (st == BRG_OK) st = brg_json_write_file_atomic(path, j);
    cJSON_Delete(j);
    return st;
}

brg_status trainer_save(trainer *t, const char *dir) {
    BRG_TRY(brg_runtime_sync_to_model(t->rt));
    if (dir) BRG_TRY(brg_model_save_as(t->model, dir, t->master)); /* a .16 run's weights are half */
    BRG_TRY(save_optimizer(t, dir));
    return dir ? save_state(t, dir) : BRG_OK;
}

/* ---- resume ---- */

static brg_status load_weights(trainer *t, const char *dir) {
    brg_checkpoint *ckpt;
    BRG_TRY(brg_checkpoint_open(dir, &ckpt));
    brg_status st = brg_model_load_weights(t->model, ckpt, NULL, NULL);
    brg_checkpoint_close(ckpt);
    BRG_TRY(st);
    return brg_runtime_sync_from_model(t->rt);
}

static brg_status restore_device_state(brg_optimizer *opt, const brg_safetensors *f, int64_t step) {
    for (int i = 0; i < brg_optimizer_state_count(opt); i++) {
        const char *name = brg_optimizer_state_name(opt, i);
        brg_tensor src;
        BRG_TRY(brg_safetensors_get(f, name, &src));
        /* The file holds the whole parameter's state; a shard takes its own elements. */
        const int64_t numel = brg_optimizer_state_numel(opt, i), whole = brg_optimizer_state_param_numel(opt, i);
        if (brg_tensor_numel(&src) != whole || src.dtype != BRG_DTYPE_F32 || !brg_tensor_is_contiguous(&src))
            return brg_error(BRG_ERR_FORMAT, "optimizer state %s does not match this model", name);
        if (numel == 0) continue;
        memcpy(brg_optimizer_state_data(opt, i), (const float *)src.data + brg_optimizer_state_offset(opt, i),
               (size_t)numel * sizeof(float));
    }
    return brg_optimizer_set_step(opt, step);
}

/* Each device restores its own optimizer's state from the file, on its own thread. */
typedef struct state_restore {
    trainer *t;
    const brg_safetensors *file;
    int64_t step;
} state_restore;

static brg_status restore_job(brg_device *dev, void *arg) {
    const state_restore *r = arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    return restore_device_state(r->t->optimizers[info.id], r->file, r->step);
}

static brg_status load_optimizer(trainer *t, const char *dir) {
    char path[4096];
    BRG_TRY(path_in(path, sizeof path, dir, OPTIMIZER_FILE));
    brg_safetensors *f;
    BRG_TRY(brg_safetensors_open(path, &f));
    const char *kind = brg_safetensors_metadata(f, "optimizer"), *step = brg_safetensors_metadata(f, "step");
    brg_status st = BRG_OK;
    if (!kind || !step || strcmp(kind, brg_optimizer_kind_name(t->opts.optimizer.kind)) != 0)
        st = brg_error(BRG_ERR_FORMAT, "%s holds %s state, this run uses %s", path, kind ? kind : "unknown",
                       brg_optimizer_kind_name(t->opts.optimizer.kind));
    state_restore r = {t, f, step ? strtoll(step, NULL, 10) : 0};
    if (st == BRG_OK) st = brg_runtime_each_device(t->rt, restore_job, &r);
    brg_safetensors_close(f);
    return st == BRG_OK ? st : brg_error_wrap(st, "resuming from %s", dir);
}

/* A resumed run continues the original run's learning-rate schedule (a linear decay ends where
 * it was planned to end) unless the caller gave a schedule length; resuming with more steps
 * says so, since a schedule that already reached its end leaves the extra steps at its last lr. */
static brg_status keep_schedule(trainer *t, int64_t original) {
    if (t->schedule_given || original <= 0 || original == t->opts.lr_schedule.total_steps) return BRG_OK;
    t->opts.lr_schedule.total_steps = original;
    BRG_TRY(brg_lr_schedule_validate(&t->opts.lr_schedule));
    if (t->opts.progress)
        fprintf(t->opts.progress,
                "note: the learning-rate schedule keeps the original run's %lld steps (this run goes to %lld); "
                "give its length to change it (--lr-schedule-steps)\n",
                (long long)original, (long long)t->total_steps);
    return BRG_OK;
}

/* An automatic loss scale goes on from where the checkpoint left it (a static one is the run's). */
static brg_status load_loss_scale(trainer *t, const cJSON *j, const char *path) {
    if (!t->scaler.automatic) return BRG_OK;
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(j, "loss_scale");
    if (!scale) return BRG_OK;
    if (!cJSON_IsNumber(scale) || !(scale->valuedouble > 0) || !isfinite(scale->valuedouble))
        return brg_error(BRG_ERR_FORMAT, "%s: loss_scale must be a positive number", path);
    int64_t clean = 0, skipped = 0;
    BRG_TRY(brg_json_get_int(j, STATE_FILE, "loss_scale_clean_steps", false, 0, &clean));
    BRG_TRY(brg_json_get_int(j, STATE_FILE, "skipped_steps", false, 0, &skipped));
    if (clean < 0 || skipped < 0) return brg_error(BRG_ERR_FORMAT, "%s: a negative loss scaling count", path);
    t->scaler.scale = (float)scale->valuedouble;
    t->scaler.clean = clean;
    t->scaler.skipped = skipped;
    return BRG_OK;
}

static brg_status load_state(trainer *t, const char *dir) {
    char path[4096];
    BRG_TRY(path_in(path, sizeof path, dir, STATE_FILE));
    cJSON *j;
    BRG_TRY(brg_json_load_file(path, 1 << 20, &j));
    int64_t step = 0, rows = 0, max_steps = 0, schedule = 0;
    brg_status st = brg_json_get_int(j, STATE_FILE, "global_step", true, 0, &step);
    if (st == BRG_OK) st = brg_json_get_int(j, STATE_FILE, "rows_per_step", true, 0, &rows);
    if (st == BRG_OK) st = brg_json_get_int(j, STATE_FILE, "max_steps", false, 0, &max_steps);
    /* older checkpoints have no lr_schedule_steps: their schedule was the run's length */
    if (st == BRG_OK) st = brg_json_get_int(j, STATE_FILE, "lr_schedule_steps", false, max_steps, &schedule);
    if (st == BRG_OK) st = load_loss_scale(t, j, path);
    /* The history goes on from the checkpoint's (a file without one starts afresh). */
    const cJSON *history = cJSON_GetObjectItemCaseSensitive(j, "log_history");
    if (st == BRG_OK && cJSON_IsArray(history)) {
        cJSON_Delete(t->log_history);
        t->log_history = cJSON_Duplicate(history, true);
    }
    cJSON_Delete(j);
    BRG_TRY(st);
    if (rows != t->order.rows_per_step)
        return brg_error(BRG_ERR_INVALID_ARG, "%s was written with %lld rows per step, this run uses %lld", path,
                         (long long)rows, (long long)t->order.rows_per_step);
    if (step < 0) return brg_error(BRG_ERR_FORMAT, "%s: global_step %lld is negative", path, (long long)step);
    /* The run's length counts the steps the checkpoint already holds: asking for fewer is a
     * misreading of it as "this many more". */
    if (step > t->total_steps)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%s is at step %lld, past this run's %lld steps: the number of steps is the run's total, "
                         "counting those already done",
                         path, (long long)step, (long long)t->total_steps);
    t->step = step;
    return keep_schedule(t, schedule);
}

brg_status trainer_resume(trainer *t, const char *dir) {
    BRG_TRY(load_state(t, dir));
    BRG_TRY(load_weights(t, dir));
    return load_optimizer(t, dir);
}
