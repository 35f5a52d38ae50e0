/* A device's mailbox: messages (sender, tag, payload) from any device, received by matching
 * (sender, tag) in the order they were sent. Sending never waits (the box grows, and keeps its
 * room for later runs). */
#ifndef BRIGADE_CHANNEL_H
#define BRIGADE_CHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "brigade/status.h"

typedef struct channel_msg {
    int from, tag;
    void *payload;
} channel_msg;

typedef struct channel {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    channel_msg *msgs; /* in sending order */
    int capacity, count;
    const atomic_bool *abort; /* set when any device fails: waiters give up */
} channel;

brg_status channel_init(channel *c, int capacity, const atomic_bool *abort);
void channel_destroy(channel *c);
brg_status channel_send(channel *c, channel_msg msg);
/* Blocks until a message from `from` with `tag` is there; fails (BRG_ERR_INTERNAL, no message
 * set: the caller says why) once *abort is set. */
brg_status channel_recv(channel *c, int from, int tag, channel_msg *msg);
/* As channel_recv, giving up after `seconds` (> 0; 0 waits for ever): BRG_ERR_IO then, no
 * message set. */
brg_status channel_recv_timed(channel *c, int from, int tag, double seconds, channel_msg *msg);
/* Wakes every waiter so that it can see the abort flag. */
void channel_wake(channel *c);
/* Empties the box, handing each message still in it to `drop`. */
void channel_reset(channel *c, void (*drop)(void *ctx, void *payload), void *ctx);

#endif
