/* Question-answering examples of a SQuAD file, one at a time (internal to src/data): the
 * nested SQuAD .json ({"data": [{"paragraphs": [{"context", "qas": [...]}]}]}, v1.1 or v2.0)
 * or the flattened .jsonl rows of the hub's squad dataset ({"id", "question", "context",
 * "answers": {"text": [...], "answer_start": [...]}}). */
#ifndef BRIGADE_DATA_SQUAD_H
#define BRIGADE_DATA_SQUAD_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/status.h"

typedef struct squad_example {
    const char *id;       /* NULL when the example has none */
    const char *question; /* as written (run_qa strips its left) */
    const char *context;
    const char *answer;   /* the first answer's text; NULL: no answer (SQuAD v2's unanswerable) */
    int64_t answer_start; /* its first character (code point) in the context */
    char where[128];      /* names the example in messages: "line 3", "data[0].paragraphs[1].qas[2] (id x)" */
} squad_example;

typedef struct squad_reader squad_reader;

/* .json: the nested form, read whole; anything else: JSON lines. */
brg_status squad_open(const char *path, squad_reader **out);
/* True when squad_open's messages for `path` name it already (the nested form's JSON errors do). */
bool squad_open_names_path(const char *path);
void squad_close(squad_reader *r);
/* The next example in *ex (its strings valid until the next call); *done after the last.
 * Errors name the example: a missing or mistyped field, answers whose lists differ in length. */
brg_status squad_next(squad_reader *r, squad_example *ex, bool *done);

#endif
