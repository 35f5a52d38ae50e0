/* Gradient clipping against torch.nn.utils.clip_grad_norm_ (tests/fixtures/optim/
 * clip_grad_norm.safetensors), the split sum-of-squares path, hand-computed values, and the
 * handling of non-finite norms and bad arguments. */
#include "test_util.h"

#include "brigade/optim.h"

#define FIXTURE "tests/fixtures/optim/clip_grad_norm.safetensors"
#define MAX_BUFS 4

static const char *const cases[] = {"active", "inactive", "norm_only", "tiny"};

typedef struct clip_case {
    int n;
    float *in[MAX_BUFS], *out[MAX_BUFS], *work[MAX_BUFS], *split[MAX_BUFS];
    int64_t count[MAX_BUFS];
    float max_norm;
    float total;
} clip_case;

static bool load_case(const brg_safetensors *st, const char *name, clip_case *c) {
    memset(c, 0, sizeof *c);
    const char *meta = brg_safetensors_metadata(st, name);
    char max_norm[32];
    CHECK_MSG(meta && sscanf(meta, "max_norm=%31s n=%d", max_norm, &c->n) == 2 && c->n <= MAX_BUFS,
              "%s: bad metadata '%s'", name, meta ? meta : "(none)");
    if (!meta || c->n > MAX_BUFS) return false;
    c->max_norm = strtof(max_norm, NULL);
    char key[64];
    for (int i = 0; i < c->n; i++) {
        snprintf(key, sizeof key, "%s.in.%d", name, i);
        c->in[i] = test_read_f32(st, key, &c->count[i]);
        snprintf(key, sizeof key, "%s.out.%d", name, i);
        c->out[i] = test_read_f32(st, key, NULL);
        c->work[i] = malloc((size_t)c->count[i] * sizeof(float));
        c->split[i] = malloc((size_t)c->count[i] * sizeof(float));
        if (!c->in[i] || !c->out[i]) return false;
        memcpy(c->work[i], c->in[i], (size_t)c->count[i] * sizeof(float));
        memcpy(c->split[i], c->in[i], (size_t)c->count[i] * sizeof(float));
    }
    snprintf(key, sizeof key, "%s.total_norm", name);
    float *total = test_read_f32(st, key, NULL);
    c->total = total ? total[0] : NAN;
    free(total);
    return true;
}

static void free_case(clip_case *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->in[i]);
        free(c->out[i]);
        free(c->work[i]);
        free(c->split[i]);
    }
}

/* Two holders: buffers [0, n-1) and [n-1, n); their partial sums added give the same total. */
static void clip_split(clip_case *c, double *total) {
    double a = 0, b = 0;
    CHECK_OK(brg_grad_sum_squares((const float *const *)c->split, c->count, c->n - 1, &a));
    CHECK_OK(brg_grad_sum_squares((const float *const *)c->split + c->n - 1, c->count + c->n - 1, 1, &b));
    *total = sqrt(a + b);
    CHECK_OK(brg_clip_grad_norm_from_total(c->split, c->count, c->n - 1, c->max_norm, *total));
    CHECK_OK(brg_clip_grad_norm_from_total(c->split + c->n - 1, c->count + c->n - 1, 1, c->max_norm, *total));
}

static void check_case(const brg_safetensors *st, const char *name) {
    clip_case c;
    if (!load_case(st, name, &c)) {
        free_case(&c);
        return;
    }
    double total = 0, split_total = 0;
    CHECK_OK(brg_clip_grad_norm(c.work, c.count, c.n, c.max_norm, &total));
    clip_split(&c, &split_total);
    double norm_diff = fabs(total - c.total) / c.total, worst = 0;
    bool split_same = split_total == total;
    for (int i = 0; i < c.n; i++) {
        double d = test_max_abs_diff(c.work[i], c.out[i], (long)c.count[i]) / fmax(1e-30, test_max_abs(c.out[i], (long)c.count[i]));
        worst = fmax(worst, d);
        split_same = split_same && memcmp(c.work[i], c.split[i], (size_t)c.count[i] * sizeof(float)) == 0;
    }
    CHECK_MSG(norm_diff <= 1e-6, "%s: total norm %.9g vs torch %.9g", name, total, (double)c.total);
    CHECK_MSG(worst <= 1e-6, "%s: clipped gradients differ from torch by %.3g (relative to max)", name, worst);
    CHECK_MSG(split_same, "%s: split sum of squares does not reproduce the one-call result", name);
    printf("clip %-10s max_norm %-6g total %.7g (torch %.7g), grads max rel diff %.3g\n", name, (double)c.max_norm,
           total, (double)c.total, worst);
    free_case(&c);
}

static void check_fixture(void) {
    brg_safetensors *st = NULL;
    brg_status s = brg_safetensors_open(FIXTURE, &st);
    CHECK_MSG(s == BRG_OK, "%s", brg_last_error());
    if (s != BRG_OK) return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(st, cases[i]);
    brg_safetensors_close(st);
}

static void check_by_hand(void) {
    float a[2] = {3.0f, 0.0f}, b[1] = {4.0f};
    float *grads[2] = {a, b};
    int64_t counts[2] = {2, 1};
    double total = 0;
    CHECK_OK(brg_clip_grad_norm(grads, counts, 2, 1.0f, &total));
    CHECK(total == 5.0);
    float coef = 1.0f / (5.0f + 1e-6f);
    CHECK(a[0] == 3.0f * coef && a[1] == 0.0f && b[0] == 4.0f * coef);
    CHECK_NEAR(a[0], 0.6, 1e-6);
    CHECK_NEAR(b[0], 0.8, 1e-6);

    /* a norm equal to max_norm is still scaled, by 5/(5+1e-6), as torch does */
    a[0] = 3.0f, b[0] = 4.0f;
    CHECK_OK(brg_clip_grad_norm(grads, counts, 2, 5.0f, &total));
    CHECK(a[0] < 3.0f && a[0] > 2.9999f);
    CHECK(brg_clip_coef(5.0f, 4.0) == 1.0f);
    CHECK(brg_clip_coef(INFINITY, 1e30) == 1.0f);

    /* nothing to clip: an empty list has norm 0 */
    CHECK_OK(brg_clip_grad_norm(NULL, NULL, 0, 1.0f, &total));
    CHECK(total == 0.0);
}

static void check_non_finite(void) {
    float a[3] = {1.0f, INFINITY, 2.0f}, b[2] = {NAN, 1.0f};
    float *grads[1] = {a};
    int64_t counts[1] = {3};
    double total = 0;
    CHECK_OK(brg_clip_grad_norm(grads, counts, 1, 1.0f, &total));
    CHECK(isinf(total));
    CHECK(a[0] == 1.0f && isinf(a[1]) && a[2] == 2.0f);
    grads[0] = b;
    counts[0] = 2;
    CHECK_OK(brg_clip_grad_norm(grads, counts, 1, 1.0f, &total));
    CHECK(isnan(total) && b[1] == 1.0f);
    CHECK(brg_clip_coef(1.0f, NAN) == 1.0f);
}

static void check_bad_arguments(void) {
    float a[2] = {1, 2};
    float *grads[1] = {a};
    int64_t counts[1] = {2}, bad_counts[1] = {-1};
    double total;
    CHECK_ERR(brg_clip_grad_norm(grads, counts, 1, 0.0f, &total), BRG_ERR_INVALID_ARG, "max_norm must be > 0");
    CHECK_ERR(brg_clip_grad_norm(grads, counts, 1, -1.0f, &total), BRG_ERR_INVALID_ARG, "max_norm");
    CHECK_ERR(brg_clip_grad_norm(grads, counts, 1, NAN, &total), BRG_ERR_INVALID_ARG, "max_norm");
    CHECK_ERR(brg_clip_grad_norm(grads, bad_counts, 1, 1.0f, &total), BRG_ERR_INVALID_ARG, "negative size");
    CHECK_ERR(brg_clip_grad_norm_from_total(grads, counts, 1, 0.0f, 1.0), BRG_ERR_INVALID_ARG, "max_norm");
    grads[0] = NULL;
    CHECK_ERR(brg_grad_sum_squares((const float *const *)grads, counts, 1, &total), BRG_ERR_INVALID_ARG,
              "gradient 0 is NULL");
    CHECK(a[0] == 1 && a[1] == 2);
}

int main(void) {
    check_fixture();
    check_by_hand();
    check_non_finite();
    check_bad_arguments();
    return test_finish();
}
