/* brigade report (internal): a training run's log and trace read into plain arrays, drawn as SVG
 * plots, and laid out on one self-contained HTML page.
 *
 *   run_log.c       the JSON-lines log of brigade train --log (or a checkpoint's log_history)
 *   trace_events.c  a --trace file: per device, its passes, waits and memory counters; the steps
 *   plots.c         one function per plot
 *   report.c        the page: each plot at a fixed place, or a note saying what to pass */
#ifndef BRIGADE_REPORT_REPORT_H
#define BRIGADE_REPORT_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "brigade/status.h"
#include "report/svg.h"

/* ---- the log ---- */

typedef struct report_series {
    double *x, *y;
    size_t n, cap;
} report_series;

typedef struct report_log {
    report_series loss, eval_loss, lr, tokens_per_s;
    char source[4352]; /* what it was read from, for the page */
} report_log;

/* Reads a JSON-lines log: every non-blank line one JSON object with a numeric "step" (a null
 * value is a gap). A line that is not so is an error naming the file and line. */
brg_status report_log_read(const char *path, report_log *log);
/* The log_history of the newest checkpoint under `out_dir` (transformers' keys: loss,
 * learning_rate, eval_loss). *found is false, and the log empty, when there is none. */
brg_status report_log_from_checkpoint(const char *out_dir, report_log *log, bool *found);
void report_log_free(report_log *log);

/* ---- the trace ---- */

typedef enum report_span_kind {
    REPORT_FORWARD,
    REPORT_BACKWARD,
    REPORT_RECOMPUTE,
    REPORT_OPTIMIZER,
    REPORT_WAIT, /* a receive: from the call to the message */
    REPORT_SEND,
} report_span_kind;

typedef struct report_span {
    double t0, t1; /* microseconds, as in the trace */
    int block, micro_batch;
    report_span_kind kind;
} report_span;

typedef struct report_sample {
    double t, bytes;
} report_sample;

typedef struct report_device {
    int tid;
    char name[128];
    report_span *spans;
    size_t n_spans, cap_spans;
    report_sample *memory;
    size_t n_memory, cap_memory;
} report_device;

typedef struct report_window {
    double t0, t1;
    int index; /* the step's number; -1: the whole trace */
} report_window;

typedef struct report_trace {
    report_device *devices; /* in device order */
    int n_devices;
    report_window *steps; /* the host's "step N" spans, in order */
    int n_steps;
    char source[4352];
} report_trace;

/* Reads a Chrome trace-event file as brigade writes it. A file that is not JSON, or JSON that is
 * not a trace (no traceEvents array of events with a "ph"), is an error naming the file. */
brg_status report_trace_read(const char *path, report_trace *trace);
/* The window of step `step` (0: the last step; the whole trace when it has no steps); an error
 * naming the steps there are when `step` is not among them. */
brg_status report_trace_window(const report_trace *trace, int step, report_window *w);
void report_trace_free(report_trace *trace);

/* ---- plots and the page ---- */

typedef struct report_inputs {
    const report_log *log;     /* NULL: none */
    const report_trace *trace; /* NULL: none */
    report_window window;      /* the trace's step shown in the Gantt and memory plots */
    double budget_bytes;       /* 0: none given */
} report_inputs;

/* Draws one plot into `svg` (a whole <svg> element) and returns true, or returns false with a
 * one-line note saying what to pass to get it. */
typedef bool (*report_plot_fn)(const report_inputs *in, double width, double height, svg_buf *svg, char *note,
                               size_t note_len);

bool report_plot_loss(const report_inputs *in, double width, double height, svg_buf *svg, char *note, size_t len);
bool report_plot_lr(const report_inputs *in, double width, double height, svg_buf *svg, char *note, size_t len);
bool report_plot_throughput(const report_inputs *in, double width, double height, svg_buf *svg, char *note,
                            size_t len);
bool report_plot_gantt(const report_inputs *in, double width, double height, svg_buf *svg, char *note, size_t len);
bool report_plot_memory(const report_inputs *in, double width, double height, svg_buf *svg, char *note, size_t len);
bool report_plot_busy(const report_inputs *in, double width, double height, svg_buf *svg, char *note, size_t len);
bool report_plot_placement(const report_inputs *in, double width, double height, svg_buf *svg, char *note,
                           size_t len);

typedef struct report_options {
    const char *out_dir; /* report.html goes here */
    const char *svg_dir; /* NULL: no separate SVG files */
    const char *title;
} report_options;

typedef struct report_summary {
    int plots, notes;
} report_summary;

/* Draws every plot and writes OUT/report.html (and SVG_DIR/<name>.svg for each drawn plot),
 * each file atomically: a failure leaves no partial file. */
brg_status report_write(const report_options *o, const report_inputs *in, report_summary *summary);

#endif
