/* pipeline("image-classification") against transformers on the committed random-init ViT
 * (tests/fixtures/image_cls_vit, tools/image_fixtures.py): every run of pipeline.json (default
 * arguments, top_k 2 and past num_labels, function_to_apply sigmoid and none) on every committed
 * PNG and JPEG, labels exactly and scores within 1e-4; the same with other batch sizes and on a
 * 2-stage pipeline; the JSON spelling; errors. */
#include "image_util.h"

#define MODEL "tests/fixtures/image_cls_vit"
#define SCORE_TOL 1e-4

static cJSON *load_pipeline_json(void) {
    size_t n = 0;
    uint8_t *text = image_read_file(MODEL "/pipeline.json", &n);
    cJSON *root = text ? cJSON_ParseWithLength((const char *)text, n) : NULL;
    free(text);
    CHECK(root != NULL);
    return root;
}

/* One run of pipeline.json through a classifier made with `base` plus the run's kwargs. */
static void check_run(const cJSON *run, const char *const *paths, int n, brg_image_classification_options base,
                      const char *what) {
    const cJSON *kw = cJSON_GetObjectItem(run, "kwargs");
    const cJSON *k = cJSON_GetObjectItem(kw, "top_k"), *fn = cJSON_GetObjectItem(kw, "function_to_apply");
    if (k) base.top_k = (int64_t)k->valuedouble;
    if (fn) CHECK_OK(brg_score_function_parse(fn->valuestring, &base.function_to_apply));
    brg_image_classifier *c = NULL;
    CHECK_OK(brg_image_classifier_create(MODEL, &base, &c));
    if (!c) return;
    const int64_t top = brg_image_classifier_top_k(c);
    brg_label_score *got = calloc((size_t)(n * top), sizeof *got);
    CHECK_OK(brg_image_classify_files(c, paths, n, got));
    const cJSON *outs = cJSON_GetObjectItem(run, "outputs");
    int i = 0, label_bad = 0;
    double worst = 0;
    for (const cJSON *o = outs->child; o && i < n; o = o->next, i++) {
        CHECK_MSG(cJSON_GetArraySize(o) == top, "%s: %s gives %d labels, brigade %lld", what, paths[i],
                  cJSON_GetArraySize(o), (long long)top);
        int j = 0;
        for (const cJSON *e = o->child; e && j < top; e = e->next, j++) {
            const brg_label_score *s = &got[i * top + j];
            const char *want = cJSON_GetObjectItem(e, "label")->valuestring;
            if (!s->label || strcmp(s->label, want) != 0) {
                label_bad++;
                fprintf(stderr, "%s: %s #%d: '%s', transformers '%s'\n", what, paths[i], j, s->label ? s->label : "",
                        want);
            }
            const double d = fabs((double)s->score - cJSON_GetObjectItem(e, "score")->valuedouble);
            worst = d > worst ? d : worst;
        }
    }
    CHECK_MSG(i == n, "%s: pipeline.json has %d outputs for %d images", what, i, n);
    CHECK_MSG(label_bad == 0, "%s: %d labels differ from transformers'", what, label_bad);
    CHECK_MSG(worst <= SCORE_TOL, "%s: scores differ from transformers' by %g", what, worst);
    char *args = cJSON_PrintUnformatted(kw);
    printf("%s, %s: labels exact, scores within %.2g\n", what, args ? args : "", worst);
    free(args);
    free(got);
    brg_image_classifier_destroy(c);
}

static void check_json_and_errors(const char *path) {
    brg_label_score s[2] = {{"tabby \"cat\"", 0, 0.5f}, {"caf\xc3\xa9\n", 3, 0.125f}};
    char *j = brg_label_scores_json(s, 2);
    CHECK(j && strcmp(j, "[{\"label\": \"tabby \\\"cat\\\"\", \"score\": 0.5}, {\"label\": \"caf\xc3\xa9\\n\", "
                         "\"score\": 0.125}]") == 0);
    free(j);
    j = brg_label_scores_json(s, 0);
    CHECK(j && strcmp(j, "[]") == 0);
    free(j);

    brg_image_classifier *c = NULL;
    CHECK_ERR(brg_image_classifier_create("tests/fixtures/vit_cls", NULL, &c), BRG_ERR_NOT_FOUND,
              "no preprocessor_config.json");
    CHECK_ERR(brg_image_classifier_create("tests/fixtures/vit_base", NULL, &c), BRG_ERR_UNSUPPORTED,
              "takes a ViTForImageClassification folder");
    CHECK_ERR(brg_image_classifier_create("tests/fixtures/bert_cls", NULL, &c), BRG_ERR_UNSUPPORTED,
              "'BertForSequenceClassification' is not supported");
    CHECK(c == NULL);
    brg_score_function fn;
    CHECK_ERR(brg_score_function_parse("relu", &fn), BRG_ERR_INVALID_ARG, "function_to_apply 'relu'");
    CHECK_OK(brg_score_function_parse("SoftMax", &fn));
    CHECK(fn == BRG_SCORES_SOFTMAX);

    CHECK_OK(brg_image_classifier_create(MODEL, NULL, &c));
    if (!c) return;
    CHECK(brg_image_classifier_num_labels(c) == 6 && brg_image_classifier_top_k(c) == 5);
    CHECK(strcmp(brg_image_classifier_label(c, 0), "tabby cat") == 0 && !brg_image_classifier_label(c, 6));
    brg_label_score out[10];
    const char *bad[2] = {path, "tests/fixtures/images/none.png"};
    CHECK_ERR(brg_image_classify_files(c, bad, 2, out), BRG_ERR_NOT_FOUND, "tests/fixtures/images/none.png");
    const char *text[1] = {MODEL "/pipeline.json"};
    CHECK_ERR(brg_image_classify_files(c, text, 1, out), BRG_ERR_UNSUPPORTED, "not a PNG or JPEG");
    /* Decoded images give the same answer as their files. */
    brg_image img;
    CHECK_OK(brg_image_load(path, &img));
    brg_label_score a[5], b[5];
    CHECK_OK(brg_image_classify(c, &img, 1, a));
    CHECK_OK(brg_image_classify_files(c, &path, 1, b));
    for (int i = 0; i < 5; i++) CHECK(a[i].id == b[i].id && a[i].score == b[i].score);
    brg_image empty = {0};
    CHECK_ERR(brg_image_classify(c, &empty, 1, a), BRG_ERR_INVALID_ARG, "image 0: empty");
    brg_image_free(&img);
    brg_image_classifier_destroy(c);
}

int main(void) {
    cJSON *root = load_pipeline_json();
    const cJSON *images = root ? cJSON_GetObjectItem(root, "images") : NULL;
    const int n = cJSON_GetArraySize(images);
    CHECK(n >= 25);
    char **paths = calloc((size_t)(n ? n : 1), sizeof *paths);
    int i = 0;
    for (const cJSON *p = images ? images->child : NULL; p; p = p->next, i++) {
        paths[i] = malloc(strlen(p->valuestring) + 32);
        sprintf(paths[i], "tests/fixtures/%s", p->valuestring);
    }
    brg_ipu_config two;
    brg_ipu_config_init(&two);
    CHECK_OK(brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 1], \"inference_device_iterations\": 2}", "two", &two));
    int runs = 0;
    for (const cJSON *run = root ? cJSON_GetObjectItem(root, "runs")->child : NULL; run; run = run->next, runs++) {
        check_run(run, (const char *const *)paths, n, (brg_image_classification_options){0}, "one device, batch 8");
        check_run(run, (const char *const *)paths, n, (brg_image_classification_options){.batch_size = 3}, "batch 3");
        if (runs == 0) {
            check_run(run, (const char *const *)paths, n, (brg_image_classification_options){.batch_size = 1}, "batch 1");
            check_run(run, (const char *const *)paths, n, (brg_image_classification_options){.ipu_config = &two},
                      "2 stages, 2 device iterations");
        }
    }
    CHECK(runs == 5);
    if (n) check_json_and_errors(paths[0]);
    for (i = 0; i < n; i++) free(paths[i]);
    free(paths);
    cJSON_Delete(root);
    return test_finish();
}
