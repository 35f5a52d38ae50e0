/* --devices-per-rank, --rank-file and --timeout, for the commands that run devices: what they
 * mean under mpirun (brigade/ranks.h); in one process they change nothing (a rank file is still
 * read and checked). */
#ifndef BRIGADE_CLI_RANK_FLAGS_H
#define BRIGADE_CLI_RANK_FLAGS_H

#include "brigade/status.h"

typedef struct cli_rank_flags {
    const char *devices_per_rank;
    const char *rank_file;
    double timeout; /* < 0: not given */
} cli_rank_flags;

#define CLI_RANK_FLAGS_INIT {NULL, NULL, -1}

/* The three entries of a command's arg_spec table. */
#define CLI_RANK_FLAG_SPECS(rf)                                                                                      \
    {"devices-per-rank", ARG_STRING, &(rf).devices_per_rank, false,                                                \
     "under mpirun: devices per rank, K or K0,K1,... (default: consecutive, as even as the count allows)", false}, \
    {"rank-file", ARG_STRING, &(rf).rank_file, false,                                                              \
     "under mpirun: the devices of each rank, a line 'rank R: D D ...' per rank (docs/scale-out.md)", false},       \
    {"timeout", ARG_DOUBLE, &(rf).timeout, false,                                                                 \
     "under mpirun: seconds a rank waits for another before it stops the run (default 300; 0: for ever)", false}

brg_status cli_rank_flags_apply(const cli_rank_flags *rf);

#endif
