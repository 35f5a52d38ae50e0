/* image-classification as transformers 5's ImageClassificationPipeline: an image file per input
 * ({"image": PATH}, a path as given: relative to the current directory), through the folder's
 * image classifier (brigade/image_classification.h: decoding, the image processor, the model on
 * one device or the inference pipeline, scores, top_k labels). No tokenizer: the table builds
 * this task through its `load` hook. */
#include <stdlib.h>
#include <string.h>

#include "brigade/image_classification.h"
#include "pipelines/task_internal.h"

typedef struct image_state {
    brg_image_classifier *clf;
    int64_t k; /* labels per result: the classifier's, or 0 (top_k 0 lists none, as transformers) */
} image_state;

static brg_status load(brg_task_pipeline *p, const brg_ipu_config *cfg) {
    image_state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the image classifier");
    p->state = s;
    brg_image_classification_options o = {.batch_size = p->opts.batch_size,
                                          .ipu_config = cfg,
                                          .inference = p->opts.inference};
    /* The classifier reads 0 as its default (5); the task's unset is that default. */
    o.top_k = p->opts.top_k == BRG_TASK_UNSET || p->opts.top_k == 0 ? 0 : p->opts.top_k;
    if (p->opts.function_to_apply) BRG_TRY(brg_score_function_parse(p->opts.function_to_apply, &o.function_to_apply));
    BRG_TRY(brg_image_classifier_create(p->dir, &o, &s->clf));
    s->k = p->opts.top_k == 0 ? 0 : brg_image_classifier_top_k(s->clf);
    return BRG_OK;
}

static void destroy(brg_task_pipeline *p) {
    image_state *s = p->state;
    if (!s) return;
    brg_image_classifier_destroy(s->clf);
    free(s);
}

/* One batch: every image decoded first, so that a bad file is named with its input. */
static brg_status run_batch(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first,
                            brg_image *imgs, brg_label_score *scores, char **results) {
    const image_state *s = p->state;
    const int64_t k = brg_image_classifier_top_k(s->clf);
    brg_status st = BRG_OK;
    int64_t loaded = 0;
    for (; st == BRG_OK && loaded < n; loaded++) {
        st = brg_image_load(in[loaded].image, &imgs[loaded]);
        if (st != BRG_OK) st = brg_error_wrap(st, "%s %lld", p->in_name, (long long)(first + loaded));
    }
    if (st == BRG_OK) {
        st = brg_image_classify(s->clf, imgs, n, scores);
        if (st != BRG_OK && n > 1)
            st = brg_error_wrap(st, "%ss %lld to %lld", p->in_name, (long long)first, (long long)(first + n - 1));
    }
    for (int64_t i = 0; st == BRG_OK && i < n; i++)
        if (!(results[i] = brg_label_scores_json(scores + i * k, s->k)))
            st = brg_error(BRG_ERR_OOM, "no memory for the results");
    for (int64_t i = 0; i < loaded; i++) brg_image_free(&imgs[i]);
    return st;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    const image_state *s = p->state;
    const int64_t B = p->opts.batch_size, k = brg_image_classifier_top_k(s->clf);
    brg_image *imgs = calloc((size_t)B, sizeof *imgs);
    brg_label_score *scores = calloc((size_t)(B * k), sizeof *scores);
    brg_status st = imgs && scores ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for a batch");
    for (int64_t b0 = 0; st == BRG_OK && b0 < n; b0 += B) {
        const int64_t nb = n - b0 < B ? n - b0 : B;
        st = run_batch(p, in + b0, nb, first + b0, imgs, scores, results + b0);
    }
    free(imgs);
    free(scores);
    return st;
}

const task_def task_image_classification = {
    .name = "image-classification",
    .info = {.name = "image-classification",
             .inputs = "image",
             .models = "ViTForImageClassification",
             .returns = "[{\"label\", \"score\"}] (top_k, default 5)",
             .follows = "transformers 5",
             .implemented = true},
    .load = load,
    .run = run,
    .destroy = destroy,
};
