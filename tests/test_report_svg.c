/* The report's SVG primitives (src/report/svg.h): linear scales, round tick choice, tick labels,
 * escaping of text, polylines broken at NaN, empty and all-NaN series; and the plots' notes
 * when their data is missing. */
#include "report/report.h"
#include "report/svg.h"
#include "test_util.h"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay ? strstr(hay, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_scale(void) {
    const svg_scale s = {0, 10, 100, 200};
    CHECK_NEAR(svg_scale_map(&s, 5), 150, 1e-12);
    CHECK_NEAR(svg_scale_map(&s, 0), 100, 1e-12);
    CHECK_NEAR(svg_scale_map(&s, 12), 220, 1e-12);
    const svg_scale flipped = {0, 1, 300, 30}; /* SVG's y grows downwards */
    CHECK_NEAR(svg_scale_map(&flipped, 1), 30, 1e-12);
    const svg_scale empty = {3, 3, 10, 20};
    CHECK_NEAR(svg_scale_map(&empty, 3), 15, 1e-12);
    CHECK_NEAR(svg_scale_map(&empty, 1e9), 15, 1e-12);
}

static void test_ticks(void) {
    double t[SVG_MAX_TICKS], step, lo = 0, hi = 1;
    int n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n == 6);
    CHECK_NEAR(step, 0.2, 1e-12);
    CHECK_NEAR(t[0], 0, 0);
    CHECK_NEAR(t[5], 1, 1e-12);
    lo = 0.3, hi = 5.4; /* step 1 would need 7 ticks */
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n == 4);
    CHECK_NEAR(step, 2, 0);
    CHECK_NEAR(lo, 0, 0);
    CHECK_NEAR(hi, 6, 0);
    CHECK_NEAR(t[3], 6, 0);
    lo = 1, hi = 5; /* step numbers: no half steps */
    n = svg_nice_ticks(&lo, &hi, 9, 1, t, &step);
    CHECK(n == 5);
    CHECK_NEAR(step, 1, 0);
    lo = 1, hi = 5;
    n = svg_nice_ticks(&lo, &hi, 9, 0, t, &step);
    CHECK(n == 9 && step == 0.5);
    lo = 0.00021, hi = 0.00099; /* learning rates */
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n >= 2 && n <= 6 && lo <= 0.00021 && hi >= 0.00099);
    lo = hi = 3; /* one value: a band around it */
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n >= 2 && lo < 3 && hi > 3 && step > 0);
    lo = hi = 0;
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n >= 2 && lo < 0 && hi > 0);
    lo = NAN, hi = 4; /* no data: the unit range */
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(n >= 2 && lo == 0 && hi == 1);
    lo = 5, hi = -5; /* reversed */
    n = svg_nice_ticks(&lo, &hi, 6, 0, t, &step);
    CHECK(lo <= -5 && hi >= 5 && n <= 6);
    lo = -7, hi = 1e6; /* a wide range stays within the cap */
    n = svg_nice_ticks(&lo, &hi, 40, 0, t, &step);
    CHECK(n >= 2 && n <= SVG_MAX_TICKS);
}

static void test_labels(void) {
    char b[48];
    svg_tick_label(0.25, 0.05, b, sizeof b);
    CHECK(strcmp(b, "0.25") == 0);
    svg_tick_label(600, 100, b, sizeof b);
    CHECK(strcmp(b, "600") == 0);
    svg_tick_label(0.4, 0.2, b, sizeof b);
    CHECK(strcmp(b, "0.4") == 0);
    svg_tick_label(1e-5, 1e-6, b, sizeof b);
    CHECK(strcmp(b, "1e-05") == 0);
    svg_tick_label(-1e-17, 0.5, b, sizeof b); /* no "-0.0" from rounding */
    CHECK(strcmp(b, "0.0") == 0);
    svg_tick_label(2e6, 1e6, b, sizeof b);
    CHECK(strcmp(b, "2e+06") == 0);
}

static void test_escaping(void) {
    svg_buf b = {0};
    svg_escaped(&b, "a<b & \"c\" 'd'>\x01\x1f\tz");
    CHECK(b.data && strcmp(b.data, "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\tz") == 0);
    svg_buf_free(&b);
    svg_begin(&b, "x\"y", 100, 50, "<loss> & lr");
    svg_text(&b, 1, 2, "start", 10, "</svg>");
    svg_end(&b);
    CHECK(count(b.data, "<svg ") == 1 && count(b.data, "</svg>") == 1);
    CHECK(strstr(b.data, "id=\"x&quot;y\"") != NULL);
    CHECK(strstr(b.data, "<title>&lt;loss&gt; &amp; lr</title>") != NULL);
    CHECK(strstr(b.data, "&lt;/svg&gt;") != NULL);
    svg_buf_free(&b);
}

static void test_finite_range(void) {
    double lo = 0, hi = 0;
    const double v[] = {NAN, 3, -INFINITY, -2, 7, NAN};
    CHECK(svg_finite_range(v, 6, &lo, &hi) && lo == -2 && hi == 7);
    const double none[] = {NAN, INFINITY};
    CHECK(!svg_finite_range(none, 2, &lo, &hi));
    CHECK(!svg_finite_range(NULL, 0, &lo, &hi));
}

static void test_polyline(void) {
    svg_buf b = {0};
    svg_plot p = svg_axes(&b, 400, 300, 1, 5, 1, 0, 5, "t", "step", "loss");
    CHECK(p.x_step >= 1);
    CHECK(svg_scale_map(&p.y, p.y.d1) < svg_scale_map(&p.y, p.y.d0)); /* up is up */
    svg_buf_free(&b);
    const double x[] = {1, 2, 3, 4, 5}, y[] = {1, NAN, 3, 4, 5};
    CHECK(svg_polyline(&b, &p, x, y, 5, "#000", "s") == 4);
    CHECK(count(b.data, "<polyline") == 1); /* 3, 4, 5 */
    CHECK(count(b.data, "<circle") == 1);   /* the lone first point */
    CHECK(count(b.data, "points=\"") == 1);
    svg_buf_free(&b);
    const double gaps[] = {1, 2, INFINITY, 4, 5}; /* two lines, no dot */
    CHECK(svg_polyline(&b, &p, x, gaps, 5, "#000", "s") == 4);
    CHECK(count(b.data, "<polyline") == 2 && count(b.data, "<circle") == 0);
    svg_buf_free(&b);
    CHECK(svg_polyline(&b, &p, x, y, 0, "#000", "s") == 0); /* empty */
    CHECK(b.len == 0);
    const double nans[] = {NAN, NAN, NAN};
    CHECK(svg_polyline(&b, &p, x, nans, 3, "#000", "s") == 0);
    CHECK(b.len == 0);
    svg_buf_free(&b);
}

/* Missing data: no plot, a note that says what to pass. */
static void test_notes(void) {
    char note[512];
    svg_buf b = {0};
    report_inputs none = {0};
    CHECK(!report_plot_loss(&none, 600, 300, &b, note, sizeof note) && strstr(note, "--log FILE"));
    CHECK(!report_plot_gantt(&none, 600, 300, &b, note, sizeof note) && strstr(note, "--trace FILE.json"));
    CHECK(!report_plot_memory(&none, 600, 300, &b, note, sizeof note) && strstr(note, "--trace"));
    report_log empty = {0};
    snprintf(empty.source, sizeof empty.source, "run.jsonl");
    const report_inputs with_empty = {.log = &empty};
    CHECK(!report_plot_lr(&with_empty, 600, 300, &b, note, sizeof note) && strstr(note, "run.jsonl"));
    CHECK(b.len == 0);
    /* A loss series of NaN only draws nothing either. */
    double xs[] = {1, 2}, ys[] = {NAN, NAN};
    report_log nan_log = {.loss = {xs, ys, 2, 2}};
    const report_inputs with_nan = {.log = &nan_log};
    CHECK(!report_plot_loss(&with_nan, 600, 300, &b, note, sizeof note));
    double ok[] = {5.5, 4.0};
    nan_log.loss.y = ok;
    CHECK(report_plot_loss(&with_nan, 600, 300, &b, note, sizeof note));
    CHECK(count(b.data, "<polyline class=\"series loss\"") == 1 && count(b.data, "</svg>") == 1);
    svg_buf_free(&b);
}

int main(void) {
    test_scale();
    test_ticks();
    test_labels();
    test_escaping();
    test_finite_range();
    test_polyline();
    test_notes();
    return test_finish();
}
