/* The MPI side of the ranks transport (built only with MPI): one link per process, a
 * communication thread that makes every MPI call after MPI_Init, and the wire every ranks
 * transport of the process sends through.
 *
 * Threads: the device threads never call MPI. They post messages to the link (a queue) and find
 * what arrived in their mailboxes; the link's thread turns posts into MPI_Isend, polls for
 * arrivals (MPI_Improbe per source, then MPI_Imrecv) and tests what is in flight, sleeping a few
 * microseconds (rising to a millisecond) when nothing moves. Open MPI has no progress thread of
 * its own ("OMPI progress: no"), and this one is it. MPI_THREAD_SERIALIZED is all it needs: one
 * lock is held around every MPI call (the link's thread, and MPI_Abort from the main thread).
 *
 * Messages: a ranks transport's buffer starts with WIRE_HEADROOM bytes, where the link writes its
 * frame (which transport of the process it is for, and the total size); MPI's tag is the
 * transport's label. A message above the chunk size (1 GiB; BRIGADE_MPI_CHUNK bytes in tests)
 * goes as a frame announcing it, then the chunks. Receives run one at a time per source, so each
 * source's messages are handed on in the order it sent them. Transports are numbered in the order
 * the process creates them, the same on every rank; a message for one not created yet here waits
 * for it.
 *
 * The end: brg_ranks_finish tells every other rank how this one ends. When all end well, or all
 * fail (a failure every rank saw), they finalize and exit with their status; a rank that fails
 * alone waits up to five seconds for the others' word, then calls MPI_Abort, which ends them all.
 * A failure across ranks is final: the transports do not drop messages still in flight from
 * before it, so a runtime that failed is not run again (the commands exit). */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/thread_pool.h"
#include "ranks_internal.h"
#include "wire.h"

enum { FRAME_MESSAGE = 0x4d475242u, FRAME_BIG = 0x47425242u, FRAME_BYE = 0x45425242u };

typedef struct frame {
    uint32_t magic, endpoint;
    uint64_t total; /* the whole buffer; for a bye, the exit status */
} frame;
_Static_assert(sizeof(frame) == WIRE_HEADROOM, "the frame fills the wire's headroom");

typedef struct outgoing {
    struct outgoing *next;
    int to, tag, endpoint;
    unsigned char *buf;
    size_t bytes;
    frame big; /* the announcement of a chunked message */
    MPI_Request *reqs;
    int n_reqs;
} outgoing;

typedef struct endpoint {
    bool open;
    wire_deliver_fn deliver;
    void *ctx;
    int in_flight; /* its messages queued or being sent */
} endpoint;

typedef struct parked {
    struct parked *next;
    unsigned endpoint;
    unsigned char *buf;
    size_t bytes;
} parked;

/* What is being received from one source. */
typedef struct source {
    MPI_Request req; /* MPI_REQUEST_NULL: nothing in flight */
    unsigned char *buf;
    size_t total, at, len; /* a chunked message: its size, bytes received, the chunk in flight */
    bool big;
} source;

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

static struct link {
    MPI_Comm comm;
    int rank, size, tag_ub;
    size_t chunk;
    double timeout;
    brg_pool *thread; /* the link's one thread */
    bool running, stop;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t wake, sent;
    outgoing *queue, **queue_end, *active;
    endpoint *eps;
    unsigned n_eps, cap_eps;
    parked *parked;
    source *sources;
    int byes, bye_failures;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .sent = PTHREAD_COND_INITIALIZER};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A failed MPI call leaves nothing to recover: say so, and end every rank. */
static void fatal(int rc, const char *call) {
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, why, &len);
    fprintf(stderr, "brigade: rank %d: %s failed: %s\n", L.rank, call, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define CALL(expr)                                   \
    do {                                             \
        pthread_mutex_lock(&mpi_lock);               \
        int call_rc_ = (expr);                       \
        pthread_mutex_unlock(&mpi_lock);             \
        if (call_rc_ != MPI_SUCCESS) fatal(call_rc_, #expr); \
    } while (0)

/* ---- the thread: MPI calls without L.lock, which guards only the queue and the endpoints ---- */

static int clamp_tag(int tag) { return L.tag_ub > 0 ? (int)((unsigned)tag % ((unsigned)L.tag_ub + 1u)) : 0; }

static void start_sends(outgoing *o) {
    const frame *f = (const frame *)o->buf;
    const bool big = f->magic == FRAME_MESSAGE && o->bytes > L.chunk;
    const int chunks = big ? (int)((o->bytes + L.chunk - 1) / L.chunk) : 1;
    o->reqs = malloc((size_t)(chunks + 1) * sizeof *o->reqs);
    if (!o->reqs) fatal(MPI_ERR_NO_MEM, "allocating a send");
    const int tag = clamp_tag(o->tag);
    if (!big) {
        CALL(MPI_Isend(o->buf, (int)o->bytes, MPI_BYTE, o->to, tag, L.comm, &o->reqs[0]));
        o->n_reqs = 1;
        return;
    }
    o->big = (frame){FRAME_BIG, f->endpoint, o->bytes};
    CALL(MPI_Isend(&o->big, (int)sizeof o->big, MPI_BYTE, o->to, tag, L.comm, &o->reqs[0]));
    for (int c = 0; c < chunks; c++) {
        size_t at = (size_t)c * L.chunk, len = o->bytes - at < L.chunk ? o->bytes - at : L.chunk;
        CALL(MPI_Isend(o->buf + at, (int)len, MPI_BYTE, o->to, tag, L.comm, &o->reqs[c + 1]));
    }
    o->n_reqs = chunks + 1;
}

/* Sends in flight that completed go; returns whether any did. */
static bool finish_sends(void) {
    bool moved = false;
    for (outgoing **p = &L.active; *p;) {
        outgoing *o = *p;
        int done = 0;
        CALL(MPI_Testall(o->n_reqs, o->reqs, &done, MPI_STATUSES_IGNORE));
        if (!done) {
            p = &o->next;
            continue;
        }
        *p = o->next;
        pthread_mutex_lock(&L.lock);
        if (o->endpoint >= 0 && (unsigned)o->endpoint < L.n_eps) L.eps[o->endpoint].in_flight--;
        pthread_cond_broadcast(&L.sent);
        pthread_mutex_unlock(&L.lock);
        free(o->reqs);
        free(o->buf);
        free(o);
        moved = true;
    }
    return moved;
}

/* A whole message: to its transport, or kept for one this process has not created yet. */
static void hand_on(unsigned char *buf, size_t bytes) {
    const frame *f = (const frame *)buf;
    pthread_mutex_lock(&L.lock);
    if (f->magic == FRAME_BYE) {
        L.byes++;
        L.bye_failures += f->total != 0;
        free(buf);
    } else if (f->magic != FRAME_MESSAGE || f->total != bytes) {
        free(buf); /* not ours */
    } else if (f->endpoint < L.n_eps) {
        endpoint *e = &L.eps[f->endpoint];
        if (e->open) e->deliver(e->ctx, buf, bytes);
        else free(buf); /* its transport is gone */
    } else {
        parked *p = malloc(sizeof *p);
        if (!p) fatal(MPI_ERR_NO_MEM, "keeping a message");
        *p = (parked){NULL, f->endpoint, buf, bytes};
        parked **end = &L.parked;
        while (*end) end = &(*end)->next;
        *end = p;
    }
    pthread_mutex_unlock(&L.lock);
}

/* One step of receiving from source s; returns whether anything moved. */
static bool receive_from(int s) {
    source *src = &L.sources[s];
    if (src->req != MPI_REQUEST_NULL) {
        int done = 0;
        CALL(MPI_Test(&src->req, &done, MPI_STATUS_IGNORE));
        if (!done) return false;
        if (src->big) {
            src->at += src->len;
            if (src->at < src->total) return true; /* the next chunk comes */
            src->big = false;
        }
        unsigned char *buf = src->buf;
        src->buf = NULL;
        if (src->total < sizeof(frame)) free(buf); /* nothing a transport sent */
        else hand_on(buf, src->total);
        return true;
    }
    int flag = 0;
    MPI_Message msg;
    MPI_Status status;
    CALL(MPI_Improbe(s, MPI_ANY_TAG, L.comm, &flag, &msg, &status));
    if (!flag) return false;
    int count = 0;
    CALL(MPI_Get_count(&status, MPI_BYTE, &count));
    if (src->big) { /* the next chunk of the message announced */
        src->len = (size_t)count;
        if (src->at + src->len > src->total) fatal(MPI_ERR_TRUNCATE, "receiving a chunked message");
        CALL(MPI_Imrecv(src->buf + src->at, count, MPI_BYTE, &msg, &src->req));
        return true;
    }
    unsigned char *buf = malloc(count > 0 ? (size_t)count : 1);
    if (!buf) fatal(MPI_ERR_NO_MEM, "receiving a message");
    if (count == (int)sizeof(frame)) { /* a bye or an announcement: small enough to take at once */
        frame f;
        CALL(MPI_Mrecv(buf, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE));
        memcpy(&f, buf, sizeof f);
        if (f.magic != FRAME_BIG) {
            hand_on(buf, sizeof f);
            return true;
        }
        free(buf);
        if (!(src->buf = malloc(f.total))) fatal(MPI_ERR_NO_MEM, "receiving a chunked message");
        src->big = true;
        src->total = f.total;
        src->at = 0;
        return true;
    }
    src->buf = buf;
    src->total = (size_t)count;
    CALL(MPI_Imrecv(buf, count, MPI_BYTE, &msg, &src->req));
    return true;
}

static void link_main(void *arg, int i, int n) {
    (void)arg, (void)i, (void)n;
    double idle = 1e-5, stop_at = 0;
    for (;;) {
        pthread_mutex_lock(&L.lock);
        outgoing *posted = L.queue;
        L.queue = NULL;
        L.queue_end = &L.queue;
        const bool stop = L.stop;
        pthread_mutex_unlock(&L.lock);
        bool moved = posted != NULL;
        while (posted) {
            outgoing *o = posted;
            posted = o->next;
            start_sends(o);
            o->next = L.active;
            L.active = o;
        }
        moved |= finish_sends();
        for (int s = 0; s < L.size; s++)
            if (s != L.rank) moved |= receive_from(s);
        if (stop) {
            if (!stop_at) stop_at = now();
            /* Everything sent, or a peer that will not take it any more. */
            if (!L.active || now() - stop_at > (L.timeout > 0 ? L.timeout : 60)) break;
        }
        if (moved) {
            idle = 1e-5;
            continue;
        }
        const double most = L.active ? 2e-4 : 1e-3;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(idle * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&L.lock);
        if (!L.queue && !L.stop) pthread_cond_timedwait(&L.wake, &L.lock, &ts);
        pthread_mutex_unlock(&L.lock);
        idle = idle * 2 < most ? idle * 2 : most;
    }
}

/* ---- posting ---- */

static brg_status enqueue(int to, int tag, int ep, void *buf, size_t bytes) {
    outgoing *o = calloc(1, sizeof *o);
    if (!o) {
        free(buf);
        return brg_error(BRG_ERR_OOM, "cannot queue a message for rank %d", to);
    }
    *o = (outgoing){NULL, to, tag, ep, buf, bytes, {0, 0, 0}, NULL, 0};
    pthread_mutex_lock(&L.lock);
    if (ep >= 0) L.eps[ep].in_flight++;
    *L.queue_end = o;
    L.queue_end = &o->next;
    pthread_cond_signal(&L.wake);
    pthread_mutex_unlock(&L.lock);
    return BRG_OK;
}

typedef struct mpi_wire {
    transport_wire base;
    unsigned endpoint;
} mpi_wire;

static brg_status wire_post(transport_wire *w, int to_rank, int tag, void *buf, size_t bytes) {
    const mpi_wire *mw = (const mpi_wire *)w;
    if (to_rank < 0 || to_rank >= L.size || to_rank == L.rank || bytes < sizeof(frame)) {
        free(buf);
        return brg_error(BRG_ERR_INTERNAL, "rank %d posts %zu bytes to rank %d of %d", L.rank, bytes, to_rank, L.size);
    }
    *(frame *)buf = (frame){FRAME_MESSAGE, mw->endpoint, bytes};
    return enqueue(to_rank, tag, (int)mw->endpoint, buf, bytes);
}

static void wire_close(transport_wire *w) {
    mpi_wire *mw = (mpi_wire *)w;
    pthread_mutex_lock(&L.lock);
    endpoint *e = &L.eps[mw->endpoint];
    /* What it sent must go out (a peer may still need it); a peer that never takes it is gone. */
    double until = now() + (L.timeout > 0 ? L.timeout : 60);
    while (e->in_flight > 0 && now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&L.sent, &L.lock, &ts);
    }
    e->open = false;
    pthread_mutex_unlock(&L.lock);
    free(mw);
}

static brg_status wire_open(void *arg, wire_deliver_fn deliver, void *ctx, transport_wire **out) {
    (void)arg;
    mpi_wire *mw = calloc(1, sizeof *mw);
    if (!mw) return brg_error(BRG_ERR_OOM, "cannot open the MPI link");
    pthread_mutex_lock(&L.lock);
    if (L.n_eps == L.cap_eps) {
        unsigned cap = L.cap_eps ? 2 * L.cap_eps : 8;
        endpoint *grown = realloc(L.eps, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&L.lock);
            free(mw);
            return brg_error(BRG_ERR_OOM, "cannot open the MPI link");
        }
        L.eps = grown, L.cap_eps = cap;
    }
    mw->endpoint = L.n_eps;
    L.eps[L.n_eps++] = (endpoint){true, deliver, ctx, 0};
    /* What came for it before it existed here. */
    for (parked **p = &L.parked; *p;) {
        parked *k = *p;
        if (k->endpoint != mw->endpoint) {
            p = &k->next;
            continue;
        }
        *p = k->next;
        deliver(ctx, k->buf, k->bytes);
        free(k);
    }
    pthread_mutex_unlock(&L.lock);
    mw->base = (transport_wire){L.rank, L.size, wire_post, wire_close};
    *out = &mw->base;
    return BRG_OK;
}

brg_status transport_mpi_create(int n_devices, transport **out) {
    int *device_rank = malloc((size_t)(n_devices > 0 ? n_devices : 1) * sizeof *device_rank);
    if (!device_rank) return brg_error(BRG_ERR_OOM, "cannot place %d devices", n_devices);
    brg_status st = brg_ranks_layout(n_devices, device_rank);
    L.timeout = brg_ranks_timeout();
    if (st == BRG_OK)
        st = transport_ranks_create(n_devices, device_rank, L.rank, L.size, brg_ranks_timeout(), wire_open, NULL, out);
    free(device_rank);
    return st;
}

/* ---- start and end ---- */

brg_status ranks_mpi_start(int *rank, int *size) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return brg_error(BRG_ERR_INTERNAL, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED)
        return brg_error(BRG_ERR_UNSUPPORTED, "this MPI gives thread level %d; brigade needs MPI_THREAD_SERIALIZED",
                         provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &L.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &L.size);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &L.comm) != MPI_SUCCESS) return brg_error(BRG_ERR_INTERNAL, "MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(L.comm, MPI_ERRORS_RETURN);
    int *ub = NULL, found = 0;
    MPI_Comm_get_attr(L.comm, MPI_TAG_UB, &ub, &found);
    L.tag_ub = found && ub ? *ub : 32767;
    const char *chunk = getenv("BRIGADE_MPI_CHUNK");
    long long c = chunk ? atoll(chunk) : 0;
    L.chunk = c >= 64 && c <= (1LL << 30) ? (size_t)c : (size_t)1 << 30;
    L.timeout = brg_ranks_timeout();
    L.sources = calloc((size_t)L.size, sizeof *L.sources);
    if (!L.sources) return brg_error(BRG_ERR_OOM, "cannot start the MPI link");
    for (int s = 0; s < L.size; s++) L.sources[s].req = MPI_REQUEST_NULL;
    L.queue_end = &L.queue;
    BRG_TRY(brg_pool_create(1, "the MPI link", &L.thread));
    brg_pool_launch(L.thread, link_main, NULL);
    L.running = true;
    *rank = L.rank;
    *size = L.size;
    return BRG_OK;
}

/* Tells every other rank how this one ends, then waits up to `seconds` for all of theirs. */
static bool all_said_bye(int exit_status, double seconds) {
    for (int r = 0; r < L.size; r++) {
        if (r == L.rank) continue;
        frame *f = malloc(sizeof *f);
        if (!f) return false;
        *f = (frame){FRAME_BYE, 0, (uint64_t)(exit_status != 0)};
        if (enqueue(r, 0, -1, f, sizeof *f) != BRG_OK) return false;
    }
    pthread_mutex_lock(&L.lock);
    double until = now() + seconds;
    while (L.byes < L.size - 1 && now() < until) {
        pthread_mutex_unlock(&L.lock);
        usleep(1000);
        pthread_mutex_lock(&L.lock);
    }
    bool all = L.byes == L.size - 1 && (L.bye_failures == 0) == (exit_status == 0);
    pthread_mutex_unlock(&L.lock);
    return all;
}

bool ranks_mpi_settle(int exit_status) {
    if (!L.running) return true;
    /* Ending well, a rank waits for the others however long they take (rank 0 may be writing a
     * large model): one that fails ends them all anyway. */
    return all_said_bye(exit_status, exit_status == 0 ? 1e12 : 5.0);
}

void ranks_mpi_stop(bool together, int exit_status) {
    if (!L.running) return;
    if (!together) {
        pthread_mutex_lock(&mpi_lock);
        MPI_Abort(MPI_COMM_WORLD, exit_status ? exit_status : 1);
        _exit(exit_status ? exit_status : 1);
    }
    pthread_mutex_lock(&L.lock);
    L.stop = true;
    pthread_cond_signal(&L.wake);
    pthread_mutex_unlock(&L.lock);
    brg_pool_destroy(L.thread);
    L.thread = NULL;
    L.running = false;
    for (parked *p = L.parked, *next; p; p = next) next = p->next, free(p->buf), free(p);
    for (int s = 0; s < L.size; s++) free(L.sources[s].buf);
    free(L.sources);
    free(L.eps);
    MPI_Comm_free(&L.comm);
    MPI_Finalize();
}
