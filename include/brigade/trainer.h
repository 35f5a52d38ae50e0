/* The trainer: steps of micro-batches through the runtime, gradient clipping, an optimizer per
 * device, LR schedules, JSON-lines logs, checkpoints and exact resume. */
#ifndef BRIGADE_TRAINER_H
#define BRIGADE_TRAINER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "brigade/dataset.h"
#include "brigade/ipu_config.h"
#include "brigade/lr_schedule.h"
#include "brigade/optim.h"
#include "brigade/precision.h"
#include "brigade/placement.h"
#include "brigade/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a progress line shows. */
typedef struct brg_train_progress {
    int64_t step, total_steps, first_step; /* first_step: where this run started (resume) */
    double epoch, loss, perplexity;         /* perplexity: NAN unless a language-model objective */
    double lr, tokens_per_s, steps_per_s, eta_seconds;
} brg_train_progress;

typedef struct brg_train_options {
    /* placement and batching (from the IPUConfig's training view) */
    int replicas, stages, accumulation, device_iterations;
    const int *block_stage; /* per model block; NULL puts every block on stage 0 */
    brg_schedule_kind schedule;
    size_t device_memory;
    bool recompute;
    bool pin_threads; /* pin each device's thread to a core */
    int intra_threads; /* threads per device for matrix products (default 1) */
    /* which losses a host call (device_iterations steps) reports: ALL every step, SUM their
     * sum, FINAL and DEFAULT the last step's */
    brg_output_mode output_mode;
    /* data */
    int64_t micro_batch;
    int64_t steps; /* optimizer steps; 0: from epochs */
    double epochs;
    bool shuffle;
    uint64_t seed;
    /* Background threads that prepare the next steps' batches while the devices compute, at most
     * device_iterations steps ahead (brigade/data_loader.h); 0: each step's batch is filled on the
     * calling thread before it runs. The batches, and so the run, are the same either way. */
    int dataloader_workers;
    /* optimisation */
    brg_optimizer_config optimizer; /* optimizer.lr is the base learning rate */
    brg_lr_schedule lr_schedule;    /* total_steps 0: the run's total */
    float max_grad_norm;            /* 0: no clipping */
    /* ZeRO-1 (the IPUConfig's replicated_tensor_sharding; with replicas > 1): each replica keeps
     * the optimizer state of its shard of every parameter only (brg_shard_range); the gradients
     * are reduce-scattered so it sums that shard only, updates it and sends it to the other
     * copies: the same weights with 1/replicas of the state. */
    bool shard_optimizer_state;
    /* optimizer_state_offchip: the state lives outside the device arenas (host memory), outside
     * the device budget and the plan's total. */
    bool optimizer_state_offchip;
    /* precision (brigade/precision.h): products in the compute type, weights, gradients and
     * optimizer state in the master type */
    brg_precision precision;
    /* Loss scaling: the loss is multiplied by the scale before backward and the gradients divided
     * by it before clipping and the update. 0: none (a scale of 1). With auto_loss_scaling the
     * starting scale (0: 65536), which halves and skips the step when a gradient is not finite
     * and doubles after loss_scaling_interval finite steps in a row (PyTorch's GradScaler). */
    float loss_scaling;
    bool auto_loss_scaling;
    int64_t loss_scaling_interval; /* 0: 2000 */
    /* Round half weight updates stochastically (seeded by seed, step and element, so runs
     * reproduce and every placement agrees): -1 (default) on for .16 modes, 0 off, 1 on. */
    int stochastic_rounding;
    /* output */
    /* NULL: no checkpoints. Checkpoints go to output_dir/checkpoint-N/ (each written whole under
     * a temporary name, then renamed), the final model to output_dir itself. */
    const char *output_dir;
    int64_t save_every;      /* 0: only at the end */
    int save_total_limit;    /* keep the newest this many checkpoint-N folders; 0: all */
    /* output_dir may hold files brigade did not write (refused before the first step otherwise) */
    bool overwrite_output;
    const brg_ipu_config *ipu_config; /* saved as ipu_config.json in every checkpoint; NULL: none */
    const char *log_path;   /* JSON lines; NULL: none */
    int64_t logging_steps;  /* log and show progress every this many steps (and the last); 0: every step */
    /* continue from a checkpoint: a checkpoint folder, or an output_dir whose newest complete
     * checkpoint-N is taken */
    const char *resume_dir;
    FILE *progress;         /* progress and summary lines; NULL: quiet */
    const brg_dataset *eval_data; /* evaluated every eval_every steps and at the end; NULL: none */
    int64_t eval_every;
    /* Checked before every step: once it holds a non-zero value (a signal handler may set it),
     * the trainer stops after the step in progress, writes a checkpoint to output_dir and
     * returns BRG_ERR_INTERRUPTED. NULL: never stops early. */
    const volatile sig_atomic_t *stop;
    /* called after every step with the step's loss (mean over the global batch) */
    void (*on_step)(void *ctx, int64_t step, double loss, float lr);
    void *on_step_ctx;
    /* Called where a progress line would go on `progress` (a terminal's bar, say), instead of
     * that line; the evaluation lines and the summary still go to `progress`. NULL: lines. */
    void (*on_progress)(void *ctx, const brg_train_progress *p);
    void *on_progress_ctx;
} brg_train_options;


/* Defaults: one device, 1F1B, AdamW at 5e-5 with weight decay 0, linear schedule, shuffle on. */
void brg_train_options_default(brg_train_options *o);

#define BRG_TRAIN_MAX_STAGES 64

/* The placement and batching fields from the IPUConfig's training view, for a model that
 * brg_model_parallelize placed in training mode: replicas (replication_factor), stages and
 * block_stage (the placement's; borrowed: pl must outlive the options), accumulation
 * (gradient_accumulation_steps), device_iterations, output_mode, recompute
 * (recompute_checkpoint_every_layer), ipu_config = cfg (saved with every checkpoint) and, when the
 * IPUConfig has a seed, seed. Every other field is left as it was (brg_train_options_default
 * first). */
brg_status brg_train_options_from_ipu_config(const brg_ipu_config *cfg, const brg_placement *pl,
                                             brg_train_options *o);

typedef struct brg_train_result {
    int64_t steps;     /* global step reached */
    double last_loss;
    double eval_loss; /* the last evaluation's mean loss (NAN when none ran) */
    /* the last evaluation's accuracy for a classifier (labels one class id per example), the
     * share of examples whose highest logit is their label; NAN for other models or none run */
    double eval_accuracy;
    double seconds;
    double tokens_per_second;
    /* Forward/backward busy time over devices x schedule wall time, counted from the second
     * step when there is more than one (the first pays for first touches of memory). */
    double pipeline_efficiency;
    double ideal_efficiency;    /* m / (m + p - 1) */
    /* The most memory a device of each stage held at once (the largest over the replicas), as its
     * arena counted it: parameters, gradients, optimizer state, activations and kernel scratch;
     * for stages [0, BRG_TRAIN_MAX_STAGES). brg_train_plan_memory estimates the same bytes. */
    size_t stage_peak_bytes[BRG_TRAIN_MAX_STAGES];
    /* Of that, what a run's micro-batches added at their peak above the state the device holds
     * throughout: activations, their gradients, stage inputs and kernel scratch (the "activations"
     * of train's summary). */
    size_t stage_activation_bytes[BRG_TRAIN_MAX_STAGES];
    /* The most one micro-batch held on a device of each stage: its activations, their gradients
     * and its stage inputs, kernel scratch apart (brg_device_stats.micro_batch_peak_bytes; about
     * half of fp32's in the .16 modes, which hold activations and their gradients in half). */
    size_t stage_micro_batch_bytes[BRG_TRAIN_MAX_STAGES];
    /* The most optimizer state any device held (bytes; sharded, 1/replicas of it) and whether it
     * was off the device arenas (optimizer_state_offchip). */
    size_t optimizer_state_bytes;
    bool optimizer_state_offchip;
} brg_train_result;

/* The memory each device of a replica will need at its peak for this run ([opts->stages]): the
 * plan brigade plan prints, for opts' micro-batch size, data's sequence length, stages and
 * block_stage (NULL: all on stage 0), schedule and micro-batches in flight, recomputation and
 * optimizer. brg_train refuses a run whose plan exceeds opts->device_memory before the first
 * step; brg_train_result.stage_peak_bytes is what the run measured. */
brg_status brg_train_plan_memory(const brg_model *model, const brg_dataset *data, const brg_train_options *opts,
                                 brg_device_plan *out);

/* Trains `model` on `data`; on return the model holds the weights of the last applied step.
 * A step whose loss or global gradient norm is not finite (NaN, inf) is not applied: the run
 * stops with BRG_ERR_DIVERGED, naming the step, the weights and optimizer state as the step
 * before left them, and the JSON log's line for that step carrying an "error" field. A stop
 * request (opts->stop) ends it with BRG_ERR_INTERRUPTED after a checkpoint. In both cases
 * result->steps is the last step applied. */
brg_status brg_train(brg_model *model, const brg_dataset *data, const brg_train_options *opts,
                     brg_train_result *result);

#ifdef __cplusplus
}
#endif
#endif
