/* A minimal test harness: CHECK records a failure and continues; the test's main returns
 * test_finish(), which prints "N passed, N failed" and is non-zero when anything failed. */
#ifndef BRIGADE_TEST_UTIL_H
#define BRIGADE_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/brigade.h"

static int test_passed_ = 0;
static int test_failed_ = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            test_passed_++;                                                      \
        } else {                                                                 \
            test_failed_++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                     \
    do {                                                                         \
        if (cond) {                                                              \
            test_passed_++;                                                      \
        } else {                                                                 \
            test_failed_++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* Expects a brigade call to succeed; prints brg_last_error() when it does not. */
#define CHECK_OK(expr)                                                           \
    do {                                                                         \
        brg_status s_ = (expr);                                                  \
        CHECK_MSG(s_ == BRG_OK, "%s -> %s: %s", #expr, brg_status_name(s_),      \
                  brg_last_error());                                             \
    } while (0)

/* Expects a specific failure whose message contains `needle`. */
#define CHECK_ERR(expr, status, needle)                                          \
    do {                                                                         \
        brg_status s_ = (expr);                                                  \
        CHECK_MSG(s_ == (status) && strstr(brg_last_error(), (needle)) != NULL,  \
                  "%s -> %s: '%s' (wanted %s containing '%s')", #expr,           \
                  brg_status_name(s_), brg_last_error(), brg_status_name(status), \
                  needle);                                                       \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double a_ = (a), b_ = (b);                                               \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%s = %.9g vs %s = %.9g (tol %g)", #a,  \
                  a_, #b, b_, (double)(tol));                                    \
    } while (0)

/* Largest |a[i] - b[i]|. */
static inline double test_max_abs_diff(const float *a, const float *b, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

static inline double test_max_abs(const float *a, long n) {
    double m = 0;
    for (long i = 0; i < n; i++)
        if (fabs(a[i]) > m) m = fabs(a[i]);
    return m;
}

/* brg_tensor_map_put for building a test's batch: a put that fails counts as a failed check (one
 * that succeeds counts nothing, so building a batch adds no checks). */
#define TEST_PUT(map, name, t) test_put_((map), (name), (t), __FILE__, __LINE__)
static inline void test_put_(brg_tensor_map *m, const char *name, brg_tensor *t, const char *file, int line) {
    brg_status s = brg_tensor_map_put(m, name, t);
    if (s == BRG_OK) return;
    test_failed_++;
    fprintf(stderr, "FAIL %s:%d: putting %s: %s: %s\n", file, line, name, brg_status_name(s), brg_last_error());
}

/* A map of the (name, tensor) pairs given, e.g. TEST_MAP("input_ids", &ids, "labels", &labels);
 * a NULL tensor leaves its name out. Puts that fail count as failed checks (TEST_PUT). */
#define TEST_MAP(...) test_map_(__FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)
static inline brg_tensor_map test_map_(const char *file, int line, ...) {
    brg_tensor_map m = {0};
    va_list ap;
    va_start(ap, line);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;) {
        brg_tensor *t = va_arg(ap, brg_tensor *);
        test_put_(&m, name, t, file, line);
    }
    va_end(ap);
    return m;
}

/* A scratch directory for files a test writes (created if missing). */
static inline const char *test_tmp_dir(void) {
    const char *d = getenv("BRIGADE_TEST_TMP");
    if (!d || !*d) d = "/tmp/brigade-test";
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "cannot create %s\n", d);
    return d;
}

/* A stored tensor as a malloc'd contiguous float buffer (any float dtype converted); NULL, with a
 * failed check, when the file lacks it. *numel (may be NULL) receives its size. */
static inline float *test_read_f32(const brg_safetensors *st, const char *name, int64_t *numel) {
    brg_tensor t;
    brg_status s = brg_safetensors_get(st, name, &t);
    CHECK_MSG(s == BRG_OK, "%s", brg_last_error());
    if (s != BRG_OK) return NULL;
    int64_t n = brg_tensor_numel(&t);
    float *buf = malloc((size_t)(n ? n : 1) * sizeof(float));
    brg_tensor dst = brg_tensor_wrap(BRG_DTYPE_F32, t.ndim, t.shape, buf);
    CHECK_OK(brg_tensor_copy(&dst, &t));
    if (numel) *numel = n;
    return buf;
}

/* Copies the model inputs a transformers fixture holds (by their transformers names) into a
 * safetensors file of their own, as `brigade forward --inputs` and `brigade train --data` take
 * them; returns their rows (the batch), or -1 when the file cannot be written. */
static inline int64_t test_write_fixture_inputs(const brg_safetensors *exp, const char *path) {
    static const char *const names[] = {"input_ids",    "attention_mask",    "token_type_ids",
                                        "pixel_values", "decoder_input_ids", "decoder_attention_mask",
                                        "labels",       "start_positions",   "end_positions"};
    enum { N = sizeof names / sizeof names[0] };
    brg_named_tensor list[N];
    brg_tensor views[N];
    size_t n = 0;
    for (size_t i = 0; i < N; i++) {
        if (!brg_safetensors_has(exp, names[i])) continue;
        CHECK_OK(brg_safetensors_get(exp, names[i], &views[n]));
        list[n] = (brg_named_tensor){names[i], &views[n]};
        n++;
    }
    brg_status st = brg_safetensors_write(path, list, n, NULL, 0);
    CHECK_OK(st);
    return st != BRG_OK ? -1 : n ? views[0].shape[0] : 0;
}

/* Checks the gradient a taped graph left in p->grad against central differences (step 1e-2) of
 * the graph's scalar output, recomputed on a grad-disabled tape in `arena` (what each pass
 * allocates is released). Passes when every entry is within atol + 1e-2 max|grad|. */
typedef brg_tensor *(*test_graph_fn)(brg_tape *tape, void *graph);
static inline void test_graph_gradcheck(brg_arena *arena, test_graph_fn forward, void *graph, brg_tensor *p,
                                        const char *what, double atol) {
    float *d = p->data;
    double maxg = test_max_abs(p->grad, (long)brg_tensor_numel(p)), worst = 0;
    const float h = 1e-2f;
    for (int64_t i = 0; i < brg_tensor_numel(p); i++) {
        float keep = d[i];
        size_t mark = brg_arena_mark(arena);
        brg_tape *tape;
        CHECK_OK(brg_tape_create(arena, &tape));
        brg_tape_set_grad_enabled(tape, false);
        d[i] = keep + h;
        double up = ((float *)forward(tape, graph)->data)[0];
        d[i] = keep - h;
        double down = ((float *)forward(tape, graph)->data)[0];
        d[i] = keep;
        brg_tape_destroy(tape);
        brg_arena_reset(arena, mark);
        double diff = fabs((up - down) / (2 * h) - p->grad[i]);
        if (diff > worst) worst = diff;
    }
    CHECK_MSG(worst <= atol + 1e-2 * maxg, "%s: finite differences differ by %g (max grad %g)", what, worst, maxg);
}

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

#endif
