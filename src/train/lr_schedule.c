/* Learning-rate schedules: transformers' lambdas, evaluated in double in the same order of
 * operations as the Python, so the lr matches to the last bit before the final rounding. */
#include "brigade/lr_schedule.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[BRG_LR_SCHEDULE_KIND_COUNT] = {
    [BRG_LR_SCHEDULE_CONSTANT] = "constant",
    [BRG_LR_SCHEDULE_CONSTANT_WITH_WARMUP] = "constant_with_warmup",
    [BRG_LR_SCHEDULE_LINEAR] = "linear",
    [BRG_LR_SCHEDULE_COSINE] = "cosine",
};

/* transformers' SchedulerType values brigade does not implement: named as unsupported rather
 * than unknown, so a config written for transformers gets an honest message. */
static const char *const unsupported_names[] = {
    "cosine_with_restarts", "polynomial",  "inverse_sqrt",        "reduce_lr_on_plateau",
    "cosine_with_min_lr",   "cosine_warmup_with_min_lr", "warmup_stable_decay", "greedy",
};

const char *brg_lr_schedule_kind_name(brg_lr_schedule_kind kind) {
    if ((int)kind < 0 || kind >= BRG_LR_SCHEDULE_KIND_COUNT) return "unknown";
    return kind_names[kind];
}

brg_status brg_lr_schedule_kind_parse(const char *name, brg_lr_schedule_kind *out) {
    if (!name) return brg_error(BRG_ERR_INVALID_ARG, "lr schedule: no name given");
    for (int k = 0; k < BRG_LR_SCHEDULE_KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (brg_lr_schedule_kind)k;
            return BRG_OK;
        }
    }
    for (size_t i = 0; i < sizeof unsupported_names / sizeof unsupported_names[0]; i++) {
        if (strcmp(name, unsupported_names[i]) == 0)
            return brg_error(BRG_ERR_UNSUPPORTED,
                             "lr schedule '%s' is not implemented; use one of: constant, "
                             "constant_with_warmup, linear, cosine",
                             name);
    }
    return brg_error(BRG_ERR_INVALID_ARG,
                     "unknown lr schedule '%s'; expected one of: constant, constant_with_warmup, "
                     "linear, cosine",
                     name);
}

brg_status brg_lr_schedule_validate(const brg_lr_schedule *s) {
    if ((int)s->kind < 0 || s->kind >= BRG_LR_SCHEDULE_KIND_COUNT)
        return brg_error(BRG_ERR_INVALID_ARG, "lr schedule: kind %d is not a schedule", (int)s->kind);
    if (s->warmup_steps < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "lr schedule %s: warmup_steps must be >= 0 (got %lld)",
                         kind_names[s->kind], (long long)s->warmup_steps);
    if (s->total_steps < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "lr schedule %s: total_steps must be >= 0 (got %lld)",
                         kind_names[s->kind], (long long)s->total_steps);
    return BRG_OK;
}

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

static double warmup_lambda(int64_t step, int64_t warmup) {
    return (double)step / (double)max_i64(1, warmup);
}

static double linear_lambda(int64_t step, int64_t total, int64_t warmup) {
    double v = (double)(total - step) / (double)max_i64(1, total - warmup);
    return v > 0.0 ? v : 0.0;
}

static double cosine_lambda(int64_t step, int64_t total, int64_t warmup) {
    const double num_cycles = 0.5;
    double progress = (double)(step - warmup) / (double)max_i64(1, total - warmup);
    double v = 0.5 * (1.0 + cos(M_PI * num_cycles * 2.0 * progress));
    return v > 0.0 ? v : 0.0;
}

double brg_lr_lambda(const brg_lr_schedule *s, int64_t step) {
    BRG_ASSERT(s != NULL && step >= 0);
    BRG_ASSERT((int)s->kind >= 0 && s->kind < BRG_LR_SCHEDULE_KIND_COUNT);
    if (s->kind == BRG_LR_SCHEDULE_CONSTANT) return 1.0;
    if (step < s->warmup_steps) return warmup_lambda(step, s->warmup_steps);
    switch (s->kind) {
    case BRG_LR_SCHEDULE_LINEAR: return linear_lambda(step, s->total_steps, s->warmup_steps);
    case BRG_LR_SCHEDULE_COSINE: return cosine_lambda(step, s->total_steps, s->warmup_steps);
    default: return 1.0;
    }
}

float brg_lr_at(const brg_lr_schedule *s, float base_lr, int64_t step) {
    return (float)((double)base_lr * brg_lr_lambda(s, step));
}
