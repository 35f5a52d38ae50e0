/* The autograd tape: ops record (backward function, context) pairs while a stage runs forward;
 * brg_tape_backward replays them in reverse, accumulating gradients.
 *
 * Every output, saved tensor, context and activation gradient lives in the tape's arena, so a
 * micro-batch's whole footprint is released by one brg_arena_reset. Parameters keep their own
 * gradient buffers (allocated once, outside the tape), which backward accumulates into.
 *
 * The gradients of the tape's own outputs (see brg_tape_output) that a backward allocates are
 * released when it ends: the arena goes back to where it stood when the replay began, and the
 * gradients the replay allocated for other tensors (the tape's inputs, leaves) are moved down
 * there with their values. So a backward function allocates from the tape's arena only through
 * brg_tape_grad, and a caller reads the gradients of the tape's inputs, not of its outputs. */
#ifndef BRIGADE_TAPE_H
#define BRIGADE_TAPE_H

#include <stdbool.h>
#include <stddef.h>

#include "brigade/arena.h"
#include "brigade/backend.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_tape brg_tape;

/* A node's backward: reads the gradients of its outputs and adds into those of its inputs. */
typedef brg_status (*brg_backward_fn)(brg_tape *tape, void *ctx);

brg_status brg_tape_create(brg_arena *arena, brg_tape **out);
void brg_tape_destroy(brg_tape *tape);

brg_arena *brg_tape_arena(const brg_tape *tape);

/* The backend whose kernels the ops recorded on this tape run (a device's; the CPU's by default). */
void brg_tape_set_backend(brg_tape *tape, const brg_backend *backend);
const brg_backend *brg_tape_backend(const brg_tape *tape);

/* The type the recorded ops store their floating-point outputs in: F32 (the default), or F16 /
 * BF16 to hold activations in half the bytes (the .16 training modes). Kernels still compute in
 * fp32: an op widens a half input as it reads it and rounds its output to nearest even as it
 * stores it. Losses stay F32, and gradients are F32 whatever the activations' type. */
void brg_tape_set_activation_dtype(brg_tape *tape, brg_dtype dtype);
brg_dtype brg_tape_activation_dtype(const brg_tape *tape);

/* With grad disabled (inference) ops compute outputs but record nothing. */
void brg_tape_set_grad_enabled(brg_tape *tape, bool enabled);
bool brg_tape_grad_enabled(const brg_tape *tape);

/* True when an op with these inputs must be recorded (grad enabled and any input needs grad). */
bool brg_tape_needs(const brg_tape *tape, const brg_tensor *const *inputs, int n);

/* Appends a node and returns its zeroed context of `ctx_size` bytes (NULL on out of memory). */
void *brg_tape_record(brg_tape *tape, brg_backward_fn fn, size_t ctx_size);

/* Declares `t` (when it requires grad) an output of an op this tape records: a gradient a later
 * backward allocates for it is released when that backward ends. brg_tape_new_tensor does this
 * itself; an op that makes its output another way (a view) calls it. Forgotten by brg_tape_clear. */
brg_status brg_tape_output(brg_tape *tape, brg_tensor *t);

/* Donates `t`'s buffer to the next op that takes it as an input: the caller promises that
 * nothing reads t's data after that op (its other readers, if any, come first). An op whose
 * backward reads none of its inputs' data (brg_add, brg_dropout) then writes its output, a tensor
 * of its own with its own gradient, over t's buffer instead of a new one. A dropout that returns
 * its input unchanged (p 0, not training) passes the donation on to the next op. One tensor at a
 * time (NULL withdraws it); forgotten by brg_tape_clear. */
void brg_tape_donate(brg_tape *tape, const brg_tensor *t);
/* For ops: true (once) when `t` is the donated tensor. */
bool brg_tape_take_donated(brg_tape *tape, const brg_tensor *t);

/* The caller's promise that it reads the values of the tensors the tape's ops make (logits,
 * hidden states) before backward only, never after: a loss may then write the gradient of a
 * donated input over that input's values (brg_cross_entropy on donated fp32 logits), so no buffer
 * the size of the logits is allocated for it. Off by default; the runtime's devices set it on
 * their tapes (they copy out what they return during forward). Kept by brg_tape_clear. */
void brg_tape_set_outputs_spent(brg_tape *tape, bool spent);
bool brg_tape_outputs_spent(const brg_tape *tape);

/* The gradient buffer of `t` (allocated zeroed from the tape's arena on first use), or NULL
 * when `t` does not require grad, ready to be added into (a pending zeroing is done now). Sets
 * *status on out of memory. A half gradient (grad_dtype F16 / BF16) comes as an fp32 copy in
 * scratch, which the tape rounds back into the buffer when the backward function returns. */
float *brg_tape_grad(brg_tape *tape, brg_tensor *t, brg_status *status);
/* t's gradient buffer as it is, in its grad_dtype (allocated, a pending zeroing done), or NULL
 * when t needs none: for a backward function that works through a half gradient a block of rows
 * at a time instead of through brg_tape_grad's copy of all of it. */
void *brg_tape_grad_buffer(brg_tape *tape, brg_tensor *t, brg_status *status);
/* t's gradient for reading, in fp32: the buffer itself, or a half one widened (by the tape's
 * backend) into scratch (valid
 * until the next call); NULL when it has none. What a backward function reads its output's
 * gradient through. */
const float *brg_tape_read_grad(const brg_tape *tape, const brg_tensor *t);
/* For a backward function writing all of t's gradient over t's own values (an fp32 tensor
 * without a gradient yet, that nothing reads after this backward: see brg_tape_set_outputs_spent):
 * t->data becomes t->grad until the backward ends. NULL with *status set on out of memory. */
float *brg_tape_grad_over_values(brg_tape *tape, brg_tensor *t, brg_status *status);
/* The same for a writer that can either add into the buffer or overwrite all of it (a matrix
 * product with beta 0 or 1): *overwrite says the buffer's zeroing is pending, so the writer must
 * overwrite every element instead of adding. */
float *brg_tape_grad_for_write(brg_tape *tape, brg_tensor *t, bool *overwrite, brg_status *status);

/* Seeds d(loss)/d(loss) = 1 and runs every recorded node in reverse. */
brg_status brg_tape_backward(brg_tape *tape, brg_tensor *loss);
/* Seeds the gradient of `out` with `dout` (same element count) and runs backward: the entry
 * point for a pipeline stage that receives its output gradient from the next stage. */
brg_status brg_tape_backward_from(brg_tape *tape, brg_tensor *out, const float *dout);
/* Seeds several outputs at once (entries whose tensor does not require grad, or whose dout is
 * NULL, are skipped) and runs backward once. */
brg_status brg_tape_backward_multi(brg_tape *tape, brg_tensor *const *outs, const float *const *douts, int n);

/* Forgets the recorded nodes and outputs (the arena is the caller's to reset). */
void brg_tape_clear(brg_tape *tape);
size_t brg_tape_size(const brg_tape *tape);

/* Allocates an output tensor in the tape's arena; requires_grad is set from `requires_grad`, and
 * such a tensor is one of the tape's outputs (brg_tape_output). */
brg_status brg_tape_new_tensor(brg_tape *tape, brg_dtype dtype, int ndim, const int64_t *shape,
                               bool requires_grad, const char *what, brg_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
