/* Line input shared by the text commands (lines.h). */
#include "lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

char *cli_read_line(FILE *in, size_t *len) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, in);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\n') n--;
    if (n && line[n - 1] == '\r') n--;
    line[n] = 0;
    *len = (size_t)n;
    return line;
}

FILE *cli_open_input(const char *command, const char *path) {
    if (!path) return stdin;
    FILE *f = fopen(path, "rb");
    if (!f) fprintf(stderr, "brigade %s: cannot open %s: %s\n", command, path, strerror(errno));
    return f;
}
