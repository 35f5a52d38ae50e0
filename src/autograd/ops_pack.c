/* Concatenating rows and gathering one position per row, with their backward. */
#include "autograd/ops_pack.h"

#include "ops_cost.h"
#include "ops_internal.h"

/* ---- concat rows ---- */
typedef struct concat_ctx {
    brg_tensor *a, *b, *y;
    int64_t B, na, nb;
} concat_ctx;

static brg_status concat_backward(brg_tape *tape, void *p) {
    concat_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(da, tape, c->a);
    OPS_GRAD(db, tape, c->b);
    ops_k(tape)->concat_rows_bwd(da, db, ops_dy(tape, c->y), c->B, c->na, c->nb);
    return BRG_OK;
}

brg_status brg_concat_rows(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y) {
    BRG_TRY(ops_check_float("concat_rows", a, 1));
    BRG_TRY(ops_check_float("concat_rows", b, 1));
    int64_t B = a->shape[0];
    if (b->shape[0] != B)
        return brg_error(BRG_ERR_INVALID_ARG, "concat_rows: batch sizes differ (%lld and %lld)", (long long)B,
                         (long long)b->shape[0]);
    int64_t na = B ? brg_tensor_numel(a) / B : 0, nb = B ? brg_tensor_numel(b) / B : 0;
    const brg_tensor *ins[2] = {a, b};
    bool rec = brg_tape_needs(tape, ins, 2);
    int64_t shape[2] = {B, na + nb};
    BRG_TRY(ops_new(tape, 2, shape, rec, "concat_rows output", y));
    float *out = ops_write(*y, 2);
    ops_k(tape)->concat_rows_fwd(out, ops_read(tape, a, 3), ops_read(tape, b, 0), B, na, nb);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, concat_backward, concat_ctx, a, b, *y, B, na, nb);
}

/* ---- gather one position per row ---- */
typedef struct gather_ctx {
    brg_tensor *x, *index, *y;
    int64_t B, T, C;
} gather_ctx;

static brg_status gather_backward(brg_tape *tape, void *p) {
    gather_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    if (!dx) return BRG_OK;
    ops_k(tape)->gather_positions_bwd(dx, ops_dy(tape, c->y), c->index->data, c->B, c->T, c->C);
    return BRG_OK;
}

brg_status brg_gather_positions(brg_tape *tape, brg_tensor *x, brg_tensor *index, brg_tensor **y) {
    BRG_TRY(ops_check_float("gather_positions", x, 3));
    BRG_TRY(ops_check_i32("gather_positions", index));
    int64_t B = x->shape[0], T = x->shape[1], C = x->shape[2];
    if (x->ndim != 3 || brg_tensor_numel(index) != B)
        return brg_error(BRG_ERR_INVALID_ARG, "gather_positions: needs x [B, T, C] and one index per row");
    const int32_t *idx = index->data;
    for (int64_t r = 0; r < B; r++)
        if (idx[r] < 0 || idx[r] >= T)
            return brg_error(BRG_ERR_INVALID_ARG, "gather_positions: index %d of row %lld outside [0, %lld)", idx[r],
                             (long long)r, (long long)T);
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[2] = {B, C};
    BRG_TRY(ops_new(tape, 2, shape, rec, "gather_positions output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->gather_positions_fwd(out, ops_read(tape, x, 0), idx, B, T, C);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, gather_backward, gather_ctx, x, index, *y, B, T, C);
}

/* ---- memory plans ---- */

void ops_cost_concat_rows(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(concat_ctx));
    /* a, the long part (the tokens' rows, at most the output's size), in slot 3; b, the short one
     * (a pooled row, the NSP scores: its size unknown here), in slot 0, which a linear's input
     * rows [B*T, C] already fill in every model that concatenates; the output in slot 2 */
    ops_cost_stage(c, 3, out_elems);
    ops_cost_stage(c, 2, out_elems);
    ops_cost_grad_stage(c, 1, out_elems); /* db after da (at most the output's size) */
}

void ops_cost_gather_positions(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(gather_ctx));
    /* x [B, T, C] (T unknown here) in slot 0, which a linear's input rows [B*T, C] already fill */
    ops_cost_stage(c, 1, out_elems);
}
