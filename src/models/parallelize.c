/* optimum-graphcore's parallelize / deparallelize: the default placement of a model's blocks on
 * devices from an IPUConfig (embeddings on device 0, layers by get_layer_ipu, the head on the
 * last device), and the plain state dict back. */
#include <stdlib.h>

#include "brigade/registry.h"
#include "models/model_internal.h"

static int count_layers(const brg_model *m) {
    int n = 0;
    for (int b = 0; b < m->n_blocks; b++) n += m->blocks[b].kind == BRG_BLOCK_LAYER;
    return n;
}

static brg_status place_blocks(const brg_model *m, brg_placement *p) {
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        switch (blk->kind) {
        case BRG_BLOCK_EMBEDDINGS: p->block_device[b] = 0; break;
        case BRG_BLOCK_HEAD: p->block_device[b] = p->n_devices - 1; break;
        case BRG_BLOCK_LAYER:
            if (blk->layer < 0 || blk->layer >= p->n_layers)
                return brg_error(BRG_ERR_INTERNAL, "block %s has layer index %d of %d", blk->name, blk->layer,
                                 p->n_layers);
            p->block_device[b] = p->layer_device[blk->layer];
            break;
        }
    }
    return BRG_OK;
}

/* An IPU with no block would be a pipeline stage with nothing to run. */
static brg_status check_every_device_used(const brg_model *m, const brg_ipu_config *c, const brg_placement *p) {
    for (int d = 0; d < p->n_devices; d++) {
        bool used = false;
        for (int b = 0; b < m->n_blocks && !used; b++) used = p->block_device[b] == d;
        if (used) continue;
        brg_ipu_list counts;
        BRG_TRY(brg_ipu_config_expand_layers(c, p->n_layers, &counts));
        return brg_ipu_config_empty_ipu_error(c, &counts, p->n_layers, d);
    }
    return BRG_OK;
}

brg_status brg_model_parallelize(const brg_model *m, const brg_ipu_config *cfg, brg_ipu_mode mode,
                                 brg_placement *out) {
    if (cfg->execute_encoder_on_cpu_for_generation)
        return brg_error(BRG_ERR_UNSUPPORTED, "execute_encoder_on_cpu_for_generation=true is not supported");
    brg_ipu_config *c = malloc(sizeof *c);
    brg_placement p = {.mode = mode, .n_blocks = m->n_blocks, .n_layers = count_layers(m)};
    p.block_device = calloc((size_t)m->n_blocks + 1, sizeof *p.block_device);
    p.layer_device = calloc((size_t)p.n_layers + 1, sizeof *p.layer_device);
    brg_status st = c && p.block_device && p.layer_device ? BRG_OK : brg_error(BRG_ERR_OOM, "out of memory placing blocks");
    if (st == BRG_OK) {
        *c = *cfg;
        c->mode = mode;
        brg_ipu_view v;
        brg_ipu_config_view(c, mode, &v);
        p.n_devices = (int)v.ipus_per_replica;
        int count;
        st = brg_ipu_config_get_layer_ipu(c, p.n_layers, p.layer_device, p.n_layers, &count);
        if (st == BRG_OK && count != p.n_layers)
            st = brg_error(BRG_ERR_INTERNAL, "placed %d of %d layers", count, p.n_layers);
        if (st == BRG_OK) st = place_blocks(m, &p);
        if (st == BRG_OK) st = check_every_device_used(m, c, &p);
    }
    free(c);
    if (st != BRG_OK) brg_placement_free(&p);
    else *out = p;
    return st;
}

brg_status brg_model_deparallelize(const brg_model *m, brg_named_tensor **out, size_t *n) {
    brg_named_tensor *t = malloc(((size_t)m->n_params + 1) * sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "out of memory listing %d parameters", m->n_params);
    for (int i = 0; i < m->n_params; i++) t[i] = (brg_named_tensor){m->params[i].name, m->params[i].tensor};
    *out = t;
    *n = (size_t)m->n_params;
    return BRG_OK;
}
