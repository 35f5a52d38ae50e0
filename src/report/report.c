/* The report page: every plot in a box of fixed size at a fixed place (so the page looks the
 * same everywhere and a screenshot can be checked box by box), or in its box a one-line note
 * saying what to pass. One HTML file with the SVG inline and its style in the head: nothing to
 * fetch, no scripts. */
#include <stdio.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/dirs.h"
#include "report/report.h"

typedef struct plot_box {
    const char *name;
    report_plot_fn draw;
    double x, y, w, h; /* CSS pixels on the page */
} plot_box;

enum { PAGE_WIDTH = 1280, PAGE_HEIGHT = 1420, NOTE_LEN = 640 };

static const plot_box BOXES[] = {
    {"loss", report_plot_loss, 20, 90, 610, 300},
    {"lr", report_plot_lr, 650, 90, 610, 300},
    {"throughput", report_plot_throughput, 20, 410, 610, 300},
    {"busy", report_plot_busy, 650, 410, 610, 300},
    {"gantt", report_plot_gantt, 20, 730, 1240, 340},
    {"memory", report_plot_memory, 20, 1090, 610, 300},
    {"placement", report_plot_placement, 650, 1090, 610, 300},
};
#define N_BOXES (int)(sizeof BOXES / sizeof BOXES[0])

typedef struct drawn {
    svg_buf svg;
    bool ok;
    char note[NOTE_LEN];
} drawn;

static const char STYLE[] =
    "body { margin: 0; background: #ffffff; font-family: sans-serif; color: #222222; }\n"
    ".page { position: relative; width: 1280px; height: 1420px; }\n"
    ".head { position: absolute; left: 20px; top: 8px; width: 1240px; height: 72px; }\n"
    ".head h1 { font-size: 22px; margin: 0 0 6px 0; }\n"
    ".head p { font-size: 12px; margin: 2px 0; color: #555555; }\n"
    ".plot { position: absolute; overflow: hidden; border: 1px solid #dddddd; box-sizing: border-box; }\n"
    ".plot svg { display: block; }\n"
    ".note { font-size: 13px; color: #666666; margin: 12px; }\n";

static void source_line(svg_buf *b, const char *what, const char *source) {
    svg_printf(b, "<p>%s: ", what);
    svg_escaped(b, source);
    svg_printf(b, "</p>\n");
}

static void page_head(svg_buf *b, const report_options *o, const report_inputs *in) {
    svg_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
    svg_escaped(b, o->title);
    svg_printf(b, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<div class=\"page\">\n<div class=\"head\">\n<h1>",
               STYLE);
    svg_escaped(b, o->title);
    svg_printf(b, "</h1>\n");
    source_line(b, "log", in->log ? in->log->source : "none");
    char shown[4500];
    if (in->trace && in->window.index >= 0)
        snprintf(shown, sizeof shown, "%s (Gantt and memory: step %d)", in->trace->source, in->window.index);
    else snprintf(shown, sizeof shown, "%s", in->trace ? in->trace->source : "none");
    source_line(b, "trace", shown);
    svg_printf(b, "</div>\n");
}

static void page_box(svg_buf *b, const plot_box *box, const drawn *d) {
    svg_printf(b,
               "<div class=\"plot\" id=\"plot-%s\" data-plot=\"%s\" data-drawn=\"%s\" data-x=\"%.0f\" data-y=\"%.0f\" "
               "data-w=\"%.0f\" data-h=\"%.0f\" style=\"left: %.0fpx; top: %.0fpx; width: %.0fpx; height: %.0fpx;\">\n",
               box->name, box->name, d->ok ? "yes" : "no", box->x, box->y, box->w, box->h, box->x, box->y, box->w, box->h);
    if (d->ok) {
        svg_printf(b, "%s", d->svg.data);
    } else {
        svg_printf(b, "<p class=\"note\">");
        svg_escaped(b, d->note);
        svg_printf(b, "</p>\n");
    }
    svg_printf(b, "</div>\n");
}

static brg_status write_file(const char *path, const char *prolog, const svg_buf *b) {
    if (b->oom) return brg_error(BRG_ERR_OOM, "out of memory drawing %s", path);
    brg_atomic_file f;
    BRG_TRY(brg_atomic_file_open(path, &f));
    brg_status st = brg_atomic_file_write(&f, prolog, strlen(prolog));
    if (st == BRG_OK) st = brg_atomic_file_write(&f, b->data, b->len);
    if (st == BRG_OK) st = brg_atomic_file_commit(&f);
    return st;
}

static brg_status write_svgs(const char *dir, const drawn *d) {
    BRG_TRY(brg_dirs_create(dir));
    for (int i = 0; i < N_BOXES; i++) {
        if (!d[i].ok) continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s.svg", dir, BOXES[i].name) >= sizeof path)
            return brg_error(BRG_ERR_INVALID_ARG, "--svg %s: the path is too long", dir);
        BRG_TRY(write_file(path, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", &d[i].svg));
    }
    return BRG_OK;
}

static brg_status write_page(const report_options *o, const report_inputs *in, const drawn *d) {
    svg_buf page = {0};
    page_head(&page, o, in);
    for (int i = 0; i < N_BOXES; i++) page_box(&page, &BOXES[i], &d[i]);
    svg_printf(&page, "</div>\n</body>\n</html>\n");
    char path[4096];
    brg_status st = (size_t)snprintf(path, sizeof path, "%s/report.html", o->out_dir) < sizeof path
                        ? write_file(path, "", &page)
                        : brg_error(BRG_ERR_INVALID_ARG, "%s: the path is too long", o->out_dir);
    svg_buf_free(&page);
    return st;
}

brg_status report_write(const report_options *o, const report_inputs *in, report_summary *summary) {
    drawn d[N_BOXES];
    memset(d, 0, sizeof d);
    *summary = (report_summary){0};
    brg_status st = BRG_OK;
    for (int i = 0; i < N_BOXES; i++) {
        d[i].ok = BOXES[i].draw(in, BOXES[i].w - 2, BOXES[i].h - 2, &d[i].svg, d[i].note, sizeof d[i].note);
        if (d[i].svg.oom) st = brg_error(BRG_ERR_OOM, "out of memory drawing the %s plot", BOXES[i].name);
        if (d[i].ok) summary->plots++;
        else summary->notes++;
    }
    if (st == BRG_OK && o->svg_dir) st = write_svgs(o->svg_dir, d);
    if (st == BRG_OK) st = write_page(o, in, d);
    for (int i = 0; i < N_BOXES; i++) svg_buf_free(&d[i].svg);
    return st;
}
