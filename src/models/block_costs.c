/* The cost table of a model's blocks for plans: each block's FLOPs and memory from its
 * architecture's block_cost, its parameters (and the tied ones it reads from another block) from
 * the model's parameter list. */
#include <string.h>

#include "brigade/registry.h"
#include "models/model_cost.h"
#include "models/model_internal.h"

brg_status brg_model_block_costs(const brg_model *m, int64_t batch, int64_t seq, brg_block_cost *out) {
    if (batch < 1 || seq < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "micro-batch size %lld and sequence length %lld must be >= 1",
                         (long long)batch, (long long)seq);
    const brg_model_arch *a = brg_model_arch_of(m);
    for (int b = 0; b < m->n_blocks; b++) {
        memset(&out[b], 0, sizeof out[b]);
        out[b].tied_owner = -1;
        if (a && a->block_cost) BRG_TRY(a->block_cost(m, b, batch, seq, &out[b]));
        out[b].layer = m->blocks[b].kind == BRG_BLOCK_LAYER ? m->blocks[b].layer : -1;
        out[b].params = 0;
    }
    for (int i = 0; i < m->n_params; i++) {
        brg_block_cost *c = &out[m->params[i].block];
        int64_t n = brg_tensor_numel(m->params[i].tensor);
        c->params += n;
        c->param_bytes += (int64_t)ops_cost_align((double)n * sizeof(float));
        c->param_tensors++;
    }
    /* Weights a block reads through an alias from another block (a tied LM head or decoder, a
     * shared position-bias table): a device without the owner holds a copy. */
    for (int b = 0; b < m->n_blocks; b++) out[b].tied_params = 0, out[b].tied_owner = -1;
    for (int i = 0; i < m->n_aliases; i++) {
        const brg_param_alias *al = &m->aliases[i];
        int owner = m->params[al->param].block;
        brg_block_cost *c = &out[al->block];
        if (owner == al->block || (c->tied_owner >= 0 && c->tied_owner != owner)) continue;
        c->tied_owner = owner;
        c->tied_params += brg_tensor_numel(m->params[al->param].tensor);
    }
    return BRG_OK;
}
