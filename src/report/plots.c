/* The report's plots (report.h), one function each: from the log, loss and eval loss, the
 * learning rate and tokens/s per step; from the trace, a Gantt chart of one pipeline step per
 * device (the gaps between its bars are the pipeline's bubbles), memory per device over that
 * step against the budget, each device's busy share, and which blocks each device holds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static const char *const DEVICE_COLORS[] = {"#4c78a8", "#e45756", "#54a24b", "#b279a2",
                                            "#f58518", "#72b7b2", "#9d755d", "#eeca3b"};
#define DEVICE_COLOR(d) DEVICE_COLORS[(d) % (int)(sizeof DEVICE_COLORS / sizeof DEVICE_COLORS[0])]

static const char *const KIND_NAMES[] = {"forward", "backward", "recompute", "optimizer", "wait", "send"};
static const char *const KIND_COLORS[] = {"#4c78a8", "#f58518", "#b279a2", "#54a24b", "#d62728", "#999999"};

static const char IDLE_COLOR[] = "#eeeeee";

static bool no_plot(char *note, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no_plot(char *note, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, len, fmt, ap);
    va_end(ap);
    return false;
}

static bool has_points(const report_series *s) {
    double lo, hi;
    return s->n && svg_finite_range(s->y, s->n, &lo, &hi);
}

/* ---- from the log ---- */

/* The x and y ranges of the series that have points, joined. */
static bool series_range(const report_series *const *s, int n, double *x_lo, double *x_hi, double *y_lo, double *y_hi) {
    bool any = false;
    for (int i = 0; i < n; i++) {
        double a, b, c, d;
        if (!svg_finite_range(s[i]->x, s[i]->n, &a, &b) || !svg_finite_range(s[i]->y, s[i]->n, &c, &d)) continue;
        *x_lo = any ? fmin(*x_lo, a) : a, *x_hi = any ? fmax(*x_hi, b) : b;
        *y_lo = any ? fmin(*y_lo, c) : c, *y_hi = any ? fmax(*y_hi, d) : d;
        any = true;
    }
    return any;
}

static void line_plot(svg_buf *svg, const char *id, double w, double h, const char *title, const char *y_title,
                      const report_series *const *s, const char *const *names, const char *const *colors, int n) {
    double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
    series_range(s, n, &x_lo, &x_hi, &y_lo, &y_hi);
    svg_begin(svg, id, w, h, title);
    svg_plot p = svg_axes(svg, w, h, x_lo, x_hi, 1, y_lo, y_hi, title, "step", y_title);
    double legend_x = p.left + p.width - 110 * n;
    for (int i = 0; i < n; i++) {
        char css[64];
        snprintf(css, sizeof css, "series %s", names[i]);
        for (char *c = css; *c; c++)
            if (*c == ' ' && c > css + 6) *c = '_';
        svg_polyline(svg, &p, s[i]->x, s[i]->y, s[i]->n, colors[i], css);
        svg_legend_item(svg, legend_x + 110 * i, 20, colors[i], names[i]);
    }
    svg_end(svg);
}

static const char NO_LOG[] = "pass --log FILE (the JSON-lines log of brigade train --log)";

bool report_plot_loss(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (!in->log) return no_plot(note, len, "Loss: no log: %s.", NO_LOG);
    if (!has_points(&in->log->loss) && !has_points(&in->log->eval_loss))
        return no_plot(note, len, "Loss: the log %s holds no loss values.", in->log->source);
    const report_series *s[] = {&in->log->loss, &in->log->eval_loss};
    const char *names[] = {"loss", "eval loss"}, *colors[] = {"#4c78a8", "#f58518"};
    line_plot(svg, "loss", w, h, "Loss per step", "loss", s, names, colors, has_points(&in->log->eval_loss) ? 2 : 1);
    return true;
}

bool report_plot_lr(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (!in->log) return no_plot(note, len, "Learning rate: no log: %s.", NO_LOG);
    if (!has_points(&in->log->lr))
        return no_plot(note, len, "Learning rate: the log %s holds no lr values.", in->log->source);
    const report_series *s[] = {&in->log->lr};
    const char *names[] = {"lr"}, *colors[] = {"#54a24b"};
    line_plot(svg, "lr", w, h, "Learning rate per step", "learning rate", s, names, colors, 1);
    return true;
}

bool report_plot_throughput(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (!in->log) return no_plot(note, len, "Tokens/s: no log: %s.", NO_LOG);
    if (!has_points(&in->log->tokens_per_s))
        return no_plot(note, len, "Tokens/s: %s has no tokens_per_s: %s.", in->log->source, NO_LOG);
    const report_series *s[] = {&in->log->tokens_per_s};
    const char *names[] = {"tokens/s"}, *colors[] = {"#8e44ad"};
    line_plot(svg, "throughput", w, h, "Throughput per step", "tokens/s", s, names, colors, 1);
    return true;
}

/* ---- from the trace ---- */

static const char NO_TRACE[] = "pass --trace FILE.json (written by brigade train --trace)";

static bool trace_missing(const report_inputs *in, const char *what, char *note, size_t len) {
    if (!in->trace) return no_plot(note, len, "%s: no trace: %s.", what, NO_TRACE), true;
    if (in->trace->n_devices == 0)
        return no_plot(note, len, "%s: the trace %s has no device tracks (a pipelined run has them).", what,
                       in->trace->source),
               true;
    return false;
}

/* Microseconds of [t0, t1) inside [w0, w1). */
static double overlap(double t0, double t1, double w0, double w1) {
    const double a = fmax(t0, w0), b = fmin(t1, w1);
    return b > a ? b - a : 0;
}

/* The share of the windows' time a device spent computing (passes and optimizer). */
static double busy_share(const report_device *d, const report_window *windows, int n) {
    double busy = 0, total = 0;
    for (int k = 0; k < n; k++) {
        total += windows[k].t1 - windows[k].t0;
        for (size_t i = 0; i < d->n_spans; i++)
            if (d->spans[i].kind <= REPORT_OPTIMIZER)
                busy += overlap(d->spans[i].t0, d->spans[i].t1, windows[k].t0, windows[k].t1);
    }
    return total > 0 ? fmin(busy / total, 1) : 0;
}

/* A time axis in milliseconds under a chart of rows. */
static svg_scale time_axis(svg_buf *svg, double left, double right, double top, double bottom, double ms) {
    double lo = 0, hi = ms > 0 ? ms : 1, ticks[SVG_MAX_TICKS], step;
    const int n = svg_nice_ticks(&lo, &hi, 9, 0, ticks, &step);
    /* The axis ends where the window does: space past it would read as idle time. */
    const svg_scale x = {0, ms > 0 ? ms : hi, left, right};
    char label[48];
    for (int i = 0; i < n && ticks[i] <= x.d1 * (1 + 1e-9); i++) {
        const double px = svg_scale_map(&x, ticks[i]);
        svg_printf(svg, "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#d8d8d8\"/>\n", px,
                   top, px, bottom);
        svg_tick_label(ticks[i], step, label, sizeof label);
        svg_text(svg, px, bottom + 15, "middle", 11, label);
    }
    return x;
}

static void gantt_bar(svg_buf *svg, const report_span *s, int device, const report_window *w, const svg_scale *x,
                      double y, double row_h) {
    const double t0 = fmax(s->t0, w->t0), t1 = fmin(s->t1, w->t1);
    const double x0 = svg_scale_map(x, (t0 - w->t0) / 1000), x1 = svg_scale_map(x, (t1 - w->t0) / 1000);
    char attrs[200], tip[160];
    const char *kind = KIND_NAMES[s->kind];
    if (s->kind <= REPORT_RECOMPUTE) {
        snprintf(attrs, sizeof attrs,
                 "class=\"bar %s\" data-device=\"%d\" data-block=\"%d\" data-mb=\"%d\" data-direction=\"%s\"", kind,
                 device, s->block, s->micro_batch, s->kind == REPORT_BACKWARD ? "backward" : "forward");
        snprintf(tip, sizeof tip, "%s block %d mb %d: %.3f ms", kind, s->block, s->micro_batch, (s->t1 - s->t0) / 1000);
    } else {
        snprintf(attrs, sizeof attrs, "class=\"%s\" data-device=\"%d\"", kind, device);
        snprintf(tip, sizeof tip, "%s: %.3f ms", kind, (s->t1 - s->t0) / 1000);
    }
    const bool thin = s->kind >= REPORT_WAIT; /* waits and sends: a strip under the row */
    const double top = thin ? y + row_h - 5 : y + 3, height = thin ? 4 : row_h - 10;
    svg_rect(svg, x0, top, fmax(x1 - x0, 0.8), height, KIND_COLORS[s->kind], attrs, tip);
    if (!thin && s->kind != REPORT_OPTIMIZER && x1 - x0 > 34) {
        char label[32];
        snprintf(label, sizeof label, "b%d m%d", s->block, s->micro_batch);
        svg_printf(svg, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"9\" fill=\"#ffffff\">%s</text>\n",
                   (x0 + x1) / 2, top + height / 2 + 3, label);
    }
}

static void gantt_row(svg_buf *svg, const report_device *d, int device, const report_window *w, const svg_scale *x,
                      double y, double row_h) {
    char label[160], attrs[64];
    snprintf(attrs, sizeof attrs, "class=\"row\" data-device=\"%d\"", device);
    svg_rect(svg, x->r0, y, x->r1 - x->r0, row_h - 2, IDLE_COLOR, attrs, NULL);
    snprintf(label, sizeof label, "device %d", d->tid);
    svg_text(svg, 8, y + row_h / 2 - 2, "start", 12, label);
    snprintf(label, sizeof label, "busy %.0f%%", 100 * busy_share(d, w, 1));
    svg_text(svg, 8, y + row_h / 2 + 12, "start", 10, label);
    for (size_t i = 0; i < d->n_spans; i++)
        if (d->spans[i].t1 > w->t0 && d->spans[i].t0 < w->t1) gantt_bar(svg, &d->spans[i], device, w, x, y, row_h);
}

bool report_plot_gantt(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (trace_missing(in, "Pipeline Gantt chart", note, len)) return false;
    const report_trace *t = in->trace;
    const report_window *win = &in->window;
    char title[160];
    if (win->index >= 0) snprintf(title, sizeof title, "Pipeline step %d per device (gaps: bubbles)", win->index);
    else snprintf(title, sizeof title, "The traced run per device (gaps: bubbles)");
    svg_begin(svg, "gantt", w, h, title);
    const double left = 96, right = w - 18, top = 34, bottom = h - 44;
    const double row_h = fmin(110, (bottom - top) / t->n_devices);
    const svg_scale x = time_axis(svg, left, right, top, top + row_h * t->n_devices, (win->t1 - win->t0) / 1000);
    for (int d = 0; d < t->n_devices; d++) gantt_row(svg, &t->devices[d], d, win, &x, top + row_h * d, row_h);
    svg_text(svg, left, 20, "start", 14, title);
    svg_text(svg, (left + right) / 2, top + row_h * t->n_devices + 32, "middle", 12, "milliseconds into the step");
    const int legend[] = {REPORT_FORWARD, REPORT_BACKWARD, REPORT_RECOMPUTE, REPORT_OPTIMIZER, REPORT_WAIT};
    for (int i = 0; i < 5; i++) svg_legend_item(svg, right - 5 * 92 - 80 + 92 * i, 20, KIND_COLORS[legend[i]],
                                                KIND_NAMES[legend[i]]);
    svg_legend_item(svg, right - 70, 20, IDLE_COLOR, "idle");
    svg_end(svg);
    return true;
}

/* A device's memory over the window as a step line (a counter holds its value until the next
 * sample), in MiB against milliseconds into the window; the sample before the window starts it. */
static size_t memory_line(const report_device *d, const report_window *w, double *x, double *y) {
    size_t n = 0;
    double held = NAN;
    for (size_t i = 0; i < d->n_memory; i++) {
        const report_sample *s = &d->memory[i];
        const double mib = s->bytes / (1 << 20);
        if (s->t < w->t0) {
            held = mib;
            continue;
        }
        if (s->t > w->t1) break;
        const double at = (s->t - w->t0) / 1000, before = n ? y[n - 1] : isnan(held) ? mib : held;
        if (n == 0) x[n] = 0, y[n] = before, n++;
        x[n] = at, y[n] = before, n++;
        x[n] = at, y[n] = mib, n++;
    }
    if (n) x[n] = (w->t1 - w->t0) / 1000, y[n] = y[n - 1], n++;
    return n;
}

static void memory_range(const report_inputs *in, double *lo, double *hi) {
    *lo = 0, *hi = in->budget_bytes / (1 << 20);
    for (int d = 0; d < in->trace->n_devices; d++)
        for (size_t i = 0; i < in->trace->devices[d].n_memory; i++)
            *hi = fmax(*hi, in->trace->devices[d].memory[i].bytes / (1 << 20));
}

bool report_plot_memory(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (trace_missing(in, "Memory per device", note, len)) return false;
    const report_trace *t = in->trace;
    size_t most = 0;
    for (int d = 0; d < t->n_devices; d++) most = t->devices[d].n_memory > most ? t->devices[d].n_memory : most;
    if (most == 0) return no_plot(note, len, "Memory per device: the trace %s has no memory counters.", t->source);
    double *x = malloc((2 * most + 2) * sizeof *x), *y = malloc((2 * most + 2) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        svg->oom = true;
        return true;
    }
    double lo, hi;
    memory_range(in, &lo, &hi);
    svg_begin(svg, "memory", w, h, "Memory per device over the step");
    svg_plot p = svg_axes(svg, w, h, 0, (in->window.t1 - in->window.t0) / 1000, 0, lo, hi,
                          "Memory per device over the step", "milliseconds into the step", "MiB");
    for (int d = 0; d < t->n_devices; d++) {
        char css[48], name[48];
        snprintf(css, sizeof css, "series memory_device_%d", d);
        svg_polyline(svg, &p, x, y, memory_line(&t->devices[d], &in->window, x, y), DEVICE_COLOR(d), css);
        snprintf(name, sizeof name, "device %d", t->devices[d].tid);
        svg_legend_item(svg, p.left + p.width - 90 * (t->n_devices - d) - 110, 20, DEVICE_COLOR(d), name);
    }
    if (in->budget_bytes > 0) {
        const double by = svg_scale_map(&p.y, in->budget_bytes / (1 << 20));
        svg_printf(svg, "<line class=\"budget\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#d62728\" "
                        "stroke-dasharray=\"6 4\" stroke-width=\"1.5\"/>\n",
                   p.left, by, p.left + p.width, by);
        svg_legend_item(svg, p.left + p.width - 100, 20, "#d62728", "budget");
    } else {
        svg_text(svg, p.left + 8, p.top + 16, "start", 11, "no budget given (pass --device-memory SIZE to draw it)");
    }
    free(x);
    free(y);
    svg_end(svg);
    return true;
}

bool report_plot_busy(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (trace_missing(in, "Busy share", note, len)) return false;
    const report_trace *t = in->trace;
    const report_window whole = in->window;
    const report_window *windows = t->n_steps ? t->steps : &whole;
    const int n = t->n_steps ? t->n_steps : 1;
    char title[128], label[96];
    snprintf(title, sizeof title, "Busy share per device (%d step%s)", n, n == 1 ? "" : "s");
    svg_begin(svg, "busy", w, h, title);
    svg_text(svg, 66, 20, "start", 14, title);
    const double left = 96, right = w - 60, top = 40, row_h = fmin(40, (h - top - 30) / t->n_devices);
    const svg_scale x = time_axis(svg, left, right, top, top + row_h * t->n_devices, 100);
    for (int d = 0; d < t->n_devices; d++) {
        const double share = busy_share(&t->devices[d], windows, n), y = top + row_h * d;
        char attrs[96];
        snprintf(attrs, sizeof attrs, "class=\"busy\" data-device=\"%d\" data-share=\"%.4f\"", d, share);
        snprintf(label, sizeof label, "device %d: busy %.1f%% of the step time", t->devices[d].tid, 100 * share);
        svg_rect(svg, left, y + 4, svg_scale_map(&x, 100 * share) - left, row_h - 10, DEVICE_COLOR(d), attrs, label);
        snprintf(label, sizeof label, "device %d", t->devices[d].tid);
        svg_text(svg, 8, y + row_h / 2 + 4, "start", 12, label);
        snprintf(label, sizeof label, "%.0f%%", 100 * share);
        svg_text(svg, svg_scale_map(&x, 100 * share) + 4, y + row_h / 2 + 4, "start", 11, label);
    }
    svg_text(svg, (left + right) / 2, top + row_h * t->n_devices + 32, "middle", 12, "% of the step time computing");
    svg_end(svg);
    return true;
}

/* The blocks a device ran (any pass), as a bitmap over block numbers below `n`. */
static void blocks_of(const report_device *d, bool *held, int n) {
    for (size_t i = 0; i < d->n_spans; i++)
        if (d->spans[i].kind <= REPORT_RECOMPUTE && d->spans[i].block >= 0 && d->spans[i].block < n)
            held[d->spans[i].block] = true;
}

static int block_count(const report_trace *t) {
    int n = 0;
    for (int d = 0; d < t->n_devices; d++)
        for (size_t i = 0; i < t->devices[d].n_spans; i++)
            if (t->devices[d].spans[i].kind <= REPORT_RECOMPUTE && t->devices[d].spans[i].block + 1 > n)
                n = t->devices[d].spans[i].block + 1;
    return n;
}

static void placement_row(svg_buf *svg, const report_device *d, int device, int n_blocks, double x0, double cell,
                          double y, double row_h) {
    bool *held = calloc((size_t)n_blocks, sizeof *held);
    if (!held) {
        svg->oom = true;
        return;
    }
    blocks_of(d, held, n_blocks);
    char label[64], attrs[96];
    snprintf(label, sizeof label, "device %d", d->tid);
    svg_text(svg, 8, y + row_h / 2 + 4, "start", 12, label);
    for (int b = 0; b < n_blocks; b++) {
        if (!held[b]) continue;
        snprintf(attrs, sizeof attrs, "class=\"cell\" data-device=\"%d\" data-block=\"%d\"", device, b);
        snprintf(label, sizeof label, "block %d on device %d", b, d->tid);
        svg_rect(svg, x0 + cell * b + 1, y + 2, cell - 2, row_h - 4, DEVICE_COLOR(device), attrs, label);
        if (cell >= 14) {
            snprintf(label, sizeof label, "%d", b);
            svg_text(svg, x0 + cell * b + cell / 2, y + row_h / 2 + 4, "middle", cell >= 24 ? 11 : 8, label);
        }
    }
    free(held);
}

bool report_plot_placement(const report_inputs *in, double w, double h, svg_buf *svg, char *note, size_t len) {
    if (trace_missing(in, "Placement", note, len)) return false;
    const report_trace *t = in->trace;
    const int n_blocks = block_count(t);
    if (n_blocks == 0) return no_plot(note, len, "Placement: the trace %s has no per-block passes.", t->source);
    svg_begin(svg, "placement", w, h, "Placement: blocks per device");
    svg_text(svg, 66, 20, "start", 14, "Placement: blocks per device");
    const double left = 96, right = w - 18, top = 40, bottom = h - 44;
    const double cell = (right - left) / n_blocks, row_h = fmin(48, (bottom - top) / t->n_devices);
    for (int b = 0; b < n_blocks; b++)
        svg_rect(svg, left + cell * b, top, cell, row_h * t->n_devices, b % 2 ? "#f7f7f7" : "#ffffff", NULL, NULL);
    for (int d = 0; d < t->n_devices; d++) placement_row(svg, &t->devices[d], d, n_blocks, left, cell, top + row_h * d, row_h);
    char label[96];
    snprintf(label, sizeof label, "block (the model's %d blocks in order)", n_blocks);
    svg_text(svg, (left + right) / 2, top + row_h * t->n_devices + 24, "middle", 12, label);
    svg_end(svg);
    return true;
}
