/* Per-thread error messages: each device runs on its own thread, so errors must not race. */
#include "brigade/status.h"

#include <stdarg.h>
#include <string.h>

#define ERROR_CAPACITY 1024

static _Thread_local char last_error[ERROR_CAPACITY];

const char *brg_last_error(void) { return last_error; }

void brg_clear_error(void) { last_error[0] = '\0'; }

const char *brg_status_name(brg_status status) {
    switch (status) {
    case BRG_OK: return "ok";
    case BRG_ERR_INVALID_ARG: return "invalid argument";
    case BRG_ERR_IO: return "i/o error";
    case BRG_ERR_FORMAT: return "bad file format";
    case BRG_ERR_OOM: return "out of memory";
    case BRG_ERR_UNSUPPORTED: return "unsupported";
    case BRG_ERR_NOT_FOUND: return "not found";
    case BRG_ERR_INTERNAL: return "internal error";
    case BRG_ERR_DIVERGED: return "training diverged";
    case BRG_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

brg_status brg_error(brg_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

brg_status brg_error_wrap(brg_status status, const char *fmt, ...) {
    char old[ERROR_CAPACITY];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 2 >= sizeof last_error || old[0] == '\0') return status;
    /* Append ": <old>" truncating the old message to the room left. */
    size_t at = (size_t)n, room = sizeof last_error - at - 3, len = strlen(old);
    if (len > room) len = room;
    last_error[at] = ':';
    last_error[at + 1] = ' ';
    memcpy(last_error + at + 2, old, len);
    last_error[at + 2 + len] = '\0';
    return status;
}
