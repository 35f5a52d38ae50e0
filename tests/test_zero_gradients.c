/* The gradients under ZeRO-1 (shard_gradients): a run reduce-scatters instead of all-reducing.
 * Each device's replica shard of every parameter it holds equals the all-reduced gradient bit
 * for bit, the norm equals the all-reduced run's norm bit for bit and no all-reduce runs. Over
 * send and recv, each device sends exactly its values of the shards other devices sum (a
 * reduce-scatter's traffic, not an all-reduce's); the threads transport's own reduce-scatter
 * sends nothing (it sums in place). GPT-2 with its tied weight on two stages and T5, over the
 * threads transport (both ways), the serialising one and the ranks transport. The norm is also
 * the same bits with two threads per device, which share out each device's parts of it. */
#include <math.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ranks_loopback.h"
#include "runtime/runtime_internal.h"
#include "transport_train.h"

/* ---- a transport that counts what passes through it ---- */

enum { MAX_DEVICES = 8 };

typedef struct counting {
    transport base;
    transport *inner;
    atomic_int all_reduces;
    atomic_llong sum_floats[MAX_DEVICES]; /* floats each device sent for the reduce-scatter */
} counting;

static counting *last_counting; /* the one the last runtime was made over */
static transport_factory counted_inner;
static bool counted_own_scatter; /* the inner transport's own reduce-scatter, else over send and recv */

static transport *in(transport *t) { return ((counting *)t)->inner; }

static brg_status c_send(transport *t, int device, int to, int tag, const brg_named_tensor *items, int n) {
    if (tag == TRANSPORT_TAG_SUMS)
        for (int i = 0; i < n; i++) ((counting *)t)->sum_floats[device] += brg_tensor_numel(items[i].tensor);
    return in(t)->send(in(t), device, to, tag, items, n);
}
static brg_status c_recv(transport *t, int device, int from, int tag, transport_msg *out) {
    return in(t)->recv(in(t), device, from, tag, out);
}
static void c_release(transport *t, int device, transport_msg *msg) { in(t)->release(in(t), device, msg); }
static brg_status c_all_reduce(transport *t, int device, float *span, const transport_segment *segs, int n_segs) {
    ((counting *)t)->all_reduces++;
    return in(t)->all_reduce(in(t), device, span, segs, n_segs);
}
static brg_status c_broadcast(transport *t, int device, int root, brg_tensor *const *tensors, int n) {
    return in(t)->broadcast(in(t), device, root, tensors, n);
}
static brg_status c_barrier(transport *t, int device) { return in(t)->barrier(in(t), device); }
static void c_abort(transport *t, int device, brg_status status, const char *message) {
    in(t)->abort(in(t), device, status, message);
}
static brg_status c_failure(const transport *t, int *device, const char **message) {
    const transport *inner = ((const counting *)t)->inner;
    return inner->failure(inner, device, message);
}
static void c_reset(transport *t) { in(t)->reset(in(t)); }
static brg_status c_reduce_scatter(transport *t, int device, const transport_piece *rows, int n) {
    return in(t)->reduce_scatter(in(t), device, rows, n);
}
static void c_destroy(transport *t) {
    in(t)->destroy(in(t));
    free(t);
}

static brg_status make_counting(int n_devices, transport **out) {
    transport *inner;
    BRG_TRY(counted_inner(n_devices, &inner));
    counting *c = calloc(1, sizeof *c);
    if (!c) {
        inner->destroy(inner);
        return brg_error(BRG_ERR_OOM, "cannot allocate the counting transport");
    }
    c->base = (transport){inner->n_devices, c_send, c_recv, c_release, c_all_reduce, c_broadcast, c_barrier,
                          c_abort, c_failure, c_reset, c_destroy, inner->rank, inner->n_ranks, inner->device_rank,
                          counted_own_scatter && inner->reduce_scatter ? c_reduce_scatter : NULL};
    c->inner = inner;
    last_counting = c;
    *out = &c->base;
    return BRG_OK;
}

static brg_status make_ranks2(int n, transport **out) { return lb_create(n, 2, 60, out); }

/* ---- one run, sharded or not ---- */

typedef struct run_result {
    int n_devices, n_params;
    float *grads[MAX_DEVICES][TT_MAX_PARAMS]; /* each device's gradient copies after the run */
    double sq_norm;
    int all_reduces;
    bool in_place; /* the transport's own reduce-scatter ran, not the one over send and recv */
    long long sum_floats[MAX_DEVICES];
} run_result;

static void run_once(const tt_layout *l, bool shard, int threads, transport_factory inner, run_result *out) {
    memset(out, 0, sizeof *out);
    brg_model *m = tt_model(l->arch);
    if (!m) return;
    brg_runtime_options o = {.replicas = l->replicas, .stages = l->stages, .block_stage = l->block_stage,
                             .micro_batches = l->micro_batches, .schedule = l->kind, .training = true,
                             .recompute = l->recompute, .shard_gradients = shard, .intra_threads = threads};
    counted_inner = inner;
    brg_runtime *rt = NULL;
    CHECK_OK(runtime_create_over(m, &o, make_counting, &rt));
    if (!rt) {
        brg_model_destroy(m);
        return;
    }
    out->n_devices = brg_runtime_device_count(rt);
    out->n_params = m->n_params;
    BRG_ASSERT(out->n_devices <= MAX_DEVICES && m->n_params <= TT_MAX_PARAMS);
    tt_data d;
    tt_make_data(&d, 41);
    tt_batch b;
    tt_split(m, l, &d, &b);
    float losses[8];
    CHECK_OK(brg_runtime_run(rt, b.mbs, &b.denom, 7, losses));
    CHECK_OK(brg_runtime_grad_sq_norm(rt, &out->sq_norm));
    for (int dv = 0; dv < out->n_devices; dv++) {
        brg_device_info info;
        brg_device_get_info(brg_runtime_device(rt, dv), &info);
        for (int p = 0; p < m->n_params; p++) {
            if (!info.holds[p]) continue;
            const brg_tensor *t = info.view->params[p].tensor;
            out->grads[dv][p] = malloc(brg_tensor_nbytes(t));
            memcpy(out->grads[dv][p], t->grad, brg_tensor_nbytes(t));
        }
    }
    out->all_reduces = last_counting->all_reduces;
    out->in_place = last_counting->base.reduce_scatter != NULL;
    for (int dv = 0; dv < out->n_devices; dv++) out->sum_floats[dv] = last_counting->sum_floats[dv];
    brg_runtime_destroy(rt);
    brg_model_destroy(m);
}

static void free_result(run_result *r) {
    for (int d = 0; d < MAX_DEVICES; d++)
        for (int p = 0; p < TT_MAX_PARAMS; p++) free(r->grads[d][p]);
}

/* What device d sends in a reduce-scatter: its values of every shard that another copy in that
 * shard's replica sums. */
static long long expected_sends(const tt_layout *l, const run_result *r, const brg_model *m, int d) {
    long long n = 0;
    for (int p = 0; p < m->n_params; p++) {
        if (!r->grads[d][p]) continue;
        for (int rep = 0; rep < l->replicas; rep++) {
            int64_t first, count;
            brg_shard_range(brg_tensor_numel(m->params[p].tensor), rep, l->replicas, &first, &count);
            for (int s = 0; s < l->stages; s++) {
                const int to = rep * l->stages + s;
                if (to != d && r->grads[to][p]) n += count;
            }
        }
    }
    return n;
}

static void check_layout(const tt_layout *l, transport_factory inner, bool own_scatter, const char *name) {
    run_result plain, sharded;
    counted_own_scatter = own_scatter;
    run_once(l, false, 1, inner, &plain);
    run_once(l, true, 1, inner, &sharded);
    brg_model *m = tt_model(l->arch);
    if (!m || plain.n_devices == 0 || sharded.n_devices != plain.n_devices) {
        CHECK_MSG(false, "%s, %s: the runs did not happen", l->what, name);
        brg_model_destroy(m);
        return;
    }
    CHECK_MSG(plain.all_reduces == plain.n_devices, "%s, %s: %d all-reduces unsharded", l->what, name, plain.all_reduces);
    CHECK_MSG(sharded.all_reduces == 0, "%s, %s: %d all-reduces sharded", l->what, name, sharded.all_reduces);
    CHECK_MSG(sharded.in_place == (own_scatter && inner == transport_threads_create),
              "%s, %s: the in-place reduce-scatter %s", l->what, name, sharded.in_place ? "ran" : "did not run");
    int bad = 0, shards = 0;
    for (int d = 0; d < plain.n_devices; d++) {
        CHECK(plain.sum_floats[d] == 0);
        const long long want = sharded.in_place ? 0 : expected_sends(l, &sharded, m, d);
        CHECK_MSG((sharded.in_place || want > 0) && sharded.sum_floats[d] == want,
                  "%s, %s: device %d sent %lld floats, a reduce-scatter %lld", l->what, name, d, sharded.sum_floats[d],
                  want);
        for (int p = 0; p < m->n_params; p++) {
            if (!plain.grads[d][p]) continue;
            int64_t first, count;
            brg_shard_range(brg_tensor_numel(m->params[p].tensor), d / l->stages, l->replicas, &first, &count);
            bad += memcmp(plain.grads[d][p] + first, sharded.grads[d][p] + first, (size_t)count * sizeof(float)) != 0;
            shards++;
        }
    }
    CHECK_MSG(shards > 0 && bad == 0, "%s, %s: %d of %d shards differ from the all-reduced gradient", l->what, name, bad,
              shards);
    CHECK_MSG(memcmp(&plain.sq_norm, &sharded.sq_norm, sizeof(double)) == 0, "%s, %s: norm %.17g sharded, %.17g not",
              l->what, name, sharded.sq_norm, plain.sq_norm);
    /* the norm is the plain sum of squares over each parameter once (first holder's copy) */
    double direct = 0;
    for (int p = 0; p < m->n_params; p++)
        for (int d = 0; d < plain.n_devices; d++)
            if (plain.grads[d][p]) {
                for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++)
                    direct += (double)plain.grads[d][p][i] * plain.grads[d][p][i];
                break;
            }
    CHECK_MSG(plain.sq_norm > 0 && fabs(plain.sq_norm - direct) <= 1e-12 * direct, "%s, %s: norm %.17g, direct %.17g",
              l->what, name, plain.sq_norm, direct);
    brg_model_destroy(m);
    free_result(&plain);
    free_result(&sharded);
}

/* Two threads per device (each device's norm parts split over its team) against one: the same
 * gradients and the same norm, bit for bit, sharded or not. */
static void check_team(const tt_layout *l) {
    for (int shard = 0; shard < 2; shard++) {
        run_result one, two;
        run_once(l, shard, 1, transport_threads_create, &one);
        run_once(l, shard, 2, transport_threads_create, &two);
        CHECK_MSG(one.n_devices > 0 && one.n_devices == two.n_devices, "%s: the team runs did not happen", l->what);
        CHECK_MSG(one.sq_norm > 0 && memcmp(&one.sq_norm, &two.sq_norm, sizeof(double)) == 0,
                  "%s (sharded %d): norm %.17g with two threads per device, %.17g with one", l->what, shard,
                  two.sq_norm, one.sq_norm);
        free_result(&one);
        free_result(&two);
    }
}

int main(void) {
    alarm(240); /* a hang is a failure */
    const tt_layout layouts[] = {
        TT_LAYOUTS[1], /* GPT-2, 2 replicas x 2 stages: wte on stage 0 and the head's stage */
        {TT_GPT2, 4, 1, 2, {0, 0, 0, 0}, BRG_SCHEDULE_1F1B, false, "gpt2 4 replicas"},
        TT_LAYOUTS[4], /* T5, 2 replicas x 2 stages */
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        check_layout(&layouts[i], transport_threads_create, true, "threads, in place");
        check_layout(&layouts[i], transport_threads_create, false, "threads, over send and recv");
        check_layout(&layouts[i], transport_serial_threads_create, true, "serialised");
        check_layout(&layouts[i], make_ranks2, true, "ranks transport, two ranks");
        check_team(&layouts[i]);
    }
    return test_finish();
}
