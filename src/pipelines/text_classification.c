/* text-classification as transformers 5's TextClassificationPipeline: the text (or the pair
 * {"text", "text_pair"}) encoded with special tokens, no truncation; the logits through
 * function_to_apply (default: none for problem_type "regression", sigmoid for
 * "multi_label_classification" or a single label, softmax otherwise); labels from id2label.
 * Without top_k the result is [{"label", "score"}] for the best label (the first on a tie, as
 * numpy's argmax; a pair's result is that dict alone, as transformers returns it for a dict input);
 * with top_k, the top_k labels sorted by score (0: all of them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pipelines/task_internal.h"

typedef enum { FN_NONE, FN_SIGMOID, FN_SOFTMAX } score_fn;

typedef struct state {
    score_fn fn;
} state;

static bool fits(const brg_model *m) {
    const char *a = m->ops->architecture;
    const size_t n = strlen(a), k = strlen("ForSequenceClassification");
    return n > k && strcmp(a + n - k, "ForSequenceClassification") == 0;
}

static brg_status setup(brg_task_pipeline *p) {
    BRG_TRY(task_labels_load(p));
    state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the pipeline");
    p->state = s;
    const char *f = p->opts.function_to_apply, *problem = task_problem_type(p);
    if (f) {
        if (strcasecmp(f, "softmax") == 0) s->fn = FN_SOFTMAX;
        else if (strcasecmp(f, "sigmoid") == 0) s->fn = FN_SIGMOID;
        else if (strcasecmp(f, "none") == 0) s->fn = FN_NONE;
        else return brg_error(BRG_ERR_INVALID_ARG, "function_to_apply '%s': give softmax, sigmoid or none", f);
    } else if (strcmp(problem, "regression") == 0) {
        s->fn = FN_NONE;
    } else if (strcmp(problem, "multi_label_classification") == 0 || p->n_labels == 1) {
        s->fn = FN_SIGMOID;
    } else {
        s->fn = FN_SOFTMAX;
    }
    /* GPT-2's classifier scores the last token that is not config.json's pad_token_id: rows are
     * padded with that id, or (none) run one at a time as transformers requires. */
    if (strncmp(p->model->ops->architecture, "GPT2", 4) == 0) {
        int64_t pad = -1;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->config, "pad_token_id");
        if (cJSON_IsNumber(v)) pad = (int64_t)v->valuedouble;
        if (pad < 0) p->one_row = true;
        else p->tokens.pad_id = (int32_t)pad;
    }
    return BRG_OK;
}

static void destroy(brg_task_pipeline *p) { free(p->state); }

typedef struct ranked {
    float score;
    int64_t label;
} ranked;

/* Python's sort(key=score, reverse=True) is stable: equal scores keep label order. */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->label < y->label ? -1 : x->label > y->label;
}

/* `bare`: a {"text", "text_pair"} input without top_k gets the dict alone (transformers wraps only a
 * plain string's result in a list). */
static brg_status result(const brg_task_pipeline *p, const float *logits, bool bare, char **out) {
    const state *s = p->state;
    const int64_t L = p->n_labels;
    ranked *r = malloc((size_t)L * sizeof *r);
    float *scores = malloc((size_t)L * sizeof *scores);
    if (!r || !scores) {
        free(r);
        free(scores);
        return brg_error(BRG_ERR_OOM, "no memory for the scores");
    }
    if (s->fn == FN_SOFTMAX) task_softmax(logits, L, scores);
    for (int64_t i = 0; i < L; i++) {
        if (s->fn == FN_SIGMOID) scores[i] = 1.0f / (1.0f + expf(-logits[i]));
        else if (s->fn == FN_NONE) scores[i] = logits[i];
        r[i] = (ranked){scores[i], i};
    }
    int64_t shown = 1;
    if (p->opts.top_k == BRG_TASK_UNSET) {
        int64_t best = 0;
        for (int64_t i = 1; i < L; i++) best = scores[i] > scores[best] ? i : best;
        r[0] = (ranked){scores[best], best};
    } else {
        qsort(r, (size_t)L, sizeof *r, by_score);
        shown = p->opts.top_k == 0 || p->opts.top_k > L ? L : p->opts.top_k;
    }
    task_json j;
    brg_status st = task_json_open(&j);
    if (st == BRG_OK) {
        if (!bare) task_json_raw(&j, "[");
        for (int64_t i = 0; i < shown; i++) {
            task_json_raw(&j, i ? ", {\"label\": " : "{\"label\": ");
            task_json_str(&j, p->labels[r[i].label]);
            task_json_raw(&j, ", \"score\": ");
            task_json_num(&j, r[i].score);
            task_json_raw(&j, "}");
        }
        if (!bare) task_json_raw(&j, "]");
        st = task_json_close(&j, out);
    }
    free(r);
    free(scores);
    return st;
}

static brg_status batch_results(brg_task_pipeline *p, const task_batch *b, char **results) {
    const brg_tensor *logits = task_output(b->outs, b->n_outs, "logits");
    if (!logits || logits->ndim != 2 || logits->shape[1] != p->n_labels)
        return brg_error(BRG_ERR_FORMAT, "%s gives no [batch, %lld] logits (config.json has %lld labels)",
                         p->model->ops->architecture, (long long)p->n_labels, (long long)p->n_labels);
    for (int64_t r = 0; r < b->n; r++)
        BRG_TRY(result(p, (const float *)logits->data + r * p->n_labels,
                       b->in[r].text_pair && p->opts.top_k == BRG_TASK_UNSET, &results[r]));
    return BRG_OK;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    return task_run_batches(p, in, n, first, true, NULL, batch_results, results);
}

const task_def task_text_classification = {
    .name = "text-classification",
    .info = {.name = "text-classification",
             .inputs = "text[, text_pair]",
             .models = "BertForSequenceClassification, GPT2ForSequenceClassification",
             .returns = "[{\"label\", \"score\"}]",
             .follows = "transformers 5",
             .implemented = true},
    .fits = fits,
    .setup = setup,
    .run = run,
    .destroy = destroy,
};
