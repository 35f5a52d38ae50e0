/* Differentiable ops. Each computes its output in the tape's arena and, when the tape needs it,
 * records its backward. Float inputs are F32 and contiguous; integer ids/targets are I32. */
#ifndef BRIGADE_OPS_H
#define BRIGADE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/tape.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_activation {
    BRG_ACT_GELU_ERF = 0,  /* "gelu": exact */
    BRG_ACT_GELU_TANH = 1, /* "gelu_new", "gelu_pytorch_tanh" */
} brg_activation;

/* y[..., out] = x[..., in] @ W + b; W is [in, out] when w_in_out (GPT-2 Conv1D), else [out, in]
 * (nn.Linear, and a tied LM head reading the embedding table). b may be NULL. */
brg_status brg_linear(brg_tape *tape, brg_tensor *x, brg_tensor *w, brg_tensor *b, bool w_in_out,
                      brg_tensor **y);

/* Batched matmul over leading dims: a [..., M, K] (or [..., K, M] with trans_a), b likewise. */
brg_status brg_matmul(brg_tape *tape, brg_tensor *a, brg_tensor *b, bool trans_a, bool trans_b,
                      brg_tensor **y);

/* y[..., dim] = table[ids[...]]; every id must be in [0, rows) (checked: BRG_ERR_INVALID_ARG). */
brg_status brg_embedding(brg_tape *tape, brg_tensor *ids, brg_tensor *table, brg_tensor **y);

brg_status brg_layer_norm(brg_tape *tape, brg_tensor *x, brg_tensor *gamma, brg_tensor *beta, float eps,
                          brg_tensor **y);
brg_status brg_activation_op(brg_tape *tape, brg_tensor *x, brg_activation act, brg_tensor **y);
brg_status brg_softmax(brg_tape *tape, brg_tensor *x, brg_tensor **y);
brg_status brg_add(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y);

/* Inverted dropout keyed by (seed, offset): the same key gives the same mask. p == 0 (or
 * `training` false) returns x itself. */
brg_status brg_dropout(brg_tape *tape, brg_tensor *x, float p, bool training, uint64_t seed, uint64_t offset,
                       brg_tensor **y);

/* Same data, new shape (the gradient flows back through the reshape). */
brg_status brg_reshape(brg_tape *tape, brg_tensor *x, int ndim, const int64_t *shape, brg_tensor **y);

/* Reads columns [col, col + H*D) of each row of x [B, T, W] as heads: y [B, H, T, D]. */
brg_status brg_split_heads(brg_tape *tape, brg_tensor *x, int64_t col, int64_t heads, int64_t head_dim,
                           brg_tensor **y);
/* x [B, H, T, D] -> y [B, T, H*D]. */
brg_status brg_merge_heads(brg_tape *tape, brg_tensor *x, brg_tensor **y);

typedef struct brg_attention_opts {
    float scale;
    bool causal;
    brg_tensor *key_mask; /* F32 [B, Tk], 1 = attend, 0 = padding; or NULL */
    brg_tensor *bias;     /* F32 [H, Tq, Tk] additive (differentiable), or NULL */
} brg_attention_opts;

/* Scaled dot-product attention, fused: q [B,H,Tq,D], k and v [B,H,Tk,D] -> y [B,H,Tq,D]. */
brg_status brg_attention(brg_tape *tape, brg_tensor *q, brg_tensor *k, brg_tensor *v,
                         const brg_attention_opts *opts, brg_tensor **y);

/* Mean cross-entropy over rows whose target != ignore_index: logits [..., V], targets I32 [...]
 * with the same leading shape. Targets outside [0, V) other than ignore_index are an error.
 * Returns a 0-d tensor (0 when every row is ignored, with no gradient). */
brg_status brg_cross_entropy(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                             brg_tensor **loss);
/* The same loss summed and divided by `denominator` instead of this call's own count: a
 * micro-batch's share of the mean over a whole global batch (denominator = the number of counted
 * targets in that batch), so that summing the micro-batches' losses and gradients gives exactly
 * the global mean. denominator <= 0 means the call's own count. */
brg_status brg_cross_entropy_share(brg_tape *tape, brg_tensor *logits, brg_tensor *targets, int32_t ignore_index,
                                   double denominator, brg_tensor **loss);

/* ---- encoder ops (BERT, ViT) ---- */

/* ---- encoder-decoder ops (T5) ---- */

#ifdef __cplusplus
}
#endif
#endif
