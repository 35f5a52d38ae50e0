/* Cross-entropy (ignore_index, mean over counted rows, all-ignored) and dropout (counter-based
 * mask: reproducible, keep rate, backward uses the forward mask). */
#include "test_kernels_util.h"

/* ---- cross-entropy --------------------------------------------------------------------- */

typedef struct ce_ctx {
    float *logits, *lse;
    int32_t *targets;
    int64_t n, v, count;
    int32_t ignore;
    double r; /* L = r * loss */
} ce_ctx;

static double ce_loss(void *p) {
    ce_ctx *c = p;
    return c->r * brg_k_cross_entropy_fwd(c->lse, &c->count, c->logits, c->targets, c->n, c->v, c->ignore);
}

static void test_cross_entropy(void) {
    const int64_t n = 7, v = 11;
    int32_t targets[7] = {3, -100, 0, 10, -100, 10, 5};
    ce_ctx c = {tk_rand(n * v, -3, 3), tk_zeros(n), targets, n, v, 0, -100, 0.7};
    float loss = brg_k_cross_entropy_fwd(c.lse, &c.count, c.logits, targets, n, v, -100);
    CHECK(c.count == 5);
    double want = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (targets[i] == -100) continue;
        double sum = 0.0;
        for (int64_t j = 0; j < v; j++) sum += exp(c.logits[i * v + j]);
        want += log(sum) - c.logits[i * v + targets[i]];
        CHECK_NEAR(c.lse[i], log(sum), 2e-6);
    }
    CHECK_NEAR(loss, want / 5, 1e-6);

    float *dl = tk_zeros(n * v);
    brg_k_cross_entropy_bwd(dl, false, (float)c.r, c.logits, c.lse, targets, n, v, -100, c.count);
    tk_gradcheck("cross_entropy dlogits", &c, ce_loss, c.logits, n * v, dl);
    CHECK(dl[1 * v + 4] == 0.0f && dl[4 * v] == 0.0f); /* ignored rows get no gradient */
    float *p = tk_rand(n * v, -1, 1), *a = tk_copy(p, n * v);
    brg_k_cross_entropy_bwd(a, false, (float)c.r, c.logits, c.lse, targets, n, v, -100, c.count);
    tk_check_accumulated("cross_entropy dlogits", a, p, dl, n * v);
    brg_k_cross_entropy_bwd(NULL, false, 1.0f, c.logits, c.lse, targets, n, v, -100, c.count);
    /* overwrite: over NaNs, and over the logits themselves, exactly the gradient added into zeros
     * (ignored rows written as zeros) */
    float *o = tk_zeros(n * v), *in_place = tk_copy(c.logits, n * v);
    for (int64_t i = 0; i < n * v; i++) o[i] = NAN;
    brg_k_cross_entropy_bwd(o, true, (float)c.r, c.logits, c.lse, targets, n, v, -100, c.count);
    CHECK_MSG(memcmp(o, dl, (size_t)(n * v) * sizeof *o) == 0, "cross_entropy overwrite differs from adding into 0");
    brg_k_cross_entropy_bwd(in_place, true, (float)c.r, in_place, c.lse, targets, n, v, -100, c.count);
    CHECK_MSG(memcmp(in_place, dl, (size_t)(n * v) * sizeof *o) == 0, "cross_entropy over its logits differs");
    free(o), free(in_place);
    free(p), free(a), free(dl), free(c.logits), free(c.lse);
}

static void test_cross_entropy_all_ignored(void) {
    int32_t targets[3] = {-1, -1, -1};
    float *logits = tk_rand(3 * 4, -1, 1), lse[3], dl[12] = {0};
    int64_t count = 99;
    float loss = brg_k_cross_entropy_fwd(lse, &count, logits, targets, 3, 4, -1);
    CHECK(loss == 0.0f && count == 0);
    brg_k_cross_entropy_bwd(dl, false, 1.0f, logits, lse, targets, 3, 4, -1, count);
    CHECK(test_max_abs(dl, 12) == 0.0);
    for (int i = 0; i < 12; i++) dl[i] = NAN;
    brg_k_cross_entropy_bwd(dl, true, 1.0f, logits, lse, targets, 3, 4, -1, count); /* written as zeros */
    CHECK(test_max_abs(dl, 12) == 0.0);
    count = 99;
    CHECK(brg_k_cross_entropy_fwd(lse, &count, logits, targets, 0, 4, -1) == 0.0f && count == 0);
    free(logits);
}

/* Large logits over a GPT-2-sized vocabulary: no overflow, loss to 1e-5 of a double computation. */
static void test_cross_entropy_large_vocab(void) {
    const int64_t n = 3, v = 50257;
    float *logits = tk_rand(n * v, -20, 20), lse[3];
    int32_t targets[3] = {0, 50256, 12345};
    logits[5] += 1000.0f;
    int64_t count;
    float loss = brg_k_cross_entropy_fwd(lse, &count, logits, targets, n, v, -100);
    double want = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < v; j++) mx = fmax(mx, logits[i * v + j]);
        for (int64_t j = 0; j < v; j++) sum += exp(logits[i * v + j] - mx);
        want += mx + log(sum) - logits[i * v + targets[i]];
    }
    CHECK(count == 3);
    CHECK_NEAR(loss, want / 3, 1e-5 * fmax(1.0, fabs(want / 3)));
    free(logits);
}

/* ---- dropout --------------------------------------------------------------------------- */

typedef struct drop_ctx {
    float *y, *x, *r;
    int64_t n;
    float p;
    uint64_t seed, offset;
} drop_ctx;

static double drop_loss(void *q) {
    drop_ctx *c = q;
    brg_k_dropout_fwd(c->y, c->x, c->n, c->p, c->seed, c->offset);
    return tk_dot(c->y, c->r, c->n);
}

static void test_dropout_mask(void) {
    const int64_t n = 100000;
    const float p = 0.1f;
    int64_t kept = 0, same = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        bool k = brg_k_dropout_keep(p, 42, (uint64_t)i);
        kept += k;
        same += k == brg_k_dropout_keep(p, 42, (uint64_t)i);
        differ += k != brg_k_dropout_keep(p, 43, (uint64_t)i);
    }
    double rate = (double)kept / n; /* binomial sd is ~0.001 */
    CHECK_MSG(fabs(rate - 0.9) < 0.005, "keep rate %.4f, want 0.9", rate);
    CHECK(same == n);
    /* Independent masks disagree on 2 p (1 - p) = 18% of elements. */
    CHECK_MSG(fabs((double)differ / n - 0.18) < 0.01, "seeds 42/43 differ on %.4f", (double)differ / n);
    int64_t kept5 = 0;
    for (int64_t i = 0; i < n; i++) kept5 += brg_k_dropout_keep(0.5f, 7, (uint64_t)i);
    CHECK_MSG(fabs((double)kept5 / n - 0.5) < 0.006, "keep rate at p=0.5: %.4f", (double)kept5 / n);
}

static void test_dropout_fwd_bwd(void) {
    const int64_t n = 1001;
    const float p = 0.3f;
    drop_ctx c = {tk_zeros(n), tk_rand(n, 0.5, 1.5), tk_rand(n, -1, 1), n, p, 1234, 77};
    brg_k_dropout_fwd(c.y, c.x, n, p, c.seed, c.offset);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        bool keep = brg_k_dropout_keep(p, c.seed, c.offset + (uint64_t)i);
        ok &= keep ? fabsf(c.y[i] - c.x[i] / (1 - p)) < 1e-6f : c.y[i] == 0.0f;
    }
    CHECK_MSG(ok, "dropout forward does not follow brg_k_dropout_keep at offset + i");

    /* The offset selects a window of one stream: a second call at offset + 500 matches. */
    float *tail = tk_zeros(n);
    brg_k_dropout_fwd(tail, c.x + 500, n - 500, p, c.seed, c.offset + 500);
    CHECK(test_max_abs_diff(tail, c.y + 500, n - 500) == 0.0);

    float *dx = tk_zeros(n);
    brg_k_dropout_bwd(dx, false, c.r, n, p, c.seed, c.offset);
    tk_gradcheck("dropout dx", &c, drop_loss, c.x, n, dx);
    ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= (dx[i] == 0.0f) == (c.y[i] == 0.0f);
    CHECK_MSG(ok, "dropout backward mask differs from forward");
    float *pre = tk_rand(n, -1, 1), *acc = tk_copy(pre, n);
    brg_k_dropout_bwd(acc, false, c.r, n, p, c.seed, c.offset);
    tk_check_accumulated("dropout dx", acc, pre, dx, n);
    /* overwrite: what dx held (NaN) is replaced, for every p */
    const float ps[3] = {p, 0.0f, 1.0f};
    for (int k = 0; k < 3; k++) {
        float *want = tk_zeros(n);
        brg_k_dropout_bwd(want, false, c.r, n, ps[k], c.seed, c.offset);
        for (int64_t i = 0; i < n; i++) acc[i] = NAN;
        brg_k_dropout_bwd(acc, true, c.r, n, ps[k], c.seed, c.offset);
        CHECK_MSG(memcmp(acc, want, n * sizeof(float)) == 0, "dropout dx overwrite, p = %g", ps[k]);
        free(want);
    }

    /* p == 0 copies (and passes gradients through); p == 1 zeroes. */
    brg_k_dropout_fwd(tail, c.x, n, 0.0f, 9, 0);
    CHECK(test_max_abs_diff(tail, c.x, n) == 0.0);
    memcpy(acc, pre, n * sizeof(float));
    brg_k_dropout_bwd(acc, false, c.r, n, 0.0f, 9, 0);
    tk_check_accumulated("dropout p=0 dx", acc, pre, c.r, n);
    brg_k_dropout_fwd(tail, c.x, n, 1.0f, 9, 0);
    CHECK(test_max_abs(tail, n) == 0.0);
    memcpy(acc, pre, n * sizeof(float));
    brg_k_dropout_bwd(acc, false, c.r, n, 1.0f, 9, 0);
    CHECK(test_max_abs_diff(acc, pre, n) == 0.0);
    brg_k_dropout_bwd(NULL, false, c.r, n, p, 9, 0);
    free(pre), free(acc), free(dx), free(tail), free(c.y), free(c.x), free(c.r);
}

int main(void) {
    tk_seed(4);
    test_cross_entropy();
    test_cross_entropy_all_ignored();
    test_cross_entropy_large_vocab();
    test_dropout_mask();
    test_dropout_fwd_bwd();
    return test_finish();
}
