/* brigade plan --ranks R --replicas N --network-gbps B: one replica's stages from the plan
 * (compute measured in a calibration trace, or estimated from FLOPs at a rate; the bytes the
 * stages hand on; the gradients), through the scale-out model, printed. */
#define _GNU_SOURCE
#include "plan_scale.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_COUNT = 1 << 30 };

/* A message between ranks waits, beyond the network, for the receiving rank's link thread, which
 * polls for arrivals and sleeps up to a millisecond between polls when nothing moves
 * (transport_mpi.c): half of that on average. */
#define LINK_POLL_S 0.5e-3

/* What brigade train's host exchanges across ranks each step (docs/runtime.md, a runtime over
 * ranks): the losses gathered on rank 0 and its answer, the gradient norm the same way, the stop
 * flag it sends: five messages, one after the other. */
enum { HOST_MESSAGES_PER_STEP = 5 };

static const char *const scale_flags[] = {"ranks", "replicas", "network-gbps", "network-latency-us", "memory-gbps",
                                          "ranks-per-host", "cores-per-host", "threads-per-device", "other-threads",
                                          "device-gflops", "calibrate"};

bool plan_scale_seen(const arg_spec *specs, int n) {
    for (size_t i = 0; i < sizeof scale_flags / sizeof *scale_flags; i++)
        if (args_seen(specs, n, scale_flags[i])) return true;
    return false;
}

/* The cores this process may run on: a host's, for ranks started here. */
static int machine_cores(void) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) return CPU_COUNT(&allowed);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static brg_status count_flag(const char *name, int64_t v, int *out) {
    if (v < 1 || v > MAX_COUNT)
        return brg_error(BRG_ERR_INVALID_ARG, "--%s must be at least 1, got %lld", name, (long long)v);
    *out = (int)v;
    return BRG_OK;
}

static brg_status options_of(const plan_scale_args *a, const plan_scale_inputs *in, brg_scale_options *o) {
    *o = (brg_scale_options){.stages = in->stages, .tokens_per_micro_batch = (double)in->tokens_per_micro_batch,
                             .host_messages = HOST_MESSAGES_PER_STEP};
    BRG_TRY(count_flag("ranks", a->ranks, &o->ranks));
    BRG_TRY(count_flag("replicas", a->replicas == PLAN_SCALE_UNSET ? in->replication_factor : a->replicas,
                       &o->replicas));
    BRG_TRY(count_flag("ranks-per-host", a->ranks_per_host == PLAN_SCALE_UNSET ? o->ranks : a->ranks_per_host,
                       &o->ranks_per_host));
    o->cores_per_host = isnan(a->cores_per_host) ? machine_cores() : a->cores_per_host;
    if (!(o->cores_per_host > 0) || o->cores_per_host > MAX_COUNT)
        return brg_error(BRG_ERR_INVALID_ARG, "--cores-per-host must be a positive number, got %g", a->cores_per_host);
    BRG_TRY(count_flag("threads-per-device", a->threads, &o->threads_per_device));
    if (!(a->network_gbps > 0) || a->network_gbps > 1e9)
        return brg_error(BRG_ERR_INVALID_ARG, "--network-gbps must be a positive number of Gb/s, got %g",
                         a->network_gbps);
    if (!(a->latency_us >= 0) || a->latency_us > 1e9)
        return brg_error(BRG_ERR_INVALID_ARG, "--network-latency-us must be >= 0, got %g", a->latency_us);
    if (!(a->memory_gbps > 0) || a->memory_gbps > 1e9)
        return brg_error(BRG_ERR_INVALID_ARG, "--memory-gbps must be a positive number of GB/s, got %g",
                         a->memory_gbps);
    if (!(a->other_threads >= 0) || a->other_threads > MAX_COUNT)
        return brg_error(BRG_ERR_INVALID_ARG, "--other-threads must be a number >= 0, got %g", a->other_threads);
    o->other_threads = a->other_threads;
    if (!(a->device_gflops > 0) || a->device_gflops > 1e12)
        return brg_error(BRG_ERR_INVALID_ARG, "--device-gflops must be a positive number, got %g", a->device_gflops);
    o->network_bytes_per_s = a->network_gbps * 1e9 / 8;
    o->network_latency_s = a->latency_us * 1e-6 + LINK_POLL_S;
    o->memory_bytes_per_s = a->memory_gbps * 1e9;
    return BRG_OK;
}

static int first_block_of(const plan_scale_inputs *in, int stage) {
    for (int b = 0; b < in->m->n_blocks; b++)
        if (in->block_device[b] == stage) return b;
    return -1;
}

/* AdamW without a measurement: it reads the weight, its gradient and two moments and writes
 * three of them back, FP32, at memory bandwidth. */
enum { ADAMW_BYTES_PER_PARAM = 28 };

static void stage_costs(const plan_scale_inputs *in, const brg_scale_calibration *cal, const brg_scale_options *o,
                        double gflops, brg_stage_cost *stage, double *host_s) {
    double params = 0;
    for (int s = 0; s < in->stages; s++) params += (double)in->devices[s].params;
    for (int s = 0; s < in->stages; s++) {
        brg_stage_cost *c = &stage[s];
        *c = (brg_stage_cost){.gradient_bytes = (double)in->devices[s].gradient_bytes};
        int next = s + 1 < in->stages ? first_block_of(in, s + 1) : -1, first = first_block_of(in, s);
        if (next >= 0) c->send_bytes = (double)in->costs[next].input_bytes;
        if (s > 0 && first >= 0) c->grad_send_bytes = (double)in->costs[first].input_grad_bytes;
        if (cal) {
            for (int b = 0; b < in->m->n_blocks; b++)
                if (in->block_device[b] == s) c->forward_s += cal->forward_s[b], c->backward_s += cal->backward_s[b];
            c->forward_s += cal->micro_batch_overhead_s / 2;
            c->backward_s += cal->micro_batch_overhead_s / 2;
            c->optimizer_s = params > 0 ? cal->optimizer_s * (double)in->devices[s].params / params : 0;
        } else {
            c->forward_s = in->devices[s].flops / (gflops * 1e9);
            c->backward_s = 2 * c->forward_s; /* the input and the weight gradients: two products per one */
            c->optimizer_s = (double)in->devices[s].params * ADAMW_BYTES_PER_PARAM / o->memory_bytes_per_s;
        }
    }
    *host_s = cal ? cal->host_step_s : 0;
}

static const char *ms(double seconds, char *buf, size_t len) {
    if (seconds < 1e-3) snprintf(buf, len, "%.1f us", seconds * 1e6);
    else if (seconds < 10) snprintf(buf, len, "%.2f ms", seconds * 1e3);
    else snprintf(buf, len, "%.2f s", seconds);
    return buf;
}

static void print_text(const plan_scale_args *a, const brg_scale_options *o, const brg_stage_cost *stage,
                       const brg_scale_calibration *cal, const brg_scale_result *r) {
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    int hosts = (o->ranks + o->ranks_per_host - 1) / o->ranks_per_host;
    printf("\nscale-out: %d replica(s) x %d stage(s) = %d devices over %d rank(s) (up to %d per rank), %d host(s) of "
           "%g cores, %d thread(s) per device, %g of other work: compute x%.2f\n",
           o->replicas, o->stages, r->devices, o->ranks, r->max_devices_per_rank, hosts, o->cores_per_host,
           o->threads_per_device, o->other_threads, r->contention);
    printf("%s schedule, %d micro-batches; network %g Gb/s, %g us per message (+%g us for brigade's link thread); "
           "shared memory %g GB/s\n",
           brg_schedule_kind_name(o->schedule->kind), o->schedule->micro_batches, a->network_gbps, a->latency_us,
           LINK_POLL_S * 1e6, a->memory_gbps);
    if (cal)
        printf("compute: measured in %s (block times over %d steps, per-micro-batch overhead %s)\n", a->calibrate,
               cal->steps, ms(cal->micro_batch_overhead_s, b1, sizeof b1));
    else
        printf("compute: forward FLOPs at %g GFLOP/s per device, backward twice the forward (estimate; --calibrate "
               "measures)\n", a->device_gflops);
    printf("%-6s %12s %12s %12s %12s %12s\n", "stage", "forward", "backward", "optimizer", "sends", "gradients");
    for (int s = 0; s < o->stages; s++)
        printf("%-6d %12s %12s %12s %9.1f KiB %9.1f MiB\n", s, ms(stage[s].forward_s, b1, sizeof b1),
               ms(stage[s].backward_s, b2, sizeof b2), ms(stage[s].optimizer_s, b3, sizeof b3),
               stage[s].send_bytes / 1024, stage[s].gradient_bytes / (1024.0 * 1024.0));
    printf("step time %s: pipeline %s (bubble %.1f%% of the step, %d cut(s) between ranks), all-reduce %s (%.1f%%), "
           "optimizer %s, host %s\n",
           ms(r->step_s, b1, sizeof b1), ms(r->pipeline_s, b2, sizeof b2), 100 * r->bubble_share, r->pipeline_cuts,
           ms(r->all_reduce_s, b3, sizeof b3), 100 * r->all_reduce_share, ms(r->optimizer_s, b4, sizeof b4),
           ms(r->host_s, b5, sizeof b5));
    printf("tokens/s %.0f\n", r->tokens_per_s);
}

static cJSON *to_json(const plan_scale_args *a, const brg_scale_options *o, const brg_stage_cost *stage,
                      const brg_scale_calibration *cal, const brg_scale_result *r) {
    cJSON *j = cJSON_CreateObject(), *stages = cJSON_CreateArray();
    if (!j || !stages) {
        cJSON_Delete(j), cJSON_Delete(stages);
        return NULL;
    }
    const struct { const char *k; double v; } nums[] = {
        {"ranks", o->ranks}, {"replicas", o->replicas}, {"stages", o->stages}, {"devices", r->devices},
        {"max_devices_per_rank", r->max_devices_per_rank}, {"micro_batches", o->schedule->micro_batches},
        {"network_gbps", a->network_gbps}, {"network_latency_us", a->latency_us},
        {"link_latency_us", LINK_POLL_S * 1e6}, {"memory_gbps", a->memory_gbps},
        {"ranks_per_host", o->ranks_per_host}, {"cores_per_host", o->cores_per_host},
        {"threads_per_device", o->threads_per_device}, {"other_threads", o->other_threads},
        {"contention", r->contention}, {"step_s", r->step_s},
        {"pipeline_s", r->pipeline_s}, {"compute_s", r->compute_s}, {"bubble_share", r->bubble_share},
        {"pipeline_cuts", r->pipeline_cuts}, {"all_reduce_s", r->all_reduce_s},
        {"all_reduce_share", r->all_reduce_share}, {"optimizer_s", r->optimizer_s}, {"host_s", r->host_s},
        {"tokens_per_s", r->tokens_per_s}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) cJSON_AddNumberToObject(j, nums[i].k, nums[i].v);
    cJSON_AddStringToObject(j, "schedule", brg_schedule_kind_name(o->schedule->kind));
    cJSON_AddStringToObject(j, "compute", cal ? "measured" : "estimated");
    if (cal) cJSON_AddStringToObject(j, "calibration", a->calibrate);
    else cJSON_AddNumberToObject(j, "device_gflops", a->device_gflops);
    for (int s = 0; s < o->stages; s++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(stages, e);
        cJSON_AddNumberToObject(e, "forward_s", stage[s].forward_s);
        cJSON_AddNumberToObject(e, "backward_s", stage[s].backward_s);
        cJSON_AddNumberToObject(e, "optimizer_s", stage[s].optimizer_s);
        cJSON_AddNumberToObject(e, "send_bytes", stage[s].send_bytes);
        cJSON_AddNumberToObject(e, "grad_send_bytes", stage[s].grad_send_bytes);
        cJSON_AddNumberToObject(e, "gradient_bytes", stage[s].gradient_bytes);
    }
    cJSON_AddItemToObject(j, "stage_costs", stages);
    return j;
}

struct plan_scale {
    const plan_scale_args *a;
    brg_scale_options o;
    brg_scale_calibration cal;
    brg_schedule sched;
    brg_stage_cost *stage;
    brg_scale_result r;
};

brg_status plan_scale_prepare(const plan_scale_args *a, const plan_scale_inputs *in, plan_scale **out) {
    plan_scale *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "out of memory modelling the scale-out");
    *out = s;
    s->a = a;
    BRG_TRY(options_of(a, in, &s->o));
    brg_schedule_kind kind = BRG_SCHEDULE_1F1B;
    if (in->schedule) BRG_TRY(brg_schedule_kind_parse(in->schedule, &kind));
    if (a->calibrate) BRG_TRY(brg_scale_calibration_load(a->calibrate, in->m->n_blocks, &s->cal));
    s->stage = calloc((size_t)in->stages, sizeof *s->stage);
    if (!s->stage) return brg_error(BRG_ERR_OOM, "out of memory modelling %d stages", in->stages);
    BRG_TRY(brg_schedule_build(kind, in->stages, in->micro_batches, &s->sched));
    s->o.schedule = &s->sched;
    stage_costs(in, a->calibrate ? &s->cal : NULL, &s->o, a->device_gflops, s->stage, &s->o.host_step_s);
    return brg_scale_predict(s->stage, &s->o, &s->r);
}

brg_status plan_scale_print(const plan_scale *s, cJSON *root) {
    const brg_scale_calibration *cal = s->a->calibrate ? &s->cal : NULL;
    if (!root) {
        print_text(s->a, &s->o, s->stage, cal, &s->r);
        return BRG_OK;
    }
    cJSON *j = to_json(s->a, &s->o, s->stage, cal, &s->r);
    if (!j) return brg_error(BRG_ERR_OOM, "out of memory formatting the scale-out model");
    cJSON_AddItemToObject(root, "scale_out", j);
    return BRG_OK;
}

void plan_scale_free(plan_scale *s) {
    if (!s) return;
    brg_schedule_free(&s->sched);
    brg_scale_calibration_free(&s->cal);
    free(s->stage);
    free(s);
}
