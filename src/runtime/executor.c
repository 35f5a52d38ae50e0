/* One device's part of a run: its stage's row of the schedule. Activations cross stages as
 * pointers into the sender's arena, which stay valid for the whole run; the receiver copies
 * them into its own arena, as a transfer between real devices would. */
#include <string.h>

#include "runtime_internal.h"

static channel *fwd_link(brg_runtime *rt, int replica, int stage) {
    return &rt->fwd[replica * (rt->opts.stages - 1) + stage];
}
static channel *bwd_link(brg_runtime *rt, int replica, int stage) {
    return &rt->bwd[replica * (rt->opts.stages - 1) + stage];
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static brg_status receive_input(brg_device *dev, int mb, brg_bundle *b) {
    brg_runtime *rt = dev->rt;
    channel_msg msg;
    BRG_TRY(channel_recv(fwd_link(rt, dev->replica, dev->stage - 1), &msg));
    if (msg.micro_batch != mb)
        return brg_error(BRG_ERR_INTERNAL, "stage %d expected micro-batch %d, received %d", dev->stage, mb,
                         msg.micro_batch);
    const brg_tensor *src = msg.payload;
    brg_tensor *copy;
    BRG_TRY(brg_tensor_new(dev->arena, BRG_DTYPE_F32, src->ndim, src->shape, "stage input", &copy));
    memcpy(copy->data, src->data, brg_tensor_nbytes(src));
    copy->requires_grad = rt->opts.training;
    dev->inputs[mb] = copy;
    b->hidden = copy;
    return BRG_OK;
}

static brg_status forward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    int M = rt->opts.micro_batches, global = dev->replica * M + mb;
    const brg_micro_batch *in = &rt->mbs[global];
    brg_bundle *b = &dev->bundles[mb];
    memset(b, 0, sizeof *b);
    b->input_ids = in->input_ids;
    b->attention_mask = in->attention_mask;
    b->labels = in->labels;
    b->training = rt->opts.training;
    b->seed = mix(rt->seed ^ mix((uint64_t)global));
    b->loss_denominator = rt->loss_denominator;
    if (dev->stage > 0) BRG_TRY(receive_input(dev, mb, b));
    brg_tape *tape = dev->tapes[mb];
    brg_tape_clear(tape);
    brg_tape_set_grad_enabled(tape, rt->opts.training);
    double t0 = runtime_now();
    BRG_TRY(brg_model_forward_blocks(&dev->view, dev->first_block, dev->last_block, tape, b));
    dev->busy_seconds += runtime_now() - t0;
    if (dev->stage == rt->opts.stages - 1) {
        dev->outputs[mb] = b->loss;
        if (rt->losses) rt->losses[global] = b->loss ? ((float *)b->loss->data)[0] : 0.0f;
        return BRG_OK;
    }
    dev->outputs[mb] = b->hidden;
    return channel_send(fwd_link(rt, dev->replica, dev->stage), (channel_msg){mb, b->hidden});
}

/* The gradient of this stage's input, for the stage before (zeros if nothing reached it). */
static brg_status send_input_grad(brg_device *dev, int mb) {
    brg_tensor *in = dev->inputs[mb];
    if (!in->grad) BRG_TRY(brg_tensor_ensure_grad(dev->arena, in));
    return channel_send(bwd_link(dev->rt, dev->replica, dev->stage - 1), (channel_msg){mb, in->grad});
}

static brg_status backward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    brg_tape *tape = dev->tapes[mb];
    brg_tensor *out = dev->outputs[mb];
    if (dev->stage == rt->opts.stages - 1) {
        double t0 = runtime_now();
        if (out && out->requires_grad) BRG_TRY(brg_tape_backward(tape, out));
        dev->busy_seconds += runtime_now() - t0;
    } else {
        channel_msg msg;
        BRG_TRY(channel_recv(bwd_link(rt, dev->replica, dev->stage), &msg));
        if (msg.micro_batch != mb)
            return brg_error(BRG_ERR_INTERNAL, "stage %d expected the gradient of micro-batch %d, received %d",
                             dev->stage, mb, msg.micro_batch);
        double t0 = runtime_now();
        if (out->requires_grad) BRG_TRY(brg_tape_backward_from(tape, out, msg.payload));
        dev->busy_seconds += runtime_now() - t0;
    }
    if (dev->stage > 0) BRG_TRY(send_input_grad(dev, mb));
    return BRG_OK;
}

brg_status executor_run_device(brg_device *dev, void *arg) {
    (void)arg;
    const brg_schedule *s = &dev->rt->schedule;
    dev->run_mark = brg_arena_mark(dev->arena);
    for (int i = 0; i < s->length[dev->stage]; i++) {
        brg_schedule_step step = s->steps[dev->stage][i];
        if (step.pass == BRG_PASS_FORWARD) BRG_TRY(forward_step(dev, step.micro_batch));
        else BRG_TRY(backward_step(dev, step.micro_batch));
    }
    size_t act = brg_arena_peak(dev->arena) > dev->run_mark ? brg_arena_peak(dev->arena) - dev->run_mark : 0;
    if (act > dev->activation_peak) dev->activation_peak = act;
    return BRG_OK;
}
