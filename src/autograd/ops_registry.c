/* The autograd ops, one entry each (ops_registry.h). Keep the order of the headers. */
#include "autograd/ops_registry.h"

#include "autograd/ops_pack.h"
#include "brigade/ops.h"

#define OP(fn) {#fn, (ops_registry_fn)fn}

const ops_registry_entry ops_registry[] = {
    /* brigade/ops.h */
    OP(brg_linear),
    OP(brg_linear_act),
    OP(brg_matmul),
    OP(brg_embedding),
    OP(brg_layer_norm),
    OP(brg_activation_op),
    OP(brg_softmax),
    OP(brg_add),
    OP(brg_scale),
    OP(brg_dropout),
    OP(brg_reshape),
    OP(brg_split_heads),
    OP(brg_merge_heads),
    OP(brg_attention),
    OP(brg_cross_entropy),
    OP(brg_cross_entropy_share),
    OP(brg_select),
    OP(brg_prepend_token),
    OP(brg_add_broadcast),
    OP(brg_embedding_padded),
    OP(brg_tanh),
    OP(brg_mse_loss_share),
    OP(brg_bce_with_logits_share),
    OP(brg_patch_unfold),
    OP(brg_rms_norm),
    OP(brg_relu),
    OP(brg_clamp),
    OP(brg_fp16_overflow_guard),
    OP(brg_mul),
    OP(brg_relative_position_buckets),
    OP(brg_relative_position_bias),
    /* autograd/ops_pack.h */
    OP(brg_concat_rows),
    OP(brg_gather_positions),
};

const int ops_registry_count = (int)(sizeof ops_registry / sizeof ops_registry[0]);
