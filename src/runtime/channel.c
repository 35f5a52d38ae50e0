#include "channel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

brg_status channel_init(channel *c, int capacity, const atomic_bool *abort) {
    c->msgs = calloc((size_t)capacity, sizeof *c->msgs);
    if (!c->msgs) return brg_error(BRG_ERR_OOM, "cannot allocate a channel");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->capacity = capacity;
    c->count = 0;
    c->abort = abort;
    return BRG_OK;
}

void channel_destroy(channel *c) {
    if (!c->msgs) return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->changed);
    free(c->msgs);
    c->msgs = NULL;
}

brg_status channel_send(channel *c, channel_msg msg) {
    pthread_mutex_lock(&c->lock);
    if (c->count == c->capacity) {
        int cap = 2 * c->capacity;
        channel_msg *grown = realloc(c->msgs, (size_t)cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&c->lock);
            return brg_error(BRG_ERR_OOM, "cannot grow a channel to %d messages", cap);
        }
        c->msgs = grown;
        c->capacity = cap;
    }
    c->msgs[c->count++] = msg;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    return BRG_OK;
}

static int find(const channel *c, int from, int tag) {
    for (int i = 0; i < c->count; i++)
        if (c->msgs[i].from == from && c->msgs[i].tag == tag) return i;
    return -1;
}

brg_status channel_recv(channel *c, int from, int tag, channel_msg *msg) {
    return channel_recv_timed(c, from, tag, 0, msg);
}

static struct timespec deadline_after(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* pthread_cond_timedwait's clock */
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

brg_status channel_recv_timed(channel *c, int from, int tag, double seconds, channel_msg *msg) {
    struct timespec until = seconds > 0 ? deadline_after(seconds) : (struct timespec){0, 0};
    bool late = false;
    pthread_mutex_lock(&c->lock);
    int i;
    while ((i = find(c, from, tag)) < 0 && !atomic_load(c->abort) && !late) {
        if (seconds > 0) late = pthread_cond_timedwait(&c->changed, &c->lock, &until) == ETIMEDOUT;
        else pthread_cond_wait(&c->changed, &c->lock);
    }
    if (i < 0 || atomic_load(c->abort)) {
        pthread_mutex_unlock(&c->lock);
        return atomic_load(c->abort) ? BRG_ERR_INTERNAL : BRG_ERR_IO;
    }
    *msg = c->msgs[i];
    memmove(&c->msgs[i], &c->msgs[i + 1], (size_t)(c->count - i - 1) * sizeof *c->msgs);
    c->count--;
    pthread_mutex_unlock(&c->lock);
    return BRG_OK;
}

void channel_wake(channel *c) {
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

void channel_reset(channel *c, void (*drop)(void *ctx, void *payload), void *ctx) {
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->count; i++) drop(ctx, c->msgs[i].payload);
    c->count = 0;
    pthread_mutex_unlock(&c->lock);
}
