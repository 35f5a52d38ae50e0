/* What a run checks about its output folder before the first step, so it does not train for
 * hours and then fail to save: the folder can be created and written, it holds nothing but what
 * brigade writes there (unless overwrite_output says otherwise), and its file system has room for
 * a checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/str.h"
#include "io/dirs.h"
#include "trainer_internal.h"

/* The writability probe (a killed run may leave one behind). */
#define PROBE ".brigade-write-test."

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Names brigade (or transformers' Trainer) puts in an output folder, and the logs a run is often
 * told to keep there (a resumed run must not be refused for its own log). */
static bool ours(const char *name) {
    static const char *const files[] = {"config.json",        "model.safetensors", "ipu_config.json",
                                        "optimizer.safetensors", "trainer_state.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (strcmp(name, files[i]) == 0) return true;
    return strncmp(name, "checkpoint-", 11) == 0 || strstr(name, ".tmp.") != NULL || ends_with(name, ".jsonl") ||
           ends_with(name, ".log") || strncmp(name, PROBE, strlen(PROBE)) == 0;
}

/* The first entry of `dir` that brigade did not write, or NULL (malloc'd). */
static char *foreign_entry(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    for (struct dirent *e; !found && (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !ours(e->d_name)) found = strdup(e->d_name);
    closedir(d);
    return found;
}

static brg_status check_writable(const char *dir) {
    char *probe = brg_str_printf("%s/" PROBE "%ld", dir, (long)getpid());
    if (!probe) return brg_error(BRG_ERR_OOM, "no memory for %s", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    brg_status st = fd >= 0 ? BRG_OK : brg_error(BRG_ERR_IO, "cannot write in the output folder %s: %s", dir, strerror(errno));
    if (fd >= 0) close(fd), unlink(probe);
    free(probe);
    return st;
}

/* One checkpoint: the model, its optimizer state, and the final model beside it; rounded up. */
static brg_status check_space(const trainer *t, const char *dir) {
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0) return BRG_OK; /* no answer: the writes themselves will say */
    const double params = (double)brg_model_num_parameters(t->model) * sizeof(float);
    const double need = params * (2 + brg_optimizer_state_floats(&t->opts.optimizer)) + (1 << 20);
    const double have = (double)fs.f_bavail * (double)fs.f_frsize;
    if (have >= need) return BRG_OK;
    return brg_error(BRG_ERR_IO,
                     "the output folder %s has %.1f MiB free, and a checkpoint of this model takes about %.1f MiB: "
                     "free some space or choose another --output",
                     dir, have / (1 << 20), need / (1 << 20));
}

brg_status trainer_check_output(trainer *t) {
    const char *dir = t->opts.output_dir;
    if (!dir) return BRG_OK;
    struct stat sb;
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return brg_error(BRG_ERR_INVALID_ARG, "the output %s exists and is not a folder", dir);
    BRG_TRY(brg_dirs_create(dir));
    char *other = t->opts.overwrite_output ? NULL : foreign_entry(dir);
    if (other) {
        brg_status st = brg_error(BRG_ERR_INVALID_ARG,
                                  "the output folder %s already holds '%s', which brigade did not write: choose an "
                                  "empty or new folder, or pass --overwrite-output to write there anyway",
                                  dir, other);
        free(other);
        return st;
    }
    BRG_TRY(check_writable(dir));
    return check_space(t, dir);
}
