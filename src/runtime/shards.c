/* ZeRO-1 (replicated_tensor_sharding): the gradients are reduce-scattered, so each replica's
 * devices get the sum of their own shard of each parameter they hold; every replica updates its
 * own shard; the updated shards travel to the other copies through the transport's all-gather. */
#include <stdlib.h>

#include "runtime_internal.h"

int runtime_shard_source(const brg_runtime *rt, int p, int r) {
    const int stages = rt->opts.stages, stage = rt->block_stage[rt->model->params[p].block];
    const int d = r * stages + stage;
    return d < rt->n_devices && rt->devices[d].holds[p] ? d : -1;
}

/* Appends parameter p's rows for device `me`: for each replica's shard, the copy here that
 * receives it, or (when this device updated it) every other copy it goes to. */
static int add_rows(const brg_device *me, int p, transport_piece *rows, int n) {
    const brg_runtime *rt = me->rt;
    const int replicas = rt->opts.replicas;
    const int64_t numel = brg_tensor_numel(rt->model->params[p].tensor);
    for (int r = 0; r < replicas; r++) {
        const int source = runtime_shard_source(rt, p, r);
        int64_t first, count;
        brg_shard_range(numel, r, replicas, &first, &count);
        if (source < 0 || count == 0) continue;
        const int key = p * replicas + r;
        float *own = me->holds[p] ? (float *)me->view.params[p].tensor->data + first : NULL;
        if (source == me->id) {
            for (int d = 0; d < rt->n_devices; d++)
                if (d != me->id && rt->devices[d].holds[p])
                    rows[n++] = (transport_piece){key, source, d, own, (size_t)count};
        } else if (own) {
            rows[n++] = (transport_piece){key, source, me->id, own, (size_t)count};
        }
    }
    return n;
}

brg_status brg_device_gather_shards(brg_device *dev) {
    const brg_runtime *rt = dev->rt;
    if (rt->opts.replicas < 2) return BRG_OK;
    const size_t cap = (size_t)rt->model->n_params * (size_t)rt->opts.replicas * (size_t)rt->n_devices;
    transport_piece *rows = malloc((cap ? cap : 1) * sizeof *rows);
    if (!rows) return brg_error(BRG_ERR_OOM, "device %d: cannot list the optimizer shards", dev->id);
    int n = 0;
    for (int p = 0; p < rt->model->n_params; p++) n = add_rows(dev, p, rows, n);
    brg_status st = transport_all_gather(rt->transport, dev->id, rows, n);
    free(rows);
    return st;
}

/* Appends parameter p's rows for device `me` in the gradients' reduce-scatter: replica r's
 * copies of p (its home stage's and a tied weight's other stages') want shard r's sum, and every
 * copy of p contributes to it. */
static int add_sum_rows(const brg_device *me, int p, transport_piece *rows, int n) {
    const brg_runtime *rt = me->rt;
    const int replicas = rt->opts.replicas, stages = rt->opts.stages;
    const brg_tensor *t = me->view.params[p].tensor;
    for (int r = 0; r < replicas; r++) {
        int64_t first, count;
        brg_shard_range(brg_tensor_numel(t), r, replicas, &first, &count);
        if (count == 0) continue;
        const int key = p * replicas + r;
        float *own = t->grad + first;
        for (int d = 0; me->replica == r && d < rt->n_devices; d++)
            if (rt->devices[d].holds[p]) rows[n++] = (transport_piece){key, d, me->id, own, (size_t)count};
        for (int s = 0; s < stages; s++) {
            const int to = r * stages + s;
            if (to != me->id && to < rt->n_devices && rt->devices[to].holds[p])
                rows[n++] = (transport_piece){key, me->id, to, own, (size_t)count};
        }
    }
    return n;
}

brg_status runtime_reduce_scatter(brg_device *dev) {
    const brg_runtime *rt = dev->rt;
    const size_t cap =
        (size_t)rt->model->n_params * (size_t)rt->opts.replicas * (size_t)(rt->n_devices + rt->opts.stages);
    transport_piece *rows = malloc((cap ? cap : 1) * sizeof *rows);
    if (!rows) return brg_error(BRG_ERR_OOM, "device %d: cannot list the gradient shards", dev->id);
    int n = 0;
    for (int p = 0; p < rt->model->n_params; p++)
        if (dev->holds[p]) n = add_sum_rows(dev, p, rows, n);
    brg_status st = transport_reduce_scatter(rt->transport, dev->id, rows, n);
    free(rows);
    return st;
}
