/* Batched matmul C = op(A) @ op(B) over a leading batch dimension, one brg_gemm per batch. */
#include "brigade/status.h"
#include "kernels/kernels.h"

void brg_k_bmm_fwd(float *c, const float *a, const float *b, int64_t batch, int64_t M, int64_t N, int64_t K,
                   bool trans_a, bool trans_b) {
    BRG_ASSERT(batch >= 0 && M >= 0 && N >= 0 && K >= 0);
    const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    for (int64_t i = 0; i < batch; i++)
        brg_gemm(trans_a, trans_b, M, N, K, 1.0f, a + i * M * K, lda, b + i * K * N, ldb, 0.0f, c + i * M * N, N);
}

/* With G = dC [M,N]:  d op(A) = G @ op(B)^T and d op(B) = op(A)^T @ G. When an operand is stored
 * transposed its gradient is the transpose of that, which swaps the product's factors. */
void brg_k_bmm_bwd(float *da, float *db, const float *dc, const float *a, const float *b, int64_t batch,
                   int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b) {
    BRG_ASSERT(batch >= 0 && M >= 0 && N >= 0 && K >= 0);
    const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    for (int64_t i = 0; i < batch; i++) {
        const float *g = dc + i * M * N, *ai = a + i * M * K, *bi = b + i * K * N;
        if (da) {
            float *d = da + i * M * K;
            if (!trans_a) /* dA[M,K] += G @ op(B)^T */
                brg_gemm(false, !trans_b, M, K, N, 1.0f, g, N, bi, ldb, 1.0f, d, K);
            else /* dA[K,M] += op(B) @ G^T */
                brg_gemm(trans_b, true, K, M, N, 1.0f, bi, ldb, g, N, 1.0f, d, M);
        }
        if (db) {
            float *d = db + i * K * N;
            if (!trans_b) /* dB[K,N] += op(A)^T @ G */
                brg_gemm(!trans_a, false, K, N, M, 1.0f, ai, lda, g, N, 1.0f, d, N);
            else /* dB[N,K] += G^T @ op(A) */
                brg_gemm(true, trans_a, N, K, M, 1.0f, g, N, ai, lda, 1.0f, d, K);
        }
    }
}
