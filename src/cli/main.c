/* The brigade command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "brigade/brigade.h"

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: brigade <init|forward> [options]\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "brigade: unknown command '%s'\n", argv[1]);
    return 2;
}
