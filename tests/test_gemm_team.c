/* Intra-op threads: products split across a device's team equal the single-thread ones bit for
 * bit (each element of C is computed by one thread with the same loop over K), and so does
 * attention split by heads (forward, and backward with a bias gradient that sums over the
 * batch, causal masking, a padding mask and dropout). */
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

/* Attention on the team against attention alone: outputs, log-sum-exps and every gradient. */
static void check_attention(brg_gemm_team *team) {
    enum { B = 3, H = 5, T = 70, D = 32 }; /* 5 heads over 2 or 3 threads: uneven ranges */
    brg_rng rng;
    brg_rng_seed(&rng, 42);
    const int64_t n = B * H * T * D;
    float *q = random_floats(&rng, n), *k = random_floats(&rng, n), *v = random_floats(&rng, n);
    float *dout = random_floats(&rng, n), *bias = random_floats(&rng, H * T * T), *mask = malloc(B * T * sizeof *mask);
    for (int i = 0; i < B * T; i++) mask[i] = i % 11 == 3 ? 0.0f : 1.0f;
    brg_attn_args a = {.B = B, .H = H, .Tq = T, .Tk = T, .D = D, .scale = 0.3f, .causal = true,
                       .key_mask = mask, .bias = bias, .dropout = 0.1f, .seed = 9, .offset = 17};
    float *res[2][6];
    const int64_t sizes[6] = {n, B * H * T, n, n, n, H * T * T};
    for (int r = 0; r < 2; r++) {
        for (int s = 0; s < 6; s++) res[r][s] = calloc((size_t)sizes[s], sizeof(float));
        brg_gemm_team_bind(r ? team : NULL);
        brg_k_attention_fwd(res[r][0], res[r][1], q, k, v, &a);
        brg_k_attention_bwd(res[r][2], res[r][3], res[r][4], res[r][5], dout, res[r][0], res[r][1], q, k, v, &a);
        brg_gemm_team_bind(NULL);
    }
    const char *names[6] = {"out", "lse", "dq", "dk", "dv", "dbias"};
    for (int s = 0; s < 6; s++) {
        CHECK_MSG(memcmp(res[0][s], res[1][s], (size_t)sizes[s] * sizeof(float)) == 0,
                  "attention on the team: %s differs", names[s]);
        free(res[0][s]), free(res[1][s]);
    }
    free(q), free(k), free(v), free(dout), free(bias), free(mask);
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
        check_attention(team);
        brg_gemm_team_destroy(team);
    }
    brg_gemm_team *bad = NULL;
    CHECK_ERR(brg_gemm_team_create(0, &bad), BRG_ERR_INVALID_ARG, "at least one thread");
    return test_finish();
}
