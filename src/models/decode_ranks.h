/* A pipelined decode over ranks (internal to src/models): under mpirun the devices of a generate
 * placement (replicas x stages, device = replica * stages + stage) are spread over the ranks as a
 * runtime's are (brg_ranks_layout: consecutive by default, --devices-per-rank), and each rank runs
 * the decode units of the stages it holds, with their KV caches.
 *
 * Every rank runs every request's host loop (SPMD: the same prompts, the same choices): a run of
 * units on a stage held here computes, one held elsewhere is skipped. What one run hands the next
 * (the hidden states, T5's position bias or encoder output) crosses ranks through the ranks
 * transport, from the run's device to the next run's; the last run's result (a step's logits) goes
 * from its device to every other rank, so all take the same next token. Messages are tagged by
 * request, so requests in flight never meet; a rank's request threads wait for messages, its
 * stage threads only compute, so no order of arrivals can deadlock.
 *
 * The transport comes from above (src/runtime/generate_ranks.c makes it over the MPI link):
 * models only call through its interface. */
#ifndef BRIGADE_MODELS_DECODE_RANKS_H
#define BRIGADE_MODELS_DECODE_RANKS_H

#include <stdbool.h>

#include "brigade/status.h"
#include "runtime/transport.h"

typedef struct decode_ranks {
    transport *t;   /* the caller's */
    double timeout; /* the transport's wait, for the messages that name it */
    int stages, replicas;
    int *mailbox; /* [n_ranks]: each rank's first device, where the results are sent */
} decode_ranks;

/* Over `t`, a transport of replicas x stages devices (NULL: one process, *out = NULL). */
brg_status decode_ranks_create(transport *t, double timeout, int replicas, int stages, decode_ranks **out);
void decode_ranks_destroy(decode_ranks *r);

static inline int decode_ranks_device(const decode_ranks *r, int replica, int stage) {
    return replica * r->stages + stage;
}
static inline bool decode_ranks_is_local(const decode_ranks *r, int device) {
    return transport_is_local(r->t, device);
}

/* This rank's first device (where results come to). */
static inline int decode_ranks_here(const decode_ranks *r) { return r->mailbox[r->t->rank]; }

/* Tells every rank that this one failed (their waits end with its message); the first wins. */
void decode_ranks_abort(const decode_ranks *r, int device, brg_status st, const char *why);
/* BRG_OK, or the first failure as "rank R, device D (replica r, stage s): why". */
brg_status decode_ranks_failure(const decode_ranks *r);

#endif
