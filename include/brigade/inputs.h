/* Model inputs by transformers' keyword names, validated and converted for the blocks. */
#ifndef BRIGADE_INPUTS_H
#define BRIGADE_INPUTS_H

#include "brigade/model.h"
#include "brigade/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_safetensors brg_safetensors;

/* The bundle's input fields by transformers' keyword names, for code that treats them alike
 * (datasets, micro-batch slicing): index k in [0, BRG_BUNDLE_INPUTS). */
#define BRG_BUNDLE_INPUTS 8
const char *brg_bundle_input_name(int k);
brg_tensor **brg_bundle_input(brg_bundle *b, int k);

/* Converts an integer tensor (I32 or I64, any strides) of `src_name` to a contiguous I32 tensor
 * in `arena`, failing with a message naming the tensor and the position of the first value
 * outside [lo, hi) other than `allowed` (pass lo to allow nothing extra). */
brg_status brg_inputs_to_i32(brg_arena *arena, const brg_tensor *src, const char *src_name, int64_t lo, int64_t hi,
                             int64_t allowed, brg_tensor **out);

/* Fills `bundle` from tensors by role; mask and labels may be NULL. */
brg_status brg_inputs_from_tensors(const brg_model *model, brg_arena *arena, const brg_tensor *ids,
                                   const brg_tensor *mask, const brg_tensor *labels, brg_bundle *bundle);

/* Fills `bundle` from a safetensors file's tensors, named as the model's forward keywords
 * (model->ops->inputs): input_ids (I32/I64 [B, T]), attention_mask (0/1 [B, T]),
 * token_type_ids, decoder_input_ids and decoder_attention_mask ([B, Td]), pixel_values (float
 * [B, C, H, W]), labels (integer ids with -100 ignored, or float targets; first dimension B),
 * start_positions / end_positions (into labels / extra_labels). A name the model does not take
 * is an error listing the ones it does. */
brg_status brg_inputs_load(const brg_model *model, brg_arena *arena, const brg_safetensors *file, brg_bundle *bundle);

#ifdef __cplusplus
}
#endif
#endif
