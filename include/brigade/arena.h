/* Arenas: the memory of one device. A bump allocator with a byte budget; allocations past the
 * budget fail with an error naming the device, what was being allocated and the budget.
 * Lifetimes are expressed with marks: allocate persistent state first, take a mark, and reset
 * to it after each micro-batch or step. Memory handed back by a reset is reused, so after the
 * first step no further host allocation happens. */
#ifndef BRIGADE_ARENA_H
#define BRIGADE_ARENA_H

#include <stddef.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_ARENA_ALIGN 64
#define BRG_ARENA_UNLIMITED ((size_t)0)

typedef struct brg_arena brg_arena;

/* `name` names the device in messages ("device 3"); budget 0 means unlimited. */
brg_status brg_arena_create(const char *name, size_t budget, brg_arena **out);

/* Where an arena's chunks come from: a device's memory (brg_backend). alloc_zeroed returns
 * `bytes` zeroed bytes or NULL; release frees them. The default is the host's calloc/free. */
typedef struct brg_allocator {
    void *(*alloc_zeroed)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    void *ctx;
} brg_allocator;
/* The host's memory (calloc/free), every arena's default. */
void *brg_host_alloc_zeroed(void *ctx, size_t bytes);
void brg_host_release(void *ctx, void *p);
/* Sets the allocator of a new arena (before its first allocation; its children inherit it). */
void brg_arena_set_allocator(brg_arena *arena, const brg_allocator *allocator);
void brg_arena_destroy(brg_arena *arena);

/* An arena that draws on its parent's budget (the parent's messages and peak count both): a
 * device's per-micro-batch memory, released by resetting the child alone. The child must be
 * destroyed before the parent and used on the parent's thread. */
brg_status brg_arena_create_child(brg_arena *parent, const char *name, brg_arena **out);

/* Returns 64-byte aligned zeroed memory, or NULL with brg_last_error() set (BRG_ERR_OOM).
 * `what` says what the bytes are for ("h.3.attn.c_attn.weight", "activations"). */
void *brg_arena_alloc(brg_arena *arena, size_t bytes, const char *what);

/* Like brg_arena_alloc for bytes the caller writes in full before it reads them (an op's
 * output): they are not zeroed, so they may hold what an earlier step left there. With the
 * environment variable BRIGADE_ARENA_POISON set to 1 they are filled with 0xFF bytes instead (a
 * NaN in every float, -1 in every integer), so that a read before the write shows in the
 * results; the tests run the models that way. */
void *brg_arena_alloc_uninit(brg_arena *arena, size_t bytes, const char *what);

/* Like brg_arena_alloc but returns a status and stores the pointer in *out. */
brg_status brg_arena_alloc_into(brg_arena *arena, size_t bytes, const char *what, void **out);

size_t brg_arena_mark(const brg_arena *arena);
void brg_arena_reset(brg_arena *arena, size_t mark);

/* Kernel scratch: per-thread buffers a device's threads hold outside the arena's chunks (see
 * brg_scratch_bind), counted against its budget and in its peak all the same (not part of marks
 * or used). Adding is never refused, since the buffer exists already;
 * allocations after it fail once the budget is spent, and brg_arena_check says whether the
 * peak went past the budget. */
void brg_arena_add_scratch(brg_arena *arena, size_t bytes);
void brg_arena_drop_scratch(brg_arena *arena, size_t bytes);
size_t brg_arena_scratch(const brg_arena *arena);
/* Memory that lives elsewhere but that the device computes on as its own (a runtime's replica 0
 * on the model's parameters, brg_runtime_options.params_in_model): counted, rounded as an
 * allocation, against the budget and in the peak, never handed back by a reset, not part of
 * marks or used. Refused past the budget like an allocation. */
brg_status brg_arena_borrow(brg_arena *arena, size_t bytes, const char *what);
size_t brg_arena_borrowed(const brg_arena *arena);
/* BRG_ERR_OOM, naming the device, its peak and its budget, when the peak (kernel scratch
 * included) went past the budget; BRG_OK otherwise (and without a budget). */
brg_status brg_arena_check(const brg_arena *arena);

size_t brg_arena_used(const brg_arena *arena);
/* The most the arena held at once (for a parent: with its children's bytes; kernel scratch
 * included). */
size_t brg_arena_peak(const brg_arena *arena);
size_t brg_arena_budget(const brg_arena *arena);
const char *brg_arena_name(const brg_arena *arena);

/* Parses "512MiB", "2GiB", "1.5G", "1000000" into bytes; 0 on error with the message set. */
brg_status brg_parse_bytes(const char *text, size_t *out);

#ifdef __cplusplus
}
#endif
#endif
