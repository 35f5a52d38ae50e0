/* select: one position of a dimension (the [CLS] row of hidden states, one column of
 * question-answering logits). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct select_ctx {
    brg_tensor *x, *y;
    int64_t outer, n, inner, index;
} select_ctx;

static brg_status select_backward(brg_tape *tape, void *p) {
    select_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    ops_k(tape)->select_bwd(dx, ops_dy(tape, c->y), c->outer, c->n, c->inner, c->index);
    return BRG_OK;
}

brg_status brg_select(brg_tape *tape, brg_tensor *x, int dim, int64_t index, brg_tensor **y) {
    BRG_TRY(ops_check_float("select", x, 1));
    if (dim < 0 || dim >= x->ndim)
        return brg_error(BRG_ERR_INVALID_ARG, "select: dim %d outside the %d dims of %s", dim, x->ndim,
                         ops_name(x, "the input"));
    if (index < 0 || index >= x->shape[dim])
        return brg_error(BRG_ERR_INVALID_ARG, "select: index %lld outside [0, %lld) of dim %d of %s",
                         (long long)index, (long long)x->shape[dim], dim, ops_name(x, "the input"));
    int64_t outer = 1, inner = 1, shape[BRG_MAX_DIMS];
    for (int i = 0; i < dim; i++) outer *= x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++) inner *= x->shape[i];
    for (int i = 0, o = 0; i < x->ndim; i++)
        if (i != dim) shape[o++] = x->shape[i];
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new(tape, x->ndim - 1, shape, rec, "select output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->select_fwd(out, ops_read(tape, x, 0), outer, x->shape[dim], inner, index);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, select_backward, select_ctx, x, *y, outer, x->shape[dim], inner, index);
}

void ops_cost_select(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    /* The output's staging. x's (slot 0) is x's size, which out_elems does not give: not counted here, it relies
     * on the encoder layers before it (layer norm, add) staging x-sized tensors on slot 0 on the same device. */
    ops_cost_stage(c, 1, out_elems);
    ops_cost_context(c, sizeof(select_ctx));
}
