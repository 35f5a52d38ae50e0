/* The tape is a growable array of nodes kept across micro-batches, so recording allocates from
 * the host only while the graph is still growing (the first step). */
#include "brigade/tape.h"

#include <stdlib.h>
#include <string.h>

typedef struct node {
    brg_backward_fn fn;
    void *ctx;
} node;

struct brg_tape {
    brg_arena *arena;
    bool grad_enabled;
    node *nodes;
    size_t count;
    size_t capacity;
};

brg_status brg_tape_create(brg_arena *arena, brg_tape **out) {
    brg_tape *t = calloc(1, sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "cannot allocate a tape");
    t->arena = arena;
    t->grad_enabled = true;
    *out = t;
    return BRG_OK;
}

void brg_tape_destroy(brg_tape *tape) {
    if (!tape) return;
    free(tape->nodes);
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

float *brg_tape_grad(brg_tape *tape, brg_tensor *t, brg_status *status) {
    if (!t || !t->requires_grad) return NULL;
    if (!t->grad && brg_tensor_ensure_grad(t->grad_arena ? t->grad_arena : tape->arena, t) != BRG_OK) {
        *status = BRG_ERR_OOM;
        return NULL;
    }
    brg_tensor_settle_grad(t);
    return t->grad;
}

float *brg_tape_grad_for_write(brg_tape *tape, brg_tensor *t, bool *overwrite, brg_status *status) {
    *overwrite = false;
    if (!t || !t->requires_grad) return NULL;
    if (!t->grad && brg_tensor_ensure_grad(t->grad_arena ? t->grad_arena : tape->arena, t) != BRG_OK) {
        *status = BRG_ERR_OOM;
        return NULL;
    }
    *overwrite = t->grad_zero_pending;
    t->grad_zero_pending = false;
    return t->grad;
}

static brg_status replay(brg_tape *tape) {
    for (size_t i = tape->count; i-- > 0;) BRG_TRY(tape->nodes[i].fn(tape, tape->nodes[i].ctx));
    return BRG_OK;
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
    }
    return replay(tape);
}

void brg_tape_clear(brg_tape *tape) { tape->count = 0; }
size_t brg_tape_size(const brg_tape *tape) { return tape->count; }

brg_status brg_tape_new_tensor(brg_tape *tape, brg_dtype dtype, int ndim, const int64_t *shape,
                               bool requires_grad, const char *what, brg_tensor **out) {
    BRG_TRY(brg_tensor_new(tape->arena, dtype, ndim, shape, what, out));
    (*out)->requires_grad = requires_grad;
    return BRG_OK;
}
