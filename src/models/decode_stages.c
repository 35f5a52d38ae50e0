/* Stage threads of a pipelined decode (one pool, a thread per stage): a FIFO of jobs each, a job
 * waited for by its caller. */
#include "models/decode_stages.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/thread_pool.h"

typedef struct job {
    brg_status (*fn)(void *ctx);
    void *ctx;
    brg_status status;
    char error[512];
    bool done;
    pthread_cond_t finished;
    struct job *next;
} job;

typedef struct stage {
    pthread_mutex_t lock;
    pthread_cond_t work;
    job *head, *tail;
    bool quit;
} stage;

struct decode_stages {
    int n;
    stage *stages;
    brg_pool *threads; /* thread i serves stage i */
};

/* A stage's thread: its jobs in order until it is told to quit. */
static void stage_main(void *p, int i, int n) {
    (void)n;
    stage *s = &((decode_stages *)p)->stages[i];
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->quit) pthread_cond_wait(&s->work, &s->lock);
        job *j = s->head;
        if (!j) { /* quit, and nothing left */
            pthread_mutex_unlock(&s->lock);
            return;
        }
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        brg_clear_error();
        const brg_status st = j->fn(j->ctx);
        pthread_mutex_lock(&s->lock);
        j->status = st;
        if (st != BRG_OK) snprintf(j->error, sizeof j->error, "%s", brg_last_error());
        j->done = true;
        pthread_cond_signal(&j->finished);
        pthread_mutex_unlock(&s->lock);
    }
}

brg_status decode_stages_create(int stages, decode_stages **out) {
    *out = NULL;
    if (stages < 1 || stages > 1024) return brg_error(BRG_ERR_INVALID_ARG, "a decode pipeline of %d stages", stages);
    decode_stages *d = calloc(1, sizeof *d);
    if (!d || !(d->stages = calloc((size_t)stages, sizeof *d->stages))) {
        free(d);
        return brg_error(BRG_ERR_OOM, "cannot allocate the decode stages");
    }
    d->n = stages;
    for (int i = 0; i < stages; i++) {
        pthread_mutex_init(&d->stages[i].lock, NULL);
        pthread_cond_init(&d->stages[i].work, NULL);
    }
    const brg_status st = brg_pool_create(stages, "the decode stages", &d->threads);
    if (st != BRG_OK) {
        decode_stages_destroy(d);
        return st;
    }
    brg_pool_launch(d->threads, stage_main, d);
    *out = d;
    return BRG_OK;
}

void decode_stages_destroy(decode_stages *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        stage *s = &d->stages[i];
        pthread_mutex_lock(&s->lock);
        s->quit = true;
        pthread_cond_broadcast(&s->work);
        pthread_mutex_unlock(&s->lock);
    }
    brg_pool_destroy(d->threads); /* each stage finishes its jobs, sees quit and returns */
    for (int i = 0; i < d->n; i++) {
        pthread_mutex_destroy(&d->stages[i].lock);
        pthread_cond_destroy(&d->stages[i].work);
    }
    free(d->stages);
    free(d);
}

int decode_stages_count(const decode_stages *d) { return d->n; }

brg_status decode_stages_run(decode_stages *d, int which, brg_status (*fn)(void *ctx), void *ctx) {
    BRG_ASSERT(which >= 0 && which < d->n);
    stage *s = &d->stages[which];
    job j = {.fn = fn, .ctx = ctx};
    pthread_cond_init(&j.finished, NULL);
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = &j;
    else s->head = &j;
    s->tail = &j;
    pthread_cond_signal(&s->work);
    while (!j.done) pthread_cond_wait(&j.finished, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_cond_destroy(&j.finished);
    if (j.status != BRG_OK) return brg_error(j.status, "decode stage %d: %s", which, j.error);
    return BRG_OK;
}
