/* GEMM with half-precision operands (kernels.h, brg_gemm_half): the choice of kernel, the team
 * split, the OpenBLAS fallback and the reference.
 *
 * Kernels, chosen once per process from the CPU, BRIGADE_ISA and BRIGADE_GEMM (the variable
 * brg_gemm reads; each name picks the same family for both):
 *   amxbf16     TDPBF16PS on the AMX tiles (gemm_amx.c); the default when both operands are bf16
 *               and the CPU has AMX-BF16 (Intel Xeon from Sapphire Rapids on), the OS enabling
 *               it. Other operand types get avx512.
 *   avx512bf16  VDPBF16PS on bf16 pairs (gemm_bf16.c); the default when both operands are bf16,
 *               there is no AMX, and the CPU has AVX512_BF16 issued as fast as fp32 FMAs (AMD;
 *               on Intel's cores it runs at half their rate, so avx512 is the default there:
 *               brg_isa_bf16_dot_outruns_fma). Other operand types get avx512.
 *   avx512      half operands widened to fp32 while packing, then the fp32 AVX-512 microkernel:
 *               the bits of brg_gemm's avx512 kernel on the widened operands. The default on
 *               AVX-512 CPUs without AVX512_BF16 or where it is slower (Intel), and for fp16 (or
 *               mixed) operands.
 *   avx2        the same with the fp32 AVX2 microkernel; the default on AVX2 CPUs.
 *   openblas    operands widened into fp32 buffers, then OpenBLAS's sgemm (openblas.c); the default
 *               below AVX2.
 *   ref         brg_gemm_half_ref, double accumulation (slow; the yardstick of the tests).
 * BRIGADE_GEMM=amxbf16 and avx512bf16 ask for the tiles or VDPBF16PS wherever the CPU has them
 * (else the default); avx512, avx2 ask for a widening kernel (capped by the CPU as for
 * brg_gemm), so an AVX512_BF16 machine can run exactly what an AVX-512 or AVX2 one runs. No
 * kernel accumulates in fp16 (brg_gemm_half_partials_available). */
#include "kernels/gemm_half.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/status.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_blocked.h"
#include "kernels/half.h"
#include "kernels/kernels.h"
#include "kernels/openblas.h"

static const char *const kernel_names[] = {"openblas", "avx512", "avx2", "ref", "avx512bf16", "amxbf16"};

const char *brg_gemm_half_kernel_name(brg_gemm_half_kernel k) {
    return (unsigned)k < BRG_GEMM_HALF_KERNEL_COUNT ? kernel_names[k] : "unknown";
}

static bool operand_type(brg_dtype t) { return t == BRG_DTYPE_F32 || t == BRG_DTYPE_F16 || t == BRG_DTYPE_BF16; }

bool brg_gemm_half_kernel_supported(brg_gemm_half_kernel k, brg_dtype a_type, brg_dtype b_type) {
    if (!operand_type(a_type) || !operand_type(b_type)) return false;
    const bool f16 = a_type == BRG_DTYPE_F16 || b_type == BRG_DTYPE_F16;
    switch (k) {
    case BRG_GEMM_HALF_OPENBLAS:
    case BRG_GEMM_HALF_REF: return true;
    case BRG_GEMM_HALF_AVX512: return brg_isa_hardware(BRG_ISA_AVX512);
    case BRG_GEMM_HALF_AVX2: return brg_isa_hardware(BRG_ISA_AVX2) && (!f16 || brg_isa_has_f16c());
    case BRG_GEMM_HALF_AVX512BF16:
        return a_type == BRG_DTYPE_BF16 && b_type == BRG_DTYPE_BF16 && brg_isa_has_avx512bf16();
    case BRG_GEMM_HALF_AMXBF16: return a_type == BRG_DTYPE_BF16 && b_type == BRG_DTYPE_BF16 && brg_isa_has_amx_bf16();
    case BRG_GEMM_HALF_KERNEL_COUNT: break;
    }
    return false;
}

/* ---- choice ---- */

static brg_gemm_half_kernel preferred = BRG_GEMM_HALF_OPENBLAS;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static brg_gemm_half_kernel widening_for(brg_isa isa) {
    if (isa >= BRG_ISA_AVX512) return BRG_GEMM_HALF_AVX512;
    if (isa >= BRG_ISA_AVX2) return BRG_GEMM_HALF_AVX2;
    return BRG_GEMM_HALF_OPENBLAS;
}

static void choose(void) {
    const brg_isa isa = brg_isa_detected();
    const bool bf16_dot = isa >= BRG_ISA_AVX512 && brg_isa_has_avx512bf16();
    const bool tiles = isa >= BRG_ISA_AVX512 && brg_isa_has_amx_bf16();
    const brg_gemm_half_kernel best = tiles                                            ? BRG_GEMM_HALF_AMXBF16
                                      : bf16_dot && brg_isa_bf16_dot_outruns_fma() ? BRG_GEMM_HALF_AVX512BF16
                                                                                   : widening_for(isa);
    preferred = best;
    const char *env = getenv("BRIGADE_GEMM");
    if (!env || !*env) return;
    if (strcmp(env, "amxbf16") == 0) preferred = tiles ? BRG_GEMM_HALF_AMXBF16 : best;
    else if (strcmp(env, "avx512bf16") == 0) preferred = bf16_dot ? BRG_GEMM_HALF_AVX512BF16 : best;
    else if (strcmp(env, "avx512") == 0) preferred = widening_for(isa);
    else if (strcmp(env, "avx2") == 0) preferred = widening_for(isa < BRG_ISA_AVX2 ? isa : BRG_ISA_AVX2);
    else if (strcmp(env, "ref") == 0) preferred = BRG_GEMM_HALF_REF;
    else if (strcmp(env, "openblas") == 0) preferred = BRG_GEMM_HALF_OPENBLAS;
    else /* A typo must not silently benchmark the wrong kernel. */
        fprintf(stderr,
                "brigade: BRIGADE_GEMM=%s is not one of openblas, amxbf16, avx512bf16, avx512, avx2, ref; "
                "half-precision products use %s\n",
                env, kernel_names[best]);
}

brg_gemm_half_kernel brg_gemm_half_kernel_for(brg_dtype a_type, brg_dtype b_type) {
    pthread_once(&choose_once, choose);
    brg_gemm_half_kernel k = preferred;
    const bool bf16_only = k == BRG_GEMM_HALF_AVX512BF16 || k == BRG_GEMM_HALF_AMXBF16;
    if (bf16_only && !brg_gemm_half_kernel_supported(k, a_type, b_type))
        k = BRG_GEMM_HALF_AVX512; /* the bf16 instructions need bf16 on both sides */
    if (!brg_gemm_half_kernel_supported(k, a_type, b_type)) k = BRG_GEMM_HALF_OPENBLAS;
    return k;
}

const char *brg_gemm_half_backend(brg_dtype a_type, brg_dtype b_type) {
    return kernel_names[brg_gemm_half_kernel_for(a_type, b_type)];
}

bool brg_gemm_half_partials_available(void) { return false; }

/* ---- operands ---- */

static void check_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, brg_dtype a_type, int64_t lda,
                       brg_dtype b_type, int64_t ldb, int64_t ldc) {
    BRG_ASSERT(M >= 0 && N >= 0 && K >= 0);
    BRG_ASSERT(operand_type(a_type) && operand_type(b_type));
    BRG_ASSERT(lda >= (trans_a ? M : K));
    BRG_ASSERT(ldb >= (trans_b ? K : N));
    BRG_ASSERT(ldc >= N);
}

static int64_t elem_bytes(brg_dtype t) { return t == BRG_DTYPE_F32 ? 4 : 2; }

/* Element i of an operand, widened (exactly). */
static float element(brg_dtype t, const void *X, int64_t i) {
    if (t == BRG_DTYPE_F32) return ((const float *)X)[i];
    const uint16_t h = ((const uint16_t *)X)[i];
    return t == BRG_DTYPE_F16 ? brg_f16_to_f32(h) : brg_bf16_to_f32(h);
}

/* brg_gemm_ref's loop on the widened elements, so both give the same bits; with round_bf16,
 * each element is first rounded to bf16 (the fp32 operands of brg_gemm_half_rounded). */
static void ref_loop(bool round_bf16, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     brg_dtype a_type, const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb,
                     float beta, float *C, int64_t ldc) {
    const int64_t a_row = trans_a ? 1 : lda, a_k = trans_a ? lda : 1;
    const int64_t b_k = trans_b ? 1 : ldb, b_col = trans_b ? ldb : 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < K; p++) {
                float a = element(a_type, A, i * a_row + p * a_k), b = element(b_type, B, j * b_col + p * b_k);
                if (round_bf16) a = brg_bf16_to_f32(brg_f32_to_bf16(a)), b = brg_bf16_to_f32(brg_f32_to_bf16(b));
                acc += (double)a * (double)b;
            }
            double prev = beta == 0.0f ? 0.0 : (double)beta * (double)C[i * ldc + j];
            C[i * ldc + j] = (float)((double)alpha * acc + prev);
        }
    }
}

void brg_gemm_half_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                       const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta, float *C,
                       int64_t ldc) {
    check_args(trans_a, trans_b, M, N, K, a_type, lda, b_type, ldb, ldc);
    ref_loop(false, trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C, ldc);
}

/* An operand [rows, cols] (leading dimension ld) as a dense fp32 copy; NULL when out of memory. */
static float *widened(brg_dtype t, const void *X, int64_t rows, int64_t cols, int64_t ld) {
    float *w = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *w);
    if (!w) return NULL;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *src = (const uint16_t *)X + r * ld;
        if (t == BRG_DTYPE_F16) brg_f16_to_f32_row(w + r * cols, src, cols);
        else brg_bf16_to_f32_row(w + r * cols, src, cols);
    }
    return w;
}

static bool openblas_widened(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                             const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta,
                             float *C, int64_t ldc) {
    const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    float *wa = a_type == BRG_DTYPE_F32 ? NULL : widened(a_type, A, a_rows, a_cols, lda);
    float *wb = b_type == BRG_DTYPE_F32 ? NULL : widened(b_type, B, b_rows, b_cols, ldb);
    if ((a_type != BRG_DTYPE_F32 && !wa) || (b_type != BRG_DTYPE_F32 && !wb)) {
        free(wa), free(wb);
        return false;
    }
    const float *fa = wa ? wa : A, *fb = wb ? wb : B;
    const int64_t la = wa ? a_cols : lda, lb = wb ? b_cols : ldb;
    brg_openblas_sgemm(ta, tb, M, N, K, alpha, fa, la, fb, lb, beta, C, ldc);
    free(wa), free(wb);
    return true;
}

bool brg_gemm_half_with(brg_gemm_half_kernel k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                        float alpha, brg_dtype a_type, const void *A, int64_t lda, brg_dtype b_type, const void *B,
                        int64_t ldb, float beta, float *C, int64_t ldc) {
    check_args(trans_a, trans_b, M, N, K, a_type, lda, b_type, ldb, ldc);
    BRG_ASSERT(brg_gemm_half_kernel_supported(k, a_type, b_type));
    if (M == 0 || N == 0) return true;
    if (K == 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return true;
    }
    switch (k) {
    case BRG_GEMM_HALF_AMXBF16:
        return brg_gemm_amxbf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case BRG_GEMM_HALF_AVX512BF16:
        return brg_gemm_avx512bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case BRG_GEMM_HALF_AVX512:
        return brg_gemm_avx512_typed(trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C, ldc);
    case BRG_GEMM_HALF_AVX2:
        return brg_gemm_avx2_typed(trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C, ldc);
    case BRG_GEMM_HALF_OPENBLAS:
        return openblas_widened(trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C, ldc);
    case BRG_GEMM_HALF_REF:
    case BRG_GEMM_HALF_KERNEL_COUNT: break;
    }
    brg_gemm_half_ref(trans_a, trans_b, M, N, K, alpha, a_type, A, lda, b_type, B, ldb, beta, C, ldc);
    return true;
}

/* ---- team split ---- */

typedef struct half_job {
    brg_gemm_half_kernel k;
    bool rounding; /* fp32 operands rounded to bf16 while packed (brg_gemm_half_rounded) */
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    brg_dtype a_type, b_type;
    const void *A, *B;
    float *C;
    int64_t lda, ldb, ldc;
} half_job;

/* One thread's block of C, rows [r0, r1) and columns [c0, c1); a kernel that cannot get its
 * buffers leaves it to the reference, which needs none. */
static void run_alone(const half_job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const int64_t a_off = j->ta ? r0 : r0 * j->lda, b_off = j->tb ? c0 * j->ldb : c0;
    const void *A = (const char *)j->A + a_off * elem_bytes(j->a_type);
    const void *B = (const char *)j->B + b_off * elem_bytes(j->b_type);
    float *C = j->C + r0 * j->ldc + c0;
    const int64_t M = r1 - r0, N = c1 - c0;
    if (j->rounding) {
        if (!brg_gemm_amxbf16_rounding(j->ta, j->tb, M, N, j->K, j->alpha, A, j->lda, B, j->ldb, j->beta, C, j->ldc))
            ref_loop(true, j->ta, j->tb, M, N, j->K, j->alpha, BRG_DTYPE_F32, A, j->lda, BRG_DTYPE_F32, B, j->ldb,
                     j->beta, C, j->ldc);
        return;
    }
    if (!brg_gemm_half_with(j->k, j->ta, j->tb, M, N, j->K, j->alpha, j->a_type, A, j->lda, j->b_type, B, j->ldb,
                            j->beta, C, j->ldc))
        brg_gemm_half_ref(j->ta, j->tb, M, N, j->K, j->alpha, j->a_type, A, j->lda, j->b_type, B, j->ldb, j->beta, C,
                          j->ldc);
}

static void half_slice(void *ctx, int i, int n) {
    const half_job *j = ctx;
    const int64_t first = j->M * i / n, last = j->M * (i + 1) / n;
    if (last > first) run_alone(j, first, last, 0, j->N);
}

static void half_column_slice(void *ctx, int i, int n) {
    const half_job *j = ctx;
    int64_t first, last;
    brg_team_slice(j->N, BRG_TEAM_COLUMN_UNIT, i, n, &first, &last);
    if (last > first) run_alone(j, 0, j->M, first, last);
}

/* brg_gemm's rule (gemm_team.c): products below this many multiply-adds stay on one thread. */
#define TEAM_MIN_WORK (1 << 20)

/* Rows or columns of C split across the team (brg_team_split_columns) keep every element's loop
 * over K (each kernel's depth blocks depend on K alone), so the bits do not depend on the team
 * size; OpenBLAS picks blockings by shape, so it computes whole products as brg_gemm's does. */
static void run_job(const half_job *job) {
    const int team = brg_team_size();
    if (job->k != BRG_GEMM_HALF_OPENBLAS && team >= 2 && job->M * job->N * job->K >= TEAM_MIN_WORK) {
        const bool by_columns = brg_team_split_columns(job->M, job->N, team);
        if ((by_columns || job->M >= 2 * team) &&
            brg_team_run(by_columns ? half_column_slice : half_slice, (void *)job))
            return;
    }
    run_alone(job, 0, job->M, 0, job->N);
}

void brg_gemm_half(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, brg_dtype a_type,
                   const void *A, int64_t lda, brg_dtype b_type, const void *B, int64_t ldb, float beta, float *C,
                   int64_t ldc) {
    check_args(trans_a, trans_b, M, N, K, a_type, lda, b_type, ldb, ldc);
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return;
    }
    const half_job job = {brg_gemm_half_kernel_for(a_type, b_type), false, trans_a, trans_b, M, N, K, alpha, beta,
                          a_type, b_type, A, B, C, lda, ldb, ldc};
    run_job(&job);
}

bool brg_gemm_half_rounded(brg_dtype type, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                           int64_t ldc) {
    const brg_gemm_half_kernel k = brg_gemm_half_kernel_for(type, type);
    if (k != BRG_GEMM_HALF_AMXBF16) return false;
    check_args(trans_a, trans_b, M, N, K, BRG_DTYPE_F32, lda, BRG_DTYPE_F32, ldb, ldc);
    if (M == 0 || N == 0) return true;
    if (K == 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return true;
    }
    const half_job job = {k, true, trans_a, trans_b, M, N, K, alpha, beta, BRG_DTYPE_F32, BRG_DTYPE_F32, A, B, C,
                          lda, ldb, ldc};
    run_job(&job);
    return true;
}
