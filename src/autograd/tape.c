/* The tape is a growable array of nodes kept across micro-batches, so recording allocates from
 * the host only while the graph is still growing (the first step).
 *
 * Activation gradients are released per tape: the gradients a replay allocates for the tape's
 * own outputs are dead once the replay is over (every op that reads or adds into them has run),
 * so the arena is reset to where it stood when the replay began. The gradients the replay
 * allocated for anything else (the tape's inputs, parameters without a gradient arena) live on:
 * they are moved down to the mark, in the order they were allocated. A model run as one tape per
 * block then holds one block's activation gradients at a time instead of all of them. */
#include "brigade/tape.h"

#include "kernels/backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct node {
    brg_backward_fn fn;
    void *ctx;
} node;

/* A growable array of tensor pointers. */
typedef struct tensor_list {
    brg_tensor **items;
    size_t count;
    size_t capacity;
} tensor_list;

struct brg_tape {
    brg_arena *arena;
    const brg_backend *backend; /* whose kernels the recorded ops run */
    brg_dtype activation_dtype;  /* what ops store their float outputs in */
    bool grad_enabled;
    node *nodes;
    size_t count;
    size_t capacity;
    tensor_list outputs;   /* tensors the recorded ops made that take part in backward */
    tensor_list fresh;     /* during a replay: tensors whose gradient it allocated in the arena */
    bool replaying;
    const brg_tensor *donated; /* see brg_tape_donate */
    bool outputs_spent;        /* see brg_tape_set_outputs_spent */
    /* Half gradients a backward function is working on: fp32 copies in grad staging slots, rounded
     * back into their buffers when it returns (commit_staged). */
    brg_tensor *staged[BRG_SCRATCH_GRAD_STAGE_SLOTS];
    float *staged_values[BRG_SCRATCH_GRAD_STAGE_SLOTS];
    int n_staged;
};

static brg_status list_push(tensor_list *l, brg_tensor *t) {
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? l->capacity * 2 : 256;
        brg_tensor **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_OOM, "cannot grow the tape's tensor list to %zu entries", cap);
        l->items = grown;
        l->capacity = cap;
    }
    l->items[l->count++] = t;
    return BRG_OK;
}

brg_status brg_tape_create(brg_arena *arena, brg_tape **out) {
    brg_tape *t = calloc(1, sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "cannot allocate a tape");
    t->arena = arena;
    t->backend = brg_backend_cpu();
    t->activation_dtype = BRG_DTYPE_F32;
    t->grad_enabled = true;
    *out = t;
    return BRG_OK;
}

void brg_tape_set_backend(brg_tape *tape, const brg_backend *backend) { tape->backend = backend; }
const brg_backend *brg_tape_backend(const brg_tape *tape) { return tape->backend; }
void brg_tape_set_activation_dtype(brg_tape *tape, brg_dtype dtype) { tape->activation_dtype = dtype; }
brg_dtype brg_tape_activation_dtype(const brg_tape *tape) { return tape->activation_dtype; }

void brg_tape_destroy(brg_tape *tape) {
    if (!tape) return;
    free(tape->nodes);
    free(tape->outputs.items);
    free(tape->fresh.items);
    free(tape);
}

brg_arena *brg_tape_arena(const brg_tape *tape) { return tape->arena; }
void brg_tape_set_grad_enabled(brg_tape *tape, bool enabled) { tape->grad_enabled = enabled; }
bool brg_tape_grad_enabled(const brg_tape *tape) { return tape->grad_enabled; }

bool brg_tape_needs(const brg_tape *tape, const brg_tensor *const *inputs, int n) {
    if (!tape->grad_enabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

void *brg_tape_record(brg_tape *tape, brg_backward_fn fn, size_t ctx_size) {
    if (tape->count == tape->capacity) {
        size_t cap = tape->capacity ? tape->capacity * 2 : 256;
        node *grown = realloc(tape->nodes, cap * sizeof *grown);
        if (!grown) {
            brg_error(BRG_ERR_OOM, "cannot grow the tape to %zu nodes", cap);
            return NULL;
        }
        tape->nodes = grown;
        tape->capacity = cap;
    }
    void *ctx = brg_arena_alloc(tape->arena, ctx_size, "autograd context");
    if (!ctx) return NULL;
    tape->nodes[tape->count++] = (node){fn, ctx};
    return ctx;
}

brg_status brg_tape_output(brg_tape *tape, brg_tensor *t) {
    if (!t || !t->requires_grad) return BRG_OK;
    return list_push(&tape->outputs, t);
}

void brg_tape_donate(brg_tape *tape, const brg_tensor *t) { tape->donated = t; }

void brg_tape_set_outputs_spent(brg_tape *tape, bool spent) { tape->outputs_spent = spent; }
bool brg_tape_outputs_spent(const brg_tape *tape) { return tape->outputs_spent; }

bool brg_tape_take_donated(brg_tape *tape, const brg_tensor *t) {
    if (!t || t != tape->donated) return false;
    tape->donated = NULL;
    return true;
}

/* Allocates t's gradient where it belongs; a replay remembers the ones it put in the tape's arena. */
static brg_status ensure_grad(brg_tape *tape, brg_tensor *t) {
    if (t->grad) return BRG_OK;
    if (t->grad_arena) return brg_tensor_ensure_grad(t->grad_arena, t);
    /* An activation's gradient: its zeroing is pending, so a writer of the whole of it (a matrix
     * product's input gradient, brg_tape_grad_for_write) overwrites it instead, and brg_tape_grad
     * clears it for the ops that add. */
    t->grad = brg_arena_alloc_uninit(tape->arena, brg_tensor_grad_bytes(t), t->name ? t->name : "gradient");
    if (!t->grad) return BRG_ERR_OOM;
    t->grad_zero_pending = true;
    if (!tape->replaying) return BRG_OK;
    brg_status st = list_push(&tape->fresh, t);
    if (st != BRG_OK) tape->replaying = false; /* keep everything rather than lose track of a gradient */
    return st;
}

static bool half_grad(const brg_tensor *t) { return brg_dtype_is_half(t->grad_dtype); }

/* An fp32 copy of t's half gradient for the running backward function, the same one each time it
 * asks (an op whose two inputs are one tensor adds both parts into it). */
static float *stage_grad(brg_tape *tape, brg_tensor *t, brg_status *status) {
    for (int i = 0; i < tape->n_staged; i++)
        if (tape->staged[i] == t) return tape->staged_values[i];
    if (tape->n_staged == BRG_SCRATCH_GRAD_STAGE_SLOTS) {
        *status = brg_error(BRG_ERR_INTERNAL, "a backward function asked for more than %d half gradients",
                            BRG_SCRATCH_GRAD_STAGE_SLOTS);
        return NULL;
    }
    const int64_t n = brg_tensor_numel(t);
    float *values = brg_scratch(BRG_SCRATCH_GRAD_STAGE + tape->n_staged, (size_t)n);
    tape->backend->f32->widen(values, t->grad, t->grad_dtype, n);
    tape->staged[tape->n_staged] = t;
    tape->staged_values[tape->n_staged++] = values;
    return values;
}

/* Rounds the staged gradients back into their half buffers (nearest even). */
static void commit_staged(brg_tape *tape) {
    for (int i = 0; i < tape->n_staged; i++) {
        brg_tensor *t = tape->staged[i];
        tape->backend->f32->narrow(t->grad, tape->staged_values[i], t->grad_dtype, brg_tensor_numel(t));
    }
    tape->n_staged = 0;
}

void *brg_tape_grad_buffer(brg_tape *tape, brg_tensor *t, brg_status *status) {
    if (!t || !t->requires_grad) return NULL;
    if (ensure_grad(tape, t) != BRG_OK) {
        *status = BRG_ERR_OOM;
        return NULL;
    }
    brg_tensor_settle_grad(t);
    return t->grad;
}

float *brg_tape_grad(brg_tape *tape, brg_tensor *t, brg_status *status) {
    if (!brg_tape_grad_buffer(tape, t, status)) return NULL;
    return half_grad(t) ? stage_grad(tape, t, status) : t->grad;
}

float *brg_tape_grad_over_values(brg_tape *tape, brg_tensor *t, brg_status *status) {
    BRG_ASSERT(t && t->requires_grad && !t->grad && !t->grad_arena);
    BRG_ASSERT(t->dtype == BRG_DTYPE_F32 && t->grad_dtype == BRG_DTYPE_F32);
    t->grad = t->data;
    t->grad_zero_pending = false; /* the caller writes all of it */
    /* A replay drops its outputs' gradients afterwards (release_gradients): this one with them. */
    if (tape->replaying && list_push(&tape->fresh, t) != BRG_OK) {
        *status = BRG_ERR_OOM;
        return NULL;
    }
    return t->grad;
}

float *brg_tape_grad_for_write(brg_tape *tape, brg_tensor *t, bool *overwrite, brg_status *status) {
    *overwrite = false;
    if (!t || !t->requires_grad) return NULL;
    if (ensure_grad(tape, t) != BRG_OK) {
        *status = BRG_ERR_OOM;
        return NULL;
    }
    if (half_grad(t)) return brg_tape_grad(tape, t, status); /* the staged copy holds the values, zero or not */
    *overwrite = t->grad_zero_pending;
    t->grad_zero_pending = false;
    return t->grad;
}

const float *brg_tape_read_grad(const brg_tape *tape, const brg_tensor *t) {
    BRG_ASSERT(!t->grad || !t->grad_zero_pending); /* every writer wrote or cleared it */
    if (!t->grad || !half_grad(t)) return t->grad;
    const int64_t n = brg_tensor_numel(t);
    float *values = brg_scratch(BRG_SCRATCH_GRAD_READ, (size_t)n);
    tape->backend->f32->widen(values, t->grad, t->grad_dtype, n);
    return values;
}

static int by_address(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (brg_tensor *const *)a, y = (uintptr_t) * (brg_tensor *const *)b;
    return x < y ? -1 : x > y;
}

static bool is_output(const brg_tape *tape, brg_tensor *t) {
    return bsearch(&t, tape->outputs.items, tape->outputs.count, sizeof t, by_address) != NULL;
}

static size_t grad_bytes(const brg_tensor *t) { return brg_tensor_grad_bytes(t); }

/* After a replay: drops the gradients it allocated for the tape's outputs and resets the arena to
 * `mark`, re-allocating the others there with their values. Without the host memory to hold those
 * values meanwhile, everything stays as it is. */
static brg_status release_gradients(brg_tape *tape, size_t mark) {
    qsort(tape->outputs.items, tape->outputs.count, sizeof *tape->outputs.items, by_address);
    size_t keep = 0, n = 0;
    for (size_t i = 0; i < tape->fresh.count; i++)
        if (!is_output(tape, tape->fresh.items[i])) keep += grad_bytes(tape->fresh.items[i]), n++;
    float *held = NULL;
    if (keep && !(held = malloc(keep))) return BRG_OK;
    size_t at = 0;
    for (size_t i = 0, k = 0; i < tape->fresh.count; i++) {
        brg_tensor *t = tape->fresh.items[i];
        if (!is_output(tape, t)) {
            memcpy((char *)held + at, t->grad, grad_bytes(t));
            at += grad_bytes(t);
            tape->fresh.items[k++] = t; /* the kept ones, in allocation order */
        }
        t->grad = NULL;
    }
    tape->fresh.count = n;
    brg_arena_reset(tape->arena, mark);
    brg_status st = BRG_OK;
    at = 0;
    for (size_t i = 0; i < n && st == BRG_OK; i++) {
        brg_tensor *t = tape->fresh.items[i];
        st = brg_tensor_ensure_grad(tape->arena, t);
        if (st == BRG_OK) memcpy(t->grad, (char *)held + at, grad_bytes(t));
        at += grad_bytes(t);
    }
    free(held);
    return st;
}

static brg_status replay(brg_tape *tape) {
    const size_t mark = brg_arena_mark(tape->arena);
    tape->fresh.count = 0;
    tape->replaying = true;
    brg_status st = BRG_OK;
    for (size_t i = tape->count; st == BRG_OK && i-- > 0;) {
        st = tape->nodes[i].fn(tape, tape->nodes[i].ctx);
        commit_staged(tape);
    }
    const bool tracked = tape->replaying;
    tape->replaying = false;
    if (st == BRG_OK && tracked) st = release_gradients(tape, mark);
    tape->fresh.count = 0;
    return st;
}

brg_status brg_tape_backward(brg_tape *tape, brg_tensor *loss) {
    if (brg_tensor_numel(loss) != 1)
        return brg_error(BRG_ERR_INVALID_ARG, "backward needs a scalar loss (got %lld elements)",
                         (long long)brg_tensor_numel(loss));
    float one = 1.0f;
    return brg_tape_backward_from(tape, loss, &one);
}

brg_status brg_tape_backward_from(brg_tape *tape, brg_tensor *out, const float *dout) {
    if (!out->requires_grad) return brg_error(BRG_ERR_INVALID_ARG, "backward from a tensor that does not require grad");
    return brg_tape_backward_multi(tape, &out, &dout, 1);
}

brg_status brg_tape_backward_multi(brg_tape *tape, brg_tensor *const *outs, const float *const *douts, int n) {
    for (int k = 0; k < n; k++) {
        if (!outs[k] || !douts[k] || !outs[k]->requires_grad) continue;
        brg_status st = BRG_OK;
        float *g = brg_tape_grad(tape, outs[k], &st);
        if (!g) return st;
        int64_t count = brg_tensor_numel(outs[k]);
        for (int64_t i = 0; i < count; i++) g[i] += douts[k][i];
        commit_staged(tape);
    }
    return replay(tape);
}

void brg_tape_clear(brg_tape *tape) {
    tape->count = 0;
    tape->outputs.count = 0;
    tape->donated = NULL;
}
size_t brg_tape_size(const brg_tape *tape) { return tape->count; }

brg_status brg_tape_new_tensor(brg_tape *tape, brg_dtype dtype, int ndim, const int64_t *shape,
                               bool requires_grad, const char *what, brg_tensor **out) {
    BRG_TRY(brg_tensor_new(tape->arena, dtype, ndim, shape, what, out));
    (*out)->requires_grad = requires_grad;
    return brg_tape_output(tape, *out);
}
