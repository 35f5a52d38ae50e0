/* GEMM on a B packed once (kernels.h, brg_gemm_packed): the layouts, packing a whole matrix,
 * the product on it (split across the bound team as brg_gemm splits) and the per-thread provider
 * of packed weights.
 *
 * A packed B holds exactly the bytes gemm_blocked.c would pack for each block of every product
 * that reads it, and the product runs the same loops and tiles on them, so the bits are those of
 * brg_gemm on the plain matrix. What it saves: on an inference micro-batch of a few rows, packing
 * the weight is most of a product's time (K x N elements moved for M x N x K multiply-adds). */
#include <string.h>

#include "brigade/precision.h"
#include "brigade/status.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_blocked.h"
#include "kernels/gemm_half.h"
#include "kernels/kernels.h"

static const brg_gemm_kernel *kernel_of(brg_gemm_pack_layout layout) {
    switch (layout) {
    case BRG_GEMM_PACK_AVX512: return brg_gemm_avx512_kernel();
    case BRG_GEMM_PACK_AVX2: return brg_gemm_avx2_kernel();
    case BRG_GEMM_PACK_AMXBF16: return brg_gemm_amx_kernel();
    case BRG_GEMM_PACK_NONE: break;
    }
    return NULL;
}

brg_gemm_pack_layout brg_gemm_pack_layout_now(void) { return brg_gemm_pack_layout_for(brg_compute_dtype()); }

brg_gemm_pack_layout brg_gemm_pack_layout_for(brg_dtype compute) {
    if (compute != BRG_DTYPE_F32) /* only the AMX kernel rounds while it packs */
        return compute == BRG_DTYPE_BF16 && brg_gemm_half_kernel_for(compute, compute) == BRG_GEMM_HALF_AMXBF16
                   ? BRG_GEMM_PACK_AMXBF16
                   : BRG_GEMM_PACK_NONE;
    const char *b = brg_gemm_backend();
    if (strcmp(b, "avx512") == 0) return BRG_GEMM_PACK_AVX512;
    if (strcmp(b, "avx2") == 0) return BRG_GEMM_PACK_AVX2;
    return BRG_GEMM_PACK_NONE;
}

/* The names spell the blocking out; the asserts keep them true. */
_Static_assert(BRG_GEMM_AVX512_MR == 14 && BRG_GEMM_AVX512_NR == 32 && BRG_GEMM_AVX512_KC == 384 &&
                   BRG_GEMM_AVX512_NC == 384,
               "brg_gemm_pack_layout_name spells out the AVX-512 blocking");
_Static_assert(BRG_GEMM_AMX_MR == 32 && BRG_GEMM_AMX_NR == 32 && BRG_GEMM_AMX_KC == 1536 && BRG_GEMM_AMX_NC == 512,
               "brg_gemm_pack_layout_name spells out the AMX blocking");
_Static_assert(BRG_GEMM_AVX2_MR == 6 && BRG_GEMM_AVX2_NR == 16 && BRG_GEMM_AVX2_KC == 256 && BRG_GEMM_AVX2_NC == 256,
               "brg_gemm_pack_layout_name spells out the AVX2 blocking");

const char *brg_gemm_pack_layout_name(brg_gemm_pack_layout layout) {
    switch (layout) {
    case BRG_GEMM_PACK_AVX512: return "avx512 fp32 panels MR14 NR32 KC384 NC384";
    case BRG_GEMM_PACK_AVX2: return "avx2 fp32 panels MR6 NR16 KC256 NC256";
    case BRG_GEMM_PACK_AMXBF16: return "amxbf16 bf16 panels MR32 NR32 KC1536 NC512";
    case BRG_GEMM_PACK_NONE: break;
    }
    return "none";
}

size_t brg_gemm_pack_bytes(brg_gemm_pack_layout layout, int64_t K, int64_t N) {
    const brg_gemm_kernel *k = kernel_of(layout);
    return k ? brg_gemm_blocked_packed_bytes(k, K, N) : 0;
}

void brg_gemm_packed_b_wrap(brg_gemm_pack_layout layout, bool trans_b, int64_t K, int64_t N, const float *B,
                            int64_t ldb, const void *panels, brg_packed_b *out) {
    BRG_ASSERT(K >= 0 && N >= 0 && ldb >= (trans_b ? K : N));
    *out = (brg_packed_b){kernel_of(layout) ? layout : BRG_GEMM_PACK_NONE, trans_b, K, N, ldb, B,
                          kernel_of(layout) ? panels : NULL};
}

typedef struct pack_job {
    const brg_gemm_kernel *k;
    bool trans_b;
    int64_t K, N, ldb;
    const float *B;
    void *dst;
} pack_job;

static void pack_share(void *ctx, int i, int n) {
    const pack_job *j = ctx;
    brg_gemm_blocked_pack_b(j->k, j->trans_b, j->K, j->N, BRG_DTYPE_F32, j->B, j->ldb, j->dst, i, n);
}

void brg_gemm_pack_b(brg_gemm_pack_layout layout, bool trans_b, int64_t K, int64_t N, const float *B, int64_t ldb,
                     void *dst, brg_packed_b *out) {
    brg_gemm_packed_b_wrap(layout, trans_b, K, N, B, ldb, dst, out);
    const brg_gemm_kernel *k = kernel_of(out->layout);
    if (!k || K <= 0 || N <= 0) return;
    /* A training device packs its weights every step: the team shares it, block by block (each
     * block's bytes are the same whoever packs them). */
    pack_job job = {k, trans_b, K, N, ldb, B, dst};
    if (K * N >= BRG_TEAM_MIN_ELEMENTS && brg_team_run(pack_share, &job)) return;
    pack_share(&job, 0, 1);
}

typedef struct packed_job {
    bool ta;
    int64_t M, N, K;
    float alpha, beta;
    const float *A;
    int64_t lda;
    const brg_packed_b *B;
    float *C;
    int64_t ldc;
} packed_job;

/* Rows [first, last) of C on this thread alone. */
static void rows_alone(const packed_job *j, int64_t first, int64_t last) {
    const float *A = j->ta ? j->A + first : j->A + first * j->lda;
    float *C = j->C + first * j->ldc;
    const brg_packed_b *B = j->B;
    if (brg_gemm_blocked_packed(kernel_of(B->layout), j->ta, last - first, j->N, j->K, j->alpha, BRG_DTYPE_F32, A,
                                j->lda, B->panels, j->beta, C, j->ldc))
        return;
    /* No A buffer: the plain product, which has fallbacks of its own. */
    brg_gemm(j->ta, B->trans_b, last - first, j->N, j->K, j->alpha, A, j->lda, B->plain, B->ldb, j->beta, C, j->ldc);
}

static void packed_slice(void *ctx, int i, int n) {
    const packed_job *j = ctx;
    const int64_t first = j->M * i / n, last = j->M * (i + 1) / n;
    if (last > first) rows_alone(j, first, last);
}

/* brg_gemm's rule (gemm_team.c): products below this many multiply-adds stay on one thread. */
#define TEAM_MIN_WORK (1 << 20)

void brg_gemm_packed(bool trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const brg_packed_b *B, float beta, float *C, int64_t ldc) {
    BRG_ASSERT(B->K == K && B->N == N && M >= 0 && lda >= (trans_a ? M : K) && ldc >= N);
    if (B->layout == BRG_GEMM_PACK_NONE || B->layout != brg_gemm_pack_layout_now() || M == 0 || N == 0 || K == 0 ||
        alpha == 0.0f) {
        brg_gemm(trans_a, B->trans_b, M, N, K, alpha, A, lda, B->plain, B->ldb, beta, C, ldc);
        return;
    }
    const packed_job job = {trans_a, M, N, K, alpha, beta, A, lda, B, C, ldc};
    /* Rows of C split as brg_gemm splits them; each element keeps its loop over K either way. */
    const int team = brg_team_size();
    if (team >= 2 && M >= 2 * team && M * N * K >= TEAM_MIN_WORK && brg_team_run(packed_slice, (void *)&job)) return;
    rows_alone(&job, 0, M);
}

/* ---- the provider bound to this thread ---- */

static _Thread_local brg_packed_weights_fn bound_fn;
static _Thread_local void *bound_ctx;

void brg_packed_weights_bind(brg_packed_weights_fn fn, void *ctx) {
    bound_fn = fn;
    bound_ctx = fn ? ctx : NULL;
}

const brg_packed_b *brg_packed_weights_find(const float *B, bool trans_b, int64_t K, int64_t N, int64_t ldb) {
    return bound_fn ? bound_fn(bound_ctx, B, trans_b, K, N, ldb) : NULL;
}
