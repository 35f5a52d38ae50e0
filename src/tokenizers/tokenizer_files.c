/* Copying a tokenizer's files from one model folder to another (a trained model keeps the
 * tokenizer it was trained with, as transformers' Trainer saves it beside the weights). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/tokenizer.h"
#include "io/atomic_file.h"

/* The files transformers' tokenizers read from a model folder. */
static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                    "vocab.txt",      "vocab.json",            "merges.txt",
                                    "spiece.model",   "added_tokens.json"};

static brg_status copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return brg_error(BRG_ERR_IO, "cannot read %s: %s", from, strerror(errno));
    brg_atomic_file f;
    brg_status st = brg_atomic_file_open(to, &f);
    char buf[1 << 16];
    for (size_t n; st == BRG_OK && (n = fread(buf, 1, sizeof buf, in)) > 0;) st = brg_atomic_file_write(&f, buf, n);
    if (st == BRG_OK && ferror(in)) {
        st = brg_error(BRG_ERR_IO, "cannot read %s", from);
        brg_atomic_file_abort(&f);
    }
    if (st == BRG_OK) st = brg_atomic_file_commit(&f);
    fclose(in);
    return st;
}

brg_status brg_tokenizer_copy_files(const char *from_dir, const char *to_dir, int *copied) {
    *copied = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[4096], to[4096];
        struct stat sb;
        if ((size_t)snprintf(from, sizeof from, "%s/%s", from_dir, files[i]) >= sizeof from ||
            (size_t)snprintf(to, sizeof to, "%s/%s", to_dir, files[i]) >= sizeof to)
            return brg_error(BRG_ERR_INVALID_ARG, "path too long: %s", from_dir);
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        BRG_TRY(copy_file(from, to));
        (*copied)++;
    }
    return BRG_OK;
}
