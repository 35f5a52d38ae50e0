/* Weights, gradients and optimizer state held in a half type (the .16 precision modes): values
 * stay in fp32 buffers, rounded to what the half type can hold, so every kernel reads them as
 * it reads fp32 and a .16 run computes what a model cast to half would (internal to the trainer). */
#ifndef BRIGADE_TRAIN_HALF_MASTERS_H
#define BRIGADE_TRAIN_HALF_MASTERS_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/optim.h"
#include "brigade/runtime.h"

/* Rounds x[0..n) in place to the nearest `type` value (F16 or BF16; ties to even; overflow to
 * inf, NaN kept). */
void half_round(brg_dtype type, float *x, int64_t n);

/* Rounds x[0..n) in place to one of the two `type` values around each element, the upper with
 * probability its distance below it over the gap (unbiased), drawing from (seed, stream,
 * element index) alone so the result does not depend on how the elements are split. */
void half_round_stochastic(brg_dtype type, float *x, int64_t n, uint64_t seed, uint64_t stream);

/* How a device rounds what it holds. */
typedef struct half_rounding {
    brg_dtype type;  /* F16 or BF16 */
    bool stochastic; /* the weights (optimizer state always rounds to nearest) */
    uint64_t seed;   /* the run's seed and step: weights get the same draws on every device */
} half_rounding;

/* The device's weights (each of its parameters once) and its optimizer's state. */
void half_round_device(brg_device *dev, brg_optimizer *opt, const half_rounding *r);
/* The device's gradients, to nearest: a gradient too large for the type becomes inf, as it does
 * in a half model (what loss scaling watches for). */
void half_round_device_grads(brg_device *dev, brg_dtype type);

#endif
