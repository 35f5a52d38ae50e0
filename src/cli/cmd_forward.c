/* brigade forward: logits (and loss, given labels) for inputs read from a safetensors file. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "commands.h"

static brg_status run_forward(brg_model *m, const brg_safetensors *in, const char *output, brg_arena *arena) {
    brg_bundle bundle;
    BRG_TRY(brg_inputs_load(m, arena, in, &bundle));
    brg_tape *tape;
    BRG_TRY(brg_tape_create(arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward(m, tape, &bundle);
    brg_tape_destroy(tape);
    BRG_TRY(st);
    brg_named_tensor outs[2] = {{"logits", bundle.logits}, {"loss", bundle.loss}};
    size_t n_out = bundle.loss ? 2 : 1;
    BRG_TRY(brg_safetensors_write(output, outs, n_out, NULL, 0));
    char shape[128];
    printf("logits %s", brg_shape_str(bundle.logits, shape, sizeof shape));
    if (bundle.loss) printf("  loss %.6f", (double)((float *)bundle.loss->data)[0]);
    printf("\n");
    return BRG_OK;
}

int cmd_forward(int argc, char **argv) {
    const char *model = NULL, *inputs = NULL, *output = NULL;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "model folder or hub id in the local cache", false},
        {"inputs", ARG_STRING, &inputs, true, "safetensors file: input_ids [, attention_mask, labels]", false},
        {"output", ARG_STRING, &output, true, "safetensors file to write logits (and loss) to", false},
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
    brg_status st = brg_model_load(model, &m);
    if (st == BRG_OK) st = brg_safetensors_open(inputs, &in);
    if (st == BRG_OK) st = brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &arena);
    if (st == BRG_OK) st = run_forward(m, in, output, arena);
    brg_arena_destroy(arena);
    brg_safetensors_close(in);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("forward");
}
