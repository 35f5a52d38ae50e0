/* brigade forward: logits (and loss, given labels) for inputs read from a safetensors file; with
 * --ipu-config, run as the inference pipeline its inference_* attributes describe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/registry.h"
#include "brigade/runtime.h"
#include "commands.h"

static brg_status write_outputs(const char *output, brg_tensor *logits, brg_tensor *loss) {
    brg_named_tensor outs[2] = {{"logits", logits}, {"loss", loss}};
    BRG_TRY(brg_safetensors_write(output, outs, loss ? 2 : 1, NULL, 0));
    char shape[128];
    printf("logits %s", brg_shape_str(logits, shape, sizeof shape));
    if (loss) printf("  loss %.6f", (double)((float *)loss->data)[0]);
    printf("\n");
    return BRG_OK;
}

static brg_status run_single(brg_model *m, brg_bundle *bundle, const char *output, brg_arena *arena) {
    brg_tape *tape;
    BRG_TRY(brg_tape_create(arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward(m, tape, bundle);
    brg_tape_destroy(tape);
    BRG_TRY(st);
    return write_outputs(output, bundle->logits, bundle->loss);
}

/* Rows [first, first + rows) of a [B, ...] tensor, as a view. */
static brg_tensor *rows_of(brg_arena *a, const brg_tensor *t, int64_t first, int64_t rows) {
    if (!t) return NULL;
    brg_tensor *v = brg_arena_alloc(a, sizeof *v, "micro-batch view");
    if (!v) return NULL;
    if (brg_tensor_view_slice(t, 0, first, rows, v) != BRG_OK) return NULL;
    return v;
}

typedef struct pipeline_shape {
    int replicas, iterations;
    int64_t micro;
} pipeline_shape;

/* PopTorch's rule: the batch must split into device_iterations x replicas micro-batches. */
static brg_status shape_of(const brg_ipu_config *cfg, int64_t batch, pipeline_shape *ps) {
    brg_ipu_view v;
    brg_ipu_config_view(cfg, BRG_IPU_MODE_INFERENCE, &v);
    ps->replicas = (int)v.replication_factor;
    ps->iterations = (int)v.device_iterations;
    int64_t per = (int64_t)ps->replicas * ps->iterations;
    if (batch % per != 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the batch dimension (%lld) must be a multiple of inference_device_iterations (%d) x "
                         "inference_replication_factor (%d) = %lld",
                         (long long)batch, ps->iterations, ps->replicas, (long long)per);
    ps->micro = batch / per;
    return BRG_OK;
}

static brg_status run_pipeline(brg_model *m, const brg_ipu_config *cfg, brg_bundle *in, const char *output,
                               brg_arena *arena) {
    int64_t B = in->input_ids->shape[0], T = in->input_ids->shape[1], V = m->vocab_size;
    pipeline_shape ps = {0};
    BRG_TRY(shape_of(cfg, B, &ps));
    brg_placement pl = {0};
    BRG_TRY(brg_model_parallelize(m, cfg, BRG_IPU_MODE_INFERENCE, &pl));
    brg_placement_print(stdout, m, &pl);
    int slots = ps.replicas * ps.iterations;
    brg_micro_batch *mbs = brg_arena_alloc(arena, (size_t)slots * sizeof *mbs, "micro-batches");
    float **sinks = brg_arena_alloc(arena, (size_t)slots * sizeof *sinks, "micro-batches");
    float *losses = brg_arena_alloc(arena, (size_t)slots * sizeof *losses, "losses");
    brg_tensor *logits = NULL, *loss = NULL;
    int64_t lshape[3] = {B, T, V};
    brg_status st = mbs && sinks && losses ? BRG_OK : BRG_ERR_OOM;
    if (st == BRG_OK) st = brg_tensor_new(arena, BRG_DTYPE_F32, 3, lshape, "logits", &logits);
    if (st == BRG_OK && in->labels) st = brg_tensor_new(arena, BRG_DTYPE_F32, 0, NULL, "loss", &loss);
    for (int r = 0; st == BRG_OK && r < ps.replicas; r++)
        for (int a = 0; a < ps.iterations; a++) {
            int slot = r * ps.iterations + a;
            int64_t first = ((int64_t)a * ps.replicas + r) * ps.micro;
            mbs[slot] = (brg_micro_batch){.input_ids = rows_of(arena, in->input_ids, first, ps.micro),
                                          .attention_mask = rows_of(arena, in->attention_mask, first, ps.micro),
                                          .labels = rows_of(arena, in->labels, first, ps.micro)};
            sinks[slot] = (float *)logits->data + first * T * V;
        }
    double denom = in->labels ? (double)m->ops->count_loss_items(m, in->labels) : 0;
    brg_runtime *rt = NULL;
    brg_runtime_options o = {.replicas = ps.replicas, .stages = pl.n_devices, .block_stage = pl.block_device,
                             .micro_batches = ps.iterations, .training = false};
    if (st == BRG_OK) st = brg_runtime_create(m, &o, &rt);
    if (st == BRG_OK) st = brg_runtime_infer(rt, mbs, denom, sinks, losses);
    if (st == BRG_OK && loss) {
        double sum = 0;
        for (int i = 0; i < slots; i++) sum += losses[i];
        ((float *)loss->data)[0] = (float)sum;
    }
    brg_runtime_destroy(rt);
    brg_placement_free(&pl);
    return st == BRG_OK ? write_outputs(output, logits, loss) : st;
}

static brg_status load_config(const char *ref, const char *overrides, brg_ipu_config *cfg) {
    brg_ipu_config_init(cfg);
    BRG_TRY(brg_ipu_config_load(ref, cfg));
    if (overrides) BRG_TRY(brg_ipu_config_update_from_string(cfg, overrides));
    BRG_TRY(brg_ipu_config_validate(cfg));
    brg_ipu_config_eval(cfg);
    for (int i = 0; i < cfg->n_warnings; i++) fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
    return BRG_OK;
}

int cmd_forward(int argc, char **argv) {
    const char *model = NULL, *inputs = NULL, *output = NULL, *ipu_config = NULL, *overrides = NULL;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "model folder or hub id in the local cache", false},
        {"inputs", ARG_STRING, &inputs, true, "safetensors file: input_ids [, attention_mask, labels]", false},
        {"output", ARG_STRING, &output, true, "safetensors file to write logits (and loss) to", false},
        {"ipu-config", ARG_STRING, &ipu_config, false, "run as the inference pipeline of this ipu_config.json", false},
        {"ipu-config-overrides", ARG_STRING, &overrides, false, "\"k1=v1,k2=[1 2],k3=true\"", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("forward", "Runs a model forward; writes logits F32 [B,T,V] and loss F32 [] when labels are given.",
                   specs, n);
        return 0;
    }
    if (!args_parse("forward", argc, argv, 2, specs, n)) return 2;

    brg_model *m = NULL;
    brg_safetensors *in = NULL;
    brg_arena *arena = NULL;
    brg_ipu_config cfg;
    brg_bundle bundle;
    brg_status st = ipu_config ? load_config(ipu_config, overrides, &cfg) : BRG_OK;
    if (st == BRG_OK) st = brg_model_load(model, &m);
    if (st == BRG_OK) st = brg_safetensors_open(inputs, &in);
    if (st == BRG_OK) st = brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &arena);
    if (st == BRG_OK) st = brg_inputs_load(m, arena, in, &bundle);
    if (st == BRG_OK) st = ipu_config ? run_pipeline(m, &cfg, &bundle, output, arena) : run_single(m, &bundle, output, arena);
    brg_arena_destroy(arena);
    brg_safetensors_close(in);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("forward");
}
