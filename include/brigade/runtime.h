/* The runtime: a model placed on devices (replica x stage), each a worker thread with its own
 * arena holding its stage's parameters, gradients and activations. One call runs an optimizer
 * step's micro-batches through the pipeline schedule and leaves every device with the gradient
 * summed over all micro-batches, replicas and devices that hold a copy of the same parameter.
 * Devices exchange data only through a transport (messages by value, collectives), never by
 * reading each other's memory; the host's side of an exchange is device 0's. */
#ifndef BRIGADE_RUNTIME_H
#define BRIGADE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/backend.h"
#include "brigade/model.h"
#include "brigade/safetensors.h"
#include "brigade/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_runtime_options {
    int replicas;            /* replication_factor */
    int stages;              /* ipus_per_replica */
    const int *block_stage;  /* stage of each of the model's blocks (non-decreasing) */
    int micro_batches;       /* per replica per step: gradient_accumulation_steps */
    brg_schedule_kind schedule;
    size_t device_memory;    /* arena budget per device in bytes; 0 = unlimited */
    bool training;           /* false: forward only, no gradients */
    bool recompute;          /* recompute_checkpoint_every_layer: keep block inputs only */
    bool pin_threads;        /* pin device d's thread to core d mod the cores available */
    int intra_threads;       /* threads per device for its matrix products; 0 or 1: one */
    /* What every device computes with: its arena's memory, its copies, its kernels (the autograd
     * ops', the executor's, the norm's and the optimizer's). NULL: brg_backend_cpu(). */
    const brg_backend *backend;
    /* Replica 0 computes on the model's own parameter memory instead of copies (each parameter
     * on the stage whose block owns it; tied copies on other stages stay copies), so a run holds
     * its weights once and the model follows training step by step. The bytes still count
     * against each device's budget. For callers that own the model for the run (the trainer). */
    bool params_in_model;
    /* Inference only: every device computes on the model's parameter memory, read-only, instead
     * of copies (the bytes still count against each device's budget): the model's weights are
     * an executable-cache entry's mapped pages, which the OS shares (brigade/exe_cache.h). */
    bool params_shared;
    /* The type every device's matrix products round their operands to (brg_compute_dtype_set):
     * F32 (the default) leaves them; F16 or BF16 for the reduced precision modes. */
    brg_dtype compute_dtype;
    /* Training: the type the ops store activations in (brg_tape_set_activation_dtype): F32 (the
     * default, also when 0) or F16 / BF16 (the .16 modes), which halves what a micro-batch holds
     * and what stages send each other. Gradients stay F32. */
    brg_dtype activation_dtype;
    /* ZeRO-1 (replicated_tensor_sharding): a run reduce-scatters the gradients instead of
     * all-reducing them. Each device then holds the sum over every copy only for its replica's
     * shard of each parameter it holds (brg_shard_range), bit for bit the all-reduce's sum there;
     * its other elements keep its own contribution. The norm reads the shards. */
    bool shard_gradients;
    /* Training: each device that runs several micro-batches a step packs the weights its linear
     * layers multiply by into the GEMM kernel's panels once per run and reads them in every
     * micro-batch (runtime/packed_weights.h; the same bits). It holds both layouts of those
     * weights (brg_plan_options packed_weights counts them); a pack its budget has no room for keeps the
     * plain product. The trainer sets it where brg_plan_packs_weights says so (bf16 products) and the
     * memory plan has room. */
    bool pack_weights;
} brg_runtime_options;

/* One micro-batch's inputs by name (host memory, read by every stage of its replica): what the
 * stages' bundles start from (brg_bundle.inputs). */
typedef brg_tensor_map brg_micro_batch;

/* Where micro-batch `a` (a gradient-accumulation step in training, a device iteration in
 * inference) of replica `replica` starts in its step's rows: PopTorch deals a batch's
 * micro-batches out to the replicas in turn, so rows are laid out [a, replica, micro]. */
static inline int64_t brg_micro_batch_first_row(int a, int replica, int replicas, int64_t micro) {
    return ((int64_t)a * replicas + replica) * micro;
}

typedef struct brg_device brg_device;
typedef struct brg_runtime brg_runtime;

brg_status brg_runtime_create(brg_model *model, const brg_runtime_options *opts, brg_runtime **out);
void brg_runtime_destroy(brg_runtime *rt);

int brg_runtime_device_count(const brg_runtime *rt);
brg_device *brg_runtime_device(brg_runtime *rt, int id);

/* Runs the schedule over micro-batches mbs[replica * micro_batches + m]. Each micro-batch's
 * loss is its share of the global mean (see brg_cross_entropy_share) for the global batch's
 * counted loss items (brg_model_count_loss_items over all micro-batches; NULL: each
 * micro-batch's own mean); losses[replica * micro_batches + m] receives them. In training the
 * gradients are then reduced across all copies of each parameter, in device order. */
brg_status brg_runtime_run(brg_runtime *rt, const brg_micro_batch *mbs, const brg_loss_items *denominators,
                           uint64_t seed, float *losses);

/* Loss scaling: the gradient backward starts from at the loss for the runs that follow (1 by
 * default), so every gradient the run leaves is `scale` times the loss's. The losses reported
 * stay unscaled. */
void brg_runtime_set_loss_scale(brg_runtime *rt, float scale);

/* Forward only (a runtime created with training false): as brg_runtime_run, and the last
 * stage copies each micro-batch's logits into logits[replica * micro_batches + m] (caller
 * buffers of the logits' size; NULL entries are skipped). */
brg_status brg_runtime_infer(brg_runtime *rt, const brg_micro_batch *mbs, const brg_loss_items *denominators,
                             float **logits, float *losses);

/* Forward only, as brg_runtime_infer, with the logits collected whole and their shape taken
 * from what the model's last block gives (no buffers sized in advance): micro-batch mbs[i]'s
 * logits [b_i, ...] fill rows [first_rows[i], first_rows[i] + b_i) of one [rows, ...] tensor
 * that the first micro-batch to finish allocates in `host` and *logits receives (NULL on
 * failure). Every micro-batch must give the same dimensions past the first; the caller's
 * micro-batches tile the rows. The last stages write `host` under a lock, so any arena the
 * caller is not using meanwhile will do. */
brg_status brg_runtime_infer_collect(brg_runtime *rt, const brg_micro_batch *mbs, const int64_t *first_rows,
                                     int64_t rows, const brg_loss_items *denominators, brg_arena *host,
                                     brg_tensor **logits, float *losses);

/* Per-device hooks for what follows the gradients (optimizer steps, zeroing): `fn` runs on every
 * device's own thread, in parallel. A device that fails aborts the others' waits on the
 * transport; the status and message of the one that failed first are returned, prefixed with
 * "device N (replica R, stage S): ". */
typedef brg_status (*brg_device_fn)(brg_device *dev, void *arg);
brg_status brg_runtime_each_device(brg_runtime *rt, brg_device_fn fn, void *arg);

/* A device's view: its parameters (NULL tensor for those it does not hold). */
typedef struct brg_device_info {
    int id, replica, stage;
    int first_block, last_block;
    brg_model *view;  /* the model with this device's parameter copies */
    const bool *holds; /* [n_params] */
} brg_device_info;
void brg_device_get_info(const brg_device *dev, brg_device_info *info);
brg_arena *brg_device_arena(brg_device *dev);
/* The backend the device computes with (brg_runtime_options.backend). */
const brg_backend *brg_device_backend(const brg_device *dev);

/* ZeRO-1 (replicated_tensor_sharding) cuts every parameter of n elements into BRG_SHARD_PARTS
 * parts, part k being elements [n k / P, n (k + 1) / P), and replica r of `replicas` owns the
 * optimizer state, the gradient sum and the update of parts [P r / replicas, P (r + 1) / replicas).
 * The gradient norm is summed part by part (brg_runtime_grad_sq_norm), so it comes out the same
 * whether one device holds a whole gradient or each replica its shard. P is divisible by every
 * replica count up to 6 and by 8, 10, 12, 16, 32 and 64: for those the shards are exactly
 * [n r / replicas, n (r + 1) / replicas). */
enum { BRG_SHARD_PARTS = 960 };
static inline void brg_shard_part_range(int64_t n, int part, int64_t *first, int64_t *count) {
    *first = n * part / BRG_SHARD_PARTS;
    *count = n * (part + 1) / BRG_SHARD_PARTS - *first;
}
static inline void brg_shard_parts(int replica, int replicas, int *first_part, int *end_part) {
    *first_part = (int)((int64_t)BRG_SHARD_PARTS * replica / replicas);
    *end_part = (int)((int64_t)BRG_SHARD_PARTS * (replica + 1) / replicas);
}
static inline void brg_shard_range(int64_t n, int replica, int replicas, int64_t *first, int64_t *count) {
    int k0, k1;
    brg_shard_parts(replica, replicas, &k0, &k1);
    *first = n * k0 / BRG_SHARD_PARTS;
    *count = n * k1 / BRG_SHARD_PARTS - *first;
}
/* After every replica updated its shard of each parameter it holds (and nothing else), each
 * copy gets every other shard from the copy that updated it (that replica's device on the
 * stage of the parameter's owning block), bit for bit: all copies are identical again. Called
 * on every device, from a brg_device_fn (the transport's all-gather). */
brg_status brg_device_gather_shards(brg_device *dev);

/* Sum of squared gradients over the distinct parameters (each counted once): each part of each
 * parameter (brg_shard_part_range) summed on a device holding its reduced gradient (the parts
 * shared out among the parameter's copies, and a device's parts over its team; with
 * shard_gradients, its shard's replica), then the parts added on the host in (parameter, part)
 * order, so the result depends on neither timing, sharding, replicas nor threads. */
brg_status brg_runtime_grad_sq_norm(brg_runtime *rt, double *out);
/* Scales every device's gradients (clipping), on the devices' threads. */
brg_status brg_runtime_scale_grads(brg_runtime *rt, float factor);
/* Zeroes every device's gradients as of the next brg_runtime_run: rather than clearing them
 * now, each buffer is marked (grad_zero_pending), the run's first backward write to it
 * overwrites instead of adding, and the run clears whatever no backward wrote. Read gradients
 * after a run, not between this call and the next run. */
brg_status brg_runtime_zero_grads(brg_runtime *rt);

/* Copies the weights back into the model given at creation (replica 0; the owner's copy of a
 * tied parameter), e.g. before saving: each owner sends its copies to device 0, which writes
 * them into the model. */
brg_status brg_runtime_sync_to_model(brg_runtime *rt);
/* Copies the model's weights onto every device (e.g. after loading a checkpoint): device 0
 * broadcasts them. */
brg_status brg_runtime_sync_from_model(brg_runtime *rt);

/* What device `dev` contributes to brg_runtime_gather, called on its own thread: up to `cap`
 * named tensors of its own into list[0..cap) (list NULL and cap 0 the first time); returns how
 * many it has, and is called again with room for them all. */
typedef int (*brg_gather_fn)(brg_device *dev, void *arg, brg_named_tensor *list, int cap);
/* Collects every device's tensors (as `fn` lists them) onto the host through the transport, in
 * device order: copies, names included, allocated in `host`, listed in (*out)[0..*n) (also in
 * `host`; destroying it frees them). */
brg_status brg_runtime_gather(brg_runtime *rt, brg_gather_fn fn, void *arg, brg_arena *host, brg_named_tensor **out,
                              size_t *n);

/* Across ranks (mpirun; see brigade/ranks.h) every rank runs its own devices of the same layout
 * and the same host code; the values above that the host reads (losses, the norm, collected
 * logits, the statistics below) are the same on every rank. How many ranks the devices are
 * spread over (1 in one process) and this process's (*rank; 0 in one process). */
int brg_runtime_ranks(const brg_runtime *rt, int *rank);
/* Rank 0's *flag on every rank (a host decision, such as stopping on a signal, that every rank
 * must take at the same step); unchanged in one process. */
brg_status brg_runtime_host_flag(brg_runtime *rt, bool *flag);

typedef struct brg_device_stats {
    double busy_seconds;  /* computing, not waiting on channels */
    size_t peak_bytes;    /* the arena's peak */
    size_t activation_peak_bytes; /* peak above the persistent state */
    /* The most one micro-batch's activation slot held: its activations, their gradients and its
     * stage input copies (kernel scratch, shared by every micro-batch, apart). */
    size_t micro_batch_peak_bytes;
} brg_device_stats;
void brg_runtime_device_stats(const brg_runtime *rt, int device, brg_device_stats *out);
/* Wall time spent running schedules (forward and backward passes, from the first device's
 * start to the last one's end), summed over runs: pipeline efficiency is the devices' busy time
 * over devices x this. */
double brg_runtime_schedule_seconds(const brg_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
