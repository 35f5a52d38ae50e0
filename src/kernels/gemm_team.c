/* Intra-op threads: a device may own a small team of helper threads; while the team is bound to
 * the device's thread, each large GEMM is split by rows or by columns of C, one slice per
 * thread. Every element of C is still computed by one thread with the same loop over K, so
 * results do not depend on the team size. Threads without a bound team (the default) compute
 * alone. */
#include <stdlib.h>

#include "brigade/precision.h"
#include "brigade/status.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

typedef struct gemm_job {
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int64_t lda, ldb, ldc;
} gemm_job;

/* What the team's helpers run: slice `index + 1` of n of fn(ctx, i, n) (the caller runs slice 0). */
typedef struct team_job {
    brg_team_fn fn;
    void *ctx;
    int n;
    brg_arena *scratch_arena; /* the caller's: the helpers' scratch counts against it too */
    brg_dtype compute;        /* the caller's product precision, which the helpers' products keep */
} team_job;

/* A team of n: the thread it is bound to and n - 1 helpers from a pool. */
struct brg_gemm_team {
    int n;
    brg_pool *helpers;
};

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

/* Columns of C for slice i of n, in whole units of BRG_TEAM_COLUMN_UNIT. */
static void gemm_column_slice(void *ctx, int i, int n) {
    const gemm_job *j = ctx;
    int64_t first, last;
    brg_team_slice(j->N, BRG_TEAM_COLUMN_UNIT, i, n, &first, &last);
    if (last <= first) return;
    const float *B = j->tb ? j->B + first * j->ldb : j->B + first;
    brg_gemm(j->ta, j->tb, j->M, last - first, j->K, j->alpha, j->A, j->lda, B, j->ldb, j->beta, j->C + first, j->ldc);
}

bool brg_team_split_columns(int64_t M, int64_t N, int n) {
    return N > M && N >= (int64_t)n * BRG_TEAM_COLUMN_UNIT;
}

static void helper_slice(void *p, int helper, int helpers) {
    (void)helpers;
    const team_job *job = p;
    brg_scratch_bind(job->scratch_arena);
    brg_compute_dtype_set(job->compute);
    job->fn(job->ctx, helper + 1, job->n);
}

brg_status brg_gemm_team_create(int threads, brg_gemm_team **out) {
    *out = NULL;
    if (threads < 1) return brg_error(BRG_ERR_INVALID_ARG, "a device needs at least one thread (got %d)", threads);
    brg_gemm_team *t = calloc(1, sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "cannot allocate a thread team");
    t->n = threads;
    if (threads > 1) {
        const brg_status st = brg_pool_create(threads - 1, "a device's intra-op team", &t->helpers);
        if (st != BRG_OK) {
            free(t);
            return st;
        }
    }
    *out = t;
    return BRG_OK;
}

void brg_gemm_team_destroy(brg_gemm_team *t) {
    if (!t) return;
    brg_pool_destroy(t->helpers);
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
    team_job job = {fn, ctx, t->n, brg_scratch_bound(), brg_compute_dtype()};
    brg_pool_launch(t->helpers, helper_slice, &job);
    fn(ctx, 0, t->n);
    brg_pool_wait(t->helpers);
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
    if (!t || t->n < 2 || M * N * K < MIN_WORK) return false;
    const bool by_columns = brg_team_split_columns(M, N, t->n);
    if (!by_columns && M < 2 * t->n) return false;
    gemm_job job = {ta, tb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc};
    return brg_team_run(by_columns ? gemm_column_slice : gemm_slice, &job);
}
