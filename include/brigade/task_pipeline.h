/* Task pipelines: what transformers' `pipeline(task, model=DIR)` returns, for a model folder
 * with its tokenizer (image-classification: its preprocessor_config.json instead). Each result
 * is a JSON text shaped as the Python call on that one input returns it (what `brigade pipeline
 * TASK` prints, one line per input):
 *
 *   text-classification   [{"label", "score"}] (a text_pair input: the dict alone; top_k set:
 *                          the top_k labels, best first; top_k 0: every label); scores through softmax, sigmoid or nothing as
 *                          config.json's problem_type / num_labels say; labels from id2label
 *   token-classification  [{"entity", "score", "index", "word", "start", "end"}] per token, or
 *                          with an aggregation strategy [{"entity_group", "score", "word",
 *                          "start", "end"}]; labels in ignore_labels (default "O") dropped
 *   fill-mask             [{"score", "token", "token_str", "sequence"}], top_k (5) per mask;
 *                          a list of such lists when the text holds several masks
 *   question-answering    {"score", "start", "end", "answer"} (top_k > 1: a list, best first);
 *                          the context cut into windows of max_seq_len tokens doc_stride apart
 *   feature-extraction    [[[...], ...]]: the first output of the model ([1, T, hidden] for a
 *                          base model's last_hidden_state), for the input's own tokens
 *   text-generation       [{"generated_text"}] per returned sequence: the prompt and its
 *                          continuation (return_full_text false: the continuation alone)
 *   text2text-generation  [{"generated_text"}]; summarization [{"summary_text"}]; translation
 *                          and translation_XX_to_YY [{"translation_text"}]
 *   image-classification  [{"label", "score"}], best first, top_k (UNSET: 5; 0: none) capped at
 *                          num_labels; scores as function_to_apply or config.json says (as
 *                          text-classification); brigade/image_classification.h does the work
 *
 * transformers v5 dropped question-answering, summarization, text2text-generation and
 * translation: for those brigade follows transformers 4.57 (the last 4.x release), their
 * semantics and output shape; the other tasks follow v5. Starts, ends and offsets count code
 * points of the input (Python's str indices). Scores are computed in float32 from float32
 * logits; the JSON numbers are printed with 9 significant digits.
 *
 * Forward passes run on one device, or with an IPUConfig as its inference pipeline
 * (brg_inference_*: rows padded up to a multiple of replicas x device iterations); the results
 * do not depend on the batch size or the placement. Generation tasks decode on one device
 * (brg_generate); an IPUConfig is checked against the model there. */
#ifndef BRIGADE_TASK_PIPELINE_H
#define BRIGADE_TASK_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/ipu_config.h"
#include "brigade/pipeline.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_aggregation {
    BRG_AGGREGATION_NONE = 0, /* one entity per token, with its index */
    BRG_AGGREGATION_SIMPLE,   /* adjacent tokens of one entity (B-/I- tags) grouped */
    BRG_AGGREGATION_FIRST,    /* words take their first token's label, then grouped */
    BRG_AGGREGATION_AVERAGE,  /* words take the label of their tokens' mean scores */
    BRG_AGGREGATION_MAX,      /* words take the label of their highest-scoring token */
} brg_aggregation;

/* "none", "simple", "first", "average", "max" (case-insensitive, as AggregationStrategy). */
brg_status brg_aggregation_parse(const char *name, brg_aggregation *out);

#define BRG_TASK_UNSET (-1)

/* Options; zeroed is not the default: start from brg_task_options_default. */
typedef struct brg_task_options {
    int64_t batch_size; /* rows per forward pass (question answering: windows), >= 1; default 8 */
    /* NULL: one device. Otherwise its inference_* attributes place and run the forward passes
     * (the pointer is read by brg_task_pipeline_create only). */
    const brg_ipu_config *ipu_config;
    brg_inference_options inference;

    /* text-classification: BRG_TASK_UNSET gives the single best label in a list, 0 every label,
     * k the k best; fill-mask: UNSET is 5; question-answering: UNSET is 1; image-classification:
     * UNSET is 5, 0 lists none. */
    int64_t top_k;
    const char *function_to_apply; /* text- and image-classification: NULL (from the config),
                                    * "softmax", "sigmoid" or "none" */
    brg_aggregation aggregation;   /* token-classification */
    const char *const *ignore_labels; /* token-classification; NULL: {"O"} */
    int n_ignore_labels;
    const char *const *targets; /* fill-mask: score only these tokens (NULL: the vocabulary) */
    int n_targets;

    /* question-answering (4.57 defaults in brackets) */
    int64_t doc_stride;      /* UNSET: min(max_seq_len / 2, 128) */
    int64_t max_answer_len;  /* UNSET: 15 */
    int64_t max_seq_len;     /* UNSET: min(tokenizer model_max_length, 384) */
    bool handle_impossible_answer; /* false */
    bool no_align_to_words;        /* false: answers are widened to whole words */

    /* Generation tasks: generate() keyword arguments as a JSON object with
     * generation_config.json's keys ({"max_new_tokens": 20, "num_beams": 2}); NULL: none. They
     * count as set by the caller where the pipelines tell set and default values apart. */
    const char *generate_kwargs;
    bool no_full_text;        /* text-generation: return_full_text=False */
    int clean_up_tokenization_spaces; /* -1: the tokenizer's / the task's default; 0; 1 */

    /* What messages call an input ("input 3"; a command reading a file: "line"). NULL: "input". */
    const char *input_name;
} brg_task_options;

void brg_task_options_default(brg_task_options *o);

/* One input; the fields a task reads (others must be NULL):
 *   text-classification: text, optional text_pair; question-answering: question and context;
 *   every other text task: text; image-classification: image. */
typedef struct brg_task_input {
    const char *text;
    const char *text_pair;
    const char *question;
    const char *context;
    const char *image; /* image-classification: a PNG or JPEG file, opened as given (a relative
                        * path from the current directory) */
} brg_task_input;

/* The task table. */
typedef struct brg_task_info {
    const char *name;    /* "question-answering" */
    const char *inputs;  /* "question, context" */
    const char *models;  /* the heads it takes, e.g. "BertForQuestionAnswering" */
    const char *returns; /* the output shape, e.g. {"score", "start", "end", "answer"} */
    const char *follows; /* "transformers 5" or "transformers 4.57" */
    bool implemented;
} brg_task_info;

/* The tasks, in table order; *n receives their count. */
const brg_task_info *brg_task_list(int *n);
/* The entry of `task` (translation_XX_to_YY finds "translation"); NULL if none. */
const brg_task_info *brg_task_find(const char *task);

typedef struct brg_task_pipeline brg_task_pipeline;

/* Loads the model folder (or cached hub id) `model` and its tokenizer for `task` (for
 * image-classification the image classifier of brigade/image_classification.h instead). A model whose
 * head does not fit the task, an unknown task, or options out of range are errors naming them.
 * `opts` may be NULL (the defaults). */
brg_status brg_task_pipeline_create(const char *task, const char *model, const brg_task_options *opts,
                                    brg_task_pipeline **out);
void brg_task_pipeline_destroy(brg_task_pipeline *p);

/* The results of n inputs: results[i] receives input i's JSON text (malloc'd; free() each). On
 * failure no result is set, and the message names the input as "<input_name> <first_index + i>"
 * (a caller reading a file passes the line number of inputs[0]). */
brg_status brg_task_pipeline_run(brg_task_pipeline *p, const brg_task_input *inputs, int64_t n, int64_t first_index,
                                 char **results);

/* The task this pipeline runs, as named at creation ("translation_en_to_de"). */
const char *brg_task_pipeline_task(const brg_task_pipeline *p);
/* The input fields its inputs need, e.g. "question, context". */
const char *brg_task_pipeline_inputs(const brg_task_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
