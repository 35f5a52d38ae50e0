/* pipeline("image-classification"): decode, preprocess, the inference pipeline, scores, top-k
 * labels (ImageClassificationPipeline.preprocess / _forward / postprocess). */
#include "brigade/image_classification.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "brigade/arena.h"
#include "brigade/checkpoint.h"
#include "brigade/registry.h"
#include "brigade/tensor.h"
#include "brigade/vit.h"
#include "io/json.h"

#define DEFAULT_TOP_K 5
#define DEFAULT_BATCH 8

struct brg_image_classifier {
    brg_model *model;
    brg_vit_config vit;
    brg_image_processor proc;
    char **labels;
    int64_t n_labels, top_k, batch_size;
    brg_score_function fn; /* resolved: never DEFAULT */
    brg_inference *inf;
    brg_arena *arena;
};

brg_status brg_score_function_parse(const char *name, brg_score_function *out) {
    static const char *const names[] = {"default", "softmax", "sigmoid", "none"};
    for (int i = 0; name && i < 4; i++)
        if (strcasecmp(name, names[i]) == 0) {
            *out = (brg_score_function)i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARG, "function_to_apply '%s': expected default, softmax, sigmoid or none",
                     name ? name : "(null)");
}

void brg_image_classifier_destroy(brg_image_classifier *c) {
    if (!c) return;
    brg_inference_destroy(c->inf);
    brg_arena_destroy(c->arena);
    brg_model_destroy(c->model);
    for (int64_t i = 0; c->labels && i < c->n_labels; i++) free(c->labels[i]);
    free(c->labels);
    free(c);
}

/* config.json's id2label by id, LABEL_i for the ids it lacks (what PretrainedConfig fills in). */
static brg_status load_labels(brg_image_classifier *c, const char *dir) {
    char path[4200];
    cJSON *root = NULL;
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, &root));
    c->n_labels = c->vit.num_labels;
    c->labels = calloc((size_t)(c->n_labels ? c->n_labels : 1), sizeof *c->labels);
    brg_status st = c->labels ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for %lld labels", (long long)c->n_labels);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    for (int64_t i = 0; st == BRG_OK && i < c->n_labels; i++) {
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)i);
        const cJSON *name = cJSON_IsObject(map) ? cJSON_GetObjectItemCaseSensitive(map, key) : NULL;
        if (name && !cJSON_IsString(name)) st = brg_error(BRG_ERR_FORMAT, "%s: id2label[\"%s\"] must be a string", path, key);
        else if (name) c->labels[i] = strdup(name->valuestring);
        else {
            char fallback[48];
            snprintf(fallback, sizeof fallback, "LABEL_%lld", (long long)i);
            c->labels[i] = strdup(fallback);
        }
        if (st == BRG_OK && !c->labels[i]) st = brg_error(BRG_ERR_OOM, "no memory for labels");
    }
    cJSON_Delete(root);
    return st;
}

static brg_status setup(brg_image_classifier *c, const char *ref, const brg_image_classification_options *o) {
    char dir[4096], path[4200];
    BRG_TRY(brg_hf_resolve(ref, dir, sizeof dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    BRG_TRY(brg_vit_config_load(path, &c->vit));
    const char *want = brg_vit_architecture(BRG_VIT_IMAGE_CLASSIFICATION);
    if (c->vit.task != BRG_VIT_IMAGE_CLASSIFICATION)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: image-classification takes a %s folder, not %s", dir, want,
                         brg_vit_architecture(c->vit.task));
    if (c->vit.num_channels != 3)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: the model takes %lld channels; images decode to RGB (3)", dir,
                         (long long)c->vit.num_channels);
    BRG_TRY(brg_image_processor_load(dir, &c->proc));
    const brg_image_processor *p = &c->proc;
    /* A fixed output size must be the model's; other sizes are checked per image. */
    const bool fixed = p->do_center_crop || (p->do_resize && !p->shortest_edge);
    int64_t h = 0, w = 0;
    if (fixed) BRG_TRY(brg_image_processor_output_size(p, 1, 1, &h, &w));
    if (fixed && (h != c->vit.image_h || w != c->vit.image_w))
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: preprocessor_config.json makes %lldx%lld pixel_values but the model's image_size is "
                         "%lldx%lld (interpolate_pos_encoding is not implemented)",
                         dir, (long long)h, (long long)w, (long long)c->vit.image_h, (long long)c->vit.image_w);
    BRG_TRY(load_labels(c, dir));
    BRG_TRY(brg_model_load(dir, &c->model));

    c->fn = o->function_to_apply;
    if (c->fn == BRG_SCORES_DEFAULT) {
        const brg_problem_type pt = c->vit.problem_type;
        c->fn = pt == BRG_PROBLEM_REGRESSION                          ? BRG_SCORES_NONE
                : pt == BRG_PROBLEM_MULTI_LABEL || c->n_labels == 1 ? BRG_SCORES_SIGMOID
                                                                    : BRG_SCORES_SOFTMAX;
    }
    if (o->top_k < 0) return brg_error(BRG_ERR_INVALID_ARG, "top_k %lld: must be positive", (long long)o->top_k);
    c->top_k = o->top_k ? o->top_k : DEFAULT_TOP_K;
    if (c->top_k > c->n_labels) c->top_k = c->n_labels;
    if (o->batch_size < 0) return brg_error(BRG_ERR_INVALID_ARG, "batch size %lld: must be positive", (long long)o->batch_size);

    brg_ipu_config one;
    const brg_ipu_config *cfg = o->ipu_config;
    if (!cfg) {
        brg_ipu_config_init(&one);
        cfg = &one;
    }
    BRG_TRY(brg_inference_create(c->model, cfg, &o->inference, &c->inf));
    const int64_t m = brg_inference_batch_multiple(c->inf);
    const int64_t b = o->batch_size ? o->batch_size : DEFAULT_BATCH;
    c->batch_size = (b + m - 1) / m * m;
    return brg_arena_create("image-classification", 0, &c->arena);
}

brg_status brg_image_classifier_create(const char *dir, const brg_image_classification_options *opts,
                                       brg_image_classifier **out) {
    if (!out) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_classifier_create: no output");
    *out = NULL;
    if (!dir) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_classifier_create: no model folder");
    brg_image_classification_options zero = {0};
    brg_image_classifier *c = calloc(1, sizeof *c);
    if (!c) return brg_error(BRG_ERR_OOM, "no memory for an image classifier");
    brg_status st = setup(c, dir, opts ? opts : &zero);
    if (st != BRG_OK) {
        brg_image_classifier_destroy(c);
        return st;
    }
    *out = c;
    return BRG_OK;
}

const brg_image_processor *brg_image_classifier_processor(const brg_image_classifier *c) { return &c->proc; }
const brg_model *brg_image_classifier_model(const brg_image_classifier *c) { return c->model; }
int64_t brg_image_classifier_num_labels(const brg_image_classifier *c) { return c->n_labels; }
int64_t brg_image_classifier_top_k(const brg_image_classifier *c) { return c->top_k; }
const char *brg_image_classifier_label(const brg_image_classifier *c, int64_t i) {
    return i >= 0 && i < c->n_labels ? c->labels[i] : NULL;
}

/* numpy's softmax / sigmoid on a float32 row (postprocess's own functions), then the stable
 * descending sort and the first k. */
static void top_labels(const brg_image_classifier *c, const float *logits, float *scores, brg_label_score *out) {
    const int64_t n = c->n_labels;
    if (c->fn == BRG_SCORES_SOFTMAX) {
        float mx = logits[0], sum = 0.0f;
        for (int64_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
        for (int64_t i = 0; i < n; i++) sum += scores[i] = expf(logits[i] - mx);
        for (int64_t i = 0; i < n; i++) scores[i] /= sum;
    } else if (c->fn == BRG_SCORES_SIGMOID) {
        for (int64_t i = 0; i < n; i++) scores[i] = 1.0f / (1.0f + expf(-logits[i]));
    } else {
        memcpy(scores, logits, (size_t)n * sizeof *scores);
    }
    /* Selection of the k best, ties to the lower id (Python's stable sort, reverse=True). */
    for (int64_t j = 0; j < c->top_k; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++) {
            bool taken = false;
            for (int64_t q = 0; q < j && !taken; q++) taken = out[q].id == i;
            if (!taken && (best < 0 || scores[i] > scores[best])) best = i;
        }
        out[j] = (brg_label_score){c->labels[best], best, scores[best]};
    }
}

/* Images [first, first + count) of a run: decoded by `get`, through the model, labelled. */
typedef brg_status (*image_get)(const void *src, int64_t i, brg_image *img, bool *owned, const char **what);

static brg_status run_batch(brg_image_classifier *c, const void *src, image_get get, int64_t first, int64_t count,
                            brg_label_score *out) {
    const int64_t H = c->vit.image_h, W = c->vit.image_w, plane = 3 * H * W, rows = c->batch_size;
    const size_t mark = brg_arena_mark(c->arena);
    brg_tensor *pv = NULL;
    const int64_t shape[4] = {rows, 3, H, W};
    brg_status st = brg_tensor_new(c->arena, BRG_DTYPE_F32, 4, shape, "pixel_values", &pv);
    if (st == BRG_OK) memset(pv->data, 0, (size_t)(rows * plane) * sizeof(float));
    for (int64_t r = 0; st == BRG_OK && r < count; r++) {
        brg_image img = {0};
        bool owned = false;
        const char *what = NULL;
        st = get(src, first + r, &img, &owned, &what);
        int64_t h = 0, w = 0;
        if (st == BRG_OK) st = brg_image_processor_output_size(&c->proc, img.width, img.height, &h, &w);
        if (st == BRG_OK && (h != H || w != W))
            st = brg_error(BRG_ERR_UNSUPPORTED, "%s: preprocessing gives %lldx%lld pixel_values, the model takes %lldx%lld",
                           what, (long long)h, (long long)w, (long long)H, (long long)W);
        if (st == BRG_OK) {
            st = brg_image_preprocess(&c->proc, &img, (float *)pv->data + r * plane);
            if (st != BRG_OK) st = brg_error_wrap(st, "%s", what);
        }
        if (owned) brg_image_free(&img);
    }
    brg_inference_outputs o = {0};
    brg_tensor_map in = {0};
    if (st == BRG_OK) st = brg_tensor_map_put(&in, "pixel_values", pv);
    if (st == BRG_OK) st = brg_inference_run(c->inf, &in, c->arena, &o);
    if (st == BRG_OK && (!o.logits || o.logits->ndim != 2 || o.logits->shape[0] != rows ||
                         o.logits->shape[1] != c->n_labels || o.logits->dtype != BRG_DTYPE_F32))
        st = brg_error(BRG_ERR_INTERNAL, "the classifier gave no [%lld, %lld] logits", (long long)rows,
                       (long long)c->n_labels);
    float *scores = st == BRG_OK ? malloc((size_t)c->n_labels * sizeof *scores) : NULL;
    if (st == BRG_OK && !scores) st = brg_error(BRG_ERR_OOM, "no memory for scores");
    for (int64_t r = 0; st == BRG_OK && r < count; r++)
        top_labels(c, (const float *)o.logits->data + r * c->n_labels, scores, out + (first + r) * c->top_k);
    free(scores);
    brg_arena_reset(c->arena, mark);
    return st;
}

static brg_status run(brg_image_classifier *c, const void *src, image_get get, int64_t n, brg_label_score *out) {
    if (!c || (n && !out)) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_classify: missing argument");
    for (int64_t first = 0; first < n; first += c->batch_size) {
        const int64_t count = n - first < c->batch_size ? n - first : c->batch_size;
        BRG_TRY(run_batch(c, src, get, first, count, out));
    }
    return BRG_OK;
}

static brg_status get_file(const void *src, int64_t i, brg_image *img, bool *owned, const char **what) {
    const char *const *paths = src;
    *what = paths[i] ? paths[i] : "(null)";
    *owned = true;
    if (!paths[i]) return brg_error(BRG_ERR_INVALID_ARG, "image %lld: no path", (long long)i);
    return brg_image_load(paths[i], img);
}

static brg_status get_image(const void *src, int64_t i, brg_image *img, bool *owned, const char **what) {
    static _Thread_local char name[48];
    snprintf(name, sizeof name, "image %lld", (long long)i);
    *what = name;
    *owned = false;
    *img = ((const brg_image *)src)[i];
    if (!img->rgb || img->width < 1 || img->height < 1) return brg_error(BRG_ERR_INVALID_ARG, "%s: empty", name);
    return BRG_OK;
}

brg_status brg_image_classify_files(brg_image_classifier *c, const char *const *paths, int64_t n, brg_label_score *out) {
    if (n && !paths) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_classify_files: no paths");
    return run(c, paths, get_file, n, out);
}

brg_status brg_image_classify(brg_image_classifier *c, const brg_image *images, int64_t n, brg_label_score *out) {
    if (n && !images) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_classify: no images");
    return run(c, images, get_image, n, out);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (!*buf) return;
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *b = realloc(*buf, nc);
        if (!b) {
            free(*buf);
            *buf = NULL;
            return;
        }
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* A JSON string as json.dumps(ensure_ascii=False) writes it (the labels are valid UTF-8: config.json
 * was checked when it was read). */
static void put_string(char **buf, size_t *len, size_t *cap, const char *s) {
    put(buf, len, cap, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        const unsigned c = *p;
        const char *named = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (named) put(buf, len, cap, named, 2);
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(buf, len, cap, esc, 6);
        } else put(buf, len, cap, (const char *)p, 1);
    }
    put(buf, len, cap, "\"", 1);
}

char *brg_label_scores_json(const brg_label_score *s, int64_t k) {
    size_t len = 0, cap = 64;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = '\0';
    put(&buf, &len, &cap, "[", 1);
    for (int64_t j = 0; j < k; j++) {
        char num[48];
        const double v = s[j].score;
        if (isnan(v)) snprintf(num, sizeof num, "NaN");
        else if (isinf(v)) snprintf(num, sizeof num, v > 0 ? "Infinity" : "-Infinity");
        else snprintf(num, sizeof num, "%.9g", v);
        put(&buf, &len, &cap, j ? ", {\"label\": " : "{\"label\": ", j ? 12 : 10);
        put_string(&buf, &len, &cap, s[j].label ? s[j].label : "");
        put(&buf, &len, &cap, ", \"score\": ", 11);
        put(&buf, &len, &cap, num, strlen(num));
        put(&buf, &len, &cap, "}", 1);
    }
    put(&buf, &len, &cap, "]", 1);
    return buf;
}
