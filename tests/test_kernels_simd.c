/* The vectorised row primitives (kernels/simd.h) and the kernels built on them, at every level the
 * CPU has (scalar, AVX2, AVX-512), each against double-precision references, over lengths that
 * exercise every masked tail of the 8- and 16-wide steps, with guard entries after each output
 * row (and inputs allocated to their exact length, so a sanitizer build sees any read past them),
 * and on inf/NaN/extreme inputs. Where the CPU has both SIMD levels their outputs must also be
 * bit-identical, as simd.h promises; dropout masks must be identical across all three. */
#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/simd.h"
#include "test_kernels_util.h"

/* The levels this process can run: scalar up to brg_isa_detected(). */
static brg_isa levels[3];
static int n_levels;

/* Lengths covering empty rows, every tail of an 8- and a 16-wide step, the 32-element step of the
 * sum of squares, and long rows. */
static const int64_t LENGTHS[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32,
                                  33, 40, 47, 48, 63, 64, 65, 100, 1000, 50257};
#define N_LENGTHS ((int)(sizeof LENGTHS / sizeof LENGTHS[0]))
#define GUARD 12345.0f

static const char *level_name(brg_isa isa) { return brg_isa_name(isa); }

static void use(brg_isa isa) {
    brg_simd_force(isa);
    CHECK_MSG(brg_simd_isa() == isa, "forcing %s gave %s", level_name(isa), level_name(brg_simd_isa()));
}

/* True when both SIMD levels run here, so their outputs can be compared bit for bit. */
static bool both_simd(void) { return n_levels == 3; }

/* Relative distance in units of float epsilon. */
static double ulps(double got, double want) {
    if (got == want) return 0.0;
    return fabs(got - want) / (fabs(want) * FLT_EPSILON);
}

/* exp of a float against double exp: within 2 ulp where the result is normal, within two steps of
 * the subnormal spacing below (the final rounding to a subnormal is coarser). */
static bool exp_close(float got, double want) {
    if (want >= FLT_MIN) return ulps(got, want) <= 2.0;
    return fabs(got - want) <= 3e-45;
}

static float *guarded(int64_t n) {
    float *y = tk_zeros(n + 1);
    y[n] = GUARD;
    return y;
}

/* ---- exp ---- */

/* exp over [-100, 88], at every level, against double exp. */
static void test_exp_accuracy(void) {
    const int64_t n = 200000;
    float *x = tk_zeros(n), *y = guarded(n);
    for (int64_t i = 0; i < n; i++) x[i] = -100.0f + 188.0f * (float)i / (float)(n - 1);
    double want_sum = 0.0;
    for (int64_t i = 0; i < n; i++) want_sum += (double)(float)exp((double)x[i]);
    for (int l = 0; l < n_levels; l++) {
        use(levels[l]);
        double sum = brg_simd_exp_sum(y, x, 0.0f, n), worst = 0.0;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double want = exp((double)x[i]);
            if (want >= FLT_MIN) worst = fmax(worst, ulps(y[i], want));
            bad += !exp_close(y[i], want);
        }
        CHECK_MSG(worst <= 2.0 && bad == 0, "%s exp: %.2f ulp, %lld outside", level_name(levels[l]), worst,
                  (long long)bad);
        CHECK_MSG(fabs(sum - want_sum) <= 1e-6 * want_sum, "%s exp sum %.9g, want %.9g", level_name(levels[l]), sum,
                  want_sum);
        CHECK(y[n] == GUARD);
    }
    brg_simd_reset();
    free(x);
    free(y);
}

/* Overflow to +inf, underflow through the subnormals to 0, NaN propagating, and the exact points,
 * each placed both in a full step and in the masked tail of the row (40 = 2 x 16 + 8). */
static void test_exp_special_values(void) {
    const float in[] = {-INFINITY, INFINITY, NAN, 89.0f, 88.8f, 100.0f, 1e30f, FLT_MAX, 88.5f, -87.0f, -88.0f,
                        -90.0f, -95.0f, -100.0f, -103.0f, -103.9f, -104.0f, -110.0f, -1000.0f, -FLT_MAX, 0.0f, -0.0f};
    const int n_in = (int)(sizeof in / sizeof in[0]);
    const int64_t n = 45; /* a tail of 13 after two 16-steps, of 5 after five 8-steps */
    float x[45], y[46];
    for (int l = 0; l < n_levels; l++) {
        use(levels[l]);
        for (int v = 0; v < n_in; v++) {
            for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 5) - 2.0f; /* ordinary neighbours */
            const int64_t at[2] = {v % 16, 33 + v % 12};                   /* full step, then tail */
            x[at[0]] = x[at[1]] = in[v];
            y[n] = GUARD;
            brg_simd_exp_sum(y, x, 0.0f, n);
            for (int k = 0; k < 2; k++) {
                const float got = y[at[k]];
                bool ok;
                if (isnan(in[v])) ok = isnan(got);
                else if (in[v] > 88.73f) ok = isinf(got) && got > 0; /* above log(FLT_MAX) */
                else if (in[v] < -103.98f) ok = got == 0.0f;          /* below half the least subnormal */
                else ok = exp_close(got, exp((double)in[v]));
                CHECK_MSG(ok, "%s exp(%g) at %lld = %g", level_name(levels[l]), in[v], (long long)at[k], got);
            }
            for (int64_t i = 0; i < n; i++)
                if (i != at[0] && i != at[1])
                    CHECK_MSG(exp_close(y[i], exp((double)x[i])), "%s: exp(%g) next to %g disturbed",
                              level_name(levels[l]), x[i], in[v]);
            CHECK(y[n] == GUARD);
        }
    }
    /* Subnormal results are really produced (gradual underflow, not a flush to zero). */
    for (int l = 0; l < n_levels; l++) {
        use(levels[l]);
        float s[3] = {-90.0f, -100.0f, -103.0f}, e[3];
        brg_simd_exp_sum(e, s, 0.0f, 3);
        CHECK_MSG(e[0] > 0.0f && e[0] < FLT_MIN && e[1] > 0.0f && e[2] > 0.0f,
                  "%s: exp of -90, -100, -103 = %g %g %g, want subnormals", level_name(levels[l]), e[0], e[1], e[2]);
    }
    brg_simd_reset();
}

/* ---- the row primitives ---- */

typedef struct row_out {
    float max;
    double sum, squares;
    float *y, *d;
} row_out;

static row_out run_rows(const float *x, const float *d0, int64_t n) {
    row_out o = {.y = guarded(n), .d = guarded(n)};
    memcpy(o.d, d0, (size_t)n * sizeof *o.d);
    o.max = brg_simd_max(x, n);
    o.sum = brg_simd_exp_sum(o.y, x, o.max, n);
    brg_simd_exp_axpy(o.d, false, x, o.max, 0.25f, n);
    o.squares = brg_simd_sum_squares(x, n);
    return o;
}

/* One level's outputs against the references; *nothing* written past the row. */
static void check_rows(const row_out *o, const float *x, const float *d0, int64_t n, brg_isa isa) {
    float ref_max = -INFINITY;
    double ref_q = 0.0, ref_sum = 0.0, worst_y = 0.0, worst_d = 0.0;
    for (int64_t i = 0; i < n; i++) ref_q += (double)x[i] * x[i], ref_max = fmaxf(ref_max, x[i]);
    for (int64_t i = 0; i < n; i++) {
        const double e = exp((double)(x[i] - ref_max)), want_d = d0[i] + 0.25 * e;
        ref_sum += e;
        if (!exp_close(o->y[i], e)) worst_y = fmax(worst_y, fmax(ulps(o->y[i], e), 99.0));
        else if (e >= FLT_MIN) worst_y = fmax(worst_y, ulps(o->y[i], e));
        /* d0 + g e: the exp's 2 ulp of g e plus one rounding of the sum */
        worst_d = fmax(worst_d, fabs(o->d[i] - want_d) / ((fabs(d0[i]) + 0.25 * e) * FLT_EPSILON));
    }
    const char *name = level_name(isa);
    CHECK_MSG(o->max == ref_max, "%s n=%lld: max %g, want %g", name, (long long)n, o->max, ref_max);
    CHECK_MSG(fabs(o->sum - ref_sum) <= 1e-6 * ref_sum, "%s n=%lld: exp sum %.9g, want %.9g", name, (long long)n,
              o->sum, ref_sum);
    CHECK_MSG(fabs(o->squares - ref_q) <= 1e-12 * ref_q, "%s n=%lld: sum of squares %.17g, want %.17g", name,
              (long long)n, o->squares, ref_q);
    CHECK_MSG(worst_y <= 2.0 && worst_d <= 3.0, "%s n=%lld: exp row %.2f ulp, axpy %.2f ulp", name, (long long)n,
              worst_y, worst_d);
    CHECK_MSG(o->y[n] == GUARD && o->d[n] == GUARD, "%s n=%lld: wrote past the row", name, (long long)n);
}

static bool rows_identical(const row_out *a, const row_out *b, int64_t n) {
    return a->max == b->max && a->sum == b->sum && a->squares == b->squares &&
           memcmp(a->y, b->y, (size_t)n * sizeof *a->y) == 0 && memcmp(a->d, b->d, (size_t)n * sizeof *a->d) == 0;
}

static void test_rows(void) {
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = LENGTHS[li];
        float *x = tk_rand(n, -30.0, 10.0), *d0 = tk_rand(n, -1.0, 1.0);
        if (n > 20) x[n - 1] = 11.0f; /* the maximum in the masked tail */
        row_out out[3];
        for (int l = 0; l < n_levels; l++) {
            use(levels[l]);
            out[l] = run_rows(x, d0, n);
            check_rows(&out[l], x, d0, n, levels[l]);
        }
        if (both_simd())
            CHECK_MSG(rows_identical(&out[1], &out[2], n), "n=%lld: avx2 and avx512 rows differ", (long long)n);
        for (int l = 0; l < n_levels; l++) free(out[l].y), free(out[l].d);
        free(x), free(d0);
    }
    /* An all-negative row: the max must not see the zeros of a masked tail load. */
    float neg[13];
    for (int i = 0; i < 13; i++) neg[i] = -5.0f - (float)i;
    for (int l = 0; l < n_levels; l++) {
        use(levels[l]);
        CHECK_MSG(brg_simd_max(neg, 13) == -5.0f && brg_simd_max(neg + 9, 4) == -14.0f, "%s: max of negatives",
                  level_name(levels[l]));
    }
    brg_simd_reset();
}

/* exp_axpy with overwrite, at every level: over NaNs, and over x itself (the logits' gradient
 * written over the logits), the bits of adding into zeros; nothing written past the row. */
static void test_exp_axpy_overwrite(void) {
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = LENGTHS[li];
        float *x = tk_rand(n, -30.0, 10.0), *want = guarded(n), *over = guarded(n), *in_place = guarded(n);
        for (int l = 0; l < n_levels; l++) {
            use(levels[l]);
            for (int64_t i = 0; i < n; i++) want[i] = 0.0f, over[i] = NAN, in_place[i] = x[i];
            brg_simd_exp_axpy(want, false, x, 2.5f, -0.375f, n);
            brg_simd_exp_axpy(over, true, x, 2.5f, -0.375f, n);
            brg_simd_exp_axpy(in_place, true, in_place, 2.5f, -0.375f, n);
            const char *name = level_name(levels[l]);
            CHECK_MSG(memcmp(want, over, (size_t)n * sizeof *want) == 0, "%s n=%lld: overwrite differs from adding "
                      "into zeros", name, (long long)n);
            CHECK_MSG(memcmp(want, in_place, (size_t)n * sizeof *want) == 0, "%s n=%lld: in place differs", name,
                      (long long)n);
            CHECK_MSG(over[n] == GUARD && in_place[n] == GUARD, "%s n=%lld: wrote past the row", name, (long long)n);
        }
        free(x), free(want), free(over), free(in_place);
    }
    brg_simd_reset();
}

/* ---- dropout ---- */

/* Forward, backward and in-place forward at one level. */
static void run_dropout(float *out[3], const float *x, const float *g, const float *b0, int64_t n, float p,
                        uint64_t seed, uint64_t off) {
    out[0] = guarded(n), out[1] = guarded(n), out[2] = guarded(n);
    memcpy(out[1], b0, (size_t)n * sizeof *b0);
    memcpy(out[2], x, (size_t)n * sizeof *x);
    brg_k_dropout_fwd(out[0], x, n, p, seed, off);
    brg_k_dropout_bwd(out[1], false, g, n, p, seed, off);
    brg_k_dropout_fwd(out[2], out[2], n, p, seed, off);
}

/* Every level gives the scalar loop's masks and values bit for bit, in place or not, from any
 * offset, and forward keeps exactly the elements brg_k_dropout_keep says. */
static void test_dropout_levels_agree(void) {
    const float ps[] = {0.1f, 0.5f, 0.9f, 1e-8f, 0.99999994f};
    const uint64_t offsets[] = {0, 3, 1000003, (uint64_t)1 << 33};
    for (int pi = 0; pi < 5; pi++)
        for (int oi = 0; oi < 4; oi++)
            for (int li = 0; li < N_LENGTHS; li++) {
                const int64_t n = LENGTHS[li];
                const float p = ps[pi];
                const uint64_t off = offsets[oi], seed = 77 + (uint64_t)li;
                float *x = tk_rand(n, -2.0, 2.0), *g = tk_rand(n, -1.0, 1.0), *b0 = tk_rand(n, -1.0, 1.0);
                float *out[3][3];
                for (int l = 0; l < n_levels; l++) {
                    use(levels[l]);
                    run_dropout(out[l], x, g, b0, n, p, seed, off);
                    bool same = true;
                    for (int k = 0; k < 3; k++) same &= memcmp(out[l][k], out[0][k], (size_t)(n + 1) * sizeof(float)) == 0;
                    same &= memcmp(out[l][2], out[l][0], (size_t)(n + 1) * sizeof(float)) == 0;
                    CHECK_MSG(same, "%s dropout p=%g offset=%llu n=%lld: differs from scalar (or in place)",
                              level_name(levels[l]), p, (unsigned long long)off, (long long)n);
                }
                int64_t wrong = 0;
                for (int64_t i = 0; i < n; i++)
                    wrong += (out[0][0][i] != 0.0f) != brg_k_dropout_keep(p, seed, off + (uint64_t)i);
                CHECK_MSG(wrong == 0, "dropout p=%g: %lld elements disagree with brg_k_dropout_keep", p, (long long)wrong);
                for (int l = 0; l < n_levels; l++)
                    for (int k = 0; k < 3; k++) free(out[l][k]);
                free(x), free(g), free(b0);
            }
    brg_simd_reset();
}

/* ---- GELU ---- */

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

/* GELU, both forms, every level against double references. Forward errors are measured against
 * |x| (the output is x times a probability, and for negative x the scalar erf form's 1 + erf
 * cancels down to that scale); the derivative crosses zero near x = -0.75, where its float sum
 * cancels, so it is compared absolutely (its terms reach ~10 for |x| < 12). */
static void test_gelu_levels(brg_gelu_kind kind) {
    const char *form = kind == BRG_GELU_TANH ? "tanh" : "erf";
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = LENGTHS[li];
        float *x = tk_rand(n, -12.0, 12.0), *dy = tk_rand(n, -1.0, 1.0);
        if (n > 4) x[0] = -60.0f, x[1] = 60.0f, x[2] = 0.0f, x[3] = -1e-6f;
        if (n > 20) x[n - 1] = -60.0f, x[n - 2] = 60.0f; /* extremes in the masked tail too */
        float *y[3], *dx[3];
        for (int l = 0; l < n_levels; l++) {
            use(levels[l]);
            y[l] = guarded(n), dx[l] = guarded(n);
            brg_k_gelu_fwd(y[l], x, n, kind);
            brg_k_gelu_bwd(dx[l], dy, x, n, kind);
            double worst_y = 0.0, worst_d = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double want_y, want_d;
                gelu_ref(kind, x[i], &want_y, &want_d);
                worst_y = fmax(worst_y, fabs(y[l][i] - want_y) / fmax(fabs((double)x[i]), 1e-3));
                worst_d = fmax(worst_d, fabs(dx[l][i] - dy[i] * want_d));
            }
            CHECK_MSG(worst_y <= 4e-7 && worst_d <= 5e-6, "%s gelu %s n=%lld: errors %.3g (of |x|) / %.3g",
                      level_name(levels[l]), form, (long long)n, worst_y, worst_d);
            CHECK_MSG(y[l][n] == GUARD && dx[l][n] == GUARD, "%s gelu %s n=%lld: wrote past the row",
                      level_name(levels[l]), form, (long long)n);
        }
        if (both_simd())
            CHECK_MSG(memcmp(y[1], y[2], (size_t)n * 4) == 0 && memcmp(dx[1], dx[2], (size_t)n * 4) == 0,
                      "gelu %s n=%lld: avx2 and avx512 differ", form, (long long)n);
        for (int l = 0; l < n_levels; l++) free(y[l]), free(dx[l]);
        free(x), free(dy);
    }
    brg_simd_reset();
}

/* The SIMD erf form keeps relative accuracy in the negative tail, where Phi(x) is tiny (the
 * scalar 1 + erff(x / sqrt 2) loses it all by x = -6); what is left is the rounding of x^2 / 2
 * inside exp, about 1e-5 at x = -12. */
static void test_gelu_erf_tail(void) {
    const int64_t n = 1000;
    float *x = tk_zeros(n), *y = tk_zeros(n);
    for (int64_t i = 0; i < n; i++) x[i] = -3.0f - 9.0f * (float)i / (float)n; /* [-12, -3) */
    for (int l = 1; l < n_levels; l++) {
        use(levels[l]);
        brg_k_gelu_fwd(y, x, n, BRG_GELU_ERF);
        double worst = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double want, d;
            gelu_ref(BRG_GELU_ERF, x[i], &want, &d);
            worst = fmax(worst, fabs(y[i] - want) / fabs(want));
        }
        CHECK_MSG(worst <= 3e-5, "%s erf gelu tail: relative error %.3g", level_name(levels[l]), worst);
    }
    brg_simd_reset();
    free(x), free(y);
}

/* ---- layer norm ---- */

#define LN_ROWS 5

/* The six outputs of a forward and backward: y, mean, rstd, dx, dgamma, dbeta. */
typedef struct ln_out {
    float *b[6];
} ln_out;

static ln_out run_layernorm(const float *x, const float *dy, const float *gamma, const float *beta,
                            const float *grads0, int64_t c) {
    const int64_t n = LN_ROWS, nc = n * c;
    ln_out o = {{guarded(nc), guarded(n), guarded(n), guarded(nc), guarded(c), guarded(c)}};
    memcpy(o.b[3], dy, (size_t)nc * sizeof *dy); /* dx accumulates onto something non-zero */
    memcpy(o.b[4], grads0, (size_t)c * sizeof *grads0);
    memcpy(o.b[5], grads0, (size_t)c * sizeof *grads0);
    brg_k_layernorm_fwd(o.b[0], o.b[1], o.b[2], x, gamma, beta, n, c, 1e-5f);
    brg_k_layernorm_bwd(o.b[3], gamma ? o.b[4] : NULL, gamma ? o.b[5] : NULL, dy, x, gamma, o.b[1], o.b[2], n, c);
    return o;
}

/* The references in double. The statistics are exact ones; the rest are computed from the float
 * mean and rstd the kernel saved (forward uses exactly those, and they are what backward sees). */
static ln_out layernorm_ref(const ln_out *got, const float *x, const float *dy, const float *gamma, const float *beta,
                            const float *grads0, int64_t c) {
    const int64_t n = LN_ROWS;
    ln_out r;
    for (int b = 0; b < 6; b++) r.b[b] = tk_zeros(b == 1 || b == 2 ? n : b >= 4 ? c : n * c);
    for (int64_t j = 0; j < c; j++) r.b[4][j] = r.b[5][j] = grads0[j];
    double ag[1024] = {0}, ab[1024] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * c, *gr = dy + i * c;
        double s = 0.0, ss = 0.0, sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < c; j++) s += xr[j];
        for (int64_t j = 0; j < c; j++) ss += (xr[j] - s / (double)c) * (xr[j] - s / (double)c);
        r.b[1][i] = (float)(s / (double)c);
        r.b[2][i] = (float)(1.0 / sqrt(ss / (double)c + 1e-5));
        const double m = got->b[1][i], rs = got->b[2][i];
        for (int64_t j = 0; j < c; j++) {
            double xhat = (xr[j] - m) * rs, g = gamma ? (double)gamma[j] * gr[j] : gr[j];
            r.b[0][i * c + j] = (float)(gamma ? xhat * gamma[j] + beta[j] : xhat);
            sg += g, sgx += g * xhat;
            ag[j] += xhat * gr[j], ab[j] += gr[j];
        }
        for (int64_t j = 0; j < c; j++) {
            double xhat = (xr[j] - m) * rs, g = gamma ? (double)gamma[j] * gr[j] : gr[j];
            r.b[3][i * c + j] = (float)(gr[j] + rs * (g - sg / (double)c - xhat * sgx / (double)c));
        }
    }
    for (int64_t j = 0; j < c; j++) r.b[4][j] = (float)(grads0[j] + ag[j]), r.b[5][j] = (float)(grads0[j] + ab[j]);
    return r;
}

/* Layer norm at every level against the references (forward, statistics, dx, dgamma, dbeta), with
 * and without the affine parameters, on widths that leave every tail, and on a row with a large
 * offset (the centred second pass must not cancel digits). Guards after each output stay. */
static void test_layernorm_levels(void) {
    const int64_t widths[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 65, 100, 768, 1000};
    const char *names[6] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
    for (int wi = 0; wi < (int)(sizeof widths / sizeof widths[0]); wi++)
        for (int affine = 0; affine < 2; affine++) {
            const int64_t n = LN_ROWS, c = widths[wi], nc = n * c, sizes[6] = {nc, n, n, nc, c, c};
            float *x = tk_rand(nc, -2.0, 2.0), *dy = tk_rand(nc, -1.0, 1.0), *grads0 = tk_rand(c, -1.0, 1.0);
            for (int64_t j = 0; j < c; j++) x[c + j] += 1000.0f; /* row 1: a large offset */
            float *gamma = affine ? tk_rand(c, 0.5, 1.5) : NULL, *beta = affine ? tk_rand(c, -0.5, 0.5) : NULL;
            ln_out out[3];
            for (int l = 0; l < n_levels; l++) {
                use(levels[l]);
                out[l] = run_layernorm(x, dy, gamma, beta, grads0, c);
                ln_out ref = layernorm_ref(&out[l], x, dy, gamma, beta, grads0, c);
                for (int b = 0; b < 6; b++) {
                    if (!affine && b >= 4) continue;
                    double worst = 0, scale = 0;
                    for (int64_t i = 0; i < sizes[b]; i++) {
                        worst = fmax(worst, fabs((double)out[l].b[b][i] - ref.b[b][i]));
                        scale = fmax(scale, fabs((double)ref.b[b][i]));
                    }
                    /* mean and rstd: one rounding of an exact value; the rest a few float steps */
                    double tol = b == 1 || b == 2 ? 1.2e-7 * scale : 4e-6 * fmax(scale, 1.0);
                    CHECK_MSG(worst <= tol, "%s layernorm c=%lld affine=%d: %s off by %.3g (scale %.3g)",
                              level_name(levels[l]), (long long)c, affine, names[b], worst, scale);
                    CHECK_MSG(out[l].b[b][sizes[b]] == GUARD, "%s layernorm c=%lld: wrote past %s",
                              level_name(levels[l]), (long long)c, names[b]);
                    free(ref.b[b]);
                }
                if (!affine) free(ref.b[4]), free(ref.b[5]);
            }
            if (both_simd())
                for (int b = 0; b < 6; b++)
                    CHECK_MSG(memcmp(out[1].b[b], out[2].b[b], (size_t)sizes[b] * 4) == 0,
                              "layernorm c=%lld affine=%d: avx2 and avx512 %s differ", (long long)c, affine, names[b]);
            for (int l = 0; l < n_levels; l++)
                for (int b = 0; b < 6; b++) free(out[l].b[b]);
            free(x), free(dy), free(gamma), free(beta), free(grads0);
        }
    brg_simd_reset();
}

/* ---- softmax and cross-entropy, the kernels built on the primitives ---- */

static void test_softmax_cross_entropy_levels(void) {
    const int64_t widths[] = {1, 7, 17, 40, 768, 50257};
    const int64_t rows = 3;
    for (int wi = 0; wi < 6; wi++) {
        const int64_t v = widths[wi], nv = rows * v;
        float *x = tk_rand(nv, -8.0, 8.0);
        int32_t targets[3] = {0, (int32_t)(v - 1), -100};
        float *y[3], *d[3], loss[3];
        for (int l = 0; l < n_levels; l++) {
            use(levels[l]);
            y[l] = guarded(nv), d[l] = guarded(nv);
            float lse[3];
            int64_t count;
            brg_k_softmax_fwd(y[l], x, rows, v);
            loss[l] = brg_k_cross_entropy_fwd(lse, &count, x, targets, rows, v, -100);
            brg_k_cross_entropy_bwd(d[l], false, 1.0f, x, lse, targets, rows, v, -100, count);
            double want_loss = 0.0, worst_y = 0.0, worst_d = 0.0;
            for (int64_t i = 0; i < rows; i++) {
                const float *xr = x + i * v;
                double mx = -INFINITY, s = 0.0;
                for (int64_t j = 0; j < v; j++) mx = fmax(mx, xr[j]);
                for (int64_t j = 0; j < v; j++) s += exp(xr[j] - mx);
                if (targets[i] >= 0) want_loss += (mx + log(s) - xr[targets[i]]) / 2.0;
                for (int64_t j = 0; j < v; j++) {
                    double p = exp(xr[j] - mx) / s;
                    worst_y = fmax(worst_y, ulps(y[l][i * v + j], p));
                    double want_d = targets[i] < 0 ? 0.0 : (p - (j == targets[i])) / 2.0;
                    worst_d = fmax(worst_d, fabs(d[l][i * v + j] - want_d));
                }
            }
            CHECK_MSG(count == 2 && fabs(loss[l] - want_loss) <= 1e-6 * fmax(fabs(want_loss), 1.0),
                      "%s cross-entropy v=%lld: loss %.9g, want %.9g", level_name(levels[l]), (long long)v, loss[l],
                      want_loss);
            CHECK_MSG(worst_y <= 8.0 && worst_d <= 1e-6, "%s softmax v=%lld: %.2f ulp, dlogits off by %.3g",
                      level_name(levels[l]), (long long)v, worst_y, worst_d);
            CHECK(y[l][nv] == GUARD && d[l][nv] == GUARD);
        }
        if (both_simd())
            CHECK_MSG(memcmp(y[1], y[2], (size_t)nv * 4) == 0 && memcmp(d[1], d[2], (size_t)nv * 4) == 0 &&
                          loss[1] == loss[2],
                      "softmax/cross-entropy v=%lld: avx2 and avx512 differ", (long long)v);
        for (int l = 0; l < n_levels; l++) free(y[l]), free(d[l]);
        free(x);
    }
    brg_simd_reset();
}

/* ---- selection ---- */

/* The highest level the hardware has, ignoring BRIGADE_ISA. */
static brg_isa hardware_best(void) {
    return brg_isa_hardware(BRG_ISA_AVX512) ? BRG_ISA_AVX512 : brg_isa_hardware(BRG_ISA_AVX2) ? BRG_ISA_AVX2 : BRG_ISA_SCALAR;
}

/* BRIGADE_SIMD=scalar|avx2|avx512 selects that level, capped by the CPU (and BRIGADE_ISA, which is
 * read once per process, so it is only checked as a cap here); unset, empty or unknown, the best
 * level detected. brg_simd_force caps the same way. */
static void test_environment_switch(void) {
    const char *given = getenv("BRIGADE_SIMD");
    char saved[64];
    snprintf(saved, sizeof saved, "%s", given ? given : "");
    const brg_isa best = brg_isa_detected();
    CHECK(best <= hardware_best());
    const char *isa_env = getenv("BRIGADE_ISA");
    if (!isa_env || !*isa_env) CHECK_MSG(best == hardware_best(), "detected %s, hardware has %s", level_name(best),
                                         level_name(hardware_best()));
    struct {
        const char *value;
        brg_isa want;
    } cases[] = {{"scalar", BRG_ISA_SCALAR}, {"avx2", BRG_ISA_AVX2}, {"avx512", BRG_ISA_AVX512},
                 {"bogus", best},            {"", best},             {NULL, best}};
    for (int k = 0; k < 6; k++) {
        if (cases[k].value) setenv("BRIGADE_SIMD", cases[k].value, 1);
        else unsetenv("BRIGADE_SIMD");
        brg_simd_reset(); /* decides again, reading the environment */
        const brg_isa want = cases[k].want < best ? cases[k].want : best;
        CHECK_MSG(brg_simd_isa() == want, "BRIGADE_SIMD=%s: %s, want %s", cases[k].value ? cases[k].value : "(unset)",
                  level_name(brg_simd_isa()), level_name(want));
        CHECK(brg_simd_avx512() == (want == BRG_ISA_AVX512));
    }
    for (int isa = BRG_ISA_SCALAR; isa <= BRG_ISA_AVX512; isa++) {
        brg_simd_force((brg_isa)isa);
        CHECK(brg_simd_isa() == ((brg_isa)isa < best ? (brg_isa)isa : best));
    }
    brg_simd_force_scalar(true);
    CHECK(brg_simd_isa() == BRG_ISA_SCALAR);
    if (given) setenv("BRIGADE_SIMD", saved, 1); /* the rest of the run follows the caller's choice */
    else unsetenv("BRIGADE_SIMD");
    brg_simd_force_scalar(false);
}

/* brg_cpu_is_amd (what picks the LM head's prefetch distance) names the CPU Linux reports. */
static void test_cpu_vendor(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    bool seen = false, amd = false;
    while (f && !seen && fgets(line, sizeof line, f))
        if (strncmp(line, "vendor_id", 9) == 0) seen = true, amd = strstr(line, "AuthenticAMD") != NULL;
    if (f) fclose(f);
    if (!seen) return; /* no x86 vendor to compare with */
    CHECK_MSG(brg_cpu_is_amd() == amd, "brg_cpu_is_amd() %d, /proc/cpuinfo says %s", brg_cpu_is_amd(),
              amd ? "AuthenticAMD" : "another vendor");
}

int main(void) {
    test_environment_switch();
    test_cpu_vendor();
    for (int isa = BRG_ISA_SCALAR; isa <= (int)brg_isa_detected(); isa++) levels[n_levels++] = (brg_isa)isa;
    printf("simd levels compared: %s%s%s (default here: %s)\n", level_name(levels[0]), n_levels > 1 ? ", avx2" : "",
           n_levels > 2 ? ", avx512" : "", level_name(brg_simd_isa()));
    test_exp_accuracy();
    test_exp_special_values();
    test_rows();
    test_exp_axpy_overwrite();
    test_dropout_levels_agree();
    test_gelu_levels(BRG_GELU_TANH);
    test_gelu_levels(BRG_GELU_ERF);
    test_gelu_erf_tail();
    test_layernorm_levels();
    test_softmax_cross_entropy_levels();
    return test_finish();
}
