/* brigade init: a random-init model folder that transformers loads. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "commands.h"

static int fail_usage(const char *msg) {
    fprintf(stderr, "brigade init: %s\n", msg);
    return 2;
}

int cmd_init(int argc, char **argv) {
    const char *arch = NULL, *output = NULL, *activation = "gelu_new";
    int64_t layers = 0, hidden = 0, heads = 0, vocab = 0, positions = 0, seed = 0, inner = 0;
    bool untied = false;
    arg_spec specs[] = {
        {"arch", ARG_STRING, &arch, true, "architecture: gpt2", false},
        {"layers", ARG_INT, &layers, true, "number of transformer layers", false},
        {"hidden", ARG_INT, &hidden, true, "hidden size (n_embd)", false},
        {"heads", ARG_INT, &heads, true, "attention heads", false},
        {"vocab", ARG_INT, &vocab, true, "vocabulary size", false},
        {"positions", ARG_INT, &positions, true, "maximum sequence length", false},
        {"seed", ARG_INT, &seed, false, "initialisation seed (default 0)", false},
        {"output", ARG_STRING, &output, true, "folder to write config.json and model.safetensors into", false},
        {"activation", ARG_STRING, &activation, false, "gelu_new (default), gelu, gelu_pytorch_tanh", false},
        {"inner", ARG_INT, &inner, false, "MLP width (default 4 x hidden)", false},
        {"untied", ARG_FLAG, &untied, false, "give the LM head its own weights", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("init", "Writes a random-init Hugging Face model folder (config.json + model.safetensors).", specs, n);
        return 0;
    }
    if (!args_parse("init", argc, argv, 2, specs, n)) return 2;
    if (strcmp(arch, "gpt2") != 0) return fail_usage("--arch must be gpt2 (the only architecture so far)");
    if (seed < 0) return fail_usage("--seed must be non-negative");

    brg_gpt2_config cfg;
    brg_gpt2_config_default(&cfg);
    cfg.n_layer = layers;
    cfg.n_embd = hidden;
    cfg.n_head = heads;
    cfg.vocab_size = vocab;
    cfg.n_positions = positions;
    cfg.n_inner = inner;
    cfg.tie_word_embeddings = !untied;
    cfg.bos_token_id = cfg.eos_token_id = vocab - 1;
    if (strcmp(activation, "gelu") == 0) cfg.activation = BRG_ACT_GELU_ERF;
    else if (strcmp(activation, "gelu_new") == 0 || strcmp(activation, "gelu_pytorch_tanh") == 0)
        cfg.activation = BRG_ACT_GELU_TANH;
    else return fail_usage("--activation must be gelu, gelu_new or gelu_pytorch_tanh");
    snprintf(cfg.activation_name, sizeof cfg.activation_name, "%s", activation);

    brg_model *m;
    if (brg_gpt2_create(&cfg, &m) != BRG_OK) return cli_fail("init");
    brg_model_init_weights(m, (uint64_t)seed);
    brg_status st = brg_model_save(m, output);
    if (st == BRG_OK)
        printf("wrote %s: GPT2LMHeadModel, %lld parameters, %lld layers, hidden %lld, %lld heads, vocab %lld\n", output,
               (long long)brg_model_num_parameters(m), (long long)layers, (long long)hidden, (long long)heads,
               (long long)vocab);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("init");
}
