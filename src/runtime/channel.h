/* A bounded FIFO of (micro-batch, pointer) messages between two stages' threads. */
#ifndef BRIGADE_CHANNEL_H
#define BRIGADE_CHANNEL_H

#include <pthread.h>
#include <stdbool.h>

#include "brigade/status.h"

typedef struct channel_msg {
    int micro_batch;
    void *payload;
} channel_msg;

typedef struct channel {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    channel_msg *ring;
    int capacity, head, count;
    const volatile bool *abort; /* set when any device fails: waiters give up */
} channel;

brg_status channel_init(channel *c, int capacity, const volatile bool *abort);
void channel_destroy(channel *c);
/* Both block while full/empty; both fail (BRG_ERR_INTERNAL) once *abort is set. */
brg_status channel_send(channel *c, channel_msg msg);
brg_status channel_recv(channel *c, channel_msg *msg);
/* Wakes every waiter so that it can see the abort flag. */
void channel_wake(channel *c);
void channel_reset(channel *c);

#endif
