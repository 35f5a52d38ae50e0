/* linear and batched matmul: thin wrappers that route every product through brg_gemm. */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct linear_ctx {
    brg_tensor *x, *w, *b, *y;
    int64_t n, in, out;
    bool w_in_out;
} linear_ctx;

/* Rows per block when the operands are half and too wide to stage at once (an LM head's logits);
 * 0: one pass over everything, as in fp32 (whose sums keep their order). */
static int64_t linear_block(const brg_tensor *x, const brg_tensor *y, int64_t n, int64_t in, int64_t out) {
    if (!ops_is_half(x) && !ops_is_half(y)) return 0;
    const int64_t block = ops_stage_rows(n, in > out ? in : out);
    return block < n ? block : 0;
}

/* The backward a block of rows at a time: x's and y's gradient rows staged per block, the weight's
 * and bias's gradients summed over the blocks. */
static brg_status linear_backward_blocks(brg_tape *tape, linear_ctx *c, int64_t block) {
    brg_status st = BRG_OK;
    brg_tensor *x_grad_owner = c->x->requires_grad ? c->x : NULL;
    if (x_grad_owner && !brg_tape_grad_buffer(tape, c->x, &st)) return st;
    OPS_GRAD_FOR_WRITE(dw, dw_overwrite, tape, c->w);
    OPS_GRAD(db, tape, c->b);
    const float *w = ops_read(tape, c->w, 1);
    for (int64_t r0 = 0; r0 < c->n; r0 += block) {
        const int64_t rows = c->n - r0 < block ? c->n - r0 : block;
        const float *dy = ops_grad_is_half(c->y)
                              ? ops_widen_grad_rows(tape, c->y, BRG_SCRATCH_GRAD_READ, r0, rows, c->out)
                              : c->y->grad + r0 * c->out;
        float *dx = NULL;
        const bool half_dx = x_grad_owner && ops_grad_is_half(c->x);
        if (half_dx) dx = ops_widen_grad_rows(tape, c->x, BRG_SCRATCH_GRAD_STAGE, r0, rows, c->in);
        else if (x_grad_owner) dx = c->x->grad + r0 * c->in;
        ops_k(tape)->linear_bwd(dx, false, dw, dw_overwrite && r0 == 0, db, dy,
                                ops_read_rows(tape, c->x, 0, r0, rows, c->in), w, rows, c->in, c->out, c->w_in_out);
        if (half_dx) ops_round_grad_rows(tape, c->x, dx, r0, rows, c->in);
    }
    return BRG_OK;
}

static brg_status linear_backward(brg_tape *tape, void *p) {
    linear_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    const int64_t block = linear_block(c->x, c->y, c->n, c->in, c->out);
    if (block) return linear_backward_blocks(tape, c, block);
    OPS_GRAD_FOR_WRITE(dx, dx_overwrite, tape, c->x);
    OPS_GRAD_FOR_WRITE(dw, dw_overwrite, tape, c->w);
    OPS_GRAD(db, tape, c->b);
    ops_k(tape)->linear_bwd(dx, dx_overwrite, dw, dw_overwrite, db, ops_dy(tape, c->y), ops_read(tape, c->x, 0),
                            ops_read(tape, c->w, 1), c->n, c->in, c->out, c->w_in_out);
    return BRG_OK;
}

/* Checks a linear layer's operands; *out is its output width. */
static brg_status linear_check(const brg_tensor *x, const brg_tensor *w, const brg_tensor *b, bool w_in_out,
                               int64_t *out) {
    BRG_TRY(ops_check_float("linear", x, 1));
    BRG_TRY(ops_check_float("linear", w, 2));
    if (w->ndim != 2) return brg_error(BRG_ERR_INVALID_ARG, "linear: weight must be 2-d");
    int64_t in = x->shape[x->ndim - 1];
    int64_t w_in = w_in_out ? w->shape[0] : w->shape[1];
    *out = w_in_out ? w->shape[1] : w->shape[0];
    if (w_in != in)
        return brg_error(BRG_ERR_INVALID_ARG, "linear: input width %lld does not match weight %s (%lld)",
                         (long long)in, w->name ? w->name : "", (long long)w_in);
    if (b) {
        BRG_TRY(ops_check_float("linear", b, 1));
        if (brg_tensor_numel(b) != *out) return brg_error(BRG_ERR_INVALID_ARG, "linear: bias size mismatch");
    }
    return BRG_OK;
}

/* A [..., out] tensor shaped like x but for its last dim, in the tape's arena and activation type. */
static brg_status new_rows(brg_tape *tape, const brg_tensor *x, int64_t out, bool requires_grad, const char *name,
                           brg_tensor **y) {
    int64_t shape[BRG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = out;
    return ops_new(tape, x->ndim, shape, requires_grad, name, y);
}

brg_status brg_linear(brg_tape *tape, brg_tensor *x, brg_tensor *w, brg_tensor *b, bool w_in_out,
                      brg_tensor **y) {
    int64_t out;
    BRG_TRY(linear_check(x, w, b, w_in_out, &out));
    const brg_tensor *ins[3] = {x, w, b};
    bool rec = brg_tape_needs(tape, ins, 3);
    BRG_TRY(new_rows(tape, x, out, rec, "linear output", y));
    int64_t in = x->shape[x->ndim - 1];
    int64_t n = brg_tensor_numel(x) / (in ? in : 1);
    const int64_t block = linear_block(x, *y, n, in, out);
    if (block) {
        const float *wv = ops_read(tape, w, 1), *bv = b ? ops_read(tape, b, 2) : NULL;
        for (int64_t r0 = 0; r0 < n; r0 += block) {
            const int64_t rows = n - r0 < block ? n - r0 : block;
            float *values = ops_stage_buffer(3, rows * out);
            ops_k(tape)->linear_fwd(values, ops_read_rows(tape, x, 0, r0, rows, in), wv, bv, rows, in, out, w_in_out);
            ops_store_rows(tape, *y, values, r0, rows, out);
        }
    } else {
        float *values = ops_write(*y, 3);
        ops_k(tape)->linear_fwd(values, ops_read(tape, x, 0), ops_read(tape, w, 1), b ? ops_read(tape, b, 2) : NULL, n,
                                in, out, w_in_out);
        ops_store(tape, *y, values);
    }
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, linear_backward, linear_ctx, x, w, b, *y, n, in, out, w_in_out);
}

/* ---- linear + activation: the bias add and the activation fused into one pass ---- */

typedef struct linear_act_ctx {
    brg_tensor *x, *w, *b, *h, *y; /* h: the pre-activation, private to the op */
    int64_t n, in, out;
    bool w_in_out;
    brg_gelu_kind kind;
} linear_act_ctx;

static brg_status linear_act_backward(brg_tape *tape, void *p) {
    linear_act_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD_FOR_WRITE(dx, dx_overwrite, tape, c->x);
    OPS_GRAD_FOR_WRITE(dw, dw_overwrite, tape, c->w);
    OPS_GRAD(db, tape, c->b);
    /* dh is written whole by the fused pass, so it lives in scratch rather than a zeroed grad. */
    float *dh = brg_scratch(2, (size_t)(c->n * c->out));
    ops_k(tape)->bias_gelu_bwd(dh, db, ops_dy(tape, c->y), ops_read(tape, c->h, 2), c->n, c->out, c->kind);
    ops_k(tape)->linear_bwd(dx, dx_overwrite, dw, dw_overwrite, NULL, dh, ops_read(tape, c->x, 0),
                            ops_read(tape, c->w, 1), c->n, c->in, c->out, c->w_in_out);
    return BRG_OK;
}

brg_status brg_linear_act(brg_tape *tape, brg_tensor *x, brg_tensor *w, brg_tensor *b, bool w_in_out,
                          brg_activation act, brg_tensor **y) {
    if (act != BRG_ACT_GELU_ERF && act != BRG_ACT_GELU_TANH)
        return brg_error(BRG_ERR_INVALID_ARG, "linear_act: unknown activation %d", (int)act);
    int64_t out;
    BRG_TRY(linear_check(x, w, b, w_in_out, &out));
    const brg_tensor *ins[3] = {x, w, b};
    bool rec = brg_tape_needs(tape, ins, 3);
    brg_tensor *h;
    BRG_TRY(new_rows(tape, x, out, false, "linear_act pre-activation", &h));
    BRG_TRY(new_rows(tape, x, out, rec, "linear_act output", y));
    int64_t in = x->shape[x->ndim - 1];
    int64_t n = brg_tensor_numel(x) / (in ? in : 1);
    brg_gelu_kind kind = act == BRG_ACT_GELU_TANH ? BRG_GELU_TANH : BRG_GELU_ERF;
    /* the bias is added into the pre-activation in place, so h is stored after both passes */
    float *pre = ops_write(h, 2), *post = ops_write(*y, 3);
    ops_k(tape)->linear_fwd(pre, ops_read(tape, x, 0), ops_read(tape, w, 1), NULL, n, in, out, w_in_out);
    ops_k(tape)->bias_gelu_fwd(pre, post, b ? ops_read(tape, b, 1) : NULL, n, out, kind);
    ops_store(tape, h, pre);
    ops_store(tape, *y, post);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, linear_act_backward, linear_act_ctx, x, w, b, h, *y, n, in, out, w_in_out, kind);
}

typedef struct matmul_ctx {
    brg_tensor *a, *b, *y;
    int64_t batch, M, N, K;
    bool ta, tb;
} matmul_ctx;

static brg_status matmul_backward(brg_tape *tape, void *p) {
    matmul_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(da, tape, c->a);
    OPS_GRAD(db, tape, c->b);
    ops_k(tape)->bmm_bwd(da, db, ops_dy(tape, c->y), ops_read(tape, c->a, 0), ops_read(tape, c->b, 1), c->batch, c->M,
                         c->N, c->K, c->ta, c->tb);
    return BRG_OK;
}

brg_status brg_matmul(brg_tape *tape, brg_tensor *a, brg_tensor *b, bool trans_a, bool trans_b,
                      brg_tensor **y) {
    BRG_TRY(ops_check_float("matmul", a, 2));
    BRG_TRY(ops_check_float("matmul", b, 2));
    if (a->ndim != b->ndim) return brg_error(BRG_ERR_INVALID_ARG, "matmul: operands have %d and %d dims", a->ndim, b->ndim);
    int nd = a->ndim;
    int64_t batch = 1;
    for (int i = 0; i < nd - 2; i++) {
        if (a->shape[i] != b->shape[i]) return brg_error(BRG_ERR_INVALID_ARG, "matmul: batch dims differ");
        batch *= a->shape[i];
    }
    int64_t M = trans_a ? a->shape[nd - 1] : a->shape[nd - 2];
    int64_t K = trans_a ? a->shape[nd - 2] : a->shape[nd - 1];
    int64_t Kb = trans_b ? b->shape[nd - 1] : b->shape[nd - 2];
    int64_t N = trans_b ? b->shape[nd - 2] : b->shape[nd - 1];
    if (K != Kb)
        return brg_error(BRG_ERR_INVALID_ARG, "matmul: inner dims %lld and %lld differ", (long long)K, (long long)Kb);
    const brg_tensor *ins[2] = {a, b};
    bool rec = brg_tape_needs(tape, ins, 2);
    int64_t shape[BRG_MAX_DIMS];
    for (int i = 0; i < nd - 2; i++) shape[i] = a->shape[i];
    shape[nd - 2] = M;
    shape[nd - 1] = N;
    BRG_TRY(ops_new(tape, nd, shape, rec, "matmul output", y));
    float *values = ops_write(*y, 2);
    ops_k(tape)->bmm_fwd(values, ops_read(tape, a, 0), ops_read(tape, b, 1), batch, M, N, K, trans_a, trans_b);
    ops_store(tape, *y, values);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, matmul_backward, matmul_ctx, a, b, *y, batch, M, N, K, trans_a, trans_b);
}

/* ---- memory plans ---- */

/* brg_k_linear_fwd's and _bwd's products: y = x W; dx = dy W^T; dW = x^T dy ([in, out]) or
 * dy^T x ([out, in]). */
static void linear_products(ops_cost *c, double n, double in, double out, bool w_in_out) {
    ops_cost_product(c, n * in, in * out, false);
    if (!c->record) return;
    ops_cost_packed_weight(c, in, out);
    ops_cost_product(c, n * out, in * out, false);
    if (w_in_out) ops_cost_product(c, n * in, n * out, false);
    else ops_cost_product(c, n * out, n * in, false);
}

void ops_cost_linear(ops_cost *c, double rows, double in, double out, bool w_in_out) {
    /* half operands too wide to stage at once go a block of rows at a time (linear_block) */
    const double block = ops_cost_stage_rows(c, rows, in > out ? in : out);
    if (block < rows) ops_cost_output_rows(c, rows * out, block * out);
    else ops_cost_tensor(c, rows * out, ops_cost_act(c), true);
    ops_cost_stage(c, 0, block * in);
    ops_cost_stage(c, 3, block * out);
    ops_cost_context(c, sizeof(linear_ctx));
    linear_products(c, block, in, out, w_in_out);
}

void ops_cost_linear_act(ops_cost *c, double rows, double in, double out, bool w_in_out, bool bias) {
    ops_cost_tensor(c, rows * out, ops_cost_act(c), false); /* the pre-activation */
    ops_cost_tensor(c, rows * out, ops_cost_act(c), true);
    ops_cost_stage(c, 0, rows * in);
    ops_cost_stage(c, 2, rows * out);
    ops_cost_stage(c, 3, rows * out);
    ops_cost_context(c, sizeof(linear_act_ctx));
    linear_products(c, rows, in, out, w_in_out);
    if (!c->record) return;
    ops_cost_scratch(c, 2, rows * out);       /* dh */
    if (bias) ops_cost_scratch(c, 1, 2 * out); /* the bias gradient's column sums, in double */
}

void ops_cost_matmul(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, ops_cost_act(c), true);
    /* its operands' staging is left out: no built-in model multiplies two activations here */
    ops_cost_stage(c, 2, out_elems);
    ops_cost_context(c, sizeof(matmul_ctx));
}
