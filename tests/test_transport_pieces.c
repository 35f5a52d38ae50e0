/* The collectives over pieces, on the threads transport, the serialising wrapper and the ranks
 * transport over a loopback wire:
 * - transport_all_gather: every copy of a piece ends with its source's bits (-0.0 and NaN
 *   payloads included);
 * - transport_reduce_scatter: every wanted piece ends with its contributors' values added in
 *   device order (values chosen so that any other order gives other bits), whether the device
 *   that wants it contributes first, later or not at all; nothing else changes.
 * Pieces out of key order are refused. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "ranks_loopback.h"
#include "runtime/transport.h"
#include "test_util.h"

enum { N = 4, KEYS = 6, COUNT = 5 };

/* Key k's source is device k % N; device (k + 1) % N holds no copy; key 4 is empty. */
static int source_of(int k) { return k % N; }
static bool holds(int d, int k) { return d != (k + 1) % N; }
static size_t count_of(int k) { return k == 4 ? 0 : COUNT; }

static uint32_t source_bits(int k, int i) {
    if (i == 0) return 0x80000000u;              /* -0.0 */
    if (i == 1) return 0x7fc00000u | (uint32_t)k; /* a NaN with a payload */
    return 0x3f800000u + (uint32_t)(k * 16 + i);
}

typedef struct device_mem {
    float v[KEYS][COUNT];
} device_mem;

typedef struct job {
    transport *t;
    int id;
    device_mem *mem;
    brg_status st;
    char error[256];
} job;

static void *gather_thread(void *arg) {
    job *j = arg;
    transport_piece rows[KEYS * N];
    int n = 0;
    for (int k = 0; k < KEYS; k++) {
        if (!holds(j->id, k)) continue;
        const int src = source_of(k);
        for (int d = 0; d < N; d++) {
            if (!holds(d, k) || (d != j->id && src != j->id)) continue;
            rows[n++] = (transport_piece){k, src, d, j->mem[j->id].v[k], count_of(k)};
        }
    }
    brg_clear_error();
    j->st = transport_all_gather(j->t, j->id, rows, n);
    snprintf(j->error, sizeof j->error, "%s", j->st ? brg_last_error() : "");
    return NULL;
}

/* Every device's thread runs the collective once; each must succeed. */
static void run_devices(transport *t, device_mem *mem, void *(*thread)(void *), const char *name) {
    job jobs[N];
    pthread_t th[N];
    for (int d = 0; d < N; d++) {
        jobs[d] = (job){t, d, mem, BRG_OK, ""};
        pthread_create(&th[d], NULL, thread, &jobs[d]);
    }
    for (int d = 0; d < N; d++) pthread_join(th[d], NULL);
    for (int d = 0; d < N; d++) CHECK_MSG(jobs[d].st == BRG_OK, "%s: device %d: %s", name, d, jobs[d].error);
}

/* A collective's case: the bits device d's piece of key k starts with, and holds afterwards. */
typedef uint32_t (*bits_fn)(int d, int k, int i);

/* Two rounds of the collective over `make`'s transport, every element's bits checked. */
static void check_collective(transport_factory make, const char *name, void *(*thread)(void *), bits_fn before,
                             bits_fn after) {
    transport *t = NULL;
    CHECK_OK(make(N, &t));
    if (!t) return;
    for (int round = 0; round < 2; round++) {
        device_mem mem[N];
        for (int d = 0; d < N; d++)
            for (int k = 0; k < KEYS; k++)
                for (int i = 0; i < COUNT; i++) {
                    const uint32_t b = before(d, k, i);
                    memcpy(&mem[d].v[k][i], &b, sizeof b);
                }
        run_devices(t, mem, thread, name);
        for (int d = 0; d < N; d++)
            for (int k = 0; k < KEYS; k++)
                for (int i = 0; i < COUNT; i++) {
                    uint32_t got;
                    memcpy(&got, &mem[d].v[k][i], sizeof got);
                    const uint32_t want = after(d, k, i);
                    CHECK_MSG(got == want, "%s, round %d: device %d key %d [%d]: %08x, wanted %08x", name, round, d, k,
                              i, got, want);
                }
    }
    t->destroy(t);
}

static uint32_t gather_before(int d, int k, int i) {
    return d == source_of(k) ? source_bits(k, i) : 0x7f800000u; /* others: inf */
}

static uint32_t gather_after(int d, int k, int i) {
    return (holds(d, k) && count_of(k)) || d == source_of(k) ? source_bits(k, i) : 0x7f800000u;
}

static void check_gather(transport_factory make, const char *name) {
    check_collective(make, name, gather_thread, gather_before, gather_after);
}

/* ---- reduce-scatter ---- */

/* Key k is wanted by device k % N (a contributor: first for k = 0, second for k = 1, third for
 * k = 3) and by (k + 1) % N, which holds no copy; key 4 is empty. */
static bool wants(int d, int k) { return d == k % N || d == (k + 1) % N; }

/* Large and small values of both signs: the sum's bits depend on the order of the additions. */
static float contribution(int d, int k, int i) {
    static const float big[N] = {1e8f, 3.0f, -1e8f, 0.25f};
    return big[(d + i) % N] + (float)(k * 7 + i) * 0.001953125f;
}

static void *scatter_thread(void *arg) {
    job *j = arg;
    transport_piece rows[KEYS * N * 2];
    int n = 0;
    float *mine = j->mem[j->id].v[0];
    for (int k = 0; k < KEYS; k++) {
        float *piece = mine + k * COUNT;
        for (int c = 0; wants(j->id, k) && c < N; c++)
            if (holds(c, k)) rows[n++] = (transport_piece){k, c, j->id, piece, count_of(k)};
        for (int d = 0; holds(j->id, k) && d < N; d++)
            if (d != j->id && wants(d, k)) rows[n++] = (transport_piece){k, j->id, d, piece, count_of(k)};
    }
    brg_clear_error();
    j->st = transport_reduce_scatter(j->t, j->id, rows, n);
    snprintf(j->error, sizeof j->error, "%s", j->st ? brg_last_error() : "");
    return NULL;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static uint32_t scatter_before(int d, int k, int i) { return bits_of(holds(d, k) ? contribution(d, k, i) : -7.0f); }

/* What device d's piece of key k holds afterwards. */
static float scattered(int d, int k, int i) {
    if (!wants(d, k) || !count_of(k)) return holds(d, k) ? contribution(d, k, i) : -7.0f;
    float sum = 0;
    bool started = false;
    for (int c = 0; c < N; c++) {
        if (!holds(c, k)) continue;
        sum = started ? sum + contribution(c, k, i) : contribution(c, k, i);
        started = true;
    }
    return sum;
}

static uint32_t scatter_after(int d, int k, int i) { return bits_of(scattered(d, k, i)); }

static void check_scatter(transport_factory make, const char *name) {
    check_collective(make, name, scatter_thread, scatter_before, scatter_after);
    /* the order matters for these values: key 0's contributors (0, 2, 3) added the other way
     * round give other bits */
    const float forward = (contribution(0, 0, 0) + contribution(2, 0, 0)) + contribution(3, 0, 0);
    const float backward = (contribution(3, 0, 0) + contribution(2, 0, 0)) + contribution(0, 0, 0);
    CHECK(forward != backward);
}

static void check_unsorted(void) {
    transport *t = NULL;
    CHECK_OK(transport_threads_create(2, &t));
    if (!t) return;
    float a[2] = {0}, b[2] = {0};
    transport_piece rows[2] = {{3, 0, 1, a, 2}, {1, 0, 1, b, 2}};
    CHECK_ERR(transport_all_gather(t, 0, rows, 2), BRG_ERR_INTERNAL, "not sorted by key");
    CHECK_ERR(transport_reduce_scatter(t, 0, rows, 2), BRG_ERR_INTERNAL, "not sorted by key");
    t->destroy(t);
}

static brg_status make_ranks2(int n, transport **out) { return lb_create(n, 2, 60, out); }
static brg_status make_ranks_all(int n, transport **out) { return lb_create(n, n, 60, out); }

int main(void) {
    alarm(120); /* a hang is a failure */
    check_gather(transport_threads_create, "threads");
    check_gather(transport_serial_threads_create, "serialised");
    check_gather(make_ranks2, "ranks transport, two ranks");
    check_gather(make_ranks_all, "ranks transport, a rank per device");
    check_scatter(transport_threads_create, "threads");
    check_scatter(transport_serial_threads_create, "serialised");
    check_scatter(make_ranks2, "ranks transport, two ranks");
    check_scatter(make_ranks_all, "ranks transport, a rank per device");
    check_unsorted();
    return test_finish();
}
