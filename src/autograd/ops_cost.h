/* What the ops allocate, for memory plans. Each ops_cost_NAME mirrors brg_NAME: it adds to `c`
 * the bytes one call on tensors of the given sizes takes from the tape's arena (its output
 * tensors, header and data each rounded up as the arena rounds them; the statistics it saves;
 * its autograd context when the tape records), the gradient buffers its outputs get during
 * backward, and the kernel scratch it asks for. A model's block cost replays its forward through
 * these (see brg_model_arch.block_cost), and tests/test_memory_plan.c holds the sum to what the
 * device's arena measures. */
#ifndef BRIGADE_OPS_COST_H
#define BRIGADE_OPS_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct ops_cost {
    bool record;  /* the tape records (training): contexts, gradients, backward scratch */
    bool dropout; /* the micro-batch trains: a dropout with p > 0 makes a new tensor */
    /* bytes per element of the ops' float outputs (brg_tape_activation_dtype): 4 (also when 0),
     * or 2 with half activations */
    int act_size;
    double fwd;   /* bytes the forward allocates (kept until the micro-batch is released) */
    double grad;  /* bytes of the activation gradients backward allocates */
    double scratch[BRG_SCRATCH_SLOTS]; /* the largest request of each kernel scratch slot */
    /* The same for each of a device's team threads, from the ops that split across the team and
     * ask for scratch on every thread (attention, by heads) */
    double team[BRG_SCRATCH_SLOTS];
    /* What the block carries, in elements: its inputs (in_used: those its ops read, which get
     * gradients) and the outputs it makes itself (0 for none, or for an input it hands on
     * unchanged), for stage inputs and recomputation. */
    double in[2], out[2];
    bool in_used[2];
    /* Training: the bf16 panels of the weights its linear layers multiply by, as a device that
     * packs them once a step holds them (runtime/packed_weights.h: W for the forward product, W^T
     * for the input gradient's); 0 where this CPU's bf16 kernel has no panels */
    double packed;
} ops_cost;

/* `bytes` rounded up as the arena rounds an allocation (a request of 0 takes one unit). */
double ops_cost_align(double bytes);
/* One tensor of `n` elements of `elem_size` bytes: header and data. */
double ops_cost_tensor_bytes(double n, int elem_size);
/* A tensor the model's code makes itself (position ids, shifted labels: grad false), or an
 * output that takes part in backward (grad true: it gets a gradient when the tape records). */
void ops_cost_tensor(ops_cost *c, double n, int elem_size, bool grad);
/* The fp32 copies through which backward reads and adds into a half gradient of n elements
 * (ops_cost_tensor counts them for a half output; an output made another way calls it). */
void ops_cost_half_grad(ops_cost *c, double n);
/* The k-th half gradient of n elements a backward function adds into (its k-th brg_tape_grad of
 * a half gradient, k > 0: ops_cost_tensor counts the first): counted with half activations. */
void ops_cost_grad_stage(ops_cost *c, int k, double n);
/* A half output of n elements that its ops stage a block of rows at a time, `staged` elements of
 * it and of its gradient at once (ops_stage_rows), which ops_cost_stage_rows gives in rows. */
void ops_cost_output_rows(ops_cost *c, double n, double staged);
double ops_cost_stage_rows(const ops_cost *c, double rows, double width);
/* For the ops' own cost functions: an autograd context of `size` bytes (when recording), and a
 * request of `floats` floats from scratch slot `slot`. */
void ops_cost_context(ops_cost *c, size_t size);
void ops_cost_scratch(ops_cost *c, int slot, double floats);
/* The same request made on each of a device's team threads (an op split across them). */
void ops_cost_team_scratch(ops_cost *c, int slot, double floats);
/* The size of an op's float output element (c->act_size, 4 when unset): an op's cost function
 * counts its outputs with it. */
int ops_cost_act(const ops_cost *c);
/* An ops_read or ops_write of `floats` values that goes through staging slot `slot` (0 to
 * BRG_SCRATCH_STAGE_SLOTS - 1): counted only with half activations, where it widens. */
void ops_cost_stage(ops_cost *c, int slot, double floats);
/* A matrix product (brg_gemm) on operands of a_elems and b_elems elements: with a 16-bit compute
 * type it rounds them into scratch slots BRG_SCRATCH_GEMM_A and _B (the plan counts those only
 * then). `team`: a product run on each of the team's threads (attention's), counted in c->team
 * too. */
void ops_cost_product(ops_cost *c, double a_elems, double b_elems, bool team);
/* A linear layer's weight of in x out elements, packed once a step into bf16 panels by a training
 * device: op(B) [in, out] for the forward product, [out, in] for the input gradient's. */
void ops_cost_packed_weight(ops_cost *c, double in, double out);

/* ops_linear.c: x [rows, in] -> [rows, out], the weight [in, out] (w_in_out) or [out, in] */
void ops_cost_linear(ops_cost *c, double rows, double in, double out, bool w_in_out);
void ops_cost_linear_act(ops_cost *c, double rows, double in, double out, bool w_in_out, bool bias);
void ops_cost_matmul(ops_cost *c, double out_elems);

/* ops_nn.c */
void ops_cost_embedding(ops_cost *c, double ids, double dim);
void ops_cost_layer_norm(ops_cost *c, double rows, double width);
void ops_cost_activation(ops_cost *c, double n);
void ops_cost_softmax(ops_cost *c, double n);
void ops_cost_add(ops_cost *c, double n);
void ops_cost_scale(ops_cost *c, double n);
void ops_cost_dropout(ops_cost *c, double n, float p);
void ops_cost_reshape(ops_cost *c, double n);
/* brg_add and brg_dropout over a donated input (brg_tape_donate) */
void ops_cost_add_donated(ops_cost *c, double n);
void ops_cost_dropout_donated(ops_cost *c, double n, float p);

/* ops_attention.c */
void ops_cost_split_heads(ops_cost *c, double out_elems);
void ops_cost_merge_heads(ops_cost *c, double out_elems);
void ops_cost_attention(ops_cost *c, double B, double H, double Tq, double Tk, double D);

/* ops_loss.c: n target rows for cross-entropy; n elements for MSE and BCE with logits */
void ops_cost_cross_entropy(ops_cost *c, double rows);
/* The same for logits donated to the loss (brg_tape_donate) on a tape whose outputs are spent by
 * backward (the runtime's): their gradient goes over them, so it is taken back off. */
void ops_cost_cross_entropy_spent(ops_cost *c, double rows, double classes);
void ops_cost_pointwise_loss(ops_cost *c, double n); /* brg_mse_loss_share, brg_bce_with_logits_share */

/* ops_select.c, ops_prepend_token.c, ops_add_broadcast.c, ops_embedding_padded.c,
 * ops_patch_unfold.c, ops_tanh.c */
void ops_cost_select(ops_cost *c, double out_elems);
void ops_cost_prepend_token(ops_cost *c, double out_elems);
void ops_cost_add_broadcast(ops_cost *c, double n);
void ops_cost_embedding_padded(ops_cost *c, double ids, double dim);
void ops_cost_patch_unfold(ops_cost *c, double out_elems); /* of model inputs (no gradient) */
void ops_cost_tanh(ops_cost *c, double n);

/* ops_rmsnorm.c, ops_relu.c, ops_mul.c, ops_relpos.c */
void ops_cost_rms_norm(ops_cost *c, double rows, double width);
void ops_cost_relu(ops_cost *c, double n);
void ops_cost_mul(ops_cost *c, double n);
void ops_cost_relative_position_buckets(ops_cost *c, double Tq, double Tk);
void ops_cost_relative_position_bias(ops_cost *c, double H, double Tq, double Tk);

/* ops_pack.c */
void ops_cost_concat_rows(ops_cost *c, double out_elems);
void ops_cost_gather_positions(ops_cost *c, double out_elems);

#endif
