/* Runtime internals shared by runtime.c (devices, threads), executor.c (the schedule),
 * reduce.c (gradients across copies) and exchange.c (parameters and state between the host and
 * the devices). Devices exchange data only through rt->transport. */
#ifndef BRIGADE_RUNTIME_INTERNAL_H
#define BRIGADE_RUNTIME_INTERNAL_H

#include <pthread.h>

#include "brigade/runtime.h"
#include "brigade/tape.h"
#include "kernels/backend.h"
#include "transport.h"

/* A recomputed block keeps only copies of its carried inputs; `prev` are the tensors they were
 * copied from (whose gradients the block's backward feeds) and `out` what it handed on. */
/* The most tensors a model's stage may hand the next (brg_model_ops.carried). */
#define RUNTIME_CARRIED_MAX 4

typedef struct checkpoint {
    brg_tensor *in[RUNTIME_CARRIED_MAX], *prev[RUNTIME_CARRIED_MAX], *out[RUNTIME_CARRIED_MAX];
    bool fresh[RUNTIME_CARRIED_MAX]; /* out[k] is a tensor the block made (else one of its inputs handed on) */
} checkpoint;

struct brg_device {
    brg_runtime *rt;
    int id, replica, stage, first_block, last_block;
    const brg_backend *backend; /* its memory, copies and kernels (rt->opts.backend) */
    brg_arena *arena;      /* persistent: parameters, gradients, optimizer state */
    brg_arena **slots;     /* activation memory, one child arena per micro-batch in flight */
    int n_slots;           /* micro-batch mb uses slots[mb % n_slots] */
    bool *slot_busy;       /* a slot holds an earlier micro-batch of this run */
    size_t run_mark;       /* arena mark at the start of the current run */
    size_t persistent_peak; /* bytes held before any activation: parameters, gradients, state */
    brg_model view;        /* the model with this device's parameter copies */
    bool *holds;           /* [n_params] */
    float *grad_span;      /* training: every held parameter's gradient, one flat span */
    transport_segment *segs; /* where each held parameter's gradient lies in it, by parameter */
    int n_segs;
    brg_tape **tapes;      /* one per (micro-batch, block of the stage): [mb * n_stage_blocks + i] */
    int n_tapes;
    struct checkpoint *ckpts; /* recomputed layers' saved inputs, same indexing as tapes */
    brg_bundle *bundles;   /* [micro_batches] */
    brg_tensor **inputs;   /* stage input copies: [micro_batches][RUNTIME_CARRIED_MAX], by rt->carried */
    brg_tensor **outputs;  /* carried outputs, the same, or the loss in slot 0 on the last stage */
    struct brg_gemm_team *team; /* intra-op threads, or NULL */
    struct packed_weights *packed; /* weights packed once (a run, when training: packed_weights.h), or NULL */
    double busy_seconds;
    size_t activation_peak;
    size_t micro_batch_peak; /* brg_device_stats.micro_batch_peak_bytes */
    size_t remote_peak;    /* another rank's device: its arena's peak, as that rank last shared it */
    brg_status status;
    char error[1024];
};

struct brg_runtime {
    brg_model *model;
    brg_runtime_options opts;
    const char *const *carried; /* what a stage hands the next: the model's declaration */
    int n_carried;
    int *block_stage;
    int n_devices;
    brg_device *devices;
    transport *transport;
    brg_schedule schedule;
    double schedule_seconds;
    /* job dispatch: one pool thread per device of this process, local[k] the device of thread k */
    struct brg_pool *threads;
    int *local;
    brg_device_fn job;
    void *job_arg;
    /* the current run */
    const brg_micro_batch *mbs;
    brg_loss_items denominators; /* zeros: each micro-batch's own */
    uint64_t seed;
    float loss_scale; /* backward's starting gradient at the loss (brg_runtime_set_loss_scale) */
    double *norm_parts; /* brg_runtime_grad_sq_norm's [n_params][BRG_SHARD_PARTS], made at its first call */
    float *losses;
    float **logits; /* inference: where the last stage copies each micro-batch's logits */
    /* inference collecting the logits whole (brg_runtime_infer_collect): each micro-batch's
     * first row in the batch, the batch's rows, the arena the [rows, ...] tensor goes in and
     * where it is handed back; the lock guards its allocation by the first last stage done */
    const int64_t *collect_rows;
    int64_t collect_total;
    brg_arena *collect_arena;
    brg_tensor **collect_out;
    pthread_mutex_t collect_lock;
};

/* executor.c: one device's part of a run (a brg_device_fn). */
brg_status executor_run_device(brg_device *dev, void *arg);
/* reduce.c: sums each parameter's gradient over every device holding a copy (with
 * shard_gradients, over each replica's shard only: runtime_reduce_scatter). */
brg_status reduce_gradients(brg_runtime *rt);

/* shards.c (ZeRO-1): the device whose copy of replica r's shard of parameter p is summed and
 * updated (replica r's device on the stage of p's owning block; -1: none holds it), and one
 * device's part of the gradients' reduce-scatter. */
int runtime_shard_source(const brg_runtime *rt, int p, int r);
brg_status runtime_reduce_scatter(brg_device *dev);

double runtime_now(void);

/* ---- devices on other ranks (runtime_ranks.c) ---- */

/* Another rank's device here: where it sits and which parameters it holds, nothing more. */
brg_status runtime_init_remote_device(brg_device *dev);
/* Pieces of host memory that one device's work fills (its micro-batches' losses, its partial
 * norm): `fn` lists device `device`'s (on every rank alike, each rank's own memory). */
typedef struct host_part {
    void *data;
    size_t bytes;
} host_part;
typedef int (*host_parts_fn)(brg_runtime *rt, int device, void *ctx, host_part *parts, int cap);
/* Across ranks, every rank's host gets every device's parts (in one process they are there
 * already: nothing happens). */
brg_status runtime_share(brg_runtime *rt, host_parts_fn fn, void *ctx);
/* After a run across ranks: the losses, the logits (caller buffers or the collected tensor) and
 * the devices' statistics on every rank. */
brg_status runtime_share_run(brg_runtime *rt);

/* brg_runtime_create over a transport of the caller's choice (tests: the serialising one). */
brg_status runtime_create_over(brg_model *model, const brg_runtime_options *opts, transport_factory make_transport,
                               brg_runtime **out);

/* trace_transport.c: *t wrapped in a transport that records its traffic (brigade/trace.h), and
 * the counter of what a device's arenas hold now. */
brg_status transport_traced_wrap(transport **t);
void trace_device_memory(const brg_device *dev);

/* The owner's copy of parameter p stands for all: replica 0's, on the stage of the block that
 * owns the parameter. */
static inline bool device_owns_param(const brg_device *dev, int p) {
    const brg_runtime *rt = dev->rt;
    return dev->replica == 0 && dev->holds[p] && rt->block_stage[rt->model->params[p].block] == dev->stage;
}

#endif
