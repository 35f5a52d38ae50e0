/* The task table and what every task's pipeline does the same way: options, loading the folder's
 * model and tokenizer, checking that the head fits the task, the inference pipeline, and the
 * inputs' fields. The tasks themselves are one file each (text_classification.c, ...). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "brigade/checkpoint.h"
#include "brigade/precision.h"
#include "brigade/registry.h"
#include "io/json.h"
#include "pipelines/task_internal.h"

static const task_def *const tasks[] = {
    &task_text_classification, &task_token_classification, &task_fill_mask,   &task_question_answering,
    &task_feature_extraction,  &task_text_generation,      &task_text2text,   &task_summarization,
    &task_translation,         &task_image_classification,
};
#define N_TASKS ((int)(sizeof tasks / sizeof tasks[0]))

static brg_task_info table[N_TASKS];

const brg_task_info *brg_task_list(int *n) {
    /* Filled on every call from constant data: the same result from any thread. */
    for (int i = 0; i < N_TASKS; i++) table[i] = tasks[i]->info;
    *n = N_TASKS;
    return table;
}

/* translation_XX_to_YY as transformers checks the name: task.split("_") gives four parts, the
 * first "translation" and the third "to". */
static bool is_translation_pair(const char *task) {
    const char *parts[5] = {task};
    int n = 1;
    for (const char *c = task; *c && n < 5; c++)
        if (*c == '_') parts[n++] = c + 1;
    if (n != 4 || strchr(parts[3], '_')) return false;
    return strncmp(parts[0], "translation_", 12) == 0 && strncmp(parts[2], "to_", 3) == 0;
}

static const task_def *find_def(const char *task) {
    for (int i = 0; i < N_TASKS; i++)
        if (strcmp(tasks[i]->name, task) == 0) return tasks[i];
    return is_translation_pair(task) ? &task_translation : NULL;
}

const brg_task_info *brg_task_find(const char *task) {
    int n;
    const brg_task_info *all = brg_task_list(&n);
    const task_def *d = task ? find_def(task) : NULL;
    if (d) {
        for (int i = 0; i < n; i++)
            if (strcmp(all[i].name, d->name) == 0) return &all[i];
    }
    return NULL;
}

void brg_task_options_default(brg_task_options *o) {
    memset(o, 0, sizeof *o);
    o->batch_size = 8;
    o->top_k = BRG_TASK_UNSET;
    o->doc_stride = BRG_TASK_UNSET;
    o->max_answer_len = BRG_TASK_UNSET;
    o->max_seq_len = BRG_TASK_UNSET;
    o->clean_up_tokenization_spaces = -1;
}

brg_status brg_aggregation_parse(const char *name, brg_aggregation *out) {
    static const char *const names[] = {"none", "simple", "first", "average", "max"};
    for (int i = 0; i < 5; i++)
        if (name && strcasecmp(name, names[i]) == 0) {
            *out = (brg_aggregation)i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARG, "aggregation strategy '%s': give none, simple, first, average or max",
                     name ? name : "(null)");
}

/* ---- creating ---------------------------------------------------------------------------- */

static char **copy_list(const char *const *src, int n) {
    char **dst = calloc((size_t)(n > 0 ? n : 1), sizeof *dst);
    for (int i = 0; dst && i < n; i++)
        if (!(dst[i] = strdup(src[i]))) {
            for (int k = 0; k < i; k++) free(dst[k]);
            free(dst);
            return NULL;
        }
    return dst;
}

static void free_list(const char *const *list, int n) {
    for (int i = 0; i < n; i++) free((char *)list[i]);
    free((void *)list);
}

static brg_status check_options(const brg_task_options *o) {
    if (o->batch_size < 1) return brg_error(BRG_ERR_INVALID_ARG, "batch size %lld: give at least 1", (long long)o->batch_size);
    if (o->top_k < BRG_TASK_UNSET) return brg_error(BRG_ERR_INVALID_ARG, "top_k %lld: give 0 or more", (long long)o->top_k);
    if (o->n_ignore_labels < 0 || o->n_targets < 0) return brg_error(BRG_ERR_INVALID_ARG, "negative list length");
    BRG_TRY(brg_compute_dtype_check(o->inference.compute_dtype)); /* the one-device runs' too */
    if (o->n_targets > 0 && !o->targets) return brg_error(BRG_ERR_INVALID_ARG, "n_targets is set and targets is NULL");
    if (o->n_ignore_labels > 0 && !o->ignore_labels)
        return brg_error(BRG_ERR_INVALID_ARG, "n_ignore_labels is set and ignore_labels is NULL");
    return BRG_OK;
}

/* The inference pipeline of the IPUConfig for the forward passes (generation tasks decode on one
 * device: their IPUConfig is only checked against the model). */
static bool generates(const task_def *def) {
    return def == &task_text_generation || def == &task_text2text || def == &task_summarization ||
           def == &task_translation;
}

static brg_status setup_devices(brg_task_pipeline *p, const brg_ipu_config *cfg) {
    if (!cfg) return BRG_OK;
    if (generates(p->def)) {
        brg_ipu_config c = *cfg;
        brg_ipu_config_eval(&c);
        brg_placement pl = {0};
        brg_status st = brg_model_parallelize(p->model, &c, BRG_IPU_MODE_INFERENCE, &pl);
        brg_placement_free(&pl);
        return st;
    }
    BRG_TRY(brg_inference_create(p->model, cfg, &p->opts.inference, &p->inf));
    p->multiple = brg_inference_batch_multiple(p->inf);
    return BRG_OK;
}

/* A task that builds its model itself: the head is checked from config.json alone, so that a
 * folder of another model is not loaded for nothing; one without architectures is left to the
 * task's own checks (its model_type). */
static brg_status load_own(brg_task_pipeline *p, const char *model, const brg_ipu_config *cfg) {
    char path[4200];
    BRG_TRY(brg_json_load_config(p->dir, path, sizeof path, &p->config));
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p->config, "architectures"), 0);
    if (cJSON_IsString(arch) && strcmp(arch->valuestring, p->def->info.models) != 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s is a %s: %s takes %s", model, arch->valuestring, p->task,
                         p->def->info.models);
    BRG_TRY(brg_arena_create("pipeline", 0, &p->arena));
    return p->def->load(p, cfg);
}

static brg_status load(brg_task_pipeline *p, const char *model, const brg_ipu_config *cfg) {
    BRG_TRY(brg_hf_resolve(model, p->dir, sizeof p->dir));
    if (p->def->load) return load_own(p, model, cfg);
    BRG_TRY(brg_model_load(p->dir, &p->model));
    if (!p->def->fits(p->model))
        return brg_error(BRG_ERR_UNSUPPORTED, "%s is a %s: %s takes %s", model, p->model->ops->architecture, p->task,
                         p->def->info.models);
    brg_status st = brg_tokenizer_load(p->dir, &p->tok);
    if (st != BRG_OK) return brg_error_wrap(st, "%s needs the folder's tokenizer", p->task);
    /* transformers' tokenizer call sets truncation and padding itself: off unless a task asks. */
    BRG_TRY(brg_tokenizer_set_truncation(p->tok, NULL));
    BRG_TRY(brg_tokenizer_set_padding(p->tok, NULL));
    BRG_TRY(task_tokens_load(p->dir, p->model, p->tok, &p->tokens));
    char path[4200];
    BRG_TRY(brg_json_load_config(p->dir, path, sizeof path, &p->config));
    for (const brg_input_decl *d = brg_model_inputs(p->model); d->name; d++)
        if (strcmp(d->name, "token_type_ids") == 0) p->token_types = !p->tokens.no_token_types;
    BRG_TRY(brg_arena_create("pipeline", 0, &p->arena));
    BRG_TRY(setup_devices(p, cfg));
    return p->def->setup ? p->def->setup(p) : BRG_OK;
}

brg_status brg_task_pipeline_create(const char *task, const char *model, const brg_task_options *opts,
                                    brg_task_pipeline **out) {
    *out = NULL;
    if (!task || !model) return brg_error(BRG_ERR_INVALID_ARG, "brg_task_pipeline_create: no task or no model");
    const task_def *def = find_def(task);
    if (!def) {
        char names[512] = "";
        int n;
        const brg_task_info *all = brg_task_list(&n);
        for (int i = 0; i < n; i++)
            if (all[i].implemented)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", all[i].name);
        return brg_error(BRG_ERR_INVALID_ARG, "unknown task '%s' (tasks: %s, translation_XX_to_YY)", task, names);
    }
    if (strlen(task) >= sizeof ((brg_task_pipeline *)0)->task)
        return brg_error(BRG_ERR_INVALID_ARG, "task name too long: %s", task);
    brg_task_options o;
    if (opts) o = *opts;
    else brg_task_options_default(&o);
    BRG_TRY(check_options(&o));
    brg_task_pipeline *p = calloc(1, sizeof *p);
    if (!p) return brg_error(BRG_ERR_OOM, "no memory for a pipeline");
    p->def = def;
    snprintf(p->task, sizeof p->task, "%s", task);
    snprintf(p->in_name, sizeof p->in_name, "%s", o.input_name ? o.input_name : "input");
    p->opts = o;
    p->multiple = 1;
    /* What the pipeline keeps past this call is its own copy. */
    p->opts.ipu_config = NULL;
    p->opts.input_name = NULL;
    p->opts.function_to_apply = o.function_to_apply ? strdup(o.function_to_apply) : NULL;
    p->opts.generate_kwargs = o.generate_kwargs ? strdup(o.generate_kwargs) : NULL;
    p->opts.ignore_labels = o.ignore_labels ? (const char *const *)copy_list(o.ignore_labels, o.n_ignore_labels) : NULL;
    p->opts.targets = o.targets ? (const char *const *)copy_list(o.targets, o.n_targets) : NULL;
    brg_status st = BRG_OK;
    if ((o.function_to_apply && !p->opts.function_to_apply) || (o.generate_kwargs && !p->opts.generate_kwargs) ||
        (o.ignore_labels && !p->opts.ignore_labels) || (o.targets && !p->opts.targets))
        st = brg_error(BRG_ERR_OOM, "no memory for the options");
    if (st == BRG_OK) st = load(p, model, o.ipu_config);
    if (st != BRG_OK) {
        brg_task_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return BRG_OK;
}

void brg_task_pipeline_destroy(brg_task_pipeline *p) {
    if (!p) return;
    if (p->def->destroy) p->def->destroy(p);
    brg_inference_destroy(p->inf);
    brg_arena_destroy(p->arena);
    for (int64_t i = 0; i < p->n_labels; i++) free(p->labels[i]);
    free(p->labels);
    cJSON_Delete(p->config);
    brg_tokenizer_free(p->tok);
    brg_model_destroy(p->model);
    free((char *)p->opts.function_to_apply);
    free((char *)p->opts.generate_kwargs);
    if (p->opts.ignore_labels) free_list(p->opts.ignore_labels, p->opts.n_ignore_labels);
    if (p->opts.targets) free_list(p->opts.targets, p->opts.n_targets);
    free(p);
}

const char *brg_task_pipeline_task(const brg_task_pipeline *p) { return p->task; }
const char *brg_task_pipeline_inputs(const brg_task_pipeline *p) { return p->def->info.inputs; }

/* ---- running --------------------------------------------------------------------------------- */

/* The fields input i carries against those the task reads. */
static void text_fields(const brg_task_pipeline *p, const brg_task_input *in, const char **missing,
                        const char **extra) {
    const bool qa = p->def == &task_question_answering, pair = p->def == &task_text_classification;
    if (qa) {
        if (!in->question) *missing = "question";
        else if (!in->context) *missing = "context";
        if (in->text) *extra = "text";
        else if (in->text_pair) *extra = "text_pair";
    } else {
        if (!in->text) *missing = "text";
        if (in->question) *extra = "question";
        else if (in->context) *extra = "context";
        else if (in->text_pair && !pair) *extra = "text_pair";
    }
    if (in->image) *extra = "image";
}

static void image_fields(const brg_task_input *in, const char **missing, const char **extra) {
    if (!in->image) *missing = "image";
    *extra = in->text        ? "text"
             : in->text_pair ? "text_pair"
             : in->question  ? "question"
             : in->context   ? "context"
                             : NULL;
}

static brg_status check_input(const brg_task_pipeline *p, const brg_task_input *in, int64_t index) {
    const bool qa = p->def == &task_question_answering;
    const char *missing = NULL, *extra = NULL;
    if (p->def == &task_image_classification) image_fields(in, &missing, &extra);
    else text_fields(p, in, &missing, &extra);
    if (extra)
        return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: %s does not take \"%s\" (its inputs: %s)", p->in_name,
                         (long long)index, p->task, extra, p->def->info.inputs);
    if (missing)
        return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: %s needs \"%s\" (its inputs: %s)", p->in_name,
                         (long long)index, p->task, missing, p->def->info.inputs);
    if (qa && (!in->question[0] || !in->context[0]))
        return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: `%s` cannot be empty", p->in_name, (long long)index,
                         in->question[0] ? "context" : "question");
    return BRG_OK;
}

brg_status brg_task_pipeline_run(brg_task_pipeline *p, const brg_task_input *inputs, int64_t n, int64_t first_index,
                                 char **results) {
    if (n < 0 || (n > 0 && (!inputs || !results)))
        return brg_error(BRG_ERR_INVALID_ARG, "brg_task_pipeline_run: bad arguments");
    for (int64_t i = 0; i < n; i++) BRG_TRY(check_input(p, &inputs[i], first_index + i));
    for (int64_t i = 0; i < n; i++) results[i] = NULL;
    const size_t mark = brg_arena_mark(p->arena);
    brg_status st = p->def->run(p, inputs, n, first_index, results);
    brg_arena_reset(p->arena, mark);
    if (st != BRG_OK)
        for (int64_t i = 0; i < n; i++) {
            free(results[i]);
            results[i] = NULL;
        }
    return st;
}
