/* The GEMM on a B packed once (kernels.h, brg_gemm_packed): for every backend this CPU has
 * (avx512, avx2, ref, openblas), every transpose case, shapes that cross each kernel's M, N and
 * K block edges and leave partial tiles, padded leading dimensions, alpha/beta variants and team
 * sizes 1, 2 and 3, the product on the packed B has exactly the bits of brg_gemm on the plain
 * matrix. Also: a B packed for another backend or read under a reduced compute type falls back
 * to the plain product (same bits as brg_gemm there), except the AMX kernel's bf16 panels, which
 * a bf16 compute type reads with the bits of brg_gemm in bf16; a B packed by a team of 2 or 3
 * (block by block) has the bytes of one packed alone; and brg_k_linear_fwd, and brg_k_linear_bwd's
 * input gradient, with a bound provider of packed weights give the bits they give without one. */
#include "brigade/precision.h"
#include "brigade/rng.h"
#include "kernels/kernels.h"
#include "test_util.h"

static float *random_floats(brg_rng *rng, int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(brg_rng_uniform(rng) * 2 - 1);
    return x;
}

/* Panels in a buffer of exactly the size asked for, so a sanitizer sees any write past it. */
static void *pack(brg_gemm_pack_layout layout, bool tb, int64_t K, int64_t N, const float *B, int64_t ldb,
                  brg_packed_b *out) {
    const size_t bytes = brg_gemm_pack_bytes(layout, K, N);
    void *panels = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    brg_gemm_pack_b(layout, tb, K, N, B, ldb, panels, out);
    return panels;
}

typedef struct shape {
    int64_t M, N, K;
} shape;

/* Edges of avx512 (MR 14, NR 32, KC 384, NC 384, MC 2016) and avx2 (6, 16, 256, 256, 1020). */
static const shape shapes[] = {
    {1, 1, 1}, {3, 17, 5}, {16, 50, 33}, {37, 833, 800}, {14, 32, 384}, {2100, 40, 20}, {64, 385, 257},
};

static int teams_n = 0;
static brg_gemm_team *teams[3];

/* One product, plain and packed, under each team size; every result against the plain alone. */
static void check_product(const char *backend, const shape *s, bool ta, bool tb, float alpha, float beta) {
    const int64_t M = s->M, N = s->N, K = s->K, pad = 3;
    const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + 1;
    brg_rng rng;
    brg_rng_seed(&rng, (uint64_t)(M * 131 + N * 7 + K + ta * 2 + tb));
    float *A = random_floats(&rng, (ta ? K : M) * lda), *B = random_floats(&rng, (tb ? N : K) * ldb);
    float *C0 = random_floats(&rng, M * ldc);
    const size_t cbytes = (size_t)(M * ldc) * sizeof(float);
    float *want = malloc(cbytes), *got = malloc(cbytes);
    memcpy(want, C0, cbytes);
    brg_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, want, ldc);
    brg_packed_b pb;
    void *panels = pack(brg_gemm_pack_layout_now(), tb, K, N, B, ldb, &pb);
    for (int t = 0; t < teams_n; t++) {
        brg_gemm_team_bind(teams[t]);
        memcpy(got, C0, cbytes);
        brg_gemm_packed(ta, M, N, K, alpha, A, lda, &pb, beta, got, ldc);
        const bool packed_same = memcmp(want, got, cbytes) == 0;
        memcpy(got, C0, cbytes);
        brg_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, got, ldc);
        const bool plain_same = memcmp(want, got, cbytes) == 0;
        brg_gemm_team_bind(NULL);
        CHECK_MSG(packed_same, "%s: packed product differs: %lldx%lldx%lld ta %d tb %d alpha %g beta %g team %d",
                  backend, (long long)M, (long long)N, (long long)K, ta, tb, alpha, beta, t + 1);
        /* OpenBLAS leaves products whole on a team; the others split with the same bits. */
        CHECK_MSG(plain_same, "%s: plain product on a team of %d differs", backend, t + 1);
    }
    free(panels), free(A), free(B), free(C0), free(want), free(got);
}

static void check_backend(const char *backend) {
    const char *now = brg_gemm_force_backend(backend);
    CHECK(now != NULL);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 4; t++) {
            check_product(now, &shapes[i], t & 1, t >> 1, 1.0f, 0.0f);
            check_product(now, &shapes[i], t & 1, t >> 1, 0.5f, 0.25f);
        }
    check_product(now, &shapes[3], false, true, 1.0f, 1.0f);
    check_product(now, &shapes[3], false, false, 0.0f, 0.5f); /* alpha 0: C scaled only */
    brg_gemm_force_backend(NULL);
}

/* Under a bf16 compute type on a CPU with AMX-BF16, the AMX kernel's panels (the fp32 matrix
 * rounded to bf16 while packed): the bits of brg_gemm in bf16 on the plain matrix, over the
 * shapes above and one deeper than a depth block; read in fp32 they give the plain product. */
static void check_amx(void) {
    brg_compute_dtype_set(BRG_DTYPE_BF16);
    const brg_gemm_pack_layout layout = brg_gemm_pack_layout_now();
    if (layout != BRG_GEMM_PACK_AMXBF16) {
        brg_compute_dtype_set(BRG_DTYPE_F32);
        printf("note: bf16 products do not run on AMX tiles here (layout %s); their panels go untested\n",
               brg_gemm_pack_layout_name(layout));
        return;
    }
    const shape deep = {40, 70, 1600};
    for (int t = 0; t < 4; t++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            check_product("amxbf16", &shapes[i], t & 1, t >> 1, 0.5f, 0.25f);
        check_product("amxbf16", &deep, t & 1, t >> 1, 1.0f, 0.0f);
    }
    const int64_t M = 29, N = 70, K = 45;
    brg_rng rng;
    brg_rng_seed(&rng, 5);
    float *A = random_floats(&rng, M * K), *B = random_floats(&rng, K * N);
    float *want = calloc((size_t)(M * N), sizeof *want), *got = calloc((size_t)(M * N), sizeof *got);
    brg_packed_b pb;
    void *panels = pack(layout, false, K, N, B, N, &pb);
    brg_compute_dtype_set(BRG_DTYPE_F32);
    brg_gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N);
    brg_gemm_packed(false, M, N, K, 1.0f, A, K, &pb, 0.0f, got, N);
    CHECK_MSG(memcmp(want, got, (size_t)(M * N) * sizeof *got) == 0, "AMX panels read in fp32 differ from the plain");
    free(panels), free(A), free(B), free(want), free(got);
}

/* Panels made for one layout, read while another backend runs or under a reduced compute type:
 * the plain product, bit for bit. */
static void check_fallbacks(void) {
    const int64_t M = 29, N = 70, K = 45;
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    float *A = random_floats(&rng, M * K), *B = random_floats(&rng, N * K);
    float *want = calloc((size_t)(M * N), sizeof *want), *got = calloc((size_t)(M * N), sizeof *got);
    const brg_gemm_pack_layout made = brg_gemm_pack_layout_now();
    brg_packed_b pb;
    void *panels = pack(made, true, K, N, B, K, &pb);
    const char *others[] = {"ref", "openblas", "avx2"};
    for (int o = 0; o < 3; o++) {
        const char *now = brg_gemm_force_backend(others[o]);
        brg_gemm(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, want, N);
        brg_gemm_packed(false, M, N, K, 1.0f, A, K, &pb, 0.0f, got, N);
        CHECK_MSG(memcmp(want, got, (size_t)(M * N) * sizeof *got) == 0, "panels of %s read under %s differ",
                  brg_gemm_pack_layout_name(made), now);
    }
    brg_gemm_force_backend(NULL);
    const brg_dtype types[] = {BRG_DTYPE_BF16, BRG_DTYPE_F16};
    for (int t = 0; t < 2; t++) {
        brg_compute_dtype_set(types[t]);
        brg_gemm(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, want, N);
        brg_gemm_packed(false, M, N, K, 1.0f, A, K, &pb, 0.0f, got, N);
        brg_compute_dtype_set(BRG_DTYPE_F32);
        CHECK_MSG(memcmp(want, got, (size_t)(M * N) * sizeof *got) == 0, "packed product under compute type %d differs",
                  (int)types[t]);
    }
    free(panels), free(A), free(B), free(want), free(got);
}

/* Panels packed by each team against panels packed alone, in buffers filled with different
 * garbage first (a byte no packer writes differs), for the layout running now. */
static void check_pack_teams(const char *what) {
    const brg_gemm_pack_layout layout = brg_gemm_pack_layout_now();
    if (layout == BRG_GEMM_PACK_NONE) return;
    const shape wide[] = {{1, 833, 800}, {1, 3000, 70}, {1, 300, 1600}, {1, 50, 33}};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t K = wide[i].K, N = wide[i].N, ldb = (tb ? K : N) + 5;
            brg_rng rng;
            brg_rng_seed(&rng, (uint64_t)(K + N + tb));
            float *B = random_floats(&rng, (tb ? N : K) * ldb);
            const size_t bytes = (brg_gemm_pack_bytes(layout, K, N) + 63) / 64 * 64;
            unsigned char *alone = aligned_alloc(64, bytes), *shared = aligned_alloc(64, bytes);
            memset(alone, 0x5a, bytes);
            brg_packed_b pb;
            brg_gemm_pack_b(layout, tb, K, N, B, ldb, alone, &pb);
            for (int t = 1; t < teams_n; t++) {
                memset(shared, 0xa5, bytes);
                brg_gemm_team_bind(teams[t]);
                brg_gemm_pack_b(layout, tb, K, N, B, ldb, shared, &pb);
                brg_gemm_team_bind(NULL);
                CHECK_MSG(memcmp(alone, shared, brg_gemm_pack_bytes(layout, K, N)) == 0,
                          "%s: %lldx%lld (tb %d) packed by a team of %d differs from packed alone", what, (long long)K,
                          (long long)N, tb, t + 1);
            }
            free(alone), free(shared), free(B);
        }
}

/* A provider handing out one packed weight, counting the times it was asked. */
typedef struct provider {
    const float *w;
    brg_packed_b pb;
    int asked;
} provider;

static const brg_packed_b *provide(void *ctx, const float *B, bool tb, int64_t K, int64_t N, int64_t ldb) {
    provider *p = ctx;
    p->asked++;
    return B == p->w && tb == p->pb.trans_b && K == p->pb.K && N == p->pb.N && ldb == p->pb.ldb ? &p->pb : NULL;
}

/* brg_k_linear_fwd's y = x op(W) + b, then brg_k_linear_bwd's dx += dy op(W)^T (dW and db
 * left out), with the provider bound or not. */
static void linear_pass(float *y, float *dx, const float *x, const float *dy, const float *w, const float *b,
                        int64_t n, int64_t in, int64_t out, bool w_in_out, provider *p) {
    if (p) brg_packed_weights_bind(provide, p);
    brg_k_linear_fwd(y, x, w, b, n, in, out, w_in_out);
    brg_k_linear_bwd(dx, false, NULL, false, NULL, dy, x, w, n, in, out, w_in_out);
    brg_packed_weights_bind(NULL, NULL);
}

static void check_linear(void) {
    const int64_t n = 33, in = 70, out = 130;
    brg_rng rng;
    brg_rng_seed(&rng, 11);
    float *x = random_floats(&rng, n * in), *w = random_floats(&rng, in * out), *b = random_floats(&rng, out);
    float *dy = random_floats(&rng, n * out), *dx0 = random_floats(&rng, n * in);
    const size_t y_bytes = (size_t)(n * out) * sizeof(float), dx_bytes = (size_t)(n * in) * sizeof(float);
    float *want = malloc(y_bytes), *got = malloc(y_bytes), *dx_want = malloc(dx_bytes), *dx_got = malloc(dx_bytes);
    for (int layout = 0; layout < 2; layout++) { /* w_in_out: GPT-2's Conv1D, else nn.Linear */
        const bool w_in_out = layout == 0;
        const int64_t ldw = w_in_out ? out : in;
        memcpy(dx_want, dx0, dx_bytes);
        linear_pass(want, dx_want, x, dy, w, b, n, in, out, w_in_out, NULL);
        /* The forward's op(B) is W [in, out]; the input gradient's is W^T [out, in]. */
        for (int product = 0; product < 2; product++) {
            provider p = {w, {0}, 0};
            void *panels = product == 0 ? pack(brg_gemm_pack_layout_now(), !w_in_out, in, out, w, ldw, &p.pb)
                                        : pack(brg_gemm_pack_layout_now(), w_in_out, out, in, w, ldw, &p.pb);
            memcpy(dx_got, dx0, dx_bytes);
            linear_pass(got, dx_got, x, dy, w, b, n, in, out, w_in_out, &p);
            CHECK_MSG(p.asked == 2, "the linear layer asked its provider %d times", p.asked);
            CHECK_MSG(memcmp(want, got, y_bytes) == 0 && memcmp(dx_want, dx_got, dx_bytes) == 0,
                      "linear with packed weights for its %s differs (%s)", product ? "input gradient" : "forward",
                      w_in_out ? "[in,out]" : "[out,in]");
            free(panels);
        }
    }
    free(x), free(w), free(b), free(dy), free(dx0), free(want), free(got), free(dx_want), free(dx_got);
}

int main(void) {
    for (int t = 0; t < 3; t++) {
        teams[t] = NULL;
        if (t) CHECK_OK(brg_gemm_team_create(t + 1, &teams[t]));
        teams_n++;
    }
    const char *backends[] = {"avx512", "avx2", "ref", "openblas"};
    for (int b = 0; b < 4; b++) check_backend(backends[b]);
    CHECK(strcmp(brg_gemm_pack_layout_name(BRG_GEMM_PACK_NONE), "none") == 0);
    CHECK(brg_gemm_pack_bytes(BRG_GEMM_PACK_NONE, 10, 10) == 0);
    check_fallbacks();
    check_amx();
    check_linear();
    const char *packers[] = {"avx512", "avx2"};
    for (int b = 0; b < 2; b++) {
        const char *now = brg_gemm_force_backend(packers[b]);
        if (now && strcmp(now, packers[b]) == 0) check_pack_teams(now);
    }
    brg_gemm_force_backend(NULL);
    brg_compute_dtype_set(BRG_DTYPE_BF16);
    check_pack_teams("bf16 products");
    brg_compute_dtype_set(BRG_DTYPE_F32);
    for (int t = 0; t < 3; t++) brg_gemm_team_destroy(teams[t]);
    return test_finish();
}
