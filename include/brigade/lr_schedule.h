/* Learning-rate schedules, as transformers' optimization.py defines them.
 *
 * The lr of optimizer step k (0-based: k steps have been taken before it) is base_lr * lambda(k),
 * as torch's LambdaLR applies transformers' lambdas when the scheduler is stepped once per
 * optimizer step:
 *
 *   CONSTANT              1
 *   CONSTANT_WITH_WARMUP  k < W ? k / max(1, W) : 1
 *   LINEAR                k < W ? k / max(1, W) : max(0, (T - k) / max(1, T - W))
 *   COSINE                k < W ? k / max(1, W)
 *                         : max(0, 0.5 * (1 + cos(pi * 0.5 * 2 * (k - W) / max(1, T - W))))
 *
 * with W = warmup_steps and T = total_steps (num_training_steps). COSINE is
 * get_cosine_schedule_with_warmup with num_cycles 0.5: past T the cosine rises again, as there.
 * CONSTANT ignores W and T; CONSTANT_WITH_WARMUP ignores T. */
#ifndef BRIGADE_LR_SCHEDULE_H
#define BRIGADE_LR_SCHEDULE_H

#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_lr_schedule_kind {
    BRG_LR_SCHEDULE_CONSTANT = 0,
    BRG_LR_SCHEDULE_CONSTANT_WITH_WARMUP,
    BRG_LR_SCHEDULE_LINEAR,
    BRG_LR_SCHEDULE_COSINE,
    BRG_LR_SCHEDULE_KIND_COUNT
} brg_lr_schedule_kind;

typedef struct brg_lr_schedule {
    brg_lr_schedule_kind kind;
    int64_t warmup_steps; /* >= 0 */
    int64_t total_steps;  /* >= 0 */
} brg_lr_schedule;

/* transformers' lr_scheduler_type names: "constant", "constant_with_warmup", "linear",
 * "cosine". Other transformers schedules ("cosine_with_restarts", "polynomial", ...) are
 * BRG_ERR_UNSUPPORTED and anything else BRG_ERR_INVALID_ARG, both naming the value. */
brg_status brg_lr_schedule_kind_parse(const char *name, brg_lr_schedule_kind *out);
const char *brg_lr_schedule_kind_name(brg_lr_schedule_kind kind);

/* Checks the kind and that warmup_steps and total_steps are >= 0; the message names the field. */
brg_status brg_lr_schedule_validate(const brg_lr_schedule *s);

/* lambda(step) in double, exactly as transformers' Python computes it. step >= 0 and a valid
 * schedule are the caller's contract (checked by an assert). */
double brg_lr_lambda(const brg_lr_schedule *s, int64_t step);

/* base_lr * lambda(step), computed in double and rounded once to float. */
float brg_lr_at(const brg_lr_schedule *s, float base_lr, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
