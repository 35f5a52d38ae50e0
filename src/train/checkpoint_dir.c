/* Checkpoint folders: written under a temporary name, fsynced, renamed whole (checkpoint_dir.h). */
#define _XOPEN_SOURCE 700
#include "train/checkpoint_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "brigade/safetensors.h"
#include "core/str.h"
#include "io/dirs.h"
#include "io/json.h"

#define PREFIX "checkpoint-"
#define STATE_FILE "trainer_state.json"

/* ---- names ---------------------------------------------------------------------------------- */

/* N for a name "checkpoint-N" (digits only), else -1. */
static int64_t step_of_name(const char *name) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return -1;
    const char *d = name + strlen(PREFIX);
    if (!*d) return -1;
    int64_t n = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || n > (INT64_MAX - 9) / 10) return -1;
        n = n * 10 + (*d - '0');
    }
    return n;
}

int64_t brg_ckpt_dir_step_of(const char *path) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    char *trimmed = strndup(path, len);
    if (!trimmed) return -1;
    const char *slash = strrchr(trimmed, '/');
    int64_t n = step_of_name(slash ? slash + 1 : trimmed);
    free(trimmed);
    return n;
}

/* True for "checkpoint-N.tmp.PID" (or a replaced folder moved aside as "...tmp.PID.old.PID") of
 * a process that no longer exists. */
static bool stale_temporary(const char *name) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return false;
    const char *tmp = strstr(name, ".tmp.");
    if (!tmp) return false;
    char *end;
    long pid = strtol(tmp + 5, &end, 10);
    if (end == tmp + 5 || (*end && strncmp(end, ".old.", 5) != 0) || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* ---- file system helpers -------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* rm -rf, without following symlinks. */
static int remove_tree(const char *path) { return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void fsync_path(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd); /* some filesystems refuse to sync a folder; the files are synced already */
    close(fd);
}

static void remove_stale_temporaries(const char *out) {
    DIR *d = opendir(out);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!stale_temporary(e->d_name)) continue;
        char *victim = brg_str_printf("%s/%s", out, e->d_name);
        if (victim) remove_tree(victim);
        free(victim);
    }
    closedir(d);
}

/* ---- writing -------------------------------------------------------------------------------- */

brg_status brg_ckpt_dir_begin(const char *out, int64_t step, char **tmp) {
    *tmp = NULL;
    BRG_TRY(brg_dirs_create(out));
    remove_stale_temporaries(out);
    char *path = brg_str_printf("%s/" PREFIX "%lld.tmp.%ld", out, (long long)step, (long)getpid());
    if (!path) return brg_error(BRG_ERR_OOM, "no memory for a checkpoint path under %s", out);
    remove_tree(path); /* a leftover of this pid */
    if (mkdir(path, 0777) != 0) {
        brg_status st = brg_error(BRG_ERR_IO, "cannot create the folder %s: %s", path, strerror(errno));
        free(path);
        return st;
    }
    *tmp = path;
    return BRG_OK;
}

void brg_ckpt_dir_abort(char *tmp) {
    if (!tmp) return;
    remove_tree(tmp);
    free(tmp);
}

/* fsync every file of the folder, then the folder: the rename below must not publish a folder
 * whose files are still only in the page cache. */
static brg_status sync_folder(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return brg_error(BRG_ERR_IO, "cannot read the folder %s: %s", dir, strerror(errno));
    brg_status st = BRG_OK;
    for (struct dirent *e; st == BRG_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *f = brg_str_printf("%s/%s", dir, e->d_name);
        if (!f) st = brg_error(BRG_ERR_OOM, "no memory for a path under %s", dir);
        int fd = f ? open(f, O_RDONLY | O_CLOEXEC) : -1;
        if (f && (fd < 0 || fsync(fd) != 0))
            st = brg_error(BRG_ERR_IO, "cannot sync %s: %s", f, strerror(errno));
        if (fd >= 0) close(fd);
        free(f);
    }
    closedir(d);
    if (st == BRG_OK) fsync_path(dir, O_RDONLY | O_DIRECTORY);
    return st;
}

brg_status brg_ckpt_dir_commit(const char *out, int64_t step, char *tmp) {
    char *final = brg_str_printf("%s/" PREFIX "%lld", out, (long long)step);
    char *old = brg_str_printf("%s.old.%ld", tmp, (long)getpid());
    brg_status st = final && old ? sync_folder(tmp) : brg_error(BRG_ERR_OOM, "no memory for a checkpoint path");
    /* An existing folder of the same step (a resumed run saving that step again) is swapped with
     * the new one in one step where the system can (the old one is then at `tmp`, removed
     * below); else it moves aside first, as rename cannot replace a folder that holds files. */
    bool moved = false, swapped = false;
    if (st == BRG_OK && access(final, F_OK) == 0) {
        brg_status x = brg_dirs_exchange(tmp, final);
        if (x == BRG_OK) swapped = true;
        else if (x != BRG_ERR_UNSUPPORTED) st = x;
        else brg_clear_error();
    }
    if (st == BRG_OK && !swapped && access(final, F_OK) == 0) {
        if (rename(final, old) != 0)
            st = brg_error(BRG_ERR_IO, "cannot replace %s: %s", final, strerror(errno));
        else
            moved = true;
    }
    if (st == BRG_OK && !swapped && rename(tmp, final) != 0) {
        st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
        if (moved) (void)rename(old, final);
        moved = false;
    }
    if (st == BRG_OK) fsync_path(out, O_RDONLY | O_DIRECTORY);
    if (moved) remove_tree(old);
    if (st != BRG_OK || swapped) remove_tree(tmp); /* the failed new set, or the swapped-out old one */
    free(tmp);
    free(final);
    free(old);
    return st;
}

/* ---- finding and pruning ---------------------------------------------------------------------- */

/* The steps of the complete checkpoints under `out`, ascending; *n of them (malloc'd list). */
static brg_status list_steps(const char *out, int64_t **steps, int *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(out);
    if (!d) return brg_error(BRG_ERR_IO, "cannot read the folder %s: %s", out, strerror(errno));
    int cap = 0;
    brg_status st = BRG_OK;
    for (struct dirent *e; st == BRG_OK && (e = readdir(d));) {
        int64_t s = step_of_name(e->d_name);
        if (s < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, (size_t)cap * sizeof **steps);
            if (!grown) {
                st = brg_error(BRG_ERR_OOM, "no memory to list the checkpoints in %s", out);
                break;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort: a run keeps a handful */
        for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    if (st != BRG_OK) free(*steps), *steps = NULL, *n = 0;
    return st;
}

brg_status brg_ckpt_dir_prune(const char *out, int keep) {
    if (keep <= 0) return BRG_OK;
    int64_t *steps;
    int n;
    BRG_TRY(list_steps(out, &steps, &n));
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && i + keep < n; i++) {
        char *victim = brg_str_printf("%s/" PREFIX "%lld", out, (long long)steps[i]);
        if (!victim || remove_tree(victim) != 0)
            st = brg_error(BRG_ERR_IO, "cannot remove the old checkpoint %s: %s", victim ? victim : out,
                           strerror(errno));
        free(victim);
    }
    free(steps);
    return st;
}

static bool has_state(const char *dir) {
    char *f = brg_str_printf("%s/" STATE_FILE, dir);
    bool yes = f && access(f, F_OK) == 0;
    free(f);
    return yes;
}

brg_status brg_ckpt_dir_find(const char *dir, char *path, size_t path_len) {
    int64_t *steps = NULL;
    int n = 0;
    /* A folder that is itself a checkpoint (or an output folder of the older layout, with its
     * checkpoint files at the top) has none under it; checkpoint-N folders win when there are. */
    brg_status st = list_steps(dir, &steps, &n);
    if (st != BRG_OK || n == 0) {
        free(steps);
        if (has_state(dir)) {
            brg_clear_error();
            if ((size_t)snprintf(path, path_len, "%s", dir) >= path_len)
                return brg_error(BRG_ERR_INVALID_ARG, "path too long: %s", dir);
            return BRG_OK;
        }
        if (st != BRG_OK) return st;
        return brg_error(BRG_ERR_NOT_FOUND, "%s holds no complete checkpoint (a checkpoint-N folder, or %s)", dir,
                         STATE_FILE);
    }
    const int64_t newest = steps[n - 1];
    free(steps);
    if ((size_t)snprintf(path, path_len, "%s/" PREFIX "%lld", dir, (long long)newest) >= path_len)
        return brg_error(BRG_ERR_INVALID_ARG, "path too long: %s", dir);
    return BRG_OK;
}

/* ---- agreement ------------------------------------------------------------------------------ */

/* The trainer state's global step, and the steps automatic loss scaling skipped (which the
 * optimizer did not count). */
static brg_status state_step(const char *ckpt, int64_t *step, int64_t *skipped) {
    char *f = brg_str_printf("%s/" STATE_FILE, ckpt);
    if (!f) return brg_error(BRG_ERR_OOM, "no memory for a path under %s", ckpt);
    cJSON *j = NULL;
    brg_status st = brg_json_load_file(f, 1 << 20, &j);
    if (st == BRG_OK) st = brg_json_get_int(j, STATE_FILE, "global_step", true, 0, step);
    if (st == BRG_OK) st = brg_json_get_int(j, STATE_FILE, "skipped_steps", false, 0, skipped);
    cJSON_Delete(j);
    free(f);
    return st;
}

static brg_status optimizer_step(const char *ckpt, int64_t *step) {
    char *f = brg_str_printf("%s/optimizer.safetensors", ckpt);
    if (!f) return brg_error(BRG_ERR_OOM, "no memory for a path under %s", ckpt);
    brg_safetensors *st_file = NULL;
    brg_status st = brg_safetensors_open(f, &st_file);
    const char *s = st == BRG_OK ? brg_safetensors_metadata(st_file, "step") : NULL;
    if (st == BRG_OK && !s) st = brg_error(BRG_ERR_FORMAT, "%s has no step in its metadata", f);
    if (st == BRG_OK) *step = strtoll(s, NULL, 10);
    brg_safetensors_close(st_file);
    free(f);
    return st;
}

brg_status brg_ckpt_dir_check(const char *ckpt) {
    char *model = brg_str_printf("%s/model.safetensors", ckpt);
    const bool has_model = model && access(model, F_OK) == 0;
    free(model);
    if (!has_model) return brg_error(BRG_ERR_FORMAT, "the checkpoint %s has no model.safetensors", ckpt);
    int64_t state = 0, skipped = 0, opt = 0;
    BRG_TRY(state_step(ckpt, &state, &skipped));
    BRG_TRY(optimizer_step(ckpt, &opt));
    const int64_t named = brg_ckpt_dir_step_of(ckpt);
    if (opt + skipped != state && skipped > 0)
        return brg_error(BRG_ERR_FORMAT,
                         "the checkpoint %s is a mixed set: its optimizer state is at step %lld and its trainer "
                         "state at step %lld with %lld skipped",
                         ckpt, (long long)opt, (long long)state, (long long)skipped);
    if (opt != state && skipped == 0)
        return brg_error(BRG_ERR_FORMAT,
                         "the checkpoint %s is a mixed set: its optimizer state is at step %lld and its trainer "
                         "state at step %lld",
                         ckpt, (long long)opt, (long long)state);
    if (named >= 0 && named != state)
        return brg_error(BRG_ERR_FORMAT, "the checkpoint %s holds the state of step %lld, not %lld", ckpt,
                         (long long)state, (long long)named);
    return BRG_OK;
}
