/* Two files of a folder replaced as one unit (file_pair.h). */
#define _XOPEN_SOURCE 700
#include "io/file_pair.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/str.h"

#define HELPER ".brigade-pair.tmp."

/* Where the protocol may be cut short, for the fault tests (BRIGADE_FAULT=NAME):
 *   staged               the new files are whole in the staging folder, nothing else changed
 *   fresh-between        no old pair: the first name renamed into place, the second not yet
 *   old-linked           the old pair hard-linked into its folder
 *   pointer              P points at the old pair's folder
 *   linked-first         the first name is a symlink through P, the second still the old file
 *   linked               both names are symlinks through P (to the old pair)
 *   switched             P points at the new pair
 *   materialized-first   the first name is the new file, the second still a symlink
 *   materialized         both names are the new files, the helpers not yet removed */
static void fault_point(const char *name) {
    const char *want = getenv("BRIGADE_FAULT");
    if (want && strcmp(want, name) == 0) kill(getpid(), SIGKILL);
}

/* ---- file system helpers -------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* rm -rf, without following symlinks; nothing there is fine. */
static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) (void)nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    else (void)unlink(path);
}

static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd); /* some file systems refuse to sync a folder; the files are synced already */
    close(fd);
}

static brg_status sync_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    brg_status st = fd >= 0 && fsync(fd) == 0 ? BRG_OK : brg_error(BRG_ERR_IO, "cannot sync %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return st;
}

/* The helpers of writer `pid` in `dir`: P (the pointer), its two folders, the next pointer. */
typedef struct helpers {
    char *pointer, *old, *staged, *next;
} helpers;

static void helpers_free(helpers *h) {
    free(h->pointer), free(h->old), free(h->staged), free(h->next);
    memset(h, 0, sizeof *h);
}

static brg_status helpers_of(const char *dir, long pid, helpers *h) {
    h->pointer = brg_str_printf("%s/" HELPER "%ld", dir, pid);
    h->old = brg_str_printf("%s/" HELPER "%ld.old", dir, pid);
    h->staged = brg_str_printf("%s/" HELPER "%ld.new", dir, pid);
    h->next = brg_str_printf("%s/" HELPER "%ld.next", dir, pid);
    if (h->pointer && h->old && h->staged && h->next) return BRG_OK;
    helpers_free(h);
    return brg_error(BRG_ERR_OOM, "no memory for paths under %s", dir);
}

/* What a name's symlink through P reads ("<P's name>/<name>"). */
static char *link_text(long pid, const char *name) { return brg_str_printf(HELPER "%ld/%s", pid, name); }

/* True when DIR/name is a symlink through writer `pid`'s pointer. */
static bool linked_through(const char *path, long pid, const char *name) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return false;
    char buf[4096], *want = link_text(pid, name);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    bool yes = want && n >= 0 && ((buf[n] = '\0'), strcmp(buf, want) == 0);
    free(want);
    return yes;
}

/* Replaces `path` by a hard link of `source` (or by a symlink reading `text` when text is set),
 * through a temporary of this process: one rename, so `path` is at every moment the old entry
 * or the new one. `fault` names a test's kill point between the two (BRIGADE_FAULT), or NULL. */
static brg_status replace_with(const char *path, const char *source, const char *text, const char *fault) {
    char *tmp = brg_str_printf("%s.tmp.%ld", path, (long)getpid());
    if (!tmp) return brg_error(BRG_ERR_OOM, "no memory to replace %s", path);
    (void)unlink(tmp);
    int rc = text ? symlink(text, tmp) : link(source, tmp);
    brg_status st = BRG_OK;
    if (rc != 0)
        st = brg_error(errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EXDEV || errno == ENOSYS
                           ? BRG_ERR_UNSUPPORTED
                           : BRG_ERR_IO,
                       "cannot create %s: %s", tmp, strerror(errno));
    else {
        if (fault) fault_point(fault); /* a kill between the link and its rename */
        if (rename(tmp, path) != 0) {
            st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
            (void)unlink(tmp);
        }
    }
    free(tmp);
    return st;
}

/* Removes replace_with's temporary for `path` of writer `pid` (never renamed into place). */
static void unlink_temporary(const char *path, long pid) {
    char *tmp = brg_str_printf("%s.tmp.%ld", path, pid);
    if (tmp) (void)unlink(tmp);
    free(tmp);
}

/* ---- finishing a writer's switch ------------------------------------------------------------ */

/* Whatever P points at becomes the pair of files again: each name that is a symlink through P is
 * replaced by a hard link of the file it reads (or removed, when the pair P points at lacks
 * it), then the helpers go (the staged folder too, unless keep_staged). Both names are done
 * before P goes, so they never dangle. */
static brg_status finish(const char *dir, long pid, const char *const names[2], bool keep_staged) {
    helpers h;
    BRG_TRY(helpers_of(dir, pid, &h));
    brg_status st = BRG_OK;
    bool linked = false;
    for (int i = 0; st == BRG_OK && i < 2; i++) {
        char *path = brg_str_printf("%s/%s", dir, names[i]), *through = brg_str_printf("%s/%s", h.pointer, names[i]);
        if (!path || !through) st = brg_error(BRG_ERR_OOM, "no memory for paths under %s", dir);
        else if (linked_through(path, pid, names[i])) {
            struct stat sb;
            linked = true;
            if (stat(through, &sb) == 0) st = replace_with(path, through, NULL, NULL);
            else if (unlink(path) != 0) st = brg_error(BRG_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
            if (st == BRG_OK && i == 0) fault_point("materialized-first");
        }
        free(path);
        free(through);
    }
    if (st == BRG_OK) {
        sync_dir(dir);
        if (linked) fault_point("materialized");
        (void)unlink(h.pointer);
        (void)unlink(h.next);
        unlink_temporary(h.pointer, pid); /* a kill inside replace_with leaves its link behind */
        unlink_temporary(h.next, pid);
        remove_tree(h.old);
        if (!keep_staged) remove_tree(h.staged);
        sync_dir(dir);
    }
    helpers_free(&h);
    return st;
}

/* The writer a helper's name belongs to ("<HELPER><pid>[.suffix]"), or -1. */
static long helper_pid(const char *name) {
    if (strncmp(name, HELPER, strlen(HELPER)) != 0) return -1;
    const char *digits = name + strlen(HELPER);
    char *end;
    long pid = strtol(digits, &end, 10);
    if (end == digits || (*end && *end != '.') || pid <= 0) return -1;
    return pid;
}

/* The writer of "<first or second>.tmp.<pid>", or -1. */
static long name_temporary_pid(const char *entry, const char *const names[2]) {
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(entry, names[i], n) != 0 || strncmp(entry + n, ".tmp.", 5) != 0) continue;
        char *end;
        long pid = strtol(entry + n + 5, &end, 10);
        return end != entry + n + 5 && !*end && pid > 0 ? pid : -1;
    }
    return -1;
}

static bool gone(long pid) { return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

brg_status brg_file_pair_recover(const char *dir, const char *first, const char *second) {
    const char *const names[2] = {first, second};
    DIR *d = opendir(dir);
    if (!d) return BRG_OK; /* nothing there yet */
    long pids[16];
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long tmp_pid = name_temporary_pid(e->d_name, names);
        if (tmp_pid > 0 && gone(tmp_pid)) { /* a link of a killed writer's, never renamed into place */
            char *victim = brg_str_printf("%s/%s", dir, e->d_name);
            if (victim) (void)unlink(victim);
            free(victim);
            continue;
        }
        long pid = helper_pid(e->d_name);
        bool seen = false;
        for (int i = 0; i < n; i++) seen |= pids[i] == pid;
        if (pid > 0 && !seen && n < 16 && gone(pid)) pids[n++] = pid;
    }
    closedir(d);
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && i < n; i++) st = finish(dir, pids[i], names, false);
    return st;
}

/* ---- the writer ---------------------------------------------------------------------------- */

void brg_file_pair_abort(brg_file_pair *p) {
    if (p->staging) remove_tree(p->staging);
    free(p->staging);
    free(p->dir);
    memset(p, 0, sizeof *p);
}

brg_status brg_file_pair_begin(const char *dir, const char *first, const char *second, brg_file_pair *p) {
    memset(p, 0, sizeof *p);
    BRG_TRY(brg_file_pair_recover(dir, first, second));
    helpers h;
    BRG_TRY(helpers_of(dir, (long)getpid(), &h));
    /* leftovers of this pid (a reused one) */
    const char *const names[2] = {first, second};
    brg_status st = finish(dir, (long)getpid(), names, false);
    p->dir = strdup(dir);
    p->staging = h.staged;
    h.staged = NULL;
    p->names[0] = first;
    p->names[1] = second;
    if (st == BRG_OK && !p->dir) st = brg_error(BRG_ERR_OOM, "no memory for the folder name %s", dir);
    if (st == BRG_OK && mkdir(p->staging, 0777) != 0)
        st = brg_error(BRG_ERR_IO, "cannot create the folder %s: %s", p->staging, strerror(errno));
    helpers_free(&h);
    if (st != BRG_OK) {
        free(p->staging), free(p->dir);
        memset(p, 0, sizeof *p);
    }
    return st;
}

/* No old pair, or a file system without links: each staged file renamed into place, the first
 * first (a kill between leaves the first alone, never a mixed pair when there was no old one). */
static brg_status rename_each(const brg_file_pair *p, char *const staged[2], char *const final[2]) {
    char *dest[2];
    for (int i = 0; i < 2; i++) { /* a name that is a symlink stays one: the file it names is replaced */
        struct stat sb;
        dest[i] = lstat(final[i], &sb) == 0 && S_ISLNK(sb.st_mode) ? realpath(final[i], NULL) : NULL;
        if (!dest[i]) dest[i] = strdup(final[i]);
    }
    brg_status st = dest[0] && dest[1] ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for paths under %s", p->dir);
    struct stat sb;
    const bool had_first = st == BRG_OK && lstat(dest[0], &sb) == 0;
    if (st == BRG_OK && rename(staged[0], dest[0]) != 0)
        st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", staged[0], dest[0], strerror(errno));
    if (st == BRG_OK) {
        fault_point("fresh-between");
        if (rename(staged[1], dest[1]) != 0) {
            st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", staged[1], dest[1], strerror(errno));
            if (!had_first) (void)rename(dest[0], staged[0]); /* back: the folder keeps what it had */
        }
    }
    if (st == BRG_OK) sync_dir(p->dir);
    free(dest[0]), free(dest[1]);
    return st;
}

/* The old pair's bytes under both names, read through P: hard links of the old files in their
 * own folder, P pointing there, then each name replaced by a symlink through P. */
static brg_status link_old(const brg_file_pair *p, const helpers *h, char *const final[2]) {
    const long pid = (long)getpid();
    if (mkdir(h->old, 0777) != 0)
        return brg_error(BRG_ERR_IO, "cannot create the folder %s: %s", h->old, strerror(errno));
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && i < 2; i++) {
        struct stat sb;
        if (lstat(final[i], &sb) != 0) continue; /* the old pair lacks it: it stays absent through P */
        if (!S_ISREG(sb.st_mode))
            return brg_error(BRG_ERR_UNSUPPORTED, "%s is not a plain file", final[i]);
        char *keep = brg_str_printf("%s/%s", h->old, p->names[i]);
        st = keep ? replace_with(keep, final[i], NULL, NULL) : brg_error(BRG_ERR_OOM, "no memory for a path");
        free(keep);
    }
    if (st != BRG_OK) return st;
    sync_dir(h->old);
    fault_point("old-linked");
    char *target = brg_str_printf(HELPER "%ld.old", pid);
    if (!target) return brg_error(BRG_ERR_OOM, "no memory for a path");
    st = replace_with(h->pointer, NULL, target, "pointer-linked");
    free(target);
    if (st != BRG_OK) return st;
    sync_dir(p->dir);
    fault_point("pointer");
    for (int i = 0; st == BRG_OK && i < 2; i++) {
        char *text = link_text(pid, p->names[i]);
        st = text ? replace_with(final[i], NULL, text, NULL) : brg_error(BRG_ERR_OOM, "no memory for a path");
        free(text);
        if (st == BRG_OK && i == 0) fault_point("linked-first");
    }
    if (st == BRG_OK) {
        sync_dir(p->dir);
        fault_point("linked");
    }
    return st;
}

/* Switches both names to the staged pair with one rename of P, then makes them files again. */
static brg_status switch_pair(const brg_file_pair *p, char *const final[2]) {
    const long pid = (long)getpid();
    const char *const names[2] = {p->names[0], p->names[1]};
    helpers h;
    BRG_TRY(helpers_of(p->dir, pid, &h));
    brg_status st = link_old(p, &h, final);
    char *target = st == BRG_OK ? brg_str_printf(HELPER "%ld.new", pid) : NULL;
    if (st == BRG_OK && !target) st = brg_error(BRG_ERR_OOM, "no memory for a path");
    if (st == BRG_OK) {
        (void)unlink(h.next);
        if (symlink(target, h.next) != 0) st = brg_error(BRG_ERR_IO, "cannot create %s: %s", h.next, strerror(errno));
        else if (rename(h.next, h.pointer) != 0)
            st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", h.next, h.pointer, strerror(errno));
    }
    free(target);
    if (st == BRG_OK) {
        sync_dir(p->dir);
        fault_point("switched");
    }
    /* Done or not, the names become files of the pair P points at (the old one on failure), and
     * the helpers go; the staging folder too, unless the file system lacks links (the caller
     * renames its files instead). */
    brg_status done = finish(p->dir, pid, names, st == BRG_ERR_UNSUPPORTED);
    helpers_free(&h);
    return st != BRG_OK ? st : done;
}

brg_status brg_file_pair_commit(brg_file_pair *p) {
    char *staged[2] = {NULL, NULL}, *final[2] = {NULL, NULL};
    brg_status st = BRG_OK;
    for (int i = 0; i < 2; i++) {
        staged[i] = brg_str_printf("%s/%s", p->staging, p->names[i]);
        final[i] = brg_str_printf("%s/%s", p->dir, p->names[i]);
        if (!staged[i] || !final[i]) st = brg_error(BRG_ERR_OOM, "no memory for paths under %s", p->dir);
    }
    for (int i = 0; st == BRG_OK && i < 2; i++) st = sync_file(staged[i]);
    if (st == BRG_OK) {
        sync_dir(p->staging);
        fault_point("staged");
    }
    struct stat sb;
    const bool old_pair = st == BRG_OK && (lstat(final[0], &sb) == 0 || lstat(final[1], &sb) == 0);
    if (st == BRG_OK && !old_pair) st = rename_each(p, staged, final);
    else if (st == BRG_OK) {
        st = switch_pair(p, final);
        if (st == BRG_ERR_UNSUPPORTED) { /* no hard links or symlinks here: the two renames alone */
            brg_clear_error();
            st = rename_each(p, staged, final);
        }
    }
    for (int i = 0; i < 2; i++) free(staged[i]), free(final[i]);
    brg_file_pair_abort(p);
    return st;
}
