/* The brigade command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "brigade/ranks.h"
#include "brigade/version.h"
#include "commands.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

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
    {"generate", cmd_generate, "continue prompts (greedy, sampling or beam search) with a KV cache"},
    {"tokenize", cmd_tokenize, "tokenize lines of text with a model folder's tokenizer (JSON lines)"},
    {"detokenize", cmd_detokenize, "decode lines of token ids back to text"},
    {"embed", cmd_embed, "sentence embeddings of lines of text (sentence-transformers folders)"},
    {"pipeline", cmd_pipeline, "transformers' pipeline(TASK) on a model folder: JSON lines in, JSON lines out"},
    {"report", cmd_report, "a training run's plots (loss, lr, tokens/s, pipeline Gantt, memory) as OUT/report.html"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: brigade <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nbrigade <command> --help (or brigade help <command>) describes each command's options;\n"
                 "brigade --version prints the version and the kernels this CPU gets.\n");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

static int unknown(const char *name) {
    fprintf(stderr, "brigade: unknown command '%s' (commands:", name);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, "; see brigade --help)\n");
    return 2;
}

/* The version, and which kernels run here: what a bug report needs. */
static int version(void) {
    const char *mpi = brg_ranks_mpi_version();
    printf("brigade %s (gemm: %s, element-wise: %s, mpi: %s)\n", brg_version(), brg_gemm_backend(),
           brg_isa_name(brg_simd_isa()), mpi ? mpi : "none");
    return 0;
}

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) return version();
    if (strcmp(argv[1], "help") == 0 && argc >= 3) { /* brigade help CMD = brigade CMD --help */
        const command *c = find(argv[2]);
        if (!c) return unknown(argv[2]);
        char *args[] = {argv[0], argv[2], "--help", NULL};
        return c->run(3, args);
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    const command *c = find(argv[1]);
    return c ? c->run(argc, argv) : unknown(argv[1]);
}

/* Under mpirun every rank runs the same command; rank 0 speaks for them (brigade/ranks.h). */
int main(int argc, char **argv) {
    if (brg_ranks_init() != BRG_OK) {
        fprintf(stderr, "brigade: %s\n", brg_last_error());
        return 1;
    }
    brg_ranks_quiet_followers();
    return brg_ranks_finish(dispatch(argc, argv), argc > 1 ? argv[1] : "");
}
