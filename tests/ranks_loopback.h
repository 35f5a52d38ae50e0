/* Used by test_transport.c: the ranks transport (transport_ranks.c) with its ranks in one
 * process. Each rank is a ranks transport of its own, with only its devices' mailboxes; the
 * ranks are joined by a loopback wire whose thread hands messages on later, in order, as a
 * network would. A facade presents the whole as one transport of every device (for the transport
 * tests and the runtime), sending each call to the rank whose device makes it; the devices of
 * different ranks then share nothing but the wire. */
#ifndef BRIGADE_TEST_RANKS_LOOPBACK_H
#define BRIGADE_TEST_RANKS_LOOPBACK_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/transport.h"
#include "runtime/wire.h"

enum { LB_MAX_RANKS = 8 };

typedef struct lb_item {
    struct lb_item *next;
    int to;
    void *buf;
    size_t bytes;
} lb_item;

typedef struct lb_hub {
    int n_ranks;
    wire_deliver_fn deliver[LB_MAX_RANKS];
    void *ctx[LB_MAX_RANKS];
    pthread_mutex_t lock;
    pthread_cond_t changed;
    lb_item *head, **tail;
    int busy; /* an item being handed on */
    bool quit;
    pthread_t thread;
} lb_hub;

typedef struct lb_wire {
    transport_wire base;
    lb_hub *hub;
} lb_wire;

static void *lb_main(void *arg) {
    lb_hub *h = arg;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->head && !h->quit) pthread_cond_wait(&h->changed, &h->lock);
        if (!h->head) break;
        lb_item *it = h->head;
        h->head = it->next;
        if (!h->head) h->tail = &h->head;
        h->busy++;
        wire_deliver_fn deliver = h->deliver[it->to];
        void *ctx = h->ctx[it->to];
        pthread_mutex_unlock(&h->lock);
        if (deliver) deliver(ctx, it->buf, it->bytes);
        else free(it->buf);
        free(it);
        pthread_mutex_lock(&h->lock);
        h->busy--;
        pthread_cond_broadcast(&h->changed);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* Until everything posted so far has been handed on. */
static void lb_flush(lb_hub *h) {
    pthread_mutex_lock(&h->lock);
    while (h->head || h->busy) pthread_cond_wait(&h->changed, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static brg_status lb_post(transport_wire *w, int to_rank, int tag, void *buf, size_t bytes) {
    (void)tag;
    lb_hub *h = ((lb_wire *)w)->hub;
    lb_item *it = malloc(sizeof *it);
    if (!it) {
        free(buf);
        return brg_error(BRG_ERR_OOM, "loopback");
    }
    *it = (lb_item){NULL, to_rank, buf, bytes};
    pthread_mutex_lock(&h->lock);
    *h->tail = it;
    h->tail = &it->next;
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
    return BRG_OK;
}

static void lb_close(transport_wire *w) {
    lb_wire *lw = (lb_wire *)w;
    lb_flush(lw->hub);
    pthread_mutex_lock(&lw->hub->lock);
    lw->hub->deliver[w->rank] = NULL;
    pthread_mutex_unlock(&lw->hub->lock);
    free(lw);
}

/* wire_open_fn: arg is the hub; the rank is the next one not yet open. */
static brg_status lb_open(void *arg, wire_deliver_fn deliver, void *ctx, transport_wire **out) {
    lb_hub *h = arg;
    lb_wire *w = calloc(1, sizeof *w);
    if (!w) return brg_error(BRG_ERR_OOM, "loopback");
    pthread_mutex_lock(&h->lock);
    int r = 0;
    while (r < h->n_ranks && h->ctx[r]) r++;
    h->deliver[r] = deliver;
    h->ctx[r] = ctx;
    pthread_mutex_unlock(&h->lock);
    w->base = (transport_wire){r, h->n_ranks, lb_post, lb_close};
    w->hub = h;
    *out = &w->base;
    return BRG_OK;
}

/* ---- the facade ---- */

typedef struct lb_facade {
    transport base;
    lb_hub hub;
    transport *ranks[LB_MAX_RANKS];
    int device_rank[64];
} lb_facade;

static transport *lb_of(transport *t, int device) {
    lb_facade *f = (lb_facade *)t;
    return f->ranks[f->device_rank[device]];
}

static brg_status lbf_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    transport *r = lb_of(t, device);
    return r->send(r, device, to, tag, items, n);
}
static brg_status lbf_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    transport *r = lb_of(t, device);
    return r->recv(r, device, from, tag, out);
}
static void lbf_release(transport *t, int device, transport_msg *msg) {
    transport *r = lb_of(t, device);
    r->release(r, device, msg);
}
static brg_status lbf_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    transport *r = lb_of(t, device);
    return r->all_reduce(r, device, span, segs, n_segs);
}
static brg_status lbf_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    transport *r = lb_of(t, device);
    return r->broadcast(r, device, root, tensors, n);
}
static brg_status lbf_barrier(transport *t, int device) {
    transport *r = lb_of(t, device);
    return r->barrier(r, device);
}
static void lbf_abort(transport *t, int device, brg_status status, const char *message) {
    transport *r = lb_of(t, device);
    r->abort(r, device, status, message);
    lb_flush(&((lb_facade *)t)->hub); /* every rank has heard by the time the caller looks */
}
/* Every rank knows of a failure once the wire has carried it: the facade asks rank 0. */
static brg_status lbf_failure(const transport *t, int *device, const char **message) {
    const lb_facade *f = (const lb_facade *)t;
    return f->ranks[0]->failure(f->ranks[0], device, message);
}
static void lbf_reset(transport *t) {
    lb_facade *f = (lb_facade *)t;
    lb_flush(&f->hub); /* no word of the old failure arrives after it is cleared */
    for (int r = 0; r < f->hub.n_ranks; r++) f->ranks[r]->reset(f->ranks[r]);
}
static void lbf_destroy(transport *t) {
    lb_facade *f = (lb_facade *)t;
    for (int r = 0; r < f->hub.n_ranks; r++)
        if (f->ranks[r]) f->ranks[r]->destroy(f->ranks[r]);
    pthread_mutex_lock(&f->hub.lock);
    f->hub.quit = true;
    pthread_cond_broadcast(&f->hub.changed);
    pthread_mutex_unlock(&f->hub.lock);
    pthread_join(f->hub.thread, NULL);
    pthread_mutex_destroy(&f->hub.lock);
    pthread_cond_destroy(&f->hub.changed);
    free(f);
}

/* n_devices over n_ranks, consecutive and as even as the count allows (as brg_ranks_layout). */
static brg_status lb_create(int n_devices, int n_ranks, double timeout, transport **out) {
    lb_facade *f = calloc(1, sizeof *f);
    if (!f || n_ranks > LB_MAX_RANKS || n_devices > 64 || n_devices < n_ranks) {
        free(f);
        return brg_error(BRG_ERR_INVALID_ARG, "loopback of %d devices over %d ranks", n_devices, n_ranks);
    }
    f->base = (transport){n_devices, lbf_send, lbf_recv, lbf_release, lbf_all_reduce, lbf_broadcast, lbf_barrier,
                          lbf_abort, lbf_failure, lbf_reset, lbf_destroy, 0, 1, NULL, NULL};
    f->hub.n_ranks = n_ranks;
    f->hub.tail = &f->hub.head;
    pthread_mutex_init(&f->hub.lock, NULL);
    pthread_cond_init(&f->hub.changed, NULL);
    pthread_create(&f->hub.thread, NULL, lb_main, &f->hub);
    for (int d = 0; d < n_devices; d++) f->device_rank[d] = (int)((long long)d * n_ranks / n_devices);
    brg_status st = BRG_OK;
    for (int r = 0; st == BRG_OK && r < n_ranks; r++)
        st = transport_ranks_create(n_devices, f->device_rank, r, n_ranks, timeout, lb_open, &f->hub, &f->ranks[r]);
    if (st != BRG_OK) {
        lbf_destroy(&f->base);
        return st;
    }
    *out = &f->base;
    return BRG_OK;
}

#endif
