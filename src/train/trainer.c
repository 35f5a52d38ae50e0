/* The training loop. Each step: fill the micro-batches of the global batch, run the pipeline
 * (gradients end up reduced on every device), clip by the global norm, step every device's
 * optimizer on its own thread, log. */
#include "brigade/trace.h"
#include "brigade/ranks.h"
#include "train/checkpoint_dir.h"
#include "half_masters.h"
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void brg_train_options_default(brg_train_options *o) {
    memset(o, 0, sizeof *o);
    o->replicas = o->stages = o->accumulation = o->device_iterations = 1;
    o->schedule = BRG_SCHEDULE_1F1B;
    o->micro_batch = 1;
    o->epochs = 1;
    o->shuffle = true;
    o->optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_ADAMW);
    o->optimizer.lr = 5e-5;
    o->optimizer.weight_decay = 0;
    o->lr_schedule.kind = BRG_LR_SCHEDULE_LINEAR;
    o->stochastic_rounding = -1;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- per-device optimizers ---- */

static bool sharded(const trainer *t) { return t->opts.shard_optimizer_state && t->opts.replicas > 1; }

/* Off-chip state is allocated outside the device's arena (a NULL arena: host memory). With
 * sharding each replica keeps its shard of every parameter it holds. */
static brg_status create_optimizer(brg_device *dev, void *arg) {
    trainer *t = arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    brg_optimizer *opt;
    BRG_TRY(brg_optimizer_create(&t->opts.optimizer, t->opts.optimizer_state_offchip ? NULL : brg_device_arena(dev),
                                 &opt));
    brg_optimizer_set_backend(opt, brg_device_backend(dev));
    t->optimizers[info.id] = opt;
    for (int p = 0; p < info.view->n_params; p++) {
        if (!info.holds[p]) continue;
        const brg_param *prm = &info.view->params[p];
        const int64_t n = brg_tensor_numel(prm->tensor);
        int64_t first = 0, count = n;
        if (sharded(t)) brg_shard_range(n, info.replica, t->opts.replicas, &first, &count);
        BRG_TRY(brg_optimizer_add_param_shard(opt, prm->tensor->data, prm->tensor->grad, n, first, count,
                                              !prm->no_decay, prm->name));
    }
    return BRG_OK;
}

typedef struct step_arg {
    trainer *t;
    float lr;
} step_arg;

/* The draws of a step's stochastic rounding: the same on every device for a (seed, step). */
static half_rounding rounding_at(const trainer *t, int64_t step, bool stochastic) {
    return (half_rounding){t->master, stochastic, t->opts.seed * 0x9e3779b97f4a7c15ull + (uint64_t)step};
}

static brg_status optimizer_step(brg_device *dev, void *arg) {
    step_arg *s = arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    brg_optimizer *opt = s->t->optimizers[info.id];
    brg_status st = brg_optimizer_step(opt, s->lr);
    if (st == BRG_OK && s->t->master != BRG_DTYPE_F32) {
        const half_rounding r = rounding_at(s->t, s->t->step + 1, s->t->stochastic_rounding);
        half_round_device(dev, opt, &r);
    }
    if (st == BRG_OK && sharded(s->t)) st = brg_device_gather_shards(dev); /* every copy whole again */
    if (t0) brg_trace_span(BRG_TRACE_OPTIMIZER, t0, (int)s->t->step + 1, 0, 0, NULL);
    return st;
}

/* A .16 run starts from the weights (and a resumed run's state) rounded to the half type, as
 * a model cast to half does. */
static brg_status round_masters(brg_device *dev, void *arg) {
    trainer *t = arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    const half_rounding r = rounding_at(t, t->step, false);
    half_round_device(dev, t->optimizers[info.id], &r);
    return BRG_OK;
}

static brg_status round_grads(brg_device *dev, void *arg) {
    const trainer *t = arg;
    half_round_device_grads(dev, t->master);
    return BRG_OK;
}

/* ---- setup ---- */

static brg_status check_options(const brg_train_options *o, const brg_dataset *d) {
    if (o->micro_batch < 1) return brg_error(BRG_ERR_INVALID_ARG, "micro-batch size must be at least 1");
    if (o->device_iterations < 1) return brg_error(BRG_ERR_INVALID_ARG, "device_iterations must be at least 1");
    if (o->steps < 0 || (o->steps == 0 && !(o->epochs > 0)))
        return brg_error(BRG_ERR_INVALID_ARG, "give a positive number of steps or epochs");
    if (o->max_grad_norm < 0) return brg_error(BRG_ERR_INVALID_ARG, "max_grad_norm must be >= 0");
    if (o->save_total_limit < 0) return brg_error(BRG_ERR_INVALID_ARG, "save_total_limit must be >= 0");
    if ((unsigned)o->precision >= BRG_PRECISION_COUNT) return brg_error(BRG_ERR_INVALID_ARG, "unknown precision mode");
    if (o->shard_optimizer_state && o->replicas > 1 && o->optimizer.kind == BRG_OPTIMIZER_LAMB)
        return brg_error(BRG_ERR_INVALID_ARG, "replicated_tensor_sharding does not work with LAMB: its trust ratio "
                                              "needs each parameter's whole norms (use AdamW, Adam, SGD or RMSprop)");
    (void)d;
    return brg_optimizer_config_validate(&o->optimizer);
}

static brg_status setup_placement(trainer *t) {
    int n = t->model->n_blocks;
    t->block_stage = calloc((size_t)n, sizeof *t->block_stage);
    if (!t->block_stage) return brg_error(BRG_ERR_OOM, "cannot allocate the placement");
    if (t->opts.block_stage) memcpy(t->block_stage, t->opts.block_stage, (size_t)n * sizeof *t->block_stage);
    return BRG_OK;
}

/* ---- checkpoints ---- */

/* The newest complete checkpoint under `dir` (or `dir` itself), once its parts agree. */
static brg_status resume(trainer *t, const char *dir) {
    char path[4096];
    BRG_TRY(brg_ckpt_dir_find(dir, path, sizeof path));
    BRG_TRY(brg_ckpt_dir_check(path));
    return trainer_resume(t, path);
}

/* output_dir/checkpoint-<step>: written whole under a temporary name, then renamed; the oldest
 * beyond save_total_limit go. */
static brg_status write_checkpoint(trainer *t);

static brg_status save_checkpoint(trainer *t) {
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    brg_status st = write_checkpoint(t);
    if (t0) brg_trace_named("checkpoint", t0, t->step);
    return st;
}

static brg_status write_checkpoint(trainer *t) {
    if (!brg_ranks_is_host()) return trainer_save(t, NULL); /* its part of the exchanges: rank 0 writes */
    const brg_train_options *o = &t->opts;
    char *tmp;
    BRG_TRY(brg_ckpt_dir_begin(o->output_dir, t->step, &tmp));
    brg_status st = trainer_save(t, tmp);
    if (st == BRG_OK && o->ipu_config) st = brg_ipu_config_save_pretrained(o->ipu_config, tmp);
    if (st != BRG_OK) {
        brg_ckpt_dir_abort(tmp);
        return st;
    }
    BRG_TRY(brg_ckpt_dir_commit(o->output_dir, t->step, tmp));
    return brg_ckpt_dir_prune(o->output_dir, o->save_total_limit);
}

/* After a resume: the loader (and its workers) start at the run's first step. */
static brg_status start_loader(trainer *t) {
    const brg_train_options *o = &t->opts;
    const brg_data_loader_options lo = {.workers = o->dataloader_workers, .prefetch = o->device_iterations,
                                        .replicas = o->replicas, .accumulation = o->accumulation,
                                        .micro = o->micro_batch, .shuffle = o->shuffle, .seed = o->seed,
                                        .first_step = t->step,
                                        .end_step = t->total_steps > t->step ? t->total_steps : t->step};
    return brg_data_loader_create(t->data, t->model, &lo, &t->loader);
}

static brg_status setup(trainer *t) {
    const brg_train_options *o = &t->opts;
    t->master = brg_precision_master_dtype(o->precision);
    t->stochastic_rounding = o->stochastic_rounding < 0 ? t->master != BRG_DTYPE_F32 : o->stochastic_rounding > 0;
    BRG_TRY(loss_scaler_init(&t->scaler, o)); /* before resume, which restores the scale */
    BRG_TRY(setup_placement(t));
    BRG_TRY(trainer_check_budget(t));
    if (brg_ranks_is_host()) BRG_TRY(trainer_check_output(t)); /* rank 0 writes the output */
    brg_runtime_options ro = {.replicas = o->replicas, .stages = o->stages, .block_stage = t->block_stage,
                              .micro_batches = o->accumulation, .schedule = o->schedule,
                              .device_memory = o->device_memory, .training = true, .recompute = o->recompute,
                              .pin_threads = o->pin_threads, .intra_threads = o->intra_threads,
                              .params_in_model = true, /* the trainer owns the model: weights held once */
                              .compute_dtype = brg_precision_compute_dtype(o->precision),
                              .activation_dtype = brg_precision_activation_dtype(o->precision),
                              .shard_gradients = sharded(t), .pack_weights = t->pack_weights};
    BRG_TRY(brg_runtime_create(t->model, &ro, &t->rt));
    int devices = brg_runtime_device_count(t->rt);
    t->optimizers = calloc((size_t)devices, sizeof *t->optimizers);
    t->losses = calloc((size_t)(o->replicas * o->accumulation), sizeof *t->losses);
    if (!t->optimizers || !t->losses) return brg_error(BRG_ERR_OOM, "cannot allocate the trainer");
    BRG_TRY(brg_runtime_each_device(t->rt, create_optimizer, t));
    int64_t rows_per_step = o->micro_batch * o->accumulation * o->replicas;
    BRG_TRY(brg_data_order_init(&t->order, t->data, rows_per_step, o->shuffle, o->seed));
    t->total_steps = o->steps ? o->steps : (int64_t)ceil(o->epochs * (double)t->order.steps_per_epoch);
    if (t->total_steps < 1) t->total_steps = 1;
    t->schedule_given = t->opts.lr_schedule.total_steps != 0;
    if (!t->schedule_given) t->opts.lr_schedule.total_steps = t->total_steps;
    BRG_TRY(brg_lr_schedule_validate(&t->opts.lr_schedule));
    if (o->resume_dir) BRG_TRY(resume(t, o->resume_dir));
    if (t->master != BRG_DTYPE_F32) BRG_TRY(brg_runtime_each_device(t->rt, round_masters, t));
    if (o->log_path && brg_ranks_is_host()) {
        t->log = fopen(o->log_path, t->step > 0 ? "a" : "w");
        if (!t->log) return brg_error(BRG_ERR_IO, "cannot open the log %s", o->log_path);
    }
    return start_loader(t);
}

static void teardown(trainer *t) {
    brg_data_loader_destroy(t->loader); /* first: its workers stop before anything they read goes */
    if (t->log) fclose(t->log);
    cJSON_Delete(t->log_history);
    for (int i = 0; t->optimizers && t->rt && i < brg_runtime_device_count(t->rt); i++)
        brg_optimizer_destroy(t->optimizers[i]);
    free(t->optimizers);
    brg_runtime_destroy(t->rt);
    brg_data_order_free(&t->order);
    free(t->losses);
    free(t->block_stage);
}

/* ---- one step ---- */

/* What a step measured, for the log and the progress line. */
typedef struct step_info {
    double loss, grad_norm; /* the norm of the unscaled gradients */
    float lr;
    float loss_scale; /* the step's (before a skipped step halved it) */
    bool skipped;     /* automatic loss scaling found gradients that overflowed */
} step_info;

/* The global gradient norm is taken every step, not only for clipping and the log: a NaN or inf
 * gradient can come with a finite loss, and the pass over the gradients is small beside a step. */
static brg_status grad_norm(trainer *t, double *norm) {
    double sq;
    BRG_TRY(brg_runtime_grad_sq_norm(t->rt, &sq));
    *norm = sqrt(sq);
    return BRG_OK;
}

/* Unscaling (loss scaling) and clipping in one pass over the gradients: `norm` is the unscaled
 * gradients' norm. */
static brg_status unscale_and_clip(trainer *t, double norm) {
    float coef = t->opts.max_grad_norm > 0 ? brg_clip_coef(t->opts.max_grad_norm, norm) : 1.0f;
    if (t->scaler.scale != 1.0f) coef /= t->scaler.scale;
    return coef != 1.0f ? brg_runtime_scale_grads(t->rt, coef) : BRG_OK;
}

/* printf spells NaN "nan" or "-nan" depending on its sign bit, which means nothing here. */
static const char *show(char buf[32], double v) {
    if (isnan(v)) return "NaN";
    snprintf(buf, 32, "%g", v);
    return buf;
}

/* One non-finite update turns every weight and optimizer moment it touches into NaN for good, so
 * such a step is refused before the optimizer runs: the weights and the optimizer state stay as
 * the last good step left them, and the run stops there. */
static brg_status check_finite(const trainer *t, const step_info *s) {
    if (isfinite(s->loss) && isfinite(s->grad_norm)) return BRG_OK;
    char loss[32], norm[32];
    if (t->scaler.active && isfinite(s->loss))
        return brg_error(BRG_ERR_DIVERGED,
                         "training diverged at step %lld: with the loss scaled by %g the gradients overflowed "
                         "(norm %s); the step was not applied and the run stopped (a lower --loss-scaling, or "
                         "automatic loss scaling, avoids it)",
                         (long long)t->step + 1, (double)t->scaler.scale, show(norm, s->grad_norm));
    return brg_error(BRG_ERR_DIVERGED,
                     "training diverged at step %lld: the loss is %s and the gradient norm %s; the step was not "
                     "applied and the run stopped (a lower learning rate or gradient clipping may help)",
                     (long long)t->step + 1, show(loss, s->loss), show(norm, s->grad_norm));
}

/* The step's phases on the trace's host track (the devices record their own work). */
static void trace_phase(const char *what, uint64_t t0, const trainer *t) {
    if (t0) brg_trace_named(what, t0, t->step + 1);
}

static brg_status train_step(trainer *t, step_info *s) {
    uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    const brg_step_batch *batch;
    brg_status got = brg_data_loader_next(t->loader, t->step, &batch);
    /* With workers the host only waits for a batch they prepared: the devices' wait for data. */
    trace_phase(brg_data_loader_workers(t->loader) ? "data wait" : "data", t0, t);
    BRG_TRY(got);
    uint64_t seed = t->opts.seed * 0x100000001b3ull + (uint64_t)t->step;
    t0 = t0 ? brg_trace_now() : 0;
    brg_runtime_set_loss_scale(t->rt, t->scaler.scale);
    brg_status run = brg_runtime_run(t->rt, batch->mbs, &batch->loss_items, seed, t->losses);
    brg_data_loader_release(t->loader); /* its slot can take a later step while this one ends */
    /* A half model's gradients are half too: one too large for the type overflows here. */
    if (run == BRG_OK && t->master != BRG_DTYPE_F32) run = brg_runtime_each_device(t->rt, round_grads, t);
    trace_phase("pipeline", t0, t);
    BRG_TRY(run);
    s->loss = 0;
    for (int i = 0; i < t->opts.replicas * t->opts.accumulation; i++) s->loss += t->losses[i];
    BRG_TRY(grad_norm(t, &s->grad_norm));
    s->grad_norm /= t->scaler.scale;
    s->lr = brg_lr_at(&t->opts.lr_schedule, (float)t->opts.optimizer.lr, t->step);
    s->loss_scale = t->scaler.scale;
    s->skipped = !loss_scaler_update(&t->scaler, isfinite(s->loss) && isfinite(s->grad_norm));
    if (s->skipped) { /* the weights and optimizer state stay; the next step tries a lower scale */
        BRG_TRY(brg_runtime_zero_grads(t->rt));
        t->step++;
        return BRG_OK;
    }
    BRG_TRY(check_finite(t, s));
    BRG_TRY(unscale_and_clip(t, s->grad_norm));
    step_arg arg = {t, s->lr};
    t0 = t0 ? brg_trace_now() : 0;
    brg_status stepped = brg_runtime_each_device(t->rt, optimizer_step, &arg);
    trace_phase("optimizer", t0, t);
    BRG_TRY(stepped);
    BRG_TRY(brg_runtime_zero_grads(t->rt));
    t->step++;
    return BRG_OK;
}

/* ---- reporting ---- */

static void record_optimizer_bytes(const trainer *t, brg_train_result *r);

/* JSON has no NaN or infinity (Python's json.loads and most parsers reject the tokens), so a
 * value that is not finite is written as null. */
static void json_number(FILE *f, const char *key, double v, int digits) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.*g", key, digits, v);
    else fprintf(f, ", \"%s\": null", key);
}

/* Epochs done after `step` steps, fractional (transformers' Trainer logs it so). */
static double epoch_at(const trainer *t, int64_t step) {
    return t->order.steps_per_epoch > 0 ? (double)step / (double)t->order.steps_per_epoch : 0.0;
}

/* exp(loss) for a token cross-entropy objective, NAN for any other (not reported then). */
static double perplexity(const trainer *t, double loss) {
    return t->model->ops->token_loss ? exp(loss) : NAN;
}

static void history_number(cJSON *e, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(e, key, v);
    else cJSON_AddNullToObject(e, key);
}

/* The step in log_history, with transformers' key names. */
static void remember(trainer *t, int64_t step, const step_info *s) {
    if (!t->log_history) t->log_history = cJSON_CreateArray();
    cJSON *e = t->log_history ? cJSON_CreateObject() : NULL;
    if (!e) return; /* out of memory: the history is a record, not the run */
    cJSON_AddNumberToObject(e, "step", (double)step);
    cJSON_AddNumberToObject(e, "epoch", epoch_at(t, step));
    history_number(e, "loss", s->loss);
    history_number(e, "learning_rate", (double)s->lr);
    history_number(e, "grad_norm", s->grad_norm);
    cJSON_AddItemToArray(t->log_history, e);
}

/* `error` (a constant without quotes or backslashes) marks the step that stopped the run. */
static void log_line(trainer *t, int64_t step, const step_info *s, double tokens_per_s, const char *error) {
    remember(t, step, s);
    if (!t->log) return;
    fprintf(t->log, "{\"step\": %lld", (long long)step);
    json_number(t->log, "loss", s->loss, 9);
    json_number(t->log, "lr", (double)s->lr, 9);
    json_number(t->log, "grad_norm", s->grad_norm, 9);
    json_number(t->log, "tokens_per_s", tokens_per_s, 6);
    json_number(t->log, "epoch", epoch_at(t, step), 6);
    if (t->model->ops->token_loss) json_number(t->log, "perplexity", perplexity(t, s->loss), 9);
    if (t->scaler.active) json_number(t->log, "loss_scale", (double)s->loss_scale, 17);
    if (s->skipped) fputs(", \"skipped\": true", t->log);
    if (error) fprintf(t->log, ", \"error\": \"%s\"", error);
    fputs("}\n", t->log);
    fflush(t->log);
}

static void progress_line(trainer *t, double loss, float lr, double tokens_per_s, double eta, double steps_per_s,
                          int64_t first) {
    if (t->opts.on_progress) {
        const brg_train_progress p = {t->step, t->total_steps, first, epoch_at(t, t->step), loss, perplexity(t, loss),
                                      (double)lr, tokens_per_s, steps_per_s, eta};
        t->opts.on_progress(t->opts.on_progress_ctx, &p);
        return;
    }
    FILE *f = t->opts.progress;
    if (!f) return;
    bool tty = isatty(fileno(f));
    /* A log file or pipe gets about twenty lines, a terminal one line rewritten in place. */
    int64_t every = t->total_steps >= 20 ? t->total_steps / 20 : 1;
    if (!tty && t->step % every != 0 && t->step != t->total_steps) return;
    char ppl[40] = "";
    if (t->model->ops->token_loss) snprintf(ppl, sizeof ppl, "  ppl %.4g", perplexity(t, loss));
    fprintf(f, "%sstep %lld/%lld  epoch %.2f  loss %.4f%s  lr %.3g  %.0f tokens/s  ETA %.0fs%s", tty ? "\r" : "",
            (long long)t->step, (long long)t->total_steps, epoch_at(t, t->step), loss, ppl, (double)lr, tokens_per_s,
            eta, tty ? "   " : "\n");
    fflush(f);
}

/* Ends a progress line a terminal rewrites in place, so what follows starts on a line of its own. */
static void end_progress(const trainer *t) {
    if (t->opts.progress && isatty(fileno(t->opts.progress))) fputc('\n', t->opts.progress);
}

/* output_mode decides which losses a host call (device_iterations steps) reports. */
static bool reports(const trainer *t, int64_t step_in_call, int calls_len) {
    return t->opts.output_mode == BRG_OUTPUT_MODE_ALL || step_in_call == calls_len - 1;
}

static double devices_busy(const trainer *t) {
    double busy = 0;
    for (int d = 0; d < brg_runtime_device_count(t->rt); d++) {
        brg_device_stats s;
        brg_runtime_device_stats(t->rt, d, &s);
        busy += s.busy_seconds;
    }
    return busy;
}

/* `first` is the step the run started from: a resumed run counts the steps it ran, not the
 * checkpoint's. */
static void summary(trainer *t, brg_train_result *r, double tokens, int64_t first) {
    FILE *f = t->opts.progress;
    r->tokens_per_second = r->seconds > 0 ? tokens / r->seconds : 0;
    int devices = brg_runtime_device_count(t->rt);
    double busy = devices_busy(t) - t->warm_busy;
    double sched = brg_runtime_schedule_seconds(t->rt) - t->warm_schedule;
    r->pipeline_efficiency = sched > 0 ? busy / (devices * sched) : 0;
    r->ideal_efficiency = brg_schedule_ideal_efficiency(t->opts.stages, t->opts.accumulation);
    if (!f) return;
    if (isatty(fileno(f))) fputc('\n', f);
    fprintf(f, "trained %lld steps", (long long)(r->steps - first));
    if (first > 0) fprintf(f, " (from step %lld to %lld)", (long long)first, (long long)r->steps);
    fprintf(f, " in %.1fs: %.0f tokens/s, pipeline efficiency %.0f%% (ideal %.0f%%)\n", r->seconds,
            r->tokens_per_second, 100 * r->pipeline_efficiency, 100 * r->ideal_efficiency);
    for (int d = 0; d < devices; d++) {
        brg_device_stats s;
        brg_runtime_device_stats(t->rt, d, &s);
        fprintf(f, "  device %d: busy %.0f%%, peak memory %.1f MiB (activations %.1f MiB, one micro-batch %.1f MiB)\n",
                d, r->seconds > 0 ? 100 * s.busy_seconds / r->seconds : 0, (double)s.peak_bytes / (1 << 20),
                (double)s.activation_peak_bytes / (1 << 20), (double)s.micro_batch_peak_bytes / (1 << 20));
    }
    const double packed_mib = (double)t->packed_bytes / (1 << 20);
    if (t->pack_weights)
        fprintf(f, "  packed weights: %.1f MiB on the largest device (its linear weights in bf16 panels, once a step)\n",
                packed_mib);
    else if (t->packed_bytes > 0)
        fprintf(f, "  packed weights: none (the %s had no room for their %.1f MiB)\n",
                t->opts.device_memory ? "--device-memory budget" : "machine's memory", packed_mib);
    if (sharded(t) || t->opts.optimizer_state_offchip)
        fprintf(f, "  optimizer state: %.2f MiB per device%s%s\n", (double)r->optimizer_state_bytes / (1 << 20),
                sharded(t) ? ", sharded over the replicas" : "", t->opts.optimizer_state_offchip ? ", off-chip" : "");
}

/* An evaluation in log_history, as transformers records one (eval_loss, and its perplexity or
 * a classifier's eval_accuracy, as compute_metrics names it in the example scripts). */
static void remember_eval(trainer *t, const trainer_eval *ev) {
    if (!t->log_history) t->log_history = cJSON_CreateArray();
    cJSON *e = t->log_history ? cJSON_CreateObject() : NULL;
    if (!e) return;
    cJSON_AddNumberToObject(e, "step", (double)t->step);
    cJSON_AddNumberToObject(e, "epoch", epoch_at(t, t->step));
    history_number(e, "eval_loss", ev->loss);
    if (t->model->ops->token_loss) history_number(e, "eval_perplexity", perplexity(t, ev->loss));
    if (!isnan(ev->accuracy)) history_number(e, "eval_accuracy", ev->accuracy);
    cJSON_AddItemToArray(t->log_history, e);
}

static brg_status evaluate(trainer *t, brg_train_result *r) {
    trainer_eval ev;
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    /* Evaluation computes on this thread, in the products' precision the devices train in. */
    const brg_dtype before = brg_compute_dtype_set(brg_precision_compute_dtype(t->opts.precision));
    brg_status st = trainer_evaluate(t, &ev);
    brg_compute_dtype_set(before);
    if (t0) brg_trace_named("evaluate", t0, t->step);
    BRG_TRY(st);
    r->eval_loss = ev.loss;
    r->eval_accuracy = ev.accuracy;
    remember_eval(t, &ev);
    const bool lm = t->model->ops->token_loss, classifier = !isnan(ev.accuracy);
    if (t->log) {
        fprintf(t->log, "{\"step\": %lld", (long long)t->step);
        json_number(t->log, "eval_loss", ev.loss, 9);
        if (lm) json_number(t->log, "eval_perplexity", perplexity(t, ev.loss), 9);
        if (classifier) json_number(t->log, "eval_accuracy", ev.accuracy, 9);
        fputs("}\n", t->log);
        fflush(t->log);
    }
    if (t->opts.progress) {
        char extra[48] = "";
        if (lm) snprintf(extra, sizeof extra, ", perplexity %.4g", perplexity(t, ev.loss));
        if (classifier) snprintf(extra, sizeof extra, ", accuracy %.4f", ev.accuracy);
        fprintf(t->opts.progress, "%sstep %lld: eval loss %.4f%s\n", isatty(fileno(t->opts.progress)) ? "\n" : "",
                (long long)t->step, ev.loss, extra);
    }
    return BRG_OK;
}

/* The refused step gets its line in the log (with nulls for what is not finite) before the run
 * stops, so a script reading the log sees why it ended. */
static brg_status diverged(trainer *t, const step_info *s, double tokens_per_s) {
    log_line(t, t->step + 1, s, tokens_per_s,
             isfinite(s->loss) ? "diverged: the gradient norm is not finite" : "diverged: the loss is not finite");
    end_progress(t);
    return BRG_ERR_DIVERGED;
}

static bool stop_requested(const trainer *t) { return t->opts.stop && *t->opts.stop; }

/* A stop request between steps: save what the run has so far where --save-every would. */
static brg_status interrupted(trainer *t) {
    end_progress(t);
    if (!t->opts.output_dir)
        return brg_error(BRG_ERR_INTERRUPTED, "stopped on request after step %lld of %lld", (long long)t->step,
                         (long long)t->total_steps);
    BRG_TRY(save_checkpoint(t));
    return brg_error(BRG_ERR_INTERRUPTED,
                     "stopped on request after step %lld of %lld; checkpoint written to %s/checkpoint-%lld",
                     (long long)t->step, (long long)t->total_steps, t->opts.output_dir, (long long)t->step);
}

/* What the loop counts across steps for the log, the progress line and the summary. */
typedef struct run_clock {
    double t0, tokens, call_sum, tokens_per_step;
    int64_t first; /* the step the run started from (a resumed run's checkpoint step) */
} run_clock;

static double tokens_per_second(const run_clock *c, double elapsed) {
    return c->tokens / (elapsed > 0 ? elapsed : 1e-9);
}

/* The log and progress lines of a step that was applied; output_mode decides which steps of a
 * host call (device_iterations steps) report, and whether with their loss or the call's sum. */
static void report_step(trainer *t, run_clock *c, const step_info *s, int64_t in_call, double elapsed) {
    const brg_train_options *o = &t->opts;
    c->tokens += c->tokens_per_step;
    c->call_sum += s->loss;
    if (o->on_step) o->on_step(o->on_step_ctx, t->step, s->loss, s->lr);
    double tps = tokens_per_second(c, elapsed);
    bool last_of_call = in_call == o->device_iterations - 1 || t->step == t->total_steps;
    const bool due = o->logging_steps <= 1 || t->step % o->logging_steps == 0 || t->step == t->total_steps;
    if (due && reports(t, in_call, (int)(last_of_call ? in_call + 1 : o->device_iterations))) {
        step_info shown = *s;
        if (o->output_mode == BRG_OUTPUT_MODE_SUM) shown.loss = c->call_sum;
        log_line(t, t->step, &shown, tps, NULL);
        double eta = elapsed / (double)(t->step - c->first) * (double)(t->total_steps - t->step);
        progress_line(t, shown.loss, s->lr, tps, eta, (double)(t->step - c->first) / (elapsed > 0 ? elapsed : 1e-9),
                      c->first);
    }
    if (last_of_call) c->call_sum = 0;
}

/* Evaluations and checkpoints between steps (the last step's come after the loop). */
static brg_status between_steps(trainer *t, brg_train_result *r) {
    const brg_train_options *o = &t->opts;
    if (t->step >= t->total_steps) return BRG_OK;
    if (o->eval_data && o->eval_every > 0 && t->step % o->eval_every == 0) BRG_TRY(evaluate(t, r));
    if (o->output_dir && o->save_every > 0 && t->step % o->save_every == 0) BRG_TRY(save_checkpoint(t));
    return BRG_OK;
}

static brg_status loop(trainer *t, brg_train_result *r) {
    const brg_train_options *o = &t->opts;
    /* Tokens for text, samples for images. */
    int64_t per_row = t->data->seq_len > 0 ? t->data->seq_len : 1;
    run_clock c = {.t0 = now_seconds(), .first = t->step,
                   .tokens_per_step = (double)(o->micro_batch * o->accumulation * o->replicas * per_row)};
    while (t->step < t->total_steps) {
        r->steps = t->step;
        r->seconds = now_seconds() - c.t0;
        bool stop = stop_requested(t);
        BRG_TRY(brg_runtime_host_flag(t->rt, &stop)); /* across ranks, rank 0's request: all stop at one step */
        if (stop) return interrupted(t);
        int64_t in_call = (t->step - c.first) % o->device_iterations;
        step_info s;
        const uint64_t t_step = brg_trace_enabled() ? brg_trace_now() : 0;
        const int64_t number = t->step + 1;
        brg_status st = train_step(t, &s);
        if (t_step) brg_trace_named("step", t_step, number);
        double elapsed = now_seconds() - c.t0;
        if (st == BRG_ERR_DIVERGED) return diverged(t, &s, tokens_per_second(&c, elapsed));
        BRG_TRY(st);
        /* The first step also pays for first touches of activation memory (page faults on one
         * device hold up the others), which later steps reuse: with more steps to come, the
         * pipeline efficiency counts those only. */
        if (t->step == c.first + 1 && t->step < t->total_steps) {
            t->warm_busy = devices_busy(t);
            t->warm_schedule = brg_runtime_schedule_seconds(t->rt);
        }
        r->last_loss = s.loss;
        report_step(t, &c, &s, in_call, elapsed);
        BRG_TRY(between_steps(t, r));
    }
    r->steps = t->step;
    r->seconds = now_seconds() - c.t0;
    if (o->eval_data) BRG_TRY(evaluate(t, r));
    /* The last step's checkpoint (for --resume), then the final model in output_dir itself, as
     * transformers' Trainer leaves it. */
    if (o->output_dir) {
        BRG_TRY(save_checkpoint(t));
        if (brg_ranks_is_host()) BRG_TRY(brg_model_save_as(t->model, o->output_dir, t->master));
    }
    record_optimizer_bytes(t, r);
    summary(t, r, c.tokens, c.first);
    return BRG_OK;
}

static void record_optimizer_bytes(const trainer *t, brg_train_result *r) {
    r->optimizer_state_offchip = t->opts.optimizer_state_offchip;
    for (int d = 0; t->optimizers && t->rt && d < brg_runtime_device_count(t->rt); d++) {
        /* NULL: another rank's device */
        const size_t bytes = t->optimizers[d] ? brg_optimizer_state_bytes(t->optimizers[d]) : 0;
        if (bytes > r->optimizer_state_bytes) r->optimizer_state_bytes = bytes;
    }
}

static void record_peaks(const trainer *t, brg_train_result *r) {
    for (int d = 0; t->rt && d < brg_runtime_device_count(t->rt); d++) {
        brg_device_stats s;
        brg_runtime_device_stats(t->rt, d, &s);
        int stage = d % t->opts.stages;
        if (stage < BRG_TRAIN_MAX_STAGES && s.peak_bytes > r->stage_peak_bytes[stage]) r->stage_peak_bytes[stage] = s.peak_bytes;
        if (stage < BRG_TRAIN_MAX_STAGES && s.activation_peak_bytes > r->stage_activation_bytes[stage])
            r->stage_activation_bytes[stage] = s.activation_peak_bytes;
        if (stage < BRG_TRAIN_MAX_STAGES && s.micro_batch_peak_bytes > r->stage_micro_batch_bytes[stage])
            r->stage_micro_batch_bytes[stage] = s.micro_batch_peak_bytes;
    }
}

brg_status brg_train(brg_model *model, const brg_dataset *data, const brg_train_options *opts,
                     brg_train_result *result) {
    BRG_TRY(check_options(opts, data));
    if (data->seq_len > model->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "dataset rows of %lld tokens exceed the model's %lld positions",
                         (long long)data->seq_len, (long long)model->max_positions);
    trainer t = {.model = model, .data = data, .opts = *opts};
    brg_train_result r = {.eval_loss = NAN, .eval_accuracy = NAN};
    brg_status st = setup(&t);
    if (st == BRG_OK) st = loop(&t, &r);
    /* A refused or interrupted step left the devices' weights as the last applied step did. */
    record_peaks(&t, &r);
    record_optimizer_bytes(&t, &r);
    if (st == BRG_OK || st == BRG_ERR_DIVERGED || st == BRG_ERR_INTERRUPTED) {
        brg_status synced = brg_runtime_sync_to_model(t.rt);
        if (st == BRG_OK) st = synced;
    }
    teardown(&t);
    if (result) *result = r;
    return st;
}
