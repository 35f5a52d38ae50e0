/* What the encoder models (BERT, ViT) share: the loss a sequence-level head computes. */
#ifndef BRIGADE_ENCODER_H
#define BRIGADE_ENCODER_H

#ifdef __cplusplus
extern "C" {
#endif

/* config.json's problem_type. AUTO (null) decides per batch as transformers does: one label is
 * regression, I32 labels are single-label classification, F32 labels multi-label. */
typedef enum brg_problem_type {
    BRG_PROBLEM_AUTO = 0,
    BRG_PROBLEM_REGRESSION,                 /* MSE; labels F32 (or I32) [B] or [B, num_labels] */
    BRG_PROBLEM_SINGLE_LABEL,               /* cross-entropy; labels I32 [B], -100 ignored */
    BRG_PROBLEM_MULTI_LABEL,                /* BCE with logits; labels F32 (or I32) [B, num_labels] */
} brg_problem_type;

/* The config.json spelling ("regression", ...), or NULL for AUTO. */
const char *brg_problem_type_name(brg_problem_type type);

#ifdef __cplusplus
}
#endif
#endif
