/* Intra-op threads: products split across a device's team (by rows, or by columns where C is
 * wider than tall) equal the single-thread ones bit for bit (each element of C is computed by
 * one thread with the same loop over K), and so does
 * attention split by heads (forward, and backward with a bias gradient that sums over the
 * batch, causal masking, a padding mask and dropout), and so do the row and element-wise
 * kernels (layer norm, GELU, bias + GELU, cross-entropy, dropout, bias add and bias gradient,
 * embedding scatter) at every SIMD level. */
#include "kernels/kernels.h"
#include "kernels/simd.h"
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

/* The row and element-wise kernels on shapes above the team's threshold, with odd sizes so the
 * slices end mid-vector; every output in one flat list to compare. */
enum { ROWS = 67, COLS = 777, VOCAB = 1501, N_OUT = 16 };

typedef struct row_outputs {
    float *buf[N_OUT];
    int64_t len[N_OUT];
    float loss;
    int64_t count;
} row_outputs;

static float *out_buf(row_outputs *o, int k, int64_t n) {
    o->len[k] = n;
    o->buf[k] = calloc((size_t)n, sizeof(float));
    return o->buf[k];
}

static void run_row_kernels(row_outputs *o, const float *x, const float *dy, const float *logits,
                            const int32_t *targets, const int32_t *ids) {
    const int64_t n = ROWS * COLS;
    float *y = out_buf(o, 0, n), *mean = out_buf(o, 1, ROWS), *rstd = out_buf(o, 2, ROWS);
    const float *gamma = x + COLS, *beta = x + 2 * COLS; /* any COLS floats will do */
    brg_k_layernorm_fwd(y, mean, rstd, x, gamma, beta, ROWS, COLS, 1e-5f);
    float *dx = out_buf(o, 3, n), *dg = out_buf(o, 4, COLS), *db = out_buf(o, 5, COLS);
    brg_k_layernorm_bwd(dx, dg, db, dy, x, gamma, mean, rstd, ROWS, COLS);
    brg_k_gelu_fwd(out_buf(o, 6, n), x, n, BRG_GELU_ERF);
    brg_k_gelu_bwd(out_buf(o, 7, n), dy, x, n, BRG_GELU_TANH);
    float *h = out_buf(o, 8, n), *a = out_buf(o, 9, n), *dh = out_buf(o, 10, n), *dbias = out_buf(o, 11, COLS);
    memcpy(h, x, (size_t)n * sizeof(float));
    brg_k_bias_gelu_fwd(h, a, beta, ROWS, COLS, BRG_GELU_TANH);
    brg_k_bias_gelu_bwd(dh, dbias, dy, h, ROWS, COLS, BRG_GELU_ERF);
    float *lse = out_buf(o, 12, ROWS), *dlogits = out_buf(o, 13, ROWS * VOCAB);
    o->loss = brg_k_cross_entropy_fwd(lse, &o->count, logits, targets, ROWS, VOCAB, -100);
    brg_k_cross_entropy_bwd(dlogits, false, 0.7f, logits, lse, targets, ROWS, VOCAB, -100, o->count);
    float *drop = out_buf(o, 14, n);
    brg_k_dropout_fwd(drop, x, n, 0.1f, 5, 12345);
    brg_k_dropout_bwd(drop, false, dy, n, 0.3f, 6, 99);
    /* Bias gradient of a linear layer and the embedding scatter (ids repeat). */
    float *table = out_buf(o, 15, 40 * COLS);
    brg_k_embedding_bwd(table, dy, ids, ROWS, COLS);
    brg_k_linear_bwd(NULL, false, NULL, false, db, dy, x, x, ROWS, COLS, COLS, true);
}

static void check_row_kernels(brg_gemm_team *team) {
    brg_rng rng;
    brg_rng_seed(&rng, 7);
    float *x = random_floats(&rng, ROWS * COLS), *dy = random_floats(&rng, ROWS * COLS);
    float *logits = random_floats(&rng, ROWS * VOCAB);
    int32_t targets[ROWS], ids[ROWS];
    for (int i = 0; i < ROWS; i++) targets[i] = i % 9 == 4 ? -100 : (int32_t)((i * 7919) % VOCAB);
    for (int i = 0; i < ROWS; i++) ids[i] = (int32_t)((i * 13) % 40);
    for (int level = BRG_ISA_SCALAR; level <= (int)brg_isa_detected(); level++) {
        brg_simd_force((brg_isa)level);
        row_outputs res[2] = {0};
        for (int r = 0; r < 2; r++) {
            brg_gemm_team_bind(r ? team : NULL);
            run_row_kernels(&res[r], x, dy, logits, targets, ids);
            brg_gemm_team_bind(NULL);
        }
        CHECK_MSG(res[0].loss == res[1].loss && res[0].count == res[1].count, "%s: cross-entropy loss differs",
                  brg_isa_name((brg_isa)level));
        for (int k = 0; k < N_OUT; k++) {
            CHECK_MSG(memcmp(res[0].buf[k], res[1].buf[k], (size_t)res[0].len[k] * sizeof(float)) == 0,
                      "%s: row kernel output %d differs on the team", brg_isa_name((brg_isa)level), k);
            free(res[0].buf[k]), free(res[1].buf[k]);
        }
    }
    brg_simd_reset();
    free(x), free(dy), free(logits);
}

int main(void) {
    for (int threads = 2; threads <= 3; threads++) {
        brg_gemm_team *team = NULL;
        CHECK_OK(brg_gemm_team_create(threads, &team));
        for (int t = 0; t < 4; t++) {
            check_shape(team, t & 1, t & 2, 256, 96, 128);
            check_shape(team, t & 1, t & 2, 257, 33, 300);
            check_shape(team, t & 1, t & 2, 64, 300, 128); /* split by columns */
            check_shape(team, t & 1, t & 2, 33, 517, 70);  /* columns in uneven units */
            check_shape(team, t & 1, t & 2, 5, 7, 3); /* too small to split */
        }
        check_attention(team);
        check_row_kernels(team);
        brg_gemm_team_destroy(team);
    }
    brg_gemm_team *bad = NULL;
    CHECK_ERR(brg_gemm_team_create(0, &bad), BRG_ERR_INVALID_ARG, "at least one thread");
    return test_finish();
}
