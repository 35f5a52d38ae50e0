/* Fused attention: forward against the materialising reference, backward against central
 * differences and against PyTorch autograd's formulas (in double) for the masked cases where the
 * two differ, plus the masking rules themselves. */
#include <float.h>

#include "test_kernels_util.h"

typedef struct attn_case {
    brg_attn_args a;
    float *q, *k, *v, *bias, *mask, *out, *lse, *r;
} attn_case;

static int64_t nq(const attn_case *c) { return c->a.B * c->a.H * c->a.Tq * c->a.D; }
static int64_t nk(const attn_case *c) { return c->a.B * c->a.H * c->a.Tk * c->a.D; }
static int64_t nbias(const attn_case *c) { return c->a.H * c->a.Tq * c->a.Tk; }

/* mask_kind: 0 none, 1 right padding (every row keeps key 0), 2 left padding, 3 one batch
 * entirely padded. */
static attn_case attn_make(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, bool causal, bool bias,
                           int mask_kind) {
    attn_case c = {.a = {.B = B, .H = H, .Tq = Tq, .Tk = Tk, .D = D, .scale = 1.0f / sqrtf((float)(D > 0 ? D : 1)),
                         .causal = causal}};
    c.q = tk_rand(nq(&c), -1.5, 1.5);
    c.k = tk_rand(nk(&c), -1.5, 1.5);
    c.v = tk_rand(nk(&c), -1, 1);
    c.out = tk_zeros(nq(&c));
    for (int64_t i = 0; i < nq(&c); i++) c.out[i] = NAN; /* forward must overwrite, never read */
    c.lse = tk_zeros(B * H * Tq);
    c.r = tk_rand(nq(&c), -1, 1);
    if (bias) c.a.bias = c.bias = tk_rand(nbias(&c), -1, 1);
    if (mask_kind) {
        c.a.key_mask = c.mask = tk_zeros(B * Tk);
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < Tk; j++) {
                int64_t pad = b % 2 ? Tk / 2 : 0; /* odd batch entries are padded */
                bool keep = mask_kind == 1 ? j < Tk - pad : mask_kind == 2 ? j >= pad : b != B - 1;
                c.mask[b * Tk + j] = keep ? 1.0f : 0.0f;
            }
    }
    return c;
}

static void attn_free(attn_case *c) {
    free(c->q), free(c->k), free(c->v), free(c->bias), free(c->mask), free(c->out), free(c->lse), free(c->r);
}

static double attn_loss(void *p) {
    attn_case *c = p;
    brg_k_attention_fwd(c->out, c->lse, c->q, c->k, c->v, &c->a);
    return tk_dot(c->out, c->r, nq(c));
}

/* Masked score of (b,h,i,j) with the kernel's float semantics; *blocked when the causal where
 * replaced it (no gradient flows there). */
static float score(const attn_case *c, int64_t b, int64_t h, int64_t i, int64_t j, bool *blocked) {
    const brg_attn_args *a = &c->a;
    const int64_t bh = b * a->H + h;
    double dot = 0.0;
    for (int64_t d = 0; d < a->D; d++) dot += (double)c->q[(bh * a->Tq + i) * a->D + d] * c->k[(bh * a->Tk + j) * a->D + d];
    float s = (float)(a->scale * dot);
    if (a->bias) s += a->bias[(h * a->Tq + i) * a->Tk + j];
    *blocked = a->causal && j > i + (a->Tk - a->Tq);
    if (*blocked) s = -FLT_MAX;
    if (a->key_mask) s += (1.0f - a->key_mask[b * a->Tk + j]) * -FLT_MAX;
    return s;
}

/* Gradients as PyTorch autograd computes them for eager attention, in double. */
typedef struct attn_grads {
    double *dq, *dk, *dv, *dbias;
} attn_grads;

static void row_probs(const attn_case *c, int64_t b, int64_t h, int64_t i, double *P, bool *blocked) {
    const int64_t Tk = c->a.Tk;
    float s[Tk];
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < Tk; j++) {
        s[j] = score(c, b, h, i, j, &blocked[j]);
        mx = fmax(mx, s[j]);
    }
    for (int64_t j = 0; j < Tk; j++) sum += P[j] = mx == -INFINITY ? 1.0 : exp((double)s[j] - mx);
    for (int64_t j = 0; j < Tk; j++) P[j] /= sum;
}

static attn_grads ref_backward(const attn_case *c) {
    const brg_attn_args *a = &c->a;
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D;
    attn_grads g = {calloc(nq(c), sizeof(double)), calloc(nk(c), sizeof(double)), calloc(nk(c), sizeof(double)),
                    calloc(nbias(c), sizeof(double))};
    double P[Tk], dS[Tk];
    bool blocked[Tk];
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++)
            for (int64_t i = 0; i < Tq; i++) {
                const int64_t bh = b * a->H + h, row = bh * Tq + i;
                const float *go = c->r + row * D;
                row_probs(c, b, h, i, P, blocked);
                double Di = 0.0;
                for (int64_t j = 0; j < Tk; j++) {
                    dS[j] = 0.0;
                    for (int64_t d = 0; d < D; d++) dS[j] += go[d] * (double)c->v[(bh * Tk + j) * D + d];
                    Di += P[j] * dS[j];
                }
                for (int64_t j = 0; j < Tk; j++) {
                    dS[j] = blocked[j] ? 0.0 : P[j] * (dS[j] - Di);
                    g.dbias[(h * Tq + i) * Tk + j] += dS[j];
                    for (int64_t d = 0; d < D; d++) {
                        g.dv[(bh * Tk + j) * D + d] += P[j] * go[d];
                        g.dq[row * D + d] += a->scale * dS[j] * c->k[(bh * Tk + j) * D + d];
                        g.dk[(bh * Tk + j) * D + d] += a->scale * dS[j] * c->q[row * D + d];
                    }
                }
            }
    return g;
}

static double max_diff_d(const float *x, const double *ref, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(x[i] - ref[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

static void check_lse(const attn_case *c) {
    const int64_t Tk = c->a.Tk;
    double err = 0.0;
    for (int64_t b = 0; b < c->a.B; b++)
        for (int64_t h = 0; h < c->a.H; h++)
            for (int64_t i = 0; i < c->a.Tq; i++) {
                double mx = -INFINITY, sum = 0.0, s[Tk];
                bool blocked;
                for (int64_t j = 0; j < Tk; j++) mx = fmax(mx, s[j] = score(c, b, h, i, j, &blocked));
                if (mx < -0.5 * FLT_MAX) continue; /* fully masked: lse is not meaningful */
                for (int64_t j = 0; j < Tk; j++) sum += exp(s[j] - mx);
                err = fmax(err, fabs(mx + log(sum) - c->lse[(b * c->a.H + h) * c->a.Tq + i]));
            }
    CHECK_MSG(err < 1e-5, "attention lse err %.3g", err);
}

/* Forward vs reference; backward vs autograd formulas; optionally vs central differences. */
static void attn_run(const char *what, attn_case *c, bool fd_qk) {
    float *ref = tk_zeros(nq(c));
    brg_k_attention_fwd(c->out, c->lse, c->q, c->k, c->v, &c->a);
    brg_k_attention_fwd_ref(ref, c->q, c->k, c->v, &c->a);
    double err = test_max_abs_diff(c->out, ref, nq(c));
    CHECK_MSG(err < 2e-6, "%s: fwd vs ref %.3g", what, err);
    check_lse(c);

    float *dq = tk_zeros(nq(c)), *dk = tk_zeros(nk(c)), *dv = tk_zeros(nk(c)), *db = tk_zeros(nbias(c));
    brg_k_attention_bwd(dq, dk, dv, c->bias ? db : NULL, c->r, c->out, c->lse, c->q, c->k, c->v, &c->a);
    attn_grads g = ref_backward(c);
    double e[4] = {max_diff_d(dq, g.dq, nq(c)), max_diff_d(dk, g.dk, nk(c)), max_diff_d(dv, g.dv, nk(c)),
                   c->bias ? max_diff_d(db, g.dbias, nbias(c)) : 0.0};
    CHECK_MSG(e[0] < 1e-5 && e[1] < 1e-5 && e[2] < 1e-5 && e[3] < 1e-5,
              "%s: bwd vs autograd formulas dq %.3g dk %.3g dv %.3g dbias %.3g", what, e[0], e[1], e[2], e[3]);

    char name[128];
    snprintf(name, sizeof name, "%s dv", what);
    tk_gradcheck(name, c, attn_loss, c->v, nk(c), dv);
    if (fd_qk) {
        snprintf(name, sizeof name, "%s dq", what);
        tk_gradcheck(name, c, attn_loss, c->q, nq(c), dq);
        snprintf(name, sizeof name, "%s dk", what);
        tk_gradcheck(name, c, attn_loss, c->k, nk(c), dk);
        if (c->bias) {
            snprintf(name, sizeof name, "%s dbias", what);
            tk_gradcheck(name, c, attn_loss, c->bias, nbias(c), db);
        }
    }
    free(g.dq), free(g.dk), free(g.dv), free(g.dbias);
    free(dq), free(dk), free(dv), free(db), free(ref);
}

static void test_attention_configs(void) {
    struct {
        const char *what;
        int64_t B, H, Tq, Tk, D;
        bool causal, bias;
        int mask;
        bool fd_qk; /* padding-only-masked rows: finite differences see the rounding, not autograd */
    } cases[] = {
        {"plain", 2, 2, 3, 5, 4, false, false, 0, true},
        {"bias", 2, 3, 4, 4, 3, false, true, 0, true},
        {"causal", 1, 2, 5, 5, 4, true, false, 0, true},
        {"causal Tq<Tk", 2, 1, 3, 6, 5, true, true, 0, true},
        {"causal Tq>Tk", 1, 2, 5, 3, 2, true, true, 0, true},
        {"right padding", 2, 2, 4, 6, 3, false, true, 1, true},
        {"causal right padding", 2, 2, 6, 6, 3, true, true, 1, true},
        {"causal left padding", 2, 2, 6, 6, 3, true, true, 2, false},
        {"all padded", 2, 1, 3, 4, 2, false, true, 3, false},
        {"causal all padded", 2, 2, 4, 4, 2, true, false, 3, false},
        {"D=1 Tk=1", 3, 1, 2, 1, 1, false, true, 0, true},
        {"odd", 1, 3, 7, 9, 5, true, true, 1, true},
        /* Longer than one row block of the fused kernel. */
        {"blocks causal padded", 1, 1, 70, 75, 2, true, true, 1, true},
        {"blocks causal Tq>Tk", 1, 2, 45, 20, 3, true, true, 0, true},
        {"blocks left padding", 2, 1, 40, 40, 2, true, false, 2, false},
        {"blocks plain", 1, 1, 33, 65, 4, false, false, 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_case c = attn_make(cases[i].B, cases[i].H, cases[i].Tq, cases[i].Tk, cases[i].D, cases[i].causal,
                                cases[i].bias, cases[i].mask);
        attn_run(cases[i].what, &c, cases[i].fd_qk);
        attn_free(&c);
    }
}

/* A causal row with visible keys gives masked keys exactly zero weight; a row with no visible key
 * is uniform over the keys at -FLT_MAX (keys both causal-masked and padded reach -inf: zero). */
static void test_attention_mask_semantics(void) {
    attn_case c = attn_make(1, 1, 4, 4, 1, true, false, 0);
    float mask[4] = {0, 0, 1, 1}; /* left padding by two */
    c.a.key_mask = mask;
    for (int j = 0; j < 4; j++) c.v[j] = (float)(1 << j); /* out = sum_j P_j 2^j reveals P */
    brg_k_attention_fwd(c.out, c.lse, c.q, c.k, c.v, &c.a);
    CHECK_NEAR(c.out[0], (1 + 4 + 8) / 3.0, 1e-6); /* keys 0, 2, 3 at -FLT_MAX; key 1 at -inf */
    CHECK_NEAR(c.out[1], (1 + 2 + 4 + 8) / 4.0, 1e-6);
    CHECK(c.out[2] == 4.0f); /* only key 2 visible: exactly one-hot */
    CHECK(c.out[3] > 4.0f && c.out[3] < 8.0f);

    /* Every score -inf (no visible key and every key padded): uniform, not NaN. */
    attn_case d = attn_make(1, 1, 3, 2, 1, true, false, 0);
    float none[2] = {0, 0};
    d.a.key_mask = none;
    d.v[0] = 1, d.v[1] = 3;
    brg_k_attention_fwd(d.out, d.lse, d.q, d.k, d.v, &d.a);
    float ref[3];
    brg_k_attention_fwd_ref(ref, d.q, d.k, d.v, &d.a);
    CHECK_NEAR(d.out[0], 2.0, 1e-6); /* row 0: key 0 padded -FLT_MAX, key 1 causal+padded -inf */
    CHECK_NEAR(ref[0], 2.0, 1e-6);
    CHECK(!isnan(d.out[0]) && !isnan(d.out[1]) && !isnan(d.out[2]));
    float dq[3] = {0}, dk[2] = {0}, dv[2] = {0};
    brg_k_attention_bwd(dq, dk, dv, NULL, d.r, d.out, d.lse, d.q, d.k, d.v, &d.a);
    CHECK(!isnan(dq[0] + dq[1] + dq[2] + dk[0] + dk[1] + dv[0] + dv[1]));
    attn_free(&d);
    c.a.key_mask = NULL;
    attn_free(&c);
}

static void test_attention_accumulate_and_null(void) {
    attn_case c = attn_make(2, 2, 3, 4, 3, true, true, 1);
    brg_k_attention_fwd(c.out, c.lse, c.q, c.k, c.v, &c.a);
    float *dq = tk_zeros(nq(&c)), *dk = tk_zeros(nk(&c)), *dv = tk_zeros(nk(&c)), *db = tk_zeros(nbias(&c));
    brg_k_attention_bwd(dq, dk, dv, db, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    float *pq = tk_rand(nq(&c), -1, 1), *pk = tk_rand(nk(&c), -1, 1), *pv = tk_rand(nk(&c), -1, 1);
    float *pb = tk_rand(nbias(&c), -1, 1);
    float *aq = tk_copy(pq, nq(&c)), *ak = tk_copy(pk, nk(&c)), *av = tk_copy(pv, nk(&c)), *ab = tk_copy(pb, nbias(&c));
    /* Each gradient alone, the others NULL. */
    brg_k_attention_bwd(aq, NULL, NULL, NULL, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    brg_k_attention_bwd(NULL, ak, NULL, NULL, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    brg_k_attention_bwd(NULL, NULL, av, NULL, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    brg_k_attention_bwd(NULL, NULL, NULL, ab, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    tk_check_accumulated("attention dq", aq, pq, dq, nq(&c));
    tk_check_accumulated("attention dk", ak, pk, dk, nk(&c));
    tk_check_accumulated("attention dv", av, pv, dv, nk(&c));
    tk_check_accumulated("attention dbias", ab, pb, db, nbias(&c));
    brg_k_attention_fwd(c.out, NULL, c.q, c.k, c.v, &c.a); /* lse is optional in forward */
    free(pq), free(pk), free(pv), free(pb), free(aq), free(ak), free(av), free(ab);
    free(dq), free(dk), free(dv), free(db);
    attn_free(&c);
}

/* Long key sequences use heap scratch, not the stack. */
static void test_attention_long(void) {
    attn_case c = attn_make(1, 1, 2, 20000, 4, true, false, 0);
    float *ref = tk_zeros(nq(&c));
    brg_k_attention_fwd(c.out, c.lse, c.q, c.k, c.v, &c.a);
    brg_k_attention_fwd_ref(ref, c.q, c.k, c.v, &c.a);
    CHECK(test_max_abs_diff(c.out, ref, nq(&c)) < 1e-5);
    float *dv = tk_zeros(nk(&c));
    brg_k_attention_bwd(NULL, NULL, dv, NULL, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    double s = 0.0; /* each query's probabilities sum to one, so sum(dv) = sum(dout) */
    for (int64_t i = 0; i < nk(&c); i++) s += dv[i];
    CHECK_NEAR(s, tk_dot(c.r, (float[8]){1, 1, 1, 1, 1, 1, 1, 1}, 8), 1e-4);
    free(dv), free(ref);
    attn_free(&c);
}

static void test_attention_empty(void) {
    attn_case c = attn_make(0, 2, 3, 4, 2, true, false, 0);
    brg_k_attention_fwd(c.out, c.lse, c.q, c.k, c.v, &c.a);
    brg_k_attention_bwd(c.out, c.k, c.v, NULL, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    attn_free(&c);
    attn_case d = attn_make(1, 1, 2, 0, 3, false, false, 0);
    brg_k_attention_fwd(d.out, d.lse, d.q, d.k, d.v, &d.a);
    CHECK(d.out[0] == 0.0f && d.out[5] == 0.0f);
    attn_free(&d);
}

/* Dropout on the probabilities: a fixed key gives a fixed mask, so central differences see the
 * same function the analytic backward differentiates; about p of the weights are dropped; the
 * expected output over many keys equals the output without dropout. */
static void test_attention_dropout(void) {
    attn_case c = attn_make(2, 2, 5, 5, 3, true, true, 1);
    c.a.dropout = 0.3f, c.a.seed = 99, c.a.offset = 1234;
    brg_k_attention_fwd(c.out, c.lse, c.q, c.k, c.v, &c.a);
    float *dq = tk_zeros(nq(&c)), *dk = tk_zeros(nk(&c)), *dv = tk_zeros(nk(&c)), *db = tk_zeros(nbias(&c));
    brg_k_attention_bwd(dq, dk, dv, db, c.r, c.out, c.lse, c.q, c.k, c.v, &c.a);
    tk_gradcheck("dropout dq", &c, attn_loss, c.q, nq(&c), dq);
    tk_gradcheck("dropout dk", &c, attn_loss, c.k, nk(&c), dk);
    tk_gradcheck("dropout dv", &c, attn_loss, c.v, nk(&c), dv);
    tk_gradcheck("dropout dbias", &c, attn_loss, c.bias, nbias(&c), db);
    float *plain = tk_zeros(nq(&c));
    brg_attn_args no = c.a;
    no.dropout = 0;
    brg_k_attention_fwd(plain, NULL, c.q, c.k, c.v, &no);
    CHECK(test_max_abs_diff(plain, c.out, nq(&c)) > 1e-3); /* the mask does something */
    free(plain), free(dq), free(dk), free(dv), free(db);
    attn_free(&c);

    /* One query over many keys with v = 1: out = sum of kept weights / (1 - p), mean 1. */
    attn_case m = attn_make(1, 1, 1, 4000, 1, false, false, 0);
    for (int64_t j = 0; j < 4000; j++) m.v[j] = 1.0f, m.k[j] = 0.0f;
    m.a.dropout = 0.25f, m.a.seed = 5;
    double mean = 0;
    for (int s = 0; s < 20; s++) {
        m.a.offset = (uint64_t)s * 100000;
        brg_k_attention_fwd(m.out, NULL, m.q, m.k, m.v, &m.a);
        mean += m.out[0] / 20.0;
    }
    CHECK_NEAR(mean, 1.0, 0.02);
    attn_free(&m);
}

int main(void) {
    tk_seed(3);
    test_attention_dropout();
    test_attention_configs();
    test_attention_mask_semantics();
    test_attention_accumulate_and_null();
    test_attention_long();
    test_attention_empty();
    return test_finish();
}
