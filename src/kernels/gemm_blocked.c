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

/* The source types a kernel may pack from index its routine tables. */
static bool src_type_ok(brg_dtype t) { return t == BRG_DTYPE_F32 || t == BRG_DTYPE_F16 || t == BRG_DTYPE_BF16; }

/* A's packing routines for a source type: its own where the kernel has them, else B's. */
static brg_pack_rows_fn *a_rows(const brg_gemm_kernel *k, brg_dtype t) {
    return k->pack_rows_a[t] ? k->pack_rows_a[t] : k->pack_rows[t];
}
static brg_pack_cols_fn *a_cols(const brg_gemm_kernel *k, brg_dtype t) {
    return k->pack_cols_a[t] ? k->pack_cols_a[t] : k->pack_cols[t];
}

bool brg_gemm_blocked_reads(const brg_gemm_kernel *k, brg_dtype a_type, brg_dtype b_type) {
    return src_type_ok(a_type) && src_type_ok(b_type) && a_rows(k, a_type) && a_cols(k, a_type) &&
           k->pack_rows[b_type] && k->pack_cols[b_type];
}

/* One operand as the packing sees it: its bytes, element size and routines. */
typedef struct operand {
    const char *data;
    int64_t ld, elem;
    brg_pack_rows_fn *pack_rows;
    brg_pack_cols_fn *pack_cols;
    /* the copying case a block at a time (NULL: a panel at a time) */
    void (*pack_cols_block)(void *restrict, int64_t, const void *restrict, int64_t, int64_t, int64_t);
} operand;

static operand b_operand(const brg_gemm_kernel *k, brg_dtype type, const void *data, int64_t ld) {
    return (operand){data, ld, type == BRG_DTYPE_F32 ? 4 : 2, k->pack_rows[type], k->pack_cols[type],
                     k->pack_cols_block[type]};
}
static operand a_operand(const brg_gemm_kernel *k, brg_dtype type, const void *data, int64_t ld) {
    return (operand){data, ld, type == BRG_DTYPE_F32 ? 4 : 2, a_rows(k, type), a_cols(k, type),
                     k->pack_cols_a_block[type]};
}

/* The source element `offset` elements into the operand. */
static const void *at(const operand *o, int64_t offset) { return o->data + offset * o->elem; }

/* Bytes of a packed panel of `lanes` lanes over depth kc: 4-byte lanes, kc / k_pack steps, kc
 * padded to the kernel's alignment. */
static int64_t panel_bytes(const brg_gemm_kernel *k, int64_t lanes, int64_t kc) {
    const int64_t align = k->k_align ? k->k_align : k->k_pack;
    return lanes * (round_up(kc, align) / k->k_pack) * 4;
}

/* op(A)[ic:ic+mc, pc:pc+kc] into MR-row micro-panels. */
static void pack_a(const brg_gemm_kernel *k, char *restrict dst, bool trans_a, const operand *A, int64_t ic,
                   int64_t pc, int64_t mc, int64_t kc) {
    const int64_t MR = k->MR, lda = A->ld;
    if (trans_a && A->pack_cols_block) {
        A->pack_cols_block(dst, MR, at(A, pc * lda + ic), lda, mc, kc);
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t rows = min64(MR, mc - ir);
        char *d = dst + panel_bytes(k, ir, kc);
        if (trans_a) /* A is [K, M]: the MR rows of a panel are contiguous for each k */
            A->pack_cols(d, MR, at(A, pc * lda + (ic + ir)), lda, rows, kc);
        else
            A->pack_rows(d, MR, (int)MR, at(A, (ic + ir) * lda + pc), lda, (int)rows, kc, MR);
    }
}

/* op(B)[pc:pc+kc, jc:jc+nc] into NR-column micro-panels. */
static void pack_b(const brg_gemm_kernel *k, char *restrict dst, bool trans_b, const operand *B, int64_t jc,
                   int64_t pc, int64_t nc, int64_t kc) {
    const int64_t NR = k->NR, G = k->group, ldb = B->ld;
    if (!trans_b && B->pack_cols_block) {
        B->pack_cols_block(dst, NR, at(B, pc * ldb + jc), ldb, nc, kc);
        return;
    }
    for (int64_t jr = 0; jr < nc; jr += NR) {
        const int64_t cols = min64(NR, nc - jr);
        char *d = dst + panel_bytes(k, jr, kc);
        if (!trans_b) { /* B is [K, N]: the NR columns of a panel are contiguous for each k */
            B->pack_cols(d, NR, at(B, pc * ldb + (jc + jr)), ldb, cols, kc);
            continue;
        }
        /* B is [N, K]: transpose `group` columns of op(B) (rows of B) at a time; lane g starts
         * 4 * g bytes into each packed step. */
        for (int64_t g = 0; g < NR; g += G) {
            const int64_t c = cols - g;
            const void *s = at(B, (jc + jr + g) * ldb + pc);
            B->pack_rows(d + 4 * g, NR, (int)G, s, ldb, c <= 0 ? 0 : (int)min64(c, G), kc, G);
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
static void block_tiles(const brg_gemm_kernel *k, const char *a, const char *b, int64_t mc, int64_t nc, int64_t kc,
                        float alpha, float beta, float *C, int64_t ldc) {
    const int64_t MR = k->MR, NR = k->NR;
    if (k->b_panel_outer) {
        for (int64_t jr = 0; jr < nc; jr += NR)
            for (int64_t ir = 0; ir < mc; ir += MR) {
                const int64_t mr = min64(MR, mc - ir);
                tile_for(k, mr)(kc, a + panel_bytes(k, ir, kc), b + panel_bytes(k, jr, kc), C + ir * ldc + jr, ldc,
                                alpha, beta, mr, min64(NR, nc - jr));
            }
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = min64(MR, mc - ir);
        brg_tile_fn *fn = tile_for(k, mr);
        for (int64_t jr = 0; jr < nc; jr += NR)
            fn(kc, a + panel_bytes(k, ir, kc), b + panel_bytes(k, jr, kc), C + ir * ldc + jr, ldc, alpha, beta, mr,
               min64(NR, nc - jr));
    }
}

/* Where block (pc, jc) of a whole packed B starts (brg_gemm_blocked_pack_b's layout, below). */
static int64_t packed_block_at(const brg_gemm_kernel *k, int64_t N, int64_t pc, int64_t jc, int64_t kc) {
    return panel_bytes(k, round_up(N, k->NR), pc) + panel_bytes(k, jc, kc);
}

/* The blocked loops. B's block (pc, jc) is packed here from *b_op, or, with whole_b, read where
 * brg_gemm_blocked_pack_b put it: the same bytes either way, so the same bits. */
static bool blocked_loops(const brg_gemm_kernel *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const operand *a_op, const operand *b_op, const char *whole_b, float beta,
                          float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return true;
    if (K <= 0 || alpha == 0.0f) {
        brg_gemm_scale_c(M, N, beta, C, ldc);
        return true;
    }
    const int64_t KC = k->KC, MC = k->MC, NC = k->NC;
    const int64_t kc_max = min64(KC, K);
    const size_t a_floats = (size_t)panel_bytes(k, round_up(min64(MC, M), k->MR), kc_max) / sizeof(float);
    const size_t b_floats = whole_b ? 0 : (size_t)panel_bytes(k, round_up(min64(NC, N), k->NR), kc_max) / sizeof(float);
    pack_buffers *pb = buffers_get(a_floats, b_floats);
    if (!pb) return false;
    if (k->enter) k->enter();
    for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = min64(MC, M - ic);
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = min64(KC, K - pc);
            /* beta applies once, with the first slice of K; later slices accumulate. */
            const float beta_k = pc == 0 ? beta : 1.0f;
            pack_a(k, (char *)pb->a, trans_a, a_op, ic, pc, mc, kc);
            for (int64_t jc = 0; jc < N; jc += NC) {
                const int64_t nc = min64(NC, N - jc);
                const char *b = whole_b ? whole_b + packed_block_at(k, N, pc, jc, kc) : (const char *)pb->b;
                if (!whole_b) pack_b(k, (char *)pb->b, trans_b, b_op, jc, pc, nc, kc);
                block_tiles(k, (const char *)pb->a, b, mc, nc, kc, alpha, beta_k, C + ic * ldc + jc, ldc);
            }
        }
    }
    if (k->leave) k->leave();
    return true;
}

bool brg_gemm_blocked(const brg_gemm_kernel *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, brg_dtype a_type, const void *A, int64_t lda, brg_dtype b_type, const void *B,
                      int64_t ldb, float beta, float *C, int64_t ldc) {
    const operand a_op = a_operand(k, a_type, A, lda), b_op = b_operand(k, b_type, B, ldb);
    return blocked_loops(k, trans_a, trans_b, M, N, K, alpha, &a_op, &b_op, NULL, beta, C, ldc);
}

/* ---- B packed once (brg_gemm_blocked_pack_b) ----
 * The whole of op(B) as the loops above pack it, block after block: depth blocks pc in order,
 * each holding all of N as NR-column micro-panels (N rounded up to NR), so block (pc, jc) starts
 * panel_bytes(N_pad, pc) + panel_bytes(jc, kc) bytes in: every pc is a whole number of KC (and
 * KC a whole number of k_pack), and every jc a whole number of NC (of NR). */

size_t brg_gemm_blocked_packed_bytes(const brg_gemm_kernel *k, int64_t K, int64_t N) {
    return K <= 0 || N <= 0 ? 0 : (size_t)panel_bytes(k, round_up(N, k->NR), K);
}

void brg_gemm_blocked_pack_b(const brg_gemm_kernel *k, bool trans_b, int64_t K, int64_t N, brg_dtype b_type,
                             const void *B, int64_t ldb, void *dst, int part, int parts) {
    const operand b_op = b_operand(k, b_type, B, ldb);
    const int64_t col_blocks = (N + k->NC - 1) / k->NC, blocks = (K + k->KC - 1) / k->KC * col_blocks;
    /* Blocks [first, last) in depth-major order: consecutive blocks of a share read neighbouring
     * columns of the same rows. */
    const int64_t first = blocks * part / parts, last = blocks * (part + 1) / parts;
    for (int64_t i = first; i < last; i++) {
        const int64_t pc = i / col_blocks * k->KC, jc = i % col_blocks * k->NC, kc = min64(k->KC, K - pc);
        pack_b(k, (char *)dst + packed_block_at(k, N, pc, jc, kc), trans_b, &b_op, jc, pc, min64(k->NC, N - jc), kc);
    }
}

bool brg_gemm_blocked_packed(const brg_gemm_kernel *k, bool trans_a, int64_t M, int64_t N, int64_t K, float alpha,
                             brg_dtype a_type, const void *A, int64_t lda, const void *packed_b, float beta, float *C,
                             int64_t ldc) {
    const operand a_op = a_operand(k, a_type, A, lda);
    return blocked_loops(k, trans_a, false, M, N, K, alpha, &a_op, NULL, packed_b, beta, C, ldc);
}
