/* Line input for the commands that read text a line at a time (tokenize, detokenize, embed). */
#ifndef BRIGADE_CLI_LINES_H
#define BRIGADE_CLI_LINES_H

#include <stddef.h>
#include <stdio.h>

/* One line without its "\n" (and a "\r" before it), malloc'd; NULL at the end of input. */
char *cli_read_line(FILE *in, size_t *len);

/* `path` opened for reading, or stdin when NULL; NULL (with a one-line message naming the
 * command) when it cannot be opened. */
FILE *cli_open_input(const char *command, const char *path);

#endif
