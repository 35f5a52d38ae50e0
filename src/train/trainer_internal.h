/* Trainer state shared by trainer.c and train_checkpoint.c. */
#ifndef BRIGADE_TRAINER_INTERNAL_H
#define BRIGADE_TRAINER_INTERNAL_H

#include <cJSON.h>

#include "brigade/data_loader.h"
#include "brigade/trainer.h"
#include "loss_scale.h"

typedef struct trainer {
    brg_model *model;
    const brg_dataset *data;
    brg_train_options opts;
    brg_runtime *rt;
    brg_optimizer **optimizers; /* one per device */
    int *block_stage;
    brg_data_order order;
    brg_data_loader *loader; /* the steps' batches, in order from the run's first step */
    float *losses;
    int64_t total_steps, step;
    /* opts.lr_schedule.total_steps was the caller's (else the run's length, or on resume the
     * original run's schedule length) */
    bool schedule_given;
    FILE *log;
    /* Every logged step as transformers' Trainer keeps it ({"step", "epoch", "loss",
     * "learning_rate", "grad_norm"}), saved in trainer_state.json and restored on resume. */
    cJSON *log_history;
    /* Devices' busy seconds and schedule wall seconds after the first step of the run: the
     * pipeline efficiency is counted from there on (see loop()). */
    double warm_busy, warm_schedule;
    /* precision: the master type (F32, or F16/BF16 for the .16 modes), whether half weight
     * updates round stochastically, and the loss scale (saved in trainer_state.json) */
    brg_dtype master;
    bool stochastic_rounding;
    loss_scaler scaler;
    bool pack_weights; /* the devices pack their weights once a step (the memory plan has room) */
    /* The most a device packs (the plan's bytes); without pack_weights, what the panels would have
     * taken where the plan had no room for them (0: nothing to pack) */
    int64_t packed_bytes;
} trainer;

/* Writes OUT/config.json, model.safetensors, optimizer.safetensors, trainer_state.json; with dir
 * NULL (a rank other than the host's) takes part in the exchanges and writes nothing. */
brg_status trainer_save(trainer *t, const char *dir);
/* Fails when a device's planned memory exceeds opts.device_memory, or (without a budget) when
 * all the devices' plans together exceed the machine's memory. */
brg_status trainer_check_budget(trainer *t);
/* Creates opts.output_dir and fails unless it can hold the run's checkpoints (preflight.c). */
brg_status trainer_check_output(trainer *t);
/* What an evaluation of opts.eval_data under the current weights measured: the mean loss and,
 * for a classifier (one class id per example, logits [B, classes]), the share of examples whose
 * highest logit is their label (NAN for other models). */
typedef struct trainer_eval {
    double loss, accuracy;
} trainer_eval;
brg_status trainer_evaluate(trainer *t, trainer_eval *out);
/* Restores weights, optimizer state and the step from a checkpoint folder. */
brg_status trainer_resume(trainer *t, const char *dir);

#endif
