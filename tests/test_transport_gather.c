/* transport_all_gather: every copy of a piece ends with its source's bits (-0.0 and NaN
 * payloads included), on the threads transport, the serialising wrapper and the ranks transport
 * over a loopback wire; pieces out of key order are refused. */
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

static void check_gather(transport_factory make, const char *name) {
    transport *t = NULL;
    CHECK_OK(make(N, &t));
    if (!t) return;
    for (int round = 0; round < 2; round++) {
        device_mem mem[N];
        for (int d = 0; d < N; d++)
            for (int k = 0; k < KEYS; k++)
                for (int i = 0; i < COUNT; i++) {
                    uint32_t b = d == source_of(k) ? source_bits(k, i) : 0x7f800000u; /* others: inf */
                    memcpy(&mem[d].v[k][i], &b, sizeof b);
                }
        job jobs[N];
        pthread_t th[N];
        for (int d = 0; d < N; d++) {
            jobs[d] = (job){t, d, mem, BRG_OK, ""};
            pthread_create(&th[d], NULL, gather_thread, &jobs[d]);
        }
        for (int d = 0; d < N; d++) pthread_join(th[d], NULL);
        for (int d = 0; d < N; d++) CHECK_MSG(jobs[d].st == BRG_OK, "%s: device %d: %s", name, d, jobs[d].error);
        for (int d = 0; d < N; d++)
            for (int k = 0; k < KEYS; k++)
                for (int i = 0; i < COUNT; i++) {
                    uint32_t got;
                    memcpy(&got, &mem[d].v[k][i], sizeof got);
                    const uint32_t want = holds(d, k) && count_of(k) ? source_bits(k, i)
                                          : d == source_of(k)         ? source_bits(k, i)
                                                                      : 0x7f800000u;
                    CHECK_MSG(got == want, "%s, round %d: device %d key %d [%d]: %08x, wanted %08x", name, round, d, k,
                              i, got, want);
                }
    }
    t->destroy(t);
}

static void check_unsorted(void) {
    transport *t = NULL;
    CHECK_OK(transport_threads_create(2, &t));
    if (!t) return;
    float a[2] = {0}, b[2] = {0};
    transport_piece rows[2] = {{3, 0, 1, a, 2}, {1, 0, 1, b, 2}};
    CHECK_ERR(transport_all_gather(t, 0, rows, 2), BRG_ERR_INTERNAL, "not sorted by key");
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
    check_unsorted();
    return test_finish();
}
