/* Fused scaled dot-product attention, one query row at a time.
 *
 * Masking follows transformers' eager attention exactly, in float arithmetic:
 *   s = scale * q.k (+ bias)
 *   s = causal-visible ? s : -FLT_MAX             (torch.where with finfo.min)
 *   s = s + (1 - key_mask) * -FLT_MAX             (the additive padding mask)
 * A row with at least one visible key gives every masked key exactly zero probability. A row
 * whose keys are all masked has its maxima at -FLT_MAX and so becomes uniform over them (keys both
 * causal-masked and padded reach -inf and get zero); if every score is -inf the row is made
 * uniform over all keys instead of NaN. Gradients do not flow through causal-masked scores (the
 * where replaces them), but do through padded ones (the mask is added).
 *
 * Forward keeps only each row's log-sum-exp; backward recomputes the row's probabilities from it,
 * so no [Tq,Tk] matrix lives between the two passes. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

static void check_args(const brg_attn_args *a) {
    BRG_ASSERT(a != NULL);
    BRG_ASSERT(a->B >= 0 && a->H >= 0 && a->Tq >= 0 && a->Tk >= 0 && a->D >= 0);
}

static float dotf(const float *a, const float *b, int64_t n) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static void axpy(float *y, float alpha, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* Index of the last key query i may see (every key when not causal); may be < 0 when Tk < Tq. */
static int64_t last_visible(const brg_attn_args *a, int64_t i) { return a->causal ? i + (a->Tk - a->Tq) : a->Tk - 1; }

static float *scratch_alloc(int64_t n) {
    float *s = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    BRG_ASSERT(s != NULL); /* a few KiB; failing here means the host is out of memory */
    return s;
}

/* The masked scores of query row i of head (b,h). Causal-masked keys skip their dot product:
 * torch.where discards it. */
static void row_scores(float *s, const float *qi, const float *kbh, int64_t b, int64_t h, int64_t i,
                       const brg_attn_args *a) {
    const int64_t Tk = a->Tk, D = a->D, last = last_visible(a, i);
    const float *bias = a->bias ? a->bias + (h * a->Tq + i) * Tk : NULL;
    const float *mask = a->key_mask ? a->key_mask + b * Tk : NULL;
    for (int64_t j = 0; j < Tk; j++) {
        float sc = -FLT_MAX;
        if (j <= last) {
            sc = a->scale * dotf(qi, kbh + j * D, D);
            if (bias) sc += bias[j];
        }
        if (mask) sc += (1.0f - mask[j]) * -FLT_MAX;
        s[j] = sc;
    }
}

/* Overwrites scores with probabilities; returns the row's log-sum-exp. */
static float row_softmax(float *s, int64_t Tk) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < Tk; j++) mx = s[j] > mx ? s[j] : mx;
    if (mx == -INFINITY) { /* every key at -inf: uniform rather than 0/0 */
        for (int64_t j = 0; j < Tk; j++) s[j] = 1.0f / (float)Tk;
        return -INFINITY;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < Tk; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < Tk; j++) s[j] *= inv;
    return mx + (float)log(sum);
}

/* A fully-masked row's log-sum-exp is -FLT_MAX + log(count), which rounds to -FLT_MAX: it no
 * longer tells the probabilities apart, so such rows are recomputed from their maximum. */
static bool lse_degenerate(float lse) { return !(lse > -0.5f * FLT_MAX); }

static void row_probs_from_lse(float *s, float lse, int64_t Tk) {
    if (lse_degenerate(lse)) {
        row_softmax(s, Tk);
        return;
    }
    for (int64_t j = 0; j < Tk; j++) s[j] = expf(s[j] - lse);
}

void brg_k_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args) {
    check_args(args);
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk, D = args->D;
    float *p = scratch_alloc(Tk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t bh = b * H + h;
            const float *kbh = k + bh * Tk * D, *vbh = v + bh * Tk * D;
            for (int64_t i = 0; i < Tq; i++) {
                const int64_t row = bh * Tq + i;
                float *oi = out + row * D;
                memset(oi, 0, (size_t)D * sizeof(float));
                if (Tk == 0) { /* softmax over nothing: the output is an empty sum */
                    if (lse) lse[row] = -INFINITY;
                    continue;
                }
                row_scores(p, q + row * D, kbh, b, h, i, args);
                float l = row_softmax(p, Tk);
                if (lse) lse[row] = l;
                for (int64_t j = 0; j < Tk; j++)
                    if (p[j] != 0.0f) axpy(oi, p[j], vbh + j * D, D);
            }
        }
    free(p);
}

/* Gradients of one query row, given its probabilities p (overwritten with nothing). */
typedef struct row_grads {
    float *dq, *dk, *dv, *dbias; /* dq row, dk/dv of head (b,h), dbias row; each may be NULL */
} row_grads;

static void row_backward(const row_grads *g, const float *p, const float *dout_i, const float *q_i,
                         const float *kbh, const float *vbh, float Di, int64_t last, const brg_attn_args *a) {
    const int64_t D = a->D;
    const bool need_ds = g->dq || g->dk || g->dbias;
    for (int64_t j = 0; j < a->Tk; j++) {
        if (p[j] == 0.0f) continue;
        if (g->dv) axpy(g->dv + j * D, p[j], dout_i, D);
        if (!need_ds || j > last) continue; /* causal where: no gradient to the score */
        float ds = p[j] * (dotf(dout_i, vbh + j * D, D) - Di);
        if (g->dbias) g->dbias[j] += ds;
        if (g->dq) axpy(g->dq, a->scale * ds, kbh + j * D, D);
        if (g->dk) axpy(g->dk + j * D, a->scale * ds, q_i, D);
    }
}

void brg_k_attention_bwd(float *dq, float *dk, float *dv, float *dbias, const float *dout, const float *out,
                         const float *lse, const float *q, const float *k, const float *v,
                         const brg_attn_args *args) {
    check_args(args);
    const int64_t B = args->B, H = args->H, Tq = args->Tq, Tk = args->Tk, D = args->D;
    if (Tk == 0 || !(dq || dk || dv || (dbias && args->bias))) return;
    float *p = scratch_alloc(Tk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t bh = b * H + h;
            const float *kbh = k + bh * Tk * D, *vbh = v + bh * Tk * D;
            for (int64_t i = 0; i < Tq; i++) {
                const int64_t row = bh * Tq + i;
                row_scores(p, q + row * D, kbh, b, h, i, args);
                row_probs_from_lse(p, lse[row], Tk);
                /* D_i = sum_j P_ij dP_ij = dout_i . out_i */
                const float Di = dotf(dout + row * D, out + row * D, D);
                row_grads g = {
                    .dq = dq ? dq + row * D : NULL,
                    .dk = dk ? dk + bh * Tk * D : NULL,
                    .dv = dv ? dv + bh * Tk * D : NULL,
                    .dbias = dbias && args->bias ? dbias + (h * Tq + i) * Tk : NULL,
                };
                row_backward(&g, p, dout + row * D, q + row * D, kbh, vbh, Di, last_visible(args, i), args);
            }
        }
    free(p);
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
            for (int64_t d = 0; d < D; d++) dot += (double)q[(bh * Tq + i) * D + d] * k[(bh * Tk + j) * D + d];
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
    float *s = scratch_alloc(Tk);
    BRG_ASSERT(P != NULL);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t bh = b * H + h;
            ref_probs(P, s, q, k, b, h, args);
            for (int64_t i = 0; i < Tq; i++)
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Tk; j++) acc += P[i * Tk + j] * v[(bh * Tk + j) * D + d];
                    out[(bh * Tq + i) * D + d] = (float)acc;
                }
        }
    free(s);
    free(P);
}
