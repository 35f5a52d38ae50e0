/* Training data: rows of model inputs by transformers' names (input_ids, attention_mask, labels,
 * token_type_ids, pixel_values, decoder_input_ids, ...), and the order in which steps consume
 * them (PopTorch's [device_iterations, accumulation, replica, micro]). */
#ifndef BRIGADE_DATASET_H
#define BRIGADE_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/inputs.h"
#include "brigade/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_dataset {
    int64_t rows;
    int64_t seq_len;    /* tokens per row of input_ids (0 without input_ids, e.g. images) */
    brg_bundle columns; /* each present input as a contiguous I32 or F32 tensor [rows, ...] */
    brg_arena *arena;   /* owns the columns */
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
typedef struct brg_tokenizer brg_tokenizer;
brg_status brg_dataset_load_text_tokens(const char *path, const brg_tokenizer *tok, int64_t vocab_size,
                                        int64_t seq_len, brg_dataset **out);

/* A dataset brigade generates itself ("reverse": reverse a word of 3-6 letters, byte-level,
 * vocabulary >= 256, rows of at least 14 tokens, loss on the answer only). */
brg_status brg_dataset_builtin(const char *name, int64_t rows, int64_t seq_len, uint64_t seed, brg_dataset **out);

/* Rows [first, first + rows) of every column, as views (valid while the dataset lives). */
void brg_dataset_rows(const brg_dataset *d, int64_t first, int64_t rows, brg_tensor views[BRG_BUNDLE_INPUTS],
                      brg_bundle *out);

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
 * ((a * replicas + replica) * micro + i), i < micro, of the step, as PopTorch lays them out. */
typedef struct brg_step_batch {
    int replicas, accumulation;
    int64_t micro;
    brg_micro_batch *mbs;
    brg_bundle *slots;         /* the same tensors by bundle field */
    brg_arena *arena;
    brg_loss_items loss_items; /* counted labels over the whole step */
} brg_step_batch;

brg_status brg_step_batch_init(brg_step_batch *b, const brg_dataset *d, int replicas, int accumulation,
                               int64_t micro);
void brg_step_batch_free(brg_step_batch *b);
/* Fills the batch for `step`; loss_items is counted with the model's rule. */
void brg_step_batch_fill(brg_step_batch *b, const brg_dataset *d, brg_data_order *o, int64_t step,
                         const brg_model *model);

#ifdef __cplusplus
}
#endif
#endif
