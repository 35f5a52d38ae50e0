/* One device's part of a run: its stage's row of the schedule.
 *
 * Memory: each micro-batch's activations live in one of the device's slot arenas (mb mod
 * slots), reset when the slot is taken by a later micro-batch, so 1F1B holds at most
 * stages - stage micro-batches at once. Stages exchange messages through the transport, by value:
 * a stage sends the next one its carried tensors (hidden states and, for encoder-decoder models,
 * the encoder's output), which the receiver copies into its slot; going back, the receiver sends
 * the gradients of those copies, which the sender adds into its outputs' gradient buffers. No
 * device reads or writes another's memory. Tags are (micro-batch, direction). */
#include <string.h>

#include "brigade/trace.h"
#include "packed_weights.h"
#include "runtime_internal.h"

/* What travels between stages is what the model declares (rt->carried); slot k of a device's
 * carried inputs and outputs holds the tensor of the k-th name. */
static int carried_slot(const brg_runtime *rt, const char *name) {
    for (int k = 0; k < rt->n_carried; k++)
        if (strcmp(name, rt->carried[k]) == 0) return k;
    return -1;
}

static brg_tensor **input_slots(brg_device *dev, int mb) { return &dev->inputs[mb * RUNTIME_CARRIED_MAX]; }
static brg_tensor **output_slots(brg_device *dev, int mb) { return &dev->outputs[mb * RUNTIME_CARRIED_MAX]; }

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static brg_tensor *carried(const brg_device *dev, const brg_bundle *b, int k) {
    return brg_bundle_carried(b, dev->rt->carried[k]);
}
static brg_status set_carried(const brg_device *dev, brg_bundle *b, int k, brg_tensor *t) {
    return brg_bundle_carry(b, dev->rt->carried[k], t);
}

static brg_arena *arena_of(const brg_device *dev, int mb) { return dev->slots[mb % dev->n_slots]; }

/* A slot is emptied when a later micro-batch takes it: by then the earlier one's backward is
 * done here and its gradients have been handed on. */
static void take_slot(brg_device *dev, int mb) {
    int s = mb % dev->n_slots;
    if (dev->slot_busy[s]) brg_arena_reset(dev->slots[s], 0);
    dev->slot_busy[s] = true;
}

static brg_status copy_in(brg_device *dev, int mb, const brg_tensor *src, brg_tensor **out) {
    if (!src) {
        *out = NULL;
        return BRG_OK;
    }
    BRG_TRY(brg_tensor_new(arena_of(dev, mb), src->dtype, src->ndim, src->shape, "stage input", out));
    dev->backend->copy((*out)->data, src->data, brg_tensor_nbytes(src), BRG_COPY_TO_DEVICE);
    (*out)->requires_grad = dev->rt->opts.training;
    return BRG_OK;
}

static brg_status receive_inputs(brg_device *dev, int mb, brg_bundle *b) {
    transport *t = dev->rt->transport;
    transport_msg msg;
    BRG_TRY(t->recv(t, dev->id, dev->id - 1, transport_tag(mb, TRANSPORT_FORWARD), &msg));
    brg_status st = BRG_OK;
    brg_tensor **in = input_slots(dev, mb);
    for (int k = 0; k < dev->rt->n_carried; k++) in[k] = NULL;
    for (int i = 0; st == BRG_OK && i < msg.n; i++) {
        int k = carried_slot(dev->rt, msg.items[i].name);
        if (k < 0) st = brg_error(BRG_ERR_INTERNAL, "stage %d received an unknown tensor %s", dev->stage, msg.items[i].name);
        else st = copy_in(dev, mb, msg.items[i].tensor, &in[k]);
    }
    t->release(t, dev->id, &msg);
    for (int k = 0; st == BRG_OK && k < dev->rt->n_carried; k++) st = set_carried(dev, b, k, in[k]);
    return st;
}

static void start_bundle(brg_device *dev, int mb, brg_bundle *b) {
    brg_runtime *rt = dev->rt;
    int global = dev->replica * rt->opts.micro_batches + mb;
    memset(b, 0, sizeof *b);
    b->inputs = rt->mbs[global];
    b->training = rt->opts.training;
    b->seed = mix(rt->seed ^ mix((uint64_t)global));
    b->loss_denominator = rt->denominators.labels;
    b->extra_loss_denominator = rt->denominators.extra;
}

static int stage_blocks(const brg_device *dev) { return dev->last_block - dev->first_block + 1; }
static brg_tape *tape_of(brg_device *dev, int mb, int block) {
    return dev->tapes[mb * stage_blocks(dev) + block - dev->first_block];
}
static checkpoint *ckpt_of(brg_device *dev, int mb, int block) {
    return &dev->ckpts[mb * stage_blocks(dev) + block - dev->first_block];
}

/* recompute_checkpoint_every_layer: layers keep their input only; embeddings and heads record
 * as usual. */
static bool recomputed(const brg_device *dev, int block) {
    return dev->rt->opts.recompute && dev->rt->opts.training && dev->view.blocks[block].kind == BRG_BLOCK_LAYER;
}

static brg_status new_like(const brg_device *dev, brg_arena *arena, const brg_tensor *src, const char *what,
                           brg_tensor **out) {
    BRG_TRY(brg_tensor_new(arena, src->dtype, src->ndim, src->shape, what, out));
    dev->backend->copy((*out)->data, src->data, brg_tensor_nbytes(src), BRG_COPY_ON_DEVICE);
    return BRG_OK;
}

/* What a checkpointed layer handed on in slot k: one of its inputs (then the tensor that input was
 * copied from, so downstream gradients land there directly) or a tensor of its own. */
static int input_slot(const brg_runtime *rt, const checkpoint *c, const brg_tensor *o) {
    for (int j = 0; j < rt->n_carried; j++)
        if (o && o == c->in[j]) return j;
    return -1;
}

/* Keeps the layer's own outputs across the arena reset that drops its scratch: same-shaped
 * hidden states go to a buffer taken before the mark, anything else through a host copy. */
static brg_status keep_outputs(const brg_device *dev, brg_arena *arena, checkpoint *c, brg_bundle *b, size_t mark,
                               brg_tensor *pre) {
    const int n = dev->rt->n_carried;
    float *host[RUNTIME_CARRIED_MAX] = {NULL};
    brg_tensor shape[RUNTIME_CARRIED_MAX];
    brg_status st = BRG_OK;
    for (int k = 0; k < n; k++) {
        brg_tensor *o = carried(dev, b, k);
        int j = input_slot(dev->rt, c, o);
        c->fresh[k] = o && j < 0;
        c->out[k] = j >= 0 ? c->prev[j] : NULL;
        if (!c->fresh[k]) continue;
        if (k == 0 && pre && brg_tensor_same_shape(o, pre) && o->dtype == pre->dtype) {
            dev->backend->copy(pre->data, o->data, brg_tensor_nbytes(o), BRG_COPY_ON_DEVICE);
            c->out[k] = pre;
            continue;
        }
        shape[k] = *o;
        host[k] = malloc(brg_tensor_nbytes(o));
        if (!host[k]) st = brg_error(BRG_ERR_OOM, "cannot keep a recomputed layer's output");
        else dev->backend->copy(host[k], o->data, brg_tensor_nbytes(o), BRG_COPY_TO_HOST);
    }
    brg_arena_reset(arena, mark);
    for (int k = 0; k < n; k++) {
        if (host[k] && st == BRG_OK &&
            (st = brg_tensor_new(arena, shape[k].dtype, shape[k].ndim, shape[k].shape, "layer output", &c->out[k])) ==
                BRG_OK)
            dev->backend->copy(c->out[k]->data, host[k], brg_tensor_nbytes(c->out[k]), BRG_COPY_TO_DEVICE);
        free(host[k]);
        if (c->fresh[k] && c->out[k]) c->out[k]->requires_grad = true;
        if (st == BRG_OK) st = set_carried(dev, b, k, c->out[k]);
    }
    return st;
}

/* Runs a layer without recording: its inputs are copied aside (the checkpoint) and everything
 * the layer allocates is released again, except what it hands on. */
static brg_status forward_checkpointed(brg_device *dev, int mb, int block, brg_bundle *b) {
    checkpoint *c = ckpt_of(dev, mb, block);
    brg_tape *tape = tape_of(dev, mb, block);
    brg_arena *arena = arena_of(dev, mb);
    for (int k = 0; k < dev->rt->n_carried; k++) {
        c->prev[k] = carried(dev, b, k);
        c->in[k] = NULL;
        if (c->prev[k]) BRG_TRY(new_like(dev, arena, c->prev[k], "recomputation checkpoint", &c->in[k]));
        if (c->in[k]) BRG_TRY(brg_tensor_ensure_grad(arena, c->in[k]));
        BRG_TRY(set_carried(dev, b, k, c->in[k]));
    }
    brg_tensor *pre = NULL;
    if (c->in[0])
        BRG_TRY(brg_tensor_new(arena, c->in[0]->dtype, c->in[0]->ndim, c->in[0]->shape, "layer output", &pre));
    size_t mark = brg_arena_mark(arena);
    brg_tape_set_grad_enabled(tape, false);
    brg_status st = brg_model_forward_blocks(&dev->view, block, block, tape, b);
    brg_status kept = keep_outputs(dev, arena, c, b, mark, st == BRG_OK ? pre : NULL);
    return st != BRG_OK ? st : kept;
}

/* brg_runtime_infer_collect: micro-batch `global`'s logits [b, ...] into rows [first, first + b)
 * of the batch's [rows, ...] tensor, which the first micro-batch to get here allocates with its
 * shape past the first dimension (every later one must have the same). */
static brg_status collect_logits(const brg_device *dev, int global, const brg_tensor *lg) {
    brg_runtime *rt = dev->rt;
    char got[128], want[128];
    if (!lg) return brg_error(BRG_ERR_INTERNAL, "the model's last block gave no logits");
    const int64_t first = rt->collect_rows[global], rows = lg->ndim > 0 ? lg->shape[0] : 0;
    if (lg->ndim < 1 || !brg_tensor_is_contiguous(lg) || first < 0 || first + rows > rt->collect_total)
        return brg_error(BRG_ERR_INTERNAL, "micro-batch %d's logits %s do not fit rows [%lld, %lld) of the batch's %lld",
                         global, brg_shape_str(lg, got, sizeof got), (long long)first, (long long)(first + rows),
                         (long long)rt->collect_total);
    pthread_mutex_lock(&rt->collect_lock);
    brg_tensor *all = *rt->collect_out;
    brg_status st = BRG_OK;
    if (!all) {
        int64_t shape[BRG_MAX_DIMS];
        memcpy(shape, lg->shape, (size_t)lg->ndim * sizeof *shape);
        shape[0] = rt->collect_total;
        st = brg_tensor_new(rt->collect_arena, lg->dtype, lg->ndim, shape, "logits", &all);
        if (st == BRG_OK) *rt->collect_out = all;
    } else {
        bool same = all->ndim == lg->ndim && all->dtype == lg->dtype;
        for (int d = 1; same && d < lg->ndim; d++) same = all->shape[d] == lg->shape[d];
        if (!same)
            st = brg_error(BRG_ERR_INTERNAL, "micro-batch %d's logits are %s, unlike the batch's %s past the first dimension",
                           global, brg_shape_str(lg, got, sizeof got), brg_shape_str(all, want, sizeof want));
    }
    pthread_mutex_unlock(&rt->collect_lock);
    BRG_TRY(st);
    const size_t row_bytes = rows ? brg_tensor_nbytes(lg) / (size_t)rows : 0;
    dev->backend->copy((char *)all->data + (size_t)first * row_bytes, lg->data, brg_tensor_nbytes(lg),
                       BRG_COPY_TO_HOST);
    return BRG_OK;
}

static brg_status forward_block(brg_device *dev, int mb, int blk, brg_bundle *b) {
    brg_tape *tape = tape_of(dev, mb, blk);
    brg_tape_clear(tape);
    if (recomputed(dev, blk)) {
        brg_status st = forward_checkpointed(dev, mb, blk, b);
        return st != BRG_OK ? brg_error_wrap(st, "%s", dev->view.blocks[blk].name) : BRG_OK;
    }
    brg_tape_set_grad_enabled(tape, dev->rt->opts.training);
    return brg_model_forward_blocks(&dev->view, blk, blk, tape, b);
}

/* A stage hands on only what the model declares: a block that carries anything else would lose it
 * at the next stage boundary, so it is an error at every one. */
static brg_status check_carried(const brg_device *dev, const brg_bundle *b) {
    for (int i = 0; i < b->carried.n; i++)
        if (carried_slot(dev->rt, b->carried.items[i].name) < 0)
            return brg_error(BRG_ERR_INTERNAL,
                             "stage %d carries '%s', which %s does not declare (brg_model_ops.carried)",
                             dev->stage, b->carried.items[i].name, dev->rt->model->ops->architecture);
    return BRG_OK;
}

static brg_status forward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    int global = dev->replica * rt->opts.micro_batches + mb;
    brg_bundle *b = &dev->bundles[mb];
    take_slot(dev, mb);
    start_bundle(dev, mb, b);
    if (dev->stage > 0) BRG_TRY(receive_inputs(dev, mb, b));
    double t0 = runtime_now();
    for (int blk = dev->first_block; blk <= dev->last_block; blk++) {
        const uint64_t t_blk = brg_trace_enabled() ? brg_trace_now() : 0;
        brg_status st = forward_block(dev, mb, blk, b);
        if (t_blk) brg_trace_span(BRG_TRACE_FORWARD, t_blk, blk, mb, 0, NULL);
        BRG_TRY(st);
    }
    dev->busy_seconds += runtime_now() - t0;
    if (dev->stage == rt->opts.stages - 1) {
        output_slots(dev, mb)[0] = b->loss;
        if (rt->losses) rt->losses[global] = b->loss ? ((float *)b->loss->data)[0] : 0.0f;
        /* (inference only: its activations, the logits too, are fp32) */
        if (rt->logits && rt->logits[global] && b->logits)
            dev->backend->copy(rt->logits[global], b->logits->data, brg_tensor_nbytes(b->logits), BRG_COPY_TO_HOST);
        return rt->collect_out ? collect_logits(dev, global, b->logits) : BRG_OK;
    }
    BRG_TRY(check_carried(dev, b));
    brg_named_tensor items[RUNTIME_CARRIED_MAX];
    int n = 0;
    for (int k = 0; k < rt->n_carried; k++) {
        brg_tensor *o = carried(dev, b, k);
        output_slots(dev, mb)[k] = o;
        if (!o) continue;
        /* The gradient the next stage sends back is added into this buffer. */
        if (o->requires_grad) BRG_TRY(brg_tensor_ensure_grad(arena_of(dev, mb), o));
        items[n++] = (brg_named_tensor){rt->carried[k], o};
    }
    return rt->transport->send(rt->transport, dev->id, dev->id + 1, transport_tag(mb, TRANSPORT_FORWARD), items, n);
}

/* dst's gradient += g, on the device's kernels; a half gradient (an op's output in a .16 run)
 * through an fp32 copy, rounded back. */
static void add_into(const brg_device *dev, brg_tensor *dst, const float *g) {
    const int64_t n = brg_tensor_numel(dst);
    if (dst->grad_dtype == BRG_DTYPE_F32) {
        dev->backend->f32->accumulate(dst->grad, false, g, n);
        return;
    }
    float *wide = brg_scratch(BRG_SCRATCH_GRAD_STAGE, (size_t)n);
    dev->backend->f32->widen(wide, dst->grad, dst->grad_dtype, n);
    dev->backend->f32->accumulate(wide, false, g, n);
    dev->backend->f32->narrow(dst->grad, wide, dst->grad_dtype, n);
}

/* Sends the gradients of this stage's carried inputs back to the stage before. */
static brg_status send_input_grads(brg_device *dev, int mb) {
    brg_named_tensor items[RUNTIME_CARRIED_MAX];
    brg_tensor grads[RUNTIME_CARRIED_MAX];
    int n = 0;
    for (int k = 0; k < dev->rt->n_carried; k++) {
        const brg_tensor *in = input_slots(dev, mb)[k];
        if (!in || !in->grad) continue;
        grads[n] = brg_tensor_wrap(BRG_DTYPE_F32, in->ndim, in->shape, in->grad);
        items[n] = (brg_named_tensor){dev->rt->carried[k], &grads[n]};
        n++;
    }
    transport *t = dev->rt->transport;
    return t->send(t, dev->id, dev->id - 1, transport_tag(mb, TRANSPORT_BACKWARD), items, n);
}

/* Adds the gradients the next stage sent for this stage's carried outputs into their buffers. */
static brg_status receive_output_grads(brg_device *dev, int mb) {
    transport *t = dev->rt->transport;
    transport_msg msg;
    BRG_TRY(t->recv(t, dev->id, dev->id + 1, transport_tag(mb, TRANSPORT_BACKWARD), &msg));
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && i < msg.n; i++) {
        int k = carried_slot(dev->rt, msg.items[i].name);
        brg_tensor *out = k < 0 ? NULL : output_slots(dev, mb)[k];
        const brg_tensor *g = msg.items[i].tensor;
        if (k < 0 || (out && (!brg_tensor_same_shape(out, g) || g->dtype != BRG_DTYPE_F32)))
            st = brg_error(BRG_ERR_INTERNAL, "stage %d received a gradient for %s that does not match what it sent",
                           dev->stage, msg.items[i].name);
        else if (out && out->grad) add_into(dev, out, g->data);
    }
    t->release(t, dev->id, &msg);
    return st;
}

static brg_status add_grad(brg_device *dev, int mb, brg_tensor *t, const float *g) {
    if (!t || !g || !t->requires_grad) return BRG_OK;
    if (!t->grad) BRG_TRY(brg_tensor_ensure_grad(arena_of(dev, mb), t));
    add_into(dev, t, g);
    return BRG_OK;
}

/* Rebuilds a layer's tape from its checkpoint, runs its backward from the gradient its output
 * received, and passes the input gradient on to the tensor the checkpoint was copied from. */
static brg_status backward_checkpointed(brg_device *dev, int mb, int block) {
    checkpoint *c = ckpt_of(dev, mb, block);
    brg_tape *tape = tape_of(dev, mb, block);
    brg_bundle b;
    start_bundle(dev, mb, &b);
    const int n = dev->rt->n_carried;
    for (int k = 0; k < n; k++) {
        if (c->in[k]) {
            memset(c->in[k]->grad, 0, brg_tensor_grad_bytes(c->in[k]));
            c->in[k]->requires_grad = true;
        }
        BRG_TRY(set_carried(dev, &b, k, c->in[k]));
    }
    brg_arena *arena = arena_of(dev, mb);
    size_t mark = brg_arena_mark(arena);
    brg_tape_clear(tape);
    brg_tape_set_grad_enabled(tape, true);
    const uint64_t t_re = brg_trace_enabled() ? brg_trace_now() : 0;
    brg_status st = brg_model_forward_blocks(&dev->view, block, block, tape, &b);
    if (t_re) brg_trace_span(BRG_TRACE_RECOMPUTE, t_re, block, mb, 0, NULL);
    brg_tensor *outs[RUNTIME_CARRIED_MAX] = {NULL};
    const float *seeds[RUNTIME_CARRIED_MAX] = {NULL};
    for (int k = 0; k < n; k++)
        if (c->fresh[k] && c->out[k]) outs[k] = carried(dev, &b, k), seeds[k] = c->out[k]->grad;
    if (st == BRG_OK) st = brg_tape_backward_multi(tape, outs, seeds, n);
    brg_tape_clear(tape);
    brg_arena_reset(arena, mark);
    for (int k = 0; st == BRG_OK && k < n; k++)
        if (c->in[k]) st = add_grad(dev, mb, c->prev[k], c->in[k]->grad);
    return st;
}

/* Backward through the stage's blocks in reverse: a recorded block replays its tape (its outputs'
 * gradients are already in place), a recomputed one rebuilds it first. */
static brg_status backward_blocks(brg_device *dev, int mb) {
    for (int blk = dev->last_block; blk >= dev->first_block; blk--) {
        const uint64_t t_blk = brg_trace_enabled() ? brg_trace_now() : 0;
        brg_status st = recomputed(dev, blk) ? backward_checkpointed(dev, mb, blk)
                                             : brg_tape_backward_multi(tape_of(dev, mb, blk), NULL, NULL, 0);
        if (t_blk) brg_trace_span(BRG_TRACE_BACKWARD, t_blk, blk, mb, 0, NULL);
        BRG_TRY(st);
    }
    return BRG_OK;
}

static brg_status backward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    brg_tensor **out = output_slots(dev, mb);
    double t0;
    if (dev->stage == rt->opts.stages - 1) {
        t0 = runtime_now();
        const float scale = rt->loss_scale;
        if (!out[0] || !out[0]->requires_grad) goto done; /* nothing to learn from: no counted labels */
        BRG_TRY(add_grad(dev, mb, out[0], &scale));
    } else {
        /* Counted as waiting, as when the next stage added it in itself. */
        BRG_TRY(receive_output_grads(dev, mb));
        t0 = runtime_now();
    }
    BRG_TRY(backward_blocks(dev, mb));
done:
    dev->busy_seconds += runtime_now() - t0;
    if (dev->stage > 0) BRG_TRY(send_input_grads(dev, mb));
    return BRG_OK;
}

static brg_status run_steps(brg_device *dev) {
    const brg_schedule *s = &dev->rt->schedule;
    for (int i = 0; i < s->length[dev->stage]; i++) {
        brg_schedule_step step = s->steps[dev->stage][i];
        if (step.pass == BRG_PASS_FORWARD) BRG_TRY(forward_step(dev, step.micro_batch));
        else BRG_TRY(backward_step(dev, step.micro_batch));
        if (brg_trace_enabled()) trace_device_memory(dev);
    }
    /* Gradients whose zeroing is still pending got nothing from this run: they are zero. */
    for (int p = 0; dev->rt->opts.training && p < dev->view.n_params; p++)
        if (dev->holds[p]) brg_tensor_settle_grad(dev->view.params[p].tensor);
    return BRG_OK;
}

/* Whatever happened, the device drops the run's activations itself: nothing of them is needed
 * once its last backward has sent its gradients on, since every message was a copy. */
brg_status executor_run_device(brg_device *dev, void *arg) {
    (void)arg;
    dev->run_mark = brg_arena_mark(dev->arena);
    packed_weights_begin_run(dev->packed);
    brg_status st = run_steps(dev);
    packed_weights_end_run(dev->packed);
    if (st == BRG_OK) st = brg_arena_check(dev->arena); /* kernel scratch may have taken it past its budget */
    const size_t held = dev->run_mark + brg_arena_borrowed(dev->arena); /* what the run started with */
    size_t act = brg_arena_peak(dev->arena) > held ? brg_arena_peak(dev->arena) - held : 0;
    if (act > dev->activation_peak) dev->activation_peak = act;
    for (int s = 0; s < dev->n_slots; s++)
        if (brg_arena_peak(dev->slots[s]) > dev->micro_batch_peak)
            dev->micro_batch_peak = brg_arena_peak(dev->slots[s]);
    for (int i = 0; i < dev->n_tapes; i++) brg_tape_clear(dev->tapes[i]);
    for (int s = 0; s < dev->n_slots; s++) {
        brg_arena_reset(dev->slots[s], 0);
        dev->slot_busy[s] = false;
    }
    brg_arena_reset(dev->arena, dev->run_mark);
    return st;
}
