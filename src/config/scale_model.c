/* The scale-out model (brigade/scale_model.h): the devices of N replicas x p stages spread over R
 * ranks as the runtime spreads them, each replica's schedule simulated with its stages' times
 * and the transfers between stages on different ranks, then the all-reduce as a ring over the
 * ranks that hold a stage (shared memory first among the devices of one rank), the optimizer
 * and the host. Everything is computed from the device and rank numbers, never stored per
 * device: the only arrays are one replica's (stages x micro-batches). */
#include <math.h>
#include <stdlib.h>

#include "brigade/scale_model.h"

enum { MAX_REPLICAS = 1 << 16 };

/* ---- placement: device d on rank d * R / D (lower ranks first, as even as the count allows) ---- */

static int rank_of(int64_t device, int64_t devices, int ranks) { return (int)(device * ranks / devices); }

/* The first device of rank r: the smallest d with d * R / D >= r. */
static int64_t first_device(int r, int64_t devices, int ranks) { return ((int64_t)r * devices + ranks - 1) / ranks; }

static int64_t devices_on_ranks(int first_rank, int end_rank, int64_t devices, int ranks) {
    if (end_rank > ranks) end_rank = ranks;
    return first_device(end_rank, devices, ranks) - first_device(first_rank, devices, ranks);
}

/* Compute slowdown on the host of `rank`: the threads computing at once (its ranks' device
 * threads, each busy `utilization` of the pipeline, and other work's) over its cores, which
 * they share alike. */
static double contention_of(int rank, int64_t devices, const brg_scale_options *o, double utilization) {
    int host = rank / o->ranks_per_host;
    double threads = (double)devices_on_ranks(host * o->ranks_per_host, (host + 1) * o->ranks_per_host, devices,
                                              o->ranks) * o->threads_per_device * utilization +
                     o->other_threads;
    return threads > o->cores_per_host ? threads / o->cores_per_host : 1.0;
}

static brg_status check(const brg_scale_options *o) {
    if (o->ranks < 1) return brg_error(BRG_ERR_INVALID_ARG, "--ranks must be at least 1, got %d", o->ranks);
    if (o->replicas < 1) return brg_error(BRG_ERR_INVALID_ARG, "--replicas must be at least 1, got %d", o->replicas);
    if (o->replicas > MAX_REPLICAS)
        return brg_error(BRG_ERR_INVALID_ARG, "--replicas %d: at most %d", o->replicas, MAX_REPLICAS);
    if (o->stages < 1 || !o->schedule || o->schedule->stages != o->stages)
        return brg_error(BRG_ERR_INVALID_ARG, "the schedule must have the pipeline's %d stages", o->stages);
    int64_t devices = (int64_t)o->replicas * o->stages;
    if (o->ranks > devices)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%d ranks for %lld devices (%d replicas x %d stages): every rank needs a device; use at most "
                         "%lld ranks",
                         o->ranks, (long long)devices, o->replicas, o->stages, (long long)devices);
    if (!(o->network_bytes_per_s > 0) || !isfinite(o->network_bytes_per_s))
        return brg_error(BRG_ERR_INVALID_ARG, "the network bandwidth must be a positive number of Gb/s");
    if (!(o->memory_bytes_per_s > 0) || !isfinite(o->memory_bytes_per_s))
        return brg_error(BRG_ERR_INVALID_ARG, "the memory bandwidth must be a positive number of GB/s");
    if (!(o->network_latency_s >= 0) || !isfinite(o->network_latency_s))
        return brg_error(BRG_ERR_INVALID_ARG, "the network latency must be a number of microseconds >= 0");
    if (o->ranks_per_host < 1 || !(o->cores_per_host > 0) || !isfinite(o->cores_per_host) || o->threads_per_device < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "ranks per host and threads per device must be >= 1, cores per host > 0");
    if (!(o->other_threads >= 0) || !isfinite(o->other_threads))
        return brg_error(BRG_ERR_INVALID_ARG, "the other work's threads per host must be a number >= 0");
    if (!(o->host_step_s >= 0) || !(o->tokens_per_micro_batch >= 0) || o->host_messages < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "the host time per step and the tokens per micro-batch must be >= 0");
    return BRG_OK;
}

/* ---- one replica's pipeline ---- */

typedef struct replica_sim {
    const brg_stage_cost *stage;
    const brg_scale_options *o;
    int64_t first;              /* its first device */
    double utilization;         /* of the device threads in the pipeline (the contention's estimate) */
    double *fwd_end, *bwd_end;  /* [stage * m + micro-batch]; < 0: not run yet */
    double *free_at;            /* [stage] */
    int *pos;                   /* [stage]: next step */
} replica_sim;

/* Time a stage's output takes to reach its neighbour: a copy in shared memory on one rank, the
 * network (bandwidth and latency) between ranks. */
static double transfer(const replica_sim *r, int from, int to, double bytes) {
    const brg_scale_options *o = r->o;
    int64_t devices = (int64_t)o->replicas * o->stages;
    if (rank_of(r->first + from, devices, o->ranks) == rank_of(r->first + to, devices, o->ranks))
        return bytes / o->memory_bytes_per_s;
    return bytes / o->network_bytes_per_s + o->network_latency_s;
}

/* When the next step of `s` may start, or -1 while what it needs has not run. */
static double ready_at(const replica_sim *r, int s, brg_schedule_step step) {
    int m = r->o->schedule->micro_batches, p = r->o->stages, mb = step.micro_batch;
    if (step.pass == BRG_PASS_FORWARD) {
        if (s == 0) return 0;
        double prev = r->fwd_end[(s - 1) * m + mb];
        return prev < 0 ? -1 : prev + transfer(r, s - 1, s, r->stage[s - 1].send_bytes);
    }
    double own = r->fwd_end[s * m + mb];
    if (own < 0) return -1;
    if (s == p - 1) return own;
    double next = r->bwd_end[(s + 1) * m + mb];
    if (next < 0) return -1;
    double at = next + transfer(r, s + 1, s, r->stage[s + 1].grad_send_bytes);
    return at > own ? at : own;
}

/* Runs every stage's steps in its schedule order as soon as their inputs are there; returns the
 * time the last one ends, and each stage's busy time in busy[stage]. */
static brg_status simulate(replica_sim *r, double *busy, double *end) {
    const brg_schedule *sc = r->o->schedule;
    int p = r->o->stages, m = sc->micro_batches, left = 0;
    int64_t devices = (int64_t)r->o->replicas * p;
    for (int i = 0; i < p * m; i++) r->fwd_end[i] = r->bwd_end[i] = -1;
    for (int s = 0; s < p; s++) r->free_at[s] = 0, r->pos[s] = 0, busy[s] = 0, left += sc->length[s];
    while (left > 0) {
        int moved = 0;
        for (int s = 0; s < p; s++) {
            double slow = contention_of(rank_of(r->first + s, devices, r->o->ranks), devices, r->o, r->utilization);
            while (r->pos[s] < sc->length[s]) {
                brg_schedule_step step = sc->steps[s][r->pos[s]];
                double at = ready_at(r, s, step);
                if (at < 0) break;
                bool fwd = step.pass == BRG_PASS_FORWARD;
                double took = (fwd ? r->stage[s].forward_s : r->stage[s].backward_s) * slow;
                double start = at > r->free_at[s] ? at : r->free_at[s];
                r->free_at[s] = start + took;
                busy[s] += took;
                (fwd ? r->fwd_end : r->bwd_end)[s * m + step.micro_batch] = start + took;
                r->pos[s]++;
                moved++;
            }
        }
        if (!moved) return brg_error(BRG_ERR_INTERNAL, "the %s schedule over %d stages deadlocks",
                                     brg_schedule_kind_name(sc->kind), p);
        left -= moved;
    }
    *end = 0;
    for (int s = 0; s < p; s++) *end = r->free_at[s] > *end ? r->free_at[s] : *end;
    return BRG_OK;
}

static int cuts_of(const replica_sim *r) {
    int64_t devices = (int64_t)r->o->replicas * r->o->stages;
    int cuts = 0;
    for (int s = 0; s + 1 < r->o->stages; s++)
        cuts += rank_of(r->first + s, devices, r->o->ranks) != rank_of(r->first + s + 1, devices, r->o->ranks);
    return cuts;
}

/* Whether the replica starting at device `a` runs as the one at `b`: its stages as far apart in
 * ranks, on hosts as busy. Replicas repeat that way (a rank's worth, a host's worth), so only
 * the few that differ are simulated. */
static bool same_layout(const replica_sim *r, int64_t a, int64_t b) {
    const brg_scale_options *o = r->o;
    int64_t devices = (int64_t)o->replicas * o->stages;
    int ra = rank_of(a, devices, o->ranks), rb = rank_of(b, devices, o->ranks);
    for (int s = 0; s < o->stages; s++) {
        int sa = rank_of(a + s, devices, o->ranks), sb = rank_of(b + s, devices, o->ranks);
        if (sa - ra != sb - rb ||
            contention_of(sa, devices, o, r->utilization) != contention_of(sb, devices, o, r->utilization))
            return false;
    }
    return true;
}

/* The slowest replica's pipeline: its span, the average idle of its stages, its cuts. */
enum { UTILIZATION_ROUNDS = 12 };

static brg_status pipelines(const brg_stage_cost *stage, const brg_scale_options *o, brg_scale_result *out,
                            double *idle_sum, double *utilization) {
    int p = o->stages, m = o->schedule->micro_batches;
    replica_sim r = {stage, o, 0, 1, calloc((size_t)p * (size_t)m, sizeof(double)),
                     calloc((size_t)p * (size_t)m, sizeof(double)),
                     calloc((size_t)p, sizeof(double)), calloc((size_t)p, sizeof(int))};
    double *busy = calloc((size_t)p, sizeof *busy);
    brg_status st = r.fwd_end && r.bwd_end && r.free_at && r.pos && busy
                        ? BRG_OK
                        : brg_error(BRG_ERR_OOM, "out of memory simulating %d stages x %d micro-batches", p, m);
    /* The contention and the devices' utilization depend on each other: start from every
     * device busy throughout, and settle on where they agree. */
    r.utilization = 1;
    for (int round = 0; st == BRG_OK && round < UTILIZATION_ROUNDS; round++) {
        out->pipeline_s = 0;
        int64_t simulated = -1;
        for (int rep = 0; st == BRG_OK && rep < o->replicas; rep++) {
            r.first = (int64_t)rep * p;
            if (simulated >= 0 && same_layout(&r, r.first, simulated)) continue;
            simulated = r.first;
            double end = 0;
            st = simulate(&r, busy, &end);
            if (st != BRG_OK || (rep > 0 && end <= out->pipeline_s)) continue;
            out->pipeline_s = end;
            out->pipeline_cuts = cuts_of(&r);
            out->compute_s = 0;
            *idle_sum = 0;
            for (int s = 0; s < p; s++) {
                out->compute_s = busy[s] > out->compute_s ? busy[s] : out->compute_s;
                *idle_sum += end - busy[s];
            }
            *idle_sum /= p;
        }
        double used = out->pipeline_s > 0 ? 1 - *idle_sum / out->pipeline_s : 1;
        r.utilization = 0.5 * (r.utilization + used);
    }
    *utilization = r.utilization;
    free(r.fwd_end), free(r.bwd_end), free(r.free_at), free(r.pos), free(busy);
    return st;
}

/* ---- the all-reduce ---- */

/* The ranks holding stage s's N copies, and the most copies on one rank. */
static void stage_group(const brg_scale_options *o, int s, int *n_ranks, int *most_per_rank) {
    int64_t devices = (int64_t)o->replicas * o->stages;
    int last = -1, run = 0;
    *n_ranks = 0, *most_per_rank = 0;
    for (int r = 0; r < o->replicas; r++) {
        int k = rank_of((int64_t)r * o->stages + s, devices, o->ranks);
        run = k == last ? run + 1 : 1;
        *n_ranks += k != last;
        last = k;
        *most_per_rank = run > *most_per_rank ? run : *most_per_rank;
    }
}

/* Hierarchical: the copies on one rank add up in shared memory (a ring at memory bandwidth),
 * then a ring over the ranks, 2(n-1)/n of the gradient bytes through each rank's link, which all
 * the stage groups with copies on the rank share, and 2(n-1) message latencies. */
static brg_status all_reduce(const brg_stage_cost *stage, const brg_scale_options *o, double *out) {
    int64_t devices = (int64_t)o->replicas * o->stages;
    int *ranks_of_stage = calloc((size_t)o->stages, sizeof *ranks_of_stage);
    if (!ranks_of_stage) return brg_error(BRG_ERR_OOM, "out of memory modelling the all-reduce");
    double local = 0, latency = 0, link = 0;
    for (int s = 0; s < o->stages; s++) {
        int n, k;
        stage_group(o, s, &n, &k);
        ranks_of_stage[s] = n;
        double g = stage[s].gradient_bytes;
        if (k > 1) local = fmax(local, 2.0 * (k - 1) / k * g / o->memory_bytes_per_s);
        if (n > 1) latency = fmax(latency, 2.0 * (n - 1) * o->network_latency_s);
    }
    for (int rank = 0; rank < o->ranks; rank++) {
        int64_t first = first_device(rank, devices, o->ranks), end = first_device(rank + 1, devices, o->ranks);
        double bytes = 0;
        for (int s = 0; s < o->stages; s++) {
            /* the rank's first device of stage s, if it has one */
            int64_t d = first + ((s - first % o->stages) + o->stages) % o->stages;
            int n = ranks_of_stage[s];
            if (d < end && n > 1) bytes += 2.0 * (n - 1) / n * stage[s].gradient_bytes;
        }
        link = fmax(link, bytes / o->network_bytes_per_s);
    }
    free(ranks_of_stage);
    *out = local + link + latency;
    return BRG_OK;
}

/* ---- the step ---- */

brg_status brg_scale_predict(const brg_stage_cost *stage, const brg_scale_options *o, brg_scale_result *out) {
    *out = (brg_scale_result){0};
    BRG_TRY(check(o));
    int64_t devices = (int64_t)o->replicas * o->stages;
    double idle = 0, utilization = 1;
    BRG_TRY(pipelines(stage, o, out, &idle, &utilization));
    out->devices = (int)devices;
    for (int r = 0; r < o->ranks; r++) {
        int64_t here = devices_on_ranks(r, r + 1, devices, o->ranks);
        if (here > out->max_devices_per_rank) out->max_devices_per_rank = (int)here;
        out->contention = fmax(out->contention, contention_of(r, devices, o, utilization));
    }
    for (int s = 0; s < o->stages; s++) out->optimizer_s = fmax(out->optimizer_s, stage[s].optimizer_s);
    out->optimizer_s *= out->contention;
    /* every rank's host thread at once, beside the idle device threads and the other work */
    out->host_s = o->host_step_s * fmax(1.0, (o->ranks_per_host + o->other_threads) / o->cores_per_host);
    /* the values every rank's host decisions read, shared through rank 0 */
    if (o->ranks > 1) out->host_s += o->host_messages * o->network_latency_s;
    BRG_TRY(all_reduce(stage, o, &out->all_reduce_s));
    out->step_s = out->pipeline_s + out->all_reduce_s + out->optimizer_s + out->host_s;
    if (out->step_s > 0) {
        out->bubble_share = idle / out->step_s;
        out->all_reduce_share = out->all_reduce_s / out->step_s;
        out->tokens_per_s = (double)o->replicas * o->schedule->micro_batches * o->tokens_per_micro_batch / out->step_s;
    }
    return BRG_OK;
}
