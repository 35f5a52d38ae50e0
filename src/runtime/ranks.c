/* The process's place among the ranks mpirun started, how devices spread over them, and the end
 * of the process (brigade/ranks.h). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_file.h"
#include "ranks_internal.h"

enum { MAX_COUNTS = 4096 };

static struct {
    int rank, size;
    bool mpi;       /* MPI was started: it must be ended */
    int n_counts;   /* devices per rank: 0 the default spread, 1 the same for every rank, else per rank */
    int *counts;
    rank_file *rank_file; /* --rank-file: wins over the counts */
    double timeout;
    int error_fd;   /* a quiet rank's real stderr, or -1 */
} P = {0, 1, false, 0, NULL, NULL, 300, -1};

/* The first of the variables set, as a count >= 0 (-1: none set or not a number). */
static int env_int(const char *a, const char *b) {
    const char *v = getenv(a);
    if (!v) v = getenv(b);
    if (!v || !*v) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1 << 24 ? -1 : (int)n;
}

brg_status brg_ranks_init(void) {
    const int size = env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"), rank = env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK");
    if (size < 0) return BRG_OK; /* not started by mpirun: one process */
#ifdef BRIGADE_HAVE_MPI
    (void)rank;
    BRG_TRY(ranks_mpi_start(&P.rank, &P.size));
    P.mpi = true;
    return BRG_OK;
#else
    if (size <= 1) return BRG_OK;
    return brg_error(BRG_ERR_UNSUPPORTED,
                     "rank %d: mpirun started %d ranks, but this brigade was built without MPI: install Open MPI "
                     "(scripts/deps.sh) and rebuild (cmake finds it with pkg-config), or run without mpirun",
                     rank, size);
#endif
}

int brg_ranks_rank(void) { return P.rank; }
int brg_ranks_size(void) { return P.size; }

const char *brg_ranks_mpi_version(void) {
#ifdef BRIGADE_HAVE_MPI
    return "Open MPI " BRIGADE_MPI_VERSION;
#else
    return NULL;
#endif
}

brg_status brg_ranks_set_devices_per_rank(const char *spec) {
    int counts[MAX_COUNTS], n = 0;
    for (const char *p = spec; p && *p; n++) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > 1 << 20 || (*end && *end != ',') || n == MAX_COUNTS)
            return brg_error(BRG_ERR_INVALID_ARG,
                             "--devices-per-rank '%s': give a count of devices per rank (2) or one per rank (2,1,1)",
                             spec);
        counts[n] = (int)k;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return brg_error(BRG_ERR_INVALID_ARG, "--devices-per-rank '%s' ends with a comma", spec);
    }
    int *kept = n ? malloc((size_t)n * sizeof *kept) : NULL;
    if (n && !kept) return brg_error(BRG_ERR_OOM, "cannot keep --devices-per-rank");
    if (n) memcpy(kept, counts, (size_t)n * sizeof *kept);
    free(P.counts);
    P.counts = kept;
    P.n_counts = n;
    return BRG_OK;
}

brg_status brg_ranks_set_rank_file(const char *path) {
    rank_file *f = NULL;
    if (path) BRG_TRY(rank_file_read(path, &f));
    rank_file_free(P.rank_file);
    P.rank_file = f;
    return BRG_OK;
}

void brg_ranks_set_timeout(double seconds) { P.timeout = seconds > 0 ? seconds : 0; }
double brg_ranks_timeout(void) { return P.timeout; }

brg_status brg_ranks_layout(int n_devices, int *device_rank) {
    const int R = P.size;
    if (R <= 1 || n_devices < 1) {
        for (int d = 0; d < n_devices; d++) device_rank[d] = 0;
        return BRG_OK;
    }
    if (P.rank_file) return rank_file_layout(P.rank_file, R, n_devices, device_rank);
    if (P.n_counts == 0) {
        if (n_devices < R)
            return brg_error(BRG_ERR_INVALID_ARG,
                             "%d ranks for %d devices (replication_factor x ipus_per_replica): every rank needs a "
                             "device; start at most %d ranks",
                             R, n_devices, n_devices);
        for (int d = 0; d < n_devices; d++) device_rank[d] = (int)((long long)d * R / n_devices);
        return BRG_OK;
    }
    if (P.n_counts == 1) {
        const int k = P.counts[0], used = (n_devices + k - 1) / k;
        if (used != R)
            return brg_error(BRG_ERR_INVALID_ARG,
                             "--devices-per-rank %d spreads the %d devices over %d ranks, and mpirun started %d", k,
                             n_devices, used, R);
        for (int d = 0; d < n_devices; d++) device_rank[d] = d / k;
        return BRG_OK;
    }
    int sum = 0;
    for (int r = 0; r < P.n_counts; r++) sum += P.counts[r];
    if (P.n_counts != R || sum != n_devices)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "--devices-per-rank lists %d ranks with %d devices; the run has %d ranks and %d devices",
                         P.n_counts, sum, R, n_devices);
    for (int r = 0, d = 0; r < R; r++)
        for (int i = 0; i < P.counts[r]; i++) device_rank[d++] = r;
    return BRG_OK;
}

transport_factory ranks_transport_factory(void) {
#ifdef BRIGADE_HAVE_MPI
    if (P.size > 1) return transport_mpi_create;
#endif
    return transport_threads_create;
}

void brg_ranks_quiet_followers(void) {
    if (P.rank == 0 || P.error_fd >= 0) return;
    fflush(stdout);
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return;
    P.error_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    close(null);
}

int brg_ranks_finish(int exit_status, const char *what) {
    bool together = true; /* every rank ends as this one does: the host has said it all */
#ifdef BRIGADE_HAVE_MPI
    /* mpirun ends the other ranks with SIGTERM as soon as one exits non-zero. The command's work is
     * over (its checkpoint, if any, written): a signal now has nothing to save, so it takes the
     * default action instead of the trainer's "stopping after this step" handler. */
    if (P.mpi) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
    }
    if (P.mpi) together = ranks_mpi_settle(exit_status);
#endif
    if (exit_status != 0 && P.error_fd >= 0 && !together) {
        const char *why = brg_last_error();
        if (why && *why) dprintf(P.error_fd, "brigade %s (rank %d): %s\n", what ? what : "", P.rank, why);
        else dprintf(P.error_fd, "brigade %s (rank %d): failed (exit status %d)\n", what ? what : "", P.rank, exit_status);
    }
#ifdef BRIGADE_HAVE_MPI
    if (P.mpi) {
        P.mpi = false;
        fflush(stdout);
        fflush(stderr);
        ranks_mpi_stop(together, exit_status);
    }
#endif
    return exit_status;
}
