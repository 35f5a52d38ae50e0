/* Training data: rows of token ids with optional attention masks and labels, and the order in
 * which steps consume them (PopTorch's [device_iterations, accumulation, replica, micro]). */
#ifndef BRIGADE_DATASET_H
#define BRIGADE_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_dataset {
    int64_t rows, seq_len;
    int32_t *ids;    /* [rows, seq_len] */
    float *mask;     /* [rows, seq_len] or NULL (all ones) */
    int32_t *labels; /* [rows, seq_len]: given, or input_ids with -100 where masked */
} brg_dataset;

/* Reads a safetensors file of columns (input_ids [N, T] I32/I64, optional attention_mask and
 * labels of the same shape) or, for any other file, text as bytes (token id = byte value, which
 * needs vocab >= 256) cut into rows of seq_len (the tail that does not fill a row is dropped).
 * Ids, labels and masks are validated against the vocabulary and max_positions. */
brg_status brg_dataset_load(const char *path, int64_t vocab, int64_t max_positions, int64_t seq_len,
                            brg_dataset **out);
/* A dataset over caller-provided rows (copied). mask and labels may be NULL. */
brg_status brg_dataset_from_rows(const int32_t *ids, const float *mask, const int32_t *labels, int64_t rows,
                                 int64_t seq_len, brg_dataset **out);
void brg_dataset_free(brg_dataset *d);

/* A dataset brigade generates itself ("reverse": reverse a word of 3-6 letters, byte-level,
 * vocabulary >= 256, rows of at least 14 tokens, loss on the answer only). */
brg_status brg_dataset_builtin(const char *name, int64_t rows, int64_t seq_len, uint64_t seed, brg_dataset **out);

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
 * ((a * replicas + replica) * micro + i), i < micro, of the step, as PopTorch lays them out.
 * Tensors point into `storage` (micro * seq_len * (2 ints + 1 float) per slot). */
typedef struct brg_step_batch {
    int replicas, accumulation;
    int64_t micro, seq_len;
    brg_micro_batch *mbs;
    brg_tensor *tensors; /* 3 per slot */
    int32_t *ids, *labels;
    float *mask;
    brg_loss_items loss_items; /* counted labels over the whole step */
} brg_step_batch;

brg_status brg_step_batch_init(brg_step_batch *b, int replicas, int accumulation, int64_t micro, int64_t seq_len);
void brg_step_batch_free(brg_step_batch *b);
/* Fills the batch for `step`; loss_items is counted with the model's rule. */
void brg_step_batch_fill(brg_step_batch *b, const brg_dataset *d, brg_data_order *o, int64_t step,
                         const brg_model *model);

#ifdef __cplusplus
}
#endif
#endif
