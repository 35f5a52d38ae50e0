/* SVG plotting primitives (svg.h). Coordinates are written with two decimals: enough for a
 * screen, and it keeps a plot of thousands of points small. */
#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MARGIN_LEFT = 66, MARGIN_RIGHT = 18, MARGIN_TOP = 34, MARGIN_BOTTOM = 44 };

void svg_buf_free(svg_buf *b) {
    free(b->data);
    *b = (svg_buf){0};
}

static bool reserve(svg_buf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void svg_printf(svg_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n >= 0 && reserve(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void svg_escaped(svg_buf *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': svg_printf(b, "&amp;"); break;
        case '<': svg_printf(b, "&lt;"); break;
        case '>': svg_printf(b, "&gt;"); break;
        case '"': svg_printf(b, "&quot;"); break;
        case '\'': svg_printf(b, "&#39;"); break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n') break;
            svg_printf(b, "%c", *p);
        }
    }
}

double svg_scale_map(const svg_scale *s, double v) {
    const double span = s->d1 - s->d0;
    if (!(fabs(span) > 0) || !isfinite(span)) return (s->r0 + s->r1) / 2;
    return s->r0 + (v - s->d0) / span * (s->r1 - s->r0);
}

bool svg_finite_range(const double *v, size_t n, double *lo, double *hi) {
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        if (!any || v[i] < *lo) *lo = v[i];
        if (!any || v[i] > *hi) *hi = v[i];
        any = true;
    }
    return any;
}

int svg_nice_ticks(double *lo, double *hi, int max_ticks, double min_step, double ticks[SVG_MAX_TICKS],
                   double *step) {
    if (max_ticks < 2) max_ticks = 2;
    if (max_ticks > SVG_MAX_TICKS) max_ticks = SVG_MAX_TICKS;
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*lo > *hi) {
        double t = *lo;
        *lo = *hi;
        *hi = t;
    }
    if (*hi - *lo <= fabs(*hi) * 1e-12) { /* one value: a band around it */
        const double d = *lo != 0 ? fabs(*lo) * 0.05 : 1;
        *lo -= d;
        *hi += d;
    }
    static const double mantissa[] = {1, 2, 5};
    double s = 0;
    long first = 0, last = 0;
    /* The first power of ten below a step that could fit, then up through 1-2-5 until it does. */
    double p10 = pow(10, floor(log10((*hi - *lo) / (max_ticks - 1))) - 1);
    for (int k = 0; k < 60 && s == 0; k++, p10 *= 10)
        for (int m = 0; m < 3; m++) {
            const double cand = mantissa[m] * p10;
            if (cand < min_step) continue;
            first = (long)floor(*lo / cand + 1e-9);
            last = (long)ceil(*hi / cand - 1e-9);
            if (last - first + 1 <= max_ticks) {
                s = cand;
                break;
            }
        }
    int n = 0;
    for (long i = first; i <= last && n < SVG_MAX_TICKS; i++) {
        double v = (double)i * s;
        ticks[n++] = fabs(v) < s * 1e-9 ? 0 : v;
    }
    *lo = (double)first * s;
    *hi = (double)last * s;
    *step = s;
    return n;
}

void svg_tick_label(double v, double step, char *buf, size_t len) {
    if (fabs(v) < step * 1e-9) v = 0;
    const double mag = fmax(fabs(v), step);
    if (step < 1e-3 || mag >= 1e6) {
        snprintf(buf, len, "%.3g", v);
        return;
    }
    int decimals = (int)ceil(-log10(step) - 1e-9);
    if (decimals < 0) decimals = 0;
    snprintf(buf, len, "%.*f", decimals, v);
}

void svg_begin(svg_buf *b, const char *id, double width, double height, const char *title) {
    svg_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"");
    svg_escaped(b, id);
    svg_printf(b, "\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n", width,
               height, width, height);
    svg_printf(b, "<title>");
    svg_escaped(b, title);
    svg_printf(b, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", width, height);
}

void svg_end(svg_buf *b) { svg_printf(b, "</svg>\n"); }

void svg_text(svg_buf *b, double x, double y, const char *anchor, double size, const char *text) {
    svg_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\" font-size=\"%.0f\" fill=\"#222222\">", x, y, anchor,
               size);
    svg_escaped(b, text);
    svg_printf(b, "</text>\n");
}

static void axis_ticks(svg_buf *b, const svg_plot *p, bool vertical, const double *ticks, int n, double step) {
    char label[48];
    for (int i = 0; i < n; i++) {
        svg_tick_label(ticks[i], step, label, sizeof label);
        if (vertical) {
            const double y = svg_scale_map(&p->y, ticks[i]);
            svg_printf(b, "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>\n",
                       p->left, y, p->left + p->width, y);
            svg_text(b, p->left - 6, y + 4, "end", 11, label);
        } else {
            const double x = svg_scale_map(&p->x, ticks[i]);
            svg_printf(b, "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>\n", x,
                       p->top, x, p->top + p->height);
            svg_text(b, x, p->top + p->height + 15, "middle", 11, label);
        }
    }
}

svg_plot svg_axes(svg_buf *b, double width, double height, double x_lo, double x_hi, double x_min_step, double y_lo,
                  double y_hi, const char *title, const char *x_title, const char *y_title) {
    svg_plot p = {.left = MARGIN_LEFT, .top = MARGIN_TOP, .width = width - MARGIN_LEFT - MARGIN_RIGHT,
                  .height = height - MARGIN_TOP - MARGIN_BOTTOM};
    double xt[SVG_MAX_TICKS], yt[SVG_MAX_TICKS];
    const int nx = svg_nice_ticks(&x_lo, &x_hi, p.width > 400 ? 9 : 6, x_min_step, xt, &p.x_step);
    const int ny = svg_nice_ticks(&y_lo, &y_hi, 6, 0, yt, &p.y_step);
    p.x = (svg_scale){x_lo, x_hi, p.left, p.left + p.width};
    p.y = (svg_scale){y_lo, y_hi, p.top + p.height, p.top};
    axis_ticks(b, &p, false, xt, nx, p.x_step);
    axis_ticks(b, &p, true, yt, ny, p.y_step);
    svg_printf(b, "<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                  "stroke=\"#888888\"/>\n",
               p.left, p.top, p.width, p.height);
    svg_text(b, p.left, 20, "start", 14, title);
    svg_text(b, p.left + p.width / 2, height - 8, "middle", 12, x_title);
    svg_printf(b, "<text x=\"14\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222222\" "
                  "transform=\"rotate(-90 14 %.2f)\">",
               p.top + p.height / 2, p.top + p.height / 2);
    svg_escaped(b, y_title);
    svg_printf(b, "</text>\n");
    return p;
}

/* Ends a run of points: its polyline, or for a lone point (no line to draw) a dot in its place. */
static void flush_run(svg_buf *b, size_t start, size_t run, double x, double y, const char *color,
                      const char *css_class) {
    if (run == 1 && !b->oom) {
        b->len = start;
        b->data[start] = 0;
        svg_printf(b, "<circle class=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n", css_class, x, y,
                   color);
        return;
    }
    svg_printf(b, "\"/>\n");
}

size_t svg_polyline(svg_buf *b, const svg_plot *p, const double *x, const double *y, size_t n, const char *color,
                    const char *css_class) {
    size_t drawn = 0, run = 0, start = 0;
    double last_x = 0, last_y = 0;
    for (size_t i = 0; i <= n; i++) {
        const bool ok = i < n && isfinite(x[i]) && isfinite(y[i]);
        if (!ok) {
            if (run) flush_run(b, start, run, last_x, last_y, color, css_class);
            run = 0;
            continue;
        }
        last_x = svg_scale_map(&p->x, x[i]);
        last_y = svg_scale_map(&p->y, y[i]);
        if (run == 0) {
            start = b->len;
            svg_printf(b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", css_class,
                       color);
        }
        svg_printf(b, "%s%.2f,%.2f", run ? " " : "", last_x, last_y);
        run++;
        drawn++;
    }
    return drawn;
}

void svg_rect(svg_buf *b, double x, double y, double w, double h, const char *fill, const char *attrs,
              const char *tooltip) {
    svg_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"%s%s", x, y, w > 0 ? w : 0,
               h > 0 ? h : 0, fill, attrs && *attrs ? " " : "", attrs ? attrs : "");
    if (!tooltip) {
        svg_printf(b, "/>\n");
        return;
    }
    svg_printf(b, "><title>");
    svg_escaped(b, tooltip);
    svg_printf(b, "</title></rect>\n");
}

void svg_legend_item(svg_buf *b, double x, double y, const char *color, const char *name) {
    svg_rect(b, x, y - 9, 14, 10, color, "class=\"legend\" stroke=\"#999999\" stroke-width=\"0.5\"", NULL);
    svg_text(b, x + 19, y, "start", 11, name);
}
