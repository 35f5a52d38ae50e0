/* The memory check that runs before any training: each device's estimated need (from the same
 * plan `brigade plan` prints) against its budget, so a budget that is too small fails up front
 * with the device and the bytes, not on some later step. */
#include <stdlib.h>

#include "brigade/registry.h"
#include "trainer_internal.h"

static void format_bytes(double n, char *buf, size_t len) {
    if (n >= 1 << 30) snprintf(buf, len, "%.2f GiB", n / (1 << 30));
    else if (n >= 1 << 20) snprintf(buf, len, "%.2f MiB", n / (1 << 20));
    else snprintf(buf, len, "%.0f bytes", n);
}

/* 1F1B keeps up to stages - stage micro-batches in flight on a stage; GPipe all of them. */
static int in_flight(const brg_train_options *o, int stage) {
    int m = o->accumulation;
    if (o->schedule == BRG_SCHEDULE_GPIPE) return m;
    return o->stages - stage < m ? o->stages - stage : m;
}

static brg_status check_device(const brg_train_options *o, const brg_device_plan *d) {
    double act = (double)d->activation_bytes * in_flight(o, d->id);
    double need = (double)(d->weight_bytes + d->gradient_bytes + d->optimizer_bytes) + act;
    if (need <= (double)o->device_memory) return BRG_OK;
    char total[32], budget[32], w[32], a[32];
    format_bytes(need, total, sizeof total);
    format_bytes((double)o->device_memory, budget, sizeof budget);
    format_bytes((double)(d->weight_bytes + d->gradient_bytes + d->optimizer_bytes), w, sizeof w);
    format_bytes(act, a, sizeof a);
    return brg_error(BRG_ERR_OOM,
                     "device %d (stage %d of every replica) needs about %s (%.0f bytes: %s of weights, gradients and "
                     "optimizer state, %s of activations for %d micro-batches in flight) but its budget is %s",
                     d->id, d->id, total, need, w, a, in_flight(o, d->id), budget);
}

brg_status trainer_check_budget(trainer *t) {
    const brg_train_options *o = &t->opts;
    if (!o->device_memory) return BRG_OK;
    int n = t->model->n_blocks;
    brg_block_cost *costs = calloc((size_t)n, sizeof *costs);
    brg_device_plan *plans = calloc((size_t)o->stages, sizeof *plans);
    brg_status st = costs && plans ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the memory plan");
    if (st == BRG_OK) st = brg_model_block_costs(t->model, o->micro_batch, t->data->seq_len, costs);
    if (st == BRG_OK)
        st = brg_plan_devices(costs, n, t->block_stage, o->stages, BRG_IPU_MODE_TRAINING, o->recompute, plans);
    for (int d = 0; st == BRG_OK && d < o->stages; d++) st = check_device(o, &plans[d]);
    free(costs);
    free(plans);
    return st;
}
