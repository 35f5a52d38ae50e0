/* Beam search (and beam sampling) as transformers 5's GenerationMixin._beam_search: per prompt,
 * num_beams running beams and num_beams finished hypotheses; every step keeps the top
 * beams_to_keep = max(2, 1 + len(eos)) * num_beams continuations of all beams, the best
 * num_beams of them that did not just finish run on, and those among the top num_beams that
 * finished (an eos, or the length limit) join the finished set, scored
 * sum_logprobs / generated_length ** length_penalty (the eos counted, the prompt not). The
 * float arithmetic follows the tensors' (float32 scores, -1e9 penalties added in float). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/generate_internal.h"

/* Per prompt: the finished hypotheses. */
typedef struct finished {
    float *score;    /* [K], -1e9 when empty */
    bool *flag;      /* [K] is_sent_finished */
    int64_t *len;    /* [K] generated tokens */
    int32_t *seq;    /* [K, max_length] */
} finished;

typedef struct beam_state {
    gen_job *j;
    int64_t K, keep, V, L;
    float *running;      /* [rows] running beam scores */
    int32_t *next_seqs;  /* [rows, L] scratch for the new running sequences */
    finished fin;        /* [n_prompts * K] entries */
    bool *unsatisfied;   /* [n_prompts] the early-stop heuristic still allows improvement */
    /* candidates of one prompt */
    float *acc;          /* [K * V] */
    int32_t *cand;       /* [keep] flat indices */
    float *cscore, *crun, *cfin;
    bool *chit, *cdid;
    int32_t *order;      /* [keep + K] */
    int32_t *src;        /* [rows] decoder reorder */
    int32_t *tokens;     /* [rows] next tokens */
    double *scratch;     /* [K * V] */
    float *mscore;       /* [K + keep] merged */
    bool *mflag;
    int64_t *mlen;
    int32_t *mseq;       /* [K, L] new finished sequences of one prompt */
    brg_rng *rngs;       /* [n_prompts] beam sampling */
} beam_state;

static void state_free(beam_state *s) {
    free(s->running);
    free(s->next_seqs);
    free(s->fin.score);
    free(s->fin.flag);
    free(s->fin.len);
    free(s->fin.seq);
    free(s->unsatisfied);
    free(s->acc);
    free(s->cand);
    free(s->cscore);
    free(s->crun);
    free(s->cfin);
    free(s->chit);
    free(s->cdid);
    free(s->order);
    free(s->src);
    free(s->tokens);
    free(s->scratch);
    free(s->mscore);
    free(s->mflag);
    free(s->mlen);
    free(s->mseq);
    free(s->rngs);
}

static brg_status state_init(beam_state *s, gen_job *j) {
    const int64_t K = j->cfg.num_beams, B = j->n_prompts, R = j->rows, V = j->vocab, L = j->max_length;
    const int64_t keep = (j->cfg.n_eos + 1 > 2 ? j->cfg.n_eos + 1 : 2) * K;
    *s = (beam_state){.j = j, .K = K, .keep = keep, .V = V, .L = L};
    s->running = malloc((size_t)R * sizeof(float));
    s->next_seqs = malloc((size_t)(R * L) * sizeof(int32_t));
    s->fin.score = malloc((size_t)(B * K) * sizeof(float));
    s->fin.flag = calloc((size_t)(B * K), sizeof(bool));
    s->fin.len = calloc((size_t)(B * K), sizeof(int64_t));
    s->fin.seq = malloc((size_t)(B * K * L) * sizeof(int32_t));
    s->unsatisfied = malloc((size_t)B * sizeof(bool));
    s->acc = malloc((size_t)(K * V) * sizeof(float));
    s->cand = malloc((size_t)keep * sizeof(int32_t));
    s->cscore = malloc((size_t)keep * sizeof(float));
    s->crun = malloc((size_t)keep * sizeof(float));
    s->cfin = malloc((size_t)keep * sizeof(float));
    s->chit = malloc((size_t)keep * sizeof(bool));
    s->cdid = malloc((size_t)keep * sizeof(bool));
    s->order = malloc((size_t)(keep + K) * sizeof(int32_t));
    s->src = malloc((size_t)R * sizeof(int32_t));
    s->tokens = malloc((size_t)R * sizeof(int32_t));
    s->scratch = malloc((size_t)(K * V) * sizeof(double));
    s->mscore = malloc((size_t)(K + keep) * sizeof(float));
    s->mflag = malloc((size_t)(K + keep) * sizeof(bool));
    s->mlen = malloc((size_t)(K + keep) * sizeof(int64_t));
    s->mseq = malloc((size_t)(K * L) * sizeof(int32_t));
    s->rngs = malloc((size_t)B * sizeof(brg_rng));
    if (!(s->running && s->next_seqs && s->fin.score && s->fin.flag && s->fin.len && s->fin.seq && s->unsatisfied &&
          s->acc && s->cand && s->cscore && s->crun && s->cfin && s->chit && s->cdid && s->order && s->src &&
          s->tokens && s->scratch && s->mscore && s->mflag && s->mlen && s->mseq && s->rngs)) {
        state_free(s);
        return brg_error(BRG_ERR_OOM, "cannot allocate beam search state for %lld beams", (long long)R);
    }
    for (int64_t r = 0; r < R; r++) s->running[r] = r % K == 0 ? 0.0f : -1e9f;
    for (int64_t i = 0; i < B * K; i++) s->fin.score[i] = -1e9f;
    /* The finished set starts as the running sequences: the prompt, then the fill value. */
    memcpy(s->fin.seq, j->seqs, (size_t)(B * K * L) * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
        s->unsatisfied[b] = true;
        gen_rng_seed(&s->rngs[b], j->cfg.seed, j->keys ? j->keys[b] : (uint64_t)b, 0);
    }
    return BRG_OK;
}

/* order[0..k) = indices of the k largest of x[0..n), largest first, ties to the lower index
 * (NaN counts as smallest). */
static void top_indices(const float *x, int64_t n, int64_t k, int32_t *order) {
    int64_t have = 0;
    for (int64_t i = 0; i < n; i++) {
        const float v = isnan(x[i]) ? -INFINITY : x[i];
        if (have == k) {
            const float worst = x[order[k - 1]];
            if (!(v > (isnan(worst) ? -INFINITY : worst))) continue;
            have--;
        }
        int64_t at = have;
        while (at > 0) {
            const float above = isnan(x[order[at - 1]]) ? -INFINITY : x[order[at - 1]];
            if (!(v > above)) break;
            order[at] = order[at - 1];
            at--;
        }
        order[at] = (int32_t)i;
        have++;
    }
}

static float length_scale(int64_t len, float penalty) { return (float)pow((double)len, (double)penalty); }

/* The candidates of prompt b from its accumulated scores s->acc. */
static void choose_candidates(beam_state *s, int64_t b) {
    const int64_t n = s->K * s->V;
    if (s->j->cfg.do_sample) {
        int64_t got = gen_sample_distinct(&s->rngs[b], s->acc, n, s->keep, s->cand, s->scratch);
        for (int64_t i = got; i < s->keep; i++) s->cand[i] = s->cand[i > 0 ? i - 1 : 0]; /* degenerate: too few */
        /* sorted by score, best first (torch.sort; ties keep the draw order) */
        for (int64_t i = 1; i < s->keep; i++) {
            const int32_t c = s->cand[i];
            int64_t at = i;
            while (at > 0 && s->acc[s->cand[at - 1]] < s->acc[c]) {
                s->cand[at] = s->cand[at - 1];
                at--;
            }
            s->cand[at] = c;
        }
    } else {
        top_indices(s->acc, n, s->keep, s->cand);
    }
}

/* One step of prompt b at decoder length cur: candidates, running beams, finished set. */
static void step_prompt(beam_state *s, int64_t b, int64_t cur, const float *logp, bool *all_hit) {
    gen_job *j = s->j;
    const int64_t K = s->K, V = s->V, L = s->L, keep = s->keep, P = j->prompt_len;
    const brg_generation_config *c = &j->cfg;
    for (int64_t k = 0; k < K; k++) {
        const float *row = logp + (b * K + k) * V;
        const float run = s->running[b * K + k];
        for (int64_t t = 0; t < V; t++) s->acc[k * V + t] = row[t] + run;
    }
    choose_candidates(s, b);
    for (int64_t i = 0; i < keep; i++) {
        const int32_t tok = s->cand[i] % (int32_t)V;
        s->cscore[i] = s->acc[s->cand[i]];
        s->chit[i] = gen_is_eos(c, tok) || cur + 1 >= L;
        *all_hit = *all_hit && s->chit[i];
        s->crun[i] = s->cscore[i] + (s->chit[i] ? -1e9f : 0.0f);
    }
    /* The running beams of the next step. */
    top_indices(s->crun, keep, K, s->order);
    for (int64_t k = 0; k < K; k++) {
        const int32_t ci = s->order[k], beam = s->cand[ci] / (int32_t)V, tok = s->cand[ci] % (int32_t)V;
        const int64_t r = b * K + k;
        s->src[r] = (int32_t)(b * K + beam);
        s->tokens[r] = tok;
        s->running[r] = s->crun[ci];
        memcpy(s->next_seqs + r * L, j->seqs + (b * K + beam) * L, (size_t)L * sizeof(int32_t));
        s->next_seqs[r * L + cur] = tok;
    }
    /* The finished set: the top num_beams candidates that just finished, scored. */
    bool full = c->early_stopping == BRG_EARLY_STOPPING_TRUE;
    for (int64_t k = 0; k < K; k++) full = full && s->fin.flag[b * K + k];
    const float scale = length_scale(cur + 1 - P, c->length_penalty);
    for (int64_t i = 0; i < keep; i++) {
        s->cdid[i] = s->chit[i] && i < K;
        float f = s->cscore[i] / scale;
        if (full) f += -1e9f;
        if (!s->unsatisfied[b]) f += -1e9f;
        if (!s->cdid[i]) f += -1e9f;
        s->cfin[i] = f;
    }
    for (int64_t k = 0; k < K; k++) {
        s->mscore[k] = s->fin.score[b * K + k];
        s->mflag[k] = s->fin.flag[b * K + k];
        s->mlen[k] = s->fin.len[b * K + k];
    }
    for (int64_t i = 0; i < keep; i++) {
        s->mscore[K + i] = s->cfin[i];
        s->mflag[K + i] = s->cdid[i];
        s->mlen[K + i] = cur + 1 - P;
    }
    top_indices(s->mscore, K + keep, K, s->order);
    for (int64_t k = 0; k < K; k++) {
        const int32_t m = s->order[k];
        int32_t *dst = s->mseq + k * L;
        if (m < K) {
            memcpy(dst, s->fin.seq + (b * K + m) * L, (size_t)L * sizeof(int32_t));
        } else {
            const int32_t ci = s->cand[m - K], beam = ci / (int32_t)V;
            memcpy(dst, j->seqs + (b * K + beam) * L, (size_t)L * sizeof(int32_t));
            dst[cur] = ci % (int32_t)V;
        }
    }
    float sc[1024];
    bool fl[1024];
    int64_t ln[1024];
    for (int64_t k = 0; k < K; k++) {
        sc[k] = s->mscore[s->order[k]];
        fl[k] = s->mflag[s->order[k]];
        ln[k] = s->mlen[s->order[k]];
    }
    for (int64_t k = 0; k < K; k++) {
        s->fin.score[b * K + k] = sc[k];
        s->fin.flag[b * K + k] = fl[k];
        s->fin.len[b * K + k] = ln[k];
    }
    memcpy(s->fin.seq + b * K * L, s->mseq, (size_t)(K * L) * sizeof(int32_t));
}

/* _check_early_stop_heuristic for prompt b at the new length cur. */
static void check_heuristic(beam_state *s, int64_t b, int64_t cur) {
    if (!s->unsatisfied[b]) return;
    const brg_generation_config *c = &s->j->cfg;
    const int64_t K = s->K, P = s->j->prompt_len;
    const int64_t len = c->early_stopping == BRG_EARLY_STOPPING_NEVER && c->length_penalty > 0 ? s->L - P : cur - P;
    const float best = s->running[b * K] / length_scale(len, c->length_penalty);
    float worst = s->fin.score[b * K];
    for (int64_t k = 1; k < K; k++) worst = s->fin.score[b * K + k] < worst ? s->fin.score[b * K + k] : worst;
    bool any = false;
    for (int64_t k = 0; k < K; k++) any = any || best > (s->fin.flag[b * K + k] ? worst : -1e9f);
    s->unsatisfied[b] = any;
}

static brg_status write_output(beam_state *s) {
    gen_job *j = s->j;
    brg_generation *g = j->out;
    const int64_t K = s->K, N = j->cfg.num_return_sequences, L = s->L;
    for (int64_t b = 0; b < j->n_prompts; b++)
        for (int64_t i = 0; i < N; i++) {
            const int64_t e = b * K + i, o = b * N + i, n = s->fin.len[e];
            g->lengths[o] = n;
            g->scores[o] = s->fin.score[e];
            g->ids[o] = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
            if (!g->ids[o]) return brg_error(BRG_ERR_OOM, "cannot allocate the generated sequences");
            memcpy(g->ids[o], s->fin.seq + e * L + j->prompt_len, (size_t)n * sizeof(int32_t));
        }
    return BRG_OK;
}

brg_status gen_beam_search(gen_job *j, float *logits) {
    beam_state s;
    BRG_TRY(state_init(&s, j));
    if (s.K > 1024) {
        state_free(&s);
        return brg_error(BRG_ERR_INVALID_ARG, "num_beams %lld: at most 1024", (long long)s.K);
    }
    gen_proc proc;
    const int64_t min_keep = j->cfg.n_eos > 0 ? j->cfg.n_eos + 1 : 2;
    brg_status st = gen_proc_init(&proc, j, j->cfg.do_sample, min_keep);
    const int64_t R = j->rows, V = j->vocab, L = j->max_length;
    for (int64_t cur = j->prompt_len; st == BRG_OK; cur++) {
        for (int64_t r = 0; r < R; r++) {
            float *row = logits + r * V;
            gen_log_softmax(row, V);
            gen_process(&proc, row, j->seqs + r * L, cur, j->ignore[r]);
        }
        bool all_hit = true;
        for (int64_t b = 0; b < j->n_prompts; b++) step_prompt(&s, b, cur, logits, &all_hit);
        memcpy(j->seqs, s.next_seqs, (size_t)(R * L) * sizeof(int32_t));
        for (int64_t b = 0; b < j->n_prompts; b++) check_heuristic(&s, b, cur + 1);
        bool improvable = false, all_finished = true;
        for (int64_t b = 0; b < j->n_prompts; b++) improvable = improvable || s.unsatisfied[b];
        for (int64_t i = 0; i < j->n_prompts * s.K; i++) all_finished = all_finished && s.fin.flag[i];
        const bool open = !(all_finished && j->cfg.early_stopping == BRG_EARLY_STOPPING_TRUE);
        if (!(improvable && open && !all_hit)) break;
        st = brg_decoder_reorder(j->dec, s.src);
        if (st == BRG_OK) st = brg_decoder_step(j->dec, s.tokens, 1, NULL, logits);
    }
    if (st == BRG_OK) st = write_output(&s);
    gen_proc_free(&proc);
    state_free(&s);
    return st;
}
