/* The vectorised row primitives (kernels/simd.h) and the kernels built on them: the AVX-512 path
 * against the scalar path and against double-precision references, over lengths that exercise
 * every masked tail, with guard entries after each row, and on inf/NaN/extreme inputs. On a CPU
 * without AVX-512 only the scalar path runs. */
#include <float.h>
#include <stdbool.h>

#include "kernels/gemm_avx512.h"
#include "kernels/simd.h"
#include "test_kernels_util.h"

static bool have_avx512;

/* Lengths covering empty rows, every tail of a 16-wide step, and a long row. */
static const int64_t LENGTHS[] = {0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 50257};
#define N_LENGTHS ((int)(sizeof LENGTHS / sizeof LENGTHS[0]))
#define GUARD 12345.0f

/* Relative distance in units of float epsilon. */
static double ulps(double got, double want) {
    if (got == want) return 0.0;
    return fabs(got - want) / (fabs(want) * FLT_EPSILON);
}

static void use_scalar(bool scalar) { brg_simd_force_scalar(scalar); }

/* exp over [-100, 88] and at the edges, against double exp. */
static void test_exp_accuracy(void) {
    const int64_t n = 200000;
    float *x = tk_zeros(n), *y = tk_zeros(n);
    for (int64_t i = 0; i < n; i++) x[i] = -100.0f + 188.0f * (float)i / (float)(n - 1);
    for (int pass = 0; pass < 2; pass++) {
        use_scalar(pass == 1);
        double sum = brg_simd_exp_sum(y, x, 0.0f, n), want_sum = 0.0, worst = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double want = exp((double)x[i]);
            want_sum += (double)(float)want;
            if (want >= FLT_MIN) worst = fmax(worst, ulps(y[i], want));
            else /* subnormal results: within two steps of the subnormal spacing */
                CHECK_MSG(fabs(y[i] - want) <= 3e-45, "exp(%g) = %g, want %g", x[i], y[i], want);
        }
        CHECK_MSG(worst <= 2.0, "%s exp: %.2f ulp", pass ? "scalar" : "avx512", worst);
        CHECK_MSG(fabs(sum - want_sum) <= 1e-6 * want_sum, "exp sum %.9g, want %.9g", sum, want_sum);
    }
    use_scalar(false);
    free(x);
    free(y);
}

static void test_exp_special_values(void) {
    const float in[] = {-INFINITY, INFINITY, NAN, 89.0f, 88.5f, -104.0f, -87.0f, 0.0f, -0.0f, -FLT_MAX, FLT_MAX};
    const int64_t n = (int64_t)(sizeof in / sizeof in[0]);
    float out[sizeof in / sizeof in[0]];
    brg_simd_exp_sum(out, in, 0.0f, n);
    CHECK(out[0] == 0.0f);
    CHECK(isinf(out[1]) && out[1] > 0);
    CHECK(isnan(out[2]));
    CHECK(isinf(out[3]));
    CHECK(ulps(out[4], exp(88.5)) <= 2.0);
    CHECK(out[5] >= 0.0f && out[5] < 1e-44f);
    CHECK(ulps(out[6], exp(-87.0)) <= 2.0);
    CHECK(out[7] == 1.0f && out[8] == 1.0f);
    CHECK(out[9] == 0.0f && isinf(out[10]));
}

/* Each primitive on both paths, on every length, writing nothing past the row. */
static void test_rows_match_scalar(void) {
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = LENGTHS[li];
        float *x = tk_rand(n + 1, -30.0, 10.0);
        float *ya = tk_zeros(n + 1), *ys = tk_zeros(n + 1), *da = tk_rand(n + 1, -1.0, 1.0), *ds = tk_copy(da, n + 1);
        ya[n] = ys[n] = da[n] = ds[n] = GUARD;
        double sa, ss, qa, qs;
        float ma, ms;
        for (int pass = 0; pass < 2; pass++) {
            use_scalar(pass == 1);
            float *y = pass ? ys : ya, *d = pass ? ds : da;
            float mx = brg_simd_max(x, n);
            double s = brg_simd_exp_sum(y, x, mx, n);
            brg_simd_exp_axpy(d, x, mx, 0.25f, n);
            double q = brg_simd_sum_squares(x, n);
            if (pass) ms = mx, ss = s, qs = q;
            else ma = mx, sa = s, qa = q;
        }
        use_scalar(false);
        double ref_q = 0.0;
        float ref_max = -INFINITY;
        for (int64_t i = 0; i < n; i++) ref_q += (double)x[i] * x[i], ref_max = fmaxf(ref_max, x[i]);
        CHECK_MSG(ma == ref_max && ms == ref_max, "n=%lld: max %g / %g, want %g", (long long)n, ma, ms, ref_max);
        CHECK_MSG(fabs(sa - ss) <= 1e-6 * ss, "n=%lld: exp sums %.9g vs %.9g", (long long)n, sa, ss);
        CHECK_MSG(fabs(qa - ref_q) <= 1e-12 * ref_q && fabs(qs - ref_q) <= 1e-12 * ref_q,
                  "n=%lld: sum of squares %.17g / %.17g, want %.17g", (long long)n, qa, qs, ref_q);
        double worst = 0.0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fmax(ulps(ya[i], ys[i]), ulps(da[i], ds[i]) * 0.25));
        CHECK_MSG(worst <= 4.0, "n=%lld: rows differ by %.2f ulp", (long long)n, worst);
        CHECK(ya[n] == GUARD && ys[n] == GUARD && da[n] == GUARD && ds[n] == GUARD);
        free(x), free(ya), free(ys), free(da), free(ds);
    }
}

/* Dropout: the AVX-512 masks and values are the scalar path's bit for bit, in place or not,
 * from any offset, and forward keeps exactly the elements brg_k_dropout_keep says. */
static void test_dropout_paths_agree(void) {
    const float ps[] = {0.1f, 0.5f, 0.9f, 1e-8f, 0.99999994f};
    const uint64_t offsets[] = {0, 3, 1000003};
    for (int pi = 0; pi < 5; pi++)
        for (int oi = 0; oi < 3; oi++)
            for (int li = 0; li < N_LENGTHS; li++) {
                const int64_t n = LENGTHS[li];
                const float p = ps[pi];
                const uint64_t off = offsets[oi], seed = 77 + (uint64_t)li;
                float *x = tk_rand(n + 1, -2.0, 2.0), *g = tk_rand(n + 1, -1.0, 1.0);
                float *fa = tk_zeros(n + 1), *fs = tk_zeros(n + 1), *ba = tk_rand(n + 1, -1.0, 1.0);
                float *bs = tk_copy(ba, n + 1), *inplace = tk_copy(x, n + 1);
                fa[n] = fs[n] = ba[n] = bs[n] = inplace[n] = GUARD;
                use_scalar(true);
                brg_k_dropout_fwd(fs, x, n, p, seed, off);
                brg_k_dropout_bwd(bs, g, n, p, seed, off);
                use_scalar(false);
                brg_k_dropout_fwd(fa, x, n, p, seed, off);
                brg_k_dropout_bwd(ba, g, n, p, seed, off);
                brg_k_dropout_fwd(inplace, inplace, n, p, seed, off);
                CHECK_MSG(memcmp(fa, fs, (size_t)(n + 1) * sizeof *fa) == 0 &&
                              memcmp(ba, bs, (size_t)(n + 1) * sizeof *ba) == 0 &&
                              memcmp(inplace, fa, (size_t)(n + 1) * sizeof *fa) == 0,
                          "dropout p=%g offset=%llu n=%lld: paths differ", p, (unsigned long long)off, (long long)n);
                int64_t wrong = 0;
                for (int64_t i = 0; i < n; i++)
                    wrong += (fs[i] != 0.0f) != brg_k_dropout_keep(p, seed, off + (uint64_t)i);
                CHECK_MSG(wrong == 0, "dropout p=%g: %lld elements disagree with brg_k_dropout_keep", p, (long long)wrong);
                free(x), free(g), free(fa), free(fs), free(ba), free(bs), free(inplace);
            }
}

/* GELU and its derivative in double, for the tanh or the erf form. */
static void gelu_ref(brg_gelu_kind kind, double v, double *y, double *d) {
    if (kind == BRG_GELU_TANH) {
        double u = 0.7978845608028654 * (v + 0.044715 * v * v * v), t = tanh(u);
        *y = 0.5 * v * (1.0 + t);
        *d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);
    } else {
        double cdf = 0.5 * erfc(-v / sqrt(2.0)), pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
        *y = v * cdf;
        *d = cdf + v * pdf;
    }
}

/* GELU, both forms: both paths against double references. Forward errors are measured against
 * |x| (the output is x times a probability, and for negative x the scalar erf form's 1 + erf
 * cancels down to that scale); the derivative crosses zero near x = -0.75, where its float sum
 * cancels, so it is compared absolutely (its terms reach ~10 for |x| < 12). */
static void test_gelu_paths(brg_gelu_kind kind) {
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = LENGTHS[li];
        float *x = tk_rand(n + 1, -12.0, 12.0), *dy = tk_rand(n + 1, -1.0, 1.0);
        if (n > 4) x[0] = -60.0f, x[1] = 60.0f, x[2] = 0.0f, x[3] = -1e-6f;
        for (int pass = 0; pass < 2; pass++) {
            use_scalar(pass == 1);
            float *y = tk_zeros(n + 1), *dx = tk_zeros(n + 1);
            y[n] = dx[n] = GUARD;
            brg_k_gelu_fwd(y, x, n, kind);
            brg_k_gelu_bwd(dx, dy, x, n, kind);
            double worst_y = 0.0, worst_d = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double want_y, want_d;
                gelu_ref(kind, x[i], &want_y, &want_d);
                worst_y = fmax(worst_y, fabs(y[i] - want_y) / fmax(fabs((double)x[i]), 1e-3));
                worst_d = fmax(worst_d, fabs(dx[i] - dy[i] * want_d));
            }
            CHECK_MSG(worst_y <= 4e-7 && worst_d <= 5e-6, "%s gelu %s n=%lld: errors %.3g (of |x|) / %.3g",
                      pass ? "scalar" : "avx512", kind == BRG_GELU_TANH ? "tanh" : "erf", (long long)n, worst_y,
                      worst_d);
            CHECK(y[n] == GUARD && dx[n] == GUARD);
            free(y), free(dx);
        }
        use_scalar(false);
        free(x), free(dy);
    }
}

/* The AVX-512 erf form keeps relative accuracy in the negative tail, where Phi(x) is tiny (the
 * scalar 1 + erff(x / sqrt 2) loses it all by x = -6); what is left is the rounding of x^2 / 2
 * inside exp, about 1e-5 at x = -12. */
static void test_gelu_erf_tail(void) {
    const int64_t n = 1000;
    float *x = tk_zeros(n), *y = tk_zeros(n);
    for (int64_t i = 0; i < n; i++) x[i] = -3.0f - 9.0f * (float)i / (float)n; /* [-12, -3) */
    brg_k_gelu_fwd(y, x, n, BRG_GELU_ERF);
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double want, d;
        gelu_ref(BRG_GELU_ERF, x[i], &want, &d);
        worst = fmax(worst, fabs(y[i] - want) / fabs(want));
    }
    CHECK_MSG(worst <= 3e-5, "erf gelu tail: relative error %.3g", worst);
    free(x), free(y);
}

/* Layer norm: both paths agree on every output (forward, statistics, dx, dgamma, dbeta), with and
 * without the affine parameters, on widths that leave every tail, and on rows with a large offset
 * (the centred second pass must not cancel digits). Guards after each output stay untouched. */
static void test_layernorm_paths(void) {
    const int64_t widths[] = {1, 15, 16, 17, 64, 65, 100, 768};
    for (int wi = 0; wi < 8; wi++)
        for (int affine = 0; affine < 2; affine++) {
            const int64_t n = 5, c = widths[wi], nc = n * c;
            float *x = tk_rand(nc, -2.0, 2.0), *dy = tk_rand(nc + 1, -1.0, 1.0);
            for (int64_t j = 0; j < c; j++) x[c + j] += 1000.0f; /* row 1: a large offset */
            float *gamma = affine ? tk_rand(c, 0.5, 1.5) : NULL, *beta = affine ? tk_rand(c, -0.5, 0.5) : NULL;
            float *grads0 = tk_rand(c + 1, -1.0, 1.0); /* what dgamma and dbeta accumulate onto */
            float *out[2][6];
            for (int pass = 0; pass < 2; pass++) {
                use_scalar(pass == 1);
                float *y = tk_zeros(nc + 1), *mean = tk_zeros(n + 1), *rstd = tk_zeros(n + 1);
                float *dx = tk_copy(dy, nc + 1), *dg = tk_copy(grads0, c + 1), *db = tk_copy(grads0, c + 1);
                y[nc] = mean[n] = rstd[n] = dx[nc] = dg[c] = db[c] = GUARD;
                brg_k_layernorm_fwd(y, mean, rstd, x, gamma, beta, n, c, 1e-5f);
                brg_k_layernorm_bwd(dx, affine ? dg : NULL, affine ? db : NULL, dy, x, gamma, mean, rstd, n, c);
                CHECK(y[nc] == GUARD && mean[n] == GUARD && rstd[n] == GUARD && dx[nc] == GUARD && dg[c] == GUARD &&
                      db[c] == GUARD);
                float *bufs[6] = {y, mean, rstd, dx, dg, db};
                memcpy(out[pass], bufs, sizeof bufs);
            }
            use_scalar(false);
            const int64_t sizes[6] = {nc, n, n, nc, c, c};
            const char *names[6] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
            for (int b = 0; b < 6; b++) {
                double worst = 0, scale = 0;
                for (int64_t i = 0; i < sizes[b]; i++) {
                    worst = fmax(worst, fabs((double)out[0][b][i] - out[1][b][i]));
                    scale = fmax(scale, fabs((double)out[1][b][i]));
                }
                CHECK_MSG(worst <= 4e-6 * fmax(scale, 1.0), "layernorm c=%lld affine=%d: %s differs by %.3g (scale %.3g)",
                          (long long)c, affine, names[b], worst, scale);
                free(out[0][b]), free(out[1][b]);
            }
            free(x), free(dy), free(gamma), free(beta), free(grads0);
        }
}

/* BRIGADE_SIMD=scalar in the environment selects the scalar loops; without it the CPU decides. */
static void test_environment_switch(void) {
    const char *given = getenv("BRIGADE_SIMD");
    char saved[64];
    snprintf(saved, sizeof saved, "%s", given ? given : "");
    setenv("BRIGADE_SIMD", "scalar", 1);
    brg_simd_force_scalar(false); /* decides again, reading the environment */
    CHECK(!brg_simd_avx512());
    unsetenv("BRIGADE_SIMD");
    brg_simd_force_scalar(false);
    CHECK(brg_simd_avx512() == brg_gemm_avx512_supported());
    if (given) setenv("BRIGADE_SIMD", saved, 1); /* the rest of the run follows the caller's choice */
    brg_simd_force_scalar(false);
}

int main(void) {
    have_avx512 = brg_simd_avx512();
    test_environment_switch();
    printf("simd path: %s\n", have_avx512 ? "avx512 (compared with scalar)" : "scalar only");
    test_exp_accuracy();
    test_exp_special_values();
    test_rows_match_scalar();
    test_dropout_paths_agree();
    test_gelu_paths(BRG_GELU_TANH);
    test_gelu_paths(BRG_GELU_ERF);
    if (have_avx512) test_gelu_erf_tail();
    test_layernorm_paths();
    return test_finish();
}
