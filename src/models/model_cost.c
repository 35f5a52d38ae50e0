/* model_cost_memory: a block's two replays (training, inference) as brg_block_cost fields. */
#include "models/model_cost.h"

_Static_assert(BRG_SCRATCH_SLOTS == BRG_PLAN_SCRATCH_SLOTS, "the plan counts every kernel scratch slot");
_Static_assert(BRG_SCRATCH_GEMM_A == BRG_PLAN_SCRATCH_ROUNDED_A && BRG_SCRATCH_GEMM_B == BRG_PLAN_SCRATCH_ROUNDED_B,
               "the plan knows which slots hold rounded operands");
_Static_assert(BRG_SCRATCH_STAGE == BRG_PLAN_SCRATCH_STAGE, "the plan knows which slots stage half activations");

/* The gradients of what a block hands on, which the blocks after it (or the runtime) allocate
 * before its backward: its carried outputs' (half with half activations), and a head's loss's
 * (seeded with 1). Its backward
 * releases the gradients of its other outputs when it ends (brg_tape_output). */
static double handed_on_grads(const brg_model *m, int block, const ops_cost *train) {
    if (train->grad <= 0) return 0;
    double bytes = m->blocks[block].kind == BRG_BLOCK_HEAD ? ops_cost_align(sizeof(float)) : 0;
    for (int k = 0; k < 2; k++)
        if (train->out[k] > 0) bytes += ops_cost_align(train->out[k] * ops_cost_act(train));
    return bytes;
}

/* What the blocks before a layer's recomputation and a stage's input copy hold: (*in) the copies
 * of its carried inputs, (*in_grad) their gradients, and (*keep) all recomputation keeps. */
static void kept_inputs(const brg_model *m, int block, const ops_cost *train, double *in, double *in_grad,
                        double *keep) {
    const int act = ops_cost_act(train);
    const double f32 = sizeof(float);
    *in = *in_grad = *keep = 0;
    for (int k = 0; k < 2; k++) {
        if (train->in[k] <= 0) continue;
        *in += ops_cost_tensor_bytes(train->in[k], act);
        *in_grad += train->in_used[k] ? ops_cost_align(train->in[k] * f32) : 0;
        /* recomputation copies every input aside, with a gradient */
        *keep += ops_cost_tensor_bytes(train->in[k], act) + ops_cost_align(train->in[k] * f32);
    }
    if (m->blocks[block].kind != BRG_BLOCK_LAYER) return;
    /* the output buffer taken before the layer runs (shaped as its first input), and the outputs
     * it makes, each with the gradient that comes back */
    if (train->in[0] > 0) *keep += ops_cost_tensor_bytes(train->in[0], act);
    for (int k = 0; k < 2; k++) {
        if (train->out[k] <= 0) continue;
        if (k > 0 || train->out[k] != train->in[0]) *keep += ops_cost_tensor_bytes(train->out[k], act);
        *keep += ops_cost_align(train->out[k] * f32);
    }
}

void model_cost_memory(model_cost_fn fn, const brg_model *m, int block, int64_t batch, int64_t seq,
                       brg_block_cost *out) {
    ops_cost train = {.record = true, .dropout = true}, infer = {.record = false, .dropout = false};
    ops_cost half = {.record = true, .dropout = true, .act_size = 2};
    fn(m, block, batch, seq, &train);
    fn(m, block, batch, seq, &infer);
    fn(m, block, batch, seq, &half);
    out->saved_bytes = (int64_t)train.fwd;
    out->half_saved_bytes = (int64_t)half.fwd;
    out->grad_bytes = (int64_t)train.grad;
    out->released_grad_bytes = (int64_t)(train.grad - handed_on_grads(m, block, &train));
    out->half_grad_bytes = (int64_t)half.grad;
    out->half_released_grad_bytes = (int64_t)(half.grad - handed_on_grads(m, block, &half));
    out->forward_bytes = (int64_t)infer.fwd;
    out->packed_bytes = (int64_t)train.packed;
    for (int i = 0; i < BRG_SCRATCH_SLOTS; i++) {
        const bool staging = i >= BRG_SCRATCH_STAGE; /* operands and gradients of half activations */
        out->scratch_bytes[i] = (int64_t)(staging ? half.scratch[i] : train.scratch[i]);
        out->forward_scratch_bytes[i] = (int64_t)infer.scratch[i];
        out->team_scratch_bytes[i] = (int64_t)train.team[i];
        out->forward_team_scratch_bytes[i] = (int64_t)infer.team[i];
    }
    double in, in_grad, keep;
    kept_inputs(m, block, &train, &in, &in_grad, &keep);
    out->input_bytes = (int64_t)in;
    out->input_grad_bytes = (int64_t)in_grad;
    if (m->blocks[block].kind == BRG_BLOCK_LAYER) out->recompute_bytes = (int64_t)keep;
    kept_inputs(m, block, &half, &in, &in_grad, &keep);
    out->half_input_bytes = (int64_t)in;
    if (m->blocks[block].kind == BRG_BLOCK_LAYER) out->half_recompute_bytes = (int64_t)keep;
}

void model_cost_sequence_loss(ops_cost *c, double rows, double labels, brg_problem_type problem) {
    if (problem == BRG_PROBLEM_AUTO) problem = labels == 1 ? BRG_PROBLEM_REGRESSION : BRG_PROBLEM_SINGLE_LABEL;
    if (problem == BRG_PROBLEM_SINGLE_LABEL) {
        ops_cost_cross_entropy(c, rows);
        return;
    }
    ops_cost_tensor(c, rows * labels, sizeof(float), false); /* float targets, when the labels are integers */
    ops_cost_pointwise_loss(c, rows * labels);
}

/* enc_self_attention: q, k, v, their heads, the fused attention, the merged heads. */
void model_cost_self_attention(ops_cost *o, double B, double T, double C, double H) {
    double BT = B * T;
    for (int i = 0; i < 3; i++) ops_cost_linear(o, BT, C, C, false);
    for (int i = 0; i < 3; i++) ops_cost_split_heads(o, BT * C);
    ops_cost_attention(o, B, H, T, T, C / H);
    ops_cost_merge_heads(o, BT * C);
}
