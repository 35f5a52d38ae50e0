/* prepend_token: a learned token before every sequence (ViT's [CLS] token). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct prepend_ctx {
    brg_tensor *token, *x, *y;
    int64_t B, n, c;
} prepend_ctx;

static brg_status prepend_backward(brg_tape *tape, void *p) {
    prepend_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->token);
    OPS_GRAD(dx, tape, c->x);
    ops_k(tape)->prepend_token_bwd(dt, dx, ops_dy(tape, c->y), c->B, c->n, c->c);
    return BRG_OK;
}

brg_status brg_prepend_token(brg_tape *tape, brg_tensor *token, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("prepend_token", token, 0));
    BRG_TRY(ops_check_float("prepend_token", x, 3));
    if (x->ndim != 3) return brg_error(BRG_ERR_INVALID_ARG, "prepend_token: input must be [B, N, C]");
    int64_t B = x->shape[0], n = x->shape[1], c = x->shape[2];
    if (brg_tensor_numel(token) != c)
        return brg_error(BRG_ERR_INVALID_ARG, "prepend_token: %s has %lld elements, the rows have %lld",
                         ops_name(token, "the token"), (long long)brg_tensor_numel(token), (long long)c);
    const brg_tensor *ins[2] = {token, x};
    bool rec = brg_tape_needs(tape, ins, 2);
    int64_t shape[3] = {B, n + 1, c};
    BRG_TRY(ops_new(tape, 3, shape, rec, "prepend_token output", y));
    float *out = ops_write(*y, 2);
    ops_k(tape)->prepend_token_fwd(out, ops_read(tape, token, 0), ops_read(tape, x, 1), B, n, c);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, prepend_backward, prepend_ctx, token, x, *y, B, n, c);
}

void ops_cost_prepend_token(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    /* x has B rows fewer than the output: out_elems bounds it. The token (a parameter) is F32, read in place. */
    ops_cost_stage(c, 1, out_elems);
    ops_cost_stage(c, 2, out_elems);
    ops_cost_context(c, sizeof(prepend_ctx));
}
