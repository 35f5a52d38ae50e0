/* Loss scaling. The automatic scaler is PyTorch's GradScaler: start at 2^16, halve and skip the
 * step when a gradient overflows, double after `interval` clean steps in a row. */
#include "loss_scale.h"

#include <math.h>

#define DEFAULT_INITIAL_SCALE 65536.0f
#define DEFAULT_INTERVAL 2000

brg_status loss_scaler_init(loss_scaler *s, const brg_train_options *o) {
    if (o->loss_scaling < 0 || !isfinite(o->loss_scaling))
        return brg_error(BRG_ERR_INVALID_ARG, "the loss scale must be a positive number (got %g)", (double)o->loss_scaling);
    if (o->loss_scaling_interval < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "the loss scaling interval must be at least 1 step (got %lld)",
                         (long long)o->loss_scaling_interval);
    *s = (loss_scaler){.scale = 1.0f, .automatic = o->auto_loss_scaling};
    s->interval = o->loss_scaling_interval ? o->loss_scaling_interval : DEFAULT_INTERVAL;
    if (o->auto_loss_scaling) s->scale = o->loss_scaling > 0 ? o->loss_scaling : DEFAULT_INITIAL_SCALE;
    else if (o->loss_scaling > 0) s->scale = o->loss_scaling;
    s->active = o->auto_loss_scaling || o->loss_scaling > 0;
    return BRG_OK;
}

bool loss_scaler_update(loss_scaler *s, bool finite) {
    if (!s->automatic) return true;
    if (!finite) {
        s->scale *= 0.5f;
        s->clean = 0;
        s->skipped++;
        return false;
    }
    if (++s->clean >= s->interval) {
        const float grown = s->scale * 2.0f;
        if (isfinite(grown)) s->scale = grown; /* GradScaler keeps a scale that would overflow */
        s->clean = 0;
    }
    return true;
}
