/* Optimizers (SGD, Adam, AdamW, RMSprop, LAMB) and gradient-norm clipping.
 *
 * An optimizer updates a flat list of parameter slots, each a float buffer with a gradient
 * buffer of the same length, so that a pipeline stage (or a replica's shard) owns exactly the
 * parameters it holds. The update of each kind is torch.optim's single-tensor algorithm in fp32,
 * element for element in the same order of operations, so 10 steps match PyTorch to ~1e-7:
 *
 *   SGD      torch.optim.SGD: g += wd*p; with momentum, buf = g on the first step (no dampening)
 *            then buf = momentum*buf + (1-dampening)*g; nesterov: g += momentum*buf, else g = buf;
 *            p -= lr*g.
 *   ADAM     torch.optim.Adam: L2 decay added to the gradient (g += wd*p), then Adam moments;
 *            denom = sqrt(v)/sqrt(1-beta2^t) + eps; p -= lr/(1-beta1^t) * m/denom.
 *   ADAMW    torch.optim.AdamW: decoupled decay p *= 1 - lr*wd before the same Adam update.
 *   RMSPROP  torch.optim.RMSprop: L2 decay; square_avg = alpha*sq + (1-alpha)*g^2; centered
 *            subtracts grad_avg^2 under the sqrt; eps added after the sqrt; optional momentum
 *            buffer (buf = momentum*buf + g/avg; p -= lr*buf).
 *   LAMB     poptorch.optim.LAMB (You et al. 2019): Adam moments, upd = m_hat/(sqrt(v_hat)+eps)
 *            + wd*p, trust = min(||p||, max_weight_norm)/||upd|| per parameter slot (1 when
 *            either norm is 0), p -= lr*trust*upd.
 *
 * bias_correction=false (Adam, AdamW, LAMB) uses m and v as they are, as PopART's NoBias modes
 * do. A slot added with apply_weight_decay=false gets weight decay 0, as transformers' Trainer
 * puts biases and LayerNorm weights in a group with weight_decay 0.0.
 *
 * Memory: state buffers (momentum_buffer, exp_avg, exp_avg_sq, square_avg, grad_avg) are
 * allocated once, when a slot is added, from the arena given at creation (the device's
 * persistent memory; they live as long as the arena and are never freed individually) or, with
 * a NULL arena, with calloc, freed by brg_optimizer_destroy. A step allocates nothing.
 *
 * The step count is shared by all slots (every slot is updated on every step, as in a Trainer
 * where every parameter has a gradient). Slots can only be added before the first step.
 *
 * Checkpoints: the state is a list of named float tensors ("<slot name>.<torch state key>", e.g.
 * "h.0.attn.c_attn.weight.exp_avg") plus the step count. Saving them and loading them into a
 * fresh optimizer with the same config and slots resumes bit-exactly. */
#ifndef BRIGADE_OPTIM_H
#define BRIGADE_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/backend.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_optimizer_kind {
    BRG_OPTIMIZER_SGD = 0,
    BRG_OPTIMIZER_ADAM,
    BRG_OPTIMIZER_ADAMW,
    BRG_OPTIMIZER_RMSPROP,
    BRG_OPTIMIZER_LAMB,
    BRG_OPTIMIZER_KIND_COUNT
} brg_optimizer_kind;

/* Hyper-parameters. Fields a kind does not use are ignored (and not validated). Doubles, as the
 * Python floats of torch.optim: scalar arithmetic (1-beta1, bias corrections, lr/bc1) happens in
 * double and each scalar is rounded to float where torch hands it to an fp32 kernel. */
typedef struct brg_optimizer_config {
    brg_optimizer_kind kind;
    double lr;              /* the base learning rate a schedule scales; brg_optimizer_step
                               takes the lr of each step */
    double betas[2];        /* Adam, AdamW, LAMB: each in [0, 1) */
    double eps;             /* Adam, AdamW, RMSprop, LAMB: >= 0 */
    double weight_decay;    /* >= 0; for slots with apply_weight_decay */
    double momentum;        /* SGD, RMSprop: >= 0 */
    double dampening;       /* SGD */
    bool nesterov;          /* SGD: needs momentum > 0 and dampening == 0 */
    double alpha;           /* RMSprop smoothing constant: >= 0 */
    bool centered;          /* RMSprop */
    bool bias_correction;   /* Adam, AdamW, LAMB */
    double max_weight_norm; /* LAMB: clip of ||p|| in the trust ratio, >= 0; INFINITY: none */
} brg_optimizer_config;

/* torch.optim's constructor defaults for `kind` (LAMB: poptorch.optim.LAMB's):
 *   SGD     lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov off
 *   ADAM    lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0
 *   ADAMW   lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2
 *   RMSPROP lr 1e-2, alpha 0.99, eps 1e-8, weight_decay 0, momentum 0, centered off
 *   LAMB    lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, max_weight_norm 65500
 * bias_correction is on for all. An out-of-range kind gives SGD's defaults with that kind, which
 * brg_optimizer_config_validate rejects. */
brg_optimizer_config brg_optimizer_config_default(brg_optimizer_kind kind);

/* Checks every field `cfg->kind` uses, as torch's constructors do, and rejects NaN. The message
 * names the field and the value ("adamw: betas[1] = 1 is outside [0, 1)"). */
brg_status brg_optimizer_config_validate(const brg_optimizer_config *cfg);

/* "sgd", "adam", "adamw", "rmsprop", "lamb" (transformers' "adamw_torch" is "adamw"). */
const char *brg_optimizer_kind_name(brg_optimizer_kind kind);

/* FP32 state per parameter (torch's state keys): 2 for Adam, AdamW and LAMB, 1 for SGD with
 * momentum (0 without), 1-3 for RMSprop (momentum, centered). */
int brg_optimizer_state_floats(const brg_optimizer_config *cfg);
brg_status brg_optimizer_kind_parse(const char *name, brg_optimizer_kind *out);

typedef struct brg_optimizer brg_optimizer;

/* Validates `cfg` and creates an optimizer with no slots. `arena` (may be NULL) receives the
 * state buffers; see the memory note above. */
brg_status brg_optimizer_create(const brg_optimizer_config *cfg, brg_arena *arena, brg_optimizer **out);
void brg_optimizer_destroy(brg_optimizer *opt);
/* The backend whose update kernels the steps run (a device's; the CPU's by default). */
void brg_optimizer_set_backend(brg_optimizer *opt, const brg_backend *backend);

const brg_optimizer_config *brg_optimizer_get_config(const brg_optimizer *opt);

/* Adds a slot of `n` floats: `value` is updated in place from `grad` (read only) on every step;
 * both must stay valid for the optimizer's lifetime. `name` (copied) names the slot's state
 * tensors and must be non-empty and unique. Zeroed state buffers are allocated here (an arena
 * over budget gives BRG_ERR_OOM naming "<name>.<state>"). Fails after the first step. */
brg_status brg_optimizer_add_param(brg_optimizer *opt, float *value, const float *grad, int64_t n,
                                   bool apply_weight_decay, const char *name);
int brg_optimizer_param_count(const brg_optimizer *opt);
/* A shard of a slot (ZeRO-1): the parameter has `n` floats at `value` and `grad`, the slot
 * covers elements [first, first + count) only: its state holds `count` floats and a step
 * updates those elements and no others. Element-wise kinds only (LAMB's trust ratio needs the
 * whole parameter's norms: refused). The state tensors keep the parameter's name; see
 * brg_optimizer_state_offset. */
brg_status brg_optimizer_add_param_shard(brg_optimizer *opt, float *value, const float *grad, int64_t n, int64_t first,
                                         int64_t count, bool apply_weight_decay, const char *name);

/* Applies one update to every slot with learning rate `lr` (>= 0, finite) and advances the
 * step count. With lr 0 and finite gradients the values are left bit-for-bit as they are (the
 * state still advances), for every kind including AdamW (p *= 1 - 0*wd). */
brg_status brg_optimizer_step(brg_optimizer *opt, float lr);

/* Steps taken so far (torch's state["step"]). Setting it is for restoring a checkpoint together
 * with the state tensors: with SGD momentum, a step count of 0 means the momentum buffers are
 * not yet initialised (the next step copies the gradient into them). */
int64_t brg_optimizer_get_step(const brg_optimizer *opt);
brg_status brg_optimizer_set_step(brg_optimizer *opt, int64_t step);

/* The state tensors, in slot order and, within a slot, in torch's order of state keys:
 *   SGD      momentum_buffer (only with momentum != 0)
 *   ADAM(W)  exp_avg, exp_avg_sq
 *   RMSPROP  square_avg, momentum_buffer (momentum > 0), grad_avg (centered)
 *   LAMB     exp_avg, exp_avg_sq
 * Indices run from 0 to brg_optimizer_state_count()-1; data may be written to restore it. */
int brg_optimizer_state_count(const brg_optimizer *opt);
const char *brg_optimizer_state_name(const brg_optimizer *opt, int i);
float *brg_optimizer_state_data(brg_optimizer *opt, int i);
int64_t brg_optimizer_state_numel(const brg_optimizer *opt, int i);
/* Where state tensor i lies in its parameter's elements: its first element and the
 * parameter's whole size (0 and brg_optimizer_state_numel for a slot that is not a shard). */
int64_t brg_optimizer_state_offset(const brg_optimizer *opt, int i);
int64_t brg_optimizer_state_param_numel(const brg_optimizer *opt, int i);
/* Bytes of state the optimizer holds (every state tensor's floats). */
size_t brg_optimizer_state_bytes(const brg_optimizer *opt);
/* Index of the state tensor called `name`, or -1. */
int brg_optimizer_state_find(const brg_optimizer *opt, const char *name);

/* ---- Gradient clipping (torch.nn.utils.clip_grad_norm_, norm_type 2) ----
 *
 * The total norm is the L2 norm of all `n` gradient buffers viewed as one vector (grads[i] has
 * counts[i] floats), accumulated in double in a fixed order, so it is deterministic. When it is
 * finite, every gradient is multiplied by coef = max_norm / (total + 1e-6) if coef < 1 (in fp32,
 * as torch computes it); otherwise they are left alone.
 *
 * Non-finite total norm (an inf or NaN gradient): torch would multiply every gradient by NaN or
 * 0; here the gradients are left untouched and the non-finite norm is reported, so a caller (loss
 * scaling, or a trainer that skips such steps) can decide. The call still returns BRG_OK.
 *
 * max_norm must be > 0; INFINITY measures the norm without clipping (transformers' Trainer does
 * this to log grad_norm). */
brg_status brg_clip_grad_norm(float **grads, const int64_t *counts, int n, float max_norm,
                              double *total_norm_out);

/* The same in two halves, for gradients spread over several devices or ranks:
 *   1. each holder computes brg_grad_sum_squares over its own buffers (a partial sum of squares,
 *      in double);
 *   2. the partial sums are added (in a fixed order, or one MPI_Allreduce(MPI_SUM) of doubles)
 *      and total_norm = sqrt(sum);
 *   3. each holder calls brg_clip_grad_norm_from_total with that same total on its own buffers.
 * Every holder then scales by the same coefficient, exactly as one brg_clip_grad_norm over all
 * buffers would (for the same summation order). */
brg_status brg_grad_sum_squares(const float *const *grads, const int64_t *counts, int n, double *sum_out);
brg_status brg_clip_grad_norm_from_total(float **grads, const int64_t *counts, int n, float max_norm,
                                         double total_norm);

/* The factor brg_clip_grad_norm* multiplies gradients by: max_norm/(total+1e-6) in fp32 when that
 * is < 1 and total is finite, else 1. */
float brg_clip_coef(float max_norm, double total_norm);

#ifdef __cplusplus
}
#endif
#endif
