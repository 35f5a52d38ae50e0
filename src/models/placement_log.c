/* The device-allocation log ("Layer N --> IPU M"), worded and aligned as upstream's Pipelined*
 * models print it, with the labels of the model's registry entry. */
#include <string.h>

#include "brigade/registry.h"
#include "models/model_internal.h"

static void print_layer(FILE *out, const brg_alloc_labels *l, const brg_block *blk, int *n_decoder, int dev) {
    const char *label = l->layer;
    int index = blk->layer;
    if (l->decoder_layer && l->decoder_prefix && strncmp(blk->name, l->decoder_prefix, strlen(l->decoder_prefix)) == 0) {
        label = l->decoder_layer;
        index = (*n_decoder)++;
    }
    fprintf(out, "%s %-2d%s--> IPU %d\n", label, index, l->layer_gap ? l->layer_gap : " ", dev);
}

void brg_placement_print(FILE *out, const brg_model *m, const brg_placement *p) {
    static const brg_alloc_labels defaults = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Head ", NULL, NULL, NULL, NULL};
    const brg_model_arch *a = brg_model_arch_of(m);
    const brg_alloc_labels *l = a && a->labels.layer ? &a->labels : &defaults;
    fprintf(out, "%s\n", l->header ? l->header : "-------------------- Device Allocation --------------------");
    int n_decoder = 0;
    for (int b = 0; b < m->n_blocks && b < p->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        int dev = p->block_device[b];
        if (blk->kind == BRG_BLOCK_EMBEDDINGS)
            for (int i = 0; i < 3 && l->embeddings[i]; i++) fprintf(out, "%s--> IPU %d\n", l->embeddings[i], dev);
        else if (blk->kind == BRG_BLOCK_LAYER)
            print_layer(out, l, blk, &n_decoder, dev);
        else
            fprintf(out, "%s--> IPU %d\n", l->head ? l->head : "Head ", dev);
    }
    fprintf(out, "%s\n", l->footer ? l->footer : "-----------------------------------------------------------");
}
