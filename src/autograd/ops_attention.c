/* Attention and the head reshuffles around it. */
#include "ops_cost.h"
#include "ops_internal.h"

/* ---- split heads ---- */
typedef struct split_ctx {
    brg_tensor *x, *y;
    int64_t col, B, T, H, D, W;
} split_ctx;

static brg_status split_backward(brg_tape *tape, void *p) {
    split_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    if (dx) ops_k(tape)->merge_heads(dx + c->col, ops_dy(tape, c->y), c->B, c->T, c->H, c->D, c->W, true);
    return BRG_OK;
}

brg_status brg_split_heads(brg_tape *tape, brg_tensor *x, int64_t col, int64_t heads, int64_t head_dim,
                           brg_tensor **y) {
    BRG_TRY(ops_check_float("split_heads", x, 3));
    if (x->ndim != 3) return brg_error(BRG_ERR_INVALID_ARG, "split_heads: input must be [B, T, W]");
    int64_t B = x->shape[0], T = x->shape[1], W = x->shape[2];
    if (col < 0 || heads <= 0 || head_dim <= 0 || col + heads * head_dim > W)
        return brg_error(BRG_ERR_INVALID_ARG, "split_heads: columns [%lld, %lld) outside width %lld", (long long)col,
                         (long long)(col + heads * head_dim), (long long)W);
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[4] = {B, heads, T, head_dim};
    BRG_TRY(ops_new(tape, 4, shape, rec, "split heads", y));
    /* x through slot 3, where the linear that made it wrote it (GPT-2's fused [B, T, 3C] whole) */
    float *out = ops_write(*y, 0);
    ops_k(tape)->split_heads(out, ops_read(tape, x, 3) + col, B, T, heads, head_dim, W);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, split_backward, split_ctx, x, *y, col, B, T, heads, head_dim, W);
}

/* ---- merge heads ---- */
typedef struct merge_ctx {
    brg_tensor *x, *y;
} merge_ctx;

static brg_status merge_backward(brg_tape *tape, void *p) {
    merge_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    if (!dx) return BRG_OK;
    int64_t B = c->x->shape[0], H = c->x->shape[1], T = c->x->shape[2], D = c->x->shape[3];
    /* The gradient of a merge is a split; accumulate through a merge of the opposite direction
     * would need a temp, so add row by row. */
    const float *g = ops_dy(tape, c->y);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                float *d = dx + ((b * H + h) * T + t) * D;
                const float *s = g + (b * T + t) * H * D + h * D;
                for (int64_t i = 0; i < D; i++) d[i] += s[i];
            }
    return BRG_OK;
}

brg_status brg_merge_heads(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("merge_heads", x, 4));
    if (x->ndim != 4) return brg_error(BRG_ERR_INVALID_ARG, "merge_heads: input must be [B, H, T, D]");
    int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[3] = {B, T, H * D};
    BRG_TRY(ops_new(tape, 3, shape, rec, "merged heads", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->merge_heads(out, ops_read(tape, x, 0), B, T, H, D, H * D, false);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, merge_backward, merge_ctx, x, *y);
}

/* ---- attention ---- */
typedef struct attention_ctx {
    brg_tensor *q, *k, *v, *bias, *key_mask, *y;
    float *lse;
    brg_attn_args args;
} attention_ctx;

static brg_status attention_backward(brg_tape *tape, void *p) {
    attention_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dq, tape, c->q);
    OPS_GRAD(dk, tape, c->k);
    OPS_GRAD(dv, tape, c->v);
    OPS_GRAD(dbias, tape, c->bias);
    /* the forward's pointers to a widened bias or mask went with its staging: widen them again */
    brg_attn_args args = c->args;
    args.bias = c->bias ? ops_read(tape, c->bias, 4) : NULL;
    args.key_mask = c->key_mask ? ops_read(tape, c->key_mask, 5) : NULL;
    ops_k(tape)->attention_bwd(dq, dk, dv, dbias, ops_dy(tape, c->y), ops_read(tape, c->y, 3), c->lse,
                               ops_read(tape, c->q, 0), ops_read(tape, c->k, 1), ops_read(tape, c->v, 2), &args);
    return BRG_OK;
}

static brg_status attention_check(const brg_tensor *q, const brg_tensor *k, const brg_tensor *v,
                                  const brg_attention_opts *o) {
    BRG_TRY(ops_check_float("attention", q, 4));
    BRG_TRY(ops_check_float("attention", k, 4));
    BRG_TRY(ops_check_float("attention", v, 4));
    if (q->ndim != 4 || k->ndim != 4 || !brg_tensor_same_shape(k, v) || q->shape[0] != k->shape[0] ||
        q->shape[1] != k->shape[1] || q->shape[3] != k->shape[3])
        return brg_error(BRG_ERR_INVALID_ARG, "attention: q, k, v must be [B,H,Tq,D], [B,H,Tk,D], [B,H,Tk,D]");
    int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], Tk = k->shape[2];
    if (o->key_mask) {
        BRG_TRY(ops_check_float("attention", o->key_mask, 2));
        if (o->key_mask->ndim != 2 || o->key_mask->shape[0] != B || o->key_mask->shape[1] != Tk)
            return brg_error(BRG_ERR_INVALID_ARG, "attention: key mask must be [B, Tk] = [%lld, %lld]", (long long)B,
                             (long long)Tk);
    }
    if (o->bias) {
        BRG_TRY(ops_check_float("attention", o->bias, 3));
        if (o->bias->ndim != 3 || o->bias->shape[0] != H || o->bias->shape[1] != Tq || o->bias->shape[2] != Tk)
            return brg_error(BRG_ERR_INVALID_ARG, "attention: bias must be [H, Tq, Tk]");
    }
    return BRG_OK;
}

brg_status brg_attention(brg_tape *tape, brg_tensor *q, brg_tensor *k, brg_tensor *v,
                         const brg_attention_opts *opts, brg_tensor **y) {
    BRG_TRY(attention_check(q, k, v, opts));
    const brg_tensor *ins[4] = {q, k, v, opts->bias};
    bool rec = brg_tape_needs(tape, ins, 4);
    BRG_TRY(ops_new(tape, 4, q->shape, rec, "attention output", y));
    brg_attn_args args = {
        .B = q->shape[0], .H = q->shape[1], .Tq = q->shape[2], .Tk = k->shape[2], .D = q->shape[3],
        .scale = opts->scale, .causal = opts->causal,
        .key_mask = opts->key_mask ? ops_read(tape, opts->key_mask, 5) : NULL,
        .bias = opts->bias ? ops_read(tape, opts->bias, 4) : NULL,
        .dropout = opts->dropout, .seed = opts->seed, .offset = opts->offset,
    };
    if (!(args.dropout >= 0.0f && args.dropout < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARG, "attention dropout %g not in [0, 1)", args.dropout);
    float *lse = brg_arena_alloc(brg_tape_arena(tape), (size_t)(args.B * args.H * args.Tq) * sizeof(float),
                                 "attention statistics");
    if (!lse) return BRG_ERR_OOM;
    float *out = ops_write(*y, 3);
    ops_k(tape)->attention_fwd(out, lse, ops_read(tape, q, 0), ops_read(tape, k, 1), ops_read(tape, v, 2), &args);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, attention_backward, attention_ctx, q, k, v, opts->bias, opts->key_mask, *y, lse, args);
}

/* ---- memory plans ---- */

void ops_cost_split_heads(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(split_ctx));
    /* x is at least the heads' size; a wider one (GPT-2's fused [B, T, 3C]) is the output of a
     * linear, which counted it whole in slot 3 */
    ops_cost_stage(c, 3, out_elems);
    ops_cost_stage(c, 0, out_elems);
}

void ops_cost_merge_heads(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(merge_ctx));
    ops_cost_stage(c, 0, out_elems);
    ops_cost_stage(c, 1, out_elems);
}

void ops_cost_attention(ops_cost *c, double B, double H, double Tq, double Tk, double D) {
    ops_cost_tensor(c, B * H * Tq * D, ops_cost_act(c), true);
    c->fwd += ops_cost_align(B * H * Tq * sizeof(float)); /* the statistics */
    ops_cost_context(c, sizeof(attention_ctx));
    /* q, k, v and the output, forward and backward alike. A widened bias (slot 4): ops_relpos.c's
     * plan; a half key mask (slot 5) is left out (masks are host inputs, F32, in every model). */
    ops_cost_stage(c, 0, B * H * Tq * D);
    ops_cost_stage(c, 1, B * H * Tk * D);
    ops_cost_stage(c, 2, B * H * Tk * D);
    ops_cost_stage(c, 3, B * H * Tq * D);
    /* backward adds into dq, dk, dv (and a bias's gradient: ops_relpos.c's plan) */
    ops_cost_grad_stage(c, 0, B * H * Tq * D);
    ops_cost_grad_stage(c, 1, B * H * Tk * D);
    ops_cost_grad_stage(c, 2, B * H * Tk * D);
    if (Tk <= 0) return;
    /* score rows of one block (forward), with their gradients (backward), on every team thread */
    ops_cost_team_scratch(c, 0, (c->record ? 2 : 1) * BRG_ATTN_ROW_BLOCK * Tk);
    /* A block of nr query rows: scores Q K^T, then P V; backward dP = dO V^T, dQ = dS K,
     * dK = dS^T Q, dV = P^T dO (P and dS [nr, Tk], Q and dO [nr, D], K and V [Tk, D]). */
    const double nr = Tq < BRG_ATTN_ROW_BLOCK ? Tq : BRG_ATTN_ROW_BLOCK;
    ops_cost_product(c, nr * D, Tk * D, true);
    ops_cost_product(c, nr * Tk, Tk * D, true);
    if (c->record) ops_cost_product(c, nr * Tk, nr * D, true);
}
