/* tanh (BERT's pooler). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct tanh_ctx {
    brg_tensor *x, *y;
} tanh_ctx;

static brg_status tanh_backward(brg_tape *tape, void *p) {
    tanh_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    ops_k(tape)->tanh_bwd(dx, ops_dy(tape, c->y), ops_read(tape, c->y, 0), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_tanh(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("tanh", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "tanh output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->tanh_fwd(out, ops_read(tape, x, 0), brg_tensor_numel(x));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, tanh_backward, tanh_ctx, x, *y);
}

void ops_cost_tanh(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(tanh_ctx));
}
