/* Flag parsing shared by the subcommands: "--name value" or "--name=value". */
#ifndef BRIGADE_CLI_ARGS_H
#define BRIGADE_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { ARG_STRING, ARG_INT, ARG_DOUBLE, ARG_FLAG } arg_kind;

typedef struct arg_spec {
    const char *name; /* without the leading dashes */
    arg_kind kind;
    void *dest;       /* const char **, int64_t *, double * or bool * */
    bool required;
    const char *help;
    bool seen;
} arg_spec;

/* Parses argv[first..argc); prints a one-line reason and returns false on bad usage. */
bool args_parse(const char *command, int argc, char **argv, int first, arg_spec *specs, int n);
void args_usage(const char *command, const char *summary, const arg_spec *specs, int n);
/* True when argv holds --help or -h. */
bool args_wants_help(int argc, char **argv, int first);

/* True when the command line gave --name (after args_parse). */
bool args_seen(const arg_spec *specs, int n, const char *name);

/* Prints "brigade <command>: <brg_last_error()>" and returns the exit code 1. */
int cli_fail(const char *command);

#endif
