/* Pieces the architectures and the loaders share (internal to src/models). */
#ifndef BRIGADE_MODELS_MODEL_INTERNAL_H
#define BRIGADE_MODELS_MODEL_INTERNAL_H

#include <cJSON.h>

#include "brigade/checkpoint.h"
#include "brigade/model.h"

/* Copies checkpoint tensor `stored` into parameter p: shapes must match, F32/F16/BF16 (upcast). */
brg_status model_load_param(brg_param *p, const brg_checkpoint *ckpt, const char *stored);

/* The index in names[0..n) of config.json's architectures[0] (0 when the list is absent); an
 * unknown one is BRG_ERR_UNSUPPORTED listing the names. */
brg_status model_parse_architecture(const cJSON *j, const char *ctx, const char *const *names, int n, int *index);

#endif
