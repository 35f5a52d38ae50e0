/* Intra-op threads: products split across a device's team equal the single-thread ones bit for
 * bit (each element of C is computed by one thread with the same loop over K). */
#include "kernels/kernels.h"
#include "brigade/rng.h"
#include "test_util.h"

static float *random_floats(brg_rng *rng, int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(brg_rng_uniform(rng) * 2 - 1);
    return x;
}

static void check_shape(brg_gemm_team *team, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
    brg_rng rng;
    brg_rng_seed(&rng, (uint64_t)(M * 131 + N * 7 + K));
    float *A = random_floats(&rng, M * K), *B = random_floats(&rng, K * N);
    float *alone = random_floats(&rng, M * N), *split = malloc((size_t)(M * N) * sizeof *split);
    memcpy(split, alone, (size_t)(M * N) * sizeof *split);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    brg_gemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, alone, N);
    brg_gemm_team_bind(team);
    brg_gemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, split, N);
    brg_gemm_team_bind(NULL);
    CHECK_MSG(memcmp(alone, split, (size_t)(M * N) * sizeof *split) == 0, "team product differs: %lld x %lld x %lld %d%d",
              (long long)M, (long long)N, (long long)K, ta, tb);
    free(A), free(B), free(alone), free(split);
}

int main(void) {
    for (int threads = 2; threads <= 3; threads++) {
        brg_gemm_team *team = NULL;
        CHECK_OK(brg_gemm_team_create(threads, &team));
        for (int t = 0; t < 4; t++) {
            check_shape(team, t & 1, t & 2, 256, 96, 128);
            check_shape(team, t & 1, t & 2, 257, 33, 300);
            check_shape(team, t & 1, t & 2, 5, 7, 3); /* too small to split */
        }
        brg_gemm_team_destroy(team);
    }
    brg_gemm_team *bad = NULL;
    CHECK_ERR(brg_gemm_team_create(0, &bad), BRG_ERR_INVALID_ARG, "at least one thread");
    return test_finish();
}
