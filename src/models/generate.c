/* brg_generate: transformers' generate() flow (lengths, special tokens, batch expansion, the
 * prefill) and its greedy / sampling loop; beam search is in beam_search.c. */
#include "brigade/generate.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/tape.h"
#include "models/decoder_internal.h"
#include "models/generate_internal.h"

static bool is_seq2seq(const brg_model *m) {
    return m->ops && m->ops->architecture && strcmp(m->ops->architecture, "T5ForConditionalGeneration") == 0;
}

void brg_generation_free(brg_generation *g) {
    if (!g) return;
    for (int64_t i = 0; g->ids && i < g->n_sequences; i++) free(g->ids[i]);
    free(g->ids);
    free(g->lengths);
    free(g->scores);
    memset(g, 0, sizeof *g);
}

/* The decoder length generate() allows (prompt included), as _prepare_generated_length: prompt +
 * max_new_tokens, else max_length, else prompt + 20 capped at the positions. Decoder-only models
 * stop at their position limit in every case. */
static int64_t max_length_of(const gen_job *j) {
    const brg_generation_config *c = &j->cfg;
    int64_t L;
    if (c->max_new_tokens > 0) L = j->prompt_len + c->max_new_tokens;
    else if (c->max_length > 0) L = c->max_length;
    else {
        L = j->prompt_len + 20;
        if (!j->seq2seq && L > j->m->max_positions) L = j->m->max_positions;
    }
    if (!j->seq2seq && L > j->m->max_positions) L = j->m->max_positions;
    return L;
}

static brg_status check_prompts(const gen_job *j, const int32_t *const *prompts, const int64_t *lengths,
                                int64_t longest, int32_t pad_id) {
    if (pad_id < -1 || pad_id >= j->vocab)
        return brg_error(BRG_ERR_INVALID_ARG, "the prompts' pad id %d is outside the vocabulary [0, %lld)", (int)pad_id,
                         (long long)j->vocab);
    for (int64_t p = 0; p < j->n_prompts; p++) {
        if (lengths[p] < 1) return brg_error(BRG_ERR_INVALID_ARG, "prompt %lld is empty", (long long)p);
        for (int64_t t = 0; t < lengths[p]; t++)
            if (prompts[p][t] < 0 || prompts[p][t] >= j->vocab)
                return brg_error(BRG_ERR_INVALID_ARG, "prompt %lld: token %d is outside the vocabulary [0, %lld)",
                                 (long long)p, (int)prompts[p][t], (long long)j->vocab);
    }
    const int64_t P = j->m->max_positions;
    if (j->seq2seq ? longest > P : longest >= P)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the prompt is %lld tokens and the model takes at most %lld positions%s", (long long)longest,
                         (long long)P, j->seq2seq ? "" : ": no room for a new token");
    if (j->prompt_len >= j->max_length)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the prompt is %lld tokens and max_length is %lld: no room for a new token (set "
                         "max_new_tokens)",
                         (long long)j->prompt_len, (long long)j->max_length);
    return BRG_OK;
}

/* The batch: every prompt repeated per_prompt times; decoder-only prompts left-padded with the
 * pad id, T5's encoder inputs right-padded (as their tokenizers pad). */
static brg_status build_batch(gen_job *j, const int32_t *const *prompts, const int64_t *lengths, int64_t longest,
                              int32_t **batch, float **mask) {
    const int64_t R = j->rows, W = longest;
    *batch = malloc((size_t)(R * W) * sizeof **batch);
    *mask = malloc((size_t)(R * W) * sizeof **mask);
    j->ignore = calloc((size_t)R, sizeof *j->ignore);
    j->seqs = malloc((size_t)(R * j->max_length) * sizeof *j->seqs);
    if (!*batch || !*mask || !j->ignore || !j->seqs) return brg_error(BRG_ERR_OOM, "cannot allocate the batch");
    for (int64_t r = 0; r < R; r++) {
        const int64_t p = r / j->per_prompt, n = lengths[p], pad = W - n;
        for (int64_t t = 0; t < W; t++) {
            const bool real = j->seq2seq ? t < n : t >= pad;
            (*batch)[r * W + t] = real ? prompts[p][j->seq2seq ? t : t - pad] : j->out->prompt_pad_id;
            (*mask)[r * W + t] = real ? 1.0f : 0.0f;
        }
        if (!j->seq2seq) j->ignore[r] = pad;
    }
    /* What the rows hold beyond their tokens: the beam search output fill
     * (`pad_token_id or eos_token_id[0]` in transformers, so a pad of 0 gives eos). */
    const int32_t fill = j->out->fill_id;
    for (int64_t i = 0; i < R * j->max_length; i++) j->seqs[i] = fill;
    for (int64_t r = 0; r < R; r++) {
        if (j->seq2seq) j->seqs[r * j->max_length] = j->cfg.decoder_start_token_id;
        else memcpy(j->seqs + r * j->max_length, *batch + r * W, (size_t)W * sizeof(int32_t));
    }
    return BRG_OK;
}

/* Greedy search and multinomial sampling (_sample). */
static brg_status sample_loop(gen_job *j, float *logits) {
    const int64_t R = j->rows, V = j->vocab, L = j->max_length, P = j->prompt_len;
    const brg_generation_config *c = &j->cfg;
    const bool has_eos = c->n_eos > 0;
    gen_proc proc;
    BRG_TRY(gen_proc_init(&proc, j, c->do_sample, 1));
    brg_rng *rngs = malloc((size_t)R * sizeof *rngs);
    bool *unfinished = malloc((size_t)R * sizeof *unfinished);
    int32_t *next = malloc((size_t)R * sizeof *next);
    double *scratch = malloc((size_t)V * sizeof *scratch);
    brg_status st =
        rngs && unfinished && next && scratch ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the sampler");
    for (int64_t r = 0; st == BRG_OK && r < R; r++) {
        const int64_t p = r / j->per_prompt;
        gen_rng_seed(&rngs[r], c->seed, j->keys ? j->keys[p] : (uint64_t)p, (uint64_t)(r % j->per_prompt));
        unfinished[r] = true;
        j->out->lengths[r] = 0;
    }
    for (int64_t cur = P; st == BRG_OK; cur++) {
        bool any = false;
        for (int64_t r = 0; r < R; r++) {
            float *row = logits + r * V;
            gen_process(&proc, row, j->seqs + r * L, cur, j->ignore[r]);
            int32_t t = c->do_sample ? gen_sample(&rngs[r], row, V, scratch) : gen_argmax(row, V);
            if (has_eos && !unfinished[r]) t = j->pad;
            next[r] = t;
            j->seqs[r * L + cur] = t;
            if (unfinished[r]) {
                j->out->lengths[r] = cur + 1 - P;
                if (has_eos && gen_is_eos(c, t)) unfinished[r] = false;
            }
            any = any || unfinished[r];
        }
        if (!any || cur + 1 >= L) break;
        st = brg_decoder_step(j->dec, next, 1, NULL, logits);
    }
    for (int64_t r = 0; st == BRG_OK && r < R; r++) {
        const int64_t n = j->out->lengths[r];
        j->out->ids[r] = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
        if (!j->out->ids[r]) st = brg_error(BRG_ERR_OOM, "cannot allocate the generated sequences");
        else memcpy(j->out->ids[r], j->seqs + r * L + P, (size_t)n * sizeof(int32_t));
    }
    free(rngs);
    free(unfinished);
    free(next);
    free(scratch);
    gen_proc_free(&proc);
    return st;
}

static brg_status run(gen_job *j, const int32_t *const *prompts, const int64_t *lengths, int64_t longest) {
    int32_t *batch = NULL;
    float *mask = NULL, *logits = NULL;
    brg_status st = build_batch(j, prompts, lengths, longest, &batch, &mask);
    if (st == BRG_OK) st = brg_decoder_create(j->m, j->rows, j->max_length, j->cfg.use_cache, &j->dec);
    if (st == BRG_OK) dec_use_half(j->dec, j->half);
    if (st == BRG_OK) dec_route(j->dec, &j->route);
    if (st == BRG_OK) {
        logits = malloc((size_t)(j->rows * j->vocab) * sizeof *logits);
        if (!logits) st = brg_error(BRG_ERR_OOM, "cannot allocate the logits");
    }
    if (st == BRG_OK) {
        if (j->seq2seq) {
            st = brg_decoder_encode(j->dec, batch, longest, mask);
            int32_t *start = j->seqs; /* column 0 of every row */
            int32_t *first = malloc((size_t)j->rows * sizeof *first);
            if (st == BRG_OK && !first) st = brg_error(BRG_ERR_OOM, "cannot allocate the decoder start");
            for (int64_t r = 0; st == BRG_OK && r < j->rows; r++) first[r] = start[r * j->max_length];
            if (st == BRG_OK) st = brg_decoder_step(j->dec, first, 1, NULL, logits);
            free(first);
        } else {
            st = brg_decoder_step(j->dec, batch, longest, mask, logits);
        }
    }
    if (st == BRG_OK) st = j->cfg.num_beams > 1 ? gen_beam_search(j, logits) : sample_loop(j, logits);
    free(batch);
    free(mask);
    free(logits);
    brg_decoder_destroy(j->dec);
    free(j->ignore);
    free(j->seqs);
    return st;
}

brg_status brg_generate(brg_model *model, const brg_generation_config *cfg, const brg_prompts *prompts,
                        brg_generation *out) {
    memset(out, 0, sizeof *out);
    dec_half_set *half;
    BRG_TRY(dec_half_set_create(model, cfg->compute_dtype, &half));
    brg_status st = gen_generate_routed(model, cfg, prompts, NULL, half, out);
    dec_half_set_destroy(half);
    return st;
}

brg_status gen_generate_routed(brg_model *model, const brg_generation_config *cfg, const brg_prompts *prompts,
                               const decode_route *route, const dec_half_set *half, brg_generation *out) {
    memset(out, 0, sizeof *out);
    if (!brg_decoder_supported(model))
        return brg_error(BRG_ERR_UNSUPPORTED, "generation needs GPT2LMHeadModel or T5ForConditionalGeneration, not %s",
                         model && model->ops ? model->ops->architecture : "this model");
    if (prompts->n < 1) return brg_error(BRG_ERR_INVALID_ARG, "no prompts to generate for");
    BRG_TRY(brg_generation_config_validate(cfg, model));
    gen_job j = {.m = model, .cfg = *cfg, .seq2seq = is_seq2seq(model), .n_prompts = prompts->n, .keys = prompts->keys,
                 .vocab = model->vocab_size, .out = out, .route = route ? *route : (decode_route){0}, .half = half};
    brg_generation_config *c = &j.cfg;
    if (j.seq2seq && c->decoder_start_token_id < 0) c->decoder_start_token_id = c->bos_token_id;
    if (j.seq2seq && c->decoder_start_token_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "decoder_start_token_id (or bos_token_id) is needed to generate with T5");
    j.pad = c->pad_token_id >= 0 ? c->pad_token_id : c->n_eos > 0 ? c->eos_token_ids[0] : 0;
    j.per_prompt = c->num_beams > c->num_return_sequences ? c->num_beams : c->num_return_sequences;
    j.rows = prompts->n * j.per_prompt;
    int64_t longest = 0;
    for (int64_t p = 0; p < prompts->n; p++) longest = prompts->lengths[p] > longest ? prompts->lengths[p] : longest;
    j.prompt_len = j.seq2seq ? 1 : longest;
    j.max_length = max_length_of(&j);
    j.min_length = c->min_new_tokens > 0 ? c->min_new_tokens + j.prompt_len : c->min_length;
    BRG_TRY(check_prompts(&j, prompts->ids, prompts->lengths, longest, prompts->pad_id));
    const int64_t n_seq = prompts->n * c->num_return_sequences;
    out->n_sequences = n_seq;
    out->prompt_width = j.seq2seq ? 0 : longest;
    out->prompt_pad_id = prompts->pad_id >= 0 ? prompts->pad_id : j.pad;
    out->decoder_start_id = j.seq2seq ? c->decoder_start_token_id : -1;
    out->fill_id = c->num_beams > 1 ? (c->n_eos > 0 ? (j.pad != 0 ? j.pad : c->eos_token_ids[0]) : -1) : j.pad;
    out->ids = calloc((size_t)n_seq, sizeof *out->ids);
    out->lengths = calloc((size_t)(n_seq > j.rows ? n_seq : j.rows), sizeof *out->lengths);
    out->scores = calloc((size_t)n_seq, sizeof *out->scores);
    brg_status st = out->ids && out->lengths && out->scores ? run(&j, prompts->ids, prompts->lengths, longest)
                                                            : brg_error(BRG_ERR_OOM, "cannot allocate the results");
    if (st != BRG_OK) brg_generation_free(out);
    return st;
}

/* ---- brg_generate_greedy ---- */

static int32_t argmax_last(const brg_tensor *logits, int64_t n) {
    int64_t v = logits->shape[2];
    const float *row = (const float *)logits->data + (n - 1) * v;
    return gen_argmax(row, v);
}

static brg_status check_request(const brg_model *model, int64_t n, int64_t max_new, int32_t stop_id) {
    if (n < 1) return brg_error(BRG_ERR_INVALID_ARG, "generation needs a prompt of at least one token");
    if (n > model->max_positions || (n == model->max_positions && max_new > 0))
        return brg_error(
            BRG_ERR_INVALID_ARG,
            "the prompt is %lld tokens and the model takes at most %lld positions: no room for a new token",
            (long long)n, (long long)model->max_positions);
    if (max_new < 0) return brg_error(BRG_ERR_INVALID_ARG, "cannot generate %lld tokens", (long long)max_new);
    if (stop_id < -1 || stop_id >= model->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG, "stop token %d is outside the vocabulary [0, %lld)", (int)stop_id,
                         (long long)model->vocab_size);
    return BRG_OK;
}

/* Models without a decoder: the whole prefix through the tape forward for every token. */
static brg_status greedy_recompute(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                                   int32_t stop_id, int64_t *out_len) {
    brg_arena *arena;
    BRG_TRY(brg_arena_create("device 0", 0, &arena));
    brg_tape *tape;
    brg_status st = brg_tape_create(arena, &tape);
    if (st != BRG_OK) {
        brg_arena_destroy(arena);
        return st;
    }
    brg_tape_set_grad_enabled(tape, false);
    for (int64_t k = 0; st == BRG_OK && k < max_new && n < cap && n < model->max_positions; k++) {
        size_t mark = brg_arena_mark(arena);
        int64_t shape[2] = {1, n};
        brg_tensor in = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, ids);
        brg_bundle b = {0};
        st = brg_tensor_map_put(&b.inputs, "input_ids", &in);
        if (st == BRG_OK) st = brg_model_forward(model, tape, &b);
        if (st == BRG_OK) {
            ids[n] = argmax_last(b.logits, n);
            n++;
        }
        brg_arena_reset(arena, mark);
        if (st == BRG_OK && ids[n - 1] == stop_id) break;
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    *out_len = n;
    return st;
}

brg_status brg_generate_greedy(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                               int32_t stop_id, int64_t *out_len) {
    BRG_TRY(check_request(model, n, max_new, stop_id));
    if (!brg_decoder_supported(model) || is_seq2seq(model))
        return greedy_recompute(model, ids, n, cap, max_new, stop_id, out_len);
    int64_t room = cap - n < model->max_positions - n ? cap - n : model->max_positions - n;
    if (max_new > room) max_new = room;
    *out_len = n;
    if (max_new <= 0) return BRG_OK;
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = max_new;
    if (stop_id >= 0) {
        cfg.eos_token_ids[0] = stop_id;
        cfg.n_eos = 1;
    }
    const int32_t *prompt = ids;
    const brg_prompts batch = {.n = 1, .ids = &prompt, .lengths = &n, .pad_id = -1};
    brg_generation g;
    BRG_TRY(brg_generate(model, &cfg, &batch, &g));
    memcpy(ids + n, g.ids[0], (size_t)g.lengths[0] * sizeof *ids);
    *out_len = n + g.lengths[0];
    brg_generation_free(&g);
    return BRG_OK;
}

/* ---- text ---- */

/* The length of the well-formed UTF-8 sequence at b[0..n) that is not a C1 control, or 0. */
static int utf8_length(const int32_t *b, int64_t n) {
    int len = b[0] >= 0xC2 && b[0] <= 0xDF   ? 2
              : b[0] >= 0xE0 && b[0] <= 0xEF ? 3
              : b[0] >= 0xF0 && b[0] <= 0xF4 ? 4
                                             : 0;
    if (len == 0 || len > n) return 0;
    /* The second byte's range rules out overlong forms, surrogates and code points past U+10FFFF. */
    int lo = b[0] == 0xE0 ? 0xA0 : b[0] == 0xF0 ? 0x90 : 0x80, hi = b[0] == 0xED ? 0x9F : b[0] == 0xF4 ? 0x8F : 0xBF;
    if (b[1] < lo || b[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (b[i] < 0x80 || b[i] > 0xBF) return 0;
    return b[0] == 0xC2 && b[1] <= 0x9F ? 0 : len;
}

static void write_escaped(FILE *f, int32_t c) {
    if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c == '\r') fputs("\\r", f);
    else if (c == '\\') fputs("\\\\", f);
    else fprintf(f, "\\x%02X", (unsigned)c);
}

void brg_generate_write_text(FILE *f, const int32_t *ids, int64_t n) {
    for (int64_t i = 0; i < n;) {
        int32_t c = ids[i];
        int len = c >= 0x80 && c < 256 ? utf8_length(ids + i, n - i) : 0;
        for (int k = 0; k < len; k++) fputc(ids[i + k], f);
        if (len) {
            i += len;
            continue;
        }
        if (c < 0 || c > 255) fputc('?', f);
        else if (c >= 0x20 && c < 0x7F && c != '\\') fputc(c, f);
        else write_escaped(f, c);
        i++;
    }
}
