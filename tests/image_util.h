/* Shared by the image tests: the committed fixture set tests/fixtures/images (cases.json and
 * expected.safetensors from tools/image_fixtures.py) and file helpers. */
#ifndef BRIGADE_TEST_IMAGE_UTIL_H
#define BRIGADE_TEST_IMAGE_UTIL_H

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/brigade.h"
#include "test_util.h"

#define IMAGE_FIXTURES "tests/fixtures/images"

/* A whole file, malloc'd (NULL, with a failed check, when it cannot be read). */
static inline uint8_t *image_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)(n > 0 ? n : 1));
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    CHECK_MSG(buf && got == (size_t)n, "cannot read %s", path);
    if (!buf || got != (size_t)n) {
        free(buf);
        return NULL;
    }
    *size = (size_t)n;
    return buf;
}

/* cases.json, parsed (NULL, with a failed check, when missing). */
static inline cJSON *image_cases(void) {
    size_t n = 0;
    uint8_t *text = image_read_file(IMAGE_FIXTURES "/cases.json", &n);
    cJSON *root = text ? cJSON_ParseWithLength((const char *)text, n) : NULL;
    free(text);
    CHECK_MSG(root != NULL, "cannot parse %s/cases.json", IMAGE_FIXTURES);
    return root;
}

static inline bool image_is_jpeg(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".jpg") == 0;
}

/* A single line that starts with `prefix`: what every decode error must be. */
static inline bool image_one_line_error(const char *msg, const char *prefix) {
    return msg && *msg && !strchr(msg, '\n') && strncmp(msg, prefix, strlen(prefix)) == 0;
}

#endif
