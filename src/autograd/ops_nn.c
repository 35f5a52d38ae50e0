/* Element-wise and row-wise ops: embedding, layer norm, activations, softmax, add, dropout,
 * reshape. */
#include <string.h>

#include "ops_cost.h"
#include "ops_internal.h"

static int64_t last_dim(const brg_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* ---- embedding ---- */
typedef struct embedding_ctx {
    brg_tensor *ids, *table, *y;
    int64_t n, dim;
} embedding_ctx;

static brg_status embedding_backward(brg_tape *tape, void *p) {
    embedding_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->table);
    if (dt) ops_k(tape)->embedding_bwd(dt, ops_dy(tape, c->y), (const int32_t *)c->ids->data, c->n, c->dim);
    return BRG_OK;
}

brg_status brg_embedding(brg_tape *tape, brg_tensor *ids, brg_tensor *table, brg_tensor **y) {
    BRG_TRY(ops_check_i32("embedding", ids));
    BRG_TRY(ops_check_float("embedding", table, 2));
    if (ids->ndim + 1 > BRG_MAX_DIMS) return brg_error(BRG_ERR_INVALID_ARG, "embedding: too many dims");
    int64_t n = brg_tensor_numel(ids), rows = table->shape[0], dim = table->shape[1];
    const int32_t *id = ids->data;
    for (int64_t i = 0; i < n; i++)
        if (id[i] < 0 || id[i] >= rows)
            return brg_error(BRG_ERR_INVALID_ARG, "token id %d at position %lld is out of range for %s (%lld rows)",
                             id[i], (long long)i, table->name ? table->name : "the embedding", (long long)rows);
    const brg_tensor *ins[1] = {table};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[BRG_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = dim;
    BRG_TRY(ops_new(tape, ids->ndim + 1, shape, rec, "embedding output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->embedding_fwd(out, id, ops_read(tape, table, 0), n, dim);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, embedding_backward, embedding_ctx, ids, table, *y, n, dim);
}

/* ---- layer norm ---- */
typedef struct layer_norm_ctx {
    brg_tensor *x, *gamma, *beta, *y;
    float *mean, *rstd;
    int64_t n, c;
} layer_norm_ctx;

static brg_status layer_norm_backward(brg_tape *tape, void *p) {
    layer_norm_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    OPS_GRAD(dg, tape, c->gamma);
    OPS_GRAD(db, tape, c->beta);
    ops_k(tape)->layernorm_bwd(dx, dg, db, ops_dy(tape, c->y), ops_read(tape, c->x, 0), ops_read(tape, c->gamma, 1),
                               c->mean, c->rstd, c->n, c->c);
    return BRG_OK;
}

brg_status brg_layer_norm(brg_tape *tape, brg_tensor *x, brg_tensor *gamma, brg_tensor *beta, float eps,
                          brg_tensor **y) {
    BRG_TRY(ops_check_float("layer_norm", x, 1));
    BRG_TRY(ops_check_float("layer_norm", gamma, 1));
    BRG_TRY(ops_check_float("layer_norm", beta, 1));
    int64_t c = last_dim(x), n = brg_tensor_numel(x) / (c ? c : 1);
    if (brg_tensor_numel(gamma) != c || brg_tensor_numel(beta) != c)
        return brg_error(BRG_ERR_INVALID_ARG, "layer_norm: weight/bias size does not match width %lld", (long long)c);
    const brg_tensor *ins[3] = {x, gamma, beta};
    bool rec = brg_tape_needs(tape, ins, 3);
    BRG_TRY(ops_new_like(tape, x, rec, "layer_norm output", y));
    brg_arena *arena = brg_tape_arena(tape);
    float *mean = brg_arena_alloc(arena, (size_t)n * sizeof(float), "layer_norm statistics");
    float *rstd = brg_arena_alloc(arena, (size_t)n * sizeof(float), "layer_norm statistics");
    if (!mean || !rstd) return BRG_ERR_OOM;
    float *out = ops_write(*y, 3);
    ops_k(tape)->layernorm_fwd(out, mean, rstd, ops_read(tape, x, 0), ops_read(tape, gamma, 1), ops_read(tape, beta, 2),
                               n, c, eps);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, layer_norm_backward, layer_norm_ctx, x, gamma, beta, *y, mean, rstd, n, c);
}

/* ---- activations ---- */
typedef struct activation_ctx {
    brg_tensor *x, *y;
    brg_activation act;
} activation_ctx;

static brg_gelu_kind gelu_kind(brg_activation act) { return act == BRG_ACT_GELU_TANH ? BRG_GELU_TANH : BRG_GELU_ERF; }

static brg_status activation_backward(brg_tape *tape, void *p) {
    activation_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    if (dx)
        ops_k(tape)->gelu_bwd(dx, ops_dy(tape, c->y), ops_read(tape, c->x, 0), brg_tensor_numel(c->x),
                              gelu_kind(c->act));
    return BRG_OK;
}

brg_status brg_activation_op(brg_tape *tape, brg_tensor *x, brg_activation act, brg_tensor **y) {
    BRG_TRY(ops_check_float("activation", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "activation output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->gelu_fwd(out, ops_read(tape, x, 0), brg_tensor_numel(x), gelu_kind(act));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, activation_backward, activation_ctx, x, *y, act);
}

/* ---- softmax ---- */
typedef struct softmax_ctx {
    brg_tensor *x, *y;
} softmax_ctx;

static brg_status softmax_backward(brg_tape *tape, void *p) {
    softmax_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    int64_t cols = last_dim(c->x);
    if (dx)
        ops_k(tape)->softmax_bwd(dx, ops_dy(tape, c->y), ops_read(tape, c->y, 0),
                                 brg_tensor_numel(c->x) / (cols ? cols : 1), cols);
    return BRG_OK;
}

brg_status brg_softmax(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_float("softmax", x, 1));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "softmax output", y));
    int64_t cols = last_dim(x);
    float *out = ops_write(*y, 1);
    ops_k(tape)->softmax_fwd(out, ops_read(tape, x, 0), brg_tensor_numel(x) / (cols ? cols : 1), cols);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, softmax_backward, softmax_ctx, x, *y);
}

/* ---- add ---- */
typedef struct add_ctx {
    brg_tensor *a, *b, *y;
} add_ctx;

static brg_status add_backward(brg_tape *tape, void *p) {
    add_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    int64_t n = brg_tensor_numel(c->y);
    const float *dy = ops_dy(tape, c->y);
    /* A fresh gradient (the first contribution to it) is a copy of dy, not dy added to zeros.
     * One after the other: a + a takes the copy, then the add. */
    OPS_GRAD_FOR_WRITE(da, da_overwrite, tape, c->a);
    ops_k(tape)->accumulate(da, da_overwrite, dy, n);
    OPS_GRAD_FOR_WRITE(db, db_overwrite, tape, c->b);
    ops_k(tape)->accumulate(db, db_overwrite, dy, n);
    return BRG_OK;
}

/* An output of its own (its own gradient) on x's buffer: for an op that writes over a donated input. */
static brg_status new_over(brg_tape *tape, brg_tensor *x, bool rec, const char *what, brg_tensor **y) {
    brg_tensor *t = brg_arena_alloc(brg_tape_arena(tape), sizeof *t, what);
    if (!t) return BRG_ERR_OOM;
    *t = brg_tensor_wrap(x->dtype, x->ndim, x->shape, x->data);
    t->name = what;
    t->requires_grad = rec;
    ops_half_grad(t);
    *y = t;
    return brg_tape_output(tape, t);
}

/* The sum goes over a donated operand's buffer (brg_tape_donate; its backward reads no data, and
 * each element is read before it is written), else into a new one. */
brg_status brg_add(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y) {
    BRG_TRY(ops_check_float("add", a, 0));
    BRG_TRY(ops_check_float("add", b, 0));
    if (!brg_tensor_same_shape(a, b)) {
        char sa[128], sb[128];
        return brg_error(BRG_ERR_INVALID_ARG, "add: shapes %s and %s differ", brg_shape_str(a, sa, sizeof sa),
                         brg_shape_str(b, sb, sizeof sb));
    }
    const brg_tensor *ins[2] = {a, b};
    bool rec = brg_tape_needs(tape, ins, 2);
    brg_tensor *over = brg_tape_take_donated(tape, b) ? b : brg_tape_take_donated(tape, a) ? a : NULL;
    BRG_TRY(over ? new_over(tape, over, rec, "add output", y) : ops_new_like(tape, a, rec, "add output", y));
    /* both operands are read (staged) before the sum is written, which may be over one of them */
    const float *ra = ops_read(tape, a, 0), *rb = ops_read(tape, b, 1);
    float *out = ops_write(*y, 2);
    ops_k(tape)->add_fwd(out, ra, rb, brg_tensor_numel(a));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, add_backward, add_ctx, a, b, *y);
}

/* ---- scale ---- */
typedef struct scale_ctx {
    brg_tensor *x, *y;
    float s;
} scale_ctx;

static brg_status scale_backward(brg_tape *tape, void *p) {
    scale_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    if (!dx) return BRG_OK;
    int64_t n = brg_tensor_numel(c->x);
    const float *dy = ops_dy(tape, c->y);
    for (int64_t i = 0; i < n; i++) dx[i] += c->s * dy[i];
    return BRG_OK;
}

brg_status brg_scale(brg_tape *tape, brg_tensor *x, float s, brg_tensor **y) {
    BRG_TRY(ops_check_float("scale", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(ops_new_like(tape, x, rec, "scale output", y));
    float *out = ops_write(*y, 1);
    ops_k(tape)->scale(out, ops_read(tape, x, 0), s, brg_tensor_numel(x));
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, scale_backward, scale_ctx, x, *y, s);
}

/* ---- dropout ---- */
typedef struct dropout_ctx {
    brg_tensor *x, *y;
    float p;
    uint64_t seed, offset;
} dropout_ctx;

static brg_status dropout_backward(brg_tape *tape, void *p) {
    dropout_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD_FOR_WRITE(dx, overwrite, tape, c->x);
    if (dx)
        ops_k(tape)->dropout_bwd(dx, overwrite, ops_dy(tape, c->y), brg_tensor_numel(c->x), c->p, c->seed, c->offset);
    return BRG_OK;
}

/* Over a donated input's buffer (its backward reads no data; each element is read before it is
 * written), else into a new one. */
brg_status brg_dropout(brg_tape *tape, brg_tensor *x, float p, bool training, uint64_t seed, uint64_t offset,
                       brg_tensor **y) {
    BRG_TRY(ops_check_float("dropout", x, 0));
    if (!(p >= 0.0f && p <= 1.0f)) return brg_error(BRG_ERR_INVALID_ARG, "dropout probability %g not in [0, 1]", p);
    if (!training || p == 0.0f) {
        *y = x;
        return BRG_OK;
    }
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(brg_tape_take_donated(tape, x) ? new_over(tape, x, rec, "dropout output", y)
                                           : ops_new_like(tape, x, rec, "dropout output", y));
    const float *in = ops_read(tape, x, 0);
    float *out = ops_write(*y, 1);
    ops_k(tape)->dropout_fwd(out, in, brg_tensor_numel(x), p, seed, offset);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, dropout_backward, dropout_ctx, x, *y, p, seed, offset);
}

/* ---- reshape: shares the data; the gradient is copied back since buffers are per tensor ---- */
typedef struct reshape_ctx {
    brg_tensor *x, *y;
} reshape_ctx;

static brg_status reshape_backward(brg_tape *tape, void *p) {
    reshape_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD_FOR_WRITE(dx, overwrite, tape, c->x);
    ops_k(tape)->accumulate(dx, overwrite, ops_dy(tape, c->y), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_reshape(brg_tape *tape, brg_tensor *x, int ndim, const int64_t *shape, brg_tensor **y) {
    brg_tensor view;
    BRG_TRY(brg_tensor_view_reshape(x, ndim, shape, &view));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    brg_tensor *t = brg_arena_alloc(brg_tape_arena(tape), sizeof *t, "reshape view");
    if (!t) return BRG_ERR_OOM;
    *t = view;
    t->requires_grad = rec;
    ops_half_grad(t);
    *y = t;
    if (!rec) return BRG_OK;
    BRG_TRY(brg_tape_output(tape, t));
    return OPS_RECORD(tape, reshape_backward, reshape_ctx, x, t);
}

/* ---- memory plans ---- */

void ops_cost_embedding(ops_cost *c, double ids, double dim) {
    ops_cost_tensor(c, ids * dim, ops_cost_act(c), true);
    ops_cost_stage(c, 1, ids * dim);
    ops_cost_context(c, sizeof(embedding_ctx));
}

void ops_cost_layer_norm(ops_cost *c, double rows, double width) {
    ops_cost_tensor(c, rows * width, ops_cost_act(c), true);
    ops_cost_stage(c, 0, rows * width);
    ops_cost_stage(c, 3, rows * width);
    c->fwd += 2 * ops_cost_align(rows * sizeof(float)); /* mean, rstd */
    ops_cost_context(c, sizeof(layer_norm_ctx));
}

void ops_cost_activation(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(activation_ctx));
}

void ops_cost_softmax(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(softmax_ctx));
}

void ops_cost_add(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 3; slot++) ops_cost_stage(c, slot, n);
    ops_cost_grad_stage(c, 1, n); /* db, after da */
    ops_cost_context(c, sizeof(add_ctx));
}

void ops_cost_scale(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(scale_ctx));
}

void ops_cost_dropout(ops_cost *c, double n, float p) {
    if (!c->dropout || p == 0.0f) return; /* the input itself */
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(dropout_ctx));
}

/* An output on a donated input's buffer: the header alone, and its gradient. */
static void cost_over(ops_cost *c, double n) {
    c->fwd += ops_cost_align((double)sizeof(brg_tensor));
    if (!c->record) return;
    c->grad += ops_cost_align(n * ops_cost_act(c));
    if (ops_cost_act(c) < (int)sizeof(float)) ops_cost_half_grad(c, n);
}

void ops_cost_add_donated(ops_cost *c, double n) {
    cost_over(c, n);
    for (int slot = 0; slot < 3; slot++) ops_cost_stage(c, slot, n);
    ops_cost_grad_stage(c, 1, n);
    ops_cost_context(c, sizeof(add_ctx));
}

void ops_cost_dropout_donated(ops_cost *c, double n, float p) {
    if (!c->dropout || p == 0.0f) return; /* the input itself */
    cost_over(c, n);
    for (int slot = 0; slot < 2; slot++) ops_cost_stage(c, slot, n);
    ops_cost_context(c, sizeof(dropout_ctx));
}

void ops_cost_reshape(ops_cost *c, double n) {
    cost_over(c, n); /* a view: the header alone, and a gradient */
    ops_cost_context(c, sizeof(reshape_ctx));
}
