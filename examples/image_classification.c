/* Image classification end to end, as transformers' pipeline("image-classification") answers it:
 * PNG and JPEG files decoded, preprocessed as the folder's preprocessor_config.json says, run
 * through a ViTForImageClassification on the inference pipeline, one JSON line per image:
 *   [{"label": "golden retriever", "score": 0.642839253}, ...]
 * Build: part of `make`; run: build/example_image_classification [MODEL_DIR IMAGE...] (default:
 * the committed random-init test model and three of the test images). */
#include <stdio.h>
#include <stdlib.h>

#include "brigade/brigade.h"

int main(int argc, char **argv) {
    static const char *const defaults[] = {"tests/fixtures/images/rgb_37x23.png",
                                           "tests/fixtures/images/progressive_77x53.jpg",
                                           "tests/fixtures/images/exif6_100x80.jpg"};
    const char *model = argc > 1 ? argv[1] : "tests/fixtures/image_cls_vit";
    const char *const *images = argc > 2 ? (const char *const *)argv + 2 : defaults;
    const int64_t n = argc > 2 ? argc - 2 : 3;

    brg_image_classification_options opts = {.top_k = 3}; /* zeroed: top 5, one device */
    brg_image_classifier *clf = NULL;
    brg_status st = brg_image_classifier_create(model, &opts, &clf);
    const int64_t k = clf ? brg_image_classifier_top_k(clf) : 0;
    brg_label_score *scores = clf ? calloc((size_t)(n * k), sizeof *scores) : NULL;
    if (st == BRG_OK) st = brg_image_classify_files(clf, images, n, scores);
    for (int64_t i = 0; st == BRG_OK && i < n; i++) {
        char *json = brg_label_scores_json(scores + i * k, k);
        printf("%s: %s\n", images[i], json ? json : "(no memory)");
        free(json);
    }
    if (st != BRG_OK) fprintf(stderr, "image classification: %s\n", brg_last_error());
    free(scores);
    brg_image_classifier_destroy(clf);
    return st == BRG_OK ? 0 : 1;
}
