/* The blocked GEMM driver of gemm_blocked.h: block loops, block packing, per-thread buffers. */
#include "kernels/gemm_blocked.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;
static bool buffers_key_ok;
/* Devices are long-lived threads that call GEMM thousands of times per step, so each thread
 * keeps its packing buffers and only grows them; a thread-exit destructor frees them. The
 * kernels run one at a time on a thread, so they share one pair. */
typedef struct pack_buffers {
    float *a, *b;
    size_t a_cap, b_cap; /* in floats */
} pack_buffers;

static _Thread_local pack_buffers *thread_buffers;

static void buffers_free(void *p) {
    pack_buffers *pb = p;
    free(pb->a);
    free(pb->b);
    free(pb);
    thread_buffers = NULL; /* a GEMM in a later exit handler of this thread starts afresh */
}

static void buffers_key_create(void) { buffers_key_ok = pthread_key_create(&buffers_key, buffers_free) == 0; }

/* 64-byte aligned so the microkernels' B loads are aligned and each A panel starts on a line. */
static bool grow(float **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t bytes = (need * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (!p) return false;
    free(*buf);
    *buf = p;
    *cap = bytes / sizeof(float);
    return true;
}

static pack_buffers *buffers_get(size_t a_need, size_t b_need) {
    pack_buffers *pb = thread_buffers;
    if (!pb) {
        pthread_once(&buffers_once, buffers_key_create);
        if (!buffers_key_ok) return NULL;
        pb = calloc(1, sizeof *pb);
        if (!pb) return NULL;
        if (pthread_setspecific(buffers_key, pb) != 0) {
            free(pb);
            return NULL;
        }
        thread_buffers = pb;
    }
    if (!grow(&pb->a, &pb->a_cap, a_need) || !grow(&pb->b, &pb->b_cap, b_need)) return NULL;
    return pb;
}

void brg_gemm_scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    if (beta == 1.0f) return;
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : c[j] * beta;
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* op(A)[ic:ic+mc, pc:pc+kc] into MR-row micro-panels, each [kc][MR]. */
static void pack_a(const brg_gemm_kernel *k, float *restrict dst, bool trans_a, const float *A, int64_t lda,
                   int64_t ic, int64_t pc, int64_t mc, int64_t kc) {
    const int64_t MR = k->MR;
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t rows = min64(MR, mc - ir);
        float *d = dst + ir * kc;
        if (trans_a) /* A is [K, M]: the MR rows of a panel are contiguous for each k */
            k->pack_cols(d, MR, A + pc * lda + (ic + ir), lda, rows, kc);
        else
            k->pack_rows(d, MR, (int)MR, A + (ic + ir) * lda + pc, lda, (int)rows, kc, MR);
    }
}

/* op(B)[pc:pc+kc, jc:jc+nc] into NR-column micro-panels, each [kc][NR]. */
static void pack_b(const brg_gemm_kernel *k, float *restrict dst, bool trans_b, const float *B, int64_t ldb,
                   int64_t jc, int64_t pc, int64_t nc, int64_t kc) {
    const int64_t NR = k->NR, G = k->group;
    for (int64_t jr = 0; jr < nc; jr += NR) {
        const int64_t cols = min64(NR, nc - jr);
        float *d = dst + jr * kc;
        if (!trans_b) { /* B is [K, N]: the NR columns of a panel are contiguous for each k */
            k->pack_cols(d, NR, B + pc * ldb + (jc + jr), ldb, cols, kc);
            continue;
        }
        /* B is [N, K]: transpose `group` columns of op(B) (rows of B) at a time */
        for (int64_t g = 0; g < NR; g += G) {
            const int64_t c = cols - g;
            const float *s = B + (jc + jr + g) * ldb + pc;
            k->pack_rows(d + g, NR, (int)G, s, ldb, c <= 0 ? 0 : (int)min64(c, G), kc, G);
        }
    }
}

/* The lowest tile that covers mr rows. */
static brg_tile_fn *tile_for(const brg_gemm_kernel *k, int64_t mr) {
    int t = 0;
    while (t + 1 < k->n_tiles && k->tile_rows[t + 1] >= mr) t++;
    return k->tiles[t];
}

/* Every tile of one packed A block [mc, kc] against one packed B block [kc, nc]. */
static void block_tiles(const brg_gemm_kernel *k, const pack_buffers *pb, int64_t mc, int64_t nc, int64_t kc,
                        float alpha, float beta, float *C, int64_t ldc) {
    const int64_t MR = k->MR, NR = k->NR;
    if (k->b_panel_outer) {
        for (int64_t jr = 0; jr < nc; jr += NR)
            for (int64_t ir = 0; ir < mc; ir += MR) {
                const int64_t mr = min64(MR, mc - ir);
                tile_for(k, mr)(kc, pb->a + ir * kc, pb->b + jr * kc, C + ir * ldc + jr, ldc, alpha, beta, mr,
                                min64(NR, nc - jr));
            }
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = min64(MR, mc - ir);
        brg_tile_fn *fn = tile_for(k, mr);
        for (int64_t jr = 0; jr < nc; jr += NR)
            fn(kc, pb->a + ir * kc, pb->b + jr * kc, C + ir * ldc + jr, ldc, alpha, beta, mr, min64(NR, nc - jr));
    }
}

bool brg_gemm_blocked(const brg_gemm_kernel *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                      int64_t ldc) {
    if (M <= 0 || N <= 0) return true;
    if (K <= 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return true;
    }
    const int64_t KC = k->KC, MC = k->MC, NC = k->NC;
    const int64_t kc_max = min64(KC, K);
    pack_buffers *pb = buffers_get((size_t)(round_up(min64(MC, M), k->MR) * kc_max),
                                   (size_t)(round_up(min64(NC, N), k->NR) * kc_max));
    if (!pb) return false;
    for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = min64(MC, M - ic);
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = min64(KC, K - pc);
            /* beta applies once, with the first slice of K; later slices accumulate. */
            const float beta_k = pc == 0 ? beta : 1.0f;
            pack_a(k, pb->a, trans_a, A, lda, ic, pc, mc, kc);
            for (int64_t jc = 0; jc < N; jc += NC) {
                const int64_t nc = min64(NC, N - jc);
                pack_b(k, pb->b, trans_b, B, ldb, jc, pc, nc, kc);
                block_tiles(k, pb, mc, nc, kc, alpha, beta_k, C + ic * ldc + jc, ldc);
            }
        }
    }
    return true;
}
