/* embedding_padded: nn.Embedding(padding_idx), whose padding row gets no gradient. */
#include "ops_cost.h"
#include "ops_internal.h"

typedef struct embedding_pad_ctx {
    brg_tensor *ids, *table, *y;
    int64_t n, dim;
    int32_t padding_idx;
} embedding_pad_ctx;

static brg_status embedding_pad_backward(brg_tape *tape, void *p) {
    embedding_pad_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->table);
    ops_k(tape)->embedding_pad_bwd(dt, ops_dy(tape, c->y), (const int32_t *)c->ids->data, c->n, c->dim, c->padding_idx);
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
    return OPS_RECORD(tape, embedding_pad_backward, embedding_pad_ctx, ids, table, *y, brg_tensor_numel(ids),
                      table->shape[1], padding_idx);
}

void ops_cost_embedding_padded(ops_cost *c, double ids, double dim) {
    ops_cost_tensor(c, ids * dim, ops_cost_act(c), true); /* the plain embedding's output, unrecorded */
    ops_cost_stage(c, 1, ids * dim);                      /* brg_embedding's write */
    ops_cost_context(c, sizeof(embedding_pad_ctx));
}
