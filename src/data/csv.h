/* CSV as RFC 4180 writes it (internal to src/data): fields separated by commas, records by CRLF
 * or LF, a field in double quotes may hold commas, line breaks and doubled quotes (""). */
#ifndef BRIGADE_DATA_CSV_H
#define BRIGADE_DATA_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "brigade/status.h"

typedef struct csv_reader {
    FILE *f;
    int64_t line;        /* lines read so far */
    int64_t record_line; /* the line the last record started on */
    char **fields;       /* the last record's fields, NUL-terminated, owned by the reader */
    size_t n_fields;
    /* storage */
    char *buf;
    size_t buf_len, buf_cap;
    size_t *starts;
    size_t fields_cap;
    bool started; /* past a UTF-8 byte-order mark at the start of the file */
} csv_reader;

void csv_init(csv_reader *r, FILE *f);
void csv_free(csv_reader *r);
/* Reads the next record into r->fields (blank lines are skipped); *eof at the end of the file.
 * Malformed quoting is BRG_ERR_FORMAT naming the line: a quote inside an unquoted field, text
 * after a closing quote, a quoted field still open at the end of the file. */
brg_status csv_next(csv_reader *r, bool *eof);

#endif
