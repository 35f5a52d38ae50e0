/* Internals of the task pipelines (src/pipelines/): what every task shares (the folder's model,
 * tokenizer and tokenizer_config.json, the labels, batched forward passes on one device or the
 * inference pipeline, JSON output) and the per-task entry points the table dispatches to. Not
 * public API. */
#ifndef BRIGADE_PIPELINES_TASK_INTERNAL_H
#define BRIGADE_PIPELINES_TASK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "brigade/model.h"
#include "brigade/pipeline.h"
#include "brigade/task_pipeline.h"
#include "brigade/tokenizer.h"

/* ---- the tokenizer's transformers-side settings (tokenizer_config.json) ---------------- */

typedef struct task_tokens {
    /* Special tokens as transformers' tokenizer knows them (tokenizer_config.json, then
     * special_tokens_map.json, then the model type's defaults when present in the vocabulary);
     * -1 when it has none. */
    int32_t mask_id, pad_id, unk_id, cls_id;
    char mask_token[64];
    int64_t model_max_length; /* 0: none (transformers' "very large" sentinel) */
    bool clean_up;            /* clean_up_tokenization_spaces (default false, as transformers 5) */
    bool clean_up_bpe;        /* clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output */
    bool padding_left;        /* padding_side "left" */
    bool no_token_types;      /* model_input_names is given and lacks token_type_ids */
} task_tokens;

/* ---- a pipeline ------------------------------------------------------------------------ */

typedef struct task_def task_def;

struct brg_task_pipeline {
    const task_def *def;
    char task[96];        /* as asked for ("translation_en_to_de") */
    char dir[4096];       /* the resolved model folder */
    brg_task_options opts;
    char in_name[32];     /* what messages call an input */
    brg_model *model;
    brg_tokenizer *tok;
    task_tokens tokens;
    cJSON *config;        /* config.json */
    char **labels;        /* id2label, n_labels entries (LABEL_i where config.json has none) */
    int64_t n_labels;
    brg_arena *arena;     /* inputs, outputs and scratch of one batch */
    brg_inference *inf;   /* opts.ipu_config: the inference pipeline; NULL: one device */
    int64_t multiple;     /* rows a pipelined batch is padded up to a multiple of */
    bool token_types;     /* the model takes token_type_ids */
    bool one_row;         /* rows run one at a time (a GPT-2 classifier without a pad token) */
    void *state;          /* the task's own */
};

/* One input's result so far (a task's run fills results[i]). */
struct task_def {
    const char *name;
    brg_task_info info;
    /* Whether the task takes this architecture (config.json's architectures[0]). */
    bool (*fits)(const brg_model *m);
    /* After the model and tokenizer are loaded: checks, task state. */
    brg_status (*setup)(brg_task_pipeline *p);
    /* n inputs (already checked to carry the task's fields) -> results[0..n). */
    brg_status (*run)(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first_index, char **results);
    void (*destroy)(brg_task_pipeline *p);
    /* Set for a task that builds its model from the folder itself and takes no tokenizer (image
     * classification: the image classifier loads the model, its image processor and inference
     * pipeline). Called instead of the text tasks' loading, after config.json and the arena;
     * `fits` is then unused: architectures[0] must be one of info.models. */
    brg_status (*load)(brg_task_pipeline *p, const brg_ipu_config *cfg);
};

extern const task_def task_text_classification, task_token_classification, task_fill_mask,
    task_question_answering, task_feature_extraction, task_text_generation, task_text2text,
    task_summarization, task_translation, task_image_classification;

/* ---- shared helpers (task_common.c) ------------------------------------------------------ */

brg_status task_tokens_load(const char *dir, const brg_model *m, const brg_tokenizer *tok, task_tokens *out);
/* config.json's id2label (or LABEL_0 .. LABEL_{num_labels-1}). */
brg_status task_labels_load(brg_task_pipeline *p);
/* config.json's problem_type, or "" when unset. */
const char *task_problem_type(const brg_task_pipeline *p);
bool task_arch_is(const brg_model *m, const char *const *names);

/* Encodes text (and pair) with the tokenizer as it is set now; messages name the input. */
brg_status task_encode(brg_task_pipeline *p, const char *text, const char *pair, bool special, int64_t index,
                       brg_encoding *out);

/* A batch of encoded rows through the model: input_ids (padded with the pad id, else 0),
 * attention_mask and, when the model takes them, token_type_ids, padded to the longest row (and,
 * pipelined, with rows of one attended pad token up to a multiple of replicas x device
 * iterations). outs[0..*n_outs) are the model's named outputs, [rows, ...] in p->arena: the
 * caller reads rows [0, n) and resets the arena to the mark it took. *T is the padded length. */
brg_status task_forward(brg_task_pipeline *p, const brg_encoding *const *rows, int64_t n, brg_named_tensor *outs,
                        int *n_outs, int64_t *T);
const brg_tensor *task_output(const brg_named_tensor *outs, int n, const char *name);

/* One batch as task_run_batches hands it to a task. */
typedef struct task_batch {
    const brg_task_input *in; /* [n] */
    const brg_encoding *enc;  /* [n] */
    int64_t n;
    const brg_named_tensor *outs; /* the model's outputs, [padded rows, ...] */
    int n_outs;
    int64_t T; /* the padded length */
} task_batch;

/* Checks one input's encoding before its batch runs (index: the input's, for messages). */
typedef brg_status (*task_check_fn)(brg_task_pipeline *p, const brg_encoding *enc, int64_t index);
/* Writes results[0..b->n) from a batch's outputs. */
typedef brg_status (*task_results_fn)(brg_task_pipeline *p, const task_batch *b, char **results);

/* The encoder tasks' loop: inputs in batches of opts.batch_size, each encoded with special tokens
 * (its text_pair too when `pairs`), checked (`check`, may be NULL), run through task_forward and
 * handed to `results`; each batch's arena space and encodings are released before the next. */
brg_status task_run_batches(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, bool pairs,
                            task_check_fn check, task_results_fn results, char **out);

/* Softmax of x[0..n) into out (float32, max-shifted, as numpy on float32 logits). */
void task_softmax(const float *x, int64_t n, float *out);

/* transformers' decode: the tokenizer's, then clean_up_tokenization when `clean_up` (never for
 * a BPE model unless its tokenizer_config.json insists). *text is malloc'd. */
brg_status task_decode(const brg_task_pipeline *p, const int32_t *ids, size_t n, bool skip_special, bool clean_up,
                       char **text);
/* PreTrainedTokenizerBase.clean_up_tokenization, in place. */
void task_clean_up_tokenization(char *s);

/* Code points of s[0..len) (valid UTF-8); the byte offset of code point `cp` (clamped to len). */
int64_t task_code_points(const char *s, size_t len);
size_t task_byte_offset(const char *s, size_t len, int64_t cp);
/* s's code points [from, to) as a malloc'd string. */
char *task_slice(const char *s, int64_t from, int64_t to);
/* Python's str.lower() equality of two strings (per code point, utf8proc's lowercase). */
bool task_lower_equal(const char *a, const char *b);

/* ---- JSON output (Python json.dumps spelling: ", " and ": " separators, UTF-8 kept) ---- */

typedef struct task_json {
    char *buf;
    size_t len;
    FILE *f;
} task_json;

brg_status task_json_open(task_json *j);
void task_json_str(task_json *j, const char *s);
void task_json_num(task_json *j, double v); /* %.9g; NaN and infinities as Python writes them */
void task_json_int(task_json *j, int64_t v);
void task_json_raw(task_json *j, const char *s);
/* Closes the stream; *out receives the text (NULL on failure, with an error). */
brg_status task_json_close(task_json *j, char **out);

#endif
