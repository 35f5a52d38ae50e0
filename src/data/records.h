/* The examples of a text data file, one at a time, each as a JSON object (internal to
 * src/data): a .jsonl line as written (blank lines skipped), a .csv record under its header's
 * column names (every value a string; RFC 4180 quoting), or a line of any other file as
 * {"text": line}. */
#ifndef BRIGADE_DATA_RECORDS_H
#define BRIGADE_DATA_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "brigade/status.h"

typedef enum records_kind { RECORDS_LINES, RECORDS_JSONL, RECORDS_CSV } records_kind;

typedef struct records records;

/* Opens `path` (its kind from the name: .jsonl, .csv, anything else lines); a CSV file's header
 * is read here (a missing header, or a column named twice, is an error). */
brg_status records_open(const char *path, records **out);
void records_close(records *r);
records_kind records_kind_of(const records *r);

/* The next example in *obj (owned by the reader, valid until the next call), NULL after the
 * last; *line is the line it starts on. Errors name the line: bad JSON, a line that is not an
 * object, a CSV record with another number of fields than the header, invalid UTF-8. */
brg_status records_next(records *r, const cJSON **obj, int64_t *line);

/* The string field `key` of an example (NULL when absent and not required). A required field
 * that is missing, or a value that is not a string, is BRG_ERR_FORMAT: "line N: ...". */
brg_status records_string(const cJSON *obj, int64_t line, const char *key, bool required, const char **out);

#endif
