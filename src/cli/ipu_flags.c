/* --ipu-config and --ipu-config-overrides for the commands that run an IPUConfig. */
#include "ipu_flags.h"

#include <stdio.h>

brg_status cli_load_ipu_config(const char *ref, const char *overrides, brg_ipu_mode mode, brg_ipu_config *cfg) {
    brg_ipu_config_init(cfg);
    BRG_TRY(brg_ipu_config_load(ref, cfg));
    if (overrides) BRG_TRY(brg_ipu_config_update_from_string(cfg, overrides));
    BRG_TRY(brg_ipu_config_validate(cfg));
    if (mode == BRG_IPU_MODE_INFERENCE) brg_ipu_config_eval(cfg);
    else brg_ipu_config_train(cfg);
    for (int i = 0; i < cfg->n_warnings; i++) fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
    return BRG_OK;
}
