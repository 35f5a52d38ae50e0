/* The stages of a pipelined decode (internal to src/models): one thread per stage, each running
 * the part of the model placed on it for whichever request reaches it next. A request hands its
 * part to a stage and waits for it; while it waits on the last stage, another request's step
 * runs on the first, so requests in flight keep the stages busy at once. */
#ifndef BRIGADE_MODELS_DECODE_STAGES_H
#define BRIGADE_MODELS_DECODE_STAGES_H

#include "brigade/status.h"

typedef struct decode_stages decode_stages;

/* `stages` threads (each with its own kernel scratch). */
brg_status decode_stages_create(int stages, decode_stages **out);
/* Waits for the jobs in flight, then stops the threads. */
void decode_stages_destroy(decode_stages *s);
int decode_stages_count(const decode_stages *s);

/* Runs fn(ctx) on stage `stage`'s thread, after the jobs already queued there, and returns its
 * status (its error message, too, on the calling thread). */
brg_status decode_stages_run(decode_stages *s, int stage, brg_status (*fn)(void *ctx), void *ctx);

struct decode_ranks;

/* Where a decoder's units run: unit u (0: the embeddings, then the layers in order, then the
 * head: the model's blocks) on unit_stage[u] of `stages`; NULL stages: on the caller's thread.
 * Under mpirun (ranks not NULL, decode_ranks.h) the stages are replica `replica`'s devices,
 * spread over the ranks, and the messages of `request` cross between them. */
typedef struct decode_route {
    decode_stages *stages;
    const int *unit_stage;
    const struct decode_ranks *ranks;
    int replica;
    int request;
} decode_route;

#endif
