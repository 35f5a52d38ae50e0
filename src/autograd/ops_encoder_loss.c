/* tanh, and the regression / multi-label losses of the sequence-classification heads. */
#include "ops_cost.h"
#include "ops_internal.h"

/* ---- tanh ---- */
typedef struct tanh_ctx {
    brg_tensor *x, *y;
} tanh_ctx;

static brg_status tanh_backward(brg_tape *tape, void *p) {
    tanh_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    brg_k_tanh_bwd(dx, c->y->grad, OPS_CF32(c->y), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_tanh(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_f32("tanh", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, x->ndim, x->shape, rec, "tanh output", y));
    brg_k_tanh_fwd(OPS_F32(*y), OPS_CF32(x), brg_tensor_numel(x));
    if (!rec) return BRG_OK;
    tanh_ctx *c = brg_tape_record(tape, tanh_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (tanh_ctx){x, *y};
    return BRG_OK;
}

/* ---- MSE and BCE with logits ---- */
typedef enum pointwise_loss { LOSS_MSE, LOSS_BCE } pointwise_loss;

typedef struct loss_ctx {
    brg_tensor *x, *target, *loss;
    float inv_denominator;
    pointwise_loss kind;
} loss_ctx;

static brg_status pointwise_loss_backward(brg_tape *tape, void *p) {
    loss_ctx *c = p;
    if (!c->loss->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    float scale = c->loss->grad[0] * c->inv_denominator;
    int64_t n = brg_tensor_numel(c->x);
    if (c->kind == LOSS_MSE) brg_k_mse_bwd(dx, scale, OPS_CF32(c->x), OPS_CF32(c->target), n);
    else brg_k_bce_logits_bwd(dx, scale, OPS_CF32(c->x), OPS_CF32(c->target), n);
    return BRG_OK;
}

static brg_status pointwise(brg_tape *tape, const char *op, pointwise_loss kind, brg_tensor *x, brg_tensor *target,
                            double denominator, brg_tensor **loss) {
    BRG_TRY(ops_check_f32(op, x, 0));
    BRG_TRY(ops_check_f32(op, target, 0));
    int64_t n = brg_tensor_numel(x);
    if (brg_tensor_numel(target) != n) {
        char sx[128], st[128];
        return brg_error(BRG_ERR_INVALID_ARG, "%s: target %s %s does not match the input %s", op,
                         target->name ? target->name : "", brg_shape_str(target, st, sizeof st),
                         brg_shape_str(x, sx, sizeof sx));
    }
    double denom = denominator > 0 ? denominator : (double)n;
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1) && n > 0;
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 0, NULL, rec, "loss", loss));
    double sum = kind == LOSS_MSE ? brg_k_mse_sum_fwd(OPS_CF32(x), OPS_CF32(target), n)
                                  : brg_k_bce_logits_sum_fwd(OPS_CF32(x), OPS_CF32(target), n);
    OPS_F32(*loss)[0] = n > 0 ? (float)(sum / denom) : 0.0f;
    if (!rec) return BRG_OK;
    loss_ctx *c = brg_tape_record(tape, pointwise_loss_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (loss_ctx){x, target, *loss, (float)(1.0 / denom), kind};
    return BRG_OK;
}

brg_status brg_mse_loss_share(brg_tape *tape, brg_tensor *x, brg_tensor *target, double denominator,
                              brg_tensor **loss) {
    return pointwise(tape, "mse_loss", LOSS_MSE, x, target, denominator, loss);
}

brg_status brg_bce_with_logits_share(brg_tape *tape, brg_tensor *x, brg_tensor *target, double denominator,
                                     brg_tensor **loss) {
    return pointwise(tape, "bce_with_logits", LOSS_BCE, x, target, denominator, loss);
}

/* ---- memory plans ---- */

void ops_cost_tanh(ops_cost *c, double n) {
    ops_cost_tensor(c, n, sizeof(float), true);
    ops_cost_context(c, sizeof(tanh_ctx));
}

void ops_cost_pointwise_loss(ops_cost *c, double n) {
    (void)n;
    ops_cost_tensor(c, 1, sizeof(float), true);
    ops_cost_context(c, sizeof(loss_ctx));
}
