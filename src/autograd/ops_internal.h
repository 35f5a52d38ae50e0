/* What the op wrappers share: input checks, output tensors, recording a backward. */
#ifndef BRIGADE_OPS_INTERNAL_H
#define BRIGADE_OPS_INTERNAL_H

#include "brigade/ops.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"

/* The fp32 kernels of the tape's backend: every kernel an op runs is called through here. */
static inline const brg_kernels *ops_k(const brg_tape *tape) { return brg_tape_backend(tape)->f32; }

/* Fails unless t is a contiguous floating-point tensor (F32, or F16 / BF16, which the op widens as
 * it reads it: ops_read) with at least `min_dims` dimensions. */
brg_status ops_check_float(const char *op, const brg_tensor *t, int min_dims);
/* Same for I32 index tensors. */
brg_status ops_check_i32(const char *op, const brg_tensor *t);

/* t's name for a message, or `fallback` when it has none. */
const char *ops_name(const brg_tensor *t, const char *fallback);

/* A new tensor of x's shape on the tape's arena, in the tape's activation type: an op's output
 * (`rec`: it takes part in backward). A half one gets a half gradient (ops_half_grad). Its data
 * is not zeroed (brg_arena_alloc_uninit): the op writes every element. Zeroing them was 1.5% of a
 * GPT-2 small and 2.2% of a T5-small fp32 training step on one core. */
brg_status ops_new_like(brg_tape *tape, const brg_tensor *x, bool rec, const char *what, brg_tensor **y);
/* The same with its own shape. */
brg_status ops_new(brg_tape *tape, int ndim, const int64_t *shape, bool rec, const char *what, brg_tensor **y);

/* Half activations (brg_tape_activation_dtype). The kernels compute in fp32, so an op reads each
 * floating-point tensor through ops_read, which hands out its data when it is F32 and otherwise
 * widens it (exactly, with the tape's backend's kernel) into staging slot `slot`, 0 to
 * BRG_SCRATCH_STAGE_SLOTS - 1, of the calling
 * thread's scratch; an op writes an output where ops_write says (its data, or a staging slot)
 * and then calls ops_store, which rounds the staged values into the tensor (nearest even).
 * Tensors one kernel call reads or writes at the same time take different slots. Staging holds
 * one op's operands at a time: the activations held across the step are the half tensors. */
const float *ops_read(const brg_tape *tape, const brg_tensor *t, int slot);
/* Ops whose operands are wide (a language-model head's [rows, vocabulary] logits) stage half
 * ones a block of rows at a time, so that staging holds at most OPS_STAGE_BLOCK_FLOATS floats of
 * each. ops_stage_rows: rows per block for `rows` rows of `width` (all of them when they fit);
 * the _rows functions widen / round rows [row0, row0 + rows) of a tensor (F32: its own data,
 * nothing to store) or of a half gradient buffer. */
#define OPS_STAGE_BLOCK_FLOATS ((int64_t)1 << 23)
int64_t ops_stage_rows(int64_t rows, int64_t width);
/* For tests: another bound than OPS_STAGE_BLOCK_FLOATS (0: that one again), so that small models
 * take the block paths. Process-wide; returns the previous one. */
int64_t ops_set_stage_block_floats(int64_t floats);
bool ops_is_half(const brg_tensor *t);
bool ops_grad_is_half(const brg_tensor *t);
float *ops_stage_buffer(int slot, int64_t n);
const float *ops_read_rows(const brg_tape *tape, const brg_tensor *t, int slot, int64_t row0, int64_t rows,
                           int64_t width);
void ops_store_rows(const brg_tape *tape, brg_tensor *y, const float *values, int64_t row0, int64_t rows,
                    int64_t width);
float *ops_widen_grad_rows(const brg_tape *tape, const brg_tensor *t, int scratch_slot, int64_t row0, int64_t rows,
                           int64_t width);
void ops_round_grad_rows(const brg_tape *tape, brg_tensor *t, const float *values, int64_t row0, int64_t rows,
                         int64_t width);

/* Gives an op output in a half type a gradient of that type (F32 otherwise), as a half model's
 * activations have: ops_new does it; an op that makes its output another way (a view, a buffer
 * over a donated input) calls it. */
void ops_half_grad(brg_tensor *t);
float *ops_write(brg_tensor *y, int slot);
void ops_store(const brg_tape *tape, brg_tensor *y, const float *values);

/* Records `backward` on the tape with a copy of the `size` bytes at `ctx` as its context. */
brg_status ops_record(brg_tape *tape, brg_backward_fn backward, const void *ctx, size_t size);
/* An op's recording step: `backward` with a context of `type` initialised from the rest, e.g.
 * `return OPS_RECORD(tape, mul_backward, mul_ctx, a, b, *y);`. */
#define OPS_RECORD(tape, backward, type, ...) ops_record((tape), (backward), &(type){__VA_ARGS__}, sizeof(type))

/* The gradient of an op's output, in fp32, for its backward (brg_tape_read_grad). */
static inline const float *ops_dy(const brg_tape *tape, const brg_tensor *y) { return brg_tape_read_grad(tape, y); }

/* An F32 tensor's data (a loss's: the one output type that is not the tape's activation type). */
#define OPS_F32(t) ((float *)(t)->data)

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
