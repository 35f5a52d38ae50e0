/* The progress reporter (progress.h). */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BAR_WIDTH = 24 };
#define DEFAULT_INTERVAL 10.0 /* seconds between plain lines */
#define BAR_REDRAW 0.1        /* seconds between redraws of a bar */

static double monotonic(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double interval_from_env(void) {
    const char *v = getenv("BRIGADE_PROGRESS_INTERVAL");
    if (!v || !*v) return DEFAULT_INTERVAL;
    char *end;
    double s = strtod(v, &end);
    return *end || !(s >= 0) ? DEFAULT_INTERVAL : s;
}

void cli_progress_init(cli_progress *p, FILE *out, const char *label, const char *unit, int64_t total) {
    *p = (cli_progress){.out = out, .label = label, .unit = unit, .total = total > 0 ? total : 0,
                        .clock = monotonic, .interval = interval_from_env()};
    p->tty = out && isatty(fileno(out));
    p->start = p->last_shown = p->clock(p->clock_ctx);
}

void cli_progress_set_clock(cli_progress *p, cli_clock clock, void *ctx) {
    p->clock = clock;
    p->clock_ctx = ctx;
    p->start = p->last_shown = clock(ctx);
}

/* ---- formatting ---- */

void cli_progress_duration(char *buf, size_t n, double seconds) {
    if (!isfinite(seconds) || seconds < 0 || seconds > 1e9) {
        snprintf(buf, n, "?");
        return;
    }
    long long s = (long long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, n, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, n, "%lld:%02lld", s / 60, s % 60);
}

void cli_progress_rate(char *buf, size_t n, double rate) {
    if (!isfinite(rate) || rate < 0) snprintf(buf, n, "?");
    else if (rate < 9.95) snprintf(buf, n, "%.2g", rate);
    else snprintf(buf, n, "%.0f", rate);
}

/* "42/100 lines  3.1 lines/s  ETA 0:19[  extra]", or without a total "42 lines  3.1 lines/s". */
static void format_counts(char *buf, size_t n, int64_t done, int64_t total, const char *unit, double rate, double eta,
                          const char *extra) {
    char r[32], e[48] = "";
    cli_progress_rate(r, sizeof r, rate);
    if (total > 0) {
        char d[32];
        cli_progress_duration(d, sizeof d, eta);
        snprintf(e, sizeof e, "  ETA %s", d);
        snprintf(buf, n, "%lld/%lld %s  %s %s/s%s%s%s", (long long)done, (long long)total, unit, r, unit, e,
                 extra && *extra ? "  " : "", extra ? extra : "");
    } else {
        snprintf(buf, n, "%lld %s  %s %s/s%s%s", (long long)done, unit, r, unit, extra && *extra ? "  " : "",
                 extra ? extra : "");
    }
}

void cli_progress_format_bar(char *buf, size_t n, int64_t done, int64_t total, const char *unit, double rate, double eta,
                             const char *extra, int width) {
    char counts[512];
    format_counts(counts, sizeof counts, done, total, unit, rate, eta, extra);
    if (total <= 0 || width < 1 || width > 200) {
        snprintf(buf, n, "%s", counts);
        return;
    }
    char bar[204];
    int64_t filled = done >= total ? width : done <= 0 ? 0 : (int64_t)((double)done / (double)total * width);
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : ' ';
    if (filled < width) bar[filled] = '>';
    bar[width] = 0;
    snprintf(buf, n, "[%s] %s", bar, counts);
}

void cli_progress_format_plain(char *buf, size_t n, const char *label, int64_t done, int64_t total, const char *unit,
                               double rate, double eta, const char *extra) {
    char counts[512];
    format_counts(counts, sizeof counts, done, total, unit, rate, eta, extra);
    snprintf(buf, n, "%s: %s", label, counts);
}

/* ---- reporting ---- */

static void draw(cli_progress *p, double rate, double eta, const char *extra) {
    char line[768];
    if (p->tty) {
        cli_progress_format_bar(line, sizeof line, p->done, p->total, p->unit, rate, eta, extra, BAR_WIDTH);
        fprintf(p->out, "\r%s\033[K", line);
        p->on_line = true;
    } else {
        cli_progress_format_plain(line, sizeof line, p->label, p->done, p->total, p->unit, rate, eta, extra);
        fprintf(p->out, "%s\n", line);
        p->plain_lines++;
    }
    fflush(p->out);
}

void cli_progress_show(cli_progress *p, int64_t done, double rate, double eta, const char *extra) {
    if (!p->out) return;
    p->done = done;
    const double now = p->clock(p->clock_ctx);
    const bool last = p->total > 0 && done >= p->total;
    const double wait = p->tty ? BAR_REDRAW : p->interval;
    if (!last && now - p->last_shown < wait) return;
    /* Plain output is a record: the end gets its line from finish, not twice. */
    if (!p->tty && last) return;
    p->last_shown = now;
    draw(p, rate, eta, extra);
}

void cli_progress_update(cli_progress *p, int64_t done, const char *extra) {
    if (!p->out) return;
    const double elapsed = p->clock(p->clock_ctx) - p->start;
    const double rate = elapsed > 0 ? (double)(done - p->first) / elapsed : -1;
    const double eta = p->total > 0 && rate > 0 ? (double)(p->total - done) / rate : -1;
    cli_progress_show(p, done, rate, eta, extra);
}

void cli_progress_break(cli_progress *p) {
    if (p->out && p->on_line) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->on_line = false;
}

void cli_progress_finish(cli_progress *p) {
    if (!p->out) return;
    if (p->tty) {
        if (p->on_line && p->total == 0) { /* the count may have moved since the last redraw */
            const double elapsed = p->clock(p->clock_ctx) - p->start;
            draw(p, elapsed > 0 ? (double)(p->done - p->first) / elapsed : -1, -1, NULL);
        }
        cli_progress_break(p);
        return;
    }
    if (p->plain_lines == 0) return; /* short work: nothing to record */
    const double elapsed = p->clock(p->clock_ctx) - p->start;
    char took[32], rate[32];
    cli_progress_duration(took, sizeof took, elapsed);
    cli_progress_rate(rate, sizeof rate, elapsed > 0 ? (double)(p->done - p->first) / elapsed : -1);
    fprintf(p->out, "%s: %lld %s in %s (%s %s/s)\n", p->label, (long long)p->done, p->unit, took, rate, p->unit);
    fflush(p->out);
}
