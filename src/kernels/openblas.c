/* OpenBLAS, loaded with dlopen the first time a product goes to it: on CPUs without AVX2 (where it
 * is the default backend), with BRIGADE_GEMM=openblas or when our kernels cannot get their
 * packing buffers. A process that never needs it never loads it. That matters because the
 * pthreads build starts a pool of worker threads when it is loaded, and they spin on
 * sched_yield for a while before sleeping: on a 2-core machine they took a core from the
 * devices for the first ~0.1 s of every command (a cached `forward` start was 5-12% slower).
 * brigade runs OpenBLAS on one thread anyway (its products are split, if at all, by brigade's
 * own teams), so loaded here it is told so at once. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>

#include "brigade/status.h"
#include "kernels/kernels.h"
#include "kernels/openblas.h"

/* Last: OpenBLAS's header pulls in <complex.h>, whose macro I would break any prototype with a
 * parameter of that name in the headers above. Only its declarations are used. */
#include <cblas.h>

typedef __typeof__(&cblas_sgemm) sgemm_fn;
typedef void (*set_threads_fn)(int);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm;
static set_threads_fn set_threads;

static void load(void) {
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !sgemm; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) continue;
        sgemm = (sgemm_fn)dlsym(lib, "cblas_sgemm");
        set_threads = (set_threads_fn)dlsym(lib, "openblas_set_num_threads");
        if (!sgemm) dlclose(lib);
    }
    if (!sgemm) {
        fprintf(stderr, "brigade: OpenBLAS (libopenblas.so.0) cannot be loaded; its products use the reference "
                        "loop instead (slow): install libopenblas0\n");
        return;
    }
    if (set_threads) set_threads(1);
}

bool brg_openblas_available(void) {
    pthread_once(&load_once, load);
    return sgemm != NULL;
}

/* BLAS rejects ld < 1 even for empty operands, so pass at least 1. */
static int blas_ld(int64_t ld) { return ld < 1 ? 1 : (int)ld; }

void brg_openblas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!brg_openblas_available()) {
        brg_gemm_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* The BLAS interface takes int sizes; larger problems must be split by the caller. */
    BRG_ASSERT(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    BRG_ASSERT(lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX);
    sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N,
          (int)K, alpha, A, blas_ld(lda), B, blas_ld(ldb), beta, C, blas_ld(ldc));
}

void brg_openblas_set_threads(int threads) {
    /* Before loading there is nothing to set: load() sets one thread. */
    if (sgemm && set_threads) set_threads(threads > 0 ? threads : 1);
}
