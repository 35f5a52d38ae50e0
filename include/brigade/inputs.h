/* Model inputs by transformers' keyword names, validated and converted for the blocks. */
#ifndef BRIGADE_INPUTS_H
#define BRIGADE_INPUTS_H

#include "brigade/model.h"
#include "brigade/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_safetensors brg_safetensors;

/* Checks one input against its declaration and converts it into `arena` as the model's blocks
 * read it (I32 ids, F32 masks and pixels...). `converted` holds the batch's inputs converted so
 * far, the model's first input first (empty when `src` is that input): the batch size and the
 * `like` shapes come from there. The error names the input and the position of a bad value. */
brg_status brg_input_convert(const brg_model *model, brg_arena *arena, const brg_input_decl *decl,
                             const brg_tensor *src, const brg_tensor_map *converted, brg_tensor **out);

/* Converts an integer tensor (I32 or I64, any strides) of `src_name` to a contiguous I32 tensor
 * in `arena`, failing with a message naming the tensor and the position of the first value
 * outside [lo, hi) other than `allowed` (pass lo to allow nothing extra). */
brg_status brg_inputs_to_i32(brg_arena *arena, const brg_tensor *src, const char *src_name, int64_t lo, int64_t hi,
                             int64_t allowed, brg_tensor **out);

/* Fills `inputs` with input_ids, attention_mask and labels, checked as brg_inputs_load checks
 * them; mask and labels may be NULL. */
brg_status brg_inputs_from_tensors(const brg_model *model, brg_arena *arena, const brg_tensor *ids,
                                   const brg_tensor *mask, const brg_tensor *labels, brg_tensor_map *inputs);

/* Fills `inputs` from a safetensors file's tensors, named as the model's forward keywords and
 * checked as its declarations say (brg_model_ops.inputs): input_ids (I32/I64 [B, T]),
 * attention_mask (0/1 [B, T]), token_type_ids, decoder_input_ids and decoder_attention_mask
 * ([B, Td]), pixel_values (float [B, C, H, W]), labels (integer ids with -100 ignored, or float
 * targets; first dimension B), start_positions / end_positions, next_sentence_label. A name the
 * model does not take is an error listing the ones it does. */
brg_status brg_inputs_load(const brg_model *model, brg_arena *arena, const brg_safetensors *file,
                           brg_tensor_map *inputs);

#ifdef __cplusplus
}
#endif
#endif
