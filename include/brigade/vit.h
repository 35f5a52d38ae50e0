/* ViT as transformers' ViTForImageClassification: blocks "embeddings", "layer.0" ...
 * "layer.{L-1}", "head" (final LayerNorm and classifier on the [CLS] token).
 *
 * Inputs (brg_bundle): pixel_values F32 [B, num_channels, image_h, image_w]; labels as for
 * sequence classification (see brg_problem_type: I32 [B] single-label, F32 for regression
 * (num_labels == 1) and multi-label). Output: logits [B, num_labels]. The patch embedding is
 * the convolution computed as patch unfold + matmul. */
#ifndef BRIGADE_VIT_H
#define BRIGADE_VIT_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/encoder.h"
#include "brigade/model.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_vit_config {
    int64_t image_h, image_w, patch_h, patch_w, num_channels;
    bool image_size_pair, patch_size_pair; /* config.json wrote [h, w] rather than one number */
    int64_t hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    brg_activation hidden_act;
    char hidden_act_name[32];
    float hidden_dropout_prob, attention_probs_dropout_prob;
    float layer_norm_eps, initializer_range;
    bool qkv_bias;
    int64_t encoder_stride, pooler_output_size; /* kept for config.json (the classifier has no pooler) */
    char pooler_act[32];
    int64_t num_labels;
    brg_problem_type problem_type;
} brg_vit_config;

/* ViTConfig's defaults (vit-base-patch16-224). */
void brg_vit_config_default(brg_vit_config *cfg);
brg_status brg_vit_config_load(const char *path, brg_vit_config *cfg);
brg_status brg_vit_config_validate(const brg_vit_config *cfg);
/* Patches per image, (image_h / patch_h) * (image_w / patch_w). */
int64_t brg_vit_num_patches(const brg_vit_config *cfg);

brg_status brg_vit_create(const brg_vit_config *cfg, brg_model **out);
/* Builds the model config.json in `dir` describes, weights zeroed (for planning). */
brg_status brg_vit_create_dir(const char *dir, brg_model **out);
/* Loads config.json and the weights of a ViTForImageClassification folder. */
brg_status brg_vit_load_dir(const char *dir, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
