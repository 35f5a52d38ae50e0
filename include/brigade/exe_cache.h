/* The executable cache (IPUConfig executable_cache_dir): what starting an inference pipeline
 * prepares before its first output is kept in one file per model and command, so a second start
 * maps it instead of preparing it again.
 *
 * On IPUs the cache holds the compiled executable. Here a start prepares the model's weights in
 * F32 (read from the checkpoint, widened from F16/BF16, a missing head initialised), the
 * placement of the blocks on the devices and each device's packed weights (its linear and LM-head
 * weights in the GEMM kernel's B-panel layout, packed at their first use). An entry holds the
 * prepared weights (each parameter once, 64-byte aligned, in a file that is mapped whole), the
 * placement and the packed weights; a start from it points the model's parameters into the
 * mapping and lets every device compute on those pages (read-only for them; the OS shares them)
 * and read its panels there: no checkpoint read, no conversion, no packing.
 *
 * An entry is keyed by hashes of the model's config.json, the weights files' identity (resolved
 * path, size, mtime, inode and safetensors header), the IPUConfig, the inputs' names, dtypes and
 * shapes, the precision, the CPU (cpuid feature flags, BRIGADE_ISA, BRIGADE_GEMM, BRIGADE_SIMD and
 * the kernels they select, with the packing layout) and the brigade version. An entry that is truncated, has the wrong
 * magic or version, another key or a checksum that does not match its bytes is never used: one
 * warning line on stderr says which, and the start prepares afresh and writes it again
 * (atomically: a kill mid-write leaves the old entry or none). "" and "disabled" turn it off,
 * as upstream; a folder that cannot be created or written is one warning and an uncached run.
 * Under mpirun (more than one rank) the cache is not used. */
#ifndef BRIGADE_EXE_CACHE_H
#define BRIGADE_EXE_CACHE_H

#include <stdbool.h>

#include "brigade/ipu_config.h"
#include "brigade/model.h"
#include "brigade/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_cached_inference_request {
    const char *model_ref;             /* model folder or hub id (brg_model_load) */
    const brg_ipu_config *cfg;         /* in inference mode; executable_cache_dir says where */
    const brg_inference_options *opts; /* or NULL */
    const brg_named_tensor *inputs;    /* the batch's inputs (names, dtypes and shapes are keyed) */
    int n_inputs;
    const char *tool; /* names the entry and leads the messages: "forward" */
    /* The caller runs the pipeline before it uses any output and calls
     * brg_cached_inference_confirm in between: an entry's weights and packed panels are then
     * checked against their checksum in the background, on the cores the pipeline leaves idle,
     * instead of before the start (the header and the table are checked at once either way).
     * The request's pointers must then stay valid until the confirmation. */
    bool confirm_later;
} brg_cached_inference_request;

typedef struct brg_cached_inference brg_cached_inference;

/* The model and its inference pipeline, from the cache when it holds a valid entry, else loaded
 * and prepared as brg_model_load and brg_inference_create do. Errors are the loading's. */
brg_status brg_cached_inference_open(const brg_cached_inference_request *rq, brg_cached_inference **out);
brg_model *brg_cached_inference_model(const brg_cached_inference *c);
brg_inference *brg_cached_inference_pipeline(const brg_cached_inference *c);
/* True when this start came from a cache entry (with confirm_later: until
 * brg_cached_inference_confirm, an entry not yet checked whole). */
bool brg_cached_inference_hit(const brg_cached_inference *c);
/* With confirm_later, after running the pipeline and before using any output: waits for the
 * entry's check. When the entry turns out damaged, it says so (one warning on stderr), drops it
 * and prepares the model and pipeline afresh as an uncached start does; *again is then true and
 * the caller must take brg_cached_inference_model / _pipeline anew and run again (the entry is
 * rewritten by brg_cached_inference_store). Otherwise (and for uncached starts) *again is false.
 * Errors are the fresh preparation's. */
brg_status brg_cached_inference_confirm(brg_cached_inference *c, bool *again);
/* After the first output: writes the entry when the cache is on and this start prepared afresh.
 * A failure is one warning line on stderr (the run stays good), never an error. */
void brg_cached_inference_store(brg_cached_inference *c);
void brg_cached_inference_close(brg_cached_inference *c);

#ifdef __cplusplus
}
#endif
#endif
