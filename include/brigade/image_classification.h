/* Image classification as transformers' pipeline("image-classification", model=DIR) answers it,
 * for a ViTForImageClassification folder (config.json, weights, preprocessor_config.json):
 * each image file decoded (brigade/image.h: load_image's RGB), preprocessed into pixel_values as
 * the folder's image processor says, run through the inference pipeline (brigade/pipeline.h:
 * brg_inference_*; one device without an IPUConfig), the logits turned into scores and the
 * top_k labels taken through config.json's id2label:
 *
 *   [{"label": "tabby cat", "score": 0.64}, {"label": ..., "score": ...}, ...]   (best first)
 *
 * Scores as ImageClassificationPipeline.postprocess: function_to_apply from the config when not
 * given (problem_type "regression": none; "multi_label_classification" or num_labels 1:
 * sigmoid; otherwise softmax), computed in float32 from the float32 logits; top_k 5 by default,
 * at most num_labels; ties keep label order (Python's stable sort). Every image is computed on
 * its own: results do not depend on the batch size or the placement. */
#ifndef BRIGADE_IMAGE_CLASSIFICATION_H
#define BRIGADE_IMAGE_CLASSIFICATION_H

#include <stdint.h>

#include "brigade/image.h"
#include "brigade/ipu_config.h"
#include "brigade/model.h"
#include "brigade/pipeline.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_score_function {
    BRG_SCORES_DEFAULT = 0, /* from config.json, as above */
    BRG_SCORES_SOFTMAX,
    BRG_SCORES_SIGMOID,
    BRG_SCORES_NONE,
} brg_score_function;

/* "default", "softmax", "sigmoid", "none" (case-insensitive, as ClassificationFunction). */
brg_status brg_score_function_parse(const char *name, brg_score_function *out);

/* Zeroed is the default. */
typedef struct brg_image_classification_options {
    int64_t top_k;                        /* labels per image; 0: 5; capped at num_labels */
    brg_score_function function_to_apply; /* BRG_SCORES_DEFAULT: from config.json */
    int64_t batch_size; /* images per forward pass; 0: 8, rounded up to a multiple of the pipeline's rows */
    const brg_ipu_config *ipu_config; /* NULL: one device; else its inference_* attributes */
    brg_inference_options inference;
} brg_image_classification_options;

typedef struct brg_image_classifier brg_image_classifier;

/* Loads DIR (a model folder or cached hub id): the model, its preprocessor_config.json and
 * id2label. A model that is not an image classifier, an image processor whose output size is not
 * the model's image_size, or a model taking other than 3 channels is an error naming them. */
brg_status brg_image_classifier_create(const char *dir, const brg_image_classification_options *opts,
                                       brg_image_classifier **out);
void brg_image_classifier_destroy(brg_image_classifier *c);

const brg_image_processor *brg_image_classifier_processor(const brg_image_classifier *c);
const brg_model *brg_image_classifier_model(const brg_image_classifier *c);
int64_t brg_image_classifier_num_labels(const brg_image_classifier *c);
/* id2label[i] (LABEL_i where config.json has none); NULL out of range. */
const char *brg_image_classifier_label(const brg_image_classifier *c, int64_t i);
/* Labels each image gets: min(top_k, num_labels). */
int64_t brg_image_classifier_top_k(const brg_image_classifier *c);

typedef struct brg_label_score {
    const char *label; /* the classifier's (valid while it lives) */
    int64_t id;
    float score;
} brg_label_score;

/* The top-k labels of n images: out[i * k + j] is image i's j-th best, k =
 * brg_image_classifier_top_k. Images as files (a failure names the file) or decoded. */
brg_status brg_image_classify_files(brg_image_classifier *c, const char *const *paths, int64_t n, brg_label_score *out);
brg_status brg_image_classify(brg_image_classifier *c, const brg_image *images, int64_t n, brg_label_score *out);

/* The pipeline's answer for one image as JSON, Python's json.dumps spelling ("label" then
 * "score", ", " and ": " separators, scores with 9 significant digits): malloc'd, free() it;
 * NULL when out of memory. */
char *brg_label_scores_json(const brg_label_score *scores, int64_t k);

#ifdef __cplusplus
}
#endif
#endif
