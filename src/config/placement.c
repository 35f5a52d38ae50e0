/* Layer placement: the -1 wildcard of layers_per_ipu, the layer -> IPU list, and the split of
 * one config into encoder and decoder configs, following optimum-graphcore's modeling_utils. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/placement.h"
#include "config/ipu_config_internal.h"

typedef struct names {
    char lpi[64], ipr[64];
} names;

static void mode_names(brg_ipu_mode m, names *n) {
    brg_ipu_config_mode_name(m, "layers_per_ipu", n->lpi, sizeof n->lpi);
    brg_ipu_config_mode_name(m, "ipus_per_replica", n->ipr, sizeof n->ipr);
}

static bool all_wildcards(const brg_ipu_list *l, int64_t ipus) {
    if (l->n == 1 && l->v[0] == -1) return true;
    if (l->n != ipus) return false;
    for (int i = 0; i < l->n; i++)
        if (l->v[i] != -1) return false;
    return true;
}

static brg_status wrong_total(const names *nm, const brg_ipu_list *l, long long placed, int n_layers) {
    char r[512];
    return brg_error(BRG_ERR_INVALID_ARG,
                     "%s does not define the correct number of layers for the current model. The current IPU Config "
                     "specifies IPU assignments for %lld layers but there are %d layers in the model. %s=%s",
                     nm->lpi, placed, n_layers, nm->lpi, py_repr_list(l, r, sizeof r));
}

/* Layers left to the wildcards go evenly to them, the remainder to the last one. */
static brg_status fill_wildcards(const names *nm, brg_ipu_list *out, int n_layers) {
    long long fixed = 0;
    int n_wild = 0, last = -1;
    for (int i = 0; i < out->n; i++) {
        if (out->v[i] == -1) n_wild++, last = i;
        else fixed += out->v[i];
    }
    /* upstream would hand negative counts to the wildcards here; brigade refuses */
    if (fixed > n_layers) return wrong_total(nm, out, fixed, n_layers);
    int wild = n_layers - (int)fixed;
    for (int i = 0; i < out->n; i++)
        if (out->v[i] == -1) out->v[i] = wild / n_wild;
    out->v[last] += wild % n_wild;
    return BRG_OK;
}

static brg_status check_inputs(const names *nm, const brg_ipu_list *lpi, int64_t ipus) {
    char r[512];
    for (int i = 0; i < lpi->n; i++)
        if (lpi->v[i] < -1)
            return brg_error(BRG_ERR_INVALID_ARG, "Invalid values in %s. %s=%s", nm->lpi, nm->lpi,
                             py_repr_list(lpi, r, sizeof r));
    if (ipus < 1 || ipus > BRG_IPU_LIST_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "Invalid value for %s. %s=%lld", nm->ipr, nm->ipr, (long long)ipus);
    return BRG_OK;
}

brg_status brg_ipu_config_expand_layers(const brg_ipu_config *cfg, int n_layers, brg_ipu_list *out) {
    brg_ipu_config *c = (brg_ipu_config *)cfg; /* read only */
    const brg_ipu_list *lpi = cfg_layers(c, cfg->mode);
    int64_t ipus = *cfg_ipus(c, cfg->mode);
    names nm;
    mode_names(cfg->mode, &nm);
    BRG_TRY(check_inputs(&nm, lpi, ipus));
    *out = *lpi;
    if (n_layers == BRG_LAYERS_UNSPECIFIED) return BRG_OK;
    if (n_layers < 0) return brg_error(BRG_ERR_INVALID_ARG, "a model cannot have %d layers", n_layers);
    if (ipus == 1) { /* one IPU takes every layer, whatever layers_per_ipu says */
        *out = (brg_ipu_list){.present = true, .n = 1, .v = {n_layers}};
        return BRG_OK;
    }
    if (all_wildcards(lpi, ipus)) {
        out->n = (int)ipus;
        for (int i = 0; i < out->n; i++) out->v[i] = -1;
        return fill_wildcards(&nm, out, n_layers);
    }
    bool wildcard = false;
    long long sum = 0;
    for (int i = 0; i < lpi->n; i++) wildcard |= lpi->v[i] == -1, sum += lpi->v[i];
    char r[512];
    if (lpi->n != ipus)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%s has a non-default value set, but its length does not match %s: %s=%s, %s=%lld.", nm.lpi,
                         nm.ipr, nm.lpi, py_repr_list(lpi, r, sizeof r), nm.ipr, (long long)ipus);
    if (wildcard) return fill_wildcards(&nm, out, n_layers);
    if (sum != n_layers) return wrong_total(&nm, lpi, sum, n_layers);
    return BRG_OK;
}

brg_status brg_ipu_config_get_layer_ipu(const brg_ipu_config *cfg, int n_layers, int *layer_ipu, int cap,
                                        int *count) {
    brg_ipu_list l;
    BRG_TRY(brg_ipu_config_expand_layers(cfg, n_layers, &l));
    int n = 0;
    for (int ipu = 0; ipu < l.n; ipu++)
        for (int k = 0; k < l.v[ipu]; k++) { /* wildcards left unexpanded (-1) place nothing */
            if (n == cap) return brg_error(BRG_ERR_INVALID_ARG, "more than %d layers to place", cap);
            layer_ipu[n++] = ipu;
        }
    *count = n;
    return BRG_OK;
}

brg_status brg_ipu_config_empty_ipu_error(const brg_ipu_config *cfg, const brg_ipu_list *counts, int n_layers,
                                          int ipu) {
    brg_ipu_config *c = (brg_ipu_config *)cfg; /* read only */
    names nm;
    mode_names(cfg->mode, &nm);
    char given[512], placed[512];
    py_repr_list(cfg_layers(c, cfg->mode), given, sizeof given);
    py_repr_list(counts, placed, sizeof placed);
    return brg_error(BRG_ERR_INVALID_ARG,
                     "%s=%s places %s layers on the %d IPUs of this %d-layer model, which leaves IPU %d with no "
                     "block to run: give every IPU a layer, or use fewer IPUs (%s)",
                     nm.lpi, given, placed, counts->n, n_layers, ipu, nm.ipr);
}

void brg_placement_free(brg_placement *p) {
    if (!p) return;
    free(p->block_device);
    free(p->layer_device);
    memset(p, 0, sizeof *p);
}

/* ---- encoder / decoder split -------------------------------------------------------------- */

static brg_ipu_list slice(const brg_ipu_list *l, int from, int to) {
    brg_ipu_list s = {.present = true};
    for (int i = from; i < to && i < l->n; i++) s.v[s.n++] = l->v[i];
    return s;
}

static long long list_sum(const brg_ipu_list *l) {
    long long s = 0;
    for (int i = 0; i < l->n; i++) s += l->v[i];
    return s;
}

/* The largest power-of-two IPU count whose layers are exactly the encoder's; 0 if none. */
static int find_cut(const brg_ipu_list *l, int n_encoder) {
    long long cum = 0;
    int cut = 0;
    for (int i = 0; i < l->n; i++) {
        cum += l->v[i];
        int n = i + 1;
        if (cum == n_encoder && (n & (n - 1)) == 0) cut = n;
    }
    return cut;
}

static brg_status split_serialized(brg_ipu_config *c, brg_ipu_config *enc, brg_ipu_config *dec, int cut, bool emb) {
    brg_ipu_mode m = c->mode;
    const brg_ipu_list *splits = cfg_splits(c, m, emb);
    if (!splits->present) return BRG_OK;
    brg_ipu_list head = slice(splits, 0, cut), tail = slice(splits, cut, splits->n);
    *cfg_splits(enc, m, emb) = emb ? head : (brg_ipu_list){0};
    *cfg_splits(dec, m, emb) = emb ? (brg_ipu_list){0} : tail;
    const brg_ipu_list *wrong = emb ? &tail : &head;
    if (list_sum(wrong) == 0) return BRG_OK;
    char name[96], r1[512], r2[512];
    brg_ipu_config_mode_name(m, emb ? "serialized_embedding_splits_per_ipu" : "serialized_projection_splits_per_ipu",
                             name, sizeof name);
    return brg_error(BRG_ERR_INVALID_ARG,
                     "The `%s` must have all splits placed on the %s, but %s=%s results in %s being placed on the %s",
                     emb ? "SerializedEmbedding" : "SplitProjection", emb ? "encoder" : "decoder", name,
                     py_repr_list(splits, r1, sizeof r1), py_repr_list(wrong, r2, sizeof r2),
                     emb ? "decoder" : "encoder");
}

static brg_status no_cut(const names *nm, const brg_ipu_list *orig, int n_encoder, int n_decoder) {
    char r[512];
    return brg_error(BRG_ERR_INVALID_ARG,
                     "Unable to find a valid split of ipu_config.%s. Arguments: ipu_config.%s=%s, "
                     "num_encoder_layers=%d, num_decoder_layers=%d. Possible causes: Encoder and decoder layers cannot "
                     "be placed on the same IPUs. The encoder and decoder %s splits each need a number of devices "
                     "that's a power of 2.",
                     nm->lpi, nm->lpi, py_repr_list(orig, r, sizeof r), n_encoder, n_decoder, nm->lpi);
}

static brg_status split_into(brg_ipu_config *c, int n_encoder, int n_decoder, brg_ipu_config *enc,
                             brg_ipu_config *dec) {
    brg_ipu_mode m = c->mode;
    names nm;
    mode_names(m, &nm);
    if (*cfg_ipus(c, m) < 2)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "Need %s to be at least 2 to split ipu_config into encoder and decoder configs", nm.ipr);
    if (n_encoder < 0 || n_decoder < 0 || n_encoder > INT32_MAX - n_decoder)
        return brg_error(BRG_ERR_INVALID_ARG, "cannot split %d encoder and %d decoder layers", n_encoder, n_decoder);
    brg_ipu_list l;
    BRG_TRY(brg_ipu_config_expand_layers(c, n_encoder + n_decoder, &l));
    int cut = find_cut(&l, n_encoder);
    if (cut == 0) return no_cut(&nm, cfg_layers(c, m), n_encoder, n_decoder);
    *enc = *c;
    *dec = *c;
    *cfg_layers(enc, m) = slice(&l, 0, cut);
    *cfg_layers(dec, m) = slice(&l, cut, l.n);
    BRG_TRY(split_serialized(c, enc, dec, cut, true));
    BRG_TRY(split_serialized(c, enc, dec, cut, false));
    *cfg_ipus(enc, m) = cfg_layers(enc, m)->n;
    *cfg_ipus(dec, m) = cfg_layers(dec, m)->n;
    const brg_ipu_proportion *mp = cfg_matmul(c, m);
    if (mp->is_list) {
        brg_ipu_proportion *e = cfg_matmul(enc, m), *d = cfg_matmul(dec, m);
        e->n = cut < mp->n ? cut : mp->n;
        d->n = mp->n - e->n;
        memmove(d->v, mp->v + e->n, (size_t)d->n * sizeof d->v[0]);
    }
    return BRG_OK;
}

brg_status brg_ipu_config_split_encoder_decoder(const brg_ipu_config *cfg, int n_encoder, int n_decoder,
                                                brg_ipu_config *encoder, brg_ipu_config *decoder) {
    /* built off to the side so that the outputs are untouched on failure */
    brg_ipu_config *tmp = malloc(3 * sizeof *tmp);
    if (!tmp) return brg_error(BRG_ERR_OOM, "out of memory splitting an IPUConfig");
    tmp[0] = *cfg;
    brg_status st = split_into(&tmp[0], n_encoder, n_decoder, &tmp[1], &tmp[2]);
    if (st == BRG_OK) {
        *encoder = tmp[1];
        *decoder = tmp[2];
    }
    free(tmp);
    return st;
}
