/* Status codes and the per-thread last-error message. */
#ifndef BRIGADE_STATUS_H
#define BRIGADE_STATUS_H

#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_status {
    BRG_OK = 0,
    BRG_ERR_INVALID_ARG,  /* a caller passed something malformed (shape, name, value) */
    BRG_ERR_IO,           /* open/read/write/mmap failed */
    BRG_ERR_FORMAT,       /* a file is corrupt or does not follow its format */
    BRG_ERR_OOM,          /* a device arena's budget (or the host) ran out of memory */
    BRG_ERR_UNSUPPORTED,  /* valid input that brigade does not implement */
    BRG_ERR_NOT_FOUND,    /* a file, tensor or key that was asked for is absent */
    BRG_ERR_INTERNAL,
    BRG_ERR_DIVERGED,     /* training met a non-finite loss or gradient norm and stopped */
    BRG_ERR_INTERRUPTED,  /* a caller asked a long run to stop; its work so far was saved */
} brg_status;

/* The message of the most recent failure on this thread ("" if none). */
const char *brg_last_error(void);

/* Stable lower-case name of a status code ("invalid argument", ...). */
const char *brg_status_name(brg_status status);

/* Records a printf-style message for this thread and returns `status`, so that failing paths
 * read `return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));`. */
brg_status brg_error(brg_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to the current message ("loading model.safetensors: <old message>"). */
brg_status brg_error_wrap(brg_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void brg_clear_error(void);

/* Propagates a failing status unchanged. */
#define BRG_TRY(expr)                         \
    do {                                      \
        brg_status brg_try_s_ = (expr);       \
        if (brg_try_s_ != BRG_OK) return brg_try_s_; \
    } while (0)

/* Always-on check for programmer errors (never for bad input). */
#define BRG_ASSERT(cond)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "brigade: internal assertion failed: %s (%s:%d)\n", #cond, \
                    __FILE__, __LINE__);                                              \
            abort();                                                                  \
        }                                                                             \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
