/* Text data for brigade train: through the model folder's tokenizer, prepared for the objective
 * the model's head trains on. */
#ifndef BRIGADE_CLI_TRAIN_DATA_H
#define BRIGADE_CLI_TRAIN_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/dataset.h"

typedef struct train_text_flags {
    int64_t seq_len;
    double mlm_probability; /* --mlm-probability */
    bool line_by_line;      /* --line-by-line */
    const char *source_prefix;  /* --source-prefix: seq2seq sources start with it (NULL: none) */
    int64_t max_target_length;  /* --max-target-length: seq2seq target tokens */
    int64_t doc_stride;         /* --doc-stride: question answering's window overlap */
    uint64_t seed;
} train_text_flags;

/* `ref` is a text file (.txt, .jsonl or .csv) for `m`, loaded from `model_dir`: causal LMs pack
 * it (run_clm.py), sequence classifiers take {"text", "text_pair", "label"} examples, masked LMs
 * lines masked per step (an evaluation set, `eval`, keeps one draw of masks), seq2seq models
 * {"source", "target"} pairs, question answering SQuAD (.json, or its rows as .jsonl). Without
 * a tokenizer in the folder the text is bytes. */
brg_status train_data_load_text(const char *ref, const char *model_dir, const brg_model *m, const train_text_flags *f,
                                bool eval, brg_dataset **out);

#endif
