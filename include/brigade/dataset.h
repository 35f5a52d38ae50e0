/* Training data: rows of model inputs by transformers' names (input_ids, attention_mask, labels,
 * token_type_ids, pixel_values, decoder_input_ids, ...), and the order in which steps consume
 * them (PopTorch's [device_iterations, accumulation, replica, micro]). */
#ifndef BRIGADE_DATASET_H
#define BRIGADE_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/encoder.h"
#include "brigade/inputs.h"
#include "brigade/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_tokenizer brg_tokenizer;

typedef struct brg_mlm_masking brg_mlm_masking;

typedef struct brg_dataset {
    int64_t rows;
    int64_t seq_len;    /* tokens per row of input_ids (0 without input_ids, e.g. images) */
    brg_tensor_map columns; /* each present input as a contiguous I32 or F32 tensor [rows, ...] */
    brg_arena *arena;   /* owns the columns */
    /* Masked LM with dynamic masking: input_ids hold the tokens unmasked, and every step's
     * batch gets masks drawn for it (brg_mlm_mask_row, keyed by the row and the epoch), where
     * never_mask [rows, seq_len] is 0. NULL: rows are read as stored. */
    const brg_mlm_masking *masking;
    const uint8_t *never_mask;
} brg_dataset;

/* Reads a safetensors file whose tensors are dataset columns named as `model`'s forward inputs
 * (validated as brigade forward validates them; labels default to input_ids for causal LMs) or,
 * for any other file, text as bytes (token id = byte value, which needs vocab >= 256) cut into
 * rows of seq_len (the tail that does not fill a row is dropped). */
brg_status brg_dataset_load(const char *path, const brg_model *model, int64_t seq_len, brg_dataset **out);
/* A language-model dataset over caller-provided rows (copied). mask may be NULL; labels NULL
 * means the ids, -100 where masked. */
brg_status brg_dataset_from_rows(const int32_t *ids, const float *mask, const int32_t *labels, int64_t rows,
                                 int64_t seq_len, brg_dataset **out);
void brg_dataset_free(brg_dataset *d);

/* Text for a causal LM through its tokenizer, as transformers' run_clm.py prepares it: each line
 * of a .txt file (or the "text" of each line of a .jsonl file) tokenized as the tokenizer does by
 * default, all ids concatenated and cut into rows of seq_len (the tail that does not fill a row
 * dropped); labels are the ids. Ids past vocab_size, bad UTF-8 and bad JSON lines are errors
 * naming the line. */
brg_status brg_dataset_load_text_tokens(const char *path, const brg_tokenizer *tok, int64_t vocab_size,
                                        int64_t seq_len, brg_dataset **out);

/* ---- text for classification, masked LM, seq2seq and question answering ----
 * Examples come from .jsonl lines or .csv records (a header row names the columns; RFC 4180
 * quoting); a masked LM also reads lines of any other file, question answering SQuAD's .json.
 * Each loader encodes with `tok`,
 * changing its truncation and padding for its own encodes and putting them back after. Every
 * row is padded to seq_len (attention_mask 0 there, the pad token's id) on the right. Errors
 * name the line: a missing field, a bad label, bad JSON or CSV quoting, ids past the vocabulary;
 * a file without examples is an error too. */
typedef struct brg_text_format {
    int64_t seq_len;     /* tokens per row (special tokens included): longer inputs are truncated */
    int64_t vocab_size;  /* the model's: an id at or past it is an error */
    int32_t pad_id;      /* the padding token; < 0: none, and a row that needs padding is an error */
    bool token_type_ids; /* the model takes token_type_ids: the rows' type ids become a column */
} brg_text_format;

/* A classifier's classes, from config.json as transformers reads them. */
typedef struct brg_label_map {
    int64_t num_labels;       /* id2label's size, else num_labels, else 2 */
    brg_problem_type problem; /* problem_type; AUTO when absent */
    int64_t n_names;
    char **names;             /* label2id's names (id2label's when label2id is absent)... */
    int64_t *ids;             /* ...and their ids, in [0, num_labels) */
} brg_label_map;
/* From DIR/config.json (DIR a folder or a hub id in the local cache). */
brg_status brg_label_map_load(const char *model_dir, brg_label_map *out);
void brg_label_map_free(brg_label_map *m);

/* Sequence classification, as transformers' run_classification.py / run_glue.py prepare it:
 * each example's "text" (and "text_pair" when present, encoded as a pair) truncated longest
 * first to seq_len and padded; "label" is a class id or a name in label2id (a CSV value that is
 * no name but an integer is an id); regression models (num_labels 1 or problem_type regression)
 * take a number (labels F32 [rows]), multi-label models a JSON list of ids or names (F32
 * [rows, num_labels], multi-hot); otherwise labels are I32 [rows]. */
brg_status brg_dataset_load_text_classification(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                                const brg_label_map *labels, brg_dataset **out);

/* Masking as transformers' DataCollatorForLanguageModeling draws it: each token that may be
 * masked is selected with `probability`; a selected token becomes mask_id with mask_replace, else
 * a random id in [0, vocab_size) with random_replace / (1 - mask_replace), else stays; labels are
 * the original ids where selected and -100 elsewhere. */
struct brg_mlm_masking {
    double probability;    /* mlm_probability: 0.15 */
    double mask_replace;   /* 0.8 */
    double random_replace; /* 0.1 (of all selected tokens) */
    int32_t mask_id;
    int64_t vocab_size;
    uint64_t seed;
};
/* Default rates (0.15, 0.8, 0.1) for mask_id and vocab_size. */
brg_mlm_masking brg_mlm_masking_default(int32_t mask_id, int64_t vocab_size, uint64_t seed);
brg_status brg_mlm_masking_validate(const brg_mlm_masking *m);
/* Masks row `row` of an epoch in place: ids[0..n) where never_mask is 0 (NULL: everywhere),
 * labels[0..n) as above. The draws depend on (seed, epoch, row) only: the same in every run,
 * whatever the batch layout or order, and new every epoch. */
void brg_mlm_mask_row(const brg_mlm_masking *m, int64_t epoch, int64_t row, int32_t *ids, const uint8_t *never_mask,
                      int32_t *labels, int64_t n);

/* Masked-LM text, as transformers' run_mlm.py prepares it: every example's "text" (a line of a
 * text file, a .jsonl or .csv "text") encoded with special tokens; all ids concatenated and cut
 * into rows of seq_len, the tail dropped (line_by_line: each non-blank line its own row,
 * truncated and padded). Special and padding tokens are never masked. The dataset draws masks
 * every step (d->masking, a copy of `masking`); labels [rows, seq_len] I32. */
brg_status brg_dataset_load_text_mlm(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                     const brg_mlm_masking *masking, bool line_by_line, brg_dataset **out);
/* Draws the masks of epoch 0 into the stored rows once and stops masking per step: an
 * evaluation set, scored on the same masks every time. */
void brg_dataset_fix_masks(brg_dataset *d);

/* Seq2seq (T5), as transformers' run_summarization.py / run_translation.py prepare it: each
 * example's source_prefix + "source" encoded with special tokens, truncated and padded to
 * fmt->seq_len (input_ids, attention_mask); its "target" encoded the same way to
 * max_target_length, padding -100, as labels I32 [rows, max_target_length]. The model derives
 * its decoder inputs from the labels (shifted right). */
typedef struct brg_seq2seq_format {
    const char *source_prefix; /* --source_prefix, e.g. "summarize: "; NULL: none */
    int64_t max_target_length; /* --max_target_length (run_summarization's default: 128) */
} brg_seq2seq_format;
brg_status brg_dataset_load_text_seq2seq(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                         const brg_seq2seq_format *s2s, brg_dataset **out);

/* Extractive question answering, as transformers' run_qa.py prepare_train_features makes its
 * features: a SQuAD file ({"data": [{"paragraphs": [{"context", "qas": [{"id", "question",
 * "answers": [{"text", "answer_start"}]}]}]}]}, .json) or the hub's flattened squad rows
 * ({"id", "question", "context", "answers": {"text": [...], "answer_start": [...]}}, .jsonl).
 * The question, left-stripped, comes first; the context is truncated to seq_len (only_second)
 * in windows that overlap by doc_stride tokens, one row each. start_positions (I32 [rows])
 * and end_positions (I32 [rows]) are the tokens of the first answer's character span,
 * or the CLS token's index when the window does not hold all of it or there is no answer
 * (SQuAD v2). An answer_start outside the context, or an answer text that is not the context's
 * text at answer_start, is an error naming the record (run_qa trusts both). */
brg_status brg_dataset_load_text_qa(const char *path, brg_tokenizer *tok, const brg_text_format *fmt,
                                    int64_t doc_stride, brg_dataset **out);

/* A dataset brigade generates itself ("reverse": reverse a word of 3-6 letters, byte-level,
 * vocabulary >= 256, rows of at least 14 tokens, loss on the answer only). */
brg_status brg_dataset_builtin(const char *name, int64_t rows, int64_t seq_len, uint64_t seed, brg_dataset **out);

/* Rows [first, first + rows) of every column, as views (valid while the dataset lives). */
void brg_dataset_rows(const brg_dataset *d, int64_t first, int64_t rows, brg_tensor views[BRG_TENSOR_MAP_MAX],
                      brg_tensor_map *out);

/* The order rows are read in: identity, or a seeded permutation per epoch. */
typedef struct brg_data_order {
    int64_t rows;
    int64_t rows_per_step;   /* micro x accumulation x replicas */
    int64_t steps_per_epoch; /* whole steps only: a last partial one is dropped */
    bool shuffle;
    uint64_t seed;
    int64_t epoch;           /* epoch the permutation below belongs to */
    int64_t *perm;
} brg_data_order;

brg_status brg_data_order_init(brg_data_order *o, const brg_dataset *d, int64_t rows_per_step, bool shuffle,
                               uint64_t seed);
void brg_data_order_free(brg_data_order *o);
/* Row index of position j (0 <= j < rows_per_step) of global step `step`. */
int64_t brg_data_order_row(brg_data_order *o, int64_t step, int64_t j);

/* The micro-batches of one step: slot [replica * accumulation + a] holds positions
 * brg_micro_batch_first_row(a, replica, replicas, micro) + i, i < micro, of the step, as PopTorch
 * lays them out. */
typedef struct brg_step_batch {
    int replicas, accumulation;
    int64_t micro;
    brg_micro_batch *mbs;      /* each the dataset's columns, micro rows of them */
    brg_arena *arena;
    brg_loss_items loss_items; /* counted labels over the whole step */
} brg_step_batch;

brg_status brg_step_batch_init(brg_step_batch *b, const brg_dataset *d, int replicas, int accumulation,
                               int64_t micro);
void brg_step_batch_free(brg_step_batch *b);
/* Fills the batch for `step`; loss_items is counted with the model's rule. Fails, naming the
 * row, when a row holds a token id outside the model's vocabulary. Reads d and model only and
 * writes b and o: threads that each have their own batch and order may fill at once. */
brg_status brg_step_batch_fill(brg_step_batch *b, const brg_dataset *d, brg_data_order *o, int64_t step,
                               const brg_model *model);

#ifdef __cplusplus
}
#endif
#endif
