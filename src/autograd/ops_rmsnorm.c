/* rms_norm: T5LayerNorm (no mean subtraction, no bias). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct rms_norm_ctx {
    brg_tensor *x, *w, *y;
    float *rstd;
    int64_t n, c;
} rms_norm_ctx;

static brg_status rms_norm_backward(brg_tape *tape, void *p) {
    rms_norm_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    OPS_GRAD(dw, tape, c->w);
    ops_k(tape)->rmsnorm_bwd(dx, dw, ops_dy(tape, c->y), ops_read(tape, c->x, 0), ops_read(tape, c->w, 1), c->rstd,
                             c->n, c->c);
    return BRG_OK;
}

brg_status brg_rms_norm(brg_tape *tape, brg_tensor *x, brg_tensor *weight, float eps, brg_tensor **y) {
    BRG_TRY(ops_check_float("rms_norm", x, 1));
    BRG_TRY(ops_check_float("rms_norm", weight, 1));
    int64_t c = x->shape[x->ndim - 1], n = c ? brg_tensor_numel(x) / c : 0;
    if (weight->ndim != 1 || weight->shape[0] != c)
        return brg_error(BRG_ERR_INVALID_ARG, "rms_norm: weight %s has %lld entries, the input's width is %lld",
                         weight->name ? weight->name : "", (long long)brg_tensor_numel(weight), (long long)c);
    if (!(eps >= 0.0f)) return brg_error(BRG_ERR_INVALID_ARG, "rms_norm: epsilon %g must be >= 0", eps);
    const brg_tensor *ins[2] = {x, weight};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(ops_new_like(tape, x, rec, "rms_norm output", y));
    float *rstd = brg_arena_alloc(brg_tape_arena(tape), (size_t)(n ? n : 1) * sizeof(float), "rms_norm statistics");
    if (!rstd) return BRG_ERR_OOM;
    float *out = ops_write(*y, 2);
    ops_k(tape)->rmsnorm_fwd(out, rstd, ops_read(tape, x, 0), ops_read(tape, weight, 1), n, c, eps);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, rms_norm_backward, rms_norm_ctx, x, weight, *y, rstd, n, c);
}

void ops_cost_rms_norm(ops_cost *c, double rows, double width) {
    ops_cost_tensor(c, rows * width, ops_cost_act(c), true);
    ops_cost_stage(c, 0, rows * width); /* x (backward reads it there again); the weight is F32, read in place */
    ops_cost_stage(c, 2, rows * width);
    c->fwd += ops_cost_align((rows < 1 ? 1 : rows) * sizeof(float)); /* rstd */
    ops_cost_context(c, sizeof(rms_norm_ctx));
}
