/* --ipu-config and --ipu-config-overrides, as the commands that run an IPUConfig read them. */
#ifndef BRIGADE_CLI_IPU_FLAGS_H
#define BRIGADE_CLI_IPU_FLAGS_H

#include "brigade/ipu_config.h"

/* Loads `ref` (a file, a folder holding ipu_config.json or a cached hub id), applies the
 * overrides (may be NULL), validates, switches to `mode` and shows the warnings on stderr. */
brg_status cli_load_ipu_config(const char *ref, const char *overrides, brg_ipu_mode mode, brg_ipu_config *cfg);

#endif
