/* The link between processes that the ranks transport (transport_ranks.c) sends its messages
 * over: Open MPI (transport_mpi.c), or an in-process loopback in the tests.
 *
 * A message is one malloc'd buffer whose first WIRE_HEADROOM bytes belong to the wire (its frame
 * header goes there, so nothing is copied to add it); the rest is the transport's. `post` takes
 * the buffer and never waits: the wire sends it in the background and frees it. The wire hands
 * every message that arrives to the transport's `deliver` (from its own thread, or from the
 * poster's), with a buffer laid out the same way, which the transport then owns and frees.
 * Messages from one process to another arrive in the order they were posted. */
#ifndef BRIGADE_WIRE_H
#define BRIGADE_WIRE_H

#include <stddef.h>

#include "brigade/status.h"
#include "transport.h"

enum { WIRE_HEADROOM = 16 };

/* Takes `buf` (`bytes` long, headroom included). */
typedef void (*wire_deliver_fn)(void *ctx, void *buf, size_t bytes);

struct transport_wire {
    int rank, n_ranks;
    /* `tag` is only a label (MPI's, for tools that trace messages); matching is the transport's. */
    brg_status (*post)(transport_wire *w, int to_rank, int tag, void *buf, size_t bytes);
    /* Sends what is still queued, then stops delivering; frees the wire. */
    void (*close)(transport_wire *w);
};

/* wire_open_fn (transport.h): how a ranks transport opens its wire; `deliver(ctx, ...)` then
 * gets every message for it. */

#endif
