/* Tensors: a typed, strided view over memory that an arena (or a mapped file) owns. */
#ifndef BRIGADE_TENSOR_H
#define BRIGADE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_MAX_DIMS 8

typedef enum brg_dtype {
    BRG_DTYPE_F32 = 0,
    BRG_DTYPE_F16,
    BRG_DTYPE_BF16,
    BRG_DTYPE_I32,
    BRG_DTYPE_I64,
    BRG_DTYPE_BOOL,
    BRG_DTYPE_COUNT
} brg_dtype;

/* Bytes per element. */
size_t brg_dtype_size(brg_dtype dtype);
/* F16 or BF16. */
bool brg_dtype_is_half(brg_dtype dtype);
/* The safetensors spelling: "F32", "F16", "BF16", "I32", "I64", "BOOL". */
const char *brg_dtype_name(brg_dtype dtype);
/* Parses a safetensors dtype name; BRG_ERR_UNSUPPORTED for names brigade does not compute with. */
brg_status brg_dtype_from_name(const char *name, brg_dtype *out);

typedef struct brg_tensor {
    brg_dtype dtype;
    int ndim;
    int64_t shape[BRG_MAX_DIMS];
    int64_t stride[BRG_MAX_DIMS]; /* in elements */
    void *data;
    /* Gradient (contiguous, same shape, of grad_dtype) for tensors that take part in backward;
     * NULL until allocated (by the first backward that reaches the tensor, or
     * brg_tensor_ensure_grad). */
    float *grad;
    /* F32 (0, every tensor's default), or F16 / BF16 for the half activations of a .16 run's ops
     * (brg_tape_set_activation_dtype): the buffer then holds 16-bit values, which only the tape
     * reads and writes (brg_tape_grad hands backward functions fp32 copies). */
    brg_dtype grad_dtype;
    /* Where that first backward allocates the gradient: a parameter's model arena, so that it
     * outlives the tape (a model that only runs forward never pays for gradients); NULL: the
     * tape's arena, as for activations. */
    brg_arena *grad_arena;
    /* The gradient is zero but its buffer was not cleared (brg_runtime_zero_grads defers the
     * clearing): the first backward write overwrites it instead of adding, brg_tape_grad clears
     * it for the ops that add, and brg_tensor_settle_grad clears it if nothing wrote. */
    bool grad_zero_pending;
    bool requires_grad;
    const char *name; /* optional, for messages; not owned */
} brg_tensor;

int64_t brg_tensor_numel(const brg_tensor *t);
size_t brg_tensor_nbytes(const brg_tensor *t);
bool brg_tensor_is_contiguous(const brg_tensor *t);
/* Clears the gradient buffer if its zeroing is pending (see grad_zero_pending). */
void brg_tensor_settle_grad(brg_tensor *t);
bool brg_tensor_same_shape(const brg_tensor *a, const brg_tensor *b);

/* A contiguous tensor header over existing memory (not copied, not owned). */
brg_tensor brg_tensor_wrap(brg_dtype dtype, int ndim, const int64_t *shape, void *data);

/* Allocates a header and zeroed contiguous data in `arena`. */
brg_status brg_tensor_new(brg_arena *arena, brg_dtype dtype, int ndim, const int64_t *shape,
                          const char *what, brg_tensor **out);
/* The same for a tensor whose every element the caller writes before reading any: its data is
 * not zeroed (brg_arena_alloc_uninit). */
brg_status brg_tensor_new_uninit(brg_arena *arena, brg_dtype dtype, int ndim, const int64_t *shape,
                                 const char *what, brg_tensor **out);
/* Bytes of t's gradient buffer (its elements in grad_dtype). */
size_t brg_tensor_grad_bytes(const brg_tensor *t);
/* Allocates the gradient buffer (zeroed) if it is not there yet. */
brg_status brg_tensor_ensure_grad(brg_arena *arena, brg_tensor *t);

/* Views share data with `t` (no gradient link: use the autograd ops for that). */
brg_status brg_tensor_view_reshape(const brg_tensor *t, int ndim, const int64_t *shape, brg_tensor *out);
brg_status brg_tensor_view_transpose(const brg_tensor *t, int d0, int d1, brg_tensor *out);
brg_status brg_tensor_view_slice(const brg_tensor *t, int dim, int64_t start, int64_t len, brg_tensor *out);

/* Element access by flat row-major index, honouring strides; converts to/from double. */
double brg_tensor_get(const brg_tensor *t, int64_t flat_index);
void brg_tensor_set(brg_tensor *t, int64_t flat_index, double value);
/* Exact integer read of an I32, I64 or BOOL element. */
int64_t brg_tensor_get_int(const brg_tensor *t, int64_t flat_index);

/* Copies `src` (any dtype, any strides) into contiguous `dst` of the same shape, converting. */
brg_status brg_tensor_copy(brg_tensor *dst, const brg_tensor *src);

/* "[2, 3, 4]" into buf. */
const char *brg_shape_str(const brg_tensor *t, char *buf, size_t len);

/* IEEE half and bfloat16 conversions, round to nearest even (as torch's .to()). */
float brg_f16_to_f32(uint16_t h);
uint16_t brg_f32_to_f16(float f);
float brg_bf16_to_f32(uint16_t h);
uint16_t brg_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
