/* Shared by the fuzz harnesses (fuzz_*.c): each defines LLVMFuzzerTestOneInput, which libFuzzer
 * drives (`make fuzz`) and replay.c feeds the committed corpus to (`make test`). */
#ifndef BRIGADE_FUZZ_UTIL_H
#define BRIGADE_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The APIs under test read files: the input goes to `name` in a folder of this process's own
 * (in /dev/shm when there is one, so the disk is not worn), whose path is returned. */
static inline const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size) {
    static char dir[256], path[512];
    if (!dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/brigade-fuzz-%ld", base, (long)getpid());
        mkdir(dir, 0700);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort(); /* the harness cannot do its job: say so loudly */
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

/* A NUL-terminated copy of the input (the JSON and text parsers take strings). */
static inline char *fuzz_string(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A file of the source tree (`rel` from its root), wherever the harness runs from: the tree is
 * where this header lives. The path is kept until the next call. */
static inline const char *fuzz_source_path(const char *rel) {
    static char path[1024];
    const char *self = __FILE__, *cut = strstr(self, "fuzz/fuzz_util.h");
    snprintf(path, sizeof path, "%.*s%s", cut ? (int)(cut - self) : 0, self, rel);
    return path;
}

/* A refused input names its problem on one line. */
static inline void fuzz_check_refusal(void) {
    const char *e = brg_last_error();
    if (!e || !*e || strchr(e, '\n')) abort();
}

#endif
