#include "brigade/generate.h"

#include "brigade/tape.h"

static int32_t argmax_last(const brg_tensor *logits, int64_t n) {
    int64_t v = logits->shape[2];
    const float *row = (const float *)logits->data + (n - 1) * v;
    int32_t best = 0;
    for (int64_t i = 1; i < v; i++)
        if (row[i] > row[best]) best = (int32_t)i;
    return best;
}

brg_status brg_generate_greedy(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                               int32_t stop_id, int64_t *out_len) {
    if (n < 1) return brg_error(BRG_ERR_INVALID_ARG, "generation needs a prompt of at least one token");
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
