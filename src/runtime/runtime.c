/* Devices as the threads of a pool (core/thread_pool.h); parameter copies in each device's arena;
 * fork-join dispatch. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade/precision.h"
#include "brigade/trace.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "packed_weights.h"
#include "ranks_internal.h"
#include "runtime_internal.h"

double runtime_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static brg_status check_placement(const brg_model *m, const brg_runtime_options *o) {
    if (o->replicas < 1 || o->stages < 1 || o->micro_batches < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "replicas (%d), stages (%d) and micro-batches (%d) must be at least 1",
                         o->replicas, o->stages, o->micro_batches);
    if (!o->block_stage) return brg_error(BRG_ERR_INVALID_ARG, "no block_stage: give each block's stage");
    if (o->stages > m->n_blocks)
        return brg_error(BRG_ERR_INVALID_ARG, "%d stages for a model of %d blocks", o->stages, m->n_blocks);
    for (int b = 0; b < m->n_blocks; b++) {
        int s = o->block_stage[b], prev = b ? o->block_stage[b - 1] : 0;
        if (s < 0 || s >= o->stages || s < prev || s > prev + 1 || (b == 0 && s != 0))
            return brg_error(BRG_ERR_INVALID_ARG,
                             "block %s placed on stage %d: stages must start at 0, run in block order without gaps "
                             "and stay below %d",
                             m->blocks[b].name, s, o->stages);
    }
    if (o->block_stage[m->n_blocks - 1] != o->stages - 1)
        return brg_error(BRG_ERR_INVALID_ARG, "stage %d holds no blocks", o->stages - 1);
    if (o->activation_dtype != BRG_DTYPE_F32 && !brg_dtype_is_half(o->activation_dtype))
        return brg_error(BRG_ERR_INVALID_ARG, "activations cannot be held in %s: F32, F16 or BF16",
                         brg_dtype_name(o->activation_dtype));
    return BRG_OK;
}

static size_t grad_bytes(const brg_tensor *t) {
    size_t n = (size_t)brg_tensor_numel(t) * sizeof(float);
    return (n + BRG_ARENA_ALIGN - 1) & ~(size_t)(BRG_ARENA_ALIGN - 1);
}

/* Training: the held parameters' gradients side by side in one span (each aligned as an arena
 * allocation of its own would be), which the transport reduces in one collective. */
static brg_status make_grad_span(brg_device *dev, const brg_model *m) {
    size_t bytes = 0;
    int held = 0;
    for (int p = 0; p < m->n_params; p++)
        if (dev->holds[p]) bytes += grad_bytes(dev->view.params[p].tensor), held++;
    dev->segs = calloc((size_t)(held ? held : 1), sizeof *dev->segs);
    if (!dev->segs) return brg_error(BRG_ERR_OOM, "cannot allocate device %d", dev->id);
    dev->grad_span = brg_arena_alloc(dev->arena, bytes, "gradients");
    if (!dev->grad_span) return BRG_ERR_OOM;
    size_t at = 0;
    for (int p = 0; p < m->n_params; p++) {
        if (!dev->holds[p]) continue;
        brg_tensor *t = dev->view.params[p].tensor;
        t->grad = (float *)((char *)dev->grad_span + at);
        t->requires_grad = true;
        dev->segs[dev->n_segs++] = (transport_segment){p, at / sizeof(float), (size_t)brg_tensor_numel(t)};
        at += grad_bytes(t);
    }
    return BRG_OK;
}

/* A header in the device's arena over the model's own bytes, which count against the device's
 * budget (and peak) as its own copy would. */
static brg_status share_param(brg_device *dev, const brg_tensor *src, const char *name, brg_tensor **out) {
    brg_tensor *t = brg_arena_alloc(dev->arena, sizeof *t, name);
    if (!t) return BRG_ERR_OOM;
    *t = brg_tensor_wrap(BRG_DTYPE_F32, src->ndim, src->shape, src->data);
    t->name = name;
    *out = t;
    return brg_arena_borrow(dev->arena, brg_tensor_nbytes(src), name);
}

/* The device's copy of every parameter its blocks read (a tied weight gets a copy on each
 * stage that reads it), or with params_in_model the model's own memory for those it owns. */
static brg_status make_view(brg_device *dev, const brg_model *m) {
    dev->view = *m;
    dev->view.params = calloc((size_t)m->n_params, sizeof *dev->view.params);
    dev->holds = calloc((size_t)m->n_params, sizeof *dev->holds);
    if (!dev->view.params || !dev->holds) return brg_error(BRG_ERR_OOM, "cannot allocate device %d", dev->id);
    for (int p = 0; p < m->n_params; p++) {
        dev->view.params[p] = m->params[p];
        dev->view.params[p].tensor = NULL;
        for (int b = dev->first_block; b <= dev->last_block; b++) dev->holds[p] |= brg_model_block_uses(m, b, p);
        if (!dev->holds[p]) continue;
        const brg_tensor *src = m->params[p].tensor;
        brg_tensor *t;
        if ((dev->rt->opts.params_in_model && device_owns_param(dev, p)) ||
            (dev->rt->opts.params_shared && !dev->rt->opts.training)) {
            BRG_TRY(share_param(dev, src, m->params[p].name, &t));
        } else {
            BRG_TRY(brg_tensor_new(dev->arena, BRG_DTYPE_F32, src->ndim, src->shape, m->params[p].name, &t));
            dev->backend->copy(t->data, src->data, brg_tensor_nbytes(src), BRG_COPY_TO_DEVICE);
        }
        dev->view.params[p].tensor = t;
    }
    return dev->rt->opts.training ? make_grad_span(dev, m) : BRG_OK;
}

static brg_status init_device(brg_runtime *rt, brg_device *dev, int id) {
    const brg_runtime_options *o = &rt->opts;
    int M = o->micro_batches;
    dev->rt = rt;
    dev->id = id;
    dev->replica = id / o->stages;
    dev->stage = id % o->stages;
    dev->first_block = -1;
    for (int b = 0; b < rt->model->n_blocks; b++)
        if (rt->block_stage[b] == dev->stage) {
            if (dev->first_block < 0) dev->first_block = b;
            dev->last_block = b;
        }
    if (!transport_is_local(rt->transport, id)) return runtime_init_remote_device(dev); /* another rank's */
    char name[32];
    snprintf(name, sizeof name, "device %d", id);
    dev->backend = o->backend ? o->backend : brg_backend_cpu();
    BRG_TRY(brg_arena_create(name, o->device_memory, &dev->arena));
    brg_arena_set_allocator(dev->arena, &dev->backend->allocator);
    dev->n_tapes = M * (dev->last_block - dev->first_block + 1);
    dev->tapes = calloc((size_t)dev->n_tapes, sizeof *dev->tapes);
    dev->ckpts = calloc((size_t)dev->n_tapes, sizeof *dev->ckpts);
    dev->bundles = calloc((size_t)M, sizeof *dev->bundles);
    dev->inputs = calloc((size_t)M * RUNTIME_CARRIED_MAX, sizeof *dev->inputs);
    dev->outputs = calloc((size_t)M * RUNTIME_CARRIED_MAX, sizeof *dev->outputs);
    /* Training: as many activation slots as micro-batches can be in flight on this stage (1F1B:
     * stages - stage), so memory is reused across micro-batches; inference keeps each. */
    dev->n_slots = o->training ? brg_schedule_max_in_flight(&rt->schedule, dev->stage) : M;
    dev->slots = calloc((size_t)dev->n_slots, sizeof *dev->slots);
    dev->slot_busy = calloc((size_t)dev->n_slots, sizeof *dev->slot_busy);
    if (!dev->tapes || !dev->ckpts || !dev->bundles || !dev->inputs || !dev->outputs ||
        !dev->slots || !dev->slot_busy)
        return brg_error(BRG_ERR_OOM, "cannot allocate device %d", id);
    for (int s = 0; s < dev->n_slots; s++) BRG_TRY(brg_arena_create_child(dev->arena, name, &dev->slots[s]));
    int blocks = dev->last_block - dev->first_block + 1;
    for (int i = 0; i < dev->n_tapes; i++) {
        BRG_TRY(brg_tape_create(dev->slots[(i / blocks) % dev->n_slots], &dev->tapes[i]));
        brg_tape_set_backend(dev->tapes[i], dev->backend);
        /* forward_step copies out the logits it returns before any backward */
        brg_tape_set_outputs_spent(dev->tapes[i], true);
        if (o->training && o->activation_dtype != BRG_DTYPE_F32)
            brg_tape_set_activation_dtype(dev->tapes[i], o->activation_dtype);
    }
    BRG_TRY(make_view(dev, rt->model));
    /* Training packs per run, where a run has several micro-batches to read the panels. */
    if (!o->training || (o->pack_weights && M >= 2))
        BRG_TRY(packed_weights_create(&dev->view, dev->holds, dev->arena, o->training, &dev->packed));
    dev->persistent_peak = brg_arena_used(dev->arena) + brg_arena_borrowed(dev->arena);
    return BRG_OK;
}

/* Where the OS allows it; a refusal (containers, restricted masks) leaves the thread floating. */
static void pin_to_core(const brg_device *dev) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int n = CPU_COUNT(&allowed), want = dev->id % (n > 0 ? n : 1), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

/* Once per thread, before any job: what stays with the device's thread for its whole life. */
static void device_setup(void *p, int k, int n) {
    (void)n;
    brg_runtime *rt = p;
    const brg_device *dev = &rt->devices[rt->local[k]];
    if (rt->opts.pin_threads) pin_to_core(dev);
    brg_trace_set_device(dev->id, dev->replica, dev->stage); /* its events go on its track */
    brg_scratch_bind(dev->arena); /* kernel scratch counts against the device's budget */
    brg_gemm_team_bind(dev->team);
    packed_weights_bind(dev->packed);
    brg_compute_dtype_set(rt->opts.compute_dtype);
}

static void device_job(void *p, int k, int n) {
    (void)n;
    brg_runtime *rt = p;
    brg_device *dev = &rt->devices[rt->local[k]];
    brg_clear_error();
    dev->status = rt->job(dev, rt->job_arg);
    if (dev->status != BRG_OK) {
        snprintf(dev->error, sizeof dev->error, "%s", brg_last_error());
        /* Every device waiting on the transport gives up; the first to abort is the cause. */
        rt->transport->abort(rt->transport, dev->id, dev->status, dev->error);
    }
}

/* The device that failed first (the transport knows: the others stopped because of it). */
static brg_status first_failure(brg_runtime *rt) {
    int who = -1;
    const char *why = NULL;
    brg_status st = rt->transport->failure(rt->transport, &who, &why);
    if (st == BRG_OK) return BRG_OK;
    const brg_device *d = &rt->devices[who];
    if (rt->transport->n_ranks > 1)
        st = brg_error(st, "rank %d, device %d (replica %d, stage %d): %s", rt->transport->device_rank[who], d->id,
                       d->replica, d->stage, why);
    else st = brg_error(st, "device %d (replica %d, stage %d): %s", d->id, d->replica, d->stage, why);
    rt->transport->reset(rt->transport); /* no device is inside it now */
    return st;
}

brg_status brg_runtime_each_device(brg_runtime *rt, brg_device_fn fn, void *arg) {
    rt->job = fn;
    rt->job_arg = arg;
    if (rt->threads) brg_pool_run(rt->threads, device_job, rt);
    return first_failure(rt);
}

static brg_status start_threads(brg_runtime *rt) {
    for (int i = 0; rt->opts.intra_threads > 1 && i < rt->n_devices; i++)
        if (transport_is_local(rt->transport, i)) BRG_TRY(brg_gemm_team_create(rt->opts.intra_threads, &rt->devices[i].team));
    rt->local = malloc((size_t)rt->n_devices * sizeof *rt->local);
    if (!rt->local) return brg_error(BRG_ERR_OOM, "cannot allocate the runtime");
    int n = 0;
    for (int i = 0; i < rt->n_devices; i++)
        if (transport_is_local(rt->transport, i)) rt->local[n++] = i;
    if (n == 0) return BRG_OK; /* a rank whose devices all lie elsewhere */
    BRG_TRY(brg_pool_create(n, "the devices", &rt->threads));
    brg_pool_run(rt->threads, device_setup, rt);
    return BRG_OK;
}

static brg_status create(brg_runtime *rt, transport_factory make_transport) {
    const brg_runtime_options *o = &rt->opts;
    int n = rt->model->n_blocks;
    rt->block_stage = malloc((size_t)n * sizeof *rt->block_stage);
    if (!rt->block_stage) return brg_error(BRG_ERR_OOM, "cannot allocate the runtime");
    memcpy(rt->block_stage, o->block_stage, (size_t)n * sizeof *rt->block_stage);
    rt->opts.block_stage = rt->block_stage;
    brg_schedule_kind kind = o->training ? o->schedule : BRG_SCHEDULE_INFERENCE;
    BRG_TRY(brg_schedule_build(kind, o->stages, o->micro_batches, &rt->schedule));
    rt->n_devices = o->replicas * o->stages;
    BRG_TRY(make_transport(rt->n_devices, &rt->transport));
    if (brg_trace_enabled()) BRG_TRY(transport_traced_wrap(&rt->transport)); /* no layer at all untraced */
    rt->devices = calloc((size_t)rt->n_devices, sizeof *rt->devices);
    if (!rt->devices) return brg_error(BRG_ERR_OOM, "cannot allocate devices");
    for (int i = 0; i < rt->n_devices; i++) BRG_TRY(init_device(rt, &rt->devices[i], i));
    return start_threads(rt);
}

/* What the model's stages hand each other, from its declaration (brg_model_ops.carried). */
static brg_status count_carried(const brg_model *model, int *n) {
    const char *const *names = brg_model_carried(model);
    for (*n = 0; names[*n]; (*n)++) {
        if (*n == RUNTIME_CARRIED_MAX)
            return brg_error(BRG_ERR_INVALID_ARG, "%s declares more than %d carried tensors", model->ops->architecture,
                             RUNTIME_CARRIED_MAX);
        if (strlen(names[*n]) >= BRG_TENSOR_NAME_MAX)
            return brg_error(BRG_ERR_INVALID_ARG, "%s declares a carried tensor name of %d characters or more: %.60s",
                             model->ops->architecture, BRG_TENSOR_NAME_MAX, names[*n]);
    }
    if (*n == 0) return brg_error(BRG_ERR_INVALID_ARG, "%s declares no carried tensor", model->ops->architecture);
    return BRG_OK;
}

brg_status runtime_create_over(brg_model *model, const brg_runtime_options *opts, transport_factory make_transport,
                               brg_runtime **out) {
    BRG_TRY(check_placement(model, opts));
    int n_carried;
    BRG_TRY(count_carried(model, &n_carried));
    brg_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return brg_error(BRG_ERR_OOM, "cannot allocate the runtime");
    rt->model = model;
    rt->opts = *opts;
    rt->carried = brg_model_carried(model);
    rt->n_carried = n_carried;
    rt->loss_scale = 1.0f;
    pthread_mutex_init(&rt->collect_lock, NULL);
    brg_gemm_set_threads(1);
    brg_status st = create(rt, make_transport);
    if (st != BRG_OK) {
        brg_runtime_destroy(rt);
        return st;
    }
    *out = rt;
    return BRG_OK;
}

brg_status brg_runtime_create(brg_model *model, const brg_runtime_options *opts, brg_runtime **out) {
    return runtime_create_over(model, opts, ranks_transport_factory(), out);
}

static void free_device(brg_device *d) {
    if (d->tapes)
        for (int i = 0; i < d->n_tapes; i++) brg_tape_destroy(d->tapes[i]);
    free(d->tapes);
    free(d->ckpts);
    free(d->bundles);
    free(d->inputs);
    free(d->outputs);
    free(d->segs);
    for (int s = 0; d->slots && s < d->n_slots; s++) brg_arena_destroy(d->slots[s]);
    free(d->slots);
    free(d->slot_busy);
    free(d->view.params);
    free(d->holds);
    packed_weights_destroy(d->packed);
    brg_arena_destroy(d->arena);
}

void brg_runtime_destroy(brg_runtime *rt) {
    if (!rt) return;
    brg_pool_destroy(rt->threads);
    free(rt->local);
    for (int i = 0; rt->devices && i < rt->n_devices; i++) { /* none when the transport failed */
        brg_gemm_team_destroy(rt->devices[i].team);
        free_device(&rt->devices[i]);
    }
    if (rt->transport) rt->transport->destroy(rt->transport);
    free(rt->devices);
    free(rt->block_stage);
    free(rt->norm_parts);
    brg_schedule_free(&rt->schedule);
    pthread_mutex_destroy(&rt->collect_lock);
    free(rt);
}

int brg_runtime_device_count(const brg_runtime *rt) { return rt->n_devices; }
brg_device *brg_runtime_device(brg_runtime *rt, int id) { return &rt->devices[id]; }

void brg_device_get_info(const brg_device *dev, brg_device_info *info) {
    *info = (brg_device_info){dev->id, dev->replica, dev->stage, dev->first_block, dev->last_block,
                              (brg_model *)&dev->view, dev->holds};
}

brg_arena *brg_device_arena(brg_device *dev) { return dev->arena; }
const brg_backend *brg_device_backend(const brg_device *dev) { return dev->backend; }
double brg_runtime_schedule_seconds(const brg_runtime *rt) { return rt->schedule_seconds; }

void brg_runtime_device_stats(const brg_runtime *rt, int device, brg_device_stats *out) {
    const brg_device *d = &rt->devices[device];
    *out = (brg_device_stats){d->busy_seconds, d->arena ? brg_arena_peak(d->arena) : d->remote_peak, d->activation_peak,
                              d->micro_batch_peak};
}
