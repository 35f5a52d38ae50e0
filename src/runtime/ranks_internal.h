/* Processes, inside the library: the MPI side (transport_mpi.c, built with MPI only) and what the
 * runtime asks of ranks.c. */
#ifndef BRIGADE_RANKS_INTERNAL_H
#define BRIGADE_RANKS_INTERNAL_H

#include "brigade/ranks.h"
#include "transport.h"

/* The transport a new runtime gets: the threads one in one process, the MPI one across ranks. */
transport_factory ranks_transport_factory(void);

#ifdef BRIGADE_HAVE_MPI
/* MPI_Init_thread and the process's link (its communication thread); the rank and world size. */
brg_status ranks_mpi_start(int *rank, int *size);
/* Tells every other rank how this one ends and waits for their word: true when all end alike
 * (all well, or all failed). */
bool ranks_mpi_settle(int exit_status);
/* Together: MPI_Finalize once the link has sent what it holds; else MPI_Abort(exit_status), which
 * ends every rank. */
void ranks_mpi_stop(bool together, int exit_status);
/* A ranks transport over the MPI link, with brg_ranks_layout's spread and brg_ranks_timeout. */
brg_status transport_mpi_create(int n_devices, transport **out);
#endif

#endif
