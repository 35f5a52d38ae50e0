/* Pieces of brg_generate shared by its files (internal to src/models): the job, the logits
 * processors and warpers (logits_process.c), token choice (sampling.c) and beam search
 * (beam_search.c). */
#ifndef BRIGADE_MODELS_GENERATE_INTERNAL_H
#define BRIGADE_MODELS_GENERATE_INTERNAL_H

#include "brigade/generate.h"
#include "brigade/rng.h"
#include "models/decode_stages.h"
#include "models/decoder_internal.h"
#include "runtime/transport.h"

/* One brg_generate call. Rows are prompt-major: row r belongs to prompt r / per_prompt. */
typedef struct gen_job {
    brg_model *m;
    brg_generation_config cfg;
    bool seq2seq;
    int64_t n_prompts, per_prompt, rows;
    int64_t prompt_len; /* decoder tokens before the first new one: the padded prompt, or T5's start token */
    int64_t max_length; /* decoder tokens at most, prompt included */
    int64_t min_length; /* eos is banned while a row is shorter (prompt included) */
    int64_t vocab;
    int32_t pad;        /* transformers' _pad_token_tensor: pad_token_id, else eos_token_ids[0], else 0 */
    int64_t *ignore;    /* per row: the left padding, which repetition_penalty skips */
    int32_t *seqs;      /* [rows, max_length]: each row's decoder tokens */
    brg_decoder *dec;
    const uint64_t *keys;
    brg_generation *out;
    decode_route route; /* a pipelined generate's stages for the decoder (none: this thread) */
    const dec_half_set *half; /* the weights in cfg.compute_dtype, shared by the call's decoders; NULL in F32 */
} gen_job;

/* brg_generate_requests over `t`, a transport of replicas x stages devices spread over the ranks
 * (decode_ranks.h; NULL: one process); `timeout` is its wait, for the messages. */
brg_status gen_generate_requests_over(brg_model *model, const brg_generation_config *cfg, const brg_prompts *requests,
                                      int64_t n, const brg_generate_placement *placement, transport *t,
                                      double timeout, brg_generation *outs);

/* brg_generate with the decoder's units routed (pipelined generate, generate_requests.c). */
brg_status gen_generate_routed(brg_model *model, const brg_generation_config *cfg, const brg_prompts *prompts,
                               const decode_route *route, const dec_half_set *half, brg_generation *out);

bool gen_is_eos(const brg_generation_config *c, int32_t id);

/* ---- logits_process.c ---- */

/* The processors generate() builds from a config, in transformers' order: repetition_penalty,
 * no_repeat_ngram_size, min_length / min_new_tokens, then (warp) temperature, top_k, top_p,
 * typical_p. min_keep is the warpers' min_tokens_to_keep. */
typedef struct gen_proc {
    const brg_generation_config *cfg;
    int64_t vocab, min_length, min_keep;
    bool warp;
    unsigned char *mark; /* [vocab] scratch */
    float *vals;         /* [vocab] scratch */
    int32_t *idx, *tmp;  /* [vocab] scratch */
} gen_proc;

brg_status gen_proc_init(gen_proc *p, const gen_job *j, bool warp, int64_t min_keep);
void gen_proc_free(gen_proc *p);
/* Processes one row's scores [vocab] in place; seq[0..len) is the row so far, its first
 * `ignore` tokens padding. */
void gen_process(gen_proc *p, float *scores, const int32_t *seq, int64_t len, int64_t ignore);
/* log_softmax in place. */
void gen_log_softmax(float *x, int64_t n);

/* ---- sampling.c ---- */

/* The first index of the largest score (torch.argmax). */
int32_t gen_argmax(const float *x, int64_t n);
/* The stream of output sequence `copy` of prompt `key`, for `seed`. */
void gen_rng_seed(brg_rng *rng, uint64_t seed, uint64_t key, uint64_t copy);
/* One draw from softmax(scores) (-inf scores never drawn). */
int32_t gen_sample(brg_rng *rng, const float *scores, int64_t n, double *scratch);
/* k distinct draws from softmax(scores) without replacement, in draw order (torch.multinomial
 * with replacement=False); fewer when fewer scores are finite. Returns how many. */
int64_t gen_sample_distinct(brg_rng *rng, const float *scores, int64_t n, int64_t k, int32_t *out, double *scratch);

/* ---- beam_search.c ---- */

brg_status gen_beam_search(gen_job *j, float *logits);

#endif
