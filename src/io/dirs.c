/* mkdir -p for the writers (dirs.h). */
#include "io/dirs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
