/* A scale-out model on paper: the step time of one IPUConfig pipeline (stages x micro-batches
 * through a schedule) replicated N times over R ranks, from per-stage compute times, the bytes
 * the stages hand each other and the gradient bytes the replicas all-reduce. Pure arithmetic:
 * nothing is allocated per device beyond a few numbers, so 64 replicas x 4 stages cost as little
 * as 2 x 2. `brigade plan --ranks R --replicas N --network-gbps B` prints it (docs/scale-out.md). */
#ifndef BRIGADE_SCALE_MODEL_H
#define BRIGADE_SCALE_MODEL_H

#include <stdint.h>

#include "brigade/schedule.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One pipeline stage (one device of a replica), uncontended: a core to itself. */
typedef struct brg_stage_cost {
    double forward_s, backward_s; /* per micro-batch, the per-micro-batch overhead included */
    double send_bytes;            /* what its forward hands the next stage (0 for the last) */
    double grad_send_bytes;       /* what its backward hands the previous stage (0 for the first) */
    double gradient_bytes;        /* the parameter gradients it all-reduces */
    double optimizer_s;           /* its optimizer update */
} brg_stage_cost;

typedef struct brg_scale_options {
    int ranks;        /* R: processes, devices spread as brigade spreads them (device d on rank d*R/D) */
    int replicas;     /* N */
    int stages;       /* ipus_per_replica */
    const brg_schedule *schedule; /* stages x gradient_accumulation_steps */
    double network_bytes_per_s;   /* between ranks */
    double network_latency_s;     /* per message between ranks, all of it (the wire's and the transport's) */
    double memory_bytes_per_s;    /* between devices of one rank (shared memory) */
    int ranks_per_host;           /* consecutive ranks share a host (mpirun fills slots in order) */
    double cores_per_host;        /* the cores those ranks' device threads get (fewer where other work shares them) */
    int threads_per_device;       /* compute threads of each device */
    double other_threads;         /* threads of other work that each host keeps running (0: none) */
    double host_step_s;           /* the host's own time per step (data, losses, the norm, the log) */
    /* messages in a row per step that the ranks' shared host decisions wait for (the losses and
     * the gradient norm gathered on rank 0 and sent back, the stop flag from it) */
    int host_messages;
    double tokens_per_micro_batch;
} brg_scale_options;

typedef struct brg_scale_result {
    double step_s;        /* one optimizer step */
    double pipeline_s;    /* the slowest replica's schedule, first forward to last backward */
    double compute_s;     /* a device's busy time in it (the busiest stage) */
    double bubble_share;  /* of the step: the average device idle inside the pipeline */
    double all_reduce_s, all_reduce_share;
    double transfer_s;    /* activation transfers on the slowest replica's critical stages, summed */
    double optimizer_s, host_s;
    double contention;    /* compute slowdown of the busiest host: device threads over cores, >= 1 */
    double tokens_per_s;
    int devices, max_devices_per_rank;
    int pipeline_cuts;    /* stage boundaries of the slowest replica that cross ranks */
} brg_scale_result;

/* Checks the options (one-line errors: ranks and replicas >= 1, no more ranks than devices, a
 * positive finite bandwidth) and predicts. stage[0..stages) are one replica's stages. */
brg_status brg_scale_predict(const brg_stage_cost *stage, const brg_scale_options *o, brg_scale_result *out);

/* Per-block times measured in a trace of a one-device training run (`brigade train ... --trace
 * FILE`, ipus_per_replica 1, replication_factor 1): each block's forward and backward
 * (recomputation included) per micro-batch, the per-micro-batch overhead of the pipeline beyond
 * its blocks, the optimizer's update and the host's time per step beyond the pipeline and the
 * optimizer. Each is the lower quartile of its samples: the times of a thread the machine did not
 * interrupt (a core to itself), which the model then shares out. The first step (first touches
 * of memory) is left out. */
typedef struct brg_scale_calibration {
    int n_blocks;
    double *forward_s, *backward_s;  /* [n_blocks] */
    double micro_batch_overhead_s;
    double optimizer_s;              /* the whole model's update */
    double host_step_s;
    int steps;                       /* steps measured */
} brg_scale_calibration;

brg_status brg_scale_calibration_load(const char *trace_path, int n_blocks, brg_scale_calibration *out);
void brg_scale_calibration_free(brg_scale_calibration *c);

#ifdef __cplusplus
}
#endif
#endif
