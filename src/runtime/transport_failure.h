/* The first failure a transport heard of: who failed and why (internal to src/runtime). Both
 * in-process transports keep one under their own lock; `aborted` is also read without it, by the
 * channels' waits. */
#ifndef BRIGADE_RUNTIME_TRANSPORT_FAILURE_H
#define BRIGADE_RUNTIME_TRANSPORT_FAILURE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "brigade/status.h"

typedef struct transport_failure {
    atomic_bool aborted;
    int device;
    brg_status status;
    char message[1024];
} transport_failure;

/* No failure (also what `reset` returns to). The functions below want the owner's lock held. */
void transport_failure_clear(transport_failure *f);
/* Keeps the first failure only (a status of BRG_OK counts as BRG_ERR_INTERNAL); true for it. */
bool transport_failure_record(transport_failure *f, int device, brg_status status, const char *message);
/* BRG_OK, or the failure's status with *device and *message. */
brg_status transport_failure_get(const transport_failure *f, int *device, const char **message);
/* The error every operation gives once a device failed. */
brg_status transport_failure_stopped(const transport_failure *f);

#endif
