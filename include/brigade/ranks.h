/* Processes (ranks). `mpirun -np N brigade CMD ...` starts N copies of the same command; each
 * runs its share of the devices of every runtime it creates (consecutive devices per rank), and
 * rank 0 is the host: it reads the data and writes the log, the progress, the checkpoints, the
 * saved model and stdout, while the other ranks compute the same host-side steps but write
 * nothing. Without mpirun there is one process, rank 0 of 1, and nothing here changes anything.
 *
 * Built with MPI (pkg-config ompi-c; brg_ranks_mpi_version says), brg_ranks_init starts MPI when
 * the environment is mpirun's; built without it, a launch of more than one rank is refused. */
#ifndef BRIGADE_RANKS_H
#define BRIGADE_RANKS_H

#include <stdbool.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the environment mpirun gives its ranks (OMPI_COMM_WORLD_SIZE / _RANK, or PMI_SIZE /
 * PMI_RANK) and, under mpirun with MPI built in, calls MPI_Init_thread. Call once, first. */
brg_status brg_ranks_init(void);
int brg_ranks_rank(void);
int brg_ranks_size(void);
static inline bool brg_ranks_is_host(void) { return brg_ranks_rank() == 0; }
/* "Open MPI 4.1.4" (what the build found), or NULL for a build without MPI. */
const char *brg_ranks_mpi_version(void);

/* How devices are spread over the ranks: "K" (K consecutive devices per rank) or "K0,K1,..."
 * (rank r runs the next Kr devices); NULL or "" brings back the default, devices split as evenly
 * as the count allows, lower ranks first (device d on rank d * ranks / devices). A runtime whose
 * device count the spread does not cover exactly, or that leaves a rank without devices, is
 * refused when it is created. */
brg_status brg_ranks_set_devices_per_rank(const char *spec);
/* A rank file (docs/scale-out.md): one line per rank, "rank R: D D ...", the devices that rank
 * runs, in any order (ranges 4-7 too; # starts a comment). It is read and checked now (every rank
 * from 0 up has a line with a device, every device from 0 up is on one rank, device 0 on rank 0:
 * errors name the line) and, under mpirun, places the devices of every runtime created after, in
 * place of the devices-per-rank spread; a runtime whose device count, or a run whose rank count,
 * is not the file's is refused. NULL forgets it. */
brg_status brg_ranks_set_rank_file(const char *path);
/* Seconds a rank waits for a message from another before it gives up and stops the run, naming
 * what it waited for (default 300; 0 waits for ever). */
void brg_ranks_set_timeout(double seconds);
double brg_ranks_timeout(void);
/* Which rank runs each of the n devices of a runtime (device_rank[n]). */
brg_status brg_ranks_layout(int n_devices, int *device_rank);

/* On ranks other than 0: stdout and stderr go to /dev/null (the host speaks for the run);
 * brg_ranks_finish still prints such a rank's own failure. */
void brg_ranks_quiet_followers(void);
/* The end of the process (`what`: the command). Every rank tells the others how it ends: when all
 * end alike (all well, or all failed, as a failure on one device stops every rank), MPI ends
 * normally and each exits with its status; a rank that fails alone prints its last error (a quiet
 * one too: "brigade CMD (rank R): ...") and ends every rank at once with MPI_Abort(exit_status),
 * whose status mpirun returns. Returns exit_status; does nothing without MPI. */
int brg_ranks_finish(int exit_status, const char *what);

#ifdef __cplusplus
}
#endif
#endif
