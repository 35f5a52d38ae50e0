/* The device backend's insides: what src/autograd, the runtime and the optimizer call instead
 * of the CPU's functions, so that another kind of device is another table, not another
 * autograd. include/brigade/backend.h is the public face (an opaque brg_backend).
 *
 * The kernels keep the llm.c-style signatures of kernels.h (contiguous buffers, explicit sizes,
 * backward kernels accumulating); every pointer they get lies in the backend's own memory. */
#ifndef BRIGADE_KERNELS_BACKEND_H
#define BRIGADE_KERNELS_BACKEND_H

#include "brigade/backend.h"
#include "kernels/gemv.h"
#include "kernels/kernels.h"

/* fp32 kernels: every op's forward and backward, the executor's gradient accumulation, the
 * gradient norm's sums of squares and the optimizer's updates. */
typedef struct brg_kernels {
    void (*accumulate)(float *dx, bool overwrite, const float *dy, int64_t n);
    void (*add_bcast_bwd)(float *dx, float *dp, const float *dy, int64_t A, int64_t M, int64_t inner);
    void (*add_bcast_fwd)(float *y, const float *x, const float *p, int64_t A, int64_t M, int64_t inner);
    void (*add_fwd)(float *y, const float *a, const float *b, int64_t n);
    void (*attention_bwd)(float *dq, float *dk, float *dv, float *dbias, const float *dout, const float *out,
                          const float *lse, const float *q, const float *k, const float *v, const brg_attn_args *args);
    void (*attention_fwd)(float *out, float *lse, const float *q, const float *k, const float *v,
                          const brg_attn_args *args);
    void (*bce_logits_bwd)(float *dx, float scale, const float *x, const float *t, int64_t n);
    double (*bce_logits_sum_fwd)(const float *x, const float *t, int64_t n);
    void (*bias_gelu_bwd)(float *dh, float *db, const float *da, const float *h, int64_t n, int64_t c,
                          brg_gelu_kind kind);
    void (*bias_gelu_fwd)(float *h, float *a, const float *b, int64_t n, int64_t c, brg_gelu_kind kind);
    void (*bmm_bwd)(float *da, float *db, const float *dc, const float *a, const float *b, int64_t batch, int64_t M,
                    int64_t N, int64_t K, bool trans_a, bool trans_b);
    void (*bmm_fwd)(float *c, const float *a, const float *b, int64_t batch, int64_t M, int64_t N, int64_t K,
                    bool trans_a, bool trans_b);
    void (*clamp_bwd)(float *dx, const float *dy, const float *x, int64_t n, float lo, float hi);
    void (*clamp_fwd)(float *y, const float *x, int64_t n, float lo, float hi);
    void (*cross_entropy_bwd)(float *dlogits, bool overwrite, float dloss, const float *logits, const float *lse,
                              const int32_t *targets, int64_t n, int64_t v, int32_t ignore_index, int64_t count);
    float (*cross_entropy_fwd)(float *lse, int64_t *count, const float *logits, const int32_t *targets, int64_t n,
                               int64_t v, int32_t ignore_index);
    void (*dropout_bwd)(float *dx, bool overwrite, const float *dy, int64_t n, float p, uint64_t seed, uint64_t offset);
    void (*dropout_fwd)(float *y, const float *x, int64_t n, float p, uint64_t seed, uint64_t offset);
    void (*embedding_bwd)(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim);
    void (*embedding_fwd)(float *y, const int32_t *ids, const float *table, int64_t n, int64_t dim);
    void (*embedding_pad_bwd)(float *dtable, const float *dy, const int32_t *ids, int64_t n, int64_t dim,
                              int32_t padding_idx);
    void (*gelu_bwd)(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind);
    void (*gelu_fwd)(float *y, const float *x, int64_t n, brg_gelu_kind kind);
    void (*layernorm_bwd)(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                          const float *gamma, const float *mean, const float *rstd, int64_t n, int64_t c);
    void (*layernorm_fwd)(float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                          int64_t n, int64_t c, float eps);
    void (*linear_bwd)(float *dx, bool dx_overwrite, float *dw, bool dw_overwrite, float *db, const float *dy,
                       const float *x, const float *w, int64_t n, int64_t in, int64_t out, bool w_in_out);
    void (*linear_fwd)(float *y, const float *x, const float *w, const float *b, int64_t n, int64_t in, int64_t out,
                       bool w_in_out);
    float (*max_abs)(const float *x, int64_t n);
    void (*merge_heads)(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D, int64_t row_stride,
                        bool accumulate);
    void (*mse_bwd)(float *dx, float scale, const float *x, const float *t, int64_t n);
    double (*mse_sum_fwd)(const float *x, const float *t, int64_t n);
    void (*mul_bwd)(float *da, float *db, const float *dy, const float *a, const float *b, int64_t n);
    void (*mul_fwd)(float *y, const float *a, const float *b, int64_t n);
    void (*patch_unfold_bwd)(float *dpixels, const float *dpatches, const brg_patch_dims *d);
    void (*patch_unfold_fwd)(float *patches, const float *pixels, const brg_patch_dims *d);
    void (*prepend_token_bwd)(float *dtoken, float *dx, const float *dy, int64_t B, int64_t n, int64_t c);
    void (*prepend_token_fwd)(float *y, const float *token, const float *x, int64_t B, int64_t n, int64_t c);
    void (*relative_position_buckets)(int32_t *buckets, int64_t Tq, int64_t Tk, bool bidirectional,
                                      int64_t num_buckets, int64_t max_distance);
    void (*relpos_bias_bwd)(float *dtable, const float *dbias, const int32_t *buckets, int64_t H, int64_t Tq,
                            int64_t Tk);
    void (*relpos_bias_fwd)(float *bias, const float *table, const int32_t *buckets, int64_t H, int64_t Tq, int64_t Tk);
    void (*relu_bwd)(float *dx, bool overwrite, const float *dy, const float *x, int64_t n);
    void (*relu_fwd)(float *y, const float *x, int64_t n);
    void (*rmsnorm_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                        int64_t n, int64_t c);
    void (*rmsnorm_fwd)(float *y, float *rstd, const float *x, const float *w, int64_t n, int64_t c, float eps);
    void (*scale)(float *y, const float *x, float s, int64_t n);
    void (*select_bwd)(float *dx, const float *dy, int64_t outer, int64_t n, int64_t inner, int64_t index);
    void (*select_fwd)(float *y, const float *x, int64_t outer, int64_t n, int64_t inner, int64_t index);
    void (*softmax_bwd)(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols);
    void (*softmax_fwd)(float *y, const float *x, int64_t rows, int64_t cols);
    void (*split_heads)(float *dst, const float *src, int64_t B, int64_t T, int64_t H, int64_t D, int64_t row_stride);
    void (*tanh_bwd)(float *dx, const float *dy, const float *y, int64_t n);
    void (*tanh_fwd)(float *y, const float *x, int64_t n);
    /* decode steps: a few rows against a weight read once (gemv.h) */
    void (*linear_rows_fwd)(float *y, const float *x, const float *w, const float *b, int64_t m, int64_t in,
                            int64_t out, bool w_in_out);
    /* the same with half weights (BF16 or F16) and x rounded to their type, fp32 sums */
    void (*linear_rows_half_fwd)(float *y, const float *x, const uint16_t *w, brg_dtype type, const float *b,
                                 int64_t m, int64_t in, int64_t out, bool w_in_out);
    void (*concat_rows_fwd)(float *y, const float *a, const float *b, int64_t B, int64_t na, int64_t nb);
    void (*concat_rows_bwd)(float *da, float *db, const float *dy, int64_t B, int64_t na, int64_t nb);
    void (*gather_positions_fwd)(float *y, const float *x, const int32_t *index, int64_t B, int64_t T, int64_t C);
    void (*gather_positions_bwd)(float *dx, const float *dy, const int32_t *index, int64_t B, int64_t T, int64_t C);
    /* Half activations (F16 / BF16 `type`): widened exactly to fp32, and rounded back to nearest
     * even (the autograd ops' staging, the tape's half gradients). */
    void (*widen)(float *dst, const void *src, brg_dtype type, int64_t n);
    void (*narrow)(void *dst, const float *src, brg_dtype type, int64_t n);
    /* sum x[i]^2 in double (gradient norms). */
    double (*sum_squares)(const float *x, int64_t n);
    /* One optimizer step over a parameter's elements (brg_k_optimizer_update). */
    void (*optimizer_update)(const brg_optimizer_config *c, brg_k_optim_slot *s, double lr, int64_t t);
} brg_kernels;

typedef enum brg_copy_kind {
    BRG_COPY_TO_DEVICE,   /* host memory into the backend's */
    BRG_COPY_TO_HOST,     /* the backend's memory into the host's */
    BRG_COPY_ON_DEVICE,   /* within or between the backend's devices */
} brg_copy_kind;

struct brg_backend {
    const char *name;
    /* The memory of its devices' arenas. */
    brg_allocator allocator;
    /* Data crosses between devices, and between a device and the host, only through here. */
    void (*copy)(void *dst, const void *src, size_t bytes, brg_copy_kind kind);
    /* Kernels by compute type: fp32 now. The half types' slots (F16/BF16 inputs, fp32
     * accumulation) are NULL until kernels fill them: the products reach half operands through
     * the fp32 table's linear kernels and the compute type bound to the thread (precision.h). */
    const brg_kernels *f32;
    const brg_kernels *f16, *bf16;
};

#endif
