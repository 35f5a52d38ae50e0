/* IPUConfig glue: the runtime options an IPUConfig's mode gives a placed model, and a model run
 * forward as the inference pipeline an IPUConfig's inference_* attributes describe (what
 * `brigade forward --ipu-config` and `brigade embed --ipu-config` run). The training side is
 * brg_train_options_from_ipu_config (brigade/trainer.h). */
#ifndef BRIGADE_PIPELINE_H
#define BRIGADE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/ipu_config.h"
#include "brigade/model.h"
#include "brigade/placement.h"
#include "brigade/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime options of `mode`'s view of cfg for a model that brg_model_parallelize placed in
 * the same mode (pl->mode == mode): replicas = replication_factor, stages = pl->n_devices,
 * block_stage = pl->block_device (borrowed: pl must outlive the options), micro_batches =
 * gradient_accumulation_steps in training and device_iterations in inference (the micro-batches
 * one replica runs per call), training, recompute = recompute_checkpoint_every_layer in training,
 * the 1F1B schedule; everything else zero (one thread per device, no memory budget). */
brg_status brg_runtime_options_from_ipu_config(const brg_ipu_config *cfg, brg_ipu_mode mode, const brg_placement *pl,
                                               brg_runtime_options *out);

/* Rows per micro-batch of a batch of `rows` rows run as cfg's inference pipeline. PopTorch's rule:
 * the batch splits into inference_device_iterations x inference_replication_factor micro-batches,
 * so it must be a multiple of that product; otherwise an error naming both. */
brg_status brg_inference_micro_batch(const brg_ipu_config *cfg, int64_t rows, int64_t *micro);

/* How the devices run; zeroed (or NULL) is one thread per device, no memory budget, no pinning. */
typedef struct brg_inference_options {
    size_t device_memory; /* arena budget per device in bytes; 0: unlimited */
    bool pin_threads;     /* pin device d's thread to core d mod the cores available */
    int intra_threads;    /* threads per device for its matrix products; 0 or 1: one */
    bool share_params;    /* devices compute on the model's weights, read-only, instead of copies
                           * (brg_runtime_options.params_shared: an executable-cache start) */
    /* The type the devices' matrix products round their operands to, accumulating in fp32
     * (BRG_DTYPE_F32, the default, F16 or BF16: brg_compute_dtype_set); everything else stays
     * fp32, as in training's --precision X.32 modes. */
    brg_dtype compute_dtype;
} brg_inference_options;

/* A model placed for inference (brg_model_parallelize in inference mode: embeddings on IPU 0,
 * layers by inference_layers_per_ipu, the head on the last IPU) on a runtime made for forward
 * passes, inference_replication_factor replicas of inference_ipus_per_replica stages, each call
 * running inference_device_iterations micro-batches per replica. The devices take copies of the
 * model's weights when it is created; the model must outlive it. Reusable for any number of
 * batches. */
typedef struct brg_inference brg_inference;

brg_status brg_inference_create(brg_model *model, const brg_ipu_config *cfg, const brg_inference_options *opts,
                                brg_inference **out);
/* brg_inference_create over a placement already made (an executable-cache entry's), which is
 * checked against the model as brg_runtime_create checks any and copied. */
brg_status brg_inference_create_placed(brg_model *model, const brg_ipu_config *cfg, const brg_inference_options *opts,
                                       const brg_placement *placement, brg_inference **out);
void brg_inference_destroy(brg_inference *inf);
/* Where the blocks run (for brg_placement_print). */
const brg_placement *brg_inference_placement(const brg_inference *inf);
/* Rows a batch must be a multiple of: inference_replication_factor x inference_device_iterations. */
int64_t brg_inference_batch_multiple(const brg_inference *inf);

#define BRG_INFERENCE_MAX_OUTPUTS 8

typedef struct brg_inference_outputs {
    /* The head's output for the whole batch, [B, ...], as the model packs it (brg_bundle's
     * logits); its shape is the one the model's last block gives, learnt during the run. */
    brg_tensor *logits;
    /* F32 []: the batch's loss (each micro-batch's share of the mean over the whole batch's
     * counted labels, summed) when the batch has labels; else NULL. */
    brg_tensor *loss;
    /* The model's named outputs (brg_model_outputs): logits; start_logits and end_logits;
     * last_hidden_state and pooler_output; ... */
    brg_named_tensor named[BRG_INFERENCE_MAX_OUTPUTS];
    int n_named;
} brg_inference_outputs;

/* Runs a batch through the pipeline. `batch` holds the inputs by name ([B, ...] host tensors, as
 * brg_inputs_load gives them); it splits into micro-batches of m = B / (replicas x
 * device_iterations) rows, micro-batch a of replica r starting at row
 * brg_micro_batch_first_row(a, r, replicas, m) as PopTorch deals them out. Outputs and
 * scratch go in `arena` (which the devices' last stages write during the run: the caller must
 * not use it from another thread meanwhile). */
brg_status brg_inference_run(brg_inference *inf, const brg_tensor_map *batch, brg_arena *arena,
                             brg_inference_outputs *out);

/* One batch through cfg's inference pipeline: brg_inference_create, brg_inference_run,
 * brg_inference_destroy. */
brg_status brg_infer(brg_model *model, const brg_ipu_config *cfg, const brg_tensor_map *batch, brg_arena *arena,
                     brg_inference_outputs *out);

#ifdef __cplusplus
}
#endif
#endif
