/* The model registry: which code builds a model, given config.json's architectures[0] (or its
 * model_type), and the placement of a model's blocks on devices from an IPUConfig
 * (optimum-graphcore's parallelize / deparallelize). */
#ifndef BRIGADE_REGISTRY_H
#define BRIGADE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "brigade/ipu_config.h"
#include "brigade/model.h"
#include "brigade/placement.h"
#include "brigade/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the device-allocation log names the blocks (upstream's logging in each model's
 * parallelize). Each label is printed followed by "--> IPU n". */
typedef struct brg_alloc_labels {
    const char *embeddings[3]; /* lines for the embeddings block; NULL ends the list early */
    const char *layer;         /* "Encoder": printed as "<layer> <index, left-aligned in 2><gap>" */
    const char *layer_gap;     /* the blank(s) between the index and "-->" */
    const char *head;
    /* Encoder-decoder models: layer blocks whose name starts with decoder_prefix ("decoder.")
     * print as "<decoder_layer> <index within the decoder>". Optional. */
    const char *decoder_layer;
    const char *decoder_prefix;
    /* The rules above and below the lines; NULL: upstream's usual ones. */
    const char *header;
    const char *footer;
} brg_alloc_labels;

typedef struct brg_model_arch {
    const char *architecture; /* config.json architectures[0], e.g. "GPT2LMHeadModel" */
    const char *model_type;   /* used when config.json has no architectures, e.g. "gpt2" */
    /* Loads config.json and the weights of a model folder. Required. */
    brg_status (*load_dir)(const char *dir, brg_model **out);
    /* Builds the model from config.json alone, weights zeroed (for planning). Optional. */
    brg_status (*create_dir)(const char *dir, brg_model **out);
    /* The cost of block `block` for a micro-batch of `batch` sequences of `seq` tokens, except
     * its params (counted from the parameter list). Optional: without it, plans show memory
     * for parameters only and no compute. */
    brg_status (*block_cost)(const brg_model *m, int block, int64_t batch, int64_t seq, brg_block_cost *out);
    brg_alloc_labels labels; /* zeroed: "Embedding", "Encoder", "Head" */
} brg_model_arch;

/* Adds an architecture, or replaces the one of the same name (as upstream's registry dict
 * does). The strings and functions must stay valid while the process runs. Thread-safe. */
brg_status brg_register_model(const brg_model_arch *arch);

/* The entry for architectures[0] == architecture, else (architecture NULL or "") the first whose
 * model_type matches; NULL if none. */
const brg_model_arch *brg_model_arch_find(const char *architecture, const char *model_type);
/* The entry a built model came from (by its ops->architecture); NULL if unregistered. */
const brg_model_arch *brg_model_arch_of(const brg_model *m);
/* The registered architecture names, ", "-separated, for messages. */
const char *brg_model_arch_names(char *buf, size_t len);

/* Builds a model from a folder or cached hub id without reading its weights (zeroed); falls
 * back to loading the weights when the architecture has no create_dir. */
brg_status brg_model_create_from_config(const char *ref, brg_model **out);

/* Places every block for `mode`: embeddings on device 0, layers by get_layer_ipu, the head on
 * the last device (ipus_per_replica - 1 of that mode). Errors as brg_ipu_config_expand_layers;
 * execute_encoder_on_cpu_for_generation=true is unsupported. Free with brg_placement_free. */
brg_status brg_model_parallelize(const brg_model *m, const brg_ipu_config *cfg, brg_ipu_mode mode,
                                 brg_placement *out);

/* The device-allocation log, as upstream prints it, e.g.
 *   -------------------- Device Allocation --------------------
 *   Embedding --> IPU 0
 *   Encoder 0  --> IPU 0
 *   ...
 *   Head --> IPU 3
 *   -----------------------------------------------------------
 * The library prints only through this function. */
void brg_placement_print(FILE *out, const brg_model *m, const brg_placement *p);

/* The plain state dict: every parameter once under its transformers name, in model order
 * (tied weights once, under the owner's name). *out is malloc'd (free() it); names and tensors
 * point into the model. */
brg_status brg_model_deparallelize(const brg_model *m, brg_named_tensor **out, size_t *n);

/* Costs of every block (out has m->n_blocks entries): params from the parameter list, the rest
 * from the architecture's block_cost. */
brg_status brg_model_block_costs(const brg_model *m, int64_t batch, int64_t seq, brg_block_cost *out);

#ifdef __cplusplus
}
#endif
#endif
