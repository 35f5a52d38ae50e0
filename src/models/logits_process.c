/* transformers' logits processors and warpers (generation/logits_process.py), one row at a time,
 * in float as torch computes them. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/generate_internal.h"

bool gen_is_eos(const brg_generation_config *c, int32_t id) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] == id) return true;
    return false;
}

brg_status gen_proc_init(gen_proc *p, const gen_job *j, bool warp, int64_t min_keep) {
    *p = (gen_proc){.cfg = &j->cfg, .vocab = j->vocab, .min_length = j->min_length, .min_keep = min_keep,
                    .warp = warp};
    p->mark = calloc((size_t)j->vocab, 1);
    p->vals = malloc((size_t)j->vocab * sizeof *p->vals);
    p->idx = malloc((size_t)j->vocab * sizeof *p->idx);
    p->tmp = malloc((size_t)j->vocab * sizeof *p->tmp);
    if (p->mark && p->vals && p->idx && p->tmp) return BRG_OK;
    gen_proc_free(p);
    return brg_error(BRG_ERR_OOM, "cannot allocate the logits processors' scratch");
}

void gen_proc_free(gen_proc *p) {
    free(p->mark);
    free(p->vals);
    free(p->idx);
    free(p->tmp);
    p->mark = NULL;
    p->vals = NULL;
    p->idx = NULL;
    p->tmp = NULL;
}

void gen_log_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) return; /* every score -inf: stays -inf (nan in torch) */
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)(x[i] - mx));
    const float lse = (float)log(sum);
    for (int64_t i = 0; i < n; i++) x[i] = (x[i] - mx) - lse;
}

/* RepetitionPenaltyLogitsProcessor: every token of seq[ignore..len) once. */
static void repetition_penalty(gen_proc *p, float *s, const int32_t *seq, int64_t len, int64_t ignore) {
    const float pen = p->cfg->repetition_penalty;
    for (int64_t i = ignore; i < len; i++) {
        const int32_t t = seq[i];
        if (t < 0 || t >= p->vocab || p->mark[t]) continue;
        p->mark[t] = 1;
        s[t] = s[t] < 0 ? s[t] * pen : s[t] / pen;
    }
    for (int64_t i = ignore; i < len; i++)
        if (seq[i] >= 0 && seq[i] < p->vocab) p->mark[seq[i]] = 0;
}

/* NoRepeatNGramLogitsProcessor: a token that would complete an n-gram already in seq is banned. */
static void no_repeat_ngram(const gen_proc *p, float *s, const int32_t *seq, int64_t len) {
    const int64_t n = p->cfg->no_repeat_ngram_size;
    if (len < n) return;
    const int32_t *prefix = seq + len + 1 - n; /* the last n - 1 tokens */
    for (int64_t w = 0; w + n <= len; w++) {
        if (memcmp(seq + w, prefix, (size_t)(n - 1) * sizeof *seq) != 0) continue;
        const int32_t t = seq[w + n - 1];
        if (t >= 0 && t < p->vocab) s[t] = -INFINITY;
    }
}

/* p->idx = the indices of key[0..n) sorted ascending, ties by index (a stable merge sort;
 * NaN sorts last). */
static bool before(const float *key, int32_t i, int32_t j) {
    const float x = key[i], y = key[j];
    if (isnan(y)) return !isnan(x) || i < j;
    return x < y || (x == y && i < j);
}

static void sort_indices(gen_proc *p, const float *key, int64_t n) {
    int32_t *a = p->idx, *b = p->tmp;
    for (int64_t i = 0; i < n; i++) a[i] = (int32_t)i;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) b[o++] = before(key, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid) b[o++] = a[i++];
            while (j < hi) b[o++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    if (a != p->idx) memcpy(p->idx, a, (size_t)n * sizeof *a);
}

/* TopKLogitsWarper: scores below the k-th largest become -inf (ties with it stay). */
static void top_k(gen_proc *p, float *s) {
    int64_t k = p->cfg->top_k > p->min_keep ? p->cfg->top_k : p->min_keep;
    if (k >= p->vocab) return;
    memcpy(p->vals, s, (size_t)p->vocab * sizeof *s);
    sort_indices(p, p->vals, p->vocab);
    const float kth = p->vals[p->idx[p->vocab - k]];
    for (int64_t i = 0; i < p->vocab; i++)
        if (s[i] < kth) s[i] = -INFINITY;
}

/* softmax of key[idx[0..n)] cumulated in that order, into vals[0..n) (float, as torch's tensors). */
static void sorted_cumulative_probs(gen_proc *p, const float *key, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = key[i] > mx ? key[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += mx == -INFINITY ? 0.0 : exp((double)(key[i] - mx));
    double cum = 0;
    for (int64_t i = 0; i < n; i++) {
        const float prob = mx == -INFINITY ? 0.0f : (float)(exp((double)(key[p->idx[i]] - mx)) / sum);
        cum += prob;
        p->vals[i] = (float)cum;
    }
}

/* TopPLogitsWarper: sorted ascending, tokens whose cumulative probability is <= 1 - top_p go,
 * the last min_keep always stay. */
static void top_p(gen_proc *p, float *s) {
    const int64_t V = p->vocab;
    sort_indices(p, s, V);
    sorted_cumulative_probs(p, s, V);
    const float cut = (float)(1.0 - (double)p->cfg->top_p);
    for (int64_t i = 0; i < V - p->min_keep; i++)
        if (p->vals[i] <= cut) s[p->idx[i]] = -INFINITY;
}

/* TypicalLogitsWarper. */
static void typical_p(gen_proc *p, float *s) {
    const int64_t V = p->vocab;
    float *shifted = calloc((size_t)V, sizeof *shifted), *logp = calloc((size_t)V, sizeof *logp);
    if (!shifted || !logp) { /* no memory: leave the scores as they are */
        free(shifted);
        free(logp);
        return;
    }
    memcpy(logp, s, (size_t)V * sizeof *s);
    gen_log_softmax(logp, V);
    double ent = 0;
    for (int64_t i = 0; i < V; i++) {
        const float pr = expf(logp[i]), t = logp[i] * pr;
        if (!isnan(t)) ent += t;
    }
    const float entropy = (float)-ent;
    for (int64_t i = 0; i < V; i++) shifted[i] = fabsf(-logp[i] - entropy);
    sort_indices(p, shifted, V); /* ascending distance from the entropy */
    sorted_cumulative_probs(p, s, V);
    int64_t last = 0;
    for (int64_t i = 0; i < V; i++) last += p->vals[i] < p->cfg->typical_p;
    if (last > V - 1) last = V - 1;
    const float bound = shifted[p->idx[last]];
    for (int64_t i = p->min_keep; i < V; i++)
        if (shifted[p->idx[i]] > bound) s[p->idx[i]] = -INFINITY;
    free(shifted);
    free(logp);
}

void gen_process(gen_proc *p, float *s, const int32_t *seq, int64_t len, int64_t ignore) {
    const brg_generation_config *c = p->cfg;
    if (c->repetition_penalty != 1.0f) repetition_penalty(p, s, seq, len, ignore);
    if (c->no_repeat_ngram_size > 0) no_repeat_ngram(p, s, seq, len);
    if (c->n_eos > 0 && len < p->min_length)
        for (int i = 0; i < c->n_eos; i++) s[c->eos_token_ids[i]] = -INFINITY;
    if (!p->warp) return;
    if (c->temperature != 1.0f)
        for (int64_t i = 0; i < p->vocab; i++) s[i] = s[i] / c->temperature;
    if (c->top_k != 0) top_k(p, s);
    if (c->top_p < 1.0f) top_p(p, s);
    if (c->typical_p < 1.0f) typical_p(p, s);
}
