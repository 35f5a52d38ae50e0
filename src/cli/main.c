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
    fprintf(stderr, "brigade: unknown command '%s' (commands: init, forward; see brigade --help)\n", argv[1]);
    return 2;
}
