/* The brigade command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"init", cmd_init, "write a random-init Hugging Face model folder"},
    {"forward", cmd_forward, "run a model on inputs from a safetensors file"},
    {"config", cmd_config, "show or validate an ipu_config.json"},
    {"plan", cmd_plan, "show where a model's blocks go and what each device holds"},
    {"train", cmd_train, "train a model pipelined and replicated as an ipu_config.json says"},
    {"generate", cmd_generate, "continue a prompt greedily"},
    {"tokenize", cmd_tokenize, "tokenize lines of text with a model folder's tokenizer (JSON lines)"},
    {"detokenize", cmd_detokenize, "decode lines of token ids back to text"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: brigade <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nbrigade <command> --help describes each command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc, argv);
    fprintf(stderr, "brigade: unknown command '%s' (commands:", argv[1]);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, "; see brigade --help)\n");
    return 2;
}
