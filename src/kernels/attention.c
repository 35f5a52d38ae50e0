/* Fused scaled dot-product attention, flash-style: query rows are processed in blocks of
 * ROW_BLOCK, whose scores live only in a [ROW_BLOCK, Tk] scratch; the products go through
 * brg_gemm (a decode step's single query row: row products, see single_row), and causal blocks
 * stop at their last visible key.
 *
 * Masking follows transformers' eager attention exactly, in float arithmetic:
 *   s = scale * q.k (+ bias)
 *   s = causal-visible ? s : -FLT_MAX             (torch.where with finfo.min)
 *   s = s + (1 - key_mask) * -FLT_MAX             (the additive padding mask)
 * A row with at least one visible key gives every masked key exactly zero probability. A row
 * whose keys are all masked has its maxima at -FLT_MAX and so becomes uniform over them (keys both
 * causal-masked and padded reach -inf and get zero); if every score is -inf the row is made
 * uniform over all keys instead of NaN. Gradients do not flow through causal-masked scores (the
 * where replaces them), but do through padded ones (the mask is added), as in autograd.
 *
 * Forward keeps only each row's log-sum-exp; backward recomputes the block's probabilities from
 * it, so no [Tq,Tk] matrix lives between the two passes. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/precision.h"
#include "brigade/status.h"
#include "kernels/gemv.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

/* Query rows per block: enough to make the score products real GEMMs, small enough that the
 * [ROW_BLOCK, Tk] scratch stays in cache for sequence lengths of a few thousand. */
#define ROW_BLOCK BRG_ATTN_ROW_BLOCK

static void check_args(const brg_attn_args *a) {
    BRG_ASSERT(a != NULL);
    BRG_ASSERT(a->B >= 0 && a->H >= 0 && a->Tq >= 0 && a->Tk >= 0 && a->D >= 0);
    BRG_ASSERT(a->kv_stride == 0 || a->kv_stride >= a->Tk);
}


/* Key/value rows stored per (b, h): Tk, or the larger capacity of a KV cache. */
static int64_t kv_rows(const brg_attn_args *a) { return a->kv_stride ? a->kv_stride : a->Tk; }

/* Index of the last key query i may see (every key when not causal); may be < 0 when Tk < Tq. */
static int64_t last_visible(const brg_attn_args *a, int64_t i) { return a->causal ? i + (a->Tk - a->Tq) : a->Tk - 1; }

/* One block of query rows [i0, i0 + nr) of head (b, h). */
typedef struct block {
    int64_t b, h, bh, i0, nr;
} block;

/* Keys past this index are causal-masked for every row of the block. */
static int64_t block_key_end(const brg_attn_args *a, const block *blk) {
    if (!a->causal) return a->Tk;
    int64_t end = last_visible(a, blk->i0 + blk->nr - 1) + 1;
    return end < 0 ? 0 : end > a->Tk ? a->Tk : end;
}

/* The masks on the block's raw scores s[nr, Tk] (the products taken for keys before kend). */
static void mask_scores(float *s, const block *blk, const brg_attn_args *a) {
    const int64_t Tq = a->Tq, Tk = a->Tk;
    const float *mask = a->key_mask ? a->key_mask + blk->b * Tk : NULL;
    for (int64_t r = 0; r < blk->nr; r++) {
        const int64_t i = blk->i0 + r, last = last_visible(a, i);
        const float *bias = a->bias ? a->bias + (blk->h * Tq + i) * Tk : NULL;
        float *row = s + r * Tk;
        /* Each element's operations as one loop with its branches would do them, in loops that
         * vectorize: the bias on the visible keys, -FLT_MAX on the rest, then the key mask. */
        const int64_t visible = last < 0 ? 0 : last + 1 < Tk ? last + 1 : Tk;
        if (bias)
            for (int64_t j = 0; j < visible; j++) row[j] += bias[j];
        for (int64_t j = visible; j < Tk; j++) row[j] = -FLT_MAX;
        if (mask)
            for (int64_t j = 0; j < Tk; j++) row[j] += (1.0f - mask[j]) * -FLT_MAX;
    }
}

/* Masked scores of the block into s[nr, Tk]; returns block_key_end. The product is taken for the
 * keys before that end only: the causal where discards the rest. */
static int64_t block_scores(float *s, const float *q, const float *k, const block *blk, const brg_attn_args *a) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D;
    const int64_t kend = block_key_end(a, blk);
    const float *kb = k + blk->bh * kv_rows(a) * D;
    brg_gemm(false, true, blk->nr, kend, D, a->scale, q + (blk->bh * Tq + blk->i0) * D, D, kb, D, 0.0f, s, Tk);
    mask_scores(s, blk, a);
    return kend;
}

/* A decode step's single query row (Tq == 1, fp32 products, no log-sum-exp kept for a backward):
 * the scores and the output as rows against the cached keys and values (gemv.c), each key and
 * value read once, where a GEMM would first pack them. The same bits whatever the team, the batch
 * or the placement; the tape's forward, whose backward recomputes the scores with GEMMs, keeps
 * the GEMM path. */
static bool single_row(const brg_attn_args *a, const float *lse) {
    return a->Tq == 1 && !lse && brg_compute_dtype() == BRG_DTYPE_F32;
}

static int64_t single_row_scores(float *s, const float *q, const float *k, const block *blk,
                                 const brg_attn_args *a) {
    const int64_t D = a->D, kend = block_key_end(a, blk);
    brg_k_linear_rows_fwd(s, q + blk->bh * D, k + blk->bh * kv_rows(a) * D, NULL, 1, D, kend, false);
    for (int64_t j = 0; j < kend; j++) s[j] *= a->scale;
    mask_scores(s, blk, a);
    return kend;
}

/* exp(s - shift) over the first n entries and zeros after them; returns the sum. */
static double exp_prefix(float *s, int64_t n, int64_t Tk, float shift) {
    double sum = brg_simd_exp_sum(s, s, shift, n);
    for (int64_t j = n; j < Tk; j++) s[j] = 0.0f;
    return sum;
}

static float max_prefix(const float *s, int64_t n) { return brg_simd_max(s, n); }

/* Scores in, probabilities out; returns the row's log-sum-exp and sets *used to the length of the
 * prefix that can hold non-zero probabilities. Keys from kend on sit at -FLT_MAX or below, so
 * when the row has a finite maximum before kend they are exactly zero and skip the exp. */
static float row_softmax(float *s, int64_t Tk, int64_t kend, int64_t *used) {
    float mx = max_prefix(s, kend);
    *used = kend;
    if (!(mx > -0.5f * FLT_MAX)) { /* no visible key: every key competes */
        mx = max_prefix(s, Tk);
        *used = Tk;
    }
    if (mx == -INFINITY) { /* every key at -inf: uniform rather than 0/0 */
        for (int64_t j = 0; j < Tk; j++) s[j] = 1.0f / (float)Tk;
        return -INFINITY;
    }
    const double sum = exp_prefix(s, *used, Tk, mx);
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < *used; j++) s[j] *= inv;
    return mx + (float)log(sum);
}

/* A fully-masked row's log-sum-exp is -FLT_MAX + log(count), which rounds to -FLT_MAX: it no
 * longer tells the probabilities apart, so such rows are recomputed from their maximum. */
static void row_probs_from_lse(float *s, float lse, int64_t Tk, int64_t kend, int64_t *used) {
    if (!(lse > -0.5f * FLT_MAX)) {
        row_softmax(s, Tk, kend, used);
        return;
    }
    exp_prefix(s, kend, Tk, lse);
    *used = kend;
}

/* Inverted dropout on the block's probability rows, keyed by their (b, h, i, j) position. */
static void apply_dropout(float *p, const block *blk, int64_t used, const brg_attn_args *a) {
    if (a->dropout <= 0.0f) return;
    for (int64_t r = 0; r < blk->nr; r++) {
        uint64_t base = a->offset + (uint64_t)((blk->bh * a->Tq + blk->i0 + r) * a->Tk);
        float *row = p + r * a->Tk;
        brg_k_dropout_fwd(row, row, used, a->dropout, a->seed, base);
    }
}

/* ---- heads on intra-op threads ----------------------------------------------------------
 * Every (b, h) is independent but for T5's bias gradient, which sums over b; so a device's
 * threads take ranges of heads, each running its heads for every b in order: each block's
 * arithmetic, and the order of the sums into dbias, are those of the single-thread loop. Each
 * thread has its own scratch. */

typedef struct attn_job {
    float *out, *lse; /* forward: written */
    const float *q, *k, *v;
    const float *dout, *saved_out, *saved_lse; /* backward: the forward's out and lse, read */
    const struct attn_grads *g;
    const brg_attn_args *args;
} attn_job;

/* Slice i of n: heads [H i / n, H (i + 1) / n). */
static void head_range(const brg_attn_args *a, int i, int n, int64_t *h0, int64_t *h1) {
    *h0 = a->H * i / n;
    *h1 = a->H * (i + 1) / n;
}

/* Runs fn over all heads: split across the bound team when there is one and the work (in
 * multiply-adds of one product) reaches min_work, what waking the team is worth. */
static void run_heads(brg_team_fn fn, attn_job *job, int64_t work, int64_t min_work) {
    if (job->args->H >= 2 && work >= min_work && brg_team_run(fn, job)) return;
    fn(job, 0, 1);
}

static void forward_heads(void *ctx, int i, int n) {
    const attn_job *j = ctx;
    const brg_attn_args *args = j->args;
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk, D = args->D;
    const bool one_row = single_row(args, j->lse);
    int64_t h0, h1;
    head_range(args, i, n, &h0, &h1);
    float *p = brg_scratch(0, (size_t)(ROW_BLOCK * Tk));
    for (int64_t h = h0; h < h1; h++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i0 = 0; i0 < Tq; i0 += ROW_BLOCK) {
                block blk = {b, h, b * H + h, i0, Tq - i0 < ROW_BLOCK ? Tq - i0 : ROW_BLOCK};
                const int64_t kend = one_row ? single_row_scores(p, j->q, j->k, &blk, args)
                                             : block_scores(p, j->q, j->k, &blk, args),
                              row0 = blk.bh * Tq + i0;
                int64_t used = 0;
                for (int64_t r = 0; r < blk.nr; r++) {
                    int64_t u;
                    float l = row_softmax(p + r * Tk, Tk, kend, &u);
                    if (j->lse) j->lse[row0 + r] = l;
                    used = u > used ? u : used;
                }
                apply_dropout(p, &blk, used, args);
                const float *vb = j->v + blk.bh * kv_rows(args) * D;
                if (one_row) brg_k_linear_rows_fwd(j->out + row0 * D, p, vb, NULL, 1, used, D, true);
                else brg_gemm(false, false, blk.nr, D, used, 1.0f, p, Tk, vb, D, 0.0f, j->out + row0 * D, D);
            }
}

void brg_k_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args) {
    check_args(args);
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk, D = args->D;
    if (Tk == 0) { /* softmax over no keys: every output is an empty sum */
        memset(out, 0, (size_t)(B * H * Tq * D) * sizeof(float));
        for (int64_t r = 0; lse && r < B * H * Tq; r++) lse[r] = -INFINITY;
        return;
    }
    attn_job job = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .args = args};
    /* A single query row reads every cached key and value once: worth a team from the sizes that
     * element-wise loops split at, not only from a GEMM's. */
    const int64_t work = B * H * Tq * Tk * D;
    run_heads(forward_heads, &job, work, single_row(args, lse) ? BRG_TEAM_MIN_ELEMENTS : (1 << 20));
}

typedef struct attn_grads {
    float *dq, *dk, *dv, *dbias;
} attn_grads;

/* ds = P * (dP - D_i) in place of dP, with D_i = sum_j P_ij dP_ij = dout_i . out_i; zero where the
 * causal where cut the score off. dbias takes ds as it is (the bias is added to the score). */
static void block_dscores(float *dp, const float *p, const float *dout, const float *out, const block *blk,
                          int64_t used, float *dbias, const brg_attn_args *a) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D;
    for (int64_t r = 0; r < blk->nr; r++) {
        const int64_t i = blk->i0 + r, row = blk->bh * Tq + i, last = last_visible(a, i);
        double di = 0.0;
        for (int64_t d = 0; d < D; d++) di += (double)dout[row * D + d] * out[row * D + d];
        const float Di = (float)di;
        float *ds = dp + r * Tk;
        const float *pr = p + r * Tk;
        for (int64_t j = 0; j < used; j++) ds[j] = j <= last ? pr[j] * (ds[j] - Di) : 0.0f;
        if (dbias) {
            float *db = dbias + (blk->h * Tq + i) * Tk;
            for (int64_t j = 0; j < used; j++) db[j] += ds[j];
        }
    }
}

static void block_backward(const attn_grads *g, float *p, float *dp, const float *dout, const float *out,
                           const float *lse, const float *q, const float *k, const float *v, const block *blk,
                           const brg_attn_args *a) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, row0 = blk->bh * Tq + blk->i0;
    const int64_t kv = kv_rows(a);
    const float *kbh = k + blk->bh * kv * D, *vbh = v + blk->bh * kv * D, *qb = q + row0 * D, *gb = dout + row0 * D;
    const int64_t kend = block_scores(p, q, k, blk, a);
    int64_t used = 0;
    for (int64_t r = 0; r < blk->nr; r++) {
        int64_t u;
        row_probs_from_lse(p + r * Tk, lse[row0 + r], Tk, kend, &u);
        used = u > used ? u : used;
    }
    if (g->dq || g->dk || g->dbias) {
        /* dP = dout v^T (through the dropout mask, which scales it like the forward), then dS in
         * place; D_i = dout_i . out_i still equals sum_j P_ij dP_ij with dropout. */
        brg_gemm(false, true, blk->nr, used, D, 1.0f, gb, D, vbh, D, 0.0f, dp, Tk);
        apply_dropout(dp, blk, used, a);
        block_dscores(dp, p, dout, out, blk, used, g->dbias, a);
        if (g->dq) /* dq += scale dS k */
            brg_gemm(false, false, blk->nr, D, used, a->scale, dp, Tk, kbh, D, 1.0f, g->dq + row0 * D, D);
        if (g->dk) /* dk += scale dS^T q */
            brg_gemm(true, false, used, D, blk->nr, a->scale, dp, Tk, qb, D, 1.0f, g->dk + blk->bh * kv * D, D);
    }
    if (g->dv) { /* dv += dropout(P)^T dout */
        apply_dropout(p, blk, used, a);
        brg_gemm(true, false, used, D, blk->nr, 1.0f, p, Tk, gb, D, 1.0f, g->dv + blk->bh * kv * D, D);
    }
}

static void backward_heads(void *ctx, int i, int n) {
    const attn_job *j = ctx;
    const brg_attn_args *args = j->args;
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk;
    int64_t h0, h1;
    head_range(args, i, n, &h0, &h1);
    float *p = brg_scratch(0, (size_t)(2 * ROW_BLOCK * Tk)), *dp = p + ROW_BLOCK * Tk;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i0 = 0; i0 < Tq; i0 += ROW_BLOCK) {
                block blk = {b, h, b * H + h, i0, Tq - i0 < ROW_BLOCK ? Tq - i0 : ROW_BLOCK};
                block_backward(j->g, p, dp, j->dout, j->saved_out, j->saved_lse, j->q, j->k, j->v, &blk, args);
            }
}

void brg_k_attention_bwd(float *dq, float *dk, float *dv, float *dbias, const float *dout, const float *out,
                         const float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args) {
    check_args(args);
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk;
    if (Tk == 0 || !(dq || dk || dv || dbias)) return;
    const attn_grads g = {dq, dk, dv, dbias};
    attn_job job = {.q = q, .k = k, .v = v, .dout = dout, .saved_out = out, .saved_lse = lse, .g = &g, .args = args};
    run_heads(backward_heads, &job, 3 * B * H * Tq * Tk * args->D, 1 << 20);
}

/* ---- reference ---------------------------------------------------------------------------- */

/* Probabilities of head (b,h) as a full [Tq,Tk] matrix in double. Scores are rounded to float
 * before masking so the -FLT_MAX arithmetic is the same as in the fused kernel. */
static void ref_probs(double *P, float *s, const float *q, const float *k, int64_t b, int64_t h,
                      const brg_attn_args *a) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, bh = b * a->H + h;
    for (int64_t i = 0; i < Tq; i++) {
        double *Pi = P + i * Tk;
        const float *bias = a->bias ? a->bias + (h * Tq + i) * Tk : NULL;
        const float *mask = a->key_mask ? a->key_mask + b * Tk : NULL;
        for (int64_t j = 0; j < Tk; j++) {
            double dot = 0.0;
            for (int64_t d = 0; d < D; d++) dot += (double)q[(bh * Tq + i) * D + d] * k[(bh * kv_rows(a) + j) * D + d];
            float sc = (float)(a->scale * dot);
            if (bias) sc += bias[j];
            if (a->causal && j > i + (Tk - Tq)) sc = -FLT_MAX;
            if (mask) sc += (1.0f - mask[j]) * -FLT_MAX;
            s[j] = sc;
        }
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < Tk; j++) mx = s[j] > mx ? s[j] : mx;
        for (int64_t j = 0; j < Tk; j++) {
            Pi[j] = mx == -INFINITY ? 1.0 : exp((double)s[j] - mx);
            sum += Pi[j];
        }
        for (int64_t j = 0; j < Tk; j++) Pi[j] /= sum;
    }
}

void brg_k_attention_fwd_ref(float *out, const float *q, const float *k, const float *v,
                             const brg_attn_args *args) {
    check_args(args);
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk, D = args->D;
    double *P = malloc((size_t)(Tq * Tk > 0 ? Tq * Tk : 1) * sizeof(double));
    float *s = malloc((size_t)(Tk > 0 ? Tk : 1) * sizeof(float));
    BRG_ASSERT(P != NULL && s != NULL);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t bh = b * H + h;
            ref_probs(P, s, q, k, b, h, args);
            for (int64_t i = 0; i < Tq; i++)
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Tk; j++) acc += P[i * Tk + j] * v[(bh * kv_rows(args) + j) * D + d];
                    out[(bh * Tq + i) * D + d] = (float)acc;
                }
        }
    free(s);
    free(P);
}
