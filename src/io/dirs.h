/* Folders an output goes into (internal to the library). */
#ifndef BRIGADE_IO_DIRS_H
#define BRIGADE_IO_DIRS_H

#include "brigade/status.h"

/* mkdir -p: creates `dir` and its missing parents. BRG_ERR_IO naming the folder that could not be
 * created; BRG_ERR_INVALID_ARG when `dir` exists and is not a folder. */
brg_status brg_dirs_create(const char *dir);

/* Swaps two existing paths (folders or files) in one atomic step: renameat2's RENAME_EXCHANGE.
 * BRG_ERR_UNSUPPORTED where the kernel or the file system lacks it (the caller falls back to
 * renames); BRG_ERR_IO naming both paths otherwise. */
brg_status brg_dirs_exchange(const char *a, const char *b);

#endif
