/* One device's part of a run: its stage's row of the schedule. A stage hands the next one its
 * carried tensors (hidden states and, for encoder-decoder models, the encoder's output) as
 * pointers into its own arena, valid for the whole run; the receiver copies them into its
 * arena, as a transfer between real devices would. Gradients of the carried tensors travel back
 * the same way. */
#include <string.h>

#include "runtime_internal.h"

enum { CARRIED = 2 };

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

static brg_tensor **carried(brg_bundle *b, int k) { return k == 0 ? &b->hidden : &b->encoder_hidden; }

static brg_status copy_in(brg_device *dev, const brg_tensor *src, brg_tensor **out) {
    if (!src) {
        *out = NULL;
        return BRG_OK;
    }
    BRG_TRY(brg_tensor_new(dev->arena, BRG_DTYPE_F32, src->ndim, src->shape, "stage input", out));
    memcpy((*out)->data, src->data, brg_tensor_nbytes(src));
    (*out)->requires_grad = dev->rt->opts.training;
    return BRG_OK;
}

static brg_status receive_inputs(brg_device *dev, int mb, brg_bundle *b) {
    brg_runtime *rt = dev->rt;
    channel_msg msg;
    BRG_TRY(channel_recv(fwd_link(rt, dev->replica, dev->stage - 1), &msg));
    if (msg.micro_batch != mb)
        return brg_error(BRG_ERR_INTERNAL, "stage %d expected micro-batch %d, received %d", dev->stage, mb,
                         msg.micro_batch);
    brg_bundle *from = msg.payload;
    for (int k = 0; k < CARRIED; k++) {
        BRG_TRY(copy_in(dev, *carried(from, k), &dev->inputs[mb * CARRIED + k]));
        *carried(b, k) = dev->inputs[mb * CARRIED + k];
    }
    return BRG_OK;
}

static void start_bundle(brg_device *dev, int mb, brg_bundle *b) {
    brg_runtime *rt = dev->rt;
    int global = dev->replica * rt->opts.micro_batches + mb;
    const brg_micro_batch *in = &rt->mbs[global];
    memset(b, 0, sizeof *b);
    b->input_ids = in->input_ids;
    b->attention_mask = in->attention_mask;
    b->labels = in->labels;
    b->token_type_ids = in->token_type_ids;
    b->pixel_values = in->pixel_values;
    b->decoder_input_ids = in->decoder_input_ids;
    b->decoder_attention_mask = in->decoder_attention_mask;
    b->extra_labels = in->extra_labels;
    b->training = rt->opts.training;
    b->seed = mix(rt->seed ^ mix((uint64_t)global));
    b->loss_denominator = rt->loss_denominator;
}

static brg_status forward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    int global = dev->replica * rt->opts.micro_batches + mb;
    brg_bundle *b = &dev->bundles[mb];
    start_bundle(dev, mb, b);
    if (dev->stage > 0) BRG_TRY(receive_inputs(dev, mb, b));
    brg_tape *tape = dev->tapes[mb];
    brg_tape_clear(tape);
    brg_tape_set_grad_enabled(tape, rt->opts.training);
    double t0 = runtime_now();
    BRG_TRY(brg_model_forward_blocks(&dev->view, dev->first_block, dev->last_block, tape, b));
    dev->busy_seconds += runtime_now() - t0;
    if (dev->stage == rt->opts.stages - 1) {
        dev->outputs[mb * CARRIED] = b->loss;
        if (rt->losses) rt->losses[global] = b->loss ? ((float *)b->loss->data)[0] : 0.0f;
        return BRG_OK;
    }
    for (int k = 0; k < CARRIED; k++) dev->outputs[mb * CARRIED + k] = *carried(b, k);
    return channel_send(fwd_link(rt, dev->replica, dev->stage), (channel_msg){mb, b});
}

/* The gradients of this stage's carried inputs, for the stage before (zeros where nothing
 * reached them). */
static brg_status send_input_grads(brg_device *dev, int mb) {
    for (int k = 0; k < CARRIED; k++) {
        brg_tensor *in = dev->inputs[mb * CARRIED + k];
        if (in && !in->grad) BRG_TRY(brg_tensor_ensure_grad(dev->arena, in));
        dev->input_grads[mb * CARRIED + k] = in ? in->grad : NULL;
    }
    return channel_send(bwd_link(dev->rt, dev->replica, dev->stage - 1), (channel_msg){mb, &dev->input_grads[mb * CARRIED]});
}

static brg_status backward_step(brg_device *dev, int mb) {
    brg_runtime *rt = dev->rt;
    brg_tape *tape = dev->tapes[mb];
    brg_tensor **out = &dev->outputs[mb * CARRIED];
    double t0;
    if (dev->stage == rt->opts.stages - 1) {
        t0 = runtime_now();
        if (out[0] && out[0]->requires_grad) BRG_TRY(brg_tape_backward(tape, out[0]));
    } else {
        channel_msg msg;
        BRG_TRY(channel_recv(bwd_link(rt, dev->replica, dev->stage), &msg));
        if (msg.micro_batch != mb)
            return brg_error(BRG_ERR_INTERNAL, "stage %d expected the gradient of micro-batch %d, received %d",
                             dev->stage, mb, msg.micro_batch);
        t0 = runtime_now();
        BRG_TRY(brg_tape_backward_multi(tape, out, (const float *const *)msg.payload, CARRIED));
    }
    dev->busy_seconds += runtime_now() - t0;
    if (dev->stage > 0) BRG_TRY(send_input_grads(dev, mb));
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
