/* The ranks side of a pipelined decode (decode_ranks.h): where each rank's results go, and runs of
 * a decoder's units over the stages of the ranks that hold them. */
#include "models/decode_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/decoder_internal.h"

brg_status decode_ranks_create(transport *t, double timeout, int replicas, int stages, decode_ranks **out) {
    *out = NULL;
    if (!t) return BRG_OK;
    if (t->n_devices != replicas * stages || t->n_ranks < 1 || !t->device_rank)
        return brg_error(BRG_ERR_INTERNAL, "a transport of %d devices over %d ranks for %d replicas x %d stages",
                         t->n_devices, t->n_ranks, replicas, stages);
    decode_ranks *r = calloc(1, sizeof *r);
    if (!r) return brg_error(BRG_ERR_OOM, "cannot allocate the decode over ranks");
    *r = (decode_ranks){.t = t, .timeout = timeout, .stages = stages, .replicas = replicas};
    brg_status st = BRG_OK;
    if (!(r->mailbox = malloc((size_t)r->t->n_ranks * sizeof *r->mailbox)))
        st = brg_error(BRG_ERR_OOM, "cannot allocate the decode over ranks");
    for (int q = 0; st == BRG_OK && q < r->t->n_ranks; q++) {
        r->mailbox[q] = -1;
        for (int d = r->t->n_devices - 1; d >= 0; d--)
            if (r->t->device_rank[d] == q) r->mailbox[q] = d;
        if (r->mailbox[q] < 0) st = brg_error(BRG_ERR_INTERNAL, "rank %d holds no device of the decode", q);
    }
    if (st != BRG_OK) {
        decode_ranks_destroy(r);
        return st;
    }
    *out = r;
    return BRG_OK;
}

void decode_ranks_destroy(decode_ranks *r) {
    if (!r) return;
    free(r->mailbox);
    free(r);
}

void decode_ranks_abort(const decode_ranks *r, int device, brg_status st, const char *why) {
    r->t->abort(r->t, device, st, why);
}

brg_status decode_ranks_failure(const decode_ranks *r) {
    int who = -1;
    const char *why = NULL;
    const brg_status st = r->t->failure(r->t, &who, &why);
    if (st == BRG_OK) return BRG_OK;
    if (who < 0 || who >= r->t->n_devices) return brg_error(st, "%s", why);
    return brg_error(st, "rank %d, device %d (replica %d, stage %d): %s", r->t->device_rank[who], who,
                     who / r->stages, who % r->stages, why);
}

/* ---- runs of units ---- */

/* Request i's messages: the hand-over between runs, and the result shared with every rank. */
static int carry_tag(const decode_route *rt) { return transport_tag(rt->request, TRANSPORT_FORWARD); }
static int result_tag(const decode_route *rt) { return transport_tag(rt->request, TRANSPORT_BACKWARD); }

/* A wait that timed out names what it waited for (a failure elsewhere keeps its own
 * message: "stopped because device D failed"). */
static brg_status recv_for(const decode_route *rt, int at, int from, int tag, const char *what, transport_msg *msg) {
    transport *t = rt->ranks->t;
    const brg_status st = t->recv(t, at, from, tag, msg);
    int who = -1;
    const char *why = NULL;
    if (st == BRG_ERR_IO && t->failure(t, &who, &why) == BRG_OK)
        return brg_error(st,
                         "no message from device %d (rank %d) in %g s (%s): that rank has stopped, hung or is far "
                         "behind (brigade --timeout sets how long to wait)",
                         from, t->device_rank[from], rt->ranks->timeout, what);
    return st;
}

static brg_status send_carry(const decode_route *rt, const dec_units *u, int from, int to) {
    brg_named_tensor items[DEC_CARRY_MAX];
    const int n = u->carry ? u->carry(u->ctx, items) : 0;
    return rt->ranks->t->send(rt->ranks->t, from, to, carry_tag(rt), items, n);
}

static brg_status take_carry(const decode_route *rt, const dec_units *u, int at, int from) {
    transport *t = rt->ranks->t;
    transport_msg msg;
    BRG_TRY(recv_for(rt, at, from, carry_tag(rt), "the hidden states", &msg));
    const brg_status st = u->take ? u->take(u->ctx, &msg) : BRG_OK;
    t->release(t, at, &msg);
    return st;
}

/* The last run's device sends the result to every other rank; they wait for it. */
static brg_status share_result(const decode_route *rt, const dec_units *u, int last, int *waiting) {
    const decode_ranks *r = rt->ranks;
    transport *t = r->t;
    int64_t shape[1] = {u->result_n};
    if (decode_ranks_is_local(r, last)) {
        brg_tensor x = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, u->result);
        const brg_named_tensor item = {"result", &x};
        for (int q = 0; q < t->n_ranks; q++)
            if (q != t->rank) BRG_TRY(t->send(t, last, r->mailbox[q], result_tag(rt), &item, 1));
        return BRG_OK;
    }
    const int here = decode_ranks_here(r);
    *waiting = here;
    transport_msg msg;
    BRG_TRY(recv_for(rt, here, last, result_tag(rt), "the step's logits", &msg));
    const brg_tensor *x = msg.n == 1 ? msg.items[0].tensor : NULL;
    brg_status st = BRG_OK;
    if (!x || x->dtype != BRG_DTYPE_F32 || brg_tensor_numel(x) != u->result_n)
        st = brg_error(BRG_ERR_FORMAT, "device %d sent a result that is not %lld floats", last, (long long)u->result_n);
    else memcpy(u->result, x->data, (size_t)u->result_n * sizeof *u->result);
    t->release(t, here, &msg);
    return st;
}

/* *at: the device here that was working or waiting, for the failure's origin. */
static brg_status run_runs(const decode_route *rt, const dec_units *u, int first, int last, int *at) {
    const decode_ranks *r = rt->ranks;
    const int *stage = rt->unit_stage;
    int prev = -1; /* the device of the run before */
    for (int a = first; a <= last;) {
        int b = a;
        while (b + 1 <= last && stage[b + 1] == stage[a]) b++;
        const int dev = decode_ranks_device(r, rt->replica, stage[a]);
        if (decode_ranks_is_local(r, dev)) {
            *at = dev;
            if (prev >= 0 && !decode_ranks_is_local(r, prev)) BRG_TRY(take_carry(rt, u, dev, prev));
            dec_unit_job j = {u, a, b};
            BRG_TRY(decode_stages_run(rt->stages, stage[a], dec_unit_job_run, &j));
            if (b < last) {
                const int next = decode_ranks_device(r, rt->replica, stage[b + 1]);
                if (!decode_ranks_is_local(r, next)) BRG_TRY(send_carry(rt, u, dev, next));
            }
        }
        prev = dev;
        a = b + 1;
    }
    return u->result ? share_result(rt, u, prev, at) : BRG_OK;
}

brg_status decode_ranks_run_units(const decode_route *rt, const dec_units *u, int first, int last) {
    int at = decode_ranks_here(rt->ranks);
    const brg_status st = run_runs(rt, u, first, last, &at);
    /* Every other rank waiting on this request (or any other) stops with this one's word. */
    if (st != BRG_OK) {
        char why[1024];
        snprintf(why, sizeof why, "request %d: %s", rt->request, brg_last_error());
        decode_ranks_abort(rt->ranks, at, st, why);
    }
    return st;
}

brg_status dec_take_copies(const brg_named_tensor *mine, int n, const transport_msg *msg) {
    for (int i = 0; i < msg->n; i++) {
        const brg_tensor *x = msg->items[i].tensor;
        int k = 0;
        while (k < n && strcmp(mine[k].name, msg->items[i].name) != 0) k++;
        if (k == n || !mine[k].tensor || x->dtype != mine[k].tensor->dtype ||
            brg_tensor_numel(x) != brg_tensor_numel(mine[k].tensor))
            return brg_error(BRG_ERR_FORMAT, "a decode stage received %s, which it cannot take", msg->items[i].name);
        memcpy(mine[k].tensor->data, x->data, brg_tensor_nbytes(x));
    }
    return BRG_OK;
}
