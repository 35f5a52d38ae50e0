/* brg_decoder: the history of the rows being decoded, their positions, and the step that hands
 * the new positions to the architecture's cached forward (or, without a cache, the whole
 * history). */
#include <stdlib.h>
#include <string.h>

#include "brigade/precision.h"
#include "brigade/trace.h"
#include "kernels/half.h"
#include "models/decode_ranks.h"
#include "models/decoder_internal.h"

static const dec_arch *arch_of(const brg_model *m) {
    const char *a = m && m->ops ? m->ops->architecture : NULL;
    if (!a) return NULL;
    if (strcmp(a, "GPT2LMHeadModel") == 0) return &gpt2_dec_arch;
    if (strcmp(a, "T5ForConditionalGeneration") == 0) return &t5_dec_arch;
    return NULL;
}

bool brg_decoder_supported(const brg_model *model) { return arch_of(model) != NULL; }

brg_status brg_decoder_create(brg_model *model, int64_t rows, int64_t capacity, bool use_cache, brg_decoder **out) {
    const dec_arch *arch = arch_of(model);
    if (!arch)
        return brg_error(BRG_ERR_UNSUPPORTED, "generation needs GPT2LMHeadModel or T5ForConditionalGeneration, not %s",
                         model && model->ops ? model->ops->architecture : "this model");
    if (rows < 1 || capacity < 1 || rows > (1 << 20) || capacity > (1 << 24))
        return brg_error(BRG_ERR_INVALID_ARG, "decoder of %lld rows and %lld positions", (long long)rows,
                         (long long)capacity);
    brg_decoder *d = calloc(1, sizeof *d);
    if (!d) return brg_error(BRG_ERR_OOM, "cannot allocate a decoder");
    *d = (brg_decoder){.m = model, .k = brg_backend_cpu()->f32, .arch = arch, .rows = rows, .cap = capacity,
                       .vocab = model->vocab_size, .use_cache = use_cache};
    const size_t n = (size_t)(rows * capacity);
    d->ids = calloc(n, sizeof *d->ids);
    d->mask = calloc(n, sizeof *d->mask);
    d->pos = calloc(n, sizeof *d->pos);
    d->seen = calloc((size_t)rows, sizeof *d->seen);
    brg_status st = d->ids && d->mask && d->pos && d->seen
                        ? arch->create(d)
                        : brg_error(BRG_ERR_OOM, "cannot allocate a decoder's history");
    if (st != BRG_OK) {
        brg_decoder_destroy(d);
        return st;
    }
    *out = d;
    return BRG_OK;
}

void brg_decoder_destroy(brg_decoder *d) {
    if (!d) return;
    if (d->state) d->arch->destroy(d);
    free(d->ids);
    free(d->mask);
    free(d->pos);
    free(d->seen);
    free(d->enc_ids);
    free(d->enc_mask);
    dec_half_set_destroy(d->own_half);
    free(d);
}

void dec_half_set_destroy(dec_half_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->w[i].bits);
    free(s->w);
    free(s);
}

brg_status dec_half_set_create(const brg_model *m, brg_dtype type, dec_half_set **out) {
    *out = NULL;
    BRG_TRY(brg_compute_dtype_check(type));
    if (type == BRG_DTYPE_F32) return BRG_OK;
    dec_half_set *s = calloc(1, sizeof *s);
    if (s) s->w = calloc((size_t)m->n_params, sizeof *s->w);
    if (!s || !s->w) {
        free(s);
        return brg_error(BRG_ERR_OOM, "cannot list the decoder's half weights");
    }
    s->type = type;
    for (int p = 0; p < m->n_params; p++) {
        const brg_tensor *t = m->params[p].tensor;
        if (t->ndim != 2 || t->dtype != BRG_DTYPE_F32) continue;
        const int64_t n = brg_tensor_numel(t);
        uint16_t *bits = malloc((size_t)n * sizeof *bits);
        if (!bits) {
            dec_half_set_destroy(s);
            return brg_error(BRG_ERR_OOM, "cannot store %s in %s", m->params[p].name, brg_dtype_name(type));
        }
        if (type == BRG_DTYPE_BF16) brg_f32_to_bf16_row(bits, t->data, n);
        else brg_f32_to_f16_row(bits, t->data, n);
        s->w[s->n++] = (dec_half_weight){t->data, bits};
    }
    *out = s;
    return BRG_OK;
}

const uint16_t *dec_half_of(const brg_decoder *d, const float *w) {
    for (int i = 0; d->half && i < d->half->n; i++)
        if (d->half->w[i].src == w) return d->half->w[i].bits;
    return NULL;
}

void dec_use_half(brg_decoder *d, const dec_half_set *s) {
    d->half = s;
    d->compute = s ? s->type : BRG_DTYPE_F32;
}

brg_status brg_decoder_set_compute_dtype(brg_decoder *d, brg_dtype type) {
    BRG_TRY(brg_compute_dtype_check(type));
    if (d->len > 0 || d->enc_ids)
        return brg_error(BRG_ERR_INVALID_ARG, "a decoder's compute type is set before its first step");
    dec_half_set *s;
    BRG_TRY(dec_half_set_create(d->m, type, &s));
    dec_half_set_destroy(d->own_half);
    d->own_half = s;
    dec_use_half(d, s);
    return BRG_OK;
}

int64_t brg_decoder_length(const brg_decoder *d) { return d->len; }
int64_t brg_decoder_rows(const brg_decoder *d) { return d->rows; }
int64_t brg_decoder_vocab(const brg_decoder *d) { return d->vocab; }

brg_status brg_decoder_encode(brg_decoder *d, const int32_t *input_ids, int64_t n, const float *mask) {
    if (!d->arch->encode) return brg_error(BRG_ERR_INVALID_ARG, "%s has no encoder", d->m->ops->architecture);
    if (d->len > 0) return brg_error(BRG_ERR_INVALID_ARG, "the encoder runs before the first decoder step");
    if (n < 1 || n > d->m->max_positions * 64)
        return brg_error(BRG_ERR_INVALID_ARG, "encoder input of %lld tokens", (long long)n);
    free(d->enc_ids);
    free(d->enc_mask);
    d->enc_ids = malloc((size_t)(d->rows * n) * sizeof *d->enc_ids);
    d->enc_mask = malloc((size_t)(d->rows * n) * sizeof *d->enc_mask);
    if (!d->enc_ids || !d->enc_mask) return brg_error(BRG_ERR_OOM, "cannot allocate the encoder input");
    for (int64_t i = 0; i < d->rows * n; i++) {
        if (input_ids[i] < 0 || input_ids[i] >= d->vocab)
            return brg_error(BRG_ERR_INVALID_ARG, "encoder token %d is outside the vocabulary [0, %lld)",
                             (int)input_ids[i], (long long)d->vocab);
        d->enc_ids[i] = input_ids[i];
        d->enc_mask[i] = mask ? mask[i] : 1.0f;
    }
    d->enc_len = n;
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    const brg_dtype prev = brg_compute_dtype_set(d->compute);
    brg_status st = d->arch->encode(d);
    brg_compute_dtype_set(prev);
    if (t0) brg_trace_named("encode", t0, -1);
    return st;
}

/* Runs units on this thread with the products in the decoder's type. */
static brg_status run_in_type(const dec_units *u, int first, int last) {
    const brg_dtype prev = brg_compute_dtype_set(u->compute);
    brg_status st = u->fn(u->ctx, first, last);
    brg_compute_dtype_set(prev);
    return st;
}

brg_status dec_unit_job_run(void *p) {
    const dec_unit_job *j = p;
    return run_in_type(j->u, j->first, j->last);
}

brg_status dec_run_units(const brg_decoder *d, const dec_units *u, int first, int last) {
    if (!d->route.stages) return run_in_type(u, first, last);
    if (d->route.ranks) return decode_ranks_run_units(&d->route, u, first, last);
    const int *stage = d->route.unit_stage;
    for (int a = first; a <= last;) {
        int b = a;
        while (b + 1 <= last && stage[b + 1] == stage[a]) b++;
        dec_unit_job j = {u, a, b};
        BRG_TRY(decode_stages_run(d->route.stages, stage[a], dec_unit_job_run, &j));
        a = b + 1;
    }
    return BRG_OK;
}

bool dec_unit_is_here(const brg_decoder *d, int unit) {
    const decode_route *r = &d->route;
    if (!r->stages || !r->ranks) return true;
    return decode_ranks_is_local(r->ranks, decode_ranks_device(r->ranks, r->replica, r->unit_stage[unit]));
}

void dec_route(brg_decoder *d, const decode_route *route) {
    d->route = *route;
    if (d->arch->keep_local) d->arch->keep_local(d);
}

void dec_gather_ids(const brg_decoder *d, int64_t start, int64_t n, int32_t *dst, bool positions) {
    const int32_t *src = positions ? d->pos : d->ids;
    for (int64_t r = 0; r < d->rows; r++) memcpy(dst + r * n, src + r * d->cap + start, (size_t)n * sizeof *dst);
}

void dec_gather_mask(const brg_decoder *d, int64_t start, int64_t n, float *dst) {
    for (int64_t r = 0; r < d->rows; r++) memcpy(dst + r * n, d->mask + r * d->cap + start, (size_t)n * sizeof *dst);
}

brg_status brg_decoder_step(brg_decoder *d, const int32_t *ids, int64_t n, const float *mask, float *logits) {
    if (n < 1) return brg_error(BRG_ERR_INVALID_ARG, "a decoder step needs at least one token");
    if (d->len + n > d->cap)
        return brg_error(BRG_ERR_INVALID_ARG, "%lld positions past the decoder's capacity of %lld",
                         (long long)(d->len + n - d->cap), (long long)d->cap);
    if (d->arch->encode && !d->enc_ids)
        return brg_error(BRG_ERR_INVALID_ARG, "the encoder has not run (brg_decoder_encode)");
    for (int64_t r = 0; r < d->rows; r++)
        for (int64_t t = 0; t < n; t++) {
            const int32_t id = ids[r * n + t];
            if (id < 0 || id >= d->vocab)
                return brg_error(BRG_ERR_INVALID_ARG, "token %d is outside the vocabulary [0, %lld)", (int)id,
                                 (long long)d->vocab);
        }
    for (int64_t r = 0; r < d->rows; r++) {
        int64_t seen = d->seen[r];
        for (int64_t t = 0; t < n; t++) {
            const int64_t at = r * d->cap + d->len + t;
            const float mk = mask ? mask[r * n + t] : 1.0f;
            d->ids[at] = ids[r * n + t];
            d->mask[at] = mk;
            /* transformers: cumsum(attention_mask) - 1, padding at 0. */
            d->pos[at] = mk != 0.0f ? (int32_t)seen : 0;
            if (mk != 0.0f) seen++;
        }
        d->seen[r] = seen;
    }
    brg_status st;
    /* On the trace: the prompt's step, then one per new position (its index). */
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    const brg_dtype prev = brg_compute_dtype_set(d->compute); /* for what runs here, outside the units */
    if (d->use_cache) {
        st = d->arch->forward(d, d->len, n, logits);
    } else {
        d->arch->reset(d);
        st = d->arch->forward(d, 0, d->len + n, logits);
    }
    brg_compute_dtype_set(prev);
    if (t0) brg_trace_named(d->len == 0 ? "prefill" : "decode step", t0, d->len == 0 ? -1 : d->len);
    if (st != BRG_OK) {
        for (int64_t r = 0; r < d->rows; r++) /* the step did not happen */
            for (int64_t t = 0; t < n; t++)
                if (d->mask[r * d->cap + d->len + t] != 0.0f) d->seen[r]--;
        return st;
    }
    d->len += n;
    return BRG_OK;
}

/* dst row r = src row idx[r] over the first len columns, through a copy. */
static brg_status gather_history(void *base, size_t elem, int64_t rows, int64_t cap, int64_t len, const int32_t *idx) {
    char *b = base, *copy = malloc((size_t)(rows * len) * elem + 1);
    if (!copy) return brg_error(BRG_ERR_OOM, "cannot reorder the decoder's rows");
    for (int64_t r = 0; r < rows; r++)
        memcpy(copy + (size_t)(r * len) * elem, b + (size_t)(r * cap) * elem, (size_t)len * elem);
    for (int64_t r = 0; r < rows; r++)
        memcpy(b + (size_t)(r * cap) * elem, copy + (size_t)(idx[r] * len) * elem, (size_t)len * elem);
    free(copy);
    return BRG_OK;
}

brg_status brg_decoder_reorder(brg_decoder *d, const int32_t *src) {
    for (int64_t r = 0; r < d->rows; r++)
        if (src[r] < 0 || src[r] >= d->rows)
            return brg_error(BRG_ERR_INVALID_ARG, "reorder: row %d outside [0, %lld)", (int)src[r], (long long)d->rows);
    BRG_TRY(gather_history(d->ids, sizeof *d->ids, d->rows, d->cap, d->len, src));
    BRG_TRY(gather_history(d->mask, sizeof *d->mask, d->rows, d->cap, d->len, src));
    BRG_TRY(gather_history(d->pos, sizeof *d->pos, d->rows, d->cap, d->len, src));
    BRG_TRY(gather_history(d->seen, sizeof *d->seen, d->rows, 1, 1, src));
    if (d->enc_ids) {
        BRG_TRY(gather_history(d->enc_ids, sizeof *d->enc_ids, d->rows, d->enc_len, d->enc_len, src));
        BRG_TRY(gather_history(d->enc_mask, sizeof *d->enc_mask, d->rows, d->enc_len, d->enc_len, src));
    }
    return d->use_cache ? d->arch->reorder(d, src) : BRG_OK;
}
