/* Precision modes: names, products in a reduced compute type, rounding of half masters
 * (nearest and stochastic) and the automatic loss scaler. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/precision.h"
#include "brigade/trainer.h"
#include "kernels/kernels.h"
#include "test_util.h"
#include "train/half_masters.h"
#include "train/loss_scale.h"

static void test_names(void) {
    const char *spellings[][2] = {{"32.32", "32.32"}, {"fp32.32", "32.32"}, {"16.32", "16.32"},  {"FP16.32", "16.32"},
                                  {"16.16", "16.16"}, {"bf16.32", "bf16.32"}, {"BF16.16", "bf16.16"}};
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        brg_precision p = BRG_PRECISION_COUNT;
        CHECK_OK(brg_precision_parse(spellings[i][0], &p));
        CHECK_MSG(strcmp(brg_precision_name(p), spellings[i][1]) == 0, "%s parsed as %s", spellings[i][0],
                  brg_precision_name(p));
    }
    brg_precision p;
    CHECK_ERR(brg_precision_parse("fp8.32", &p), BRG_ERR_INVALID_ARG, "32.32, 16.32, 16.16, bf16.32, bf16.16");
    CHECK_ERR(brg_precision_parse("", &p), BRG_ERR_INVALID_ARG, "is not one of");
    CHECK(brg_precision_compute_dtype(BRG_PRECISION_16_32) == BRG_DTYPE_F16);
    CHECK(brg_precision_master_dtype(BRG_PRECISION_16_32) == BRG_DTYPE_F32);
    CHECK(brg_precision_compute_dtype(BRG_PRECISION_BF16_16) == BRG_DTYPE_BF16);
    CHECK(brg_precision_master_dtype(BRG_PRECISION_BF16_16) == BRG_DTYPE_BF16);
    CHECK(brg_precision_compute_dtype(BRG_PRECISION_32_32) == BRG_DTYPE_F32);
}

static float round_to(brg_dtype t, float x) {
    return t == BRG_DTYPE_BF16 ? brg_bf16_to_f32(brg_f32_to_bf16(x)) : brg_f16_to_f32(brg_f32_to_f16(x));
}

static void fill(float *x, int64_t n, unsigned seed) {
    srand(seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* A product under a half compute type is the fp32 product of the rounded operands (computed
 * here by brg_gemm_ref in double: the two differ only by fp32 accumulation), for every
 * transpose and a leading dimension wider than the matrix; it is not the unrounded product. */
static void test_rounded_products(brg_dtype type) {
    enum { M = 37, N = 29, K = 53, LD = 61 };
    static float A[K * LD], B[K * LD], Ar[K * LD], Br[K * LD], C[M * N], R[M * N], F[M * N];
    fill(A, K * LD, 1);
    fill(B, K * LD, 2);
    for (int i = 0; i < K * LD; i++) Ar[i] = round_to(type, A[i]), Br[i] = round_to(type, B[i]);
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            brg_gemm_ref(ta, tb, M, N, K, 1.0f, Ar, LD, Br, LD, 0.0f, R, N);
            brg_gemm_ref(ta, tb, M, N, K, 1.0f, A, LD, B, LD, 0.0f, F, N);
            for (int i = 0; i < M * N; i++) C[i] = 0.5f;
            CHECK(brg_compute_dtype_set(type) == BRG_DTYPE_F32);
            brg_gemm(ta, tb, M, N, K, 1.0f, A, LD, B, LD, 1.0f, C, N);
            CHECK(brg_compute_dtype() == type);
            brg_compute_dtype_set(BRG_DTYPE_F32);
            double worst = 0, off = 0;
            for (int i = 0; i < M * N; i++) {
                worst = fmax(worst, fabs((double)C[i] - 0.5 - R[i]));
                off = fmax(off, fabs((double)C[i] - 0.5 - F[i]));
            }
            CHECK_MSG(worst < 2e-5, "%s product (ta %d, tb %d) differs from the rounded operands' by %g",
                      brg_dtype_name(type), ta, tb, worst);
            CHECK_MSG(off > 1e-4, "%s product (ta %d, tb %d) equals the unrounded one (%g): operands not rounded",
                      brg_dtype_name(type), ta, tb, off);
        }
    }
}

enum { TM = 256, TN = 96, TK = 128 };

typedef struct team_args {
    const float *A, *B;
    float *C;
} team_args;

/* Slice i of n computes its rows with brg_gemm on its own thread. */
static void rows_slice(void *ctx, int i, int n) {
    const team_args *a = ctx;
    const int64_t first = TM * i / n, last = TM * (i + 1) / n;
    brg_gemm(false, false, last - first, TN, TK, 1.0f, a->A + first * TK, TK, a->B, TN, 0.0f, a->C + first * TN, TN);
}

/* The team's threads round as the thread that hands them work does: products they run inside a
 * team job give the bits the calling thread alone gives. */
static void test_team_follows(void) {
    float *A = malloc(sizeof(float) * TM * TK), *B = malloc(sizeof(float) * TK * TN);
    float *C1 = malloc(sizeof(float) * TM * TN), *C2 = malloc(sizeof(float) * TM * TN);
    fill(A, TM * TK, 3);
    fill(B, TK * TN, 4);
    brg_compute_dtype_set(BRG_DTYPE_BF16);
    brg_gemm(false, false, TM, TN, TK, 1.0f, A, TK, B, TN, 0.0f, C1, TN);
    brg_gemm_team *team = NULL;
    CHECK_OK(brg_gemm_team_create(2, &team));
    brg_gemm_team_bind(team);
    team_args args = {A, B, C2};
    CHECK(brg_team_run(rows_slice, &args));
    brg_gemm_team_bind(NULL);
    brg_gemm_team_destroy(team);
    brg_compute_dtype_set(BRG_DTYPE_F32);
    CHECK_MSG(memcmp(C1, C2, sizeof(float) * TM * TN) == 0, "a team thread's bf16 product differs from the caller's");
    free(A), free(B), free(C1), free(C2);
}

static void test_round_nearest(brg_dtype type) {
    float x[6] = {1.0f, 1.0f + 0x1p-12f, -3.14159f, 1e30f, NAN, -INFINITY};
    float y[6];
    memcpy(y, x, sizeof x);
    half_round(type, y, 6);
    for (int i = 0; i < 6; i++) {
        const float want = round_to(type, x[i]);
        CHECK_MSG(isnan(want) ? isnan(y[i]) : y[i] == want, "%s: %g rounded to %g, not %g", brg_dtype_name(type),
                  (double)x[i], (double)y[i], (double)want);
    }
}

/* Stochastic rounding: only the two neighbours, exact values kept, unbiased, reproducible from
 * (seed, stream, index) and different for another seed; infinities and NaN kept; a value past
 * the largest finite one stays finite. */
static void test_round_stochastic(brg_dtype type) {
    enum { N = 200000 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    const float lo = 1.0f, step = type == BRG_DTYPE_BF16 ? 0x1p-7f : 0x1p-10f, v = lo + 0.3f * step;
    for (int i = 0; i < N; i++) x[i] = v;
    memcpy(y, x, sizeof(float) * N);
    half_round_stochastic(type, y, N, 7, 11);
    double sum = 0;
    int up = 0;
    for (int i = 0; i < N; i++) {
        CHECK_MSG(y[i] == lo || y[i] == lo + step, "%s: %g rounded to %g, not a neighbour", brg_dtype_name(type),
                  (double)v, (double)y[i]);
        up += y[i] != lo;
        sum += y[i];
    }
    /* p = 0.3: the count of upward roundings is binomial; 5 sigma */
    const double sigma = sqrt(N * 0.3 * 0.7);
    CHECK_MSG(fabs(up - 0.3 * N) < 5 * sigma, "%s: %d of %d rounded up (expected %.0f)", brg_dtype_name(type), up, N,
              0.3 * N);
    CHECK_MSG(fabs(sum / N - v) < 5 * sigma * step / N, "%s: mean %.9g vs %.9g", brg_dtype_name(type), sum / N,
              (double)v);
    /* reproducible, and split-independent: the second half alone gets the same draws */
    float *z = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) z[i] = v;
    half_round_stochastic(type, z, N, 7, 11);
    CHECK(memcmp(y, z, sizeof(float) * N) == 0);
    for (int i = 0; i < N; i++) z[i] = v;
    half_round_stochastic(type, z, N, 8, 11);
    CHECK_MSG(memcmp(y, z, sizeof(float) * N) != 0, "another seed gave the same draws");
    float edge[5] = {2.5f, INFINITY, NAN, -0.0f, 3.0e38f};
    half_round_stochastic(type, edge, 5, 1, 2);
    CHECK(edge[0] == 2.5f && isinf(edge[1]) && isnan(edge[2]) && edge[3] == 0.0f);
    if (type == BRG_DTYPE_F16) CHECK_MSG(edge[4] == 65504.0f, "3e38 rounded to %g in fp16", (double)edge[4]);
    else CHECK(isfinite(edge[4]));
    free(x), free(y), free(z);
}

static void test_scaler(void) {
    brg_train_options o;
    brg_train_options_default(&o);
    loss_scaler s;
    CHECK_OK(loss_scaler_init(&s, &o));
    CHECK(!s.active && s.scale == 1.0f && loss_scaler_update(&s, false)); /* off: a static scaler applies */
    o.loss_scaling = 512;
    CHECK_OK(loss_scaler_init(&s, &o));
    CHECK(s.active && s.scale == 512.0f && loss_scaler_update(&s, true) && s.scale == 512.0f);
    o.loss_scaling = 0, o.auto_loss_scaling = true, o.loss_scaling_interval = 3;
    CHECK_OK(loss_scaler_init(&s, &o));
    CHECK(s.scale == 65536.0f); /* GradScaler's 2^16 */
    CHECK(!loss_scaler_update(&s, false) && s.scale == 32768.0f);
    CHECK(loss_scaler_update(&s, true) && loss_scaler_update(&s, true) && s.scale == 32768.0f);
    CHECK(loss_scaler_update(&s, true) && s.scale == 65536.0f); /* the third clean step doubles */
    CHECK(loss_scaler_update(&s, true) && !loss_scaler_update(&s, false) && s.scale == 32768.0f);
    CHECK(loss_scaler_update(&s, true) && loss_scaler_update(&s, true) && s.scale == 32768.0f); /* count restarted */
    o.loss_scaling = -1;
    CHECK_ERR(loss_scaler_init(&s, &o), BRG_ERR_INVALID_ARG, "positive");
}

/* Bad bounds are refused before anything is made. */
static void test_clamp_bounds(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("test", 0, &a));
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    float v[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    brg_tensor x = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, v);
    brg_tensor *y = NULL;
    CHECK_ERR(brg_clamp(tape, &x, 2.0f, 1.0f, &y), BRG_ERR_INVALID_ARG, "the lower bound 2 exceeds the upper 1");
    CHECK_ERR(brg_clamp(tape, &x, NAN, 1.0f, &y), BRG_ERR_INVALID_ARG, "exceeds");
    CHECK_OK(brg_clamp(tape, &x, 1.5f, 2.5f, &y));
    CHECK(y && ((float *)y->data)[0] == 1.5f && ((float *)y->data)[1] == 2.0f && ((float *)y->data)[2] == 2.5f);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

int main(void) {
    test_clamp_bounds();
    test_names();
    test_rounded_products(BRG_DTYPE_BF16);
    test_rounded_products(BRG_DTYPE_F16);
    test_team_follows();
    test_round_nearest(BRG_DTYPE_BF16);
    test_round_nearest(BRG_DTYPE_F16);
    test_round_stochastic(BRG_DTYPE_BF16);
    test_round_stochastic(BRG_DTYPE_F16);
    test_scaler();
    return test_finish();
}
