/* A transport's first failure. */
#include "transport_failure.h"

#include <stdio.h>

void transport_failure_clear(transport_failure *f) {
    f->device = -1;
    f->status = BRG_OK;
    f->message[0] = '\0';
    atomic_store(&f->aborted, false);
}

bool transport_failure_record(transport_failure *f, int device, brg_status status, const char *message) {
    if (atomic_load(&f->aborted)) return false;
    f->device = device;
    f->status = status != BRG_OK ? status : BRG_ERR_INTERNAL;
    snprintf(f->message, sizeof f->message, "%s", message ? message : "");
    atomic_store(&f->aborted, true);
    return true;
}

brg_status transport_failure_get(const transport_failure *f, int *device, const char **message) {
    if (!atomic_load(&f->aborted)) return BRG_OK;
    *device = f->device, *message = f->message;
    return f->status;
}

brg_status transport_failure_stopped(const transport_failure *f) {
    return brg_error(f->status != BRG_OK ? f->status : BRG_ERR_INTERNAL, "stopped because device %d failed",
                     f->device);
}
