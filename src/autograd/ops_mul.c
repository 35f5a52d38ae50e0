/* mul: the elementwise product of two tensors of one shape (T5's gated feed-forward). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct mul_ctx {
    brg_tensor *a, *b, *y;
} mul_ctx;

static brg_status mul_backward(brg_tape *tape, void *p) {
    mul_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(da, tape, c->a);
    OPS_GRAD(db, tape, c->b);
    ops_k(tape)->mul_bwd(da, db, ops_dy(tape, c->y), ops_read(tape, c->a, 0), ops_read(tape, c->b, 1),
                         brg_tensor_numel(c->y));
    return BRG_OK;
}

brg_status brg_mul(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y) {
    BRG_TRY(ops_check_float("mul", a, 0));
    BRG_TRY(ops_check_float("mul", b, 0));
    if (!brg_tensor_same_shape(a, b)) {
        char sa[128], sb[128];
        return brg_error(BRG_ERR_INVALID_ARG, "mul: shapes %s and %s differ", brg_shape_str(a, sa, sizeof sa),
                         brg_shape_str(b, sb, sizeof sb));
    }
    const brg_tensor *ins[2] = {a, b};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(ops_new_like(tape, a, rec, "mul output", y));
    float *out = ops_write(*y, 2);
    ops_k(tape)->mul_fwd(out, ops_read(tape, a, 0), ops_read(tape, b, 1), brg_tensor_numel(a));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, mul_backward, mul_ctx, a, b, *y);
}

void ops_cost_mul(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(mul_ctx));
    for (int slot = 0; slot < 3; slot++) ops_cost_stage(c, slot, n);
    ops_cost_grad_stage(c, 1, n); /* db, after da */
}
