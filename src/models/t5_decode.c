/* T5's decoder for generation: the encoder runs once (the tape forward of the encoder blocks),
 * each decoder layer's cross-attention keys and values of its output are computed once into a
 * cross cache, and every step runs the new decoder positions only, their self-attention keys
 * and values appended to the layer's self cache (the relative position bias taken for the new
 * query rows against every key so far, as transformers slices it with a cache). The arithmetic
 * is the tape forward's (t5.c) op for op. Without a cache (use_cache false) every step runs the
 * whole model, encoder included, through the tape on the decoder sequence so far. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/tape.h"
#include "kernels/gemv.h"
#include "kernels/kernels.h"
#include "models/decoder_internal.h"
#include "models/kv_cache.h"
#include "models/t5_internal.h"

typedef struct t5_dec {
    kv_cache *self, *cross; /* num_decoder_layers blocks each; cross: capacity = encoder length */
} t5_dec;

static const t5_state *state_of(const brg_decoder *d) { return d->m->config; }
static float *P(const brg_decoder *d, int i) { return d->m->params[i].tensor->data; }

static brg_status t5_create(brg_decoder *d) {
    t5_dec *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "cannot allocate the T5 decoder");
    d->state = s;
    if (!d->use_cache) return BRG_OK;
    const brg_t5_config *c = &state_of(d)->cfg;
    return kv_cache_create((int)c->num_decoder_layers, d->rows, c->num_heads, d->cap, c->d_kv, &s->self);
}

static void t5_destroy(brg_decoder *d) {
    t5_dec *s = d->state;
    kv_cache_destroy(s->self);
    kv_cache_destroy(s->cross);
    free(s);
}

static void t5_reset(brg_decoder *d) {
    t5_dec *s = d->state;
    if (s->self) s->self->len = 0;
}

/* Decoder layer l is unit first_decoder_block + l (its self and its cross cache). */
static void release_remote(brg_decoder *d, kv_cache *c) {
    const int fd = brg_t5_first_decoder_block(d->m);
    for (int l = 0; c && l < c->n_blocks; l++)
        if (!dec_unit_is_here(d, fd + l)) kv_cache_release_block(c, l);
}

static void t5_keep_local(brg_decoder *d) { release_remote(d, ((t5_dec *)d->state)->self); }

static brg_status t5_reorder(brg_decoder *d, const int32_t *src) {
    t5_dec *s = d->state;
    BRG_TRY(kv_cache_reorder(s->self, src));
    return s->cross ? kv_cache_reorder(s->cross, src) : BRG_OK;
}

/* The encode's state, handed from stage to stage: the tape holds the encoder's output for the
 * decoder layers' cross keys and values. */
typedef struct enc_pass {
    brg_decoder *d;
    brg_arena *arena;
    brg_tape *tape;
    brg_bundle b;
    float *kv, *tmp;
} enc_pass;

/* Decoder blocks [first, last]: their layers' cross-attention keys and values of the encoder output. */
static brg_status cross_units(enc_pass *e, int first, int last) {
    brg_decoder *d = e->d;
    t5_dec *s = d->state;
    const t5_state *st = state_of(d);
    const brg_t5_config *c = &st->cfg;
    const int64_t Te = d->enc_len, HD = c->num_heads * c->d_kv, N = d->rows * Te;
    const float *enc = brg_bundle_carried(&e->b, "hidden")->data;
    const int fd = brg_t5_first_decoder_block(d->m);
    for (int l = first - fd; l <= last - fd && l < c->num_decoder_layers; l++) {
        const t5_attn_idx *w = &st->layers[c->num_layers + l].cross;
        d->k->linear_fwd(e->tmp, enc, P(d, w->k), NULL, N, c->d_model, HD, false);
        for (int64_t i = 0; i < N; i++) memcpy(e->kv + i * 2 * HD, e->tmp + i * HD, (size_t)HD * sizeof *e->kv);
        d->k->linear_fwd(e->tmp, enc, P(d, w->v), NULL, N, c->d_model, HD, false);
        for (int64_t i = 0; i < N; i++) memcpy(e->kv + i * 2 * HD + HD, e->tmp + i * HD, (size_t)HD * sizeof *e->kv);
        kv_cache_write(s->cross, l, e->kv, Te, 2 * HD, 0, HD);
    }
    return BRG_OK;
}

/* Encoder blocks (through the tape) below the first decoder block, then the decoder blocks'
 * cross keys and values. */
static brg_status encode_units(void *ctx, int first, int last) {
    enc_pass *e = ctx;
    const int fd = brg_t5_first_decoder_block(e->d->m);
    if (first < fd) BRG_TRY(brg_model_forward_blocks(e->d->m, first, last < fd ? last : fd - 1, e->tape, &e->b));
    return last >= fd ? cross_units(e, first > fd ? first : fd, last) : BRG_OK;
}

/* Between stages: the encoder's hidden states, then its output. */
static int encode_carry(void *ctx, brg_named_tensor *items) {
    enc_pass *e = ctx;
    items[0] = (brg_named_tensor){"hidden", brg_bundle_carried(&e->b, "hidden")};
    return 1;
}

static brg_status encode_take(void *ctx, const transport_msg *msg) {
    enc_pass *e = ctx;
    const brg_tensor *x = msg->n == 1 && strcmp(msg->items[0].name, "hidden") == 0 ? msg->items[0].tensor : NULL;
    if (!x || x->dtype != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_FORMAT, "a T5 encoder stage received no hidden states");
    brg_tensor *h;
    BRG_TRY(brg_tensor_new(e->arena, BRG_DTYPE_F32, x->ndim, x->shape, "encoder hidden state", &h));
    memcpy(h->data, x->data, brg_tensor_nbytes(x));
    return brg_bundle_carry(&e->b, "hidden", h);
}

/* The encoder output through the tape, then every decoder layer's cross keys and values, each
 * part on the stage its block is placed on. */
static brg_status t5_encode(brg_decoder *d) {
    t5_dec *s = d->state;
    if (!d->use_cache) return BRG_OK; /* every step runs the encoder again */
    const t5_state *st = state_of(d);
    const brg_t5_config *c = &st->cfg;
    const int64_t R = d->rows, Te = d->enc_len, HD = c->num_heads * c->d_kv, N = R * Te;
    kv_cache_destroy(s->cross);
    s->cross = NULL;
    BRG_TRY(kv_cache_create((int)c->num_decoder_layers, R, c->num_heads, Te, c->d_kv, &s->cross));
    release_remote(d, s->cross);
    brg_arena *arena;
    BRG_TRY(brg_arena_create("generate", 0, &arena));
    enc_pass e = {.d = d, .arena = arena};
    brg_status rc = brg_tape_create(arena, &e.tape);
    e.kv = malloc((size_t)(N * 2 * HD) * sizeof *e.kv);
    e.tmp = malloc((size_t)(N * HD) * sizeof *e.tmp);
    if (rc == BRG_OK && (!e.kv || !e.tmp)) rc = brg_error(BRG_ERR_OOM, "cannot allocate the cross-attention keys");
    if (rc == BRG_OK) {
        brg_tape_set_grad_enabled(e.tape, false);
        int64_t shape[2] = {R, Te};
        brg_tensor in = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, d->enc_ids);
        brg_tensor mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, d->enc_mask);
        rc = brg_tensor_map_put(&e.b.inputs, "input_ids", &in);
        if (rc == BRG_OK) rc = brg_tensor_map_put(&e.b.inputs, "attention_mask", &mask);
        const int fd = brg_t5_first_decoder_block(d->m);
        const dec_units units = {encode_units, &e, encode_carry, encode_take, NULL, 0, d->compute};
        if (rc == BRG_OK) rc = dec_run_units(d, &units, 0, fd + (int)c->num_decoder_layers - 1);
        if (rc == BRG_OK) s->cross->len = Te;
    }
    free(e.kv);
    free(e.tmp);
    brg_tape_destroy(e.tape);
    brg_arena_destroy(arena);
    return rc;
}

/* ---- the cached step ---- */

/* A decode step (one new position per row) multiplies by the weights without packing them. */
static void linear(const brg_decoder *d, float *y, const float *x, const float *w, int64_t N, int64_t in, int64_t out,
                   int64_t n) {
    const uint16_t *half = n == 1 ? dec_half_of(d, w) : NULL;
    if (half) d->k->linear_rows_half_fwd(y, x, half, d->compute, NULL, N, in, out, false);
    else if (n == 1 && d->compute == BRG_DTYPE_F32) d->k->linear_rows_fwd(y, x, w, NULL, N, in, out, false);
    else d->k->linear_fwd(y, x, w, NULL, N, in, out, false); /* rounds its operands in a half compute type */
}

typedef struct work {
    int32_t *ids, *buckets;
    float *x, *h, *q, *k, *v, *kv, *att, *merged, *proj, *ff, *ff2, *rstd, *bias, *last;
} work;

static void work_free(work *w) {
    void *all[] = {w->ids, w->buckets, w->x, w->h, w->q, w->k, w->v, w->kv, w->att, w->merged, w->proj,
                   w->ff, w->ff2, w->rstd, w->bias, w->last};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static brg_status work_alloc(work *w, const brg_t5_config *c, int64_t R, int64_t n, int64_t Tk) {
    const int64_t N = R * n, C = c->d_model, HD = c->num_heads * c->d_kv, F = c->d_ff;
    const size_t f = sizeof(float);
    *w = (work){.ids = malloc((size_t)N * sizeof(int32_t)), .buckets = malloc((size_t)(n * Tk) * sizeof(int32_t)),
                .x = malloc((size_t)(N * C) * f), .h = malloc((size_t)(N * C) * f), .q = malloc((size_t)(N * HD) * f),
                .k = malloc((size_t)(N * HD) * f), .v = malloc((size_t)(N * HD) * f),
                .kv = malloc((size_t)(N * 2 * HD) * f), .att = malloc((size_t)(N * HD) * f),
                .merged = malloc((size_t)(N * HD) * f), .proj = malloc((size_t)(N * C) * f),
                .ff = malloc((size_t)(N * F) * f), .ff2 = malloc((size_t)(N * F) * f), .rstd = malloc((size_t)N * f),
                .bias = malloc((size_t)(c->num_heads * n * Tk) * f), .last = malloc((size_t)(R * C) * f)};
    if (w->ids && w->buckets && w->x && w->h && w->q && w->k && w->v && w->kv && w->att && w->merged && w->proj &&
        w->ff && w->ff2 && w->rstd && w->bias && w->last)
        return BRG_OK;
    work_free(w);
    return brg_error(BRG_ERR_OOM, "cannot allocate the T5 decode buffers");
}

/* x += o(attention(q(rmsnorm(x)), keys/values in `cache` block l)); self-attention first writes
 * the new positions' keys and values. */
static void attention_sublayer(const brg_decoder *d, const t5_attn_idx *w, kv_cache *cache, int l, bool self,
                               const float *bias, const float *key_mask, work *wk, int64_t n) {
    const brg_t5_config *c = &state_of(d)->cfg;
    const int64_t R = d->rows, N = R * n, C = c->d_model, H = c->num_heads, D = c->d_kv, HD = H * D;
    d->k->rmsnorm_fwd(wk->h, wk->rstd, wk->x, P(d, w->ln), N, C, c->layer_norm_epsilon);
    linear(d, wk->q, wk->h, P(d, w->q), N, C, HD, n);
    int64_t Tk = cache->len;
    if (self) {
        linear(d, wk->k, wk->h, P(d, w->k), N, C, HD, n);
        linear(d, wk->v, wk->h, P(d, w->v), N, C, HD, n);
        for (int64_t i = 0; i < N; i++) {
            memcpy(wk->kv + i * 2 * HD, wk->k + i * HD, (size_t)HD * sizeof(float));
            memcpy(wk->kv + i * 2 * HD + HD, wk->v + i * HD, (size_t)HD * sizeof(float));
        }
        kv_cache_write(cache, l, wk->kv, n, 2 * HD, 0, HD);
        Tk += n;
    }
    d->k->split_heads(wk->merged, wk->q, R, n, H, D, HD); /* merged holds the split queries for now */
    const brg_attn_args args = {.B = R, .H = H, .Tq = n, .Tk = Tk, .D = D, .scale = 1.0f, .causal = self,
                                .key_mask = key_mask, .bias = bias, .kv_stride = cache->capacity};
    d->k->attention_fwd(wk->att, NULL, wk->merged, cache->blocks[l].k, cache->blocks[l].v, &args);
    d->k->merge_heads(wk->merged, wk->att, R, n, H, D, HD, false);
    linear(d, wk->proj, wk->merged, P(d, w->o), N, HD, C, n);
    d->k->add_fwd(wk->x, wk->x, wk->proj, N * C);
}

static void activation(const brg_decoder *d, const brg_t5_config *c, float *y, const float *x, int64_t n) {
    switch (c->act) {
    case BRG_T5_ACT_RELU: d->k->relu_fwd(y, x, n); break;
    case BRG_T5_ACT_GELU_ERF: d->k->gelu_fwd(y, x, n, BRG_GELU_ERF); break;
    case BRG_T5_ACT_GELU_TANH: d->k->gelu_fwd(y, x, n, BRG_GELU_TANH); break;
    }
}

/* x += wo(act(wi(n))) or wo(act(wi_0(n)) * wi_1(n)), n = rmsnorm(x). */
static void feed_forward(const brg_decoder *d, const t5_layer_idx *w, work *wk, int64_t N, int64_t n) {
    const brg_t5_config *c = &state_of(d)->cfg;
    const int64_t C = c->d_model, F = c->d_ff;
    d->k->rmsnorm_fwd(wk->h, wk->rstd, wk->x, P(d, w->ff_ln), N, C, c->layer_norm_epsilon);
    if (c->is_gated_act) {
        linear(d, wk->ff, wk->h, P(d, w->wi_0), N, C, F, n);
        activation(d, c, wk->ff2, wk->ff, N * F);
        linear(d, wk->ff, wk->h, P(d, w->wi_1), N, C, F, n);
        d->k->mul_fwd(wk->ff2, wk->ff2, wk->ff, N * F);
    } else {
        linear(d, wk->ff, wk->h, P(d, w->wi), N, C, F, n);
        activation(d, c, wk->ff2, wk->ff, N * F);
    }
    linear(d, wk->proj, wk->ff2, P(d, w->wo), N, F, C, n);
    d->k->add_fwd(wk->x, wk->x, wk->proj, N * C);
}

/* One cached step's state, handed from unit to unit (and stage to stage). */
typedef struct step_pass {
    brg_decoder *d;
    work *w;
    int64_t start, n;
    float *logits;
    brg_tensor views[2]; /* for a stage on another rank */
} step_pass;

/* Between stages: the hidden states and the decoder's position bias (the first block's). */
static int step_carry(void *ctx, brg_named_tensor *items) {
    step_pass *p = ctx;
    const brg_t5_config *c = &state_of(p->d)->cfg;
    int64_t hidden[1] = {p->d->rows * p->n * c->d_model}, bias[1] = {c->num_heads * p->n * (p->start + p->n)};
    p->views[0] = brg_tensor_wrap(BRG_DTYPE_F32, 1, hidden, p->w->x);
    p->views[1] = brg_tensor_wrap(BRG_DTYPE_F32, 1, bias, p->w->bias);
    items[0] = (brg_named_tensor){"hidden", &p->views[0]};
    items[1] = (brg_named_tensor){"position_bias", &p->views[1]};
    return 2;
}

static brg_status step_take(void *ctx, const transport_msg *msg) {
    brg_named_tensor mine[DEC_CARRY_MAX];
    return dec_take_copies(mine, step_carry(ctx, mine), msg);
}

/* The decoder embeddings and the stack's relative position bias for query positions start..
 * against keys 0.. (the first decoder block's). */
static void step_embed(const step_pass *p) {
    const brg_decoder *d = p->d;
    const t5_state *st = state_of(d);
    const brg_t5_config *c = &st->cfg;
    work *w = p->w;
    const int64_t n = p->n, start = p->start, Tk = start + n;
    d->k->embedding_fwd(w->x, w->ids, P(d, st->shared), d->rows * n, c->d_model);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < Tk; j++)
            w->buckets[i * Tk + j] = brg_k_relative_position_bucket(j - (start + i), false,
                                                                    c->relative_attention_num_buckets,
                                                                    c->relative_attention_max_distance);
    d->k->relpos_bias_fwd(w->bias, P(d, st->layers[c->num_layers].rel_bias), w->buckets, c->num_heads, n, Tk);
}

static void step_layer(const step_pass *p, int l) {
    brg_decoder *d = p->d;
    t5_dec *s = d->state;
    const t5_state *st = state_of(d);
    const t5_layer_idx *lw = &st->layers[st->cfg.num_layers + l];
    attention_sublayer(d, &lw->self, s->self, l, true, p->w->bias, NULL, p->w, p->n);
    attention_sublayer(d, &lw->cross, s->cross, l, false, NULL, d->enc_mask, p->w, p->n);
    feed_forward(d, lw, p->w, d->rows * p->n, p->n);
}

/* The final norm and the LM head at each row's last new position. */
static void step_head(const step_pass *p) {
    const brg_decoder *d = p->d;
    const t5_state *st = state_of(d);
    const brg_t5_config *c = &st->cfg;
    work *w = p->w;
    const int64_t R = d->rows, C = c->d_model, n = p->n;
    for (int64_t r = 0; r < R; r++) memcpy(w->last + r * C, w->x + (r * n + n - 1) * C, (size_t)C * sizeof(float));
    d->k->rmsnorm_fwd(w->h, w->rstd, w->last, P(d, st->dec_final_ln), R, C, c->layer_norm_epsilon);
    const float *x = w->h;
    if (c->scale_decoder_outputs) {
        d->k->scale(w->last, w->h, (float)(1.0 / sqrt((double)c->d_model)), R * C);
        x = w->last;
    }
    linear(d, p->logits, x, P(d, st->lm_head), R, C, d->vocab, 1);
}

/* Units as the model's blocks: the first decoder block also embeds, the last block is the head. */
static brg_status step_units(void *ctx, int first, int last) {
    const step_pass *p = ctx;
    const int fd = brg_t5_first_decoder_block(p->d->m), L = (int)state_of(p->d)->cfg.num_decoder_layers;
    for (int u = first; u <= last; u++) {
        if (u == fd) step_embed(p);
        if (u - fd < L) step_layer(p, u - fd);
        else step_head(p);
    }
    return BRG_OK;
}

static brg_status cached_forward(brg_decoder *d, int64_t start, int64_t n, float *logits) {
    t5_dec *s = d->state;
    const t5_state *st = state_of(d);
    const brg_t5_config *c = &st->cfg;
    BRG_ASSERT(s->self->len == start && s->cross);
    work w;
    BRG_TRY(work_alloc(&w, c, d->rows, n, start + n));
    dec_gather_ids(d, start, n, w.ids, false);
    step_pass p = {d, &w, start, n, logits, {{0}}};
    const dec_units units = {step_units, &p, step_carry, step_take, logits, d->rows * d->vocab, d->compute};
    const int fd = brg_t5_first_decoder_block(d->m);
    const brg_status rc = dec_run_units(d, &units, fd, fd + (int)c->num_decoder_layers);
    /* every layer has appended its keys (on every rank, whichever layers it holds): the cache
     * holds this step's positions */
    if (rc == BRG_OK) s->self->len += n;
    work_free(&w);
    return rc;
}

/* ---- without a cache: the whole model through the tape ---- */

static brg_status tape_forward(brg_decoder *d, int64_t T, float *logits) {
    const int64_t R = d->rows, V = d->vocab;
    brg_arena *arena;
    BRG_TRY(brg_arena_create("generate", 0, &arena));
    brg_tape *tape = NULL;
    brg_status st = brg_tape_create(arena, &tape);
    int32_t *dec = malloc((size_t)(R * T) * sizeof *dec);
    if (st == BRG_OK && !dec) st = brg_error(BRG_ERR_OOM, "cannot allocate the decoder inputs");
    if (st == BRG_OK) {
        brg_tape_set_grad_enabled(tape, false);
        dec_gather_ids(d, 0, T, dec, false);
        int64_t es[2] = {R, d->enc_len}, ds[2] = {R, T};
        brg_tensor in = brg_tensor_wrap(BRG_DTYPE_I32, 2, es, d->enc_ids);
        brg_tensor mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, es, d->enc_mask);
        brg_tensor din = brg_tensor_wrap(BRG_DTYPE_I32, 2, ds, dec);
        brg_bundle b = {0};
        st = brg_tensor_map_put(&b.inputs, "input_ids", &in);
        if (st == BRG_OK) st = brg_tensor_map_put(&b.inputs, "attention_mask", &mask);
        if (st == BRG_OK) st = brg_tensor_map_put(&b.inputs, "decoder_input_ids", &din);
        if (st == BRG_OK) st = brg_model_forward(d->m, tape, &b);
        if (st == BRG_OK) {
            const float *lg = b.logits->data;
            for (int64_t r = 0; r < R; r++) memcpy(logits + r * V, lg + (r * T + T - 1) * V, (size_t)V * sizeof(float));
        }
    }
    free(dec);
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    return st;
}

typedef struct whole_pass {
    brg_decoder *d;
    int64_t T;
    float *logits;
} whole_pass;

static brg_status whole_unit(void *ctx, int first, int last) {
    (void)first, (void)last;
    whole_pass *p = ctx;
    return tape_forward(p->d, p->T, p->logits);
}

/* Without a cache the whole model runs through the tape on the first block's stage. */
static brg_status t5_forward(brg_decoder *d, int64_t start, int64_t n, float *logits) {
    if (d->use_cache) return cached_forward(d, start, n, logits);
    whole_pass p = {d, start + n, logits};
    const dec_units units = {whole_unit, &p, NULL, NULL, logits, d->rows * d->vocab, d->compute};
    return dec_run_units(d, &units, 0, 0);
}

const dec_arch t5_dec_arch = {
    .create = t5_create,
    .destroy = t5_destroy,
    .encode = t5_encode,
    .forward = t5_forward,
    .reset = t5_reset,
    .reorder = t5_reorder,
    .keep_local = t5_keep_local,
};
