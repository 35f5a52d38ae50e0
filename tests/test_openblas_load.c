/* OpenBLAS is loaded only when a product needs it (src/kernels/openblas.c): a process whose
 * products run on brigade's own kernels never maps it and so never starts its thread pool; a
 * product sent to OpenBLAS loads it, and its results match the reference loop's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test_util.h"

static bool openblas_mapped(void) {
    void *h = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != NULL;
}

static int threads_now(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

enum { M = 7, N = 9, K = 11 };

static void product(float *c) {
    float a[M * K], b[K * N];
    for (int i = 0; i < M * K; i++) a[i] = 0.25f * (float)((i * 7) % 13) - 1.0f;
    for (int i = 0; i < K * N; i++) b[i] = 0.125f * (float)((i * 5) % 11) - 0.5f;
    brg_gemm(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

int main(void) {
    float ours[M * N], blas[M * N], ref[M * N];
    const bool default_is_ours = strcmp(brg_gemm_backend(), "openblas") != 0;
    if (default_is_ours) {
        CHECK_MSG(!openblas_mapped(), "OpenBLAS was loaded before any product");
        product(ours);
        CHECK_MSG(!openblas_mapped(), "a product on %s loaded OpenBLAS", brg_gemm_backend());
        brg_gemm_set_threads(1); /* what a runtime does: must not load it either */
        CHECK_MSG(!openblas_mapped(), "setting the threads loaded OpenBLAS");
        CHECK_MSG(threads_now() == 1, "%d threads before any runtime: OpenBLAS's pool or another's", threads_now());
    }
    CHECK(brg_gemm_force_backend("openblas") != NULL);
    product(blas);
    CHECK_MSG(openblas_mapped(), "a product on OpenBLAS did not load it");
    CHECK(brg_gemm_force_backend("ref") != NULL);
    product(ref);
    for (int i = 0; i < M * N; i++) CHECK_MSG(fabsf(blas[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i])), "[%d]", i);
    for (int i = 0; default_is_ours && i < M * N; i++) CHECK(fabsf(ours[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i])));
    brg_gemm_force_backend(NULL);
    return test_finish();
}
