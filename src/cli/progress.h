/* Progress of a long command: on a terminal one bar rewritten in place,
 *   [=========>              ] 42/100 steps  3.1 steps/s  ETA 0:19
 * elsewhere (a log file, a pipe) a plain line now and then,
 *   embed: 42/100 lines  3.1 lines/s  ETA 0:19
 * at most one every interval seconds (10; BRIGADE_PROGRESS_INTERVAL overrides it, 0: every
 * update), and a last line when the work ends if any was printed. Without a known total only the
 * count and the rate are shown. A reporter on a NULL stream says nothing (--quiet). */
#ifndef BRIGADE_CLI_PROGRESS_H
#define BRIGADE_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef double (*cli_clock)(void *ctx); /* seconds, monotonic */

typedef struct cli_progress {
    FILE *out;          /* NULL: silent */
    bool tty;           /* a bar rewritten in place */
    const char *label;  /* "embed": the plain lines' prefix */
    const char *unit;   /* "lines", "steps", "prompts" */
    int64_t total;      /* 0: not known */
    int64_t first;      /* the count the work started from (a resumed run's step) */
    int64_t done;
    double start, last_shown, interval;
    cli_clock clock;
    void *clock_ctx;
    bool on_line;       /* a bar is on the terminal's current line */
    int plain_lines;    /* plain lines printed */
} cli_progress;

/* Starts a reporter on `out` (NULL: silent); whether it draws a bar is isatty(out). */
void cli_progress_init(cli_progress *p, FILE *out, const char *label, const char *unit, int64_t total);
/* The clock it reads (tests); the default is CLOCK_MONOTONIC. Resets the start. */
void cli_progress_set_clock(cli_progress *p, cli_clock clock, void *ctx);
/* `done` units done so far; `extra` (may be NULL) follows the rate ("loss 2.31  lr 5e-05"). Rate
 * and ETA are measured from the start. */
void cli_progress_update(cli_progress *p, int64_t done, const char *extra);
/* As update, with the caller's rate (units per second) and ETA (seconds; < 0: unknown). */
void cli_progress_show(cli_progress *p, int64_t done, double rate, double eta, const char *extra);
/* Ends the bar's line, so a message printed next starts a line of its own. */
void cli_progress_break(cli_progress *p);
/* The work is over: the bar's last state stays on its line; plain output gets a last line when it
 * printed any. */
void cli_progress_finish(cli_progress *p);

/* The pieces, for tests. "0:19", "12:05", "1:02:03"; "?" for a negative or non-finite time. */
void cli_progress_duration(char *buf, size_t n, double seconds);
/* "3.1", "42", "0.25": a rate with about two significant digits past the point when small. */
void cli_progress_rate(char *buf, size_t n, double rate);
/* The bar line (no "\r"), `width` characters of bar. */
void cli_progress_format_bar(char *buf, size_t n, int64_t done, int64_t total, const char *unit, double rate, double eta,
                             const char *extra, int width);
/* The plain line (no "\n"). */
void cli_progress_format_plain(char *buf, size_t n, const char *label, int64_t done, int64_t total, const char *unit,
                               double rate, double eta, const char *extra);

#endif
