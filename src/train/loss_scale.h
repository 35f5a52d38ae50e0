/* Loss scaling: static, or automatic as PyTorch's GradScaler (internal to the trainer). */
#ifndef BRIGADE_TRAIN_LOSS_SCALE_H
#define BRIGADE_TRAIN_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/trainer.h"

typedef struct loss_scaler {
    float scale;       /* what the loss is multiplied by before backward (1: no scaling) */
    bool active;       /* scaling was asked for (static or automatic) */
    bool automatic;
    int64_t interval;  /* finite steps in a row before the scale doubles */
    int64_t clean;     /* finite steps since the last change */
    int64_t skipped;   /* steps skipped so far (the optimizer's own step count is that much behind) */
} loss_scaler;

/* From the options: loss_scaling (0: none), auto_loss_scaling, loss_scaling_interval. */
brg_status loss_scaler_init(loss_scaler *s, const brg_train_options *o);

/* After a step's gradients: true when the step is applied. A step with gradients that are not
 * finite is skipped under automatic scaling (the scale halves); otherwise it is applied (or
 * refused by the caller). A run of `interval` applied steps doubles the scale. */
bool loss_scaler_update(loss_scaler *s, bool finite);

#endif
