/* Feeds every file of the given folders (a harness's committed corpus) to the harness once, as
 * `make test` does, so inputs the fuzzer once found keep passing (under ASan/UBSan in
 * `make test-asan`). Prints the plain "N passed, N failed" line; an input that crashes the
 * harness crashes this program, and ctest reports it.
 *
 *   replay_fuzz_NAME DIR... */
#include <dirent.h>

#include "fuzz_util.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return 0;
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    brg_clear_error();
    return 1;
}

int main(int argc, char **argv) {
    int inputs = 0, unreadable = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot read the corpus folder %s\n", argv[a]);
            unreadable++;
            continue;
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            inputs += replay_file(path);
        }
        closedir(d);
    }
    printf("%d passed, %d failed\n", inputs, unreadable);
    return unreadable || inputs == 0 ? 1 : 0;
}
