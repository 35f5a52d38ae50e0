/* OpenBLAS, loaded when a product first needs it (openblas.c). */
#ifndef BRIGADE_KERNELS_OPENBLAS_H
#define BRIGADE_KERNELS_OPENBLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether OpenBLAS could be loaded (loading it on the first call). */
bool brg_openblas_available(void);
/* cblas_sgemm, row-major, sizes within int; brg_gemm_ref's product when OpenBLAS cannot be
 * loaded (said once on stderr). */
void brg_openblas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* OpenBLAS's own thread count, once it is loaded; a no-op before. */
void brg_openblas_set_threads(int threads);

#endif
