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
 * Implementations: threads (one process; transport_threads.c), a wrapper that passes every
 * bundle through a byte buffer as a network transport would (transport_serial.c), and the ranks
 * transport (transport_ranks.c): the devices spread over processes, each running its own, joined
 * by a wire (Open MPI, transport_mpi.c; an in-process loopback in the tests).
 * Tags: transport_tag(micro_batch, direction) for the pipeline, small reserved ones below
 * TRANSPORT_TAG_FIRST for the runtime's own exchanges; all are non-negative (the ranks transport
 * keeps negative ones for its own collectives). */
#ifndef BRIGADE_TRANSPORT_H
#define BRIGADE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "brigade/safetensors.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

enum {
    TRANSPORT_TAG_GATHER = 0, /* tensors collected on device 0 (checkpoints, sync_to_model) */
    TRANSPORT_TAG_SHARE = 1,  /* host values between processes (ranks.c) */
    TRANSPORT_TAG_PIECES = 2, /* transport_all_gather's pieces (sharded optimizer updates) */
    TRANSPORT_TAG_SUMS = 3,   /* transport_reduce_scatter's pieces (sharded gradients) */
    TRANSPORT_TAG_FIRST = 4,
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

/* A piece of float memory in a collective over pieces (transport_all_gather,
 * transport_reduce_scatter below): a key (the same on every device), the device whose values
 * count (source) and one device taking part (device), count floats at data. */
typedef struct transport_piece {
    int key, source, device;
    float *data;
    size_t count;
} transport_piece;

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
    /* The processes the devices are spread over: this one's rank and how many there are, and
     * each device's rank (NULL: every device runs here, rank 0 of 1). Only a process's own
     * devices call the operations above. */
    int rank, n_ranks;
    const int *device_rank;
    /* transport_reduce_scatter done another way than over send and recv (the threads transport:
     * in place, reading the other devices' memory); NULL: over send and recv. */
    brg_status (*reduce_scatter)(transport *t, int device, const transport_piece *rows, int n);
};

static inline bool transport_is_local(const transport *t, int device) {
    return !t->device_rank || t->device_rank[device] == t->rank;
}

/* How a runtime makes its transport (the threads transport by default). */
typedef brg_status (*transport_factory)(int n_devices, transport **out);

brg_status transport_threads_create(int n_devices, transport **out);
/* Wraps `inner` (taking ownership): every bundle sent is serialised into one byte buffer, that
 * buffer travels through inner as a single tensor, and the receiver rebuilds the bundle from it.
 * Collectives go to inner unchanged. */
brg_status transport_serial_create(transport *inner, transport **out);
brg_status transport_serial_threads_create(int n_devices, transport **out);

/* The ranks transport (transport_ranks.c): devices 0..n_devices-1 spread over n_ranks processes,
 * device d running on process device_rank[d]; this process is `rank` and runs its own. The
 * processes are joined by the wire `open_wire(wire_arg, ...)` opens (wire.h). Every wait gives up
 * after `timeout` seconds (0: never) with a message naming the device and rank it waited for.
 * Across processes a failure is final: `reset` clears this process's state, but messages still
 * on the wire from before the failure may arrive after it, so the run must end there. */
typedef struct transport_wire transport_wire;
typedef brg_status (*wire_open_fn)(void *arg, void (*deliver)(void *ctx, void *buf, size_t bytes), void *ctx,
                                   transport_wire **out);
brg_status transport_ranks_create(int n_devices, const int *device_rank, int rank, int n_ranks, double timeout,
                                  wire_open_fn open_wire, void *wire_arg, transport **out);

/* All-gather (transport_pieces.c): copies of pieces of float memory, each copy made equal to
 * its source's, bit for bit (-0.0 and NaN payloads included). A piece's device holds a copy.
 * Each device passes, sorted by key, the rows it takes part in: its own copies
 * (device == this one, data its memory, receiving when it is not the source) and the copies it
 * is the source of (device another one, data its own values to send). Built on send and recv
 * (tag TRANSPORT_TAG_PIECES), one bundle from each source to each device it feeds, so it runs
 * on every transport, threads and ranks alike, with their timeouts and aborts. */
brg_status transport_all_gather(transport *t, int device, const transport_piece *rows, int n);

/* Reduce-scatter (transport_pieces.c): sums of pieces of float memory, each made only on the
 * devices that want it. A row's source contributes, its device wants the key's sum. Each device
 * passes, sorted by key: for each key it wants, one row per contributor, itself included when it
 * contributes (data its own memory, where the sum goes); for each key it contributes to and
 * another device wants, one row per such device (data its values to send). A device's pieces of
 * different keys do not overlap. Afterwards each wanted piece holds the sum over its
 * contributors added in device order (x0 + x1 + x2 + ...): the bits the all-reduce gives there.
 * t->reduce_scatter when the transport has one, else over send and recv (tag
 * TRANSPORT_TAG_SUMS: one bundle from each contributor to each device it feeds), so it runs on
 * every transport. */
brg_status transport_reduce_scatter(transport *t, int device, const transport_piece *rows, int n);

/* The byte form of a bundle (transport_serial.c): its size, the bytes (fails on a tensor that is
 * not contiguous or whose name is too long), and the bundle rebuilt from them, every field
 * checked against the buffer (a message whose impl transport_bundle_release frees). */
size_t transport_bundle_size(const brg_named_tensor *items, int n);
brg_status transport_bundle_encode(int device, const brg_named_tensor *items, int n, unsigned char *out);
brg_status transport_bundle_decode(const unsigned char *buf, size_t bytes, int from, transport_msg *out);
void transport_bundle_release(transport_msg *msg);

#endif
