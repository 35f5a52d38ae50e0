/* Tracing: what the runtime, the trainer and the commands do, on a timeline, written as a
 * Chrome trace-event JSON file (chrome://tracing, ui.perfetto.dev).
 *
 * One process-wide recorder. Each thread appends to its own buffer (no lock, no shared cache
 * line on the recording path); a device's thread records on the track of that device (tid =
 * device id, named "device N (replica R, stage S)"), the thread that started the trace on the
 * "host" track, any other thread on a track of its own. Timestamps are CLOCK_MONOTONIC.
 *
 * Off (the default), every hook is one predictable branch on brg_trace_enabled() and records,
 * allocates and formats nothing. Events are compact records (a kind and numbers); names and
 * JSON are made only when the file is written.
 *
 * Event names (docs/runtime.md lists them with their args):
 *   forward block B mb M, backward block B mb M, recompute block B mb M       (device tracks)
 *   send forward|backward mb M to device D, recv ... from device D, send gather to device 0,
 *   all-reduce, broadcast from device D, barrier                                (device tracks)
 *   optimizer step                                                              (device tracks)
 *   a named host span: "step N", "data", "evaluate", "checkpoint", "prefill", "decode step",
 *   "forward batch N", ...                                                      (host track)
 *   "data wait N" (the host's wait for a batch the loader's workers prepare)    (host track)
 *   "prepare step N" (a worker filling a step's batch ahead)       (track "data loader K")
 *   counters "memory device N" {bytes}: the device's arena (parameters, state, activations,
 *   kernel scratch) after each of its pipeline steps. */
#ifndef BRIGADE_TRACE_H
#define BRIGADE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_trace_kind {
    BRG_TRACE_FORWARD = 0, /* a = block, b = micro-batch */
    BRG_TRACE_BACKWARD,    /* a = block, b = micro-batch */
    BRG_TRACE_RECOMPUTE,   /* a = block, b = micro-batch: the forward rerun inside its backward */
    BRG_TRACE_SEND,        /* a = peer, b = tag, bytes */
    BRG_TRACE_RECV,        /* a = peer, b = tag, bytes: from the call to the message (the wait) */
    BRG_TRACE_ALL_REDUCE,  /* bytes of the device's gradient span */
    BRG_TRACE_BROADCAST,   /* a = root, bytes */
    BRG_TRACE_BARRIER,
    BRG_TRACE_OPTIMIZER,   /* a = step */
    BRG_TRACE_NAMED,       /* a span with a static name; a = an index (-1: none), bytes = rows or 0 */
    BRG_TRACE_KIND_COUNT
} brg_trace_kind;

/* Whether recording is on: one relaxed load. */
extern atomic_bool brg_trace_on_;
static inline bool brg_trace_enabled(void) { return atomic_load_explicit(&brg_trace_on_, memory_order_relaxed); }

/* Starts recording into memory; brg_trace_finish writes it to `path` (atomically: a temporary
 * beside it renamed over it). The path is checked now, by creating that temporary, so a run
 * whose trace could not be written is refused before it starts. `process` names the process
 * track ("brigade train"). The calling thread becomes the host track. Fails when a trace is
 * already being recorded. */
brg_status brg_trace_start(const char *path, const char *process);
/* Writes everything recorded and stops recording (also after a failed run: what it did up to
 * the failure is in the file). Call it once no thread is recording (runtimes destroyed or idle).
 * A no-op returning BRG_OK when no trace was started. */
brg_status brg_trace_finish(void);
/* Stops recording and drops the events and the temporary file (no trace written). */
void brg_trace_discard(void);

/* The rank recorded as every event's pid (0 by default; MPI runs set theirs). */
void brg_trace_set_rank(int rank);
/* The calling thread's track: a device (cheap, no allocation; works whether or not recording is
 * on, so device threads call it when they start). */
void brg_trace_set_device(int device, int replica, int stage);

/* The calling thread's track name, for a thread that is no device ("data loader 1"; copied,
 * up to 47 bytes; NULL or "": "thread N"). Call it before the thread's first event. */
void brg_trace_set_thread_name(const char *name);

/* Nanoseconds since an arbitrary origin (CLOCK_MONOTONIC): a span's start. */
uint64_t brg_trace_now(void);
/* Records a span that started at `t0` (brg_trace_now) and ends now. For BRG_TRACE_NAMED,
 * `name` must outlive the trace (a string literal); it is ignored otherwise. */
void brg_trace_span(brg_trace_kind kind, uint64_t t0, int a, int b, int64_t bytes, const char *name);
/* A host span with a static name, started at t0; index -1 for none ("step 3": index 3). */
static inline void brg_trace_named(const char *name, uint64_t t0, int64_t index) {
    brg_trace_span(BRG_TRACE_NAMED, t0, (int)index, 0, 0, name);
}
/* Records the counter "memory device N" = bytes, now. */
void brg_trace_memory(int device, int64_t bytes);

/* Events recorded and dropped (past the per-thread cap) since the trace started. */
void brg_trace_counts(int64_t *recorded, int64_t *dropped);

#ifdef __cplusplus
}
#endif
#endif
