/* Cross-entropy, the loss transformers' LM and classification heads use. */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct cross_entropy_ctx {
    brg_tensor *logits, *targets, *loss;
    float *lse;
    int64_t n, v, count;
    float grad_scale; /* count / denominator: turns the kernel's mean gradient into the share's */
    int32_t ignore_index;
} cross_entropy_ctx;

static brg_status cross_entropy_backward(brg_tape *tape, void *p) {
    cross_entropy_ctx *c = p;
    if (!c->loss->grad) return BRG_OK;
    OPS_GRAD(dl, tape, c->logits);
    if (dl)
        brg_k_cross_entropy_bwd(dl, c->loss->grad[0] * c->grad_scale, OPS_CF32(c->logits), c->lse, (const int32_t *)c->targets->data,
                                c->n, c->v, c->ignore_index, c->count);
    return BRG_OK;
}

brg_status brg_cross_entropy(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                             brg_tensor **loss) {
    return brg_cross_entropy_share(tape, logits, targets, ignore_index, 0.0, loss);
}

brg_status brg_cross_entropy_share(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                                   double denominator, brg_tensor **loss) {
    BRG_TRY(ops_check_f32("cross_entropy", logits, 1));
    BRG_TRY(ops_check_i32("cross_entropy", targets));
    int64_t v = logits->shape[logits->ndim - 1];
    int64_t n = brg_tensor_numel(targets);
    if (brg_tensor_numel(logits) != n * v)
        return brg_error(BRG_ERR_INVALID_ARG, "cross_entropy: %lld targets for %lld rows of logits", (long long)n,
                         (long long)(v ? brg_tensor_numel(logits) / v : 0));
    const int32_t *t = targets->data;
    for (int64_t i = 0; i < n; i++)
        if (t[i] != ignore_index && (t[i] < 0 || t[i] >= v))
            return brg_error(BRG_ERR_INVALID_ARG, "label %d at position %lld is out of range [0, %lld) (use %d to ignore)",
                             t[i], (long long)i, (long long)v, ignore_index);
    const brg_tensor *ins[1] = {logits};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 0, NULL, rec, "loss", loss));
    float *lse = brg_arena_alloc(brg_tape_arena(tape), (size_t)(n ? n : 1) * sizeof(float), "cross_entropy statistics");
    if (!lse) return BRG_ERR_OOM;
    int64_t count = 0;
    float mean = brg_k_cross_entropy_fwd(lse, &count, OPS_CF32(logits), t, n, v, ignore_index);
    double scale = denominator > 0 ? (double)count / denominator : 1.0;
    OPS_F32(*loss)[0] = (float)(mean * scale);
    if (!rec || count == 0) {
        (*loss)->requires_grad = rec && count > 0;
        return BRG_OK;
    }
    cross_entropy_ctx *c = brg_tape_record(tape, cross_entropy_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (cross_entropy_ctx){logits, targets, *loss, lse, n, v, count, (float)scale, ignore_index};
    return BRG_OK;
}

/* ---- memory plans ---- */

void ops_cost_cross_entropy(ops_cost *c, double rows) {
    ops_cost_tensor(c, 1, sizeof(float), true);               /* the loss */
    c->fwd += ops_cost_align((rows < 1 ? 1 : rows) * sizeof(float)); /* log-sum-exp per row */
    ops_cost_context(c, sizeof(cross_entropy_ctx));
    ops_cost_scratch(c, 3, 2 * rows); /* per-row losses, in double */
}
