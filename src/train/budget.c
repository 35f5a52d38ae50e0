/* The memory check that runs before any training: each device's estimated peak (the plan
 * `brigade plan` prints, with this run's schedule, micro-batches in flight, recomputation and
 * optimizer) against its budget, or without budgets all of them against the machine's memory, so
 * a run that cannot fit fails up front with the bytes, not on some later step. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade/registry.h"
#include "brigade/schedule.h"
#include "trainer_internal.h"

static void format_bytes(double n, char *buf, size_t len) {
    if (n >= 1 << 30) snprintf(buf, len, "%.2f GiB", n / (1 << 30));
    else if (n >= 1 << 20) snprintf(buf, len, "%.2f MiB", n / (1 << 20));
    else snprintf(buf, len, "%.0f bytes", n);
}

static double machine_bytes(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* All replicas of all stages (without a budget they share the machine), off-chip state too. */
static double run_bytes(const brg_train_options *o, const brg_device_plan *plans, double *per_replica) {
    *per_replica = 0;
    for (int d = 0; d < o->stages; d++)
        *per_replica +=
            (double)plans[d].total_bytes + (plans[d].optimizer_offchip ? (double)plans[d].optimizer_bytes : 0);
    return *per_replica * o->replicas;
}

/* Whether the plan fits every device's budget, or without budgets the machine. */
static bool fits(const brg_train_options *o, const brg_device_plan *plans) {
    if (!o->device_memory) {
        double per_replica, have = machine_bytes();
        return have <= 0 || run_bytes(o, plans, &per_replica) <= have;
    }
    for (int d = 0; d < o->stages; d++)
        if ((double)plans[d].total_bytes > (double)o->device_memory) return false;
    return true;
}

static int64_t most_packed(const brg_train_options *o, const brg_device_plan *plans) {
    int64_t most = 0;
    for (int d = 0; d < o->stages; d++) most = plans[d].packed_bytes > most ? plans[d].packed_bytes : most;
    return most;
}

/* brg_train_plan_memory. Packed weights are a speed-up, never a reason to refuse a run: a plan
 * that does not fit with them is made again without them (and the devices then pack nothing);
 * *unplaced (may be NULL) is then the most a device's panels would have taken, else 0. */
static brg_status plan_memory(const brg_model *model, const brg_dataset *data, const brg_train_options *o,
                              brg_device_plan *out, int64_t *unplaced) {
    if (unplaced) *unplaced = 0;
    if (o->stages < 1 || o->accumulation < 1 || o->micro_batch < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "stages (%d), accumulation (%d) and micro-batch size (%lld) must be >= 1",
                         o->stages, o->accumulation, (long long)o->micro_batch);
    int n = model->n_blocks;
    brg_block_cost *costs = calloc((size_t)n, sizeof *costs);
    int *stage = calloc((size_t)n, sizeof *stage), *in_flight = calloc((size_t)o->stages, sizeof *in_flight);
    brg_status st = costs && stage && in_flight ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the memory plan");
    brg_schedule s = {0};
    if (st == BRG_OK && o->block_stage) memcpy(stage, o->block_stage, (size_t)n * sizeof *stage);
    /* Image data has no sequence length: the model's own cost knows its patches. */
    const int64_t seq = data && data->seq_len > 0 ? data->seq_len : 1;
    if (st == BRG_OK) st = brg_model_block_costs(model, o->micro_batch, seq, costs);
    if (st == BRG_OK) st = brg_schedule_build(o->schedule, o->stages, o->accumulation, &s);
    for (int d = 0; st == BRG_OK && d < o->stages; d++) in_flight[d] = brg_schedule_max_in_flight(&s, d);
    const brg_dtype compute = brg_precision_compute_dtype(o->precision);
    brg_plan_options po = {.mode = BRG_IPU_MODE_TRAINING, .recompute = o->recompute, .in_flight = in_flight,
                           .optimizer_state = brg_optimizer_state_floats(&o->optimizer),
                           .threads = o->intra_threads,
                           .half_products = compute != BRG_DTYPE_F32,
                           .half_activations = brg_precision_activation_dtype(o->precision) != BRG_DTYPE_F32,
                           .optimizer_shards = o->shard_optimizer_state ? o->replicas : 1,
                           .optimizer_offchip = o->optimizer_state_offchip,
                           .packed_weights = brg_plan_packs_weights(o->accumulation, compute)};
    if (st == BRG_OK) st = brg_plan_devices_with(costs, n, stage, o->stages, &po, out);
    if (st == BRG_OK && po.packed_weights && !fits(o, out)) {
        if (unplaced) *unplaced = most_packed(o, out);
        po.packed_weights = false;
        st = brg_plan_devices_with(costs, n, stage, o->stages, &po, out);
    }
    brg_schedule_free(&s);
    free(costs);
    free(stage);
    free(in_flight);
    return st;
}

brg_status brg_train_plan_memory(const brg_model *model, const brg_dataset *data, const brg_train_options *o,
                                 brg_device_plan *out) {
    return plan_memory(model, data, o, out, NULL);
}

static brg_status check_device(const brg_train_options *o, const brg_device_plan *d) {
    double need = (double)d->total_bytes;
    if (need <= (double)o->device_memory) return BRG_OK;
    char total[32], budget[32], w[32], a[32], s[32];
    format_bytes(need, total, sizeof total);
    format_bytes((double)o->device_memory, budget, sizeof budget);
    format_bytes((double)(d->weight_bytes + d->gradient_bytes + (d->optimizer_offchip ? 0 : d->optimizer_bytes)), w,
                 sizeof w);
    format_bytes((double)d->activation_bytes, a, sizeof a);
    format_bytes((double)d->scratch_bytes, s, sizeof s);
    return brg_error(BRG_ERR_OOM,
                     "device %d (stage %d of every replica) needs about %s (%.0f bytes: %s of weights, gradients and "
                     "optimizer state, %s of activations for %d micro-batches in flight, %s of kernel scratch) but "
                     "its budget is %s: raise --device-memory, lower the micro-batch size, or turn on "
                     "recompute_checkpoint_every_layer",
                     d->id, d->id, total, need, w, a, d->in_flight, s, budget);
}

/* Without a budget the devices share the machine's memory: all replicas of all stages together
 * must fit in it (a replication_factor of 100000 must not start and grow until the system kills
 * it). */
static brg_status check_machine(const brg_train_options *o, const brg_device_plan *plans) {
    const double have = machine_bytes();
    if (have <= 0) return BRG_OK;
    double per_replica; /* off-chip state is outside the devices' budgets, not outside the machine */
    const double need = run_bytes(o, plans, &per_replica);
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
    brg_device_plan *plans = calloc((size_t)o->stages, sizeof *plans);
    if (!plans) return brg_error(BRG_ERR_OOM, "cannot allocate the memory plan");
    brg_train_options with = *o;
    with.block_stage = t->block_stage;
    int64_t unplaced = 0;
    brg_status st = plan_memory(t->model, t->data, &with, plans, &unplaced);
    if (st == BRG_OK && !o->device_memory) st = check_machine(o, plans);
    for (int d = 0; st == BRG_OK && o->device_memory && d < o->stages; d++) st = check_device(o, &plans[d]);
    /* The plan packs, and then the devices do; else the summary says what the panels would take. */
    const int64_t packed = most_packed(o, plans);
    t->pack_weights = packed > 0;
    t->packed_bytes = packed > 0 ? packed : unplaced;
    free(plans);
    return st;
}
