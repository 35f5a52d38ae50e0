/* A rank file: which devices each rank runs, one line per rank (docs/scale-out.md):
 *
 *     # 2 replicas x 2 stages: each replica's stages on different ranks
 *     rank 0: 0 2
 *     rank 1: 1 3
 *
 * Devices are ids (replica x ipus_per_replica + stage) or ranges (4-7), in any order. Reading
 * checks what the file alone can say (every rank from 0 to the highest has one line with a device,
 * every device from 0 to the highest is on exactly one rank, device 0 on rank 0); applying it to a
 * runtime checks that its ranks and devices are the run's. Errors are one line naming the file and
 * the line. */
#ifndef BRIGADE_RANK_FILE_H
#define BRIGADE_RANK_FILE_H

#include "brigade/status.h"

typedef struct rank_file rank_file;

brg_status rank_file_read(const char *path, rank_file **out);
void rank_file_free(rank_file *f);
/* device_rank[n_devices] from the file, for a run of n_ranks ranks. */
brg_status rank_file_layout(const rank_file *f, int n_ranks, int n_devices, int *device_rank);

#endif
