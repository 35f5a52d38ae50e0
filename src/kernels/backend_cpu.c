/* The CPU backend: host memory, memcpy, and the kernels of kernels.h (their SIMD bodies picked
 * by brg_simd_isa()). */
#include <string.h>

#include "kernels/backend.h"
#include "kernels/half.h"
#include "kernels/simd.h"

static const brg_kernels cpu_f32 = {
    .accumulate = brg_k_accumulate,
    .add_bcast_bwd = brg_k_add_bcast_bwd,
    .add_bcast_fwd = brg_k_add_bcast_fwd,
    .add_fwd = brg_k_add_fwd,
    .attention_bwd = brg_k_attention_bwd,
    .attention_fwd = brg_k_attention_fwd,
    .bce_logits_bwd = brg_k_bce_logits_bwd,
    .bce_logits_sum_fwd = brg_k_bce_logits_sum_fwd,
    .bias_gelu_bwd = brg_k_bias_gelu_bwd,
    .bias_gelu_fwd = brg_k_bias_gelu_fwd,
    .bmm_bwd = brg_k_bmm_bwd,
    .bmm_fwd = brg_k_bmm_fwd,
    .clamp_bwd = brg_k_clamp_bwd,
    .clamp_fwd = brg_k_clamp_fwd,
    .cross_entropy_bwd = brg_k_cross_entropy_bwd,
    .cross_entropy_fwd = brg_k_cross_entropy_fwd,
    .dropout_bwd = brg_k_dropout_bwd,
    .dropout_fwd = brg_k_dropout_fwd,
    .embedding_bwd = brg_k_embedding_bwd,
    .embedding_fwd = brg_k_embedding_fwd,
    .embedding_pad_bwd = brg_k_embedding_pad_bwd,
    .gelu_bwd = brg_k_gelu_bwd,
    .gelu_fwd = brg_k_gelu_fwd,
    .layernorm_bwd = brg_k_layernorm_bwd,
    .layernorm_fwd = brg_k_layernorm_fwd,
    .linear_bwd = brg_k_linear_bwd,
    .linear_fwd = brg_k_linear_fwd,
    .max_abs = brg_k_max_abs,
    .merge_heads = brg_k_merge_heads,
    .mse_bwd = brg_k_mse_bwd,
    .mse_sum_fwd = brg_k_mse_sum_fwd,
    .mul_bwd = brg_k_mul_bwd,
    .mul_fwd = brg_k_mul_fwd,
    .patch_unfold_bwd = brg_k_patch_unfold_bwd,
    .patch_unfold_fwd = brg_k_patch_unfold_fwd,
    .prepend_token_bwd = brg_k_prepend_token_bwd,
    .prepend_token_fwd = brg_k_prepend_token_fwd,
    .relative_position_buckets = brg_k_relative_position_buckets,
    .relpos_bias_bwd = brg_k_relpos_bias_bwd,
    .relpos_bias_fwd = brg_k_relpos_bias_fwd,
    .relu_bwd = brg_k_relu_bwd,
    .relu_fwd = brg_k_relu_fwd,
    .rmsnorm_bwd = brg_k_rmsnorm_bwd,
    .rmsnorm_fwd = brg_k_rmsnorm_fwd,
    .scale = brg_k_scale,
    .select_bwd = brg_k_select_bwd,
    .select_fwd = brg_k_select_fwd,
    .softmax_bwd = brg_k_softmax_bwd,
    .softmax_fwd = brg_k_softmax_fwd,
    .split_heads = brg_k_split_heads,
    .tanh_bwd = brg_k_tanh_bwd,
    .tanh_fwd = brg_k_tanh_fwd,
    .linear_rows_fwd = brg_k_linear_rows_fwd,
    .linear_rows_half_fwd = brg_k_linear_rows_half_fwd,
    .concat_rows_fwd = brg_k_concat_rows_fwd,
    .concat_rows_bwd = brg_k_concat_rows_bwd,
    .gather_positions_fwd = brg_k_gather_positions_fwd,
    .gather_positions_bwd = brg_k_gather_positions_bwd,
    .widen = brg_k_widen,
    .narrow = brg_k_narrow,
    .sum_squares = brg_simd_sum_squares,
    .optimizer_update = brg_k_optimizer_update,
};

/* Every kind is the same memory here. */
static void cpu_copy(void *dst, const void *src, size_t bytes, brg_copy_kind kind) {
    (void)kind;
    if (bytes) memcpy(dst, src, bytes);
}

static const brg_backend cpu = {
    .name = "cpu",
    .allocator = {brg_host_alloc_zeroed, brg_host_release, NULL},
    .copy = cpu_copy,
    .f32 = &cpu_f32,
};

const brg_backend *brg_backend_cpu(void) { return &cpu; }

const char *brg_backend_name(const brg_backend *backend) { return backend->name; }
