/* The cross-attribute checks of an IPUConfig (upstream's _validate_ipu_config), run for the
 * training and the inference view in turn. */
#include <stdio.h>
#include <string.h>

#include "config/ipu_config_internal.h"

static bool has_wildcard(const brg_ipu_list *l) {
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == -1) return true;
    return false;
}

static brg_status check_lengths(brg_ipu_config *c, brg_ipu_mode m) {
    char ipr_name[64], name[64], r[512];
    int64_t ipus = *cfg_ipus(c, m);
    brg_ipu_config_mode_name(m, "ipus_per_replica", ipr_name, sizeof ipr_name);
    const brg_ipu_proportion *mp = cfg_matmul(c, m);
    if (mp->is_list && mp->n != ipus)
        return brg_error(BRG_ERR_INVALID_ARG, "%s=%s should use the same number of IPUs as %s=%lld.",
                         brg_ipu_config_mode_name(m, "matmul_proportion", name, sizeof name),
                         py_repr_prop(mp, r, sizeof r), ipr_name, (long long)ipus);
    /* with a wildcard the length is checked when layers are placed (it depends on the model) */
    const brg_ipu_list *lpi = cfg_layers(c, m);
    if (!has_wildcard(lpi) && lpi->n != ipus)
        return brg_error(BRG_ERR_INVALID_ARG, "%s=%s should use the same number of IPUs as %s=%lld.",
                         brg_ipu_config_mode_name(m, "layers_per_ipu", name, sizeof name),
                         py_repr_list(lpi, r, sizeof r), ipr_name, (long long)ipus);
    return BRG_OK;
}

/* Serialization of the embedding or the projection: either a factor (the layer serialized on
 * one IPU) or per-IPU splits, never both; with neither, the factor is 1. */
static brg_status check_serialization(brg_ipu_config *c, brg_ipu_mode m, bool emb) {
    const char *layer = emb ? "embedding" : "projection";
    char factor_attr[64], splits_attr[64], fname[80], sname[80], ipr_name[64], r[512];
    snprintf(factor_attr, sizeof factor_attr, "%s_serialization_factor", layer);
    snprintf(splits_attr, sizeof splits_attr, "serialized_%s_splits_per_ipu", layer);
    brg_ipu_config_mode_name(m, factor_attr, fname, sizeof fname);
    brg_ipu_config_mode_name(m, splits_attr, sname, sizeof sname);
    const brg_ipu_list *splits = cfg_splits(c, m, emb);
    int64_t *factor = cfg_factor(c, m, emb);
    bool have_splits = splits->present && splits->n > 0;
    if (!have_splits && *factor == 0) *factor = 1;
    if (have_splits && *factor != 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "Only one of `%s` and `%s` should be used at once. `%s` should be used when you want your "
                         "%s layer serialised on the same IPU (which IPU depends on the model). `%s` should be used "
                         "when you want your %s layer to be split across multiple IPUs of your choice (or to choose "
                         "which single IPU the layer is serialised on).",
                         fname, sname, fname, layer, sname, layer);
    int64_t ipus = *cfg_ipus(c, m);
    if (have_splits && splits->n != ipus)
        return brg_error(BRG_ERR_INVALID_ARG, "%s=%s should use the same number of IPUs as %s=%lld.", sname,
                         py_repr_list(splits, r, sizeof r),
                         brg_ipu_config_mode_name(m, "ipus_per_replica", ipr_name, sizeof ipr_name), (long long)ipus);
    return BRG_OK;
}

brg_status brg_ipu_config_validate(brg_ipu_config *c) {
    if (c->replicated_tensor_sharding && c->replication_factor == 1)
        cfg_warn(c, "`replicated_tensor_sharding` is not used when `replication_factor=1`");
    for (int m = BRG_IPU_MODE_TRAINING; m <= BRG_IPU_MODE_INFERENCE; m++) {
        BRG_TRY(check_lengths(c, (brg_ipu_mode)m));
        BRG_TRY(check_serialization(c, (brg_ipu_mode)m, true));
        BRG_TRY(check_serialization(c, (brg_ipu_mode)m, false));
    }
    return BRG_OK;
}
