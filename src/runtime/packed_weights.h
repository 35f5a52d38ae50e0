/* Packed weights: a device packs the weight matrices its linear layers multiply by (through the
 * provider bound to its thread: brg_k_linear_fwd, and brg_k_linear_bwd's input gradient) into the
 * GEMM kernel's B-panel layout once, and the products that follow read the panels (kernels.h,
 * brg_gemm_packed: the same bits as the plain product). Only the device's own parameter memory is
 * packed (never an activation that happens to be an operand).
 *
 * An inference device packs each weight at its first use and keeps the panels for every later
 * micro-batch and run. A training device that runs several micro-batches a step (gradient
 * accumulation, a pipeline's micro-batches) where its plan packs (brg_plan_packs_weights: bf16
 * panels) packs per run instead: its weights change between runs (the optimizer), never within
 * one, so each panel is packed again at its first use in a run (between packed_weights_begin_run
 * and _end_run; outside a run it offers none) and read by every other micro-batch of the run,
 * forward and backward alike (two layouts of each weight: W for x @ W, W^T for dy @ W^T).
 *
 * Memory: the plain weights stay (the embedding reads a tied LM head's table, other backends and
 * the reduced compute types read the plain matrix); each packed copy counts in the device's memory
 * as borrowed bytes (brg_arena_borrow: its peak and stats include them). A training device packs
 * only where its memory plan counted the panels (brg_runtime_options pack_weights, brg_plan_options
 * packed_weights), within its budget if it has one. An inference device with a memory budget
 * (device_memory) packs nothing: the budget was sized for the plain products, and packs taken
 * early in a run could leave its later activations without room. Internal to the runtime. */
#ifndef BRIGADE_RUNTIME_PACKED_WEIGHTS_H
#define BRIGADE_RUNTIME_PACKED_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/model.h"
#include "brigade/pipeline.h"
#include "brigade/runtime.h"
#include "kernels/kernels.h"

typedef struct packed_weights packed_weights;

/* For a device computing on `view`'s parameters (those with holds[p]), counting in `arena`;
 * per_run: a training device's (packed again in every run). */
brg_status packed_weights_create(const brg_model *view, const bool *holds, brg_arena *arena, bool per_run,
                                 packed_weights **out);
void packed_weights_destroy(packed_weights *pw);
/* Makes pw (NULL: none) the provider of this thread's linear products (brg_packed_weights_bind). */
void packed_weights_bind(packed_weights *pw);
/* The parameters were overwritten (brg_runtime_sync_from_model): packs them again (per run: the
 * next run does). */
void packed_weights_refresh(packed_weights *pw);
/* A run of the device's micro-batches starts or ends (executor_run_device); pw may be NULL. A
 * per-run store offers panels only in between, each packed from the weights of this run. */
void packed_weights_begin_run(packed_weights *pw);
void packed_weights_end_run(packed_weights *pw);

/* One packed weight as the executable cache stores it: parameter p's matrix as op(B). */
typedef struct packed_weight_record {
    int param;
    brg_gemm_pack_layout layout;
    bool trans_b;
    int64_t K, N, ldb;
    const void *panels;
    uint64_t bytes;
    uint64_t devices; /* bit d: device d reads it (devices past 63 share bit 63) */
} packed_weight_record;

/* Every weight some device of the runtime packed, each (param, shape, layout) once with the
 * devices that read it, into a malloc'ed array (*out NULL and *n 0 when none). */
brg_status packed_weights_collect(brg_runtime *rt, packed_weight_record **out, int *n);
/* Panels packed already (a mapped cache entry, which must outlive rt) for the devices in
 * r->devices that hold the parameter; a device whose budget refuses the bytes packs nothing of its own for it
 * either and keeps the plain product. */
void packed_weights_adopt(brg_runtime *rt, const packed_weight_record *r);

/* inference.c: the runtime under an inference pipeline. */
brg_runtime *inference_runtime(const brg_inference *inf);

#endif
