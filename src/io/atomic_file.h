/* Writing an output file without ever leaving a mix of old and new, and without clobbering what
 * is not a file of ours (internal to the library).
 *
 * What `path` is decides how it is written:
 *   absent or a regular file   bytes go to "<path>.tmp.<pid>", which commit flushes, fsyncs and
 *                              renames over `path` (then fsyncs the folder): a crash or failure at
 *                              any point leaves either the old file or the new one;
 *   a symlink                  the same, onto the file it points to (the link stays a link);
 *   a character device, FIFO   written in place, as a shell redirection would (/dev/stdout, a
 *   or socket                  pipe); a write error (/dev/full's ENOSPC) is reported, and the node
 *                              is never replaced by a regular file;
 *   a directory or block       refused.
 *   device
 * Temporaries a killed writer left beside `path` ("<path>.tmp.<pid>" of a process that no longer
 * exists) are removed when the next write of `path` starts. Two threads of one process must not
 * write the same path at the same time (they would share the temporary name). */
#ifndef BRIGADE_IO_ATOMIC_FILE_H
#define BRIGADE_IO_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "brigade/status.h"

typedef struct brg_atomic_file {
    FILE *fp;
    char *path;     /* where the bytes end up (a symlink's target) */
    char *tmp_path; /* NULL when writing in place */
} brg_atomic_file;

brg_status brg_atomic_file_open(const char *path, brg_atomic_file *f);
/* On failure the file is aborted (temporary removed) and the message names the path. */
brg_status brg_atomic_file_write(brg_atomic_file *f, const void *data, size_t len);
/* Always releases `f`; on failure the temporary is removed and `path` is untouched. */
brg_status brg_atomic_file_commit(brg_atomic_file *f);
/* Removes the temporary; safe to call on an already released or zeroed `f`. */
void brg_atomic_file_abort(brg_atomic_file *f);

#endif
