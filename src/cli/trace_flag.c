/* --trace (trace_flag.h). */
#include "trace_flag.h"

#include <stdio.h>
#include <string.h>

#include "brigade/ranks.h"
#include "brigade/trace.h"

bool cli_trace_begin(const char *command, const char *path) {
    if (!path) return true;
    char process[64], ranked[4200];
    snprintf(process, sizeof process, "brigade %s", command);
    /* Under mpirun each rank writes its own file: FILE for rank 0, FILE.rankR.json for rank R
     * (its events under pid R, so the files' traceEvents can be put side by side). */
    const int rank = brg_ranks_rank();
    if (rank > 0) {
        const size_t n = strlen(path);
        const bool json = n > 5 && strcmp(path + n - 5, ".json") == 0;
        snprintf(ranked, sizeof ranked, "%.*s.rank%d%s", (int)(json ? n - 5 : n), path, rank, json ? ".json" : "");
        path = ranked;
    }
    brg_trace_set_rank(rank);
    if (brg_trace_start(path, process) == BRG_OK) return true;
    fprintf(stderr, "brigade %s: %s\n", command, brg_last_error());
    return false;
}

brg_status cli_trace_end(const char *command, brg_status st) {
    if (!brg_trace_enabled()) return st;
    /* A failed run's message stays brg_last_error(), for the caller to print. */
    char why[1024];
    snprintf(why, sizeof why, "%s", st != BRG_OK ? brg_last_error() : "");
    brg_status written = brg_trace_finish();
    if (written == BRG_OK) return st;
    if (st == BRG_OK) return written; /* the caller prints it */
    fprintf(stderr, "brigade %s: %s\n", command, brg_last_error());
    brg_error(st, "%s", why);
    return st;
}
