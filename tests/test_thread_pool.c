/* The one thread pool (core/thread_pool.h): each job runs once on every worker, launch returns
 * before the job ends, a worker keeps its thread (and thread-local state) from job to job, and
 * the runtime's devices and teams, the data loader and generate's stages and request threads all
 * take their threads from pools: a process running them has no other threads. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "brigade/data_loader.h"
#include "brigade/generate.h"
#include "brigade/runtime.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "test_util.h"
#include "trainer_util.h"

enum { WORKERS = 3, JOBS = 2000 };

typedef struct counts {
    atomic_int runs[WORKERS];
    atomic_int wrong_n;
} counts;

static void count_job(void *p, int i, int n) {
    counts *c = p;
    if (n != WORKERS) atomic_fetch_add(&c->wrong_n, 1);
    if (i >= 0 && i < WORKERS) atomic_fetch_add(&c->runs[i], 1);
}

static void test_each_worker_once_per_job(void) {
    brg_pool *p = NULL;
    CHECK_OK(brg_pool_create(WORKERS, "the test's pool", &p));
    if (!p) return;
    CHECK(brg_pool_size(p) == WORKERS);
    counts c = {0};
    for (int j = 0; j < JOBS; j++) {
        brg_pool_run(p, count_job, &c);
        for (int i = 0; i < WORKERS; i++)
            if (atomic_load(&c.runs[i]) != j + 1) {
                CHECK_MSG(false, "after job %d worker %d ran %d times", j + 1, i, atomic_load(&c.runs[i]));
                j = JOBS;
                break;
            }
    }
    /* Launches back to back without waiting: each waits for the job before it. */
    for (int j = 0; j < 100; j++) brg_pool_launch(p, count_job, &c);
    brg_pool_wait(p);
    for (int i = 0; i < WORKERS; i++) CHECK(atomic_load(&c.runs[i]) == JOBS + 100);
    CHECK(atomic_load(&c.wrong_n) == 0);
    brg_pool_wait(p); /* nothing running: returns at once */
    brg_pool_destroy(p);
    brg_pool_destroy(NULL);
}

static void pause_us(long us) {
    const struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

static void slow_count_job(void *p, int i, int n) {
    pause_us(400);
    count_job(p, i, n);
}

/* Workers and waiters look for their event for a while (50 us) before they sleep: jobs launched
 * after longer idle gaps must still reach sleeping workers, and a wait for a job longer than the
 * look must still return only once every worker is done. */
static void test_jobs_after_sleeping(void) {
    brg_pool *p = NULL;
    CHECK_OK(brg_pool_create(WORKERS, "the test's pool", &p));
    if (!p) return;
    counts c = {0};
    for (int j = 0; j < 20; j++) {
        pause_us(j % 2 ? 300 : 5); /* past the look, and within it */
        brg_pool_run(p, j % 4 < 2 ? count_job : slow_count_job, &c);
        for (int i = 0; i < WORKERS; i++)
            if (atomic_load(&c.runs[i]) != j + 1) {
                CHECK_MSG(false, "after job %d worker %d ran %d times", j + 1, i, atomic_load(&c.runs[i]));
                j = 20;
                break;
            }
    }
    CHECK(atomic_load(&c.wrong_n) == 0);
    brg_pool_destroy(p);
}

/* A job that holds its workers until the caller lets them go. */
typedef struct gate {
    atomic_int entered, open, left;
} gate;

static void gated_job(void *p, int i, int n) {
    (void)i, (void)n;
    gate *g = p;
    atomic_fetch_add(&g->entered, 1);
    while (!atomic_load(&g->open)) sched_yield();
    atomic_fetch_add(&g->left, 1);
}

static void test_launch_returns_before_the_job_ends(void) {
    brg_pool *p = NULL;
    CHECK_OK(brg_pool_create(2, "the test's pool", &p));
    if (!p) return;
    gate g = {0};
    brg_pool_launch(p, gated_job, &g);
    while (atomic_load(&g.entered) < 2) sched_yield(); /* both workers are inside, the caller is free */
    CHECK(atomic_load(&g.left) == 0);
    atomic_store(&g.open, 1);
    brg_pool_wait(p);
    CHECK(atomic_load(&g.left) == 2);
    /* Destroying a pool whose job runs waits for it. */
    gate h = {0};
    brg_pool_launch(p, gated_job, &h);
    while (atomic_load(&h.entered) < 2) sched_yield();
    atomic_store(&h.open, 1);
    brg_pool_destroy(p);
    CHECK(atomic_load(&h.left) == 2);
}

/* Each worker stays one thread: the runtime binds a device's arena and team to it once. */
static _Thread_local int set_by_first_job = -1;
typedef struct identities {
    pthread_t first[WORKERS];
    int mismatched;
    pthread_mutex_t lock;
} identities;

static void remember(void *p, int i, int n) {
    (void)n;
    identities *id = p;
    id->first[i] = pthread_self();
    set_by_first_job = i;
}

static void compare(void *p, int i, int n) {
    (void)n;
    identities *id = p;
    if (!pthread_equal(id->first[i], pthread_self()) || set_by_first_job != i) {
        pthread_mutex_lock(&id->lock);
        id->mismatched++;
        pthread_mutex_unlock(&id->lock);
    }
}

static void test_workers_keep_their_threads(void) {
    brg_pool *p = NULL;
    CHECK_OK(brg_pool_create(WORKERS, "the test's pool", &p));
    if (!p) return;
    identities id = {.lock = PTHREAD_MUTEX_INITIALIZER};
    brg_pool_run(p, remember, &id);
    for (int j = 0; j < 50; j++) brg_pool_run(p, compare, &id);
    CHECK(id.mismatched == 0);
    brg_pool_destroy(p);
}

static void test_bad_size(void) {
    brg_pool *p = (brg_pool *)1;
    CHECK_ERR(brg_pool_create(0, "the test's pool", &p), BRG_ERR_INVALID_ARG, "the test's pool: a pool of 0 threads");
    CHECK(p == NULL);
}

/* The threads this process has now, the main one included. */
static int os_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void test_runtime_threads_come_from_pools(void) {
    /* A product first: where it goes to OpenBLAS (CPUs without AVX2), loading the library starts
     * OpenBLAS's own threads, which are not brigade's and must not be counted below. */
    float a[64 * 64] = {0}, c[64 * 64];
    brg_gemm(false, false, 64, 64, 64, 1.0f, a, 64, a, 64, 0.0f, c, 64);
    brg_model *m = tu_tiny_gpt2(32);
    if (!m) return;
    const int stage[] = {0, 0, 1, 1};
    CHECK(m->n_blocks == 4);
    const brg_runtime_options o = {.replicas = 2, .stages = 2, .block_stage = stage, .micro_batches = 2,
                                   .training = true, .intra_threads = 2};
    const long before = brg_pool_threads_started();
    const int os_before = os_threads();
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    /* 4 devices, each with one helper in its team. */
    CHECK_MSG(brg_pool_threads_started() - before == 8, "pools started %ld threads",
              brg_pool_threads_started() - before);
    CHECK_MSG(os_threads() - os_before == 8, "the runtime has %d threads beside the caller's",
              os_threads() - os_before);
    brg_runtime_destroy(rt);
    CHECK(os_threads() == os_before);

    brg_dataset *d = tu_token_rows(16, 8, 32, false);
    const brg_data_loader_options lo = {.replicas = 1, .accumulation = 1, .micro = 2, .workers = 2, .prefetch = 2,
                                        .first_step = 0, .end_step = 4};
    brg_data_loader *l = NULL;
    const long loader_before = brg_pool_threads_started();
    CHECK_OK(brg_data_loader_create(d, m, &lo, &l));
    CHECK(brg_pool_threads_started() - loader_before == 2);
    CHECK(os_threads() - os_before == 2);
    brg_data_loader_destroy(l);
    brg_dataset_free(d);

    /* 2 stages: a thread each, and 2 request threads per stage. */
    int32_t ids[2][3] = {{1, 2, 3}, {4, 5, 6}};
    const int32_t *rows[2] = {ids[0], ids[1]};
    int64_t lengths[2] = {3, 3};
    brg_prompts req[2] = {{.n = 1, .ids = &rows[0], .lengths = &lengths[0], .pad_id = -1},
                          {.n = 1, .ids = &rows[1], .lengths = &lengths[1], .pad_id = -1}};
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = 2, cfg.n_eos = 0;
    const brg_generate_placement pl = {2, stage, 1};
    brg_generation outs[2];
    const long gen_before = brg_pool_threads_started();
    CHECK_OK(brg_generate_requests(m, &cfg, req, 2, &pl, outs));
    CHECK_MSG(brg_pool_threads_started() - gen_before == 6, "generate started %ld threads",
              brg_pool_threads_started() - gen_before);
    for (int r = 0; r < 2; r++) brg_generation_free(&outs[r]);
    CHECK(os_threads() == os_before);
    brg_model_destroy(m);
}

int main(void) {
    test_each_worker_once_per_job();
    test_launch_returns_before_the_job_ends();
    test_jobs_after_sleeping();
    test_workers_keep_their_threads();
    test_bad_size();
    test_runtime_threads_come_from_pools();
    return test_finish();
}
