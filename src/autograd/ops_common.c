#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ops_cost.h"
#include "ops_internal.h"

brg_status ops_check_float(const char *op, const brg_tensor *t, int min_dims) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "%s: missing input", op);
    if (t->dtype != BRG_DTYPE_F32 && !brg_dtype_is_half(t->dtype))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s is %s, expected F32, F16 or BF16", op,
                         t->name ? t->name : "input", brg_dtype_name(t->dtype));
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
    return ops_new(tape, x->ndim, x->shape, rec, what, y);
}

static bool is_half(const brg_tensor *t) { return brg_dtype_is_half(t->dtype); }

void ops_half_grad(brg_tensor *t) { t->grad_dtype = is_half(t) ? t->dtype : BRG_DTYPE_F32; }

brg_status ops_new(brg_tape *tape, int ndim, const int64_t *shape, bool rec, const char *what, brg_tensor **y) {
    BRG_TRY(brg_tensor_new_uninit(brg_tape_arena(tape), brg_tape_activation_dtype(tape), ndim, shape, what, y));
    (*y)->requires_grad = rec;
    BRG_TRY(brg_tape_output(tape, *y));
    ops_half_grad(*y);
    return BRG_OK;
}

const float *ops_read(const brg_tape *tape, const brg_tensor *t, int slot) {
    if (!is_half(t)) return t->data;
    float *values = ops_stage_buffer(slot, brg_tensor_numel(t));
    ops_k(tape)->widen(values, t->data, t->dtype, brg_tensor_numel(t));
    return values;
}

float *ops_write(brg_tensor *y, int slot) { return is_half(y) ? ops_stage_buffer(slot, brg_tensor_numel(y)) : y->data; }

bool ops_is_half(const brg_tensor *t) { return is_half(t); }
bool ops_grad_is_half(const brg_tensor *t) { return brg_dtype_is_half(t->grad_dtype); }

static _Atomic int64_t stage_block_floats = OPS_STAGE_BLOCK_FLOATS;

int64_t ops_set_stage_block_floats(int64_t floats) {
    return atomic_exchange(&stage_block_floats, floats > 0 ? floats : OPS_STAGE_BLOCK_FLOATS);
}

int64_t ops_stage_rows(int64_t rows, int64_t width) {
    const int64_t bound = stage_block_floats;
    if (width <= 0 || rows * width <= bound) return rows;
    const int64_t block = bound / width;
    return block > 0 ? block : 1;
}

float *ops_stage_buffer(int slot, int64_t n) {
    BRG_ASSERT(slot >= 0 && slot < BRG_SCRATCH_STAGE_SLOTS);
    return brg_scratch(BRG_SCRATCH_STAGE + slot, (size_t)n);
}

const float *ops_read_rows(const brg_tape *tape, const brg_tensor *t, int slot, int64_t row0, int64_t rows,
                           int64_t width) {
    if (!is_half(t)) return (const float *)t->data + row0 * width;
    float *values = ops_stage_buffer(slot, rows * width);
    ops_k(tape)->widen(values, (const uint16_t *)t->data + row0 * width, t->dtype, rows * width);
    return values;
}

void ops_store_rows(const brg_tape *tape, brg_tensor *y, const float *values, int64_t row0, int64_t rows,
                    int64_t width) {
    if (is_half(y)) ops_k(tape)->narrow((uint16_t *)y->data + row0 * width, values, y->dtype, rows * width);
}

float *ops_widen_grad_rows(const brg_tape *tape, const brg_tensor *t, int scratch_slot, int64_t row0, int64_t rows,
                           int64_t width) {
    float *values = brg_scratch(scratch_slot, (size_t)(rows * width));
    ops_k(tape)->widen(values, (const uint16_t *)t->grad + row0 * width, t->grad_dtype, rows * width);
    return values;
}

void ops_round_grad_rows(const brg_tape *tape, brg_tensor *t, const float *values, int64_t row0, int64_t rows,
                         int64_t width) {
    ops_k(tape)->narrow((uint16_t *)t->grad + row0 * width, values, t->grad_dtype, rows * width);
}

void ops_store(const brg_tape *tape, brg_tensor *y, const float *values) {
    if (is_half(y)) ops_k(tape)->narrow(y->data, values, y->dtype, brg_tensor_numel(y));
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

static void scratch_max(double *slots, int slot, double floats) {
    double bytes = (floats < 1 ? 1 : floats) * (double)sizeof(float);
    if (bytes > slots[slot]) slots[slot] = bytes;
}

/* A tensor of n elements and, when it takes part in backward, its gradient: a half output has a
 * half gradient, which its backward reads through an fp32 copy and its consumer's backward adds
 * into through another (the first gradient it asks for), `staged` elements of it at a time. */
static void count_tensor(ops_cost *c, double n, int elem_size, bool grad, double staged) {
    c->fwd += ops_cost_tensor_bytes(n, elem_size);
    if (!grad || !c->record) return;
    const bool half = elem_size < (int)sizeof(float);
    c->grad += ops_cost_align(n * (half ? elem_size : (double)sizeof(float)));
    if (half) ops_cost_half_grad(c, staged);
}

void ops_cost_tensor(ops_cost *c, double n, int elem_size, bool grad) { count_tensor(c, n, elem_size, grad, n); }

void ops_cost_output_rows(ops_cost *c, double n, double staged) { count_tensor(c, n, ops_cost_act(c), true, staged); }

double ops_cost_stage_rows(const ops_cost *c, double rows, double width) {
    if (ops_cost_act(c) == (int)sizeof(float)) return rows;
    const double block = (double)ops_stage_rows((int64_t)rows, (int64_t)width);
    return block < rows ? block : rows;
}

void ops_cost_half_grad(ops_cost *c, double n) {
    scratch_max(c->scratch, BRG_SCRATCH_GRAD_READ, n);
    scratch_max(c->scratch, BRG_SCRATCH_GRAD_STAGE, n);
}

void ops_cost_grad_stage(ops_cost *c, int k, double n) {
    if (c->record && ops_cost_act(c) < (int)sizeof(float)) scratch_max(c->scratch, BRG_SCRATCH_GRAD_STAGE + k, n);
}

void ops_cost_context(ops_cost *c, size_t size) {
    if (c->record) c->fwd += ops_cost_align((double)size);
}


void ops_cost_scratch(ops_cost *c, int slot, double floats) { scratch_max(c->scratch, slot, floats); }

int ops_cost_act(const ops_cost *c) { return c->act_size ? c->act_size : (int)sizeof(float); }

void ops_cost_stage(ops_cost *c, int slot, double floats) {
    if (ops_cost_act(c) < (int)sizeof(float)) scratch_max(c->scratch, BRG_SCRATCH_STAGE + slot, floats);
}

void ops_cost_team_scratch(ops_cost *c, int slot, double floats) {
    scratch_max(c->scratch, slot, floats);
    scratch_max(c->team, slot, floats);
}

void ops_cost_packed_weight(ops_cost *c, double in, double out) {
    const brg_gemm_pack_layout layout = brg_gemm_pack_layout_for(BRG_DTYPE_BF16);
    if (layout == BRG_GEMM_PACK_NONE) return;
    /* both layouts, each counted as the device's arena counts a borrow */
    c->packed += ops_cost_align((double)brg_gemm_pack_bytes(layout, (int64_t)in, (int64_t)out)) +
                 ops_cost_align((double)brg_gemm_pack_bytes(layout, (int64_t)out, (int64_t)in));
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
