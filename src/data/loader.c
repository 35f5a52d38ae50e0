/* The host data loader (brigade/data_loader.h).
 *
 * With workers, the loader owns prefetch + 1 step batches ("slots"): step s always goes to slot
 * s % slots, so the slot the caller holds is never refilled under it and a worker can run at most
 * `prefetch` steps ahead. Workers claim steps in order from one counter; each has its own
 * brg_data_order (it caches an epoch's permutation, so it is not shareable) and fills its slot
 * outside the lock: brg_step_batch_fill only reads the dataset and the model. A failed fill is
 * kept with its slot, message included (errors are per thread), and repeated on the caller's
 * thread when the caller reaches that step; no worker claims a step after it. */
#include "brigade/data_loader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/trace.h"
#include "core/thread_pool.h"

enum { MESSAGE_CAPACITY = 1024 };

typedef enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY } slot_state;

typedef struct slot {
    brg_step_batch batch;
    slot_state state;
    int64_t step;
    brg_status status;
    char message[MESSAGE_CAPACITY];
} slot;

typedef struct worker {
    brg_data_loader *loader;
    brg_data_order order;
    int index;
} worker;

struct brg_data_loader {
    const brg_dataset *data;
    const brg_model *model;
    brg_data_loader_options o;
    int n_slots;
    slot *slots;
    worker *workers;
    brg_pool *threads;    /* thread i runs workers[i] */
    brg_data_order order; /* the caller's, without workers */
    pthread_mutex_t lock;
    pthread_cond_t ready; /* a slot was filled */
    pthread_cond_t freed; /* a slot was handed back, or the loader stops */
    int64_t next_claim;   /* the next step a worker takes */
    int64_t next_step;    /* the step the caller asks for next */
    int64_t held;         /* the step whose batch the caller holds; -1: none */
    bool stopping, failed;
    bool sync_ready;      /* a lock and conditions were made (destroy frees them) */
};

/* ---- workers ---- */

static bool claimable(const brg_data_loader *l) {
    return !l->failed && l->next_claim < l->o.end_step && l->slots[l->next_claim % l->n_slots].state == SLOT_FREE;
}

static void fill(worker *w, slot *s) {
    brg_data_loader *l = w->loader;
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    s->status = brg_step_batch_fill(&s->batch, l->data, &w->order, s->step, l->model);
    if (s->status != BRG_OK) snprintf(s->message, sizeof s->message, "%s", brg_last_error());
    if (t0) brg_trace_named("prepare step", t0, s->step + 1);
}

static void work(void *arg, int i, int n) {
    (void)n;
    worker *w = &((worker *)arg)[i];
    brg_data_loader *l = w->loader;
    char track[48];
    snprintf(track, sizeof track, "data loader %d", w->index);
    brg_trace_set_thread_name(track);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stopping && !claimable(l)) pthread_cond_wait(&l->freed, &l->lock);
        if (l->stopping) break;
        slot *s = &l->slots[l->next_claim % l->n_slots];
        s->state = SLOT_FILLING;
        s->step = l->next_claim++;
        pthread_mutex_unlock(&l->lock);
        fill(w, s);
        pthread_mutex_lock(&l->lock);
        s->state = SLOT_READY;
        if (s->status != BRG_OK) l->failed = true;
        pthread_cond_broadcast(&l->ready);
    }
    pthread_mutex_unlock(&l->lock);
}

/* ---- lifetime ---- */

static brg_status check_options(const brg_data_loader_options *o) {
    if (o->workers < 0 || o->workers > BRG_DATA_LOADER_MAX_WORKERS)
        return brg_error(BRG_ERR_INVALID_ARG, "dataloader workers %d is not in [0, %d]", o->workers,
                         BRG_DATA_LOADER_MAX_WORKERS);
    if (o->replicas < 1 || o->accumulation < 1 || o->micro < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "a step needs at least one replica, micro-batch and row");
    if (o->first_step < 0 || o->end_step < o->first_step)
        return brg_error(BRG_ERR_INVALID_ARG, "the loader's steps [%lld, %lld) are no range", (long long)o->first_step,
                         (long long)o->end_step);
    return BRG_OK;
}

static brg_status make_slots(brg_data_loader *l) {
    const brg_data_loader_options *o = &l->o;
    l->n_slots = o->workers > 0 ? (o->prefetch > 1 ? o->prefetch : 1) + 1 : 1;
    l->slots = calloc((size_t)l->n_slots, sizeof *l->slots);
    if (!l->slots) return brg_error(BRG_ERR_OOM, "cannot allocate the data loader");
    for (int i = 0; i < l->n_slots; i++)
        BRG_TRY(brg_step_batch_init(&l->slots[i].batch, l->data, o->replicas, o->accumulation, o->micro));
    return BRG_OK;
}

static brg_status make_sync(brg_data_loader *l) {
    if (pthread_mutex_init(&l->lock, NULL) != 0) return brg_error(BRG_ERR_INTERNAL, "cannot create the loader's lock");
    if (pthread_cond_init(&l->ready, NULL) != 0) {
        pthread_mutex_destroy(&l->lock);
        return brg_error(BRG_ERR_INTERNAL, "cannot create the loader's condition");
    }
    if (pthread_cond_init(&l->freed, NULL) != 0) {
        pthread_cond_destroy(&l->ready);
        pthread_mutex_destroy(&l->lock);
        return brg_error(BRG_ERR_INTERNAL, "cannot create the loader's condition");
    }
    l->sync_ready = true;
    return BRG_OK;
}

static brg_status start_workers(brg_data_loader *l) {
    const int64_t rows_per_step = l->o.micro * l->o.accumulation * l->o.replicas;
    l->workers = calloc((size_t)l->o.workers, sizeof *l->workers);
    if (!l->workers) return brg_error(BRG_ERR_OOM, "cannot allocate the data loader's workers");
    for (int i = 0; i < l->o.workers; i++)
        BRG_TRY(brg_data_order_init(&l->workers[i].order, l->data, rows_per_step, l->o.shuffle, l->o.seed));
    for (int i = 0; i < l->o.workers; i++) l->workers[i].loader = l, l->workers[i].index = i + 1;
    BRG_TRY(brg_pool_create(l->o.workers, "the data loader's workers", &l->threads));
    brg_pool_launch(l->threads, work, l->workers);
    return BRG_OK;
}

brg_status brg_data_loader_create(const brg_dataset *d, const brg_model *model, const brg_data_loader_options *o,
                                  brg_data_loader **out) {
    *out = NULL;
    BRG_TRY(check_options(o));
    brg_data_loader *l = calloc(1, sizeof *l);
    if (!l) return brg_error(BRG_ERR_OOM, "cannot allocate the data loader");
    *l = (brg_data_loader){.data = d, .model = model, .o = *o, .next_claim = o->first_step,
                           .next_step = o->first_step, .held = -1};
    const int64_t rows_per_step = o->micro * o->accumulation * o->replicas;
    brg_status st = make_slots(l);
    if (st == BRG_OK && o->workers == 0) st = brg_data_order_init(&l->order, d, rows_per_step, o->shuffle, o->seed);
    if (st == BRG_OK && o->workers > 0) st = make_sync(l);
    if (st == BRG_OK && o->workers > 0) st = start_workers(l);
    if (st != BRG_OK) {
        brg_data_loader_destroy(l);
        return st;
    }
    *out = l;
    return BRG_OK;
}

static void stop_workers(brg_data_loader *l) {
    if (!l->sync_ready) return;
    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    pthread_cond_broadcast(&l->freed);
    pthread_mutex_unlock(&l->lock);
    brg_pool_destroy(l->threads);
}

void brg_data_loader_destroy(brg_data_loader *l) {
    if (!l) return;
    stop_workers(l);
    for (int i = 0; l->workers && i < l->o.workers; i++) brg_data_order_free(&l->workers[i].order);
    free(l->workers);
    for (int i = 0; l->slots && i < l->n_slots; i++) brg_step_batch_free(&l->slots[i].batch);
    free(l->slots);
    brg_data_order_free(&l->order);
    if (l->sync_ready) {
        pthread_cond_destroy(&l->freed);
        pthread_cond_destroy(&l->ready);
        pthread_mutex_destroy(&l->lock);
    }
    free(l);
}

/* ---- the caller's side ---- */

int brg_data_loader_workers(const brg_data_loader *l) { return l->o.workers; }

void brg_data_loader_release(brg_data_loader *l) {
    if (l->held < 0) return;
    if (l->o.workers > 0) {
        pthread_mutex_lock(&l->lock);
        l->slots[l->held % l->n_slots].state = SLOT_FREE;
        pthread_cond_broadcast(&l->freed);
        pthread_mutex_unlock(&l->lock);
    }
    l->held = -1;
}

/* The failed step a worker stopped at, for a caller asking past it: no worker will fill those. */
static const slot *failed_slot(const brg_data_loader *l) {
    for (int i = 0; i < l->n_slots; i++)
        if (l->slots[i].state == SLOT_READY && l->slots[i].status != BRG_OK) return &l->slots[i];
    return NULL;
}

static brg_status wait_for(brg_data_loader *l, int64_t step, const brg_step_batch **out) {
    slot *s = &l->slots[step % l->n_slots];
    const slot *failed = NULL;
    pthread_mutex_lock(&l->lock);
    while (!(s->state == SLOT_READY && s->step == step)) {
        if (l->failed && step >= l->next_claim && (failed = failed_slot(l)) != NULL) break;
        pthread_cond_wait(&l->ready, &l->lock);
    }
    if (!failed && s->status != BRG_OK) failed = s;
    brg_status st = failed ? failed->status : BRG_OK;
    char message[MESSAGE_CAPACITY];
    if (failed) snprintf(message, sizeof message, "%s", failed->message);
    pthread_mutex_unlock(&l->lock);
    if (st != BRG_OK) return brg_error(st, "%s", message);
    l->held = step;
    *out = &s->batch;
    return BRG_OK;
}

brg_status brg_data_loader_next(brg_data_loader *l, int64_t step, const brg_step_batch **out) {
    BRG_ASSERT(step == l->next_step && step < l->o.end_step);
    brg_data_loader_release(l);
    l->next_step++;
    if (l->o.workers > 0) return wait_for(l, step, out);
    BRG_TRY(brg_step_batch_fill(&l->slots[0].batch, l->data, &l->order, step, l->model));
    l->held = step;
    *out = &l->slots[0].batch;
    return BRG_OK;
}
