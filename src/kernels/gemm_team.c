/* Intra-op threads: a device may own a small team of helper threads; while the team is bound to
 * the device's thread, each large GEMM is split by rows of C, one slice per thread. Every
 * element of C is still computed by one thread with the same loop over K, so results do not
 * depend on the team size. Threads without a bound team (the default) compute alone. */
#include <pthread.h>
#include <stdlib.h>

#include "brigade/precision.h"
#include "brigade/status.h"
#include "kernels/kernels.h"

typedef struct gemm_job {
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int64_t lda, ldb, ldc;
} gemm_job;

/* What the team runs: slice i of n of fn(ctx, i, n). */
typedef struct team_job {
    brg_team_fn fn;
    void *ctx;
    brg_arena *scratch_arena; /* the caller's: the workers' scratch counts against it too */
    brg_dtype compute;        /* the caller's product precision, which the workers' products keep */
} team_job;

struct brg_gemm_team {
    int n;
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    uint64_t generation;
    int pending;
    bool quit;
    team_job job;
};

typedef struct worker_arg {
    brg_gemm_team *team;
    int index;
} worker_arg;

static _Thread_local brg_gemm_team *bound;

/* Rows [first, last) of C for slice i of n. */
static void gemm_slice(void *ctx, int i, int n) {
    const gemm_job *j = ctx;
    int64_t first = j->M * i / n, last = j->M * (i + 1) / n;
    if (last <= first) return;
    const float *A = j->ta ? j->A + first : j->A + first * j->lda;
    brg_gemm(j->ta, j->tb, last - first, j->N, j->K, j->alpha, A, j->lda, j->B, j->ldb, j->beta, j->C + first * j->ldc,
             j->ldc);
}

static void *worker_main(void *p) {
    worker_arg a = *(worker_arg *)p;
    free(p);
    brg_gemm_team *t = a.team;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        while (t->generation == seen && !t->quit) pthread_cond_wait(&t->go, &t->lock);
        if (t->quit) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        seen = t->generation;
        team_job job = t->job;
        pthread_mutex_unlock(&t->lock);
        brg_scratch_bind(job.scratch_arena);
        brg_compute_dtype_set(job.compute);
        job.fn(job.ctx, a.index, t->n);
        pthread_mutex_lock(&t->lock);
        if (--t->pending == 0) pthread_cond_signal(&t->done);
        pthread_mutex_unlock(&t->lock);
    }
}

brg_status brg_gemm_team_create(int threads, brg_gemm_team **out) {
    *out = NULL;
    if (threads < 1) return brg_error(BRG_ERR_INVALID_ARG, "a device needs at least one thread (got %d)", threads);
    brg_gemm_team *t = calloc(1, sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "cannot allocate a thread team");
    t->n = threads;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    t->workers = calloc((size_t)threads, sizeof *t->workers);
    for (int i = 1; t->workers && i < threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a || (*a = (worker_arg){t, i}, pthread_create(&t->workers[i], NULL, worker_main, a)) != 0) {
            free(a);
            t->n = i; /* the threads started so far are joined by destroy */
            brg_gemm_team_destroy(t);
            return brg_error(BRG_ERR_INTERNAL, "cannot start intra-op thread %d of %d", i, threads);
        }
    }
    if (!t->workers) {
        brg_gemm_team_destroy(t);
        return brg_error(BRG_ERR_OOM, "cannot allocate a thread team");
    }
    *out = t;
    return BRG_OK;
}

void brg_gemm_team_destroy(brg_gemm_team *t) {
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    t->quit = true;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->lock);
    for (int i = 1; t->workers && i < t->n; i++) pthread_join(t->workers[i], NULL);
    free(t->workers);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done);
    if (bound == t) bound = NULL;
    free(t);
}

void brg_gemm_team_bind(brg_gemm_team *t) { bound = t; }

/* Small products are not worth waking a team for. */
#define MIN_WORK (1 << 20)

int brg_team_size(void) { return bound ? bound->n : 1; }

bool brg_team_run(brg_team_fn fn, void *ctx) {
    brg_gemm_team *t = bound;
    if (!t || t->n < 2) return false;
    bound = NULL; /* the slices below run alone on their threads */
    pthread_mutex_lock(&t->lock);
    t->job = (team_job){fn, ctx, brg_scratch_bound(), brg_compute_dtype()};
    t->pending = t->n - 1;
    t->generation++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->lock);
    fn(ctx, 0, t->n);
    pthread_mutex_lock(&t->lock);
    while (t->pending > 0) pthread_cond_wait(&t->done, &t->lock);
    pthread_mutex_unlock(&t->lock);
    bound = t;
    return true;
}

void brg_team_split(brg_team_fn fn, void *ctx, int64_t work) {
    if (work >= BRG_TEAM_MIN_ELEMENTS && brg_team_run(fn, ctx)) return;
    fn(ctx, 0, 1);
}

void brg_team_slice(int64_t count, int64_t unit, int i, int n, int64_t *first, int64_t *last) {
    const int64_t units = (count + unit - 1) / unit;
    *first = units * i / n * unit;
    *last = i + 1 == n ? count : units * (i + 1) / n * unit;
    if (*first > count) *first = count;
    if (*last > count) *last = count;
}

bool brg_gemm_team_run(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    brg_gemm_team *t = bound;
    if (!t || t->n < 2 || M < 2 * t->n || M * N * K < MIN_WORK) return false;
    gemm_job job = {ta, tb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc};
    return brg_team_run(gemm_slice, &job);
}
