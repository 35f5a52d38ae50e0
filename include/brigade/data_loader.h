/* The host data loader: whole steps (micro x accumulation x replicas rows, PopTorch's combined
 * batch) prepared in order, on the caller's thread or ahead of it by background workers, as
 * PopTorch's DataLoader with an AsynchronousDataAccessor keeps the devices fed.
 *
 * A step's batch depends only on the dataset, the order's seed and the step (rows from
 * brg_data_order, masked-LM masks from (seed, epoch, row)), never on which thread prepared it or
 * when: a run reads the same batches with any number of workers. */
#ifndef BRIGADE_DATA_LOADER_H
#define BRIGADE_DATA_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_DATA_LOADER_MAX_WORKERS 64

typedef struct brg_data_loader_options {
    int workers;  /* background threads; 0: each step is filled on the caller's thread when asked */
    int prefetch; /* steps prepared ahead of the one in use (device_iterations; at least 1) */
    int replicas, accumulation;
    int64_t micro;
    bool shuffle;
    uint64_t seed;
    /* the steps the run reads, in order: [first_step, end_step) */
    int64_t first_step, end_step;
} brg_data_loader_options;

typedef struct brg_data_loader brg_data_loader;

/* Checks the options (workers in [0, BRG_DATA_LOADER_MAX_WORKERS], a step that fits the dataset)
 * and starts the workers, which begin on first_step at once. `d` and `model` must outlive the
 * loader; the model is only read (its vocabulary and loss-item rule). */
brg_status brg_data_loader_create(const brg_dataset *d, const brg_model *model, const brg_data_loader_options *o,
                                  brg_data_loader **out);
/* Stops the workers (waking any that wait for a free slot; one filling a step finishes it) and
 * frees everything; NULL is a no-op. */
void brg_data_loader_destroy(brg_data_loader *l);

/* The batch of `step`, which must be the step after the previous call's (first_step at first),
 * waiting for it when a worker is still preparing it. It stays valid until
 * brg_data_loader_release or the next call. A row that cannot be used (a token outside the
 * model's vocabulary) fails the step with the same message with or without workers. */
brg_status brg_data_loader_next(brg_data_loader *l, int64_t step, const brg_step_batch **out);
/* Hands the batch of the last brg_data_loader_next back, so a worker can fill its slot with a
 * later step; the next call does it too. */
void brg_data_loader_release(brg_data_loader *l);
int brg_data_loader_workers(const brg_data_loader *l);

#ifdef __cplusplus
}
#endif
#endif
