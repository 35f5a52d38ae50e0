/* mkdir -p for the writers (dirs.h). */
#include "io/dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1) /* linux/fs.h */
#endif

brg_status brg_dirs_create(const char *dir) {
    char *p = strdup(dir);
    if (!p) return brg_error(BRG_ERR_OOM, "no memory for the folder name %s", dir);
    brg_status st = BRG_OK;
    for (char *s = p + 1;; s++) {
        const bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            st = brg_error(BRG_ERR_IO, "cannot create the folder %s: %s", p, strerror(errno));
            break;
        }
        if (end) break;
        *s = '/';
    }
    free(p);
    struct stat sb;
    if (st == BRG_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = brg_error(BRG_ERR_INVALID_ARG, "%s exists and is not a folder", dir);
    return st;
}

brg_status brg_dirs_exchange(const char *a, const char *b) {
#ifdef SYS_renameat2
    if (syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0) return BRG_OK;
    if (errno == ENOSYS || errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP)
        return brg_error(BRG_ERR_UNSUPPORTED, "cannot swap %s and %s here: %s", a, b, strerror(errno));
    return brg_error(BRG_ERR_IO, "cannot swap %s and %s: %s", a, b, strerror(errno));
#else
    return brg_error(BRG_ERR_UNSUPPORTED, "cannot swap %s and %s on this system", a, b);
#endif
}
