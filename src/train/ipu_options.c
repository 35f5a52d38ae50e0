/* The trainer's options from an IPUConfig's training view. */
#include <limits.h>

#include "brigade/pipeline.h"
#include "brigade/trainer.h"

brg_status brg_train_options_from_ipu_config(const brg_ipu_config *cfg, const brg_placement *pl,
                                             brg_train_options *o) {
    brg_runtime_options ro;
    BRG_TRY(brg_runtime_options_from_ipu_config(cfg, BRG_IPU_MODE_TRAINING, pl, &ro));
    brg_ipu_view v;
    brg_ipu_config_view(cfg, BRG_IPU_MODE_TRAINING, &v);
    if (v.device_iterations < 1 || v.device_iterations > INT_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "device_iterations = %lld is not a count the trainer can run",
                         (long long)v.device_iterations);
    o->replicas = ro.replicas;
    o->stages = ro.stages;
    o->block_stage = ro.block_stage;
    o->accumulation = ro.micro_batches;
    o->device_iterations = (int)v.device_iterations;
    o->output_mode = v.output_mode;
    o->recompute = ro.recompute;
    o->ipu_config = cfg;
    o->auto_loss_scaling = cfg->auto_loss_scaling;
    o->shard_optimizer_state = cfg->replicated_tensor_sharding;
    o->optimizer_state_offchip = cfg->optimizer_state_offchip;
    if (cfg->has_seed) o->seed = (uint64_t)cfg->seed;
    return BRG_OK;
}
