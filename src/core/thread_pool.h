/* brigade's one kind of worker thread: a pool of N threads that run one job at a time, the job
 * called on every worker with its index. Everything that runs beside the caller runs on a pool:
 * the runtime's devices, each device's team (split products, element-wise ops, optimizer
 * updates), the decode stages and request workers of generation, the data loader's workers, the
 * executable cache's checksum threads and the MPI link. A pool's threads live as long as the pool,
 * so thread-local state (a device's arena, team, pinning) stays with its owner. */
#ifndef BRIGADE_CORE_THREAD_POOL_H
#define BRIGADE_CORE_THREAD_POOL_H

#include "brigade/status.h"

typedef struct brg_pool brg_pool;

/* One job: called once on each worker, worker in [0, workers). */
typedef void (*brg_pool_fn)(void *ctx, int worker, int workers);

/* Starts `workers` (>= 1) threads; `what` names them in the error when one cannot start (the
 * ones started are stopped again, nothing is left behind). */
brg_status brg_pool_create(int workers, const char *what, brg_pool **out);

/* Hands fn to every worker and returns at once; the caller may work beside them. One job at a
 * time: brg_pool_wait before the next launch. */
void brg_pool_launch(brg_pool *p, brg_pool_fn fn, void *ctx);

/* Returns when every worker has finished the launched job (at once when none is running). */
void brg_pool_wait(brg_pool *p);

/* launch, then wait. */
void brg_pool_run(brg_pool *p, brg_pool_fn fn, void *ctx);

/* Waits for the running job, then stops and joins the threads. NULL is allowed. */
void brg_pool_destroy(brg_pool *p);

int brg_pool_size(const brg_pool *p);

/* Threads brigade's pools have started in this process, for tests that count them. */
long brg_pool_threads_started(void);

#endif
