/* Precision modes as Graphcore's examples name them: compute type . master-weight type.
 *
 *   32.32    fp32 everywhere (the default)
 *   16.32    matrix products on fp16-rounded operands, fp32 accumulation; fp32 master weights,
 *            gradients and optimizer state (PyTorch autocast's float16 on CPU)
 *   bf16.32  the same with bfloat16 (autocast's bfloat16)
 *   16.16    fp16 products; weights, gradients and optimizer state held in fp16 (model.half())
 *   bf16.16  the same in bfloat16 (model.to(torch.bfloat16))
 *
 * docs/precision.md says which ops run in which type. */
#ifndef BRIGADE_PRECISION_H
#define BRIGADE_PRECISION_H

#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_precision {
    BRG_PRECISION_32_32 = 0,
    BRG_PRECISION_16_32,
    BRG_PRECISION_16_16,
    BRG_PRECISION_BF16_32,
    BRG_PRECISION_BF16_16,
    BRG_PRECISION_COUNT
} brg_precision;

/* "32.32", "16.32", "16.16", "bf16.32", "bf16.16" (also "fp32.32", "fp16.32", "fp16.16" and
 * upper case, as Graphcore's examples spell them); an error naming the accepted values otherwise. */
brg_status brg_precision_parse(const char *text, brg_precision *out);
const char *brg_precision_name(brg_precision p);
/* The type matrix products read their operands in: F32, F16 or BF16. */
brg_dtype brg_precision_compute_dtype(brg_precision p);
/* The type weights, gradients and optimizer state are held in: F32, F16 or BF16. */
brg_dtype brg_precision_master_dtype(brg_precision p);
/* The type training holds activations in (brg_runtime_options.activation_dtype): the compute
 * type in the .16 modes (as a half model's activations), F32 in the others (autocast keeps its
 * non-product outputs in fp32). */
brg_dtype brg_precision_activation_dtype(brg_precision p);

/* The calling thread's product precision: every matrix product (brg_gemm) it runs afterwards
 * rounds its operands to `dtype` (F16 or BF16, round to nearest even) and accumulates in fp32;
 * F32 (the default of every thread) leaves them as they are. Threads of a device's GEMM team
 * follow the thread that splits the work. Returns the previous setting. */
brg_dtype brg_compute_dtype_set(brg_dtype dtype);
brg_dtype brg_compute_dtype(void);
/* BRG_OK for a type products can compute in (F32, F16, BF16), else an error naming it: for
 * options that carry one (brg_inference_options.compute_dtype). */
brg_status brg_compute_dtype_check(brg_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
