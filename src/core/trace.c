/* The trace recorder (brigade/trace.h): per-thread event buffers, written as Chrome trace-event
 * JSON at the end.
 *
 * A thread's first event of a trace registers a buffer for it (under the lock, once); every
 * later event is a store into that buffer's current chunk, which only its thread touches. The
 * buffers are read when the file is written, once no thread records any more. Buffers of an
 * earlier trace are never touched again: a thread's buffer pointer is valid only while its
 * session number matches the recorder's. The recorder sits in core because every layer records
 * (models for generation, the runtime, the trainer, the commands); what it knows of devices is
 * what threads tell it. */
#include "brigade/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/atomic_file.h"

atomic_bool brg_trace_on_;

enum {
    CHUNK_EVENTS = 4096,
    MAX_EVENTS_PER_THREAD = 1 << 20, /* ~48 MiB a thread; later events are counted as dropped */
    HOST_TID = 100000,               /* a tid no device has; other threads follow it */
    KIND_MEMORY = BRG_TRACE_KIND_COUNT,
};

typedef struct event {
    uint64_t t0, t1;
    int64_t bytes;
    const char *name;
    int32_t a, b;
    uint8_t kind;
} event;

typedef struct chunk {
    struct chunk *next;
    int n;
    event ev[CHUNK_EVENTS];
} chunk;

typedef struct thread_buf {
    struct thread_buf *next;
    int tid, replica, stage;
    bool device, host;
    char name[48]; /* brg_trace_set_thread_name's; "": none */
    chunk *head, *tail;
    int64_t n, dropped;
} thread_buf;

static struct {
    pthread_mutex_t lock;
    atomic_uint session; /* 0: never started; bumped by every start */
    bool started;        /* between brg_trace_start and finish / discard */
    brg_atomic_file file;
    char process[128];
    int rank, others;
    pthread_t host;
    uint64_t origin;
    thread_buf *threads;
} rec = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* What a thread said about itself, and its buffer for the session it was made in. */
static _Thread_local int tls_device = -1, tls_replica, tls_stage;
static _Thread_local thread_buf *tls_buf;
static _Thread_local unsigned tls_session;
static _Thread_local char tls_name[48];

uint64_t brg_trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void brg_trace_set_device(int device, int replica, int stage) {
    tls_device = device;
    tls_replica = replica;
    tls_stage = stage;
}

void brg_trace_set_thread_name(const char *name) { snprintf(tls_name, sizeof tls_name, "%s", name ? name : ""); }

void brg_trace_set_rank(int rank) {
    pthread_mutex_lock(&rec.lock);
    rec.rank = rank;
    pthread_mutex_unlock(&rec.lock);
}

/* The calling thread's buffer in the current trace, registered on first use; NULL when the
 * trace has stopped meanwhile or memory ran out. */
static thread_buf *my_buffer(void) {
    unsigned session = atomic_load_explicit(&rec.session, memory_order_acquire);
    if (tls_buf && tls_session == session) return tls_buf;
    thread_buf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_lock(&rec.lock);
    if (!rec.started || atomic_load(&rec.session) != session) {
        pthread_mutex_unlock(&rec.lock);
        free(b);
        return NULL;
    }
    b->device = tls_device >= 0;
    b->host = !b->device && pthread_equal(pthread_self(), rec.host);
    b->tid = b->device ? tls_device : b->host ? HOST_TID : HOST_TID + 1 + rec.others++;
    b->replica = tls_replica;
    b->stage = tls_stage;
    memcpy(b->name, tls_name, sizeof b->name);
    b->next = rec.threads;
    rec.threads = b;
    pthread_mutex_unlock(&rec.lock);
    tls_buf = b;
    tls_session = session;
    return b;
}

static event *next_slot(thread_buf *b) {
    if (b->n >= MAX_EVENTS_PER_THREAD) {
        b->dropped++;
        return NULL;
    }
    if (!b->tail || b->tail->n == CHUNK_EVENTS) {
        chunk *c = malloc(sizeof *c);
        if (!c) {
            b->dropped++;
            return NULL;
        }
        c->next = NULL;
        c->n = 0;
        if (b->tail) b->tail->next = c;
        else b->head = c;
        b->tail = c;
    }
    b->n++;
    return &b->tail->ev[b->tail->n++];
}

static void record(int kind, uint64_t t0, uint64_t t1, int a, int b, int64_t bytes, const char *name) {
    if (!brg_trace_enabled()) return;
    thread_buf *buf = my_buffer();
    event *e = buf ? next_slot(buf) : NULL;
    if (e) *e = (event){t0, t1, bytes, name, a, b, (uint8_t)kind};
}

void brg_trace_span(brg_trace_kind kind, uint64_t t0, int a, int b, int64_t bytes, const char *name) {
    if (!brg_trace_enabled() || (int)kind < 0 || kind >= BRG_TRACE_KIND_COUNT) return;
    record(kind, t0, brg_trace_now(), a, b, bytes, name);
}

void brg_trace_memory(int device, int64_t bytes) {
    if (!brg_trace_enabled()) return;
    const uint64_t now = brg_trace_now();
    record(KIND_MEMORY, now, now, device, 0, bytes, NULL);
}

void brg_trace_counts(int64_t *recorded, int64_t *dropped) {
    int64_t n = 0, d = 0;
    pthread_mutex_lock(&rec.lock);
    for (const thread_buf *b = rec.threads; b; b = b->next) n += b->n, d += b->dropped;
    pthread_mutex_unlock(&rec.lock);
    if (recorded) *recorded = n;
    if (dropped) *dropped = d;
}

static void free_threads(void) {
    for (thread_buf *b = rec.threads; b;) {
        for (chunk *c = b->head; c;) {
            chunk *next = c->next;
            free(c);
            c = next;
        }
        thread_buf *next = b->next;
        free(b);
        b = next;
    }
    rec.threads = NULL;
}

brg_status brg_trace_start(const char *path, const char *process) {
    if (!path || !*path) return brg_error(BRG_ERR_INVALID_ARG, "the trace needs a file name");
    pthread_mutex_lock(&rec.lock);
    if (rec.started) {
        pthread_mutex_unlock(&rec.lock);
        return brg_error(BRG_ERR_INVALID_ARG, "a trace is already being recorded");
    }
    brg_status st = brg_atomic_file_open(path, &rec.file);
    if (st != BRG_OK) {
        pthread_mutex_unlock(&rec.lock);
        return brg_error_wrap(st, "--trace %s", path);
    }
    snprintf(rec.process, sizeof rec.process, "%s", process ? process : "brigade");
    rec.started = true;
    rec.others = 0;
    rec.host = pthread_self();
    rec.origin = brg_trace_now();
    atomic_fetch_add(&rec.session, 1);
    atomic_store(&brg_trace_on_, true);
    pthread_mutex_unlock(&rec.lock);
    return BRG_OK;
}

/* ---- the JSON file ---- */

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static const char *category(int kind) {
    switch (kind) {
    case BRG_TRACE_FORWARD:
    case BRG_TRACE_BACKWARD:
    case BRG_TRACE_RECOMPUTE: return "compute";
    case BRG_TRACE_SEND:
    case BRG_TRACE_RECV:
    case BRG_TRACE_ALL_REDUCE:
    case BRG_TRACE_BROADCAST:
    case BRG_TRACE_BARRIER: return "transport";
    case BRG_TRACE_OPTIMIZER: return "optimizer";
    default: return "host";
    }
}

/* The event's name and its "args" object's members. */
static void describe(const event *e, char *name, size_t nn, char *args, size_t na) {
    static const char *const pass[] = {"forward", "backward", "recompute"};
    const char *what = e->name ? e->name : "message";
    switch (e->kind) {
    case BRG_TRACE_FORWARD:
    case BRG_TRACE_BACKWARD:
    case BRG_TRACE_RECOMPUTE:
        snprintf(name, nn, "%s block %d mb %d", pass[e->kind], e->a, e->b);
        snprintf(args, na, "\"block\": %d, \"micro_batch\": %d, \"direction\": \"%s\"", e->a, e->b,
                 e->kind == BRG_TRACE_BACKWARD ? "backward" : "forward");
        return;
    case BRG_TRACE_SEND:
    case BRG_TRACE_RECV: {
        const bool send = e->kind == BRG_TRACE_SEND;
        char mb[32] = "";
        if (e->b >= 0) snprintf(mb, sizeof mb, " mb %d", e->b);
        snprintf(name, nn, "%s %s%s %s device %d", send ? "send" : "recv", what, mb, send ? "to" : "from", e->a);
        snprintf(args, na, "\"peer\": %d, \"micro_batch\": %d, \"direction\": \"%s\", \"bytes\": %lld", e->a, e->b,
                 what, (long long)e->bytes);
        return;
    }
    case BRG_TRACE_ALL_REDUCE:
        snprintf(name, nn, "all-reduce");
        snprintf(args, na, "\"bytes\": %lld", (long long)e->bytes);
        return;
    case BRG_TRACE_BROADCAST:
        snprintf(name, nn, "broadcast from device %d", e->a);
        snprintf(args, na, "\"root\": %d, \"bytes\": %lld", e->a, (long long)e->bytes);
        return;
    case BRG_TRACE_BARRIER:
        snprintf(name, nn, "barrier");
        args[0] = 0;
        return;
    case BRG_TRACE_OPTIMIZER:
        snprintf(name, nn, "optimizer step");
        snprintf(args, na, "\"step\": %d", e->a);
        return;
    default: /* named */
        if (e->a >= 0) snprintf(name, nn, "%s %d", e->name ? e->name : "span", e->a);
        else snprintf(name, nn, "%s", e->name ? e->name : "span");
        if (e->a >= 0 && e->bytes) snprintf(args, na, "\"index\": %d, \"bytes\": %lld", e->a, (long long)e->bytes);
        else if (e->a >= 0) snprintf(args, na, "\"index\": %d", e->a);
        else if (e->bytes) snprintf(args, na, "\"bytes\": %lld", (long long)e->bytes);
        else args[0] = 0;
    }
}

static double micros(uint64_t ns) { return (double)ns / 1000.0; }

static void put_event(FILE *f, const thread_buf *b, const event *e, int pid, uint64_t origin) {
    const uint64_t t0 = e->t0 > origin ? e->t0 - origin : 0;
    if (e->kind == KIND_MEMORY) {
        fprintf(f, ",\n{\"name\": \"memory device %d\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d, "
                   "\"args\": {\"bytes\": %lld}}",
                e->a, micros(t0), pid, b->tid, (long long)e->bytes);
        return;
    }
    char name[160], args[256];
    describe(e, name, sizeof name, args, sizeof args);
    fputs(",\n{\"name\": ", f);
    put_string(f, name);
    fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {%s}}",
            category(e->kind), micros(t0), micros(e->t1 > e->t0 ? e->t1 - e->t0 : 0), pid, b->tid, args);
}

/* thread_name and thread_sort_index of a track, once per tid (devices of several runtimes in
 * one run share their track). */
static void put_track(FILE *f, const thread_buf *b, int pid) {
    for (const thread_buf *o = rec.threads; o != b; o = o->next)
        if (o->tid == b->tid) return;
    char name[96];
    if (b->device) snprintf(name, sizeof name, "device %d (replica %d, stage %d)", b->tid, b->replica, b->stage);
    else if (b->host) snprintf(name, sizeof name, "host");
    else if (b->name[0]) snprintf(name, sizeof name, "%s", b->name);
    else snprintf(name, sizeof name, "thread %d", b->tid - HOST_TID);
    fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ", pid, b->tid);
    put_string(f, name);
    fprintf(f, "}},\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": "
               "{\"sort_index\": %d}}",
            pid, b->tid, b->host ? -1 : b->tid);
}

static void write_json(FILE *f) {
    const int pid = rec.rank;
    char process[160];
    snprintf(process, sizeof process, "%s (rank %d)", rec.process, pid);
    fprintf(f, "{\"traceEvents\": [\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
               "\"args\": {\"name\": ",
            pid, HOST_TID);
    put_string(f, process);
    fputs("}}", f);
    /* The list is newest first: write it oldest first, so tracks appear in the order they began. */
    int n = 0;
    for (const thread_buf *b = rec.threads; b; b = b->next) n++;
    const thread_buf **order = calloc((size_t)(n ? n : 1), sizeof *order);
    int i = n;
    for (const thread_buf *b = rec.threads; order && b; b = b->next) order[--i] = b;
    int64_t dropped = 0;
    for (i = 0; order && i < n; i++) {
        put_track(f, order[i], pid);
        for (const chunk *c = order[i]->head; c; c = c->next)
            for (int k = 0; k < c->n; k++) put_event(f, order[i], &c->ev[k], pid, rec.origin);
        dropped += order[i]->dropped;
    }
    free(order);
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"clock\": \"CLOCK_MONOTONIC\", "
               "\"dropped_events\": %lld}}\n",
            (long long)dropped);
}

/* Stops recording: events of threads still running after this are not kept. */
static void stop(void) {
    atomic_store(&brg_trace_on_, false);
    rec.started = false;
}

brg_status brg_trace_finish(void) {
    pthread_mutex_lock(&rec.lock);
    if (!rec.started) {
        pthread_mutex_unlock(&rec.lock);
        return BRG_OK;
    }
    stop();
    write_json(rec.file.fp);
    brg_status st = BRG_OK;
    if (ferror(rec.file.fp)) {
        st = brg_error(BRG_ERR_IO, "cannot write the trace %s", rec.file.path);
        brg_atomic_file_abort(&rec.file);
    } else {
        st = brg_atomic_file_commit(&rec.file);
    }
    free_threads();
    pthread_mutex_unlock(&rec.lock);
    return st;
}

void brg_trace_discard(void) {
    pthread_mutex_lock(&rec.lock);
    if (rec.started) {
        stop();
        brg_atomic_file_abort(&rec.file);
        free_threads();
    }
    pthread_mutex_unlock(&rec.lock);
}
