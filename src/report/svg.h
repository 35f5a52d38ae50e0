/* SVG plotting primitives for brigade report (internal): a growing text buffer, linear scales,
 * tick choice, axes with grid lines and labels, polylines, bars and text, all written as SVG
 * text that a browser renders without scripts. */
#ifndef BRIGADE_REPORT_SVG_H
#define BRIGADE_REPORT_SVG_H

#include <stdbool.h>
#include <stddef.h>

/* Text being built. Out of memory sets `oom` and drops what follows, so a writer checks once at
 * the end instead of after every call. */
typedef struct svg_buf {
    char *data;
    size_t len, cap;
    bool oom;
} svg_buf;

void svg_buf_free(svg_buf *b);
void svg_printf(svg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* `s` as XML character data or attribute text: & < > " ' escaped, control characters other
 * than tab and newline dropped (XML 1.0 cannot carry them at all). */
void svg_escaped(svg_buf *b, const char *s);

/* Maps [d0, d1] linearly onto [r0, r1]; an empty domain maps everything to the middle. */
typedef struct svg_scale {
    double d0, d1, r0, r1;
} svg_scale;

double svg_scale_map(const svg_scale *s, double v);

/* The smallest and largest finite values of v[0..n); false when there are none. */
bool svg_finite_range(const double *v, size_t n, double *lo, double *hi);

enum { SVG_MAX_TICKS = 16 };

/* Round tick values (1, 2 or 5 times a power of ten apart, and at least min_step apart: 1 for
 * step numbers, 0 for any) covering [lo, hi] with at most `max_ticks` (2..SVG_MAX_TICKS) of them.
 * *lo and *hi are widened to the outer ticks; a range of one value is widened around it first.
 * Returns the number of ticks written to ticks[]. */
int svg_nice_ticks(double *lo, double *hi, int max_ticks, double min_step, double ticks[SVG_MAX_TICKS],
                   double *step);

/* A tick's label with no more digits than the step needs ("0.25", "600", "1e-05"). */
void svg_tick_label(double v, double step, char *buf, size_t len);

/* A plot area inside an SVG document of width x height pixels. */
typedef struct svg_plot {
    double left, top, width, height; /* the data area, inside the margins */
    svg_scale x, y;
    double x_step, y_step;
} svg_plot;

/* Starts a standalone SVG document (id on the root element, a title for its tooltip). */
void svg_begin(svg_buf *b, const char *id, double width, double height, const char *title);
void svg_end(svg_buf *b);

/* Lays out a plot over [x_lo, x_hi] x [y_lo, y_hi] (widened to round ticks; x ticks at least
 * x_min_step apart) in a document of width x height, draws its grid, axes, tick labels, axis
 * titles and title. */
svg_plot svg_axes(svg_buf *b, double width, double height, double x_lo, double x_hi, double x_min_step, double y_lo,
                  double y_hi, const char *title, const char *x_title, const char *y_title);

/* The series (x[i], y[i]) as one polyline per run of finite points (a NaN or inf breaks the
 * line); a run of a single point is drawn as a dot. Returns the number of points drawn. */
size_t svg_polyline(svg_buf *b, const svg_plot *p, const double *x, const double *y, size_t n, const char *color,
                    const char *css_class);

/* A filled rectangle in pixel coordinates, with optional extra attributes (already escaped)
 * and an optional tooltip. */
void svg_rect(svg_buf *b, double x, double y, double w, double h, const char *fill, const char *attrs,
              const char *tooltip);
/* Text at a pixel position; anchor is "start", "middle" or "end". */
void svg_text(svg_buf *b, double x, double y, const char *anchor, double size, const char *text);
/* A legend entry (a swatch and its name) at a pixel position. */
void svg_legend_item(svg_buf *b, double x, double y, const char *color, const char *name);

#endif
