/* What the text-dataset tests share: scratch files, expected.json of tests/fixtures/text_data
 * (written by tools/text_data_fixtures.py with transformers) and column comparisons. */
#ifndef BRIGADE_TEST_TEXT_DATA_UTIL_H
#define BRIGADE_TEST_TEXT_DATA_UTIL_H

#include <cJSON.h>
#include <stdio.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "io/json.h"
#include "test_util.h"

#define TEXT_DATA "tests/fixtures/text_data"

static inline const char *text_data_write(const char *name, const char *text) {
    static char path[4][1100];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", test_tmp_dir(), name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    return p;
}

/* expected.json's section `name` (the tree is leaked for the test's life: small). */
static inline const cJSON *text_data_expected(const char *name) {
    static cJSON *root;
    if (!root && brg_json_load_file(TEXT_DATA "/expected.json", 1 << 22, &root) != BRG_OK) {
        fprintf(stderr, "cannot read expected.json: %s\n", brg_last_error());
        return NULL;
    }
    return cJSON_GetObjectItemCaseSensitive(root, name);
}

static inline int64_t text_data_int(const cJSON *section, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(section, key);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

/* A [rows][cols] integer list of expected.json against an I32 or F32 column, row by row;
 * `first_row` of the column is row 0 of the list. */
static inline void text_data_check_matrix(const cJSON *section, const char *key, const brg_tensor *col, int64_t first_row) {
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(section, key);
    CHECK_MSG(col != NULL, "no %s column", key);
    if (!col || !cJSON_IsArray(rows)) return;
    const int64_t n = cJSON_GetArraySize(rows), width = col->ndim == 2 ? col->shape[1] : 1;
    CHECK_MSG(col->shape[0] >= first_row + n, "%s: %lld rows, expected %lld", key, (long long)col->shape[0],
              (long long)(first_row + n));
    int64_t r = 0, bad = 0;
    for (const cJSON *row = rows->child; row && r + first_row < col->shape[0]; row = row->next, r++) {
        const bool list = cJSON_IsArray(row);
        if (list) CHECK_MSG(cJSON_GetArraySize(row) == width, "%s row %lld: width %d vs %lld", key, (long long)r,
                            cJSON_GetArraySize(row), (long long)width);
        int64_t c = 0;
        for (const cJSON *v = list ? row->child : row; v && c < width; v = list ? v->next : NULL, c++) {
            const int64_t at = (first_row + r) * width + c;
            double got = col->dtype == BRG_DTYPE_F32 ? ((const float *)col->data)[at] : ((const int32_t *)col->data)[at];
            if (got != v->valuedouble && bad++ < 5)
                fprintf(stderr, "  %s[%lld][%lld] = %g, transformers %g\n", key, (long long)r, (long long)c, got,
                        v->valuedouble);
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld values differ from transformers'", key, (long long)bad);
}

#endif
