/* brigade forward: logits (and loss, given labels) for inputs read from a safetensors file; with
 * --ipu-config, run as the inference pipeline its inference_* attributes describe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/registry.h"
#include "brigade/pipeline.h"
#include "commands.h"
#include "ipu_flags.h"
#include "precision_flag.h"
#include "trace_flag.h"
#include "rank_flags.h"

/* The model's named outputs (logits; start_logits and end_logits; last_hidden_state and
 * pooler_output; ...) as the model declares them, then the loss. */
static brg_status write_outputs(const char *output, const brg_named_tensor *named, int n_named, brg_tensor *loss) {
    if (!brg_ranks_is_host()) return BRG_OK; /* under mpirun, rank 0 writes */
    brg_named_tensor outs[BRG_INFERENCE_MAX_OUTPUTS + 1];
    int n = 0;
    for (; n < n_named && n < BRG_INFERENCE_MAX_OUTPUTS; n++) outs[n] = named[n];
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

static brg_status run_single(brg_model *m, brg_bundle *bundle, brg_dtype compute, const char *output,
                             brg_arena *arena) {
    brg_tape *tape;
    BRG_TRY(brg_tape_create(arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    const brg_dtype before = brg_compute_dtype_set(compute); /* this thread is the one device */
    brg_status st = brg_model_forward(m, tape, bundle);
    brg_compute_dtype_set(before);
    if (t0) brg_trace_named("forward", t0, -1);
    brg_tape_destroy(tape);
    BRG_TRY(st);
    brg_named_tensor named[BRG_INFERENCE_MAX_OUTPUTS];
    int n = 0;
    BRG_TRY(brg_model_outputs(m, &bundle->inputs, bundle->logits, arena, named, BRG_INFERENCE_MAX_OUTPUTS, &n));
    return write_outputs(output, named, n, bundle->loss);
}

/* The input file's tensors by name, which key the executable cache. */
static brg_status list_inputs(const brg_safetensors *in, brg_named_tensor *named, brg_tensor *views, int cap, int *n) {
    *n = 0;
    for (size_t i = 0; i < brg_safetensors_count(in) && *n < cap; i++, (*n)++) {
        named[*n].name = brg_safetensors_name(in, i);
        BRG_TRY(brg_safetensors_get(in, named[*n].name, &views[*n]));
        named[*n].tensor = &views[*n];
    }
    return BRG_OK;
}

/* The batch through `c`'s pipeline: the inputs loaded for its model, then brg_inference_run. */
static brg_status run_batch(brg_cached_inference *c, const brg_ipu_config *cfg, const brg_safetensors *file,
                            brg_arena *arena, bool print, brg_inference_outputs *out) {
    brg_model *m = brg_cached_inference_model(c);
    brg_inference *inf = brg_cached_inference_pipeline(c);
    brg_tensor_map in = {0};
    BRG_TRY(brg_inputs_load(m, arena, file, &in));
    const brg_tensor *ids = brg_tensor_map_get(&in, "input_ids");
    int64_t micro = 0;
    BRG_TRY(brg_inference_micro_batch(cfg, (ids ? ids : brg_tensor_map_get(&in, "pixel_values"))->shape[0], &micro));
    if (print) brg_placement_print(stdout, m, brg_inference_placement(inf));
    return brg_inference_run(inf, &in, arena, out);
}

/* The batch through the inference pipeline the IPUConfig describes (brg_inference_run), after the
 * device-allocation table; the model and the pipeline come from the executable cache when the
 * IPUConfig names one (brigade/exe_cache.h), whose entry is checked while the pipeline runs
 * (a damaged one is rebuilt and the batch run again before anything is written) and written
 * after the outputs. */
static brg_status run_pipeline(const char *model, const brg_ipu_config *cfg, brg_dtype compute,
                               const brg_safetensors *file, const char *output, brg_arena *arena) {
    brg_named_tensor named[16];
    brg_tensor views[16];
    int n_named = 0;
    BRG_TRY(list_inputs(file, named, views, 16, &n_named));
    const brg_inference_options opts = {.compute_dtype = compute};
    brg_cached_inference_request rq = {model, cfg, &opts, named, n_named, "forward", .confirm_later = true};
    brg_cached_inference *c;
    BRG_TRY(brg_cached_inference_open(&rq, &c));
    brg_inference_outputs out;
    brg_status st = run_batch(c, cfg, file, arena, true, &out);
    bool again = false;
    const brg_status checked = brg_cached_inference_confirm(c, &again);
    if (checked != BRG_OK) st = checked;
    else if (again) st = run_batch(c, cfg, file, arena, false, &out);
    if (st == BRG_OK) st = write_outputs(output, out.named, out.n_named, out.loss);
    if (st == BRG_OK) fflush(stdout), brg_cached_inference_store(c);
    brg_cached_inference_close(c);
    return st;
}

int cmd_forward(int argc, char **argv) {
    const char *model = NULL, *inputs = NULL, *output = NULL, *ipu_config = NULL, *overrides = NULL, *trace = NULL,
               *precision = NULL;
    cli_rank_flags ranks = CLI_RANK_FLAGS_INIT;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "model folder or hub id in the local cache", false},
        {"inputs", ARG_STRING, &inputs, true, "safetensors file: input_ids [, attention_mask, labels]", false},
        {"output", ARG_STRING, &output, true, "safetensors file to write the outputs (and loss) to", false},
        {"ipu-config", ARG_STRING, &ipu_config, false, "run as the inference pipeline of this ipu_config.json", false},
        {"ipu-config-overrides", ARG_STRING, &overrides, false, "\"k1=v1,k2=[1 2],k3=true\"", false},
        {"precision", ARG_STRING, &precision, false, CLI_PRECISION_HELP, false},
        {"trace", ARG_STRING, &trace, false, "write a timeline of the run (Chrome trace-event JSON, Perfetto) to FILE.json", false},
        CLI_RANK_FLAG_SPECS(ranks),
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("forward", "Runs a model forward; writes its outputs (logits F32 [B,T,V], or as the model names them: "
                  "last_hidden_state, pooler_output, ...) and loss F32 [] when labels are given.",
                   specs, n);
        return 0;
    }
    if (!args_parse("forward", argc, argv, 2, specs, n)) return 2;
    if (!cli_trace_begin("forward", trace)) return 1;
    if (cli_rank_flags_apply(&ranks) != BRG_OK) return cli_fail("forward");

    brg_model *m = NULL;
    brg_safetensors *in = NULL;
    brg_arena *arena = NULL;
    brg_ipu_config cfg;
    brg_bundle bundle = {0};
    brg_dtype compute;
    brg_status st = cli_forward_precision(precision, &compute);
    if (st == BRG_OK && ipu_config) st = cli_load_ipu_config(ipu_config, overrides, BRG_IPU_MODE_INFERENCE, &cfg);
    if (st == BRG_OK && !ipu_config) st = brg_model_load(model, &m);
    if (st == BRG_OK) st = brg_safetensors_open(inputs, &in);
    if (st == BRG_OK) st = brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &arena);
    if (st == BRG_OK && ipu_config) st = run_pipeline(model, &cfg, compute, in, output, arena);
    if (st == BRG_OK && !ipu_config) st = brg_inputs_load(m, arena, in, &bundle.inputs);
    if (st == BRG_OK && !ipu_config) st = run_single(m, &bundle, compute, output, arena);
    brg_arena_destroy(arena);
    brg_safetensors_close(in);
    brg_model_destroy(m);
    st = cli_trace_end("forward", st);
    return st == BRG_OK ? 0 : cli_fail("forward");
}
