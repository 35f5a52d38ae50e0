/* --trace FILE.json, shared by the commands that run models (train, forward, generate, embed,
 * pipeline): the file is checked before the run, recorded through it and written when the command ends,
 * whether it succeeded, failed or was interrupted. */
#ifndef BRIGADE_CLI_TRACE_FLAG_H
#define BRIGADE_CLI_TRACE_FLAG_H

#include <stdbool.h>

#include "brigade/status.h"

/* Starts recording for `command` when path is not NULL; false, after one line on stderr
 * ("brigade train: --trace DIR/t.json: ..."), when the file cannot be written. */
bool cli_trace_begin(const char *command, const char *path);
/* Writes the trace (if one was started). After a successful command a failure to write it is
 * returned (the caller prints it as its error); after a failed one it is printed here and the
 * command's own status and message are kept. */
brg_status cli_trace_end(const char *command, brg_status st);

#endif
