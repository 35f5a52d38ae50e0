/* Parameters and state between the host and the devices, through the transport: the host's
 * side is device 0's (under MPI, rank 0 holds the host model and writes checkpoints), every
 * other device sends what it holds to device 0 or receives from it. No device thread reads
 * another device's memory and the host thread reads none. */
#include <stdlib.h>
#include <string.h>

#include "packed_weights.h"
#include "runtime_internal.h"

/* What device 0 does with each tensor gathered (its own first, then each device's in order). */
typedef brg_status (*sink_fn)(void *ctx, int from, const brg_named_tensor *item);

/* Every device takes part: device 0 hands its own items and then every other device's to `sink`;
 * the others send theirs (an empty list too, so device 0 knows they are done). */
static brg_status gather_on_root(brg_device *dev, const brg_named_tensor *items, int n, sink_fn sink, void *ctx) {
    transport *t = dev->rt->transport;
    if (dev->id != 0) return t->send(t, dev->id, 0, TRANSPORT_TAG_GATHER, items, n);
    for (int i = 0; i < n; i++) BRG_TRY(sink(ctx, 0, &items[i]));
    for (int d = 1; d < dev->rt->n_devices; d++) {
        transport_msg msg;
        BRG_TRY(t->recv(t, 0, d, TRANSPORT_TAG_GATHER, &msg));
        brg_status st = BRG_OK;
        for (int i = 0; st == BRG_OK && i < msg.n; i++) st = sink(ctx, d, &msg.items[i]);
        t->release(t, 0, &msg);
        BRG_TRY(st);
    }
    return BRG_OK;
}

/* ---- the model's weights ---- */

static brg_status into_model(void *ctx, int from, const brg_named_tensor *item) {
    brg_model *m = ctx;
    int p = brg_model_find_param(m, item->name);
    brg_tensor *dst = p < 0 ? NULL : m->params[p].tensor;
    if (!dst || !brg_tensor_same_shape(dst, item->tensor) || dst->dtype != item->tensor->dtype)
        return brg_error(BRG_ERR_INTERNAL, "device %d sent %s, which the model does not have in that shape", from,
                         item->name);
    /* A device that computes on the model's own memory (params_in_model) sends it back as is. */
    if (dst->data != item->tensor->data) memcpy(dst->data, item->tensor->data, brg_tensor_nbytes(dst));
    return BRG_OK;
}

static brg_status to_model_job(brg_device *dev, void *arg) {
    (void)arg;
    const brg_model *m = dev->rt->model;
    brg_named_tensor *items = calloc((size_t)m->n_params, sizeof *items);
    if (!items) return brg_error(BRG_ERR_OOM, "cannot list device %d's parameters", dev->id);
    int n = 0;
    for (int p = 0; p < m->n_params; p++)
        if (device_owns_param(dev, p)) items[n++] = (brg_named_tensor){m->params[p].name, dev->view.params[p].tensor};
    brg_status st = gather_on_root(dev, items, n, into_model, dev->rt->model);
    free(items);
    return st;
}

brg_status brg_runtime_sync_to_model(brg_runtime *rt) { return brg_runtime_each_device(rt, to_model_job, NULL); }

/* Device 0 broadcasts the model's weights; each device keeps those it holds. */
static brg_status from_model_job(brg_device *dev, void *arg) {
    (void)arg;
    const brg_model *m = dev->rt->model;
    brg_tensor **tensors = calloc((size_t)m->n_params, sizeof *tensors);
    if (!tensors) return brg_error(BRG_ERR_OOM, "cannot list device %d's parameters", dev->id);
    for (int p = 0; p < m->n_params; p++) {
        tensors[p] = dev->id == 0 ? m->params[p].tensor : dev->holds[p] ? dev->view.params[p].tensor : NULL;
        if (dev->id == 0 && dev->holds[p]) {
            brg_tensor *own = dev->view.params[p].tensor;
            if (own->data != m->params[p].tensor->data)
                dev->backend->copy(own->data, m->params[p].tensor->data, brg_tensor_nbytes(own), BRG_COPY_TO_DEVICE);
        }
    }
    transport *t = dev->rt->transport;
    brg_status st = t->broadcast(t, dev->id, 0, tensors, m->n_params);
    free(tensors);
    packed_weights_refresh(dev->packed); /* packed from the weights just overwritten */
    return st;
}

brg_status brg_runtime_sync_from_model(brg_runtime *rt) { return brg_runtime_each_device(rt, from_model_job, NULL); }

/* ---- any tensors, onto the host ---- */

typedef struct gather {
    brg_gather_fn fn;
    void *arg;
    brg_arena *host;
    brg_named_tensor *list; /* device 0's, growing */
    size_t n, cap;
} gather;

static brg_status onto_host(void *ctx, int from, const brg_named_tensor *item) {
    gather *g = ctx;
    (void)from;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        brg_named_tensor *grown = realloc(g->list, cap * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_OOM, "cannot list %zu gathered tensors", cap);
        g->list = grown, g->cap = cap;
    }
    size_t len = strlen(item->name) + 1;
    char *name = brg_arena_alloc(g->host, len, "a gathered tensor's name");
    if (!name) return BRG_ERR_OOM;
    memcpy(name, item->name, len);
    brg_tensor *t;
    BRG_TRY(brg_tensor_new(g->host, item->tensor->dtype, item->tensor->ndim, item->tensor->shape, name, &t));
    t->name = name;
    BRG_TRY(brg_tensor_copy(t, item->tensor));
    g->list[g->n++] = (brg_named_tensor){name, t};
    return BRG_OK;
}

static brg_status gather_job(brg_device *dev, void *arg) {
    gather *g = arg;
    int n = g->fn(dev, g->arg, NULL, 0);
    brg_named_tensor *items = calloc((size_t)(n > 0 ? n : 1), sizeof *items);
    if (!items) return brg_error(BRG_ERR_OOM, "cannot list device %d's tensors", dev->id);
    int again = n > 0 ? g->fn(dev, g->arg, items, n) : 0;
    brg_status st = again == n ? gather_on_root(dev, items, n, onto_host, g)
                               : brg_error(BRG_ERR_INTERNAL, "device %d listed %d tensors, then %d", dev->id, n, again);
    free(items);
    return st;
}

brg_status brg_runtime_gather(brg_runtime *rt, brg_gather_fn fn, void *arg, brg_arena *host, brg_named_tensor **out,
                              size_t *n) {
    gather g = {fn, arg, host, NULL, 0, 0};
    *out = NULL;
    *n = 0;
    brg_status st = brg_runtime_each_device(rt, gather_job, &g);
    if (st == BRG_OK) {
        *out = brg_arena_alloc(host, (g.n ? g.n : 1) * sizeof **out, "the gathered tensors' list");
        if (!*out) st = BRG_ERR_OOM;
        else if (g.n) memcpy(*out, g.list, g.n * sizeof **out);
        *n = *out ? g.n : 0;
    }
    free(g.list);
    return st;
}
