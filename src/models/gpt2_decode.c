/* GPT-2's incremental forward for generation: the new positions only, through the kernels
 * directly (no tape), each layer's keys and values kept in its own KV cache block. The
 * arithmetic is the tape forward's (gpt2.c) op for op, so a step gives the logits a full
 * forward of the sequence gives, and position ids come from the decoder (transformers'
 * cumsum of the attention mask) instead of 0..T-1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemv.h"
#include "kernels/kernels.h"
#include "models/decoder_internal.h"
#include "models/gpt2_internal.h"
#include "models/kv_cache.h"

static const brg_gpt2_config *cfg_of(const brg_decoder *d) { return d->m->config; }
static float *P(const brg_decoder *d, int i) { return d->m->params[i].tensor->data; }
static float *LP(const brg_decoder *d, int layer, int which) { return P(d, 2 + layer * PER_LAYER + which); }

/* A decode step (one new position per row) multiplies by the weights without packing them; the
 * prefill's many rows go through the GEMM. */
static void linear(const brg_decoder *d, float *y, const float *x, const float *w, const float *b, int64_t N,
                   int64_t in, int64_t out, bool w_in_out, int64_t n) {
    const uint16_t *half = n == 1 ? dec_half_of(d, w) : NULL;
    if (half) d->k->linear_rows_half_fwd(y, x, half, d->compute, b, N, in, out, w_in_out);
    else if (n == 1 && d->compute == BRG_DTYPE_F32) d->k->linear_rows_fwd(y, x, w, b, N, in, out, w_in_out);
    else d->k->linear_fwd(y, x, w, b, N, in, out, w_in_out); /* rounds its operands in a half compute type */
}

static brg_status gpt2_create(brg_decoder *d) {
    const brg_gpt2_config *c = cfg_of(d);
    if (c->task != BRG_GPT2_LM_HEAD) return brg_error(BRG_ERR_UNSUPPORTED, "generation needs GPT2LMHeadModel");
    kv_cache *cache;
    BRG_TRY(kv_cache_create((int)c->n_layer, d->rows, c->n_head, d->cap, c->n_embd / c->n_head, &cache));
    d->state = cache;
    return BRG_OK;
}

static void gpt2_destroy(brg_decoder *d) { kv_cache_destroy(d->state); }
static void gpt2_reset(brg_decoder *d) { ((kv_cache *)d->state)->len = 0; }
/* Layer l is unit l + 1. */
static void gpt2_keep_local(brg_decoder *d) {
    kv_cache *cache = d->state;
    for (int l = 0; l < cache->n_blocks; l++)
        if (!dec_unit_is_here(d, l + 1)) kv_cache_release_block(cache, l);
}

static brg_status gpt2_reorder(brg_decoder *d, const int32_t *src) { return kv_cache_reorder(d->state, src); }

/* The buffers of one forward over N = rows * n tokens. */
typedef struct work {
    int32_t *ids, *pos;
    float *x, *h, *wide, *act, *q, *att, *merged, *proj, *mean, *rstd, *mask, *last;
} work;

static void work_free(work *w) {
    free(w->ids);
    free(w->pos);
    free(w->x);
    free(w->h);
    free(w->wide);
    free(w->act);
    free(w->q);
    free(w->att);
    free(w->merged);
    free(w->proj);
    free(w->mean);
    free(w->rstd);
    free(w->mask);
    free(w->last);
}

static brg_status work_alloc(work *w, int64_t rows, int64_t N, int64_t C, int64_t I, int64_t Tk) {
    const size_t nc = (size_t)(N * C) * sizeof(float), wide = (size_t)(N * (I > 3 * C ? I : 3 * C)) * sizeof(float);
    *w = (work){.ids = malloc((size_t)N * sizeof(int32_t)),
                .pos = malloc((size_t)N * sizeof(int32_t)),
                .x = malloc(nc),
                .h = malloc(nc),
                .wide = malloc(wide),
                .act = malloc((size_t)(N * I) * sizeof(float)),
                .q = malloc(nc),
                .att = malloc(nc),
                .merged = malloc(nc),
                .proj = malloc(nc),
                .mean = malloc((size_t)N * sizeof(float)),
                .rstd = malloc((size_t)N * sizeof(float)),
                .mask = malloc((size_t)(rows * Tk) * sizeof(float)),
                .last = malloc((size_t)(rows * C) * sizeof(float))};
    if (w->ids && w->pos && w->x && w->h && w->wide && w->act && w->q && w->att && w->merged && w->proj && w->mean &&
        w->rstd && w->mask && w->last)
        return BRG_OK;
    work_free(w);
    return brg_error(BRG_ERR_OOM, "cannot allocate the decode buffers for %lld tokens", (long long)N);
}

/* x += attention of layer l over the cache (the new positions' keys and values added to it). */
static void attention(const brg_decoder *d, kv_cache *cache, int l, work *w, int64_t n) {
    const brg_gpt2_config *c = cfg_of(d);
    const int64_t R = d->rows, N = R * n, C = c->n_embd, H = c->n_head, D = C / H;
    d->k->layernorm_fwd(w->h, w->mean, w->rstd, w->x, LP(d, l, L_LN1_W), LP(d, l, L_LN1_B), N, C,
                        c->layer_norm_epsilon);
    linear(d, w->wide, w->h, LP(d, l, L_ATTN_W), LP(d, l, L_ATTN_B), N, C, 3 * C, true, n);
    kv_cache_write(cache, l, w->wide, n, 3 * C, C, 2 * C);
    d->k->split_heads(w->q, w->wide, R, n, H, D, 3 * C);
    float scale = c->scale_attn_weights ? 1.0f / sqrtf((float)D) : 1.0f;
    if (c->scale_attn_by_inverse_layer_idx) scale /= (float)(l + 1);
    const brg_attn_args args = {.B = R, .H = H, .Tq = n, .Tk = cache->len + n, .D = D, .scale = scale,
                                .causal = true, .key_mask = w->mask, .kv_stride = cache->capacity};
    d->k->attention_fwd(w->att, NULL, w->q, cache->blocks[l].k, cache->blocks[l].v, &args);
    d->k->merge_heads(w->merged, w->att, R, n, H, D, C, false);
    linear(d, w->proj, w->merged, LP(d, l, L_APROJ_W), LP(d, l, L_APROJ_B), N, C, C, true, n);
    d->k->add_fwd(w->x, w->x, w->proj, N * C);
}

/* x += MLP of layer l. */
static void mlp(const brg_decoder *d, int l, work *w, int64_t N, int64_t n) {
    const brg_gpt2_config *c = cfg_of(d);
    const int64_t C = c->n_embd, I = c->n_inner ? c->n_inner : 4 * C;
    const brg_gelu_kind kind = c->activation == BRG_ACT_GELU_TANH ? BRG_GELU_TANH : BRG_GELU_ERF;
    d->k->layernorm_fwd(w->h, w->mean, w->rstd, w->x, LP(d, l, L_LN2_W), LP(d, l, L_LN2_B), N, C,
                        c->layer_norm_epsilon);
    linear(d, w->wide, w->h, LP(d, l, L_FC_W), NULL, N, C, I, true, n);
    d->k->bias_gelu_fwd(w->wide, w->act, LP(d, l, L_FC_B), N, I, kind);
    linear(d, w->proj, w->act, LP(d, l, L_MPROJ_W), LP(d, l, L_MPROJ_B), N, I, C, true, n);
    d->k->add_fwd(w->x, w->x, w->proj, N * C);
}

/* One forward's state, handed from unit to unit (and stage to stage). */
typedef struct fwd {
    brg_decoder *d;
    work *w;
    int64_t n;
    float *logits;
    brg_tensor hidden; /* w->x, for a stage on another rank */
} fwd;

/* Between stages: the hidden states [rows * n, n_embd]. */
static int carry(void *ctx, brg_named_tensor *items) {
    fwd *f = ctx;
    int64_t shape[1] = {f->d->rows * f->n * cfg_of(f->d)->n_embd};
    f->hidden = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, f->w->x);
    items[0] = (brg_named_tensor){"hidden", &f->hidden};
    return 1;
}

static brg_status take(void *ctx, const transport_msg *msg) {
    brg_named_tensor mine[DEC_CARRY_MAX];
    return dec_take_copies(mine, carry(ctx, mine), msg);
}

static void embed(const fwd *f) {
    const brg_decoder *d = f->d;
    const int64_t N = d->rows * f->n, C = cfg_of(d)->n_embd;
    d->k->embedding_fwd(f->w->x, f->w->ids, P(d, P_WTE), N, C);
    d->k->embedding_fwd(f->w->h, f->w->pos, P(d, P_WPE), N, C);
    d->k->add_fwd(f->w->x, f->w->x, f->w->h, N * C);
}

/* ln_f and the LM head at each row's last new position only. */
static void head(const fwd *f) {
    const brg_decoder *d = f->d;
    const brg_gpt2_config *c = cfg_of(d);
    const int64_t R = d->rows, n = f->n, C = c->n_embd, V = c->vocab_size;
    work *w = f->w;
    for (int64_t r = 0; r < R; r++) memcpy(w->last + r * C, w->x + (r * n + n - 1) * C, (size_t)C * sizeof(float));
    const int ln_f = 2 + (int)c->n_layer * PER_LAYER;
    d->k->layernorm_fwd(w->h, w->mean, w->rstd, w->last, P(d, ln_f), P(d, ln_f + 1), R, C, c->layer_norm_epsilon);
    const float *lm = c->tie_word_embeddings ? P(d, P_WTE) : P(d, ln_f + 2);
    linear(d, f->logits, w->h, lm, NULL, R, C, V, false, 1); /* one position per row: the same for every batch */
}

/* Units as the model's blocks: 0 the embeddings, 1..n_layer the layers, n_layer + 1 the head. */
static brg_status run_units(void *ctx, int first, int last) {
    const fwd *f = ctx;
    const int L = (int)cfg_of(f->d)->n_layer;
    for (int u = first; u <= last; u++) {
        if (u == 0) embed(f);
        else if (u <= L) {
            attention(f->d, f->d->state, u - 1, f->w, f->n);
            mlp(f->d, u - 1, f->w, f->d->rows * f->n, f->n);
        } else head(f);
    }
    return BRG_OK;
}

static brg_status gpt2_forward(brg_decoder *d, int64_t start, int64_t n, float *logits) {
    const brg_gpt2_config *c = cfg_of(d);
    kv_cache *cache = d->state;
    BRG_ASSERT(cache->len == start);
    const int64_t R = d->rows, N = R * n, C = c->n_embd;
    const int64_t I = c->n_inner ? c->n_inner : 4 * C;
    work w;
    BRG_TRY(work_alloc(&w, R, N, C, I, start + n));
    dec_gather_ids(d, start, n, w.ids, false);
    dec_gather_ids(d, start, n, w.pos, true);
    dec_gather_mask(d, 0, start + n, w.mask);
    for (int64_t i = 0; i < N; i++)
        if (w.pos[i] >= c->n_positions) {
            const int pos = w.pos[i];
            work_free(&w);
            return brg_error(BRG_ERR_INVALID_ARG, "position %d is past the model's n_positions %lld", pos,
                             (long long)c->n_positions);
        }
    fwd f = {d, &w, n, logits, {0}};
    const dec_units units = {run_units, &f, carry, take, logits, R * c->vocab_size, d->compute};
    const brg_status st = dec_run_units(d, &units, 0, (int)c->n_layer + 1);
    /* The layers read the cache's length as the positions before this step: it advances once
     * every layer has written its keys (on every rank, whichever layers it holds). */
    if (st == BRG_OK) cache->len += n;
    work_free(&w);
    return st;
}

const dec_arch gpt2_dec_arch = {
    .create = gpt2_create,
    .destroy = gpt2_destroy,
    .encode = NULL,
    .forward = gpt2_forward,
    .reset = gpt2_reset,
    .reorder = gpt2_reorder,
    .keep_local = gpt2_keep_local,
};
