/* clamp, and the fp16 overflow guard built on it. */
#include "ops_internal.h"

typedef struct clamp_ctx {
    brg_tensor *x, *y;
    float lo, hi;
} clamp_ctx;

static brg_status clamp_backward(brg_tape *tape, void *p) {
    clamp_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    ops_k(tape)->clamp_bwd(dx, ops_dy(tape, c->y), ops_read(tape, c->x, 0), brg_tensor_numel(c->x), c->lo, c->hi);
    return BRG_OK;
}

brg_status brg_clamp(brg_tape *tape, brg_tensor *x, float lo, float hi, brg_tensor **y) {
    BRG_TRY(ops_check_float("clamp", x, 0));
    if (!(lo <= hi)) return brg_error(BRG_ERR_INVALID_ARG, "clamp: the lower bound %g exceeds the upper %g", lo, hi);
    const brg_tensor *ins[1] = {x};
    const bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "clamp output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->clamp_fwd(out, ops_read(tape, x, 0), brg_tensor_numel(x), lo, hi);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, clamp_backward, clamp_ctx, x, *y, lo, hi);
}

#define FP16_MAX 65504.0f
/* Values from here up round to inf in fp16 (65520 is the tie above 65504, which goes to even: up). */
#define FP16_OVERFLOW 65520.0f

brg_status brg_fp16_overflow_guard(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("fp16_overflow_guard", x, 0));
    /* an F16 activation holds no finite value past FP16_MAX: its overflows are already inf */
    const float m = ops_k(tape)->max_abs(ops_read(tape, x, 0), brg_tensor_numel(x));
    if (!(m > FP16_MAX)) {
        *y = x;
        return BRG_OK;
    }
    /* transformers: clamp to finfo.max - 1000 when the half tensor holds an inf, else finfo.max */
    const float bound = m >= FP16_OVERFLOW ? FP16_MAX - 1000.0f : FP16_MAX;
    return brg_clamp(tape, x, -bound, bound, y);
}
