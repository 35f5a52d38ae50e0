/* brigade plan --ranks R --replicas N --network-gbps B: the scale-out model of the plan's
 * pipeline (brigade/scale_model.h), as a table or in the plan's JSON. */
#ifndef BRIGADE_CLI_PLAN_SCALE_H
#define BRIGADE_CLI_PLAN_SCALE_H

#include <cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "brigade/brigade.h"

typedef struct plan_scale_args {
    int64_t ranks, replicas, ranks_per_host, threads;
    double network_gbps, latency_us, memory_gbps, device_gflops, cores_per_host, other_threads;
    const char *calibrate; /* a one-device training trace */
    bool wanted;           /* any of the flags was given */
} plan_scale_args;

/* Unset (the config's replicas, every rank on one host, this machine's cores): values no flag
 * can give. */
#define PLAN_SCALE_UNSET INT64_MIN
#define PLAN_SCALE_ARGS_DEFAULT {.ranks = 1, .replicas = PLAN_SCALE_UNSET, .ranks_per_host = PLAN_SCALE_UNSET, \
                                 .threads = 1, .network_gbps = 10, .latency_us = 50, .memory_gbps = 10,       \
                                 .device_gflops = 50, .cores_per_host = NAN}

/* The flags, for plan's table of specs. */
#define PLAN_SCALE_SPECS(a)                                                                                            \
    {"ranks", ARG_INT, &(a).ranks, false, "scale-out model: processes the devices spread over (default 1)", false},  \
    {"replicas", ARG_INT, &(a).replicas, false, "scale-out model: replicas (default replication_factor)", false},    \
    {"network-gbps", ARG_DOUBLE, &(a).network_gbps, false, "scale-out model: Gb/s between ranks (default 10)",       \
     false},                                                                                                           \
    {"network-latency-us", ARG_DOUBLE, &(a).latency_us, false,                                                        \
     "scale-out model: microseconds per message between ranks (default 50)", false},                                 \
    {"memory-gbps", ARG_DOUBLE, &(a).memory_gbps, false,                                                              \
     "scale-out model: GB/s between devices of one rank (default 10)", false},                                       \
    {"ranks-per-host", ARG_INT, &(a).ranks_per_host, false, "scale-out model: ranks sharing a host (default all)",   \
     false},                                                                                                           \
    {"cores-per-host", ARG_DOUBLE, &(a).cores_per_host, false,                                                       \
     "scale-out model: cores a host's ranks get (default this machine's)", false},                                   \
    {"threads-per-device", ARG_INT, &(a).threads, false, "scale-out model: compute threads per device (default 1)",  \
     false},                                                                                                           \
    {"other-threads", ARG_DOUBLE, &(a).other_threads, false,                                                          \
     "scale-out model: threads of other work running on each host (default 0)", false},                              \
    {"device-gflops", ARG_DOUBLE, &(a).device_gflops, false,                                                          \
     "scale-out model without --calibrate: a device's GFLOP/s (default 50)", false},                                 \
    {"calibrate", ARG_STRING, &(a).calibrate, false,                                                                  \
     "scale-out model: measured block times from a one-device `brigade train --trace` file", false}

/* Whether args_parse saw any of the flags above. */
bool plan_scale_seen(const arg_spec *specs, int n);

/* What the plan knows of one replica. */
typedef struct plan_scale_inputs {
    const brg_model *m;
    const brg_block_cost *costs;
    const int *block_device; /* [n_blocks] */
    const brg_device_plan *devices;
    int stages;
    int micro_batches;
    int replication_factor;
    const char *schedule; /* NULL: 1f1b */
    int64_t tokens_per_micro_batch;
} plan_scale_inputs;

/* The prediction, made (every check, the calibration read) before the plan prints anything, so
 * that bad input leaves one line on stderr and nothing on stdout. */
typedef struct plan_scale plan_scale;
brg_status plan_scale_prepare(const plan_scale_args *a, const plan_scale_inputs *in, plan_scale **out);
/* Prints it (root NULL) or adds it to root as "scale_out". */
brg_status plan_scale_print(const plan_scale *s, cJSON *root);
void plan_scale_free(plan_scale *s);

#endif
