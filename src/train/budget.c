/* The memory check that runs before any training: each device's estimated need (from the same
 * plan `brigade plan` prints) against its budget, or without budgets all of them against the
 * machine's memory, so a run that cannot fit fails up front with the bytes, not on some later
 * step. */
#include <stdlib.h>
#include <unistd.h>

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

static double device_need(const brg_train_options *o, const brg_device_plan *d) {
    return (double)(d->weight_bytes + d->gradient_bytes + d->optimizer_bytes) +
           (double)d->activation_bytes * in_flight(o, d->id);
}

static brg_status check_device(const brg_train_options *o, const brg_device_plan *d) {
    double act = (double)d->activation_bytes * in_flight(o, d->id);
    double need = device_need(o, d);
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

/* Without a budget the devices share the machine's memory: all replicas of all stages together
 * must fit in it (a replication_factor of 100000 must not start and grow until the system kills
 * it). */
static brg_status check_machine(const brg_train_options *o, const brg_device_plan *plans) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return BRG_OK;
    double per_replica = 0;
    for (int d = 0; d < o->stages; d++) per_replica += device_need(o, &plans[d]);
    const double need = per_replica * o->replicas, have = (double)pages * (double)page;
    if (need <= have) return BRG_OK;
    char n[32], r[32], h[32];
    format_bytes(need, n, sizeof n);
    format_bytes(per_replica, r, sizeof r);
    format_bytes(have, h, sizeof h);
    return brg_error(BRG_ERR_OOM,
                     "the run needs about %s (%d replicas x %s) but this machine has %s of memory: lower "
                     "replication_factor or the micro-batch size, or turn on recompute_checkpoint_every_layer",
                     n, o->replicas, r, h);
}

brg_status trainer_check_budget(trainer *t) {
    const brg_train_options *o = &t->opts;
    int n = t->model->n_blocks;
    brg_block_cost *costs = calloc((size_t)n, sizeof *costs);
    brg_device_plan *plans = calloc((size_t)o->stages, sizeof *plans);
    brg_status st = costs && plans ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the memory plan");
    /* Image data has no sequence length: the model's own cost knows its patches. */
    const int64_t seq = t->data->seq_len > 0 ? t->data->seq_len : 1;
    if (st == BRG_OK) st = brg_model_block_costs(t->model, o->micro_batch, seq, costs);
    if (st == BRG_OK)
        st = brg_plan_devices(costs, n, t->block_stage, o->stages, BRG_IPU_MODE_TRAINING, o->recompute, plans);
    if (st == BRG_OK && !o->device_memory) st = check_machine(o, plans);
    for (int d = 0; st == BRG_OK && o->device_memory && d < o->stages; d++) st = check_device(o, &plans[d]);
    free(costs);
    free(plans);
    return st;
}
