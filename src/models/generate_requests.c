/* brg_generate_requests: several requests generated at once over a pipeline of stage threads per
 * replica. A few request threads per replica take the requests in order; each runs brg_generate's
 * loop with its decoder's blocks routed to the stages, so the stages work on different requests'
 * steps at the same time. Over a ranks transport (brg_generate_requests_over_ranks) the stages are
 * spread over the ranks (decode_ranks.h): every rank takes every request, computes its stages'
 * part and ends with every output. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/generate.h"
#include "core/thread_pool.h"
#include "models/decode_ranks.h"
#include "models/decode_stages.h"
#include "models/generate_internal.h"

/* Requests in flight per stage: two keep a stage fed while the other waits on its neighbour. */
#define IN_FLIGHT_PER_STAGE 2

typedef struct shared {
    brg_model *m;
    const brg_generation_config *cfg;
    const brg_prompts *requests;
    int64_t n;
    brg_generation *outs;
    decode_route *routes; /* per replica */
    const dec_half_set *half; /* the weights in cfg->compute_dtype for every request's decoder */
    int replicas;
    pthread_mutex_t lock;
    int64_t failed;       /* the first request that failed, or -1 */
    brg_status status;
    char error[1024];
} shared;

typedef struct worker {
    shared *s;
    int replica;
    atomic_llong *next; /* the replica's next request, counted in its own requests */
} worker;

static void record_failure(shared *s, int64_t i, brg_status st) {
    pthread_mutex_lock(&s->lock);
    if (s->failed < 0 || i < s->failed) {
        s->failed = i;
        s->status = st;
        snprintf(s->error, sizeof s->error, "%s", brg_last_error());
    }
    pthread_mutex_unlock(&s->lock);
}

/* Request thread i of a pool: takes its replica's requests until none is left. */
static void worker_main(void *p, int index, int n) {
    (void)n;
    worker *w = &((worker *)p)[index];
    shared *s = w->s;
    for (;;) {
        const int64_t k = atomic_fetch_add(w->next, 1);
        const int64_t i = k * s->replicas + w->replica; /* request i goes to replica i % replicas */
        if (i >= s->n) return;
        brg_clear_error();
        decode_route route = s->routes[w->replica];
        route.request = (int)i; /* its messages' tag across ranks */
        const brg_status st = gen_generate_routed(s->m, s->cfg, &s->requests[i], &route, s->half, &s->outs[i]);
        if (st != BRG_OK) {
            record_failure(s, i, st);
            /* A failure before any stage ran (the others would wait for its messages). */
            if (route.ranks) {
                char why[1024];
                snprintf(why, sizeof why, "request %lld: %s", (long long)i, brg_last_error());
                decode_ranks_abort(route.ranks, decode_ranks_here(route.ranks), st, why);
            }
        }
    }
}

static brg_status check_placement(const brg_model *m, const brg_generate_placement *pl) {
    if (pl->stages < 1 || pl->replicas < 1 || pl->stages > 256 || pl->replicas > 256)
        return brg_error(BRG_ERR_INVALID_ARG, "a generate placement of %d stages x %d replicas", pl->stages,
                         pl->replicas);
    for (int b = 0; pl->block_stage && b < m->n_blocks; b++) {
        const int st = pl->block_stage[b];
        if (st < 0 || st >= pl->stages || (b > 0 && st < pl->block_stage[b - 1]))
            return brg_error(BRG_ERR_INVALID_ARG,
                             "block %d is placed on stage %d: stages must rise from 0 to %d in block order", b, st,
                             pl->stages - 1);
    }
    return BRG_OK;
}

/* Runs the replicas' request threads until every request is done. */
static void run_all(shared *s, const brg_generate_placement *pl, worker *workers, int per_replica,
                    atomic_llong *next) {
    const int n = pl->replicas * per_replica;
    for (int i = 0; i < n; i++)
        workers[i] = (worker){.s = s, .replica = i / per_replica, .next = &next[i / per_replica]};
    brg_pool *threads = NULL;
    if (brg_pool_create(n, "generate's request threads", &threads) == BRG_OK) {
        brg_pool_run(threads, worker_main, workers);
        brg_pool_destroy(threads);
    } else { /* no threads: this one works through the requests itself */
        brg_clear_error();
        for (int i = 0; i < n; i++) worker_main(workers, i, n);
    }
}

brg_status brg_generate_requests(brg_model *model, const brg_generation_config *cfg, const brg_prompts *requests,
                                 int64_t n, const brg_generate_placement *placement, brg_generation *outs) {
    return gen_generate_requests_over(model, cfg, requests, n, placement, NULL, 0, outs);
}

brg_status gen_generate_requests_over(brg_model *model, const brg_generation_config *cfg, const brg_prompts *requests,
                                      int64_t n, const brg_generate_placement *placement, transport *t,
                                      double timeout, brg_generation *outs) {
    for (int64_t i = 0; i < n; i++) memset(&outs[i], 0, sizeof outs[i]);
    if (n < 1) return brg_error(BRG_ERR_INVALID_ARG, "no requests to generate for");
    const brg_generate_placement one = {1, NULL, 1}, *pl = placement ? placement : &one;
    BRG_TRY(check_placement(model, pl));
    int *unit_stage = calloc((size_t)model->n_blocks, sizeof *unit_stage);
    decode_route *routes = calloc((size_t)pl->replicas, sizeof *routes);
    const int per_replica = pl->stages * IN_FLIGHT_PER_STAGE;
    worker *workers = calloc((size_t)(pl->replicas * per_replica), sizeof *workers);
    atomic_llong *next = calloc((size_t)pl->replicas, sizeof *next);
    shared s = {.m = model, .cfg = cfg, .requests = requests, .n = n, .outs = outs, .routes = routes,
                .replicas = pl->replicas, .failed = -1};
    brg_status st = unit_stage && routes && workers && next ? BRG_OK
                                                            : brg_error(BRG_ERR_OOM, "cannot allocate the requests");
    for (int b = 0; st == BRG_OK && pl->block_stage && b < model->n_blocks; b++) unit_stage[b] = pl->block_stage[b];
    decode_ranks *ranks = NULL;
    dec_half_set *half = NULL;
    if (st == BRG_OK) st = dec_half_set_create(model, cfg->compute_dtype, &half);
    s.half = half;
    if (st == BRG_OK) st = decode_ranks_create(t, timeout, pl->replicas, pl->stages, &ranks);
    for (int r = 0; st == BRG_OK && r < pl->replicas; r++) {
        routes[r] = (decode_route){.unit_stage = unit_stage, .ranks = ranks, .replica = r};
        st = decode_stages_create(pl->stages, &routes[r].stages);
    }
    if (st == BRG_OK) {
        pthread_mutex_init(&s.lock, NULL);
        run_all(&s, pl, workers, per_replica, next);
        pthread_mutex_destroy(&s.lock);
        /* Across ranks the first failure anywhere is the cause (the others stopped for it). */
        const brg_status across = ranks ? decode_ranks_failure(ranks) : BRG_OK;
        if (across != BRG_OK) st = across;
        else if (s.failed >= 0) st = brg_error(s.status, "request %lld: %s", (long long)s.failed, s.error);
    }
    for (int r = 0; routes && r < pl->replicas; r++) decode_stages_destroy(routes[r].stages);
    decode_ranks_destroy(ranks);
    dec_half_set_destroy(half);
    if (st != BRG_OK)
        for (int64_t i = 0; i < n; i++) brg_generation_free(&outs[i]);
    free(unit_stage);
    free(routes);
    free(workers);
    free(next);
    return st;
}
