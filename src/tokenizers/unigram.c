/* The Unigram model (T5, ALBERT, XLNet via SentencePiece): the best-scoring segmentation by
 * Viterbi over the vocabulary pieces, `tokenizers`' "optimized" variant: candidates reach each
 * position in start order and only a strictly better score replaces one; chars no piece of
 * one char covers get unk_score = min_score - 10, and adjacent unknowns are fused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

struct tk_unigram {
    tk_vocab vocab;
    char **pieces;
    double *scores;
    size_t n;
    int32_t unk_id; /* -1 when null */
    bool byte_fallback;
    double min_score;
    size_t max_piece_chars;
};

void tk_unigram_free(tk_unigram *u) {
    if (!u) return;
    tk_vocab_free(&u->vocab);
    for (size_t i = 0; i < u->n; i++) free(u->pieces[i]);
    free(u->pieces);
    free(u->scores);
    free(u);
}

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static brg_status parse_into(const cJSON *j, tk_unigram *u) {
    const char *ctx = "Unigram model";
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(j, "vocab");
    if (!cJSON_IsArray(vocab)) return brg_error(BRG_ERR_FORMAT, "%s: 'vocab' must be a list of [piece, score]", ctx);
    int64_t unk;
    BRG_TRY(brg_json_get_int(j, ctx, "unk_id", false, -1, &unk));
    BRG_TRY(brg_json_get_bool(j, ctx, "byte_fallback", false, false, &u->byte_fallback));
    size_t n = (size_t)cJSON_GetArraySize(vocab);
    if (unk >= 0 && (size_t)unk >= n)
        return brg_error(BRG_ERR_FORMAT, "%s: unk_id %lld is out of range for %zu pieces", ctx, (long long)unk, n);
    if (n == 0 && unk >= 0) return brg_error(BRG_ERR_FORMAT, "%s: empty vocabulary with an unk_id", ctx);
    u->unk_id = (int32_t)unk;
    u->pieces = calloc(n + 1, sizeof *u->pieces);
    u->scores = calloc(n + 1, sizeof *u->scores);
    if (!u->pieces || !u->scores) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    u->min_score = INFINITY;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const cJSON *p = cJSON_IsArray(e) ? e->child : NULL, *s = p ? p->next : NULL;
        if (!cJSON_IsString(p) || !cJSON_IsNumber(s) || s->next)
            return brg_error(BRG_ERR_FORMAT, "%s: vocab entry %zu must be [piece, score]", ctx, u->n);
        if (!(u->pieces[u->n] = strdup(p->valuestring))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        u->scores[u->n] = s->valuedouble;
        if (s->valuedouble < u->min_score) u->min_score = s->valuedouble;
        size_t chars = utf8_chars(p->valuestring);
        if (chars > u->max_piece_chars) u->max_piece_chars = chars;
        BRG_TRY(tk_vocab_put(&u->vocab, p->valuestring, strlen(p->valuestring), (int32_t)u->n));
        u->n++;
    }
    return BRG_OK;
}

brg_status tk_unigram_parse(const cJSON *j, tk_unigram **out) {
    tk_unigram *u = calloc(1, sizeof *u);
    if (!u) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    brg_status st = parse_into(j, u);
    if (st != BRG_OK) {
        tk_unigram_free(u);
        return st;
    }
    *out = u;
    return BRG_OK;
}

typedef struct node {
    double score;
    long start; /* -1: not reached */
    int32_t id;
} node;

/* Viterbi over char positions; best[i] = best path ending at char i. */
static brg_status viterbi(const tk_unigram *u, const tk_str *w, const char *text, const size_t *pos, node *best) {
    double unk_score = u->min_score - 10.0;
    for (size_t i = 0; i <= w->n; i++) best[i] = (node){0, -1, 0};
    for (size_t p = 0; p < w->n; p++) {
        double base = best[p].score;
        bool single = false;
        size_t last = p + u->max_piece_chars < w->n ? p + u->max_piece_chars : w->n;
        for (size_t e = p + 1; e <= last; e++) {
            int32_t id = tk_vocab_get(&u->vocab, text + pos[p], pos[e] - pos[p]);
            if (id < 0) continue;
            double cand = base + u->scores[id];
            if (best[e].start < 0 || cand > best[e].score) best[e] = (node){cand, (long)p, id};
            if (e == p + 1) single = true;
        }
        if (!single) {
            if (u->unk_id < 0)
                return brg_error(BRG_ERR_FORMAT, "Unigram: text needs an unknown token but unk_id is null");
            double cand = base + unk_score;
            if (best[p + 1].start < 0 || cand > best[p + 1].score) best[p + 1] = (node){cand, (long)p, u->unk_id};
        }
    }
    return BRG_OK;
}

static brg_status emit(const tk_unigram *u, const char *text, const size_t *pos, size_t s, size_t e, tk_tokens *out) {
    const char *piece = text + pos[s];
    size_t len = pos[e] - pos[s];
    int32_t id = tk_vocab_get(&u->vocab, piece, len);
    if (id < 0 && u->byte_fallback) {
        int32_t ids[64];
        bool all = len <= 64;
        for (size_t j = 0; j < len && all; j++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)piece[j]);
            all = (ids[j] = tk_vocab_get(&u->vocab, hex, strlen(hex))) >= 0;
        }
        if (all) {
            for (size_t j = 0; j < len; j++) {
                char hex[8];
                snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)piece[j]);
                BRG_TRY(tk_tokens_push(out, ids[j], hex, strlen(hex), s, e));
            }
            return BRG_OK;
        }
    }
    return tk_tokens_push(out, id >= 0 ? id : u->unk_id, piece, len, s, e);
}

brg_status tk_unigram_tokenize(const tk_unigram *u, const tk_str *w, tk_tokens *out) {
    if (w->n == 0) return BRG_OK;
    size_t *pos;
    char *text = tk_str_utf8(w, 0, w->n, &pos);
    node *best = text ? malloc((w->n + 1) * sizeof *best) : NULL;
    size_t *cuts = best ? malloc((w->n + 1) * sizeof *cuts) : NULL;
    if (!cuts) {
        free(text);
        free(text ? pos : NULL);
        free(best);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (Unigram)");
    }
    brg_status st = viterbi(u, w, text, pos, best);
    size_t k = 0;
    /* Backtrack, fusing runs of unknown pieces into one. */
    for (size_t e = w->n; st == BRG_OK && e > 0;) {
        size_t s = (size_t)best[e].start;
        bool unk = best[e].id == u->unk_id;
        while (unk && s > 0 && best[s].id == u->unk_id) s = (size_t)best[s].start;
        cuts[k++] = e;
        e = s;
    }
    cuts[k] = 0;
    for (size_t i = k; st == BRG_OK && i > 0; i--) st = emit(u, text, pos, cuts[i], cuts[i - 1], out);
    free(text);
    free(pos);
    free(best);
    free(cuts);
    return st;
}

const tk_vocab *tk_unigram_vocab(const tk_unigram *u) { return &u->vocab; }

const char *const *tk_unigram_rev(const tk_unigram *u, size_t *n) {
    *n = u->n;
    return (const char *const *)u->pieces;
}
