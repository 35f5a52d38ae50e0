/* add_broadcast: x + p where p repeats over a run of x's dims (ViT's position embeddings over
 * the batch). */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct add_bcast_ctx {
    brg_tensor *x, *p, *y;
    int64_t A, M, I;
} add_bcast_ctx;

static brg_status add_bcast_backward(brg_tape *tape, void *p) {
    add_bcast_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    OPS_GRAD(dp, tape, c->p);
    ops_k(tape)->add_bcast_bwd(dx, dp, ops_dy(tape, c->y), c->A, c->M, c->I);
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
        return brg_error(BRG_ERR_INVALID_ARG, "add_broadcast: %s %s does not broadcast over %s", ops_name(p, "addend"),
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
    BRG_TRY(ops_check_float("add_broadcast", x, 0));
    BRG_TRY(ops_check_float("add_broadcast", p, 0));
    int64_t A = 1, M = 1, I = 1;
    BRG_TRY(broadcast_split(x, p, &A, &M, &I));
    const brg_tensor *ins[2] = {x, p};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(ops_new_like(tape, x, rec, "add_broadcast output", y));
    float *out = ops_write(*y, 2);
    ops_k(tape)->add_bcast_fwd(out, ops_read(tape, x, 0), ops_read(tape, p, 1), A, M, I);
    ops_store(tape, *y, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, add_bcast_backward, add_bcast_ctx, x, p, *y, A, M, I);
}

void ops_cost_add_broadcast(ops_cost *c, double n) {
    ops_cost_tensor(c, n, ops_cost_act(c), true);
    /* x and the sum; p (ViT's position embeddings, a parameter) is F32 and read in place */
    ops_cost_stage(c, 0, n);
    ops_cost_stage(c, 2, n);
    ops_cost_context(c, sizeof(add_bcast_ctx));
}
