/* brigade config show|validate CFG: an ipu_config.json normalised (every attribute, derived
 * values filled in), or checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "commands.h"

static void usage(const arg_spec *specs, int n) {
    printf("usage: brigade config show CFG [options]\n"
           "       brigade config validate CFG [options]\n\n"
           "CFG is an ipu_config.json file, a folder holding one, or a hub id in the local Hugging Face cache.\n"
           "show prints every attribute as JSON (what brigade would save); with --mode, the attributes as that\n"
           "mode resolves them. validate exits non-zero with the reason when the config is not valid.\n\n"
           "options:\n");
    for (int i = 0; i < n; i++)
        printf("  --%-24s%s\n", specs[i].name, specs[i].help);
}

/* Loads CFG, reports its warnings and applies the overrides. */
static brg_status load(const char *ref, const char *overrides, brg_ipu_config *cfg) {
    BRG_TRY(brg_ipu_config_load(ref, cfg));
    for (int i = 0; i < cfg->n_warnings; i++) fprintf(stderr, "warning: %s: %s\n", ref, cfg->warnings[i]);
    if (overrides) BRG_TRY(brg_ipu_config_update_from_string(cfg, overrides));
    return BRG_OK;
}

static brg_status show(const brg_ipu_config *cfg, const char *mode) {
    char *text;
    if (mode) {
        brg_ipu_mode m;
        BRG_TRY(brg_ipu_mode_parse(mode, &m));
        BRG_TRY(brg_ipu_config_view_to_json(cfg, m, &text));
    } else {
        BRG_TRY(brg_ipu_config_to_json(cfg, &text));
    }
    fputs(text, stdout);
    free(text);
    return BRG_OK;
}

/* With a layer count, the wildcard expansion that waits for a model is checked too, and that
 * every IPU gets work: the embeddings go to the first IPU and the head to the last, as for the
 * models brigade has, so an IPU in between needs a layer (plan and train say the same). */
static brg_status validate(brg_ipu_config *cfg, const char *ref, const char *mode, int64_t layers) {
    for (int m = BRG_IPU_MODE_TRAINING; m <= BRG_IPU_MODE_INFERENCE; m++) {
        if (mode && strcmp(mode, brg_ipu_mode_name((brg_ipu_mode)m)) != 0) continue;
        cfg->mode = (brg_ipu_mode)m;
        if (layers >= 0) {
            brg_ipu_list l;
            if (layers > BRG_IPU_LIST_MAX * 4096LL)
                return brg_error(BRG_ERR_INVALID_ARG, "--layers %lld is too many", (long long)layers);
            BRG_TRY(brg_ipu_config_expand_layers(cfg, (int)layers, &l));
            for (int ipu = 1; ipu + 1 < l.n; ipu++)
                if (l.v[ipu] == 0) return brg_ipu_config_empty_ipu_error(cfg, &l, (int)layers, ipu);
        }
    }
    printf("%s: valid\n", ref);
    return BRG_OK;
}

int cmd_config(int argc, char **argv) {
    const char *mode = NULL, *overrides = NULL;
    int64_t layers = -1;
    arg_spec specs[] = {
        {"mode", ARG_STRING, &mode, false, "training or inference", false},
        {"overrides", ARG_STRING, &overrides, false, "\"k1=v1,k2=[1 2 3],k3=true\" applied after loading", false},
        {"layers", ARG_INT, &layers, false, "validate: also place this many layers (checks -1 wildcards)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        usage(specs, n);
        return 0;
    }
    if (argc < 4 || (strcmp(argv[2], "show") != 0 && strcmp(argv[2], "validate") != 0)) {
        fprintf(stderr, "brigade config: expected 'show CFG' or 'validate CFG' (see brigade config --help)\n");
        return 2;
    }
    if (!args_parse("config", argc, argv, 4, specs, n)) return 2;
    if (mode) {
        brg_ipu_mode m;
        if (brg_ipu_mode_parse(mode, &m) != BRG_OK) return cli_fail("config");
    }
    brg_ipu_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return fprintf(stderr, "brigade config: out of memory\n"), 1;
    const char *ref = argv[3];
    brg_status st = load(ref, overrides, cfg);
    if (st == BRG_OK) st = strcmp(argv[2], "show") == 0 ? show(cfg, mode) : validate(cfg, ref, mode, layers);
    free(cfg);
    return st == BRG_OK ? 0 : cli_fail("config");
}
