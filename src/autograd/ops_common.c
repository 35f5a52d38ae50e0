#include <math.h>
#include <string.h>

#include "ops_cost.h"
#include "ops_internal.h"

brg_status ops_check_f32(const char *op, const brg_tensor *t, int min_dims) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "%s: missing input", op);
    if (t->dtype != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s is %s, expected F32", op, t->name ? t->name : "input",
                         brg_dtype_name(t->dtype));
    if (!brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s is not contiguous", op, t->name ? t->name : "input");
    if (t->ndim < min_dims)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s has %d dims, expected at least %d", op,
                         t->name ? t->name : "input", t->ndim, min_dims);
    return BRG_OK;
}

brg_status ops_check_i32(const char *op, const brg_tensor *t) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "%s: missing index input", op);
    if (t->dtype != BRG_DTYPE_I32 || !brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: indices must be contiguous I32 (got %s)", op,
                         brg_dtype_name(t->dtype));
    return BRG_OK;
}

const char *ops_name(const brg_tensor *t, const char *fallback) { return t->name ? t->name : fallback; }

brg_status ops_new_like(brg_tape *tape, const brg_tensor *x, bool rec, const char *what, brg_tensor **y) {
    return brg_tape_new_tensor(tape, BRG_DTYPE_F32, x->ndim, x->shape, rec, what, y);
}

brg_status ops_record(brg_tape *tape, brg_backward_fn backward, const void *ctx, size_t size) {
    void *slot = brg_tape_record(tape, backward, size);
    if (!slot) return BRG_ERR_OOM;
    memcpy(slot, ctx, size);
    return BRG_OK;
}

/* ---- memory plans (ops_cost.h) ---- */

double ops_cost_align(double bytes) {
    const double unit = BRG_ARENA_ALIGN;
    return bytes < 1 ? unit : ceil(bytes / unit) * unit;
}

double ops_cost_tensor_bytes(double n, int elem_size) {
    return ops_cost_align((double)sizeof(brg_tensor)) + ops_cost_align(n * elem_size);
}

void ops_cost_tensor(ops_cost *c, double n, int elem_size, bool grad) {
    c->fwd += ops_cost_tensor_bytes(n, elem_size);
    if (grad && c->record) c->grad += ops_cost_align(n * (double)sizeof(float));
}

void ops_cost_context(ops_cost *c, size_t size) {
    if (c->record) c->fwd += ops_cost_align((double)size);
}

static void scratch_max(double *slots, int slot, double floats) {
    double bytes = (floats < 1 ? 1 : floats) * (double)sizeof(float);
    if (bytes > slots[slot]) slots[slot] = bytes;
}

void ops_cost_scratch(ops_cost *c, int slot, double floats) { scratch_max(c->scratch, slot, floats); }

void ops_cost_team_scratch(ops_cost *c, int slot, double floats) {
    scratch_max(c->scratch, slot, floats);
    scratch_max(c->team, slot, floats);
}

void ops_cost_product(ops_cost *c, double a_elems, double b_elems, bool team) {
    /* brg_gemm's rounded copies: 16-bit elements, in whole floats */
    const double a = ceil(a_elems / 2), b = ceil(b_elems / 2);
    scratch_max(c->scratch, BRG_SCRATCH_GEMM_A, a);
    scratch_max(c->scratch, BRG_SCRATCH_GEMM_B, b);
    if (!team) return;
    scratch_max(c->team, BRG_SCRATCH_GEMM_A, a);
    scratch_max(c->team, BRG_SCRATCH_GEMM_B, b);
}
