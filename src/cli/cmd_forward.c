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

/* The model's named outputs (logits; start_logits and end_logits; last_hidden_state and
 * pooler_output; ...) as the model declares them, then the loss. */
static brg_status write_outputs(const brg_model *m, brg_arena *a, const brg_bundle *batch, const char *output,
                                brg_tensor *logits, brg_tensor *loss) {
    brg_named_tensor outs[9];
    int n = 0;
    BRG_TRY(brg_model_outputs(m, batch, logits, a, outs, 8, &n));
    if (loss) outs[n++] = (brg_named_tensor){"loss", loss};
    BRG_TRY(brg_safetensors_write(output, outs, (size_t)n, NULL, 0));
    char shape[128];
    for (int i = 0; i < n; i++) {
        if (outs[i].tensor == loss) printf("%sloss %.6f", i ? "  " : "", (double)((float *)loss->data)[0]);
        else printf("%s%s %s", i ? "  " : "", outs[i].name, brg_shape_str(outs[i].tensor, shape, sizeof shape));
    }
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
    return write_outputs(m, arena, bundle, output, bundle->logits, bundle->loss);
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

static brg_micro_batch slice_inputs(brg_arena *a, const brg_bundle *in, int64_t first, int64_t rows) {
    return (brg_micro_batch){.input_ids = rows_of(a, in->input_ids, first, rows),
                             .attention_mask = rows_of(a, in->attention_mask, first, rows),
                             .labels = rows_of(a, in->labels, first, rows),
                             .token_type_ids = rows_of(a, in->token_type_ids, first, rows),
                             .pixel_values = rows_of(a, in->pixel_values, first, rows),
                             .decoder_input_ids = rows_of(a, in->decoder_input_ids, first, rows),
                             .decoder_attention_mask = rows_of(a, in->decoder_attention_mask, first, rows),
                             .extra_labels = rows_of(a, in->extra_labels, first, rows)};
}

/* The logits' shape for the whole batch, from a forward pass over its first row. */
static brg_status logits_shape(brg_model *m, brg_arena *a, const brg_bundle *in, int64_t batch, brg_tensor *shape) {
    size_t mark = brg_arena_mark(a);
    brg_micro_batch one = slice_inputs(a, in, 0, 1);
    brg_bundle b = {.input_ids = one.input_ids, .attention_mask = one.attention_mask, .labels = one.labels,
                    .extra_labels = one.extra_labels,
                    .token_type_ids = one.token_type_ids, .pixel_values = one.pixel_values,
                    .decoder_input_ids = one.decoder_input_ids, .decoder_attention_mask = one.decoder_attention_mask};
    brg_tape *tape;
    BRG_TRY(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward(m, tape, &b);
    if (st == BRG_OK) {
        *shape = *b.logits;
        shape->shape[0] = batch;
    }
    brg_tape_destroy(tape);
    brg_arena_reset(a, mark);
    return st;
}

static brg_status run_pipeline(brg_model *m, const brg_ipu_config *cfg, brg_bundle *in, const char *output,
                               brg_arena *arena) {
    const brg_tensor *lead = in->input_ids ? in->input_ids : in->pixel_values;
    int64_t B = lead->shape[0];
    brg_tensor full;
    BRG_TRY(logits_shape(m, arena, in, B, &full));
    int64_t row = brg_tensor_numel(&full) / B;
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
    brg_status st = mbs && sinks && losses ? BRG_OK : BRG_ERR_OOM;
    if (st == BRG_OK) st = brg_tensor_new(arena, BRG_DTYPE_F32, full.ndim, full.shape, "logits", &logits);
    if (st == BRG_OK && in->labels) st = brg_tensor_new(arena, BRG_DTYPE_F32, 0, NULL, "loss", &loss);
    for (int r = 0; st == BRG_OK && r < ps.replicas; r++)
        for (int a = 0; a < ps.iterations; a++) {
            int slot = r * ps.iterations + a;
            int64_t first = ((int64_t)a * ps.replicas + r) * ps.micro;
            mbs[slot] = slice_inputs(arena, in, first, ps.micro);
            sinks[slot] = (float *)logits->data + first * row;
        }
    /* The loss is a mean over the whole batch: each micro-batch's share uses the batch's count. */
    brg_loss_items denom = brg_model_count_loss_items(m, in);
    brg_runtime *rt = NULL;
    brg_runtime_options o = {.replicas = ps.replicas, .stages = pl.n_devices, .block_stage = pl.block_device,
                             .micro_batches = ps.iterations, .training = false};
    if (st == BRG_OK) st = brg_runtime_create(m, &o, &rt);
    if (st == BRG_OK) st = brg_runtime_infer(rt, mbs, &denom, sinks, losses);
    if (st == BRG_OK && loss) {
        double sum = 0;
        for (int i = 0; i < slots; i++) sum += losses[i];
        ((float *)loss->data)[0] = (float)sum;
    }
    brg_runtime_destroy(rt);
    brg_placement_free(&pl);
    return st == BRG_OK ? write_outputs(m, arena, in, output, logits, loss) : st;
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
        {"output", ARG_STRING, &output, true, "safetensors file to write the outputs (and loss) to", false},
        {"ipu-config", ARG_STRING, &ipu_config, false, "run as the inference pipeline of this ipu_config.json", false},
        {"ipu-config-overrides", ARG_STRING, &overrides, false, "\"k1=v1,k2=[1 2],k3=true\"", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("forward", "Runs a model forward; writes its outputs (logits F32 [B,T,V], or as the model names them: "
                  "last_hidden_state, pooler_output, ...) and loss F32 [] when labels are given.",
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
