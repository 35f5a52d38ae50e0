/* brg_decoder's state and the hooks an architecture implements (internal to src/models). */
#ifndef BRIGADE_MODELS_DECODER_INTERNAL_H
#define BRIGADE_MODELS_DECODER_INTERNAL_H

#include "brigade/generate.h"
#include "models/decode_stages.h"

typedef struct dec_arch dec_arch;

struct brg_decoder {
    brg_model *m;
    const dec_arch *arch;
    void *state; /* the architecture's caches */
    int64_t rows, cap, len, vocab;
    bool use_cache;
    /* Everything fed so far, [rows, cap] each: the ids, their mask and position ids. */
    int32_t *ids;
    float *mask;
    int32_t *pos;
    int64_t *seen; /* per row: unmasked tokens so far (the next token's position) */
    /* Encoder-decoder models: the encoder input, [rows, enc_len]. */
    int32_t *enc_ids;
    float *enc_mask;
    int64_t enc_len;
    /* Where the model's units (blocks) run: all on the caller's thread unless a pipelined
     * generate routed them over its stage threads. */
    decode_route route;
};

/* Runs units [first, last] of a forward, fn(ctx, first_unit, last_unit) for each run of units on
 * one stage, in order: on that stage's thread when the decoder is routed, else here. */
typedef struct dec_units {
    brg_status (*fn)(void *ctx, int first, int last);
    void *ctx;
} dec_units;
brg_status dec_run_units(const brg_decoder *d, const dec_units *u, int first, int last);

struct dec_arch {
    brg_status (*create)(brg_decoder *d);
    void (*destroy)(brg_decoder *d);
    /* Runs the encoder on d->enc_ids (NULL for decoder-only models). encode and forward run
     * their work through dec_run_units, so a routed decoder's blocks run on their stages. */
    brg_status (*encode)(brg_decoder *d);
    /* Runs positions [start, start + n) of the history through the model, the cache holding
     * [0, start), and writes the logits of the last one [rows, vocab]. */
    brg_status (*forward)(brg_decoder *d, int64_t start, int64_t n, float *logits);
    /* Empties the cache (the next forward starts at 0). */
    void (*reset)(brg_decoder *d);
    brg_status (*reorder)(brg_decoder *d, const int32_t *src);
};

/* Row-major copies of history columns [start, start + n) into dst [rows, n]. */
void dec_gather_ids(const brg_decoder *d, int64_t start, int64_t n, int32_t *dst, bool positions);
void dec_gather_mask(const brg_decoder *d, int64_t start, int64_t n, float *dst);

extern const dec_arch gpt2_dec_arch;
extern const dec_arch t5_dec_arch;

#endif
