/* The transport: everything that moves data between devices. Nothing in the runtime reads or
 * writes another device's memory except through it.
 *
 * A transport joins n devices (ids 0..n-1). Each operation is called from one device's thread
 * with that device's id:
 * - send / recv: a bundle of named tensors, by value, from one device to another, matched on
 *   (sender, tag) in order of sending (MPI's non-overtaking rule). A sent bundle is copied: the
 *   sender may change or free its tensors once send returns. A received bundle is a set of
 *   views the receiver reads (copies, adds) and then releases.
 * - all_reduce: each device passes its flat gradient span and the segments in it, keyed by
 *   parameter; afterwards every segment holds the sum over all devices' segments with the same
 *   key, added in device order (x0 + x1 + x2 + ...), so the result never depends on timing.
 *   Every device calls it once per reduction (one collective per device).
 * - broadcast: the root's tensors into the others' tensors of the same shapes (NULL: not
 *   wanted here). Every device calls it.
 * - barrier: returns once every device has called it.
 * - abort: a device that failed says so once, with its status and message; every operation
 *   blocked or started on any device then returns that status (BRG_ERR_INTERNAL when the origin's
 *   status was BRG_OK), and `failure` tells who failed and why. `reset` clears the failure and
 *   every message in flight, once no device is inside the transport.
 *
 * Implementations: threads (one process; transport_threads.c) and a wrapper that passes every
 * bundle through a byte buffer as a network transport would (transport_serial.c); Open MPI next.
 * Tags: transport_tag(micro_batch, direction) for the pipeline, small reserved ones below
 * TRANSPORT_TAG_FIRST for the runtime's own exchanges; all are non-negative, as MPI wants. */
#ifndef BRIGADE_TRANSPORT_H
#define BRIGADE_TRANSPORT_H

#include <stddef.h>

#include "brigade/safetensors.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

enum {
    TRANSPORT_TAG_GATHER = 0, /* tensors collected on device 0 (checkpoints, sync_to_model) */
    TRANSPORT_TAG_FIRST = 2,
};
typedef enum { TRANSPORT_FORWARD = 0, TRANSPORT_BACKWARD = 1 } transport_direction;
static inline int transport_tag(int micro_batch, transport_direction dir) {
    return TRANSPORT_TAG_FIRST + 2 * micro_batch + (int)dir;
}

/* A received bundle: views valid until release. */
typedef struct transport_msg {
    int n;
    brg_named_tensor *items;
    void *impl; /* the implementation's buffer */
} transport_msg;

/* One parameter's gradient inside a device's flat span. */
typedef struct transport_segment {
    int key;       /* the parameter */
    size_t offset; /* in floats from the span's start */
    size_t count;
} transport_segment;

typedef struct transport transport;
struct transport {
    int n_devices;
    brg_status (*send)(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n);
    brg_status (*recv)(transport *t, int device, int from, int tag, transport_msg *out);
    void (*release)(transport *t, int device, transport_msg *msg);
    /* segs sorted by key, each key once per device */
    brg_status (*all_reduce)(transport *t, int device, float *span, const transport_segment *segs, int n_segs);
    /* tensors[0..n): the root's sources; elsewhere destinations or NULL */
    brg_status (*broadcast)(transport *t, int device, int root, brg_tensor *const *tensors, int n);
    brg_status (*barrier)(transport *t, int device);
    /* The first call wins; later ones (devices that stopped because of it) change nothing. */
    void (*abort)(transport *t, int device, brg_status status, const char *message);
    /* BRG_OK, or the status of the first abort; *device and *message say whose and why. */
    brg_status (*failure)(const transport *t, int *device, const char **message);
    void (*reset)(transport *t);
    void (*destroy)(transport *t);
};

/* How a runtime makes its transport (the threads transport by default). */
typedef brg_status (*transport_factory)(int n_devices, transport **out);

brg_status transport_threads_create(int n_devices, transport **out);
/* Wraps `inner` (taking ownership): every bundle sent is serialised into one byte buffer, that
 * buffer travels through inner as a single tensor, and the receiver rebuilds the bundle from it.
 * Collectives go to inner unchanged. */
brg_status transport_serial_create(transport *inner, transport **out);
brg_status transport_serial_threads_create(int n_devices, transport **out);

#endif
