/* IPUConfig glue: runtime options from an IPUConfig's mode, and the inference pipeline (a batch
 * split into micro-batches, run through a forward-only runtime, its logits collected whole). */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/pipeline.h"
#include "brigade/precision.h"
#include "brigade/registry.h"
#include "packed_weights.h"

/* The counts the runtime takes as int: an IPUConfig holds them as int64. */
static brg_status as_int(brg_ipu_mode mode, const char *attr, int64_t v, int *out) {
    char name[96];
    if (v < 1 || v > INT_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "%s = %lld is not a count the runtime can run",
                         brg_ipu_config_mode_name(mode, attr, name, sizeof name), (long long)v);
    *out = (int)v;
    return BRG_OK;
}

brg_status brg_runtime_options_from_ipu_config(const brg_ipu_config *cfg, brg_ipu_mode mode, const brg_placement *pl,
                                               brg_runtime_options *out) {
    if (pl->mode != mode)
        return brg_error(BRG_ERR_INVALID_ARG, "the blocks were placed for %s, not for %s", brg_ipu_mode_name(pl->mode),
                         brg_ipu_mode_name(mode));
    brg_ipu_view v;
    brg_ipu_config_view(cfg, mode, &v);
    const bool training = mode == BRG_IPU_MODE_TRAINING;
    brg_runtime_options o = {.stages = pl->n_devices, .block_stage = pl->block_device,
                             .schedule = BRG_SCHEDULE_1F1B, .training = training,
                             .recompute = training && cfg->recompute_checkpoint_every_layer};
    BRG_TRY(as_int(mode, "replication_factor", v.replication_factor, &o.replicas));
    if (training) BRG_TRY(as_int(mode, "gradient_accumulation_steps", v.gradient_accumulation_steps, &o.micro_batches));
    else BRG_TRY(as_int(mode, "device_iterations", v.device_iterations, &o.micro_batches));
    *out = o;
    return BRG_OK;
}

static brg_status micro_batch_of(int64_t rows, int64_t iterations, int64_t replicas, int64_t *micro) {
    const int64_t per = iterations * replicas;
    if (rows < 1 || rows % per != 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the batch dimension (%lld) must be a multiple of inference_device_iterations (%lld) x "
                         "inference_replication_factor (%lld) = %lld",
                         (long long)rows, (long long)iterations, (long long)replicas, (long long)per);
    *micro = rows / per;
    return BRG_OK;
}

brg_status brg_inference_micro_batch(const brg_ipu_config *cfg, int64_t rows, int64_t *micro) {
    brg_ipu_view v;
    brg_ipu_config_view(cfg, BRG_IPU_MODE_INFERENCE, &v);
    return micro_batch_of(rows, v.device_iterations, v.replication_factor, micro);
}

struct brg_inference {
    brg_model *model;
    brg_placement placement;
    brg_runtime_options opts;
    brg_runtime *rt;
};

static brg_status copy_placement(const brg_placement *src, brg_placement *dst) {
    *dst = *src;
    dst->block_device = malloc((size_t)(src->n_blocks ? src->n_blocks : 1) * sizeof *dst->block_device);
    dst->layer_device = malloc((size_t)(src->n_layers ? src->n_layers : 1) * sizeof *dst->layer_device);
    if (!dst->block_device || !dst->layer_device) {
        brg_placement_free(dst);
        return brg_error(BRG_ERR_OOM, "cannot copy the placement");
    }
    memcpy(dst->block_device, src->block_device, (size_t)src->n_blocks * sizeof *dst->block_device);
    memcpy(dst->layer_device, src->layer_device, (size_t)src->n_layers * sizeof *dst->layer_device);
    return BRG_OK;
}

static brg_status create(brg_model *model, const brg_ipu_config *cfg, const brg_inference_options *opts,
                         const brg_placement *placed, brg_inference **out) {
    *out = NULL;
    if (placed && (placed->n_blocks != model->n_blocks || placed->mode != BRG_IPU_MODE_INFERENCE))
        return brg_error(BRG_ERR_INVALID_ARG, "the placement is for %d blocks in %s, the model has %d blocks",
                         placed->n_blocks, brg_ipu_mode_name(placed->mode), model->n_blocks);
    brg_inference *inf = calloc(1, sizeof *inf);
    if (!inf) return brg_error(BRG_ERR_OOM, "cannot allocate the inference pipeline");
    inf->model = model;
    brg_status st = placed ? copy_placement(placed, &inf->placement)
                           : brg_model_parallelize(model, cfg, BRG_IPU_MODE_INFERENCE, &inf->placement);
    if (st != BRG_OK) {
        free(inf);
        return st;
    }
    st = brg_runtime_options_from_ipu_config(cfg, BRG_IPU_MODE_INFERENCE, &inf->placement, &inf->opts);
    if (st == BRG_OK && opts) {
        inf->opts.device_memory = opts->device_memory;
        inf->opts.pin_threads = opts->pin_threads;
        inf->opts.intra_threads = opts->intra_threads;
        inf->opts.params_shared = opts->share_params;
        inf->opts.compute_dtype = opts->compute_dtype;
        st = brg_compute_dtype_check(opts->compute_dtype);
    }
    if (st == BRG_OK) st = brg_runtime_create(model, &inf->opts, &inf->rt);
    if (st != BRG_OK) {
        brg_inference_destroy(inf);
        return st;
    }
    *out = inf;
    return BRG_OK;
}

brg_status brg_inference_create(brg_model *model, const brg_ipu_config *cfg, const brg_inference_options *opts,
                                brg_inference **out) {
    return create(model, cfg, opts, NULL, out);
}

brg_status brg_inference_create_placed(brg_model *model, const brg_ipu_config *cfg, const brg_inference_options *opts,
                                       const brg_placement *placement, brg_inference **out) {
    return create(model, cfg, opts, placement, out);
}

void brg_inference_destroy(brg_inference *inf) {
    if (!inf) return;
    brg_runtime_destroy(inf->rt);
    brg_placement_free(&inf->placement);
    free(inf);
}

const brg_placement *brg_inference_placement(const brg_inference *inf) { return &inf->placement; }
brg_runtime *inference_runtime(const brg_inference *inf) { return inf->rt; }

int64_t brg_inference_batch_multiple(const brg_inference *inf) {
    return (int64_t)inf->opts.replicas * inf->opts.micro_batches;
}

/* Rows [first, first + rows) of a [B, ...] tensor, as a view (NULL stays NULL). */
static brg_status rows_of(brg_arena *a, const brg_tensor *t, int64_t first, int64_t rows, brg_tensor **out) {
    *out = NULL;
    if (!t) return BRG_OK;
    brg_tensor *v;
    BRG_TRY(brg_arena_alloc_into(a, sizeof *v, "micro-batch view", (void **)&v));
    BRG_TRY(brg_tensor_view_slice(t, 0, first, rows, v));
    *out = v;
    return BRG_OK;
}

/* Every input has the batch's rows as its first dimension. */
static brg_status check_rows(const brg_tensor_map *batch, int64_t rows) {
    for (int i = 0; i < batch->n; i++) {
        const brg_tensor *t = batch->items[i].tensor;
        if (t && (t->ndim < 1 || t->shape[0] != rows))
            return brg_error(BRG_ERR_INVALID_ARG, "%s has %lld rows, the batch %lld: every input's first dimension is "
                                                  "the batch's",
                             batch->items[i].name, (long long)(t->ndim ? t->shape[0] : 0), (long long)rows);
    }
    return BRG_OK;
}

static brg_status slice_inputs(brg_arena *a, const brg_tensor_map *in, int64_t first, int64_t rows,
                               brg_micro_batch *mb) {
    memset(mb, 0, sizeof *mb);
    for (int i = 0; i < in->n; i++) {
        brg_tensor *view;
        BRG_TRY(rows_of(a, in->items[i].tensor, first, rows, &view));
        BRG_TRY(brg_tensor_map_put(mb, in->items[i].name, view));
    }
    return BRG_OK;
}

brg_status brg_inference_run(brg_inference *inf, const brg_tensor_map *batch, brg_arena *arena,
                             brg_inference_outputs *out) {
    memset(out, 0, sizeof *out);
    const char *first_input = brg_model_inputs(inf->model)[0].name;
    const brg_tensor *lead = brg_tensor_map_get(batch, first_input);
    if (!lead || lead->ndim < 1) return brg_error(BRG_ERR_INVALID_ARG, "the batch has no %s", first_input);
    const int64_t B = lead->shape[0];
    const int replicas = inf->opts.replicas, iterations = inf->opts.micro_batches, slots = replicas * iterations;
    int64_t micro = 0;
    BRG_TRY(micro_batch_of(B, iterations, replicas, &micro));
    BRG_TRY(check_rows(batch, B));
    brg_micro_batch *mbs;
    int64_t *first;
    float *losses;
    BRG_TRY(brg_arena_alloc_into(arena, (size_t)slots * sizeof *mbs, "micro-batches", (void **)&mbs));
    BRG_TRY(brg_arena_alloc_into(arena, (size_t)slots * sizeof *first, "micro-batches", (void **)&first));
    BRG_TRY(brg_arena_alloc_into(arena, (size_t)slots * sizeof *losses, "losses", (void **)&losses));
    /* Slot r * iterations + a is replica r's micro-batch a (the runtime's order); PopTorch deals
     * the batch's micro-batches out to the replicas in turn. */
    for (int r = 0; r < replicas; r++)
        for (int a = 0; a < iterations; a++) {
            const int slot = r * iterations + a;
            first[slot] = brg_micro_batch_first_row(a, r, replicas, micro);
            BRG_TRY(slice_inputs(arena, batch, first[slot], micro, &mbs[slot]));
        }
    /* The loss is a mean over the whole batch: each micro-batch's share uses the batch's count. */
    const brg_loss_items denom = brg_model_count_loss_items(inf->model, batch);
    BRG_TRY(brg_runtime_infer_collect(inf->rt, mbs, first, B, &denom, arena, &out->logits, losses));
    if (brg_model_has_targets(inf->model, batch)) {
        BRG_TRY(brg_tensor_new(arena, BRG_DTYPE_F32, 0, NULL, "loss", &out->loss));
        double sum = 0;
        for (int i = 0; i < slots; i++) sum += losses[i];
        ((float *)out->loss->data)[0] = (float)sum;
    }
    return brg_model_outputs(inf->model, batch, out->logits, arena, out->named, BRG_INFERENCE_MAX_OUTPUTS,
                             &out->n_named);
}

brg_status brg_infer(brg_model *model, const brg_ipu_config *cfg, const brg_tensor_map *batch, brg_arena *arena,
                     brg_inference_outputs *out) {
    memset(out, 0, sizeof *out);
    brg_inference *inf;
    BRG_TRY(brg_inference_create(model, cfg, NULL, &inf));
    brg_status st = brg_inference_run(inf, batch, arena, out);
    brg_inference_destroy(inf);
    return st;
}
