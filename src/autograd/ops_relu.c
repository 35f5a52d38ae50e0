/* relu (T5's feed-forward, a ViT pooler option), with torch's NaN and zero conventions. */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct relu_ctx {
    brg_tensor *x, *y;
} relu_ctx;

static brg_status relu_backward(brg_tape *tape, void *p) {
    relu_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    ops_k(tape)->relu_bwd(dx, c->y->grad, OPS_CF32(c->x), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_relu(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_f32("relu", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "relu output", y));
    ops_k(tape)->relu_fwd(OPS_F32(*y), OPS_CF32(x), brg_tensor_numel(x));
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, relu_backward, relu_ctx, x, *y);
}

void ops_cost_relu(ops_cost *c, double n) {
    ops_cost_tensor(c, n, sizeof(float), true);
    ops_cost_context(c, sizeof(relu_ctx));
}
