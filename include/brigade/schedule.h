/* Pipeline schedules as data: for each stage, the ordered list of (forward | backward,
 * micro-batch) steps it runs within one optimizer step. */
#ifndef BRIGADE_SCHEDULE_H
#define BRIGADE_SCHEDULE_H

#include <stdbool.h>
#include <stdio.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_schedule_kind {
    BRG_SCHEDULE_GPIPE = 0,  /* fill-drain: every forward, then every backward */
    BRG_SCHEDULE_1F1B,       /* warm-up forwards, then one forward / one backward, then drain */
    BRG_SCHEDULE_INFERENCE,  /* forwards only */
} brg_schedule_kind;

typedef enum brg_pass { BRG_PASS_FORWARD = 0, BRG_PASS_BACKWARD = 1 } brg_pass;

typedef struct brg_schedule_step {
    brg_pass pass;
    int micro_batch;
} brg_schedule_step;

typedef struct brg_schedule {
    brg_schedule_kind kind;
    int stages;
    int micro_batches;
    int *length;              /* steps per stage */
    brg_schedule_step **steps; /* steps[stage][i] */
} brg_schedule;

brg_status brg_schedule_build(brg_schedule_kind kind, int stages, int micro_batches, brg_schedule *out);
void brg_schedule_free(brg_schedule *s);

brg_status brg_schedule_kind_parse(const char *name, brg_schedule_kind *out);
const char *brg_schedule_kind_name(brg_schedule_kind kind);

/* Most micro-batches whose activations a stage holds at once (forwarded, not yet backwarded). */
int brg_schedule_max_in_flight(const brg_schedule *s, int stage);

/* Simulates the schedule with unit-time forward and backward steps, honouring the dependencies
 * between stages (F(m) on stage s after F(m) on s-1; B(m) on s after B(m) on s+1, and after
 * F(m) on s). Returns the number of time slots; fails on a schedule that deadlocks. */
brg_status brg_schedule_simulate(const brg_schedule *s, int *slots);

/* The ideal efficiency m / (m + p - 1). */
double brg_schedule_ideal_efficiency(int stages, int micro_batches);

/* Prints the table: one row per stage, its steps in order ("F0 F1 B0 ..."). */
void brg_schedule_print(const brg_schedule *s, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
