/* brg_decoder's state and the hooks an architecture implements (internal to src/models). */
#ifndef BRIGADE_MODELS_DECODER_INTERNAL_H
#define BRIGADE_MODELS_DECODER_INTERNAL_H

#include "brigade/generate.h"
#include "kernels/backend.h"
#include "models/decode_stages.h"
#include "runtime/transport.h"

typedef struct dec_arch dec_arch;

/* A weight matrix's copy in the decoder's compute type (brg_decoder_set_compute_dtype). */
typedef struct dec_half_weight {
    const float *src;
    uint16_t *bits;
} dec_half_weight;

/* Every 2-D weight of a model in a half type: made once per generate call and shared by its
 * decoders (requests in flight, replicas), which only read it. */
typedef struct dec_half_set {
    brg_dtype type;
    dec_half_weight *w;
    int n;
} dec_half_set;
/* *out = NULL for F32. */
brg_status dec_half_set_create(const brg_model *m, brg_dtype type, dec_half_set **out);
void dec_half_set_destroy(dec_half_set *s);

struct brg_decoder {
    brg_model *m;
    const brg_kernels *k; /* the kernels its steps run: the CPU backend's */
    /* The products' type: F32, or BF16/F16 (operands rounded to it, sums in fp32): the decode
     * steps read `half`, every 2-D weight stored in that type; longer runs round as they go. */
    brg_dtype compute;
    const dec_half_set *half; /* NULL in F32 */
    dec_half_set *own_half;   /* what brg_decoder_set_compute_dtype made (else `half` is borrowed) */
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
 * one stage, in order: on that stage's thread when the decoder is routed, else here. Over ranks
 * (decode_ranks.h) only the runs on this rank's stages compute: `carry` lists what one run hands
 * the next (views; at most DEC_CARRY_MAX), `take` installs it where the next run is on another
 * rank, and the last run's `result` (result_n floats; NULL: none) reaches every rank. */
enum { DEC_CARRY_MAX = 4 };
typedef struct dec_units {
    brg_status (*fn)(void *ctx, int first, int last);
    void *ctx;
    int (*carry)(void *ctx, brg_named_tensor *items);
    brg_status (*take)(void *ctx, const transport_msg *msg);
    float *result;
    int64_t result_n;
    brg_dtype compute; /* the decoder's: every thread that runs a unit computes in it */
} dec_units;
brg_status dec_run_units(const brg_decoder *d, const dec_units *u, int first, int last);
/* w's copy in the decoder's half compute type, or NULL (fp32 decoding, or not a stored weight). */
const uint16_t *dec_half_of(const brg_decoder *d, const float *w);
/* Computes in s's type reading s (NULL: F32), which must outlive the decoder; before any step. */
void dec_use_half(brg_decoder *d, const dec_half_set *s);
/* Units first..last of u as one job of a stage thread (decode_stages_run's fn and arg). */
typedef struct dec_unit_job {
    const dec_units *u;
    int first, last;
} dec_unit_job;
brg_status dec_unit_job_run(void *p);
/* The routed run over ranks (decode_ranks.c); a failure here stops every rank. */
brg_status decode_ranks_run_units(const decode_route *route, const dec_units *u, int first, int last);
/* take for buffers every rank holds: each received tensor copied into mine's of its name. */
brg_status dec_take_copies(const brg_named_tensor *mine, int n, const transport_msg *msg);

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
    /* Once routed over ranks: frees the caches of the units that run on other ranks (NULL:
     * nothing to free). */
    void (*keep_local)(brg_decoder *d);
};

/* Whether unit u runs in this process (always, unless the decoder is routed over ranks). */
bool dec_unit_is_here(const brg_decoder *d, int unit);
/* Routes the decoder's units (before its first step), keeping only the caches of the units here. */
void dec_route(brg_decoder *d, const decode_route *route);

/* Row-major copies of history columns [start, start + n) into dst [rows, n]. */
void dec_gather_ids(const brg_decoder *d, int64_t start, int64_t n, int32_t *dst, bool positions);
void dec_gather_mask(const brg_decoder *d, int64_t start, int64_t n, float *dst);

extern const dec_arch gpt2_dec_arch;
extern const dec_arch t5_dec_arch;

#endif
