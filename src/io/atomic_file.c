/* Output files written whole or not at all, and never over what is not a file (atomic_file.h). */
#include "io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/str.h"

void brg_atomic_file_abort(brg_atomic_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) unlink(f->tmp_path);
    free(f->tmp_path);
    free(f->path);
    f->fp = NULL;
    f->tmp_path = NULL;
    f->path = NULL;
}

/* ---- what the path is ---------------------------------------------------------------------- */

typedef enum target_kind { TARGET_FILE, TARGET_STREAM, TARGET_REFUSED } target_kind;

/* A symlink is followed to what it names; a dangling one is written as a new file there. */
static brg_status resolve(const char *path, char **out) {
    struct stat ls;
    if (lstat(path, &ls) != 0 || !S_ISLNK(ls.st_mode)) {
        *out = strdup(path);
        return *out ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory to write %s", path);
    }
    char *real = realpath(path, NULL);
    if (real) {
        *out = real;
        return BRG_OK;
    }
    /* Dangling: the link names a file that does not exist yet. */
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) return brg_error(BRG_ERR_IO, "cannot read the link %s: %s", path, strerror(errno));
    target[n] = '\0';
    const char *slash = strrchr(path, '/');
    *out = target[0] == '/' || !slash ? strdup(target)
                                      : brg_str_printf("%.*s/%s", (int)(slash - path), path, target);
    return *out ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory to write %s", path);
}

static brg_status classify(const char *path, const char *shown, target_kind *kind) {
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT) {
            *kind = TARGET_FILE;
            return BRG_OK;
        }
        return brg_error(BRG_ERR_IO, "cannot write %s: %s", shown, strerror(errno));
    }
    if (S_ISREG(st.st_mode)) *kind = TARGET_FILE;
    else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) *kind = TARGET_STREAM;
    else *kind = TARGET_REFUSED;
    if (*kind == TARGET_REFUSED)
        return brg_error(BRG_ERR_IO, "cannot write %s: it is %s, not a file", shown,
                         S_ISDIR(st.st_mode) ? "a directory" : "a block device");
    return BRG_OK;
}

/* ---- leftovers of killed writers ----------------------------------------------------------- */

/* True when `name` is "<base>.tmp.<pid>" of a process that no longer exists (this process's own
 * pid is never stale: it is about to be reused). */
static bool stale_temporary(const char *name, const char *base) {
    const size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0) return false;
    const char *digits = name + n + 5;
    char *end;
    long pid = strtol(digits, &end, 10);
    if (end == digits || *end || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void remove_stale_temporaries(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    const char *base = slash ? slash + 1 : path;
    DIR *d = dir ? opendir(dir) : NULL;
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!stale_temporary(e->d_name, base)) continue;
            char *victim = brg_str_printf("%s/%s", dir, e->d_name);
            if (victim) unlink(victim);
            free(victim);
        }
        closedir(d);
    }
    free(dir);
}

/* ---- open / write / commit ----------------------------------------------------------------- */

static brg_status open_stream(const char *shown, brg_atomic_file *f) {
    /* No O_CREAT: the node exists; O_TRUNC means nothing to a device or a pipe. */
    int fd = open(f->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        brg_status s = brg_error(BRG_ERR_IO, "cannot write %s: %s", shown, strerror(errno));
        brg_atomic_file_abort(f);
        return s;
    }
    f->fp = fdopen(fd, "wb");
    if (f->fp) return BRG_OK;
    brg_status s = brg_error(BRG_ERR_IO, "cannot write %s: %s", shown, strerror(errno));
    close(fd);
    brg_atomic_file_abort(f);
    return s;
}

static brg_status open_temporary(brg_atomic_file *f) {
    f->tmp_path = brg_str_printf("%s.tmp.%ld", f->path, (long)getpid());
    if (!f->tmp_path) {
        brg_atomic_file_abort(f);
        return brg_error(BRG_ERR_OOM, "no memory to write %s", f->path);
    }
    remove_stale_temporaries(f->path);
    /* A leftover of this pid (or anything planted there, a symlink included) is removed, and
     * O_EXCL makes sure the file written is a new one. */
    unlink(f->tmp_path);
    int fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        brg_status s = brg_error(BRG_ERR_IO, "cannot create %s: %s", f->tmp_path, strerror(errno));
        free(f->tmp_path); /* not created: nothing to unlink */
        f->tmp_path = NULL;
        brg_atomic_file_abort(f);
        return s;
    }
    f->fp = fdopen(fd, "wb");
    if (f->fp) return BRG_OK;
    brg_status s = brg_error(BRG_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    close(fd);
    brg_atomic_file_abort(f);
    return s;
}

brg_status brg_atomic_file_open(const char *path, brg_atomic_file *f) {
    memset(f, 0, sizeof *f);
    if (!path || !*path) return brg_error(BRG_ERR_INVALID_ARG, "cannot write a file with an empty path");
    BRG_TRY(resolve(path, &f->path));
    target_kind kind;
    brg_status s = classify(f->path, path, &kind);
    if (s != BRG_OK) {
        brg_atomic_file_abort(f);
        return s;
    }
    return kind == TARGET_STREAM ? open_stream(path, f) : open_temporary(f);
}

/* The name a message gives: the temporary while there is one. */
static const char *written(const brg_atomic_file *f) { return f->tmp_path ? f->tmp_path : f->path; }

brg_status brg_atomic_file_write(brg_atomic_file *f, const void *data, size_t len) {
    if (len == 0) return BRG_OK;
    if (fwrite(data, 1, len, f->fp) != len) {
        brg_status s = brg_error(BRG_ERR_IO, "cannot write %s: %s", written(f), strerror(errno));
        brg_atomic_file_abort(f);
        return s;
    }
    return BRG_OK;
}

/* The rename is only durable once the folder itself is synced; some filesystems refuse to sync
 * a folder, and the data is already safe in the file by then, so failures here are ignored. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* A device or a pipe: what matters is that every byte was accepted (fsync means nothing there). */
static brg_status commit_stream(brg_atomic_file *f) {
    brg_status s = BRG_OK;
    if (fflush(f->fp) != 0) s = brg_error(BRG_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    int rc = fclose(f->fp);
    f->fp = NULL;
    if (s == BRG_OK && rc != 0) s = brg_error(BRG_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    brg_atomic_file_abort(f);
    return s;
}

brg_status brg_atomic_file_commit(brg_atomic_file *f) {
    if (!f->tmp_path) return commit_stream(f);
    brg_status s = BRG_OK;
    if (fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0)
        s = brg_error(BRG_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    int rc = fclose(f->fp);
    f->fp = NULL;
    if (s == BRG_OK && rc != 0) s = brg_error(BRG_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    if (s == BRG_OK && rename(f->tmp_path, f->path) != 0)
        s = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path, strerror(errno));
    if (s != BRG_OK) {
        brg_atomic_file_abort(f);
        return s;
    }
    sync_parent_dir(f->path);
    free(f->tmp_path); /* renamed away: nothing left to unlink */
    f->tmp_path = NULL;
    brg_atomic_file_abort(f);
    return BRG_OK;
}
