/* patch_unfold: ViT's patches as rows (the patch convolution as unfold + matmul). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct unfold_ctx {
    brg_tensor *pixels, *y;
    brg_patch_dims d;
} unfold_ctx;

static brg_status unfold_backward(brg_tape *tape, void *p) {
    unfold_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->pixels);
    ops_k(tape)->patch_unfold_bwd(dx, ops_dy(tape, c->y), &c->d);
    return BRG_OK;
}

brg_status brg_patch_unfold(brg_tape *tape, brg_tensor *pixels, int64_t ph, int64_t pw, brg_tensor **y) {
    BRG_TRY(ops_check_float("patch_unfold", pixels, 0));
    char s[128];
    if (pixels->ndim != 4)
        return brg_error(BRG_ERR_INVALID_ARG, "patch_unfold: %s must be [B, C, H, W], got %s",
                         ops_name(pixels, "pixel_values"), brg_shape_str(pixels, s, sizeof s));
    brg_patch_dims d = {pixels->shape[0], pixels->shape[1], pixels->shape[2], pixels->shape[3], ph, pw};
    if (ph < 1 || pw < 1 || d.C < 1 || d.H < ph || d.W < pw)
        return brg_error(BRG_ERR_INVALID_ARG, "patch_unfold: %s %s is smaller than one %lldx%lld patch",
                         ops_name(pixels, "pixel_values"), brg_shape_str(pixels, s, sizeof s), (long long)ph,
                         (long long)pw);
    const brg_tensor *ins[1] = {pixels};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[3] = {d.B, (d.H / ph) * (d.W / pw), d.C * ph * pw};
    BRG_TRY(ops_new(tape, 3, shape, rec, "patches", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->patch_unfold_fwd(out, ops_read(tape, pixels, 0), &d);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, unfold_backward, unfold_ctx, pixels, *y, d);
}

void ops_cost_patch_unfold(ops_cost *c, double out_elems) {
    /* of pixel_values, which take no gradient: nothing is recorded */
    ops_cost_tensor(c, out_elems, ops_cost_act(c), false);
    ops_cost_stage(c, 1, out_elems); /* the patches; the pixels come from the batch in F32, read in place */
}
