/* A fixed set of worker threads running one job at a time (thread_pool.h). A job is announced by
 * bumping a generation number under the lock; each worker runs it once and the last to finish
 * wakes the waiter.
 *
 * Both sides look for their event a little while before they sleep: a sleeping thread woken
 * through the kernel costs tens of microseconds (a device's team ran an empty job in 67 us a
 * round trip on a 2-core VM, 1.3 with the spin), and a decode step wakes its team about a hundred
 * times. The look is bounded (SPIN_NS), so an idle pool still sleeps, and a thread that shares
 * its core with others gives the core back soon. */
#include "core/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long a worker looks for the next job, and a waiter for the job's end, before sleeping. */
#define SPIN_NS 50000

typedef struct worker {
    brg_pool *pool;
    int index;
    pthread_t thread;
} worker;

struct brg_pool {
    int n;
    worker *workers;
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    _Atomic uint64_t generation; /* bumped by each launch (under the lock) */
    atomic_int pending;          /* workers still on the current job (changed under the lock) */
    bool quit;
    brg_pool_fn fn;
    void *ctx;
};

static atomic_long threads_started;

long brg_pool_threads_started(void) { return atomic_load(&threads_started); }

static int64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether `done(arg)` became true within SPIN_NS (the clock read every 64 looks). */
static bool spin_until(bool (*done)(const brg_pool *, uint64_t), const brg_pool *p, uint64_t arg) {
    const int64_t end = monotonic_ns() + SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (done(p, arg)) return true;
        if (i % 64 == 0 && monotonic_ns() > end) return false;
        CPU_RELAX();
    }
}

static bool job_after(const brg_pool *p, uint64_t seen) {
    return atomic_load_explicit(&p->generation, memory_order_acquire) != seen;
}

static bool job_done(const brg_pool *p, uint64_t unused) {
    (void)unused;
    return atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
}

static void *worker_main(void *p) {
    worker *w = p;
    brg_pool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        spin_until(job_after, pool, seen);
        pthread_mutex_lock(&pool->lock);
        while (pool->generation == seen && !pool->quit) pthread_cond_wait(&pool->go, &pool->lock);
        if (pool->generation == seen) { /* quit, and no job left to run */
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        seen = pool->generation;
        const brg_pool_fn fn = pool->fn;
        void *ctx = pool->ctx;
        pthread_mutex_unlock(&pool->lock);
        fn(ctx, w->index, pool->n);
        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_broadcast(&pool->done);
        pthread_mutex_unlock(&pool->lock);
    }
}

/* Stops and joins the first `started` workers. */
static void stop(brg_pool *p, int started) {
    brg_pool_wait(p);
    pthread_mutex_lock(&p->lock);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < started; i++) pthread_join(p->workers[i].thread, NULL);
}

static void release(brg_pool *p) {
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p);
}

brg_status brg_pool_create(int workers, const char *what, brg_pool **out) {
    *out = NULL;
    if (workers < 1) return brg_error(BRG_ERR_INVALID_ARG, "%s: a pool of %d threads", what, workers);
    brg_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc((size_t)workers, sizeof *p->workers))) {
        free(p);
        return brg_error(BRG_ERR_OOM, "cannot allocate the threads of %s", what);
    }
    p->n = workers;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < workers; i++) {
        p->workers[i] = (worker){p, i, 0};
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
            stop(p, i);
            release(p);
            return brg_error(BRG_ERR_INTERNAL, "cannot start thread %d of %d of %s", i + 1, workers, what);
        }
        atomic_fetch_add(&threads_started, 1);
    }
    *out = p;
    return BRG_OK;
}

void brg_pool_launch(brg_pool *p, brg_pool_fn fn, void *ctx) {
    pthread_mutex_lock(&p->lock);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->lock); /* one job at a time */
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->lock);
}

void brg_pool_wait(brg_pool *p) {
    if (spin_until(job_done, p, 0)) return;
    pthread_mutex_lock(&p->lock);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void brg_pool_run(brg_pool *p, brg_pool_fn fn, void *ctx) {
    brg_pool_launch(p, fn, ctx);
    brg_pool_wait(p);
}

void brg_pool_destroy(brg_pool *p) {
    if (!p) return;
    stop(p, p->n);
    release(p);
}

int brg_pool_size(const brg_pool *p) { return p->n; }
