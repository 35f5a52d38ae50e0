/* The transport: each operation on its own (threads transport, the serialising wrapper, and the
 * ranks transport with its ranks joined by a loopback wire), failures reaching blocked devices as
 * a status, waits that time out, and pipelined + replicated training over the serialising wrapper
 * and the ranks transport bit-identical to the default runtime. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "runtime/transport.h"
#include "ranks_loopback.h"
#include "transport_train.h"

enum { N = 4 };

/* ---- running one function per device on its own thread ---- */

typedef struct per_device {
    transport *t;
    int id;
    void *ctx;
    brg_status (*fn)(transport *t, int id, void *ctx);
    brg_status status;
    char error[256];
} per_device;

static void *device_thread(void *p) {
    per_device *d = p;
    brg_clear_error();
    d->status = d->fn(d->t, d->id, d->ctx);
    snprintf(d->error, sizeof d->error, "%s", d->status ? brg_last_error() : "");
    return NULL;
}

static void on_devices(transport *t, brg_status (*fn)(transport *, int, void *), void *ctx, per_device out[N]) {
    pthread_t th[N];
    for (int d = 0; d < N; d++) {
        out[d] = (per_device){t, d, ctx, fn, BRG_OK, ""};
        pthread_create(&th[d], NULL, device_thread, &out[d]);
    }
    for (int d = 0; d < N; d++) pthread_join(th[d], NULL);
}

static void all_ok(const per_device r[N], const char *what) {
    for (int d = 0; d < N; d++) CHECK_MSG(r[d].status == BRG_OK, "%s: device %d: %s", what, d, r[d].error);
}

/* A random pause, so that devices arrive in varying orders. */
static void nap(int max_us) {
    static _Thread_local unsigned seed;
    if (!seed) seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
    usleep((useconds_t)(rand_r(&seed) % (unsigned)(max_us + 1)));
}

/* ---- send / receive ---- */

/* On a device's thread: a failed expectation fails the device (CHECK's counters are the main
 * thread's). */
#define EXPECT(cond) \
    do { \
        if (!(cond)) return brg_error(BRG_ERR_INTERNAL, "line %d: %s", __LINE__, #cond); \
    } while (0)

/* Device 0 sends two bundles to device 1, tags 7 then 5, changing its tensors right after each
 * send; device 1 receives tag 5 first. Device 2 sends an empty bundle to device 3. */
static brg_status p2p(transport *t, int id, void *ctx) {
    (void)ctx;
    float f[6] = {1, 2, 3, 4, 5, 6};
    int32_t ids[3] = {7, -8, 9};
    brg_tensor a = brg_tensor_wrap(BRG_DTYPE_F32, 3, (int64_t[]){1, 2, 3}, f);
    brg_tensor b = brg_tensor_wrap(BRG_DTYPE_I32, 1, (int64_t[]){3}, ids);
    if (id == 0) {
        brg_named_tensor first[2] = {{"hidden", &a}, {"input_ids", &b}};
        BRG_TRY(t->send(t, 0, 1, 7, first, 2));
        f[0] = ids[0] = -1; /* sent by value: the receiver never sees this */
        brg_named_tensor second[1] = {{"encoder_hidden", &a}};
        BRG_TRY(t->send(t, 0, 1, 5, second, 1));
        f[1] = -1;
        return BRG_OK;
    }
    if (id == 2) return t->send(t, 2, 3, transport_tag(0, TRANSPORT_BACKWARD), NULL, 0);
    if (id == 3) {
        transport_msg m;
        BRG_TRY(t->recv(t, 3, 2, transport_tag(0, TRANSPORT_BACKWARD), &m));
        EXPECT(m.n == 0);
        t->release(t, 3, &m);
        return BRG_OK;
    }
    nap(20000); /* let both arrive first, in either order of the receives */
    transport_msg m5, m7;
    BRG_TRY(t->recv(t, 1, 0, 5, &m5));
    BRG_TRY(t->recv(t, 1, 0, 7, &m7));
    EXPECT(m5.n == 1 && strcmp(m5.items[0].name, "encoder_hidden") == 0);
    const brg_tensor *x = m5.items[0].tensor;
    EXPECT(x->dtype == BRG_DTYPE_F32 && x->ndim == 3 && x->shape[0] == 1 && x->shape[1] == 2 && x->shape[2] == 3);
    EXPECT(((float *)x->data)[0] == -1 && ((float *)x->data)[1] == 2 && ((float *)x->data)[5] == 6);
    EXPECT(m7.n == 2 && strcmp(m7.items[0].name, "hidden") == 0 && strcmp(m7.items[1].name, "input_ids") == 0);
    EXPECT(((float *)m7.items[0].tensor->data)[0] == 1);
    const brg_tensor *y = m7.items[1].tensor;
    EXPECT(y->dtype == BRG_DTYPE_I32 && y->ndim == 1 && y->shape[0] == 3 && ((int32_t *)y->data)[0] == 7 &&
          ((int32_t *)y->data)[1] == -8);
    t->release(t, 1, &m5);
    t->release(t, 1, &m7);
    return BRG_OK;
}

/* ---- all-reduce ---- */

enum { KEYS = 5, LEN = 33 };

/* Which devices hold key k (as replicas and tied weights do): key 0 everywhere, key 1 on the
 * even devices, key 2 on device 3 only, key 3 on 1 and 2, key 4 nowhere. */
static bool holds_key(int d, int k) {
    switch (k) {
    case 0: return true;
    case 1: return d % 2 == 0;
    case 2: return d == 3;
    case 3: return d == 1 || d == 2;
    default: return false;
    }
}

/* Element 0 of key 0 is order-sensitive: (((1 + 1e8) - 1e8) + 1e-3) is 1e-3 in floats, any
 * other order of the four gives something else. */
static float value(int d, int k, int i) {
    if (k == 0 && i == 0) return (float[]){1.0f, 1e8f, -1e8f, 1e-3f}[d];
    return (float)((d + 1) * 0.37 + k * 1.3 + i * 0.011) * (i % 2 ? -1.0f : 1.0f) / (float)(3 + d);
}

typedef struct reduce_ctx {
    float spans[N][KEYS * 64];
    float expect[KEYS][LEN];
} reduce_ctx;

static brg_status reduce(transport *t, int id, void *arg) {
    reduce_ctx *c = arg;
    transport_segment segs[KEYS];
    int n = 0;
    size_t at = 0;
    for (int k = 0; k < KEYS; k++) {
        if (!holds_key(id, k)) continue;
        segs[n++] = (transport_segment){k, at, LEN};
        for (int i = 0; i < LEN; i++) c->spans[id][at + i] = value(id, k, i);
        at += 48 + (size_t)id; /* the spans' layouts differ between devices */
    }
    nap(2000);
    return t->all_reduce(t, id, c->spans[id], segs, n);
}

static void check_all_reduce(transport *t, const char *name) {
    reduce_ctx *c = calloc(1, sizeof *c);
    for (int k = 0; k < KEYS; k++)
        for (int i = 0; i < LEN; i++) {
            bool any = false;
            float acc = 0;
            for (int d = 0; d < N; d++)
                if (holds_key(d, k)) acc = any ? acc + value(d, k, i) : value(d, k, i), any = true;
            c->expect[k][i] = acc;
        }
    CHECK(c->expect[0][0] == 1e-3f);
    for (int round = 0; round < 20; round++) {
        per_device r[N];
        on_devices(t, reduce, c, r);
        all_ok(r, name);
        int bad = 0;
        for (int d = 0; d < N; d++) {
            size_t at = 0;
            for (int k = 0; k < KEYS; k++) {
                if (!holds_key(d, k)) continue;
                bad += memcmp(&c->spans[d][at], c->expect[k], sizeof c->expect[k]) != 0;
                at += 48 + (size_t)d;
            }
        }
        CHECK_MSG(bad == 0, "%s: all-reduce round %d: %d segments differ from the sum in device order", name, round,
                  bad);
    }
    free(c);
}

/* ---- broadcast and barrier ---- */

typedef struct bcast_ctx {
    float got[N][2][4];
    atomic_int arrived;
    int early[N];
} bcast_ctx;

static brg_status bcast(transport *t, int id, void *arg) {
    bcast_ctx *c = arg;
    float src[2][4] = {{1, 2, 3, 4}, {-5, 6, -7, 8}};
    int64_t shape[1] = {4};
    brg_tensor a = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, id == 2 ? src[0] : c->got[id][0]);
    brg_tensor b = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, id == 2 ? src[1] : c->got[id][1]);
    brg_tensor *list[2] = {&a, id == 1 ? NULL : &b}; /* device 1 wants only the first */
    nap(2000);
    BRG_TRY(t->broadcast(t, id, 2, list, 2));
    atomic_fetch_add(&c->arrived, 1);
    nap(2000);
    BRG_TRY(t->barrier(t, id));
    c->early[id] = atomic_load(&c->arrived); /* everyone passed the broadcast before the barrier */
    return BRG_OK;
}

static void check_broadcast_barrier(transport *t, const char *name) {
    bcast_ctx c;
    memset(&c, 0, sizeof c);
    atomic_init(&c.arrived, 0);
    per_device r[N];
    on_devices(t, bcast, &c, r);
    all_ok(r, name);
    for (int d = 0; d < N; d++) {
        if (d == 2) continue;
        CHECK(c.got[d][0][0] == 1 && c.got[d][0][3] == 4);
        CHECK(d == 1 ? c.got[d][1][0] == 0 : c.got[d][1][0] == -5 && c.got[d][1][3] == 8);
        CHECK_MSG(c.early[d] == N, "%s: device %d left the barrier with %d arrived", name, d, c.early[d]);
    }
}

/* ---- abort ---- */

/* Device 3 fails while 0 waits for a message, 1 in a barrier and 2 in an all-reduce. */
static brg_status fail_one(transport *t, int id, void *arg) {
    (void)arg;
    float x[4] = {0};
    transport_segment seg = {0, 0, 4};
    transport_msg m;
    switch (id) {
    case 0: return t->recv(t, 0, 1, transport_tag(3, TRANSPORT_FORWARD), &m);
    case 1: return t->barrier(t, 1);
    case 2: return t->all_reduce(t, 2, x, &seg, 1);
    default:
        usleep(50000);
        t->abort(t, 3, BRG_ERR_IO, "disk full");
        t->abort(t, 3, BRG_ERR_OOM, "a follower's later abort changes nothing");
        return BRG_ERR_IO;
    }
}

static void check_abort(transport *t, const char *name) {
    per_device r[N];
    on_devices(t, fail_one, NULL, r);
    for (int d = 0; d < 3; d++)
        CHECK_MSG(r[d].status == BRG_ERR_IO && strstr(r[d].error, "device 3"),
                  "%s: blocked device %d returned %s (%s)", name, d, brg_status_name(r[d].status), r[d].error);
    int who = -1;
    const char *why = NULL;
    CHECK(t->failure(t, &who, &why) == BRG_ERR_IO && who == 3 && why && strcmp(why, "disk full") == 0);
    /* Nothing new starts while the failure stands, then reset clears it. */
    CHECK(t->barrier(t, 0) == BRG_ERR_IO);
    t->reset(t);
    CHECK(t->failure(t, &who, &why) == BRG_OK);
    check_broadcast_barrier(t, name);
}

static void check_ops(transport_factory make, const char *name) {
    transport *t = NULL;
    CHECK_OK(make(N, &t));
    if (!t) return;
    for (int round = 0; round < 3; round++) {
        per_device r[N];
        on_devices(t, p2p, NULL, r);
        all_ok(r, name);
    }
    check_all_reduce(t, name);
    check_broadcast_barrier(t, name);
    /* A fresh transport: the ranks transport plans its all-reduce at the first one, and the abort
     * test's has other keys. */
    t->destroy(t);
    t = NULL;
    CHECK_OK(make(N, &t));
    if (!t) return;
    check_abort(t, name);
    t->destroy(t);
}

/* ---- the runtime over a transport ---- */

static brg_status create_serial(brg_model *m, const brg_runtime_options *o, brg_runtime **out) {
    return runtime_create_over(m, o, transport_serial_threads_create, out);
}

/* The ranks transport over the loopback wire: one rank holding every device, two ranks, and as
 * many ranks as devices. */
static brg_status make_ranks(int n_devices, int n_ranks, transport **out) {
    return lb_create(n_devices, n_ranks < n_devices ? n_ranks : n_devices, 60, out);
}
static brg_status make_ranks1(int n, transport **out) { return make_ranks(n, 1, out); }
static brg_status make_ranks2(int n, transport **out) { return make_ranks(n, 2, out); }
static brg_status make_ranks_all(int n, transport **out) { return make_ranks(n, n, out); }
static brg_status create_ranks2(brg_model *m, const brg_runtime_options *o, brg_runtime **out) {
    return runtime_create_over(m, o, make_ranks2, out);
}
static brg_status create_ranks_all(brg_model *m, const brg_runtime_options *o, brg_runtime **out) {
    return runtime_create_over(m, o, make_ranks_all, out);
}

/* Training through `create` ends with the weights and losses of the default runtime, bit for bit. */
static void check_same_training(const tt_layout *l, const tt_trained *threads, tt_create_fn create, const char *name) {
    tt_trained other;
    tt_train(l, create, &other);
    int bad = 0;
    for (int p = 0; p < threads->n_params && p < other.n_params; p++)
        bad += memcmp(threads->weights[p], other.weights[p], (size_t)threads->numel[p] * sizeof(float)) != 0;
    CHECK_MSG(threads->n_params > 0 && threads->n_params == other.n_params && bad == 0,
              "%s: %d parameters differ between the threads transport and %s", l->what, bad, name);
    CHECK_MSG(memcmp(threads->losses, other.losses, sizeof threads->losses) == 0, "%s: losses differ (%s)", l->what, name);
    tt_free(&other);
}

/* A wait that nothing answers gives up after the timeout, naming whom it waited for. */
static void check_timeout(void) {
    transport *t = NULL;
    CHECK_OK(lb_create(2, 2, 0.2, &t));
    if (!t) return;
    transport_msg m;
    const double t0 = runtime_now();
    CHECK_ERR(t->recv(t, 0, 1, transport_tag(3, TRANSPORT_BACKWARD), &m), BRG_ERR_IO,
              "no message from device 1 (rank 1) in 0.2 s (micro-batch 3's gradients)");
    CHECK(runtime_now() - t0 < 5);
    t->destroy(t);
}

static void check_training(void) {
    for (int i = 0; i < TT_N_LAYOUTS; i++) {
        const tt_layout *l = &TT_LAYOUTS[i];
        tt_trained threads, serial;
        tt_train(l, brg_runtime_create, &threads);
        check_same_training(l, &threads, create_ranks2, "the ranks transport over two ranks");
        check_same_training(l, &threads, create_ranks_all, "the ranks transport, a rank per device");
        tt_train(l, create_serial, &serial);
        int bad = 0;
        for (int p = 0; p < threads.n_params && p < serial.n_params; p++)
            bad += memcmp(threads.weights[p], serial.weights[p], (size_t)threads.numel[p] * sizeof(float)) != 0;
        CHECK_MSG(threads.n_params > 0 && threads.n_params == serial.n_params && bad == 0,
                  "%s: %d parameters differ between the threads transport and the serialising one", l->what, bad);
        CHECK_MSG(memcmp(threads.losses, serial.losses, sizeof threads.losses) == 0, "%s: losses differ", l->what);
        CHECK(threads.hash == serial.hash);
        printf("%s: weights after %d steps %016llx (threads) %016llx (serialised)\n", l->what, TT_STEPS,
               (unsigned long long)threads.hash, (unsigned long long)serial.hash);
        tt_free(&threads);
        tt_free(&serial);
    }
}

/* A device job that fails on device 2 while the others wait on a barrier: the run returns the
 * failing device's status and message, and the runtime works again afterwards. */
static brg_status fail_on_two(brg_device *dev, void *arg) {
    (void)arg;
    if (dev->id == 2) return brg_error(BRG_ERR_NOT_FOUND, "no such thing on device 2");
    return dev->rt->transport->barrier(dev->rt->transport, dev->id);
}

static brg_status barrier_job(brg_device *dev, void *arg) {
    (void)arg;
    return dev->rt->transport->barrier(dev->rt->transport, dev->id);
}

/* Each device contributes one tensor holding its id (device 1: none, device 3: two). */
static int list_ids(brg_device *dev, void *arg, brg_named_tensor *list, int cap) {
    float *ids = arg;
    int n = dev->id == 1 ? 0 : dev->id == 3 ? 2 : 1;
    static const char *names[N][2] = {{"d0"}, {""}, {"d2"}, {"d3a", "d3b"}};
    ids[2 * dev->id] = (float)dev->id, ids[2 * dev->id + 1] = (float)(10 * dev->id);
    static brg_tensor views[N][2];
    for (int i = 0; i < n && i < cap; i++) {
        views[dev->id][i] = brg_tensor_wrap(BRG_DTYPE_F32, 1, (int64_t[]){1}, &ids[2 * dev->id + i]);
        list[i] = (brg_named_tensor){names[dev->id][i], &views[dev->id][i]};
    }
    return n;
}

static void check_runtime_exchanges(transport_factory make, const char *name) {
    const tt_layout *l = &TT_LAYOUTS[1];
    brg_model *m = tt_model(l->arch);
    brg_runtime_options o = {.replicas = 2, .stages = 2, .block_stage = l->block_stage, .micro_batches = 2,
                             .schedule = BRG_SCHEDULE_1F1B, .training = true};
    brg_runtime *rt = NULL;
    CHECK_OK(runtime_create_over(m, &o, make, &rt));
    if (!rt) {
        brg_model_destroy(m);
        return;
    }
    CHECK_ERR(brg_runtime_each_device(rt, fail_on_two, NULL), BRG_ERR_NOT_FOUND, "device 2 (replica 1, stage 0)");
    CHECK(strstr(brg_last_error(), "no such thing") != NULL);
    CHECK_OK(brg_runtime_each_device(rt, barrier_job, NULL));
    /* Gathers arrive in device order. */
    float ids[2 * N];
    brg_arena *host;
    CHECK_OK(brg_arena_create("host", 0, &host));
    brg_named_tensor *got = NULL;
    size_t n = 0;
    CHECK_OK(brg_runtime_gather(rt, list_ids, ids, host, &got, &n));
    const char *order[] = {"d0", "d2", "d3a", "d3b"};
    const float vals[] = {0, 2, 3, 30};
    CHECK_MSG(n == 4, "%s: gathered %zu tensors", name, n);
    for (size_t i = 0; i < n && i < 4; i++)
        CHECK(strcmp(got[i].name, order[i]) == 0 && ((float *)got[i].tensor->data)[0] == vals[i]);
    brg_arena_destroy(host);
    /* Weights out to the model and back: every copy equals the model's. */
    float *w0 = m->params[0].tensor->data;
    w0[0] += 1.0f;
    CHECK_OK(brg_runtime_sync_from_model(rt));
    for (int d = 0; d < brg_runtime_device_count(rt); d++)
        for (int p = 0; p < m->n_params; p++) {
            brg_device_info info;
            brg_device_get_info(brg_runtime_device(rt, d), &info);
            if (info.holds[p])
                CHECK(memcmp(info.view->params[p].tensor->data, m->params[p].tensor->data,
                             brg_tensor_nbytes(m->params[p].tensor)) == 0);
        }
    float kept = w0[0];
    w0[0] = 0;
    CHECK_OK(brg_runtime_sync_to_model(rt));
    CHECK(w0[0] == kept);
    brg_runtime_destroy(rt);
    brg_model_destroy(m);
}

int main(void) {
    alarm(300); /* a hang is a failure, not a stuck test */
    check_ops(transport_threads_create, "threads");
    check_ops(transport_serial_threads_create, "serialised");
    check_runtime_exchanges(transport_threads_create, "threads");
    check_runtime_exchanges(transport_serial_threads_create, "serialised");
    check_ops(make_ranks1, "ranks transport, one rank");
    check_ops(make_ranks2, "ranks transport, two ranks");
    check_ops(make_ranks_all, "ranks transport, a rank per device");
    check_runtime_exchanges(make_ranks2, "ranks transport, two ranks");
    check_runtime_exchanges(make_ranks_all, "ranks transport, a rank per device");
    check_timeout();
    check_training();
    return test_finish();
}
