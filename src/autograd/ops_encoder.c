/* Structural ops of the encoder models: select a position, prepend a token, broadcast add,
 * padding-aware embedding, patch unfold. */
#include "ops_cost.h"
#include "ops_internal.h"

static const char *name_of(const brg_tensor *t, const char *fallback) { return t->name ? t->name : fallback; }

/* ---- select ---- */
typedef struct select_ctx {
    brg_tensor *x, *y;
    int64_t outer, n, inner, index;
} select_ctx;

static brg_status select_backward(brg_tape *tape, void *p) {
    select_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    brg_k_select_bwd(dx, c->y->grad, c->outer, c->n, c->inner, c->index);
    return BRG_OK;
}

brg_status brg_select(brg_tape *tape, brg_tensor *x, int dim, int64_t index, brg_tensor **y) {
    BRG_TRY(ops_check_f32("select", x, 1));
    if (dim < 0 || dim >= x->ndim)
        return brg_error(BRG_ERR_INVALID_ARG, "select: dim %d outside the %d dims of %s", dim, x->ndim,
                         name_of(x, "the input"));
    if (index < 0 || index >= x->shape[dim])
        return brg_error(BRG_ERR_INVALID_ARG, "select: index %lld outside [0, %lld) of dim %d of %s",
                         (long long)index, (long long)x->shape[dim], dim, name_of(x, "the input"));
    int64_t outer = 1, inner = 1, shape[BRG_MAX_DIMS];
    for (int i = 0; i < dim; i++) outer *= x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++) inner *= x->shape[i];
    for (int i = 0, o = 0; i < x->ndim; i++)
        if (i != dim) shape[o++] = x->shape[i];
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, x->ndim - 1, shape, rec, "select output", y));
    brg_k_select_fwd(OPS_F32(*y), OPS_CF32(x), outer, x->shape[dim], inner, index);
    if (!rec) return BRG_OK;
    select_ctx *c = brg_tape_record(tape, select_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (select_ctx){x, *y, outer, x->shape[dim], inner, index};
    return BRG_OK;
}

/* ---- prepend token ---- */
typedef struct prepend_ctx {
    brg_tensor *token, *x, *y;
    int64_t B, n, c;
} prepend_ctx;

static brg_status prepend_backward(brg_tape *tape, void *p) {
    prepend_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->token);
    OPS_GRAD(dx, tape, c->x);
    brg_k_prepend_token_bwd(dt, dx, c->y->grad, c->B, c->n, c->c);
    return BRG_OK;
}

brg_status brg_prepend_token(brg_tape *tape, brg_tensor *token, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_f32("prepend_token", token, 0));
    BRG_TRY(ops_check_f32("prepend_token", x, 3));
    if (x->ndim != 3) return brg_error(BRG_ERR_INVALID_ARG, "prepend_token: input must be [B, N, C]");
    int64_t B = x->shape[0], n = x->shape[1], c = x->shape[2];
    if (brg_tensor_numel(token) != c)
        return brg_error(BRG_ERR_INVALID_ARG, "prepend_token: %s has %lld elements, the rows have %lld",
                         name_of(token, "the token"), (long long)brg_tensor_numel(token), (long long)c);
    const brg_tensor *ins[2] = {token, x};
    bool rec = brg_tape_needs(tape, ins, 2);
    int64_t shape[3] = {B, n + 1, c};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 3, shape, rec, "prepend_token output", y));
    brg_k_prepend_token_fwd(OPS_F32(*y), OPS_CF32(token), OPS_CF32(x), B, n, c);
    if (!rec) return BRG_OK;
    prepend_ctx *ctx = brg_tape_record(tape, prepend_backward, sizeof *ctx);
    if (!ctx) return BRG_ERR_OOM;
    *ctx = (prepend_ctx){token, x, *y, B, n, c};
    return BRG_OK;
}

/* ---- broadcast add ---- */
typedef struct add_bcast_ctx {
    brg_tensor *x, *p, *y;
    int64_t A, M, I;
} add_bcast_ctx;

static brg_status add_bcast_backward(brg_tape *tape, void *p) {
    add_bcast_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    OPS_GRAD(dp, tape, c->p);
    brg_k_add_bcast_bwd(dx, dp, c->y->grad, c->A, c->M, c->I);
    return BRG_OK;
}

/* The run of dims [first, last] where p is 1 and x is not; false unless p broadcasts over x that
 * way (first = -1 when p has x's shape). */
static bool broadcast_run(const brg_tensor *x, const brg_tensor *p, int *first, int *last) {
    *first = *last = -1;
    if (p->ndim != x->ndim) return false;
    for (int d = 0; d < x->ndim; d++) {
        if (p->shape[d] == x->shape[d]) continue;
        if (p->shape[d] != 1 || (*first >= 0 && *last != d - 1)) return false;
        if (*first < 0) *first = d;
        *last = d;
    }
    return true;
}

/* Splits x's dims into [A, M, I] with p repeating over M. */
static brg_status broadcast_split(const brg_tensor *x, const brg_tensor *p, int64_t *A, int64_t *M, int64_t *I) {
    int first, last;
    *A = *M = *I = 1;
    if (!broadcast_run(x, p, &first, &last)) {
        char sx[128], sp[128];
        return brg_error(BRG_ERR_INVALID_ARG, "add_broadcast: %s %s does not broadcast over %s", name_of(p, "addend"),
                         brg_shape_str(p, sp, sizeof sp), brg_shape_str(x, sx, sizeof sx));
    }
    for (int d = 0; d < x->ndim; d++) {
        if (first >= 0 && d >= first && d <= last) *M *= x->shape[d];
        else if (first < 0 || d < first) *A *= x->shape[d];
        else *I *= x->shape[d];
    }
    return BRG_OK;
}

brg_status brg_add_broadcast(brg_tape *tape, brg_tensor *x, brg_tensor *p, brg_tensor **y) {
    BRG_TRY(ops_check_f32("add_broadcast", x, 0));
    BRG_TRY(ops_check_f32("add_broadcast", p, 0));
    int64_t A = 1, M = 1, I = 1;
    BRG_TRY(broadcast_split(x, p, &A, &M, &I));
    const brg_tensor *ins[2] = {x, p};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, x->ndim, x->shape, rec, "add_broadcast output", y));
    brg_k_add_bcast_fwd(OPS_F32(*y), OPS_CF32(x), OPS_CF32(p), A, M, I);
    if (!rec) return BRG_OK;
    add_bcast_ctx *c = brg_tape_record(tape, add_bcast_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (add_bcast_ctx){x, p, *y, A, M, I};
    return BRG_OK;
}

/* ---- embedding with a padding row ---- */
typedef struct embedding_pad_ctx {
    brg_tensor *ids, *table, *y;
    int64_t n, dim;
    int32_t padding_idx;
} embedding_pad_ctx;

static brg_status embedding_pad_backward(brg_tape *tape, void *p) {
    embedding_pad_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->table);
    brg_k_embedding_pad_bwd(dt, c->y->grad, (const int32_t *)c->ids->data, c->n, c->dim, c->padding_idx);
    return BRG_OK;
}

brg_status brg_embedding_padded(brg_tape *tape, brg_tensor *ids, brg_tensor *table, int32_t padding_idx,
                                brg_tensor **y) {
    /* Forward and validation are the plain embedding's; only the backward differs. */
    const brg_tensor *ins[1] = {table};
    bool rec = brg_tape_needs(tape, ins, 1);
    bool enabled = brg_tape_grad_enabled(tape);
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_embedding(tape, ids, table, y);
    brg_tape_set_grad_enabled(tape, enabled);
    BRG_TRY(st);
    (*y)->requires_grad = rec;
    if (!rec) return BRG_OK;
    BRG_TRY(brg_tape_output(tape, *y));
    embedding_pad_ctx *c = brg_tape_record(tape, embedding_pad_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (embedding_pad_ctx){ids, table, *y, brg_tensor_numel(ids), table->shape[1], padding_idx};
    return BRG_OK;
}

/* ---- patch unfold ---- */
typedef struct unfold_ctx {
    brg_tensor *pixels, *y;
    brg_patch_dims d;
} unfold_ctx;

static brg_status unfold_backward(brg_tape *tape, void *p) {
    unfold_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->pixels);
    brg_k_patch_unfold_bwd(dx, c->y->grad, &c->d);
    return BRG_OK;
}

brg_status brg_patch_unfold(brg_tape *tape, brg_tensor *pixels, int64_t ph, int64_t pw, brg_tensor **y) {
    BRG_TRY(ops_check_f32("patch_unfold", pixels, 0));
    char s[128];
    if (pixels->ndim != 4)
        return brg_error(BRG_ERR_INVALID_ARG, "patch_unfold: %s must be [B, C, H, W], got %s",
                         name_of(pixels, "pixel_values"), brg_shape_str(pixels, s, sizeof s));
    brg_patch_dims d = {pixels->shape[0], pixels->shape[1], pixels->shape[2], pixels->shape[3], ph, pw};
    if (ph < 1 || pw < 1 || d.C < 1 || d.H < ph || d.W < pw)
        return brg_error(BRG_ERR_INVALID_ARG, "patch_unfold: %s %s is smaller than one %lldx%lld patch",
                         name_of(pixels, "pixel_values"), brg_shape_str(pixels, s, sizeof s), (long long)ph,
                         (long long)pw);
    const brg_tensor *ins[1] = {pixels};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t shape[3] = {d.B, (d.H / ph) * (d.W / pw), d.C * ph * pw};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 3, shape, rec, "patches", y));
    brg_k_patch_unfold_fwd(OPS_F32(*y), OPS_CF32(pixels), &d);
    if (!rec) return BRG_OK;
    unfold_ctx *c = brg_tape_record(tape, unfold_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (unfold_ctx){pixels, *y, d};
    return BRG_OK;
}

/* ---- memory plans ---- */

void ops_cost_select(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, sizeof(float), true);
    ops_cost_context(c, sizeof(select_ctx));
}

void ops_cost_prepend_token(ops_cost *c, double out_elems) {
    ops_cost_tensor(c, out_elems, sizeof(float), true);
    ops_cost_context(c, sizeof(prepend_ctx));
}

void ops_cost_add_broadcast(ops_cost *c, double n) {
    ops_cost_tensor(c, n, sizeof(float), true);
    ops_cost_context(c, sizeof(add_bcast_ctx));
}

void ops_cost_embedding_padded(ops_cost *c, double ids, double dim) {
    ops_cost_tensor(c, ids * dim, sizeof(float), true); /* the plain embedding's output, unrecorded */
    ops_cost_context(c, sizeof(embedding_pad_ctx));
}

void ops_cost_patch_unfold(ops_cost *c, double out_elems) {
    /* of pixel_values, which take no gradient: nothing is recorded */
    ops_cost_tensor(c, out_elems, sizeof(float), false);
}
