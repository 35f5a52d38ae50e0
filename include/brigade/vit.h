/* ViT as transformers' ViTForImageClassification and ViTModel: blocks "embeddings", "layer.0" ...
 * "layer.{L-1}", "head" (the final LayerNorm, then the classifier on the [CLS] token, or
 * ViTModel's pooler).
 *
 * Inputs (the bundle's named inputs, brg_bundle.inputs): pixel_values F32 [B, num_channels,
 * image_h, image_w]; labels as for sequence classification (see brg_problem_type: I32 [B]
 * single-label, F32 for regression (num_labels == 1) and multi-label).
 * Output: logits [B, num_labels]. The patch embedding is the convolution computed as patch
 * unfold + matmul.
 *
 * ViTModel (transformers' default add_pooling_layer=True) has no labels and no loss; its logits
 * pack, per row, last_hidden_state [N + 1, C] (after the final LayerNorm) then pooler_output
 * [pooler_output_size] (pooler_act(dense(last_hidden_state[:, 0]))): brg_model_outputs unpacks
 * them by name. Its parameters carry no "vit." prefix, as transformers names them. */
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

typedef enum brg_vit_task {
    BRG_VIT_IMAGE_CLASSIFICATION = 0, /* ViTForImageClassification */
    BRG_VIT_BASE,                     /* ViTModel */
} brg_vit_task;

/* ViTModel's pooler activations (config.json's pooler_act). */
typedef enum brg_vit_pooler_act {
    BRG_VIT_POOLER_TANH = 0, /* "tanh" */
    BRG_VIT_POOLER_RELU,     /* "relu" */
    BRG_VIT_POOLER_GELU_ERF, /* "gelu" */
    BRG_VIT_POOLER_GELU_TANH /* "gelu_new", "gelu_pytorch_tanh", "gelu_fast" */
} brg_vit_pooler_act;

typedef struct brg_vit_config {
    int64_t image_h, image_w, patch_h, patch_w, num_channels;
    bool image_size_pair, patch_size_pair; /* config.json wrote [h, w] rather than one number */
    int64_t hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    brg_activation hidden_act;
    char hidden_act_name[32];
    float hidden_dropout_prob, attention_probs_dropout_prob;
    float layer_norm_eps, initializer_range;
    bool qkv_bias;
    /* The pooler's width (0: hidden_size) and activation: ViTModel's; the classifier has no
     * pooler and only keeps them for config.json. */
    int64_t encoder_stride, pooler_output_size;
    char pooler_act[32];
    brg_vit_pooler_act pooler_activation;
    int64_t num_labels;
    brg_problem_type problem_type;
    brg_vit_task task; /* from architectures[0]; the classifier when absent */
} brg_vit_config;

/* ViTConfig's defaults (vit-base-patch16-224), for ViTForImageClassification. */
void brg_vit_config_default(brg_vit_config *cfg);
/* "ViTForImageClassification" or "ViTModel". */
const char *brg_vit_architecture(brg_vit_task task);
brg_status brg_vit_config_load(const char *path, brg_vit_config *cfg);
brg_status brg_vit_config_validate(const brg_vit_config *cfg);
/* Patches per image, (image_h / patch_h) * (image_w / patch_w). */
int64_t brg_vit_num_patches(const brg_vit_config *cfg);

brg_status brg_vit_create(const brg_vit_config *cfg, brg_model **out);
/* Builds the model config.json in `dir` describes, weights zeroed (for planning). */
brg_status brg_vit_create_dir(const char *dir, brg_model **out);
/* Loads config.json and the weights of a ViTForImageClassification or ViTModel folder. The
 * classifier loads strictly (names with or without "vit.", a ViTModel checkpoint's pooler
 * skipped). ViTModel loads as from_pretrained does (see brg_load_options): names with or without
 * "vit."; unused tensors (a classifier's) reported on stderr; the pooler (and final LayerNorm),
 * when the checkpoint lacks them (a ViTForImageClassification checkpoint), initialised from seed
 * 42 and reported on stderr. */
brg_status brg_vit_load_dir(const char *dir, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
