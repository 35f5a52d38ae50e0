/* Layer placement from an IPUConfig (optimum-graphcore's get_layer_ipu, the -1 wildcard and the
 * encoder/decoder split), and the per-device plan: what each device holds and computes. */
#ifndef BRIGADE_PLACEMENT_H
#define BRIGADE_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/ipu_config.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "The model's layer count is not known": the lists are returned as written. */
#define BRG_LAYERS_UNSPECIFIED (-1)

/* layers_per_ipu of cfg->mode with its -1 wildcards resolved for a model of n_layers layers:
 *  - ipus_per_replica == 1: every layer on IPU 0, whatever layers_per_ipu says;
 *  - [-1] or all -1: an even split, the remainder on the last IPU;
 *  - some -1: the layers not placed explicitly split evenly over the wildcard IPUs, the
 *    remainder on the last wildcard IPU;
 *  - otherwise the list must have ipus_per_replica entries and sum to n_layers.
 * Errors name the attribute (inference_layers_per_ipu in inference mode) and its value. With
 * n_layers == BRG_LAYERS_UNSPECIFIED the list is copied unchanged. */
brg_status brg_ipu_config_expand_layers(const brg_ipu_config *cfg, int n_layers, brg_ipu_list *out);

/* The one judgement of an IPU left without work, shared by `config validate --layers`, `plan` and
 * `train` so they refuse the same configs with the same words: the error for `ipu` of the
 * expanded per-IPU layer counts, naming the attribute, its value and the counts. (A pipeline
 * stage must run something; upstream would leave that IPU idle.) */
brg_status brg_ipu_config_empty_ipu_error(const brg_ipu_config *cfg, const brg_ipu_list *counts, int n_layers,
                                          int ipu);

/* The IPU of every layer (upstream's get_layer_ipu): `count` entries written to layer_ipu,
 * which has room for `cap`. */
brg_status brg_ipu_config_get_layer_ipu(const brg_ipu_config *cfg, int n_layers, int *layer_ipu, int cap,
                                        int *count);

/* Splits a config for an encoder-decoder model run as two pipelines: the cut is the largest
 * power-of-two IPU count whose layers add up to n_encoder. Each half gets its layers,
 * ipus_per_replica, matmul_proportion (when a list) and serialized splits (embedding splits on
 * the encoder, projection splits on the decoder), all in cfg->mode; everything else is copied. */
brg_status brg_ipu_config_split_encoder_decoder(const brg_ipu_config *cfg, int n_encoder, int n_decoder,
                                                brg_ipu_config *encoder, brg_ipu_config *decoder);

/* Where a model's blocks run: produced by brg_model_parallelize (brigade/registry.h). */
typedef struct brg_placement {
    brg_ipu_mode mode;
    int n_devices;     /* ipus_per_replica of the mode: the pipeline stages of one replica */
    int n_blocks;
    int *block_device; /* [n_blocks] */
    int n_layers;
    int *layer_device; /* [n_layers]: get_layer_ipu */
} brg_placement;

void brg_placement_free(brg_placement *p);

/* ---- per-device plan ---------------------------------------------------------------------- */

/* Kernel scratch buffers a thread keeps (attention's score rows, ...): brg_scratch's slots. */
#define BRG_PLAN_SCRATCH_SLOTS 17
/* The slots where matrix products put their operands rounded to a 16-bit compute type (the
 * precision modes other than 32.32; brg_plan_options half_products). */
#define BRG_PLAN_SCRATCH_ROUNDED_A 4
#define BRG_PLAN_SCRATCH_ROUNDED_B 5
/* The slots where ops widen half activations to fp32 (brg_plan_options half_activations). */
#define BRG_PLAN_SCRATCH_STAGE 6

/* Whether training devices that run `micro_batches` a step with products in `compute` pack the
 * weights their linear layers multiply by once a step (brg_runtime_options pack_weights): only
 * bf16 products with 2 or more micro-batches, into the bf16 kernel's panels. Not one micro-batch
 * (nothing reuses the panels), nor fp16 products (no kernel packs them), nor fp32 ones (their
 * panels are the weight's own bytes: reading them costs what packing from the weight costs).
 * Whether this CPU's bf16 kernel has panels shows in brg_block_cost packed_bytes. */
bool brg_plan_packs_weights(int micro_batches, brg_dtype compute);

/* Estimated cost of one block for one micro-batch (filled by the model's architecture). Memory is
 * in bytes as a device's arena counts them: every tensor a header and its data, each rounded up
 * to BRG_ARENA_ALIGN. An architecture that leaves a field 0 makes the plan count nothing for it. */
typedef struct brg_block_cost {
    int layer;           /* layer index, or -1 for embeddings and head */
    int64_t params;      /* parameters the block owns (a tied weight counts at its owner) */
    int64_t tied_params; /* parameters it uses that another block owns (a tied LM head) */
    int tied_owner;      /* that block, or -1 */
    double flops;        /* forward FLOPs */
    /* training: all that its recorded forward allocates (outputs, saved statistics, autograd
     * contexts), which the micro-batch holds until its backward is done */
    int64_t saved_bytes;
    /* a copy of its carried inputs (hidden states; for a decoder, the encoder output too), as a
     * pipeline stage that starts with this block receives them; in training, those it uses get a
     * gradient of input_grad_bytes */
    int64_t input_bytes;
    int64_t input_grad_bytes;
    int64_t grad_bytes;      /* training: the activation gradients its backward allocates */
    /* training: the part of grad_bytes its backward releases again when it ends (the gradients of
     * its own outputs but those it hands on, which live to the micro-batch's end); 0: it keeps
     * them all */
    int64_t released_grad_bytes;
    int64_t forward_bytes;   /* inference: all that its forward allocates */
    /* The largest request its ops make of each kernel scratch buffer (per thread, kept: a device
     * needs the largest over its blocks of each), in training and in inference. Slots 4 and 5
     * are the operands matrix products round to a 16-bit compute type (brg_plan_options
     * half_products); team_: what each of a device's other team threads asks for (the ops that
     * split across the team, attention by heads). */
    int64_t scratch_bytes[BRG_PLAN_SCRATCH_SLOTS];
    /* Training: the bf16 panels of the weights its linear layers multiply by, as a device that
     * packs them once a step holds them (brg_plan_options packed_weights; both products' layouts
     * of each); 0 where this CPU's bf16 kernel has no panels */
    int64_t packed_bytes;
    int64_t forward_scratch_bytes[BRG_PLAN_SCRATCH_SLOTS];
    int64_t team_scratch_bytes[BRG_PLAN_SCRATCH_SLOTS];
    int64_t forward_team_scratch_bytes[BRG_PLAN_SCRATCH_SLOTS];
    /* training with recompute_checkpoint_every_layer (layers only): what the layer keeps between
     * its forward and its backward (copies of its inputs, its output, their gradients) */
    int64_t recompute_bytes;
    /* The same with activations and their gradients held in a 16-bit type (brg_plan_options
     * half_activations: the .16 training modes); the fp32 staging of one op's operands and
     * gradients is in scratch slots 6-16, which only that replay fills. */
    int64_t half_saved_bytes, half_input_bytes, half_recompute_bytes, half_grad_bytes, half_released_grad_bytes;
    /* its parameters as a device holds them, each tensor rounded up (brg_model_block_costs) */
    int64_t param_bytes;
    int param_tensors;
} brg_block_cost;

/* What one device of a replica holds (bytes, FP32 everywhere) and computes, at its peak.
 *  weights:    owned parameters, plus a copy of tied weights owned on another device, with
 *              their tensor headers;
 *  gradients:  the same count (training only);
 *  optimizer:  state per parameter the device holds, copies included (training only; AdamW:
 *              two FP32 moments), 1/optimizer_shards of it with sharded state (ZeRO-1), and
 *              left out of the total when it lives off the device (optimizer_offchip);
 *  activations: every micro-batch in flight on the device at once (in_flight) times what one
 *    holds: training, all its blocks' recorded forwards and their activation gradients (with
 *    recomputation, each layer's kept inputs and output plus one layer rebuilt at a time) and
 *    the stage's input copies; inference, all its blocks' forwards;
 *  scratch: the kernels' per-thread scratch buffers, each sized by the block that needs the most. */
typedef struct brg_device_plan {
    int id;
    int n_blocks;
    int64_t params;
    int64_t weight_bytes, gradient_bytes, optimizer_bytes, activation_bytes, total_bytes;
    double flops;         /* forward FLOPs per micro-batch */
    double compute_share; /* flops / all devices' flops */
    int in_flight;                   /* micro-batches held at once */
    int64_t micro_batch_bytes;       /* activations of one micro-batch */
    int64_t scratch_bytes;           /* counted in total_bytes */
    int64_t packed_bytes;            /* weights packed once a step (brg_plan_options packed_weights); in total_bytes */
    bool optimizer_offchip;          /* optimizer_bytes are host memory, not in total_bytes */
} brg_device_plan;

/* What a plan needs beyond the blocks' costs. */
typedef struct brg_plan_options {
    brg_ipu_mode mode;
    bool recompute;          /* recompute_checkpoint_every_layer (training) */
    /* [n_devices]: micro-batches each device holds at once (the schedule's most in flight on its
     * stage: brg_schedule_max_in_flight in training, every micro-batch of a host call in
     * inference); NULL: one */
    const int *in_flight;
    /* FP32 optimizer state per parameter (training; AdamW and LAMB 2, SGD with momentum 1):
     * brg_optimizer_state_floats; < 0: AdamW's 2 */
    int optimizer_state;
    /* threads per device (--threads-per-device; <= 1: one): each keeps its own copy of the
     * scratch of the ops split across them (brg_block_cost team_scratch_bytes) */
    int threads;
    /* products in a 16-bit compute type (--precision other than 32.32): each rounds its operands
     * into scratch first (slots 4 and 5) */
    bool half_products;
    /* training with activations in a 16-bit type (the .16 modes): the blocks' half_ costs, and
     * the staging scratch (slots 6-16) */
    bool half_activations;
    /* replicated_tensor_sharding: the replicas each keep 1/optimizer_shards of the state (<= 1:
     * all of it); optimizer_state_offchip: the state is outside the device budget */
    int optimizer_shards;
    bool optimizer_offchip;
    /* training: the devices also hold their linear weights packed once a step (brg_block_cost
     * packed_bytes; brg_plan_packs_weights); ignored in inference, whose packing a plan leaves out */
    bool packed_weights;
} brg_plan_options;

/* brg_plan_devices_with(mode, recompute, one micro-batch in flight, AdamW). */
brg_status brg_plan_devices(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                            brg_ipu_mode mode, bool recompute, brg_device_plan *out);
brg_status brg_plan_devices_with(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                                 const brg_plan_options *opts, brg_device_plan *out);

/* A layers_per_ipu for n_devices that evens the load, where a device's load is the larger of
 * its share of all FLOPs and its share of all memory (as brg_plan_devices counts it). Blocks
 * that are not layers stay on the device block_device gives them (embeddings on 0, head on the
 * last) and weigh in; layers stay in order. out->n == n_devices; a device may get 0 layers. */
brg_status brg_plan_balance(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                            brg_ipu_mode mode, bool recompute, brg_ipu_list *out);

/* What a balanced split evens out. Throughput follows compute alone (the slowest stage sets the
 * pipeline's pace); memory matters when a device is short of it. brg_plan_balance is
 * BRG_BALANCE_BOTH. */
typedef enum brg_balance_goal {
    BRG_BALANCE_BOTH = 0, /* the larger of the compute share and the memory share */
    BRG_BALANCE_COMPUTE,  /* the compute share (ties broken by memory) */
    BRG_BALANCE_MEMORY,   /* the memory share (ties broken by compute) */
} brg_balance_goal;

/* "both", "compute" or "memory". */
brg_status brg_balance_goal_parse(const char *name, brg_balance_goal *out);

brg_status brg_plan_balance_for(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                                brg_ipu_mode mode, bool recompute, brg_balance_goal goal, brg_ipu_list *out);

#ifdef __cplusplus
}
#endif
#endif
