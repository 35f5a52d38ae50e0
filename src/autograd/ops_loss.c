/* The losses of transformers' heads: cross-entropy (LM, token and single-label classification),
 * MSE (regression) and BCE with logits (multi-label classification). */
#include "ops_cost.h"
#include "ops_internal.h"

/* ---- cross-entropy ---- */
typedef struct cross_entropy_ctx {
    brg_tensor *logits, *targets, *loss;
    float *lse;
    int64_t n, v, count;
    float grad_scale; /* count / denominator: turns the kernel's mean gradient into the share's */
    int32_t ignore_index;
    bool over_logits; /* backward writes the logits' gradient over their values (see logits_spent) */
} cross_entropy_ctx;

/* Whether backward may write the logits' gradient over them: they were donated to this loss (the
 * model's promise that no op before it reads them in its backward), the tape's caller reads them
 * before backward only (brg_tape_set_outputs_spent), and they are fp32 with an fp32 gradient. */
static bool logits_spent(brg_tape *tape, const brg_tensor *logits) {
    const bool donated = brg_tape_take_donated(tape, logits);
    return donated && brg_tape_outputs_spent(tape) && logits->dtype == BRG_DTYPE_F32 &&
           logits->grad_dtype == BRG_DTYPE_F32 && !logits->grad_arena;
}

/* Rows per block for half logits too wide to stage at once; 0: one pass (fp32 logits always). */
static int64_t logits_block(const brg_tensor *logits, int64_t n, int64_t v) {
    if (!ops_is_half(logits)) return 0;
    const int64_t block = ops_stage_rows(n, v);
    return block < n ? block : 0;
}

/* The backward a block of rows at a time: the logits and their (half) gradient rows staged. */
static brg_status cross_entropy_backward_blocks(brg_tape *tape, cross_entropy_ctx *c, int64_t block) {
    brg_status st = BRG_OK;
    if (!brg_tape_grad_buffer(tape, c->logits, &st)) return st;
    const float g = c->loss->grad[0] * c->grad_scale;
    const int32_t *t = c->targets->data;
    for (int64_t r0 = 0; r0 < c->n; r0 += block) {
        const int64_t rows = c->n - r0 < block ? c->n - r0 : block;
        const bool half = ops_grad_is_half(c->logits);
        float *dl = half ? ops_widen_grad_rows(tape, c->logits, BRG_SCRATCH_GRAD_STAGE, r0, rows, c->v)
                         : c->logits->grad + r0 * c->v;
        ops_k(tape)->cross_entropy_bwd(dl, false, g, ops_read_rows(tape, c->logits, 3, r0, rows, c->v), c->lse + r0,
                                       t + r0, rows, c->v, c->ignore_index, c->count);
        if (half) ops_round_grad_rows(tape, c->logits, dl, r0, rows, c->v);
    }
    return BRG_OK;
}

static brg_status cross_entropy_backward(brg_tape *tape, void *p) {
    cross_entropy_ctx *c = p;
    if (!c->loss->grad) return BRG_OK;
    const int64_t block = c->logits->requires_grad ? logits_block(c->logits, c->n, c->v) : 0;
    if (block) return cross_entropy_backward_blocks(tape, c, block);
    brg_status st = BRG_OK;
    bool overwrite = true;
    /* Another loss on the same logits may have given them a gradient already: then add into it. */
    float *dl = c->over_logits && c->logits->requires_grad && !c->logits->grad
                    ? brg_tape_grad_over_values(tape, c->logits, &st)
                    : brg_tape_grad_for_write(tape, c->logits, &overwrite, &st);
    if (st != BRG_OK) return st;
    if (dl)
        ops_k(tape)->cross_entropy_bwd(dl, overwrite, c->loss->grad[0] * c->grad_scale, ops_read(tape, c->logits, 3),
                                       c->lse, (const int32_t *)c->targets->data, c->n, c->v, c->ignore_index,
                                       c->count);
    return BRG_OK;
}

brg_status brg_cross_entropy(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                             brg_tensor **loss) {
    return brg_cross_entropy_share(tape, logits, targets, ignore_index, 0.0, loss);
}

brg_status brg_cross_entropy_share(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                                   double denominator, brg_tensor **loss) {
    BRG_TRY(ops_check_float("cross_entropy", logits, 1));
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
    const bool over_logits = logits_spent(tape, logits);
    /* the loss reduces in fp32 and stays F32 whatever the activations' type */
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 0, NULL, rec, "loss", loss));
    float *lse = brg_arena_alloc(brg_tape_arena(tape), (size_t)(n ? n : 1) * sizeof(float), "cross_entropy statistics");
    if (!lse) return BRG_ERR_OOM;
    int64_t count = 0;
    float mean = 0.0f;
    const int64_t block = logits_block(logits, n, v);
    if (block) { /* the blocks' means weighted by their counted rows */
        double total = 0.0;
        for (int64_t r0 = 0; r0 < n; r0 += block) {
            const int64_t rows = n - r0 < block ? n - r0 : block;
            int64_t counted = 0;
            const float m = ops_k(tape)->cross_entropy_fwd(
                lse + r0, &counted, ops_read_rows(tape, logits, 3, r0, rows, v), t + r0, rows, v, ignore_index);
            total += (double)m * (double)counted;
            count += counted;
        }
        mean = count ? (float)(total / (double)count) : 0.0f;
    } else {
        mean = ops_k(tape)->cross_entropy_fwd(lse, &count, ops_read(tape, logits, 3), t, n, v, ignore_index);
    }
    double scale = denominator > 0 ? (double)count / denominator : 1.0;
    OPS_F32(*loss)[0] = (float)(mean * scale);
    if (!rec || count == 0) {
        (*loss)->requires_grad = rec && count > 0;
        return BRG_OK;
    }
    return OPS_RECORD(tape, cross_entropy_backward, cross_entropy_ctx, logits, targets, *loss, lse, n, v, count,
                      (float)scale, ignore_index, over_logits);
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
    const float *x = ops_read(tape, c->x, 3), *target = ops_read(tape, c->target, 2);
    if (c->kind == LOSS_MSE) ops_k(tape)->mse_bwd(dx, scale, x, target, n);
    else ops_k(tape)->bce_logits_bwd(dx, scale, x, target, n);
    return BRG_OK;
}

static brg_status pointwise(brg_tape *tape, const char *op, pointwise_loss kind, brg_tensor *x, brg_tensor *target,
                            double denominator, brg_tensor **loss) {
    BRG_TRY(ops_check_float(op, x, 0));
    BRG_TRY(ops_check_float(op, target, 0));
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
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 0, NULL, rec, "loss", loss)); /* fp32, as cross_entropy's */
    const float *xs = ops_read(tape, x, 3), *ts = ops_read(tape, target, 2);
    double sum = kind == LOSS_MSE ? ops_k(tape)->mse_sum_fwd(xs, ts, n) : ops_k(tape)->bce_logits_sum_fwd(xs, ts, n);
    OPS_F32(*loss)[0] = n > 0 ? (float)(sum / denom) : 0.0f;
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, pointwise_loss_backward, loss_ctx, x, target, *loss, (float)(1.0 / denom), kind);
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

void ops_cost_cross_entropy(ops_cost *c, double rows) {
    ops_cost_tensor(c, 1, sizeof(float), true);               /* the loss */
    c->fwd += ops_cost_align((rows < 1 ? 1 : rows) * sizeof(float)); /* log-sum-exp per row */
    ops_cost_context(c, sizeof(cross_entropy_ctx));
    ops_cost_scratch(c, 3, 2 * rows); /* per-row losses, in double */
    /* The logits (rows x classes, the classes unknown here) are staged in slot 3, where the linear
     * that made them counted them whole. */
}

void ops_cost_cross_entropy_spent(ops_cost *c, double rows, double classes) {
    ops_cost_cross_entropy(c, rows);
    /* fp32 logits donated to the loss take their gradient over their values (logits_spent): the
     * gradient the linear that made them counted is never allocated. */
    if (c->record && ops_cost_act(c) == (int)sizeof(float)) c->grad -= ops_cost_align(rows * classes * sizeof(float));
}

void ops_cost_pointwise_loss(ops_cost *c, double n) {
    ops_cost_tensor(c, 1, sizeof(float), true);
    ops_cost_context(c, sizeof(loss_ctx));
    ops_cost_stage(c, 3, n); /* the input, forward and backward */
    ops_cost_stage(c, 2, n); /* the targets */
}
