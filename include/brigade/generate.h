/* Text generation as transformers' `generate` (5.x) does it: greedy search, multinomial sampling
 * (temperature, top-k, top-p, typical-p), beam search (BeamSearch semantics: num_beams,
 * length_penalty, early_stopping true / false / "never", num_return_sequences) and beam sampling;
 * repetition_penalty, no_repeat_ngram_size, min_length / min_new_tokens, a list of eos ids,
 * batches of prompts left-padded with an attention mask, and generation_config.json defaults.
 *
 * Models: GPT2LMHeadModel (decoder-only) and T5ForConditionalGeneration (encoder-decoder: the
 * prompt is the encoder input, the decoder starts from decoder_start_token_id).
 *
 * Decoding goes through a brg_decoder, which keeps a KV cache per attention block: every step
 * runs only the new position through the model (see brg_decoder_create).
 *
 * Sampling draws from brigade's own generator (brg_rng), one stream per prompt keyed by the seed
 * and the prompt's key, so a seed gives the same samples on every run, for any batch size and
 * wherever the model runs; it cannot reproduce torch's random stream (torch.multinomial), so
 * samples differ from transformers' for the same seed. Greedy and beam search equal transformers
 * token for token (up to float rounding deciding a near tie). */
#ifndef BRIGADE_GENERATE_H
#define BRIGADE_GENERATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "brigade/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- generation config ---------------------------------------------------------------- */

typedef enum brg_early_stopping {
    BRG_EARLY_STOPPING_FALSE = 0, /* stop when no running beam can (heuristically) beat the finished ones */
    BRG_EARLY_STOPPING_TRUE,      /* stop a prompt as soon as it has num_beams finished hypotheses */
    BRG_EARLY_STOPPING_NEVER,     /* canonical beam search: stop only when no beam can improve */
} brg_early_stopping;

#define BRG_GEN_MAX_EOS 16

/* transformers' GenerationConfig fields brigade honours. -1 marks an unset length or token. */
typedef struct brg_generation_config {
    int64_t max_new_tokens;       /* -1: unset (then max_length) */
    int64_t max_length;           /* prompt included; -1: unset (then 20 new tokens) */
    int64_t min_length;           /* prompt included (decoder-only); 0 */
    int64_t min_new_tokens;       /* 0 */
    bool do_sample;               /* false */
    int64_t num_beams;            /* 1 */
    float temperature;            /* 1 */
    int64_t top_k;                /* 50 (only when sampling; 0 turns it off) */
    float top_p;                  /* 1 */
    float typical_p;              /* 1 */
    float repetition_penalty;     /* 1 */
    int64_t no_repeat_ngram_size; /* 0 */
    float length_penalty;         /* 1 */
    brg_early_stopping early_stopping;
    int64_t num_return_sequences; /* 1 */
    int32_t eos_token_ids[BRG_GEN_MAX_EOS];
    int n_eos;                    /* 0: none (generation runs to the length limit) */
    int32_t pad_token_id;         /* -1: none (then eos_token_ids[0], as transformers) */
    int32_t bos_token_id;         /* -1 */
    int32_t decoder_start_token_id; /* encoder-decoder models; -1: none (then bos_token_id) */
    uint64_t seed;                /* sampling */
    bool use_cache;               /* true; false recomputes the whole sequence every step */
    /* brigade's, not generation_config.json's: the products' type (brg_decoder_set_compute_dtype),
     * F32 by default; `generate --precision bf16.32 | 16.32` sets BF16 / F16. */
    brg_dtype compute_dtype;
} brg_generation_config;

/* transformers' global defaults (GenerationConfig._get_default_generation_params), no special
 * tokens. */
void brg_generation_config_default(brg_generation_config *cfg);
/* The defaults a model folder gives, as from_pretrained builds model.generation_config: the
 * global defaults, the special tokens of the model's config (bos, eos, pad, decoder start), then
 * every field `dir`/generation_config.json sets (dir may be NULL, the file may be absent).
 * Unknown keys in the file are ignored; a known key with a value of the wrong type is an
 * error naming it. */
brg_status brg_generation_config_for_model(const brg_model *model, const char *dir, brg_generation_config *cfg);
/* Sets the fields a generation_config.json file holds. */
brg_status brg_generation_config_update_from_file(brg_generation_config *cfg, const char *path);
/* The same from `len` bytes of JSON text (an object with generation_config.json's keys); `ctx`
 * names it in messages. */
brg_status brg_generation_config_update_from_json(brg_generation_config *cfg, const char *text, size_t len,
                                                  const char *ctx);
/* Values out of range (num_beams < 1, top_p outside [0, 1], temperature <= 0 when sampling,
 * num_return_sequences > num_beams for beam search, a token outside the vocabulary, ...) are
 * BRG_ERR_INVALID_ARG naming the field. `model` may be NULL (no vocabulary check). */
brg_status brg_generation_config_validate(const brg_generation_config *cfg, const brg_model *model);

/* ---- incremental decoding with a KV cache ---------------------------------------------- */

/* `rows` sequences decoded together, each up to `capacity` positions. A decoder owns one KV
 * cache per attention block ([rows, heads, capacity, head_dim] keys and values, and for T5 the
 * cross-attention keys and values of the encoder output, computed once), so a step costs the
 * new positions only, not the prefix. */
typedef struct brg_decoder brg_decoder;

/* Whether `model` can generate (GPT2LMHeadModel, T5ForConditionalGeneration). */
bool brg_decoder_supported(const brg_model *model);
/* use_cache false keeps no cache: every step runs the whole sequence so far again (the
 * reference the cache is tested against). */
brg_status brg_decoder_create(brg_model *model, int64_t rows, int64_t capacity, bool use_cache, brg_decoder **out);
void brg_decoder_destroy(brg_decoder *d);
/* Encoder-decoder models: runs the encoder once on input_ids [rows, n] with mask [rows, n]
 * (1 token, 0 padding; NULL: all tokens), before the first step. */
brg_status brg_decoder_encode(brg_decoder *d, const int32_t *input_ids, int64_t n, const float *mask);
/* Appends n tokens to every row: ids [rows, n], mask [rows, n] (1 token, 0 padding; NULL: all
 * tokens), and writes the logits of the last new position, [rows, vocab]. Position ids are
 * those transformers' generate gives a decoder-only model: a token's position is the number of
 * unmasked tokens before it in its row (padding gets 0), so a left-padded row gives the logits
 * of the same row unpadded. A row's positions must stay below the model's limit. */
brg_status brg_decoder_step(brg_decoder *d, const int32_t *ids, int64_t n, const float *mask, float *logits);
/* The products' type (before the first step or encode): F32 (the default), or BF16 / F16 as the
 * forward passes' X.32 modes run them: operands rounded to it, sums in fp32. A decode step
 * reads every weight matrix stored in that type (copies the decoder keeps: half the bytes of
 * the fp32 weights), so it moves half the bytes. */
brg_status brg_decoder_set_compute_dtype(brg_decoder *d, brg_dtype type);
/* Row r continues as row src[r] was (beam search); src[r] in [0, rows). */
brg_status brg_decoder_reorder(brg_decoder *d, const int32_t *src);
/* Positions fed so far. */
int64_t brg_decoder_length(const brg_decoder *d);
int64_t brg_decoder_rows(const brg_decoder *d);
int64_t brg_decoder_vocab(const brg_decoder *d);

/* ---- generate --------------------------------------------------------------------------- */

typedef struct brg_generation {
    int64_t n_sequences; /* n_prompts * num_return_sequences, prompt-major */
    int32_t **ids;       /* per sequence: the new tokens (the prompt, and T5's decoder start, excluded),
                          * up to and including the eos that ended it */
    int64_t *lengths;
    float *scores;       /* beam search: the length-normalised score of each sequence; else 0 */
    /* What transformers' generate() returns around these tokens, for comparing: rows of the
     * batch are left-padded to prompt_width with prompt_pad_id (decoder-only), sequences shorter
     * than the longest are filled with fill_id after their end (greedy and sampling: the
     * generation pad; beam search: that pad unless it is 0, else eos_token_ids[0]). T5's rows
     * start with decoder_start_id. */
    int64_t prompt_width;
    int32_t prompt_pad_id, fill_id, decoder_start_id;
} brg_generation;

/* A batch of prompts: ids[i] holds lengths[i] >= 1 tokens. */
typedef struct brg_prompts {
    int64_t n;
    const int32_t *const *ids;
    const int64_t *lengths;
    /* Keys of each prompt's sampling stream (NULL: the prompt's index): the same seed and key
     * give the same random draws whatever else is in the batch. A prompt the batch does not pad
     * gets the same logits, bit for bit, as alone, so the same tokens; a padded one's logits
     * equal its own to rounding (its masked positions regroup the sums), as in transformers. */
    const uint64_t *keys;
    /* The id the batch is padded with (the tokenizer's pad token); -1: the generation pad
     * (pad_token_id, else eos_token_ids[0], else 0). Padding is masked, so it only shows in
     * no_repeat_ngram_size (which, as in transformers, reads the padded rows) and in
     * brg_generation's prompt_width. */
    int32_t pad_id;
} brg_prompts;

/* Generates for every prompt in one batch, decoder-only prompts left-padded and T5's encoder
 * inputs right-padded, as transformers' tokenizers pad them for generate(). A prompt that leaves
 * no room for one new token within the model's positions is an error; a max_length past the
 * model's positions stops there. */
brg_status brg_generate(brg_model *model, const brg_generation_config *cfg, const brg_prompts *prompts,
                        brg_generation *out);
void brg_generation_free(brg_generation *g);

/* ---- several requests at once, pipelined and replicated --------------------------------- */

/* How brg_generate_requests places the model: as an inference IPUConfig's
 * inference_layers_per_ipu / inference_replication_factor do (brg_model_parallelize). */
typedef struct brg_generate_placement {
    int stages;             /* devices per replica (1: no pipeline) */
    const int *block_stage; /* stage of each of the model's blocks, non-decreasing; NULL: all on 0 */
    int replicas;           /* copies of the pipeline; request i goes to replica i % replicas */
} brg_generate_placement;

/* Generates for n batches of prompts (requests) at once: each replica's stages are threads that
 * run the blocks placed on them for whichever request reaches them next, and several requests
 * are in flight, so while one request's step is on the last stage the next one's is on the
 * first. outs[i] receives what brg_generate gives for requests[i] (the same tokens and scores:
 * the same kernels on the same rows). Every block runs on its stage: GPT-2's and T5's decode
 * steps, and T5's encoder (and its cross-attention keys) once per request. On failure every
 * outs[i] is empty and the error names the first request that failed. */
brg_status brg_generate_requests(brg_model *model, const brg_generation_config *cfg, const brg_prompts *requests,
                                 int64_t n, const brg_generate_placement *placement, brg_generation *outs);
/* brg_generate_requests under mpirun (brigade/ranks.h): the replicas x stages devices spread over
 * the ranks as a runtime's are (brg_ranks_layout, refused in one line when they do not fit);
 * every rank calls it with the same requests, runs its stages' blocks and KV caches and ends with
 * every outs[i]. A failure anywhere fails every rank, naming the rank and device it began on. In
 * one process, brg_generate_requests. */
brg_status brg_generate_requests_over_ranks(brg_model *model, const brg_generation_config *cfg,
                                            const brg_prompts *requests, int64_t n,
                                            const brg_generate_placement *placement, brg_generation *outs);

/* ---- simple forms ----------------------------------------------------------------------- */

/* Appends up to max_new tokens to ids[0..n) (capacity `cap`), greedily, stopping after
 * `stop_id` (pass -1 for none) or at the model's position limit. *out_len receives the new
 * length. Decoder-only models. */
brg_status brg_generate_greedy(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                               int32_t stop_id, int64_t *out_len);

/* Writes byte-level tokens (id = byte) as text that cannot drive a terminal: printable ASCII and
 * well-formed UTF-8 as they are; control bytes (newline included, so a sample stays on its
 * line), DEL, C1 controls and bytes of broken UTF-8 as \n, \t, \r or \xHH; a backslash as \\;
 * ids past 255 as '?'. */
void brg_generate_write_text(FILE *f, const int32_t *ids, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
