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

/* y = act(x @ W + b), as brg_linear then brg_activation_op give it (the same bits), with the
 * bias add and the activation fused into one pass over the product, and in backward the
 * activation's derivative and the bias gradient likewise; the pre-activation is kept privately
 * for backward. */
brg_status brg_linear_act(brg_tape *tape, brg_tensor *x, brg_tensor *w, brg_tensor *b, bool w_in_out,
                          brg_activation act, brg_tensor **y);

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
/* y = s * x (shared by every architecture: attention scaling, T5's head rescale). */
brg_status brg_scale(brg_tape *tape, brg_tensor *x, float s, brg_tensor **y);

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
    float dropout;        /* on the probabilities, in training; 0 for none */
    uint64_t seed, offset; /* dropout key (see brg_dropout) */
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

/* y = x with dimension `dim` removed by taking element `index` (the [CLS] row x[:, 0] of
 * [B, T, C] hidden states; one column of [B, T, 2] span logits). */
brg_status brg_select(brg_tape *tape, brg_tensor *x, int dim, int64_t index, brg_tensor **y);

/* y [B, N+1, C] = the token (C elements, any shape such as [1, 1, C]) followed by x [B, N, C]
 * in every batch row: ViT's [CLS] token. */
brg_status brg_prepend_token(brg_tape *tape, brg_tensor *token, brg_tensor *x, brg_tensor **y);

/* y = x + p with p broadcast: p has x's number of dims, each equal to x's or 1, and the dims
 * where p is 1 but x is not form one contiguous run (p [1, N, C] over x [B, N, C]; a mask
 * [B, 1, 1, T] over scores [B, H, T, T]). */
brg_status brg_add_broadcast(brg_tape *tape, brg_tensor *x, brg_tensor *p, brg_tensor **y);

/* brg_embedding whose row `padding_idx` receives no gradient, as nn.Embedding(padding_idx=...)
 * (BERT's word embeddings). padding_idx < 0: every row learns. */
brg_status brg_embedding_padded(brg_tape *tape, brg_tensor *ids, brg_tensor *table, int32_t padding_idx,
                                brg_tensor **y);

brg_status brg_tanh(brg_tape *tape, brg_tensor *x, brg_tensor **y);

/* sum((x - target)^2) / denominator as a 0-d tensor; target is F32 data with x's element count
 * (no gradient flows to it). denominator <= 0 means x's element count (torch's MSELoss mean);
 * a micro-batch passes its share of a global batch's count. */
brg_status brg_mse_loss_share(brg_tape *tape, brg_tensor *x, brg_tensor *target, double denominator,
                              brg_tensor **loss);
/* BCEWithLogitsLoss the same way: sum over elements of the stable
 * max(x,0) - x*t + log(1 + exp(-|x|)), divided by the denominator (<= 0: element count). */
brg_status brg_bce_with_logits_share(brg_tape *tape, brg_tensor *x, brg_tensor *target, double denominator,
                                     brg_tensor **loss);

/* pixels [B, C, H, W] -> patches [B, (H/ph)*(W/pw), C*ph*pw], each row ordered (c, ky, kx) so
 * that patches @ W.view(out, -1)^T is Conv2d(kernel = stride = (ph, pw)). H and W must be at
 * least ph and pw; pixels beyond the last whole patch are dropped, as the convolution does. */
brg_status brg_patch_unfold(brg_tape *tape, brg_tensor *pixels, int64_t ph, int64_t pw, brg_tensor **y);

/* ---- encoder-decoder ops (T5) ---- */

/* T5LayerNorm: y = weight * x / sqrt(mean(x^2) + eps) over the last dim; no mean subtraction, no
 * bias. */
brg_status brg_rms_norm(brg_tape *tape, brg_tensor *x, brg_tensor *weight, float eps, brg_tensor **y);
brg_status brg_relu(brg_tape *tape, brg_tensor *x, brg_tensor **y);
/* torch.clamp(x, lo, hi): NaN stays NaN; the gradient passes where lo <= x <= hi. */
brg_status brg_clamp(brg_tape *tape, brg_tensor *x, float lo, float hi, brg_tensor **y);
/* T5's guard for fp16 training (transformers' T5Block): where a hidden state holds a value fp16
 * cannot (it would be inf there), every value is clamped to +-(65504 - 1000); one past 65504 that
 * still rounds to it, to +-65504; otherwise *y = x, with nothing recorded. */
brg_status brg_fp16_overflow_guard(brg_tape *tape, brg_tensor *x, brg_tensor **y);
/* Elementwise product of two tensors of the same shape (T5's gated feed-forward). */
brg_status brg_mul(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y);

/* T5's relative position buckets: I32 [Tq, Tk], the bucket of (key j - query i), bidirectional for
 * an encoder, causal for a decoder. Not differentiable; needs num_buckets >= 4 and
 * max_distance > num_buckets / 2. */
brg_status brg_relative_position_buckets(brg_tape *tape, int64_t Tq, int64_t Tk, bool bidirectional,
                                         int64_t num_buckets, int64_t max_distance, brg_tensor **buckets);
/* The attention bias [H, Tq, Tk] gathered from table [num_buckets, H] (relative_attention_bias)
 * at buckets [Tq, Tk]; the gradient flows back into the table. */
brg_status brg_relative_position_bias(brg_tape *tape, brg_tensor *table, brg_tensor *buckets, brg_tensor **bias);

#ifdef __cplusplus
}
#endif
#endif
