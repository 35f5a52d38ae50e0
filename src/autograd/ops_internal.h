/* What the op wrappers share: input checks, output tensors, recording a backward. */
#ifndef BRIGADE_OPS_INTERNAL_H
#define BRIGADE_OPS_INTERNAL_H

#include "brigade/ops.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"

/* The fp32 kernels of the tape's backend: every kernel an op runs is called through here. */
static inline const brg_kernels *ops_k(const brg_tape *tape) { return brg_tape_backend(tape)->f32; }

/* Fails unless t is a contiguous F32 tensor with at least `min_dims` dimensions. */
brg_status ops_check_f32(const char *op, const brg_tensor *t, int min_dims);
/* Same for I32 index tensors. */
brg_status ops_check_i32(const char *op, const brg_tensor *t);

/* t's name for a message, or `fallback` when it has none. */
const char *ops_name(const brg_tensor *t, const char *fallback);

/* A new F32 tensor of x's shape on the tape's arena: an op's output (`rec`: it takes part in
 * backward). */
brg_status ops_new_like(brg_tape *tape, const brg_tensor *x, bool rec, const char *what, brg_tensor **y);

/* Records `backward` on the tape with a copy of the `size` bytes at `ctx` as its context. */
brg_status ops_record(brg_tape *tape, brg_backward_fn backward, const void *ctx, size_t size);
/* An op's recording step: `backward` with a context of `type` initialised from the rest, e.g.
 * `return OPS_RECORD(tape, mul_backward, mul_ctx, a, b, *y);`. */
#define OPS_RECORD(tape, backward, type, ...) ops_record((tape), (backward), &(type){__VA_ARGS__}, sizeof(type))

#define OPS_F32(t) ((float *)(t)->data)
#define OPS_CF32(t) ((const float *)(t)->data)

/* Gradient of an input inside a backward (NULL when it needs none); returns on OOM. */
#define OPS_GRAD(var, tape, t)                           \
    brg_status var##_st_ = BRG_OK;                       \
    float *var = brg_tape_grad((tape), (t), &var##_st_); \
    if (var##_st_ != BRG_OK) return var##_st_

/* The same for a writer that overwrites the whole gradient when `overwrite` comes back true. */
#define OPS_GRAD_FOR_WRITE(var, overwrite, tape, t)                            \
    brg_status var##_st_ = BRG_OK;                                             \
    bool overwrite = false;                                                    \
    float *var = brg_tape_grad_for_write((tape), (t), &overwrite, &var##_st_); \
    if (var##_st_ != BRG_OK) return var##_st_

#endif
