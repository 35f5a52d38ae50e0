#include "brigade/generate.h"

#include <stdbool.h>

#include "brigade/tape.h"

static int32_t argmax_last(const brg_tensor *logits, int64_t n) {
    int64_t v = logits->shape[2];
    const float *row = (const float *)logits->data + (n - 1) * v;
    int32_t best = 0;
    for (int64_t i = 1; i < v; i++)
        if (row[i] > row[best]) best = (int32_t)i;
    return best;
}

static brg_status check_request(const brg_model *model, int64_t n, int64_t max_new, int32_t stop_id) {
    if (n < 1) return brg_error(BRG_ERR_INVALID_ARG, "generation needs a prompt of at least one token");
    if (n > model->max_positions || (n == model->max_positions && max_new > 0))
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the prompt is %lld tokens and the model takes at most %lld positions: no room for a new token",
                         (long long)n, (long long)model->max_positions);
    if (max_new < 0) return brg_error(BRG_ERR_INVALID_ARG, "cannot generate %lld tokens", (long long)max_new);
    if (stop_id < -1 || stop_id >= model->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG, "stop token %d is outside the vocabulary [0, %lld)", (int)stop_id,
                         (long long)model->vocab_size);
    return BRG_OK;
}

brg_status brg_generate_greedy(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                               int32_t stop_id, int64_t *out_len) {
    BRG_TRY(check_request(model, n, max_new, stop_id));
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
        brg_bundle b = {.input_ids = &in};
        st = brg_model_forward(model, tape, &b);
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

/* The length of the well-formed UTF-8 sequence at b[0..n) that is not a C1 control, or 0. */
static int utf8_length(const int32_t *b, int64_t n) {
    int len = b[0] >= 0xC2 && b[0] <= 0xDF ? 2 : b[0] >= 0xE0 && b[0] <= 0xEF ? 3 : b[0] >= 0xF0 && b[0] <= 0xF4 ? 4 : 0;
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
