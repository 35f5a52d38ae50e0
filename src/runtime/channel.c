#include "channel.h"

#include <stdlib.h>

brg_status channel_init(channel *c, int capacity, const volatile bool *abort) {
    c->ring = calloc((size_t)capacity, sizeof *c->ring);
    if (!c->ring) return brg_error(BRG_ERR_OOM, "cannot allocate a channel");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->capacity = capacity;
    c->head = c->count = 0;
    c->abort = abort;
    return BRG_OK;
}

void channel_destroy(channel *c) {
    if (!c->ring) return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->changed);
    free(c->ring);
    c->ring = NULL;
}

static brg_status aborted(channel *c) {
    pthread_mutex_unlock(&c->lock);
    return brg_error(BRG_ERR_INTERNAL, "stopped because another device failed");
}

brg_status channel_send(channel *c, channel_msg msg) {
    pthread_mutex_lock(&c->lock);
    while (c->count == c->capacity && !*c->abort) pthread_cond_wait(&c->changed, &c->lock);
    if (*c->abort) return aborted(c);
    c->ring[(c->head + c->count) % c->capacity] = msg;
    c->count++;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    return BRG_OK;
}

brg_status channel_recv(channel *c, channel_msg *msg) {
    pthread_mutex_lock(&c->lock);
    while (c->count == 0 && !*c->abort) pthread_cond_wait(&c->changed, &c->lock);
    if (*c->abort) return aborted(c);
    *msg = c->ring[c->head];
    c->head = (c->head + 1) % c->capacity;
    c->count--;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    return BRG_OK;
}

void channel_wake(channel *c) {
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

void channel_reset(channel *c) {
    pthread_mutex_lock(&c->lock);
    c->head = c->count = 0;
    pthread_mutex_unlock(&c->lock);
}
