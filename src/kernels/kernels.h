/* CPU kernels: forward and backward of each op on contiguous float32 buffers.
 *
 * Conventions (llm.c style):
 * - Row-major, contiguous; sizes are explicit arguments.
 * - Backward functions ACCUMULATE (+=) into every gradient output; a NULL gradient pointer means
 *   "not needed" and is skipped.
 * - Each op has a scalar reference (`_ref`) used by tests; the fast path is what the library
 *   calls. Where they are the same code, `_ref` is simply the implementation.
 */
#ifndef BRIGADE_KERNELS_H
#define BRIGADE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/status.h"
#include "brigade/optim.h"
#include "brigade/tensor.h"

/* ---- GEMM: the one interface every matrix product goes through ---------------------------
 * C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major. op(A) is [M,K]: A is [M,K] (lda >= K)
 * or, when trans_a, A is [K,M] (lda >= M). Likewise op(B) is [K,N]. */
void brg_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void brg_gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* Which implementation brg_gemm uses ("openblas", "avx512", ...). */
const char *brg_gemm_backend(void);
/* For tests comparing the backends: brg_gemm (and the kernels on it) use the backend `name`
 * names ("openblas", "avx512", "avx2", "ref"; the kernels capped by the CPU and BRIGADE_ISA as
 * BRIGADE_GEMM is) until the next call; NULL goes back to the process's choice. Returns the
 * backend now in use, or NULL (nothing changed) for an unknown name. Call it while no product
 * is running. */
const char *brg_gemm_force_backend(const char *name);
/* Threads each GEMM call may use (process-wide). */
void brg_gemm_set_threads(int threads);

/* GEMM with half-precision operands: brg_gemm's contract with A and B stored as a_type and
 * b_type, each BRG_DTYPE_F32, F16 or BF16 (uint16_t bit patterns; lda, ldb in elements); every
 * product and sum in fp32 (or wider), C fp32. Which kernel runs and what equality each keeps:
 * gemm_half.c and docs/precision.md. Splits across the bound team like brg_gemm, with the same
 * bits for any team size. brg_gemm_half_ref accumulates the widened operands in double (the
 * bits of brg_gemm_ref on them). */
void brg_gemm_half(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                   const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta, float *C,
                   int64_t ldc);
void brg_gemm_half_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                       const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta, float *C,
                       int64_t ldc);
/* The kernel brg_gemm_half uses for these operand types ("amxbf16", "avx512bf16", "avx512",
 * "avx2", "openblas", "ref"). */
const char *brg_gemm_half_backend(brg_dtype a_type, brg_dtype b_type);
/* Whether any kernel accumulates in fp16 (what a half-partials option could ask for): none
 * does, so such an option keeps fp32 accumulation. */
bool brg_gemm_half_partials_available(void);

/* Intra-op threads of one device: a team of `threads` (the caller's thread plus threads - 1
 * helpers). While bound to a thread, brg_gemm calls made on it split large products by rows or
 * columns of C across the team (brg_team_split_columns). */
typedef struct brg_gemm_team brg_gemm_team;
brg_status brg_gemm_team_create(int threads, brg_gemm_team **out);
void brg_gemm_team_destroy(brg_gemm_team *team);
void brg_gemm_team_bind(brg_gemm_team *team);
/* Runs fn(ctx, i, n) for every slice i < n on the team bound to this thread (slice 0 on this
 * thread) and returns when all are done; false, having run nothing, when no team of 2 or more
 * is bound. Slices must not use the team themselves (they run unbound). */
typedef void (*brg_team_fn)(void *ctx, int i, int n);
bool brg_team_run(brg_team_fn fn, void *ctx);
/* Threads of the team bound to this thread (1 when none). */
int brg_team_size(void);
/* The element-wise and row kernels' use of the team: runs fn(ctx, i, n) for every slice of the
 * bound team when `work` (elements touched) is worth waking it, else fn(ctx, 0, 1) here. Each
 * kernel splits so that every output element is computed by one slice exactly as it is alone
 * (rows, or columns of a reduction down the rows), so results do not depend on the team size. */
void brg_team_split(brg_team_fn fn, void *ctx, int64_t work);
/* Element-wise work below this many elements runs faster alone than on a team it must wake. */
#define BRG_TEAM_MIN_ELEMENTS (1 << 15)
/* [*first, *last): slice i of n of `count` items, in whole units of `unit` (the last slice takes
 * the remainder), so a vector loop's tail stays the tail of the whole range. */
void brg_team_slice(int64_t count, int64_t unit, int i, int n, int64_t *first, int64_t *last);
/* How a team of n splits a product C[M, N]: by columns (true) when N > M and there are units
 * for every thread, else by rows. Each thread packs the whole of the operand the split does not
 * divide, so the split divides the larger one: op(B) [K, N] by columns, op(A) [M, K] by rows.
 * The kernels compute each element of C alike wherever it lies, so either split gives the
 * bits of the whole product. */
#define BRG_TEAM_COLUMN_UNIT 64 /* columns: a whole number of every kernel's tile width */
bool brg_team_split_columns(int64_t M, int64_t N, int n);
/* Used by brg_gemm: runs the product on the bound team; false when there is none or the product
 * is too small to split. */
bool brg_gemm_team_run(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- GEMM on a B packed once (gemm_packed.c) ---------------------------------------------
 * A matrix that many products read as op(B) (a weight: every micro-batch of an inference run,
 * every micro-batch of a training step) packed once into the B micro-panel layout of the kernel
 * brg_gemm runs, so those products pack only A.
 * avx512 and avx2 pack, and under a bf16 compute type the AMX kernel (bf16 panels, rounded while
 * packed); ref and openblas, and other reduced compute types, keep the plain matrix (NONE). */
typedef enum brg_gemm_pack_layout {
    BRG_GEMM_PACK_NONE = 0,
    BRG_GEMM_PACK_AVX512,  /* gemm_avx512.c's fp32 panels */
    BRG_GEMM_PACK_AVX2,    /* gemm_avx2.c's fp32 panels */
    BRG_GEMM_PACK_AMXBF16, /* gemm_amx.c's bf16 panels of the fp32 matrix rounded */
} brg_gemm_pack_layout;
typedef struct brg_packed_b {
    brg_gemm_pack_layout layout;
    bool trans_b;
    int64_t K, N, ldb;
    const float *plain;  /* the matrix itself: what other backends and compute types read */
    const void *panels;  /* brg_gemm_pack_bytes bytes, 64-byte aligned; NULL for NONE */
} brg_packed_b;
/* The layout of the products brg_gemm runs now on this thread: its backend's fp32 panels in
 * fp32; the AMX kernel's under a bf16 compute type where that kernel runs; NONE otherwise. */
brg_gemm_pack_layout brg_gemm_pack_layout_now(void);
/* The same for products in `compute` (what a thread with that compute type would pack). */
brg_gemm_pack_layout brg_gemm_pack_layout_for(brg_dtype compute);
/* Names the layout with its blocking ("avx512 MR14 NR32 KC384 NC384"): what a stored packing
 * must match to be read back (the executable cache keys on it). */
const char *brg_gemm_pack_layout_name(brg_gemm_pack_layout layout);
/* Bytes of op(B) [K, N] in `layout` (0 for NONE or an empty B). */
size_t brg_gemm_pack_bytes(brg_gemm_pack_layout layout, int64_t K, int64_t N);
/* *out describes B (brg_gemm's op(B) with trans_b and ldb), its panels packed into `dst` (64-byte
 * aligned, brg_gemm_pack_bytes long; unused for NONE). A large B is packed by the team bound to
 * the calling thread (the same bytes as packed alone). */
void brg_gemm_pack_b(brg_gemm_pack_layout layout, bool trans_b, int64_t K, int64_t N, const float *B, int64_t ldb,
                     void *dst, brg_packed_b *out);
/* *out describes panels packed already (an executable-cache entry's). */
void brg_gemm_packed_b_wrap(brg_gemm_pack_layout layout, bool trans_b, int64_t K, int64_t N, const float *B,
                            int64_t ldb, const void *panels, brg_packed_b *out);
/* brg_gemm(trans_a, B->trans_b, M, N, K, alpha, A, lda, B->plain, B->ldb, beta, C, ldc) with the
 * same bits for every backend, compute type and team size: the panels when B's layout is the one
 * brg_gemm runs now (brg_gemm_pack_layout_now), the plain matrix otherwise. */
void brg_gemm_packed(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const brg_packed_b *B, float beta, float *C, int64_t ldc);
/* Where a thread finds weights packed once: brg_k_linear_fwd and brg_k_linear_bwd's input
 * gradient ask the provider bound to its thread (a device's, runtime/packed_weights.c) for W's
 * packed form, NULL meaning the plain product. fn NULL unbinds. */
typedef const brg_packed_b *(*brg_packed_weights_fn)(void *ctx, const float *B, bool trans_b, int64_t K, int64_t N,
                                                     int64_t ldb);
void brg_packed_weights_bind(brg_packed_weights_fn fn, void *ctx);
const brg_packed_b *brg_packed_weights_find(const float *B, bool trans_b, int64_t K, int64_t N, int64_t ldb);

/* ---- linear: y[n,out] = x[n,in] @ W + b ---------------------------------------------------
 * W layout: w_in_out ? [in,out] (GPT-2 Conv1D) : [out,in] (nn.Linear). b may be NULL. */
void brg_k_linear_fwd(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in,
                      int64_t out, bool w_in_out);
/* dx_overwrite, dw_overwrite: dx, dW are written instead of accumulated (their buffers hold no
 * gradient yet). */
void brg_k_linear_bwd(float *dx, bool dx_overwrite, float *dw, bool dw_overwrite, float *db, const float *dy,
                      const float *x, const float *w, int64_t n, int64_t in, int64_t out, bool w_in_out);

/* ---- batched matmul: for each of `batch`: C[M,N] = op(A)[M,K] @ op(B)[K,N] ----------------
 * A, B, C contiguous per batch with strides M*K, K*N, M*N elements. */
void brg_k_bmm_fwd(float *c, const float *a, const float *b, int64_t batch, int64_t M, int64_t N, int64_t K,
                   bool trans_a, bool trans_b);
void brg_k_bmm_bwd(float *da, float *db, const float *dc, const float *a, const float *b, int64_t batch,
                   int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b);

/* ---- embedding: y[n,dim] = table[ids[n], :] (ids already validated < rows) --------------- */
void brg_k_embedding_fwd(float *y, const int32_t *ids, const float *table, int64_t n, int64_t dim);
void brg_k_embedding_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim);

/* ---- layer norm over the last dim c; saves mean[n], rstd[n] ------------------------------ */
void brg_k_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                         const float *beta, int64_t n, int64_t c, float eps);
void brg_k_layernorm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                         const float *gamma, const float *mean, const float *rstd, int64_t n, int64_t c);

/* ---- GELU: exact (erf) or the tanh approximation ("gelu_new", "gelu_pytorch_tanh") ------- */
typedef enum brg_gelu_kind { BRG_GELU_ERF = 0, BRG_GELU_TANH = 1 } brg_gelu_kind;
void brg_k_gelu_fwd(float *y, const float *x, int64_t n, brg_gelu_kind kind);
void brg_k_gelu_bwd(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind);

/* ---- bias + GELU after a linear layer's product h = x @ W, fused into one pass over the rows
 * Forward: h[n,c] += b (in place: h becomes the pre-activation backward reads; b may be NULL),
 * a = gelu(h). Backward: dh = da * gelu'(h), WRITTEN (not accumulated: dh is scratch for the
 * linear layer's backward), and db += the column sums of dh (in double; NULL to skip). The same
 * bits as the bias add of brg_k_linear_fwd, brg_k_gelu_fwd/bwd and brg_k_linear_bwd's bias
 * gradient done separately. Backward uses scratch slot 1. */
void brg_k_bias_gelu_fwd(float *h, float *a, const float *b, int64_t n, int64_t c, brg_gelu_kind kind);
void brg_k_bias_gelu_bwd(float *dh, float *db, const float *da, const float *h, int64_t n, int64_t c,
                         brg_gelu_kind kind);

/* ---- softmax over the last dim --------------------------------------------------------- */
void brg_k_softmax_fwd(float *y, const float *x, int64_t rows, int64_t cols);
void brg_k_softmax_bwd(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols);

/* ---- scaled dot-product attention ------------------------------------------------------
 * q [B,H,Tq,D], k and v [B,H,Tk,D], out [B,H,Tq,D]; scores = scale * q.k^T (+ bias) masked,
 * softmax over keys, out = P @ v.
 * causal: key j is visible to query i only if j <= i + (Tk - Tq).
 * key_mask: optional [B,Tk], 1 = attend, 0 = padding (masked as transformers does, by adding
 *   the float minimum, so a row whose keys are all masked becomes uniform, not NaN).
 * bias: optional additive [H,Tq,Tk] (broadcast over B), e.g. T5's relative position bias.
 * lse [B,H,Tq] saves the row log-sum-exp so backward recomputes P one row at a time: no
 * [Tq,Tk] matrix is stored between forward and backward. */
typedef struct brg_attn_args {
    int64_t B, H, Tq, Tk, D;
    float scale;
    bool causal;
    const float *key_mask; /* [B,Tk] or NULL */
    const float *bias;     /* [H,Tq,Tk] or NULL */
    /* Dropout on the probabilities (transformers' attn_dropout), 0 for none: probability
     * (b,h,i,j) is kept iff brg_k_dropout_keep(dropout, seed, offset + ((b*H+h)*Tq+i)*Tk+j), so
     * backward regenerates the mask instead of storing it. */
    float dropout;
    uint64_t seed, offset;
    /* Rows stored per (b, h) in k and v, >= Tk (a KV cache holds keys for its whole capacity
     * and attends to the first Tk); 0 means Tk. */
    int64_t kv_stride;
} brg_attn_args;
void brg_k_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args);
/* dbias (may be NULL) accumulates [H,Tq,Tk]. */
void brg_k_attention_bwd(float *dq, float *dk, float *dv, float *dbias, const float *dout, const float *out,
                         const float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args);
/* Reference: materialises the full probability matrix, for tests. */
void brg_k_attention_fwd_ref(float *out, const float *q, const float *k, const float *v,
                             const brg_attn_args *args);

/* ---- heads: [B,T,H*D] (row stride `row_stride` >= H*D, so q/k/v can be read straight out of a
 * fused [B,T,3C] projection) <-> [B,H,T,D] -------------------------------------------------- */
void brg_k_split_heads(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D,
                       int64_t row_stride);
/* The inverse: dst[B,T,H*D] (row stride row_stride) += / = src[B,H,T,D]; `accumulate` adds. */
void brg_k_merge_heads(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D,
                       int64_t row_stride, bool accumulate);

/* ---- dropout: y = x * keep / (1 - p), keep drawn from a counter-based generator keyed by
 * (seed, offset + i), so forward and backward regenerate the same mask without storing it and a
 * run is reproducible for a given seed. p == 0 copies. */
void brg_k_dropout_fwd(float *y, const float *x, int64_t n, float p, uint64_t seed, uint64_t offset);
/* dx += mask * dy / (1 - p), or (overwrite: dx's first contribution) dx = that. */
void brg_k_dropout_bwd(float *dx, bool overwrite, const float *dy, int64_t n, float p, uint64_t seed, uint64_t offset);
/* The keep decision for element i, exposed for tests. */
bool brg_k_dropout_keep(float p, uint64_t seed, uint64_t index);

/* ---- elementwise ----------------------------------------------------------------------- */
void brg_k_add_fwd(float *y, const float *a, const float *b, int64_t n);
/* dx += dy */
/* dx += dy, or (overwrite: dx's first contribution) dx = dy. */
void brg_k_accumulate(float *dx, bool overwrite, const float *dy, int64_t n);
void brg_k_scale(float *y, const float *x, float s, int64_t n);

/* ---- cross-entropy with ignore_index, mean over counted rows ---------------------------
 * logits [n,v], targets [n] (ignore_index rows do not count). Returns the mean loss (0 when
 * every row is ignored, with *count 0) and saves lse[n]. */
float brg_k_cross_entropy_fwd(float *lse, int64_t *count, const float *logits, const int32_t *targets, int64_t n,
                              int64_t v, int32_t ignore_index);
/* dlogits += dloss/count * (softmax(logits) - onehot(target)) for counted rows; with overwrite
 * dlogits = that (zeros on ignored rows), the bits of adding into zeros, and dlogits may be the
 * logits themselves (each row is read before it is written). */
void brg_k_cross_entropy_bwd(float *dlogits, bool overwrite, float dloss, const float *logits, const float *lse,
                             const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index, int64_t count);

/* ---- scratch ------------------------------------------------------------------------------
 * A per-thread buffer of at least n floats for slot (0..BRG_SCRATCH_SLOTS-1), reused across calls
 * (contents are not kept between calls that use the same slot); freed when the thread exits.
 * Slots: 0 attention's score rows, 1 the bias-GELU backward's column sums, 2 linear_act's dh,
 * 3 cross-entropy's per-row losses, 4 and 5 brg_gemm's operands rounded to the compute type,
 * 6 to 11 the autograd ops' fp32 staging of half activations (src/autograd/ops_internal.h),
 * 12 to 15 the fp32 copies of the half gradients a backward function adds into, 16 the fp32 copy of
 * the half gradient it reads (src/autograd/tape.c). */
#define BRG_SCRATCH_SLOTS 17
#define BRG_SCRATCH_GEMM_A 4
#define BRG_SCRATCH_GEMM_B 5
#define BRG_SCRATCH_STAGE 6
#define BRG_SCRATCH_STAGE_SLOTS 6
#define BRG_SCRATCH_GRAD_STAGE 12
#define BRG_SCRATCH_GRAD_STAGE_SLOTS 4
#define BRG_SCRATCH_GRAD_READ 16
/* Query rows attention scores at once: its scratch holds [BRG_ATTN_ROW_BLOCK, Tk] floats (twice
 * that in backward). */
#define BRG_ATTN_ROW_BLOCK 32
float *brg_scratch(int slot, size_t n);
/* The arena this thread's scratch counts against (a device's: its budget and peak), or NULL.
 * Buffers grown while bound count in it (brg_arena_add_scratch); binding another arena hands
 * the buffers back first. A device's thread binds its arena, and its team's threads bind the
 * same one while they run the device's work. */
void brg_scratch_bind(brg_arena *arena);
brg_arena *brg_scratch_bound(void);

/* ---- select: x viewed as [outer, n, inner]; y[outer, inner] = x[outer, index, inner] ------
 * (the [CLS] row of [B,T,C] hidden states; one column of [B,T,2] question-answering logits). */
void brg_k_select_fwd(float *y, const float *x, int64_t outer, int64_t n, int64_t inner, int64_t index);
/* dx[outer, index, inner] += dy[outer, inner]. */
void brg_k_select_bwd(float *dx, const float *dy, int64_t outer, int64_t n, int64_t inner, int64_t index);

/* ---- prepend a token: y[b] = [token; x[b]] with token [c], x [B,n,c], y [B,n+1,c] --------- */
void brg_k_prepend_token_fwd(float *y, const float *token, const float *x, int64_t B, int64_t n, int64_t c);
/* dtoken[c] += sum_b dy[b,0,:]; dx[b] += dy[b,1:]. Either may be NULL. */
void brg_k_prepend_token_bwd(float *dtoken, float *dx, const float *dy, int64_t B, int64_t n, int64_t c);

/* ---- broadcast add: y[a,m,i] = x[a,m,i] + p[a,i] (p repeats along the middle dim) -------- */
void brg_k_add_bcast_fwd(float *y, const float *x, const float *p, int64_t A, int64_t M, int64_t inner);
/* dx += dy; dp[a,i] += sum_m dy[a,m,i]. Either may be NULL. */
void brg_k_add_bcast_bwd(float *dx, float *dp, const float *dy, int64_t A, int64_t M, int64_t inner);

/* ---- embedding backward that skips one row, as nn.Embedding(padding_idx) does: ids equal to
 * padding_idx send no gradient to the table (padding_idx < 0: none skipped) ----------------- */
void brg_k_embedding_pad_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim,
                             int32_t padding_idx);

/* ---- tanh; backward from the output: dx += dy * (1 - y^2) ------------------------------- */
void brg_k_tanh_fwd(float *y, const float *x, int64_t n);
void brg_k_tanh_bwd(float *dx, const float *dy, const float *y, int64_t n);

/* ---- regression and multi-label losses, as sums (the caller divides) --------------------
 * MSE: sum (x - t)^2. Backward: dx += scale * 2 (x - t). */
double brg_k_mse_sum_fwd(const float *x, const float *t, int64_t n);
void brg_k_mse_bwd(float *dx, float scale, const float *x, const float *t, int64_t n);
/* BCE with logits, the stable form torch uses: sum max(x,0) - x t + log(1 + exp(-|x|)).
 * Backward: dx += scale * (sigmoid(x) - t). */
double brg_k_bce_logits_sum_fwd(const float *x, const float *t, int64_t n);
void brg_k_bce_logits_bwd(float *dx, float scale, const float *x, const float *t, int64_t n);

/* ---- patch unfold (im2col for a convolution whose stride equals its kernel) --------------
 * pixels [B,C,H,W] -> patches [B, (H/ph)*(W/pw), C*ph*pw]; patches are numbered row-major over
 * the (H/ph, W/pw) grid and each row is ordered (channel, ky, kx), the layout of a Conv2d
 * weight [out, C, ph, pw], so conv(pixels) = patches @ weight.view(out, -1)^T. Pixels past the
 * last whole patch are dropped, as the convolution drops them. */
typedef struct brg_patch_dims {
    int64_t B, C, H, W, ph, pw;
} brg_patch_dims;
void brg_k_patch_unfold_fwd(float *patches, const float *pixels, const brg_patch_dims *d);
/* dpixels += the fold of dpatches. */
void brg_k_patch_unfold_bwd(float *dpixels, const float *dpatches, const brg_patch_dims *d);
/* Reference: the strided convolution itself, y [B, (H/ph)*(W/pw), out] = conv(pixels, w [out,C,ph,pw]) + b
 * (b may be NULL), computed directly, for tests. */
void brg_k_patch_conv_ref(float *y, const float *pixels, const float *w, const float *b, int64_t out,
                          const brg_patch_dims *d);

/* RMS norm (T5LayerNorm) over the last dim c: y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps);
 * no mean subtraction, no bias. Saves rstd[n]. */
void brg_k_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t n, int64_t c, float eps);
void brg_k_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                       int64_t n, int64_t c);

/* ReLU as torch's threshold(x, 0, 0): a NaN stays NaN; the gradient passes where x > 0 (and for NaN). */
void brg_k_relu_fwd(float *y, const float *x, int64_t n);
void brg_k_relu_bwd(float *dx, bool overwrite, const float *dy, const float *x, int64_t n);

/* clamp.c: y = min(max(x, lo), hi) (NaN stays NaN); dx += dy where lo <= x <= hi. */
void brg_k_clamp_fwd(float *y, const float *x, int64_t n, float lo, float hi);
void brg_k_clamp_bwd(float *dx, const float *dy, const float *x, int64_t n, float lo, float hi);
/* The largest |x[i]| (0 for n == 0; NaN elements are passed over). */
float brg_k_max_abs(const float *x, int64_t n);

/* y = a * b elementwise; da += dy * b, db += dy * a. */
void brg_k_mul_fwd(float *y, const float *a, const float *b, int64_t n);
void brg_k_mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b, int64_t n);

/* T5's relative position bucket of key position minus query position (transformers'
 * _relative_position_bucket); requires num_buckets >= 4 and max_distance > num_buckets / 2.
 * buckets[Tq, Tk] holds the bucket of (j - i) for query i and key j. */
int32_t brg_k_relative_position_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance);
void brg_k_relative_position_buckets(int32_t *buckets, int64_t Tq, int64_t Tk, bool bidirectional,
                                     int64_t num_buckets, int64_t max_distance);
/* bias[H, Tq, Tk] = table[buckets[i, j], h] with table [num_buckets, H] (the embedding's layout);
 * backward scatters dbias into dtable. */
void brg_k_relpos_bias_fwd(float *bias, const float *table, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk);
void brg_k_relpos_bias_bwd(float *dtable, const float *dbias, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk);


/* ---- rows side by side and one position per row (concat_rows.c, gather_positions.c) ------- */
/* y[B, na + nb] = [a[B, na], b[B, nb]]; backward accumulates into da, db (either may be NULL). */
void brg_k_concat_rows_fwd(float *y, const float *a, const float *b, int64_t B, int64_t na, int64_t nb);
void brg_k_concat_rows_bwd(float *da, float *db, const float *dy, int64_t B, int64_t na, int64_t nb);
/* y[B, C] = x[r, index[r], :] of x [B, T, C] (index in [0, T)); backward accumulates into dx. */
void brg_k_gather_positions_fwd(float *y, const float *x, const int32_t *index, int64_t B, int64_t T, int64_t C);
void brg_k_gather_positions_bwd(float *dx, const float *dy, const int32_t *index, int64_t B, int64_t T, int64_t C);

/* ---- optimizer updates (optimizer_update.c) ------------------------------------------------ */
/* One parameter's elements (or a part of them) and their optimizer state, indexed as the
 * optimizer lays its state keys out (exp_avg, exp_avg_sq; momentum_buffer; ...). */
typedef struct brg_k_optim_slot {
    float *value;
    const float *grad;
    int64_t n;
    bool decay; /* weight decay applies */
    float *state[3];
} brg_k_optim_slot;
/* torch.optim's update of step t (from 1) for c->kind, element by element in torch's order. */
void brg_k_optimizer_update(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t);

#endif
