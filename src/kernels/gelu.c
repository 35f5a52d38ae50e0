/* GELU activations with their exact derivatives.
 * erf:  y = 0.5 x (1 + erf(x / sqrt 2))                          (nn.GELU, "gelu")
 * tanh: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))       ("gelu_new", "gelu_pytorch_tanh")
 * Both are evaluated in float, as the float32 PyTorch kernels do. The tanh form uses the identity
 * 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): the same function, but expf costs a fraction of tanhf and
 * does not cancel digits for negative x.
 *
 * Three bodies, picked by brg_simd_isa(): AVX-512 (16 at a time), AVX2+FMA (8 at a time, the same
 * operations, so the same bits as AVX-512) and the scalar loops (libm's erff/expf, within the
 * tests' tolerances of the others). */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

static void gelu_erf_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
}

static float tanh_u(float v) { return SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v); }

/* 0.5 (1 + tanh u); exp overflowing to inf for very negative u correctly gives 0. */
static float half_one_plus_tanh(float u) { return 1.0f / (1.0f + expf(-2.0f * u)); }

static void gelu_tanh_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * half_one_plus_tanh(tanh_u(x[i]));
}

/* d/dx = Phi(x) + x phi(x). */
static void gelu_erf_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * (1.0f + erff(v * INV_SQRT2));
        float pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
        dx[i] += dy[i] * (cdf + v * pdf);
    }
}

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x) with t = tanh u, u' = sqrt(2/pi) (1 + 3c x^2);
 * in terms of s = 0.5 (1 + t): s + 2 x s (1 - s) u'. */
static void gelu_tanh_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float s = half_one_plus_tanh(tanh_u(v));
        float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * v * v);
        dx[i] += dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* ---- AVX-512: 16 at a time, exp from brg_exp512 ---- */

/* The tanh form: the same formulas as above. */
BRG_AVX512_INLINE __m512 tanh_u16(__m512 v) {
    __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
    return _mm512_mul_ps(_mm512_set1_ps(SQRT_2_OVER_PI), _mm512_fmadd_ps(_mm512_set1_ps(GELU_TANH_C), v3, v));
}

BRG_AVX512_INLINE __m512 half_one_plus_tanh16(__m512 u) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, brg_exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u))));
}

BRG_AVX512 static void gelu_tanh_fwd_avx512(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, half_one_plus_tanh16(tanh_u16(v))));
    }
}

BRG_AVX512 static void gelu_tanh_bwd_avx512(float *dx, const float *dy, const float *x, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 s = half_one_plus_tanh16(tanh_u16(v));
        __m512 du = _mm512_mul_ps(_mm512_set1_ps(SQRT_2_OVER_PI),
                                  _mm512_fmadd_ps(_mm512_set1_ps(3.0f * GELU_TANH_C), _mm512_mul_ps(v, v), one));
        __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(v, v), s), _mm512_sub_ps(one, s));
        __m512 deriv = _mm512_fmadd_ps(t, du, s);
        __m512 acc = _mm512_maskz_loadu_ps(m, dx + i);
        _mm512_mask_storeu_ps(dx + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, dy + i), deriv, acc));
    }
}

/* The erf form needs Phi(x) = 0.5 (1 + erf(x / sqrt 2)) = 0.5 erfc(-x / sqrt 2). erfc comes from
 * the Chebyshev fit of Numerical Recipes (erfcc): erfc(a) = t exp(-a^2 + P(t)), t = 1/(1 + a/2)
 * for a >= 0, relative error below 1.1e-7 for every a (checked against libm in double), and
 * erfc(-a) = 2 - erfc(a). A relative error in erfc keeps the negative tail of Phi accurate, where
 * 1 + erf would cancel. */
BRG_AVX512_INLINE __m512 normal_cdf16(__m512 x) {
    static const float P[10] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f};
    const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(-INV_SQRT2));
    const __m512 a = _mm512_abs_ps(z);
    const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(a, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(P[0]);
    for (int i = 1; i < 10; i++) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(P[i]));
    const __m512 e = _mm512_mul_ps(t, brg_exp512(_mm512_fnmadd_ps(a, a, p)));
    const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 erfc_z = _mm512_mask_sub_ps(e, negative, _mm512_set1_ps(2.0f), e);
    return _mm512_mul_ps(_mm512_set1_ps(0.5f), erfc_z);
}

BRG_AVX512 static void gelu_erf_fwd_avx512(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, normal_cdf16(v)));
    }
}

/* d/dx = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). */
BRG_AVX512 static void gelu_erf_bwd_avx512(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : brg_tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 half_sq = _mm512_mul_ps(_mm512_set1_ps(-0.5f), _mm512_mul_ps(v, v));
        __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(INV_SQRT_2PI), brg_exp512(half_sq));
        __m512 deriv = _mm512_fmadd_ps(v, pdf, normal_cdf16(v));
        __m512 acc = _mm512_maskz_loadu_ps(m, dx + i);
        _mm512_mask_storeu_ps(dx + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, dy + i), deriv, acc));
    }
}

/* ---- AVX2: the AVX-512 bodies on 8 lanes, operation for operation, exp from brg_exp256 ---- */

BRG_AVX2_INLINE __m256 tanh_u8(__m256 v) {
    __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    return _mm256_mul_ps(_mm256_set1_ps(SQRT_2_OVER_PI), _mm256_fmadd_ps(_mm256_set1_ps(GELU_TANH_C), v3, v));
}

BRG_AVX2_INLINE __m256 half_one_plus_tanh8(__m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, brg_exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u))));
}

/* normal_cdf16 on 8 lanes. */
BRG_AVX2_INLINE __m256 normal_cdf8(__m256 x) {
    static const float P[10] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f};
    const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(-INV_SQRT2));
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(P[0]);
    for (int i = 1; i < 10; i++) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(P[i]));
    const __m256 e = _mm256_mul_ps(t, brg_exp256(_mm256_fnmadd_ps(a, a, p)));
    const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 erfc_z = _mm256_blendv_ps(e, _mm256_sub_ps(_mm256_set1_ps(2.0f), e), negative);
    return _mm256_mul_ps(_mm256_set1_ps(0.5f), erfc_z);
}

/* One 8-wide step of each form: forward y, or the derivative times dy added to acc. */
BRG_AVX2_INLINE __m256 tanh_fwd8(__m256 v) { return _mm256_mul_ps(v, half_one_plus_tanh8(tanh_u8(v))); }

BRG_AVX2_INLINE __m256 tanh_bwd8(__m256 acc, __m256 dy, __m256 v) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 s = half_one_plus_tanh8(tanh_u8(v));
    __m256 du = _mm256_mul_ps(_mm256_set1_ps(SQRT_2_OVER_PI),
                              _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_TANH_C), _mm256_mul_ps(v, v), one));
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(v, v), s), _mm256_sub_ps(one, s));
    return _mm256_fmadd_ps(dy, _mm256_fmadd_ps(t, du, s), acc);
}

BRG_AVX2_INLINE __m256 erf_fwd8(__m256 v) { return _mm256_mul_ps(v, normal_cdf8(v)); }

BRG_AVX2_INLINE __m256 erf_bwd8(__m256 acc, __m256 dy, __m256 v) {
    __m256 half_sq = _mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(v, v));
    __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(INV_SQRT_2PI), brg_exp256(half_sq));
    return _mm256_fmadd_ps(dy, _mm256_fmadd_ps(v, pdf, normal_cdf8(v)), acc);
}

/* Full steps with plain loads and stores, then one masked tail step. Inlined into the wrappers
 * below with a constant `erf`, so each form gets its own loop without a per-step branch. */
BRG_AVX2_INLINE void fwd_loop8(float *y, const float *x, int64_t n, bool erf) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, erf ? erf_fwd8(v) : tanh_fwd8(v));
    }
    if (i < n) {
        __m256 v = brg_load_tail8(x, i, n);
        brg_store_tail8(y, i, n, erf ? erf_fwd8(v) : tanh_fwd8(v));
    }
}

BRG_AVX2_INLINE void bwd_loop8(float *dx, const float *dy, const float *x, int64_t n, bool erf) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), g = _mm256_loadu_ps(dy + i), acc = _mm256_loadu_ps(dx + i);
        _mm256_storeu_ps(dx + i, erf ? erf_bwd8(acc, g, v) : tanh_bwd8(acc, g, v));
    }
    if (i < n) {
        __m256 v = brg_load_tail8(x, i, n), g = brg_load_tail8(dy, i, n), acc = brg_load_tail8(dx, i, n);
        brg_store_tail8(dx, i, n, erf ? erf_bwd8(acc, g, v) : tanh_bwd8(acc, g, v));
    }
}

BRG_AVX2 static void gelu_fwd_avx2(float *y, const float *x, int64_t n, brg_gelu_kind kind) {
    if (kind == BRG_GELU_ERF) fwd_loop8(y, x, n, true);
    else fwd_loop8(y, x, n, false);
}

BRG_AVX2 static void gelu_bwd_avx2(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind) {
    if (kind == BRG_GELU_ERF) bwd_loop8(dx, dy, x, n, true);
    else bwd_loop8(dx, dy, x, n, false);
}
#endif

static void gelu_fwd_range(float *y, const float *x, int64_t n, brg_gelu_kind kind) {
    const bool erf = kind == BRG_GELU_ERF;
    BRG_SIMD_PICK(erf ? gelu_erf_fwd_avx512(y, x, n) : gelu_tanh_fwd_avx512(y, x, n), gelu_fwd_avx2(y, x, n, kind),
                  erf ? gelu_erf_fwd(y, x, n) : gelu_tanh_fwd(y, x, n));
}

static void gelu_bwd_range(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind) {
    const bool erf = kind == BRG_GELU_ERF;
    BRG_SIMD_PICK(erf ? gelu_erf_bwd_avx512(dx, dy, x, n) : gelu_tanh_bwd_avx512(dx, dy, x, n),
                  gelu_bwd_avx2(dx, dy, x, n, kind), erf ? gelu_erf_bwd(dx, dy, x, n) : gelu_tanh_bwd(dx, dy, x, n));
}

/* A device's team takes a share of the elements each, cut at multiples of 64 so that every
 * element falls in the same position of a vector step as alone. */
#define SPLIT_UNIT 64

typedef struct gelu_job {
    float *out;
    const float *dy, *x;
    int64_t n;
    brg_gelu_kind kind;
} gelu_job;

static void gelu_fwd_slice(void *p, int i, int n_slices) {
    const gelu_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, SPLIT_UNIT, i, n_slices, &first, &last);
    if (last > first) gelu_fwd_range(j->out + first, j->x + first, last - first, j->kind);
}

static void gelu_bwd_slice(void *p, int i, int n_slices) {
    const gelu_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, SPLIT_UNIT, i, n_slices, &first, &last);
    if (last > first) gelu_bwd_range(j->out + first, j->dy + first, j->x + first, last - first, j->kind);
}

void brg_k_gelu_fwd(float *y, const float *x, int64_t n, brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0);
    BRG_ASSERT(kind == BRG_GELU_ERF || kind == BRG_GELU_TANH);
    gelu_job job = {y, NULL, x, n, kind};
    brg_team_split(gelu_fwd_slice, &job, n);
}

void brg_k_gelu_bwd(float *dx, const float *dy, const float *x, int64_t n, brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0);
    BRG_ASSERT(kind == BRG_GELU_ERF || kind == BRG_GELU_TANH);
    if (!dx) return;
    gelu_job job = {dx, dy, x, n, kind};
    brg_team_split(gelu_bwd_slice, &job, n);
}

/* ---- bias + GELU after a linear layer's product, one row at a time: the row stays in L1 between
 * the bias add and the activation (forward), and between the derivative and the bias gradient
 * (backward), so each is one pass over the [n, c] matrix instead of two. The arithmetic is that
 * of brg_k_linear_fwd's bias add, brg_k_gelu_fwd/bwd and the linear layer's column sums, in the
 * same order, so the fused pass gives the same bits as the separate ones. */

/* Rows [first, last): the bias add and the activation. */
typedef struct bias_gelu_job {
    float *h, *a, *db;
    const float *b, *da, *hc;
    double *acc;
    int64_t n, c;
    brg_gelu_kind kind;
} bias_gelu_job;

static void bias_gelu_fwd_rows(const bias_gelu_job *j, int64_t first, int64_t last) {
    const int64_t c = j->c;
    for (int64_t i = first; i < last; i++) {
        float *row = j->h + i * c;
        if (j->b)
            for (int64_t k = 0; k < c; k++) row[k] += j->b[k];
        gelu_fwd_range(j->a + i * c, row, c, j->kind);
    }
}

static void bias_gelu_fwd_slice(void *p, int i, int n_slices) {
    const bias_gelu_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 1, i, n_slices, &first, &last);
    bias_gelu_fwd_rows(j, first, last);
}

void brg_k_bias_gelu_fwd(float *h, float *a, const float *b, int64_t n, int64_t c, brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0 && c >= 0);
    bias_gelu_job job = {.h = h, .a = a, .b = b, .n = n, .c = c, .kind = kind};
    brg_team_split(bias_gelu_fwd_slice, &job, n * c);
}

/* acc[j] += row[j] in double. */
static void add_row_wide(double *acc, const float *row, int64_t c) {
    for (int64_t j = 0; j < c; j++) acc[j] += row[j];
}

/* dh for rows [first, last); with acc, their column sums added row by row (the fused pass). */
static void bias_gelu_bwd_rows(const bias_gelu_job *j, int64_t first, int64_t last, double *acc) {
    const int64_t c = j->c;
    for (int64_t i = first; i < last; i++) {
        float *row = j->h + i * c;
        for (int64_t k = 0; k < c; k++) row[k] = 0.0f;
        gelu_bwd_range(row, j->da + i * c, j->hc + i * c, c, j->kind);
        if (acc) add_row_wide(acc, row, c);
    }
}

/* On a team: dh for a share of the rows, then (second run) db for a share of the columns, each
 * column summed down all the rows in order: the sums of the fused pass, bit for bit. */
static void bias_gelu_bwd_slice(void *p, int i, int n_slices) {
    const bias_gelu_job *j = p;
    int64_t first, last;
    brg_team_slice(j->n, 1, i, n_slices, &first, &last);
    bias_gelu_bwd_rows(j, first, last, NULL);
}

static void bias_gelu_db_slice(void *p, int i, int n_slices) {
    const bias_gelu_job *j = p;
    int64_t first, last;
    brg_team_slice(j->c, 16, i, n_slices, &first, &last);
    for (int64_t r = 0; r < j->n; r++) {
        const float *row = j->h + r * j->c;
        for (int64_t k = first; k < last; k++) j->acc[k] += row[k];
    }
    for (int64_t k = first; k < last; k++) j->db[k] = (float)(j->db[k] + j->acc[k]);
}

void brg_k_bias_gelu_bwd(float *dh, float *db, const float *da, const float *h, int64_t n, int64_t c,
                         brg_gelu_kind kind) {
    BRG_ASSERT(n >= 0 && c >= 0);
    /* The column sums of dh, in double (slot 1: brg_linear_act keeps dh in slot 2). */
    double *acc = db ? (double *)brg_scratch(1, 2 * (size_t)c) : NULL;
    if (acc)
        for (int64_t j = 0; j < c; j++) acc[j] = 0.0;
    bias_gelu_job job = {.h = dh, .db = db, .da = da, .hc = h, .acc = acc, .n = n, .c = c, .kind = kind};
    if (n * c >= BRG_TEAM_MIN_ELEMENTS && brg_team_run(bias_gelu_bwd_slice, &job)) {
        if (acc) brg_team_run(bias_gelu_db_slice, &job);
        return;
    }
    bias_gelu_bwd_rows(&job, 0, n, acc);
    if (acc)
        for (int64_t j = 0; j < c; j++) db[j] = (float)(db[j] + acc[j]);
}
