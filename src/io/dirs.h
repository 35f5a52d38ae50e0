/* Folders an output goes into (internal to the library). */
#ifndef BRIGADE_IO_DIRS_H
#define BRIGADE_IO_DIRS_H

#include "brigade/status.h"

/* mkdir -p: creates `dir` and its missing parents. BRG_ERR_IO naming the folder that could not be
 * created; BRG_ERR_INVALID_ARG when `dir` exists and is not a folder. */
brg_status brg_dirs_create(const char *dir);

#endif
