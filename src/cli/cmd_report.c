/* brigade report OUT: a training run's plots on one page, OUT/report.html: loss, eval loss, lr
 * and tokens/s per step from the log; from a trace, a Gantt chart of a pipeline step, memory
 * per device over it, busy shares and the placement. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "brigade/arena.h"
#include "commands.h"
#include "report/report.h"

typedef struct report_flags {
    const char *out, *log, *trace, *svg, *device_memory;
    int64_t step;
} report_flags;

static brg_status check_out(const char *out) {
    struct stat s;
    if (stat(out, &s) != 0)
        return brg_error(BRG_ERR_IO, "%s: %s (give the --output folder of brigade train)", out, strerror(errno));
    if (!S_ISDIR(s.st_mode)) return brg_error(BRG_ERR_INVALID_ARG, "%s is not a folder (give the --output folder of brigade train)", out);
    return BRG_OK;
}

/* The log: --log, else the history the newest checkpoint keeps (without tokens/s). */
static brg_status load_log(const report_flags *f, report_log *log, bool *have) {
    if (f->log) {
        *have = true;
        return report_log_read(f->log, log);
    }
    return report_log_from_checkpoint(f->out, log, have);
}

static brg_status run(const report_flags *f) {
    BRG_TRY(check_out(f->out));
    if (f->step < 0) return brg_error(BRG_ERR_INVALID_ARG, "--step %lld: give a step number", (long long)f->step);
    size_t budget = 0;
    if (f->device_memory) BRG_TRY(brg_parse_bytes(f->device_memory, &budget));
    if (f->step > 0 && !f->trace) return brg_error(BRG_ERR_INVALID_ARG, "--step needs --trace (the step is the trace's)");
    report_log log;
    report_trace trace = {0};
    bool have_log = false;
    BRG_TRY(load_log(f, &log, &have_log));
    report_inputs in = {.log = have_log ? &log : NULL, .budget_bytes = (double)budget};
    brg_status st = f->trace ? report_trace_read(f->trace, &trace) : BRG_OK;
    if (st == BRG_OK && f->trace) {
        in.trace = &trace;
        st = report_trace_window(&trace, (int)f->step, &in.window);
    }
    report_summary sum;
    const report_options o = {.out_dir = f->out, .svg_dir = f->svg, .title = "brigade report"};
    if (st == BRG_OK) st = report_write(&o, &in, &sum);
    if (st == BRG_OK)
        printf("wrote %s/report.html: %d plot%s%s%s\n", f->out, sum.plots, sum.plots == 1 ? "" : "s",
               sum.notes ? ", notes in place of the others (see the page)" : "", f->svg ? " (and their .svg files)" : "");
    report_trace_free(&trace);
    report_log_free(&log);
    return st;
}

int cmd_report(int argc, char **argv) {
    report_flags f = {0};
    arg_spec specs[] = {
        {"log", ARG_STRING, &f.log, false,
         "the JSON-lines log of brigade train --log (default: the newest checkpoint's log_history, no tokens/s)", false},
        {"trace", ARG_STRING, &f.trace, false, "a trace of the run (brigade train --trace FILE.json): Gantt, memory, busy, placement", false},
        {"step", ARG_INT, &f.step, false, "the traced step the Gantt and memory plots show (default: the last)", false},
        {"device-memory", ARG_STRING, &f.device_memory, false, "the run's memory budget per device, drawn on the memory plot", false},
        {"svg", ARG_STRING, &f.svg, false, "also write each plot alone as DIR/<name>.svg", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("report OUT", "Writes OUT/report.html: a training run's plots on one self-contained page.", specs, n);
        return 0;
    }
    if (argc < 3 || strncmp(argv[2], "--", 2) == 0) {
        fprintf(stderr, "brigade report: expected the run's output folder first: brigade report OUT [options]\n");
        return 2;
    }
    f.out = argv[2];
    if (!args_parse("report", argc, argv, 3, specs, n)) return 2;
    return run(&f) == BRG_OK ? 0 : cli_fail("report");
}
