/* relu (T5's feed-forward, a ViT pooler option), with torch's NaN and zero conventions. */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct relu_ctx {
    brg_tensor *x, *y;
} relu_ctx;

static brg_status relu_backward(brg_tape *tape, void *p) {
    relu_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD_FOR_WRITE(dx, overwrite, tape, c->x);
    ops_k(tape)->relu_bwd(dx, overwrite, ops_dy(tape, c->y), ops_read(tape, c->x, 0), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_relu(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("relu", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "relu output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->relu_fwd(out, ops_read(tape, x, 0), brg_tensor_numel(x));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, relu_backward, relu_ctx, x, *y);
}

void ops_cost_relu(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(relu_ctx));
}
