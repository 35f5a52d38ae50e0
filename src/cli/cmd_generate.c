/* brigade generate: continues prompts as transformers' generate() does (greedy, sampling, beam
 * search; see brigade/generate.h), with the model folder's generation_config.json as defaults
 * and the flags over it. Prompts go through the folder's tokenizer (encoded as the tokenizer
 * does by default, decoded without special tokens), else byte-level (token id = byte value, as
 * models trained on brigade's byte-level text or built-in data use).
 *
 * Output: one line per generated sequence (num_return_sequences per prompt, best first for beam
 * search): the prompt and its continuation as text (T5: the generated text), control bytes
 * escaped; with --json, {"prompt": ..., "generated_ids": [...], "text": ...} where the ids and
 * the text are the new tokens only (and "score" for beam search). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/generate.h"
#include "brigade/tokenizer.h"
#include "commands.h"
#include "io/json.h"
#include "lines.h"
#include "precision_flag.h"
#include "progress.h"
#include "rank_flags.h"
#include "trace_flag.h"

typedef struct prompt {
    char *text;
    int32_t *ids;
    int64_t len;
    int64_t line; /* in --input (1-based); 0 for --prompt */
} prompt;

typedef struct run {
    brg_model *m;
    brg_tokenizer *tok; /* NULL: byte-level */
    brg_generation_config cfg;
    bool seq2seq, json;
    int32_t pad_id;
    prompt *prompts;
    int64_t n, cap;
    cli_progress progress; /* prompts done, over --input */
    /* --ipu-config: the inference placement the batches are generated over (pipelined: more
     * than one device in all) */
    brg_generate_placement placement;
    int *block_stage;
} run;

/* A JSON string literal (UTF-8 kept, control characters escaped). */
static void put_json_string(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + n; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\u%04x", *p);
            else fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* ---- prompts ---- */

static brg_status add_prompt(run *r, const char *text, size_t len, int64_t line) {
    if (r->n == r->cap) {
        int64_t cap = r->cap ? 2 * r->cap : 16;
        prompt *p = realloc(r->prompts, (size_t)cap * sizeof *p);
        if (!p) return brg_error(BRG_ERR_OOM, "cannot hold %lld prompts", (long long)cap);
        r->prompts = p;
        r->cap = cap;
    }
    prompt *p = &r->prompts[r->n];
    *p = (prompt){.text = malloc(len + 1), .line = line};
    if (!p->text) return brg_error(BRG_ERR_OOM, "cannot hold a prompt");
    memcpy(p->text, text, len);
    p->text[len] = 0;
    r->n++;
    if (!r->tok) {
        p->len = (int64_t)len;
        p->ids = malloc((len ? len : 1) * sizeof *p->ids);
        if (!p->ids) return brg_error(BRG_ERR_OOM, "cannot allocate the prompt");
        for (size_t i = 0; i < len; i++) p->ids[i] = (unsigned char)text[i];
        return BRG_OK;
    }
    brg_encoding e;
    BRG_TRY(brg_tokenizer_encode(r->tok, text, len, true, &e));
    p->len = (int64_t)e.n;
    p->ids = malloc((e.n ? e.n : 1) * sizeof *p->ids);
    if (p->ids) memcpy(p->ids, e.ids, e.n * sizeof *p->ids);
    brg_encoding_free(&e);
    return p->ids ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the prompt");
}

/* --input: every line that is not blank is a JSON object with a string "prompt". */
static brg_status read_input(run *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    brg_status st = BRG_OK;
    size_t len;
    char *line;
    for (int64_t no = 1; st == BRG_OK && (line = cli_read_line(f, &len)) != NULL; no++) {
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i < len) {
            char ctx[4200];
            snprintf(ctx, sizeof ctx, "%s:%lld", path, (long long)no);
            cJSON *j = NULL;
            st = brg_json_parse(line, len, ctx, &j);
            const cJSON *p = st == BRG_OK ? cJSON_GetObjectItemCaseSensitive(j, "prompt") : NULL;
            if (st == BRG_OK && (!cJSON_IsObject(j) || !cJSON_IsString(p)))
                st = brg_error(BRG_ERR_FORMAT, "%s: expected an object with a string \"prompt\"", ctx);
            if (st == BRG_OK) st = add_prompt(r, p->valuestring, strlen(p->valuestring), no);
            cJSON_Delete(j);
        }
        free(line);
    }
    fclose(f);
    if (st == BRG_OK && r->n == 0) st = brg_error(BRG_ERR_INVALID_ARG, "%s holds no prompts", path);
    return st;
}

/* A prompt that leaves no room is refused before anything runs, naming its line. */
static brg_status check_prompt(const run *r, const prompt *p) {
    char where[64] = "";
    if (p->line) snprintf(where, sizeof where, "line %lld: ", (long long)p->line);
    if (p->len < 1) return brg_error(BRG_ERR_INVALID_ARG, "%sthe prompt is empty", where);
    const int64_t P = r->m->max_positions;
    if (r->seq2seq ? p->len > P : p->len >= P)
        return brg_error(
            BRG_ERR_INVALID_ARG, "%sthe prompt is %lld tokens%s and the model takes at most %lld positions%s", where,
            (long long)p->len, r->tok ? "" : " (bytes)", (long long)P, r->seq2seq ? "" : ": no room for a new token");
    return BRG_OK;
}

/* ---- output ---- */

/* The text of ids: the tokenizer's decoding (special tokens skipped), or the bytes with control
 * bytes escaped. *out is malloc'd. */
static brg_status text_of(const run *r, const int32_t *ids, int64_t n, char **out, size_t *len) {
    char *text = NULL;
    size_t tlen = 0;
    int32_t *bytes = NULL;
    if (r->tok) {
        BRG_TRY(brg_tokenizer_decode(r->tok, ids, (size_t)n, true, &text));
        tlen = strlen(text);
        bytes = malloc((tlen ? tlen : 1) * sizeof *bytes);
        for (size_t i = 0; bytes && i < tlen; i++) bytes[i] = (unsigned char)text[i];
        ids = bytes;
        n = (int64_t)tlen;
    }
    FILE *m = open_memstream(out, len);
    brg_status st = m && (bytes || !r->tok) ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the output text");
    if (st == BRG_OK) brg_generate_write_text(m, ids, n);
    if (m) fclose(m);
    free(bytes);
    free(text);
    return st;
}

static brg_status write_sequence(const run *r, const prompt *p, const brg_generation *g, int64_t s) {
    const int32_t *ids = g->ids[s];
    const int64_t n = g->lengths[s];
    char *text = NULL;
    size_t len = 0;
    if (r->json) {
        BRG_TRY(text_of(r, ids, n, &text, &len));
        fputs("{\"prompt\": ", stdout);
        put_json_string(stdout, p->text, strlen(p->text));
        fputs(", \"generated_ids\": [", stdout);
        for (int64_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
        fputs("], \"text\": ", stdout);
        put_json_string(stdout, text, len);
        if (r->cfg.num_beams > 1) printf(", \"score\": %.9g", (double)g->scores[s]);
        fputs("}\n", stdout);
    } else {
        /* The whole sequence (decoder-only: prompt and continuation, decoded together). */
        const int64_t pl = r->seq2seq ? 0 : p->len;
        int32_t *all = malloc((size_t)(pl + n + 1) * sizeof *all);
        if (!all) return brg_error(BRG_ERR_OOM, "cannot allocate the output");
        memcpy(all, p->ids, (size_t)pl * sizeof *all);
        memcpy(all + pl, ids, (size_t)n * sizeof *all);
        brg_status st = text_of(r, all, pl + n, &text, &len);
        free(all);
        BRG_TRY(st);
        fwrite(text, 1, len, stdout);
        putchar('\n');
    }
    free(text);
    return BRG_OK;
}

/* The prompts of batch `first` (up to batch_size of them) as a brg_prompts over the caller's arrays. */
static brg_prompts batch_at(const run *r, int64_t first, int64_t batch_size, const int32_t **ids, int64_t *lengths,
                            uint64_t *keys) {
    const int64_t n = r->n - first < batch_size ? r->n - first : batch_size;
    for (int64_t i = 0; i < n; i++) {
        ids[i] = r->prompts[first + i].ids;
        lengths[i] = r->prompts[first + i].len;
        keys[i] = (uint64_t)(first + i); /* a prompt samples the same in any batch */
    }
    return (brg_prompts){.n = n, .ids = ids, .lengths = lengths, .keys = keys, .pad_id = r->pad_id};
}

static brg_status write_batch(const run *r, int64_t first, const brg_generation *g, int64_t n) {
    const int64_t per = g->n_sequences / n;
    for (int64_t s = 0; s < g->n_sequences; s++) BRG_TRY(write_sequence(r, &r->prompts[first + s / per], g, s));
    fflush(stdout);
    return BRG_OK;
}

/* Batches handed to the pipeline at once: enough requests in flight to fill every stage twice. */
#define PIPELINE_WAVE 64

/* Over an --ipu-config placement: waves of batches as requests in flight, written in order. */
static brg_status generate_pipelined(run *r, int64_t batch_size) {
    const int64_t batches = (r->n + batch_size - 1) / batch_size;
    for (int64_t w0 = 0; w0 < batches; w0 += PIPELINE_WAVE) {
        const int64_t nb = batches - w0 < PIPELINE_WAVE ? batches - w0 : PIPELINE_WAVE;
        const int32_t **ids = calloc((size_t)(nb * batch_size), sizeof *ids);
        int64_t *lengths = calloc((size_t)(nb * batch_size), sizeof *lengths);
        uint64_t *keys = calloc((size_t)(nb * batch_size), sizeof *keys);
        brg_prompts *req = calloc((size_t)nb, sizeof *req);
        brg_generation *outs = calloc((size_t)nb, sizeof *outs);
        brg_status st = ids && lengths && keys && req && outs ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the requests");
        for (int64_t b = 0; st == BRG_OK && b < nb; b++)
            req[b] = batch_at(r, (w0 + b) * batch_size, batch_size, ids + b * batch_size, lengths + b * batch_size,
                              keys + b * batch_size);
        const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
        if (st == BRG_OK) st = brg_generate_requests_over_ranks(r->m, &r->cfg, req, nb, &r->placement, outs);
        if (t0) brg_trace_named("generate requests", t0, w0);
        for (int64_t b = 0; st == BRG_OK && b < nb; b++) st = write_batch(r, (w0 + b) * batch_size, &outs[b], req[b].n);
        for (int64_t b = 0; outs && b < nb; b++) brg_generation_free(&outs[b]);
        free(ids), free(lengths), free(keys), free(req), free(outs);
        BRG_TRY(st);
        const int64_t done = (w0 + nb) * batch_size;
        cli_progress_update(&r->progress, done < r->n ? done : r->n, NULL);
    }
    return BRG_OK;
}

static brg_status generate_all(run *r, int64_t batch_size) {
    for (int64_t i = 0; i < r->n; i++) BRG_TRY(check_prompt(r, &r->prompts[i]));
    if (r->block_stage) return generate_pipelined(r, batch_size);
    for (int64_t first = 0; first < r->n; first += batch_size) {
        const int32_t *ids[256];
        int64_t lengths[256];
        uint64_t keys[256];
        const brg_prompts batch = batch_at(r, first, batch_size, ids, lengths, keys);
        brg_generation g;
        const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
        brg_status made = brg_generate(r->m, &r->cfg, &batch, &g);
        if (t0) brg_trace_named("generate batch", t0, first / batch_size);
        BRG_TRY(made);
        brg_status st = write_batch(r, first, &g, batch.n);
        brg_generation_free(&g);
        BRG_TRY(st);
        cli_progress_update(&r->progress, first + batch.n, NULL);
    }
    return BRG_OK;
}

/* ---- flags ---- */

typedef struct flags {
    const char *model, *prompt, *input, *ipu_config, *overrides, *early, *eos, *trace, *precision;
    int64_t max_new, min_new, top_k, beams, num_return, ngram, seed, stop, batch_size;
    double temperature, top_p, typical_p, repetition, length_penalty;
    bool sample, json, no_cache, quiet;
} flags;

/* "3" or "3,7,9". */
static brg_status parse_eos(const char *arg, const brg_model *m, brg_generation_config *c) {
    c->n_eos = 0;
    if (strcmp(arg, "none") == 0) return BRG_OK;
    if (!*arg) return brg_error(BRG_ERR_INVALID_ARG, "--eos-token-id '': give token ids separated by commas (or none)");
    const char *s = arg;
    while (*s) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || v >= m->vocab_size || (*end && *end != ','))
            return brg_error(BRG_ERR_INVALID_ARG,
                             "--eos-token-id '%s': give token ids below %lld separated by commas (or none)", arg,
                             (long long)m->vocab_size);
        if (c->n_eos == BRG_GEN_MAX_EOS)
            return brg_error(BRG_ERR_INVALID_ARG, "--eos-token-id: at most %d ids", BRG_GEN_MAX_EOS);
        c->eos_token_ids[c->n_eos++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    return BRG_OK;
}

static bool seen(const arg_spec *specs, int n, const char *name) { return args_seen(specs, n, name); }

/* The folder's defaults, then every flag given. */
static brg_status build_config(run *r, const flags *f, const arg_spec *specs, int n) {
    char dir[4096];
    BRG_TRY(brg_hf_resolve(f->model, dir, sizeof dir));
    brg_generation_config *c = &r->cfg;
    BRG_TRY(brg_generation_config_for_model(r->m, dir, c));
    if (seen(specs, n, "max-new-tokens")) {
        if (f->max_new < 1)
            return brg_error(BRG_ERR_INVALID_ARG, "--max-new-tokens %lld: give at least 1", (long long)f->max_new);
        c->max_new_tokens = f->max_new;
    }
    if (seen(specs, n, "min-new-tokens")) c->min_new_tokens = f->min_new;
    if (seen(specs, n, "do-sample")) c->do_sample = f->sample;
    if (seen(specs, n, "temperature")) c->temperature = (float)f->temperature;
    if (seen(specs, n, "top-k")) c->top_k = f->top_k;
    if (seen(specs, n, "top-p")) c->top_p = (float)f->top_p;
    if (seen(specs, n, "typical-p")) c->typical_p = (float)f->typical_p;
    if (seen(specs, n, "repetition-penalty")) c->repetition_penalty = (float)f->repetition;
    if (seen(specs, n, "no-repeat-ngram-size")) c->no_repeat_ngram_size = f->ngram;
    if (seen(specs, n, "seed")) c->seed = (uint64_t)f->seed;
    if (seen(specs, n, "num-beams")) c->num_beams = f->beams;
    if (seen(specs, n, "length-penalty")) c->length_penalty = (float)f->length_penalty;
    if (seen(specs, n, "num-return-sequences")) c->num_return_sequences = f->num_return;
    if (f->no_cache) c->use_cache = false;
    BRG_TRY(cli_forward_precision(f->precision, &c->compute_dtype));
    if (f->early) {
        if (strcmp(f->early, "true") == 0) c->early_stopping = BRG_EARLY_STOPPING_TRUE;
        else if (strcmp(f->early, "false") == 0) c->early_stopping = BRG_EARLY_STOPPING_FALSE;
        else if (strcmp(f->early, "never") == 0) c->early_stopping = BRG_EARLY_STOPPING_NEVER;
        else return brg_error(BRG_ERR_INVALID_ARG, "--early-stopping '%s': give true, false or never", f->early);
    }
    if (f->eos) BRG_TRY(parse_eos(f->eos, r->m, c));
    if (seen(specs, n, "stop-token")) {
        if (f->stop < 0 || f->stop >= r->m->vocab_size)
            return brg_error(BRG_ERR_INVALID_ARG, "--stop-token %lld is outside the model's vocabulary [0, %lld)",
                             (long long)f->stop, (long long)r->m->vocab_size);
        c->eos_token_ids[0] = (int32_t)f->stop;
        c->n_eos = 1;
    }
    return brg_generation_config_validate(c, r->m);
}

/* --ipu-config: the model's inference placement (inference_layers_per_ipu over
 * inference_ipus_per_replica stages, inference_replication_factor replicas), which the batches
 * of prompts are generated over as requests in flight. */
static brg_status load_placement(run *r, const char *ref, const char *overrides) {
    brg_ipu_config cfg;
    brg_ipu_config_init(&cfg);
    brg_status st = brg_ipu_config_load(ref, &cfg);
    if (st == BRG_OK && overrides) st = brg_ipu_config_update_from_string(&cfg, overrides);
    if (st == BRG_OK) st = brg_ipu_config_validate(&cfg);
    brg_placement p = {0};
    if (st == BRG_OK) {
        brg_ipu_config_eval(&cfg);
        st = brg_model_parallelize(r->m, &cfg, BRG_IPU_MODE_INFERENCE, &p);
    }
    if (st == BRG_OK) {
        brg_ipu_view v;
        brg_ipu_config_view(&cfg, BRG_IPU_MODE_INFERENCE, &v);
        r->block_stage = malloc((size_t)p.n_blocks * sizeof *r->block_stage);
        if (!r->block_stage) st = brg_error(BRG_ERR_OOM, "cannot allocate the placement");
        for (int b = 0; st == BRG_OK && b < p.n_blocks; b++) r->block_stage[b] = p.block_device[b];
        r->placement = (brg_generate_placement){p.n_devices, r->block_stage, (int)v.replication_factor};
    }
    brg_placement_free(&p);
    return st;
}

static void free_run(run *r) {
    for (int64_t i = 0; i < r->n; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    brg_tokenizer_free(r->tok);
    brg_model_destroy(r->m);
    free(r->block_stage);
}

int cmd_generate(int argc, char **argv) {
    flags f = {.batch_size = 8};
    cli_rank_flags rf = CLI_RANK_FLAGS_INIT;
    arg_spec specs[] = {
        {"model", ARG_STRING, &f.model, true, "model folder or hub id in the local cache (GPT-2 or T5)", false},
        {"prompt", ARG_STRING, &f.prompt, false, "text to continue (the folder's tokenizer, else bytes)", false},
        {"input", ARG_STRING, &f.input, false, "a JSONL file of {\"prompt\": TEXT} lines, one prompt each", false},
        {"max-new-tokens", ARG_INT, &f.max_new, false,
         "tokens to add at most (default: generation_config.json, else 20)", false},
        {"min-new-tokens", ARG_INT, &f.min_new, false, "no eos before this many new tokens", false},
        {"do-sample", ARG_FLAG, &f.sample, false, "sample instead of greedy / beam search", false},
        {"temperature", ARG_DOUBLE, &f.temperature, false, "sampling temperature (1)", false},
        {"top-k", ARG_INT, &f.top_k, false, "sample from the k most likely tokens (50; 0: all)", false},
        {"top-p", ARG_DOUBLE, &f.top_p, false, "nucleus sampling mass (1)", false},
        {"typical-p", ARG_DOUBLE, &f.typical_p, false, "typical sampling mass (1)", false},
        {"seed", ARG_INT, &f.seed, false, "sampling seed (0)", false},
        {"repetition-penalty", ARG_DOUBLE, &f.repetition, false, "penalty for tokens already in the sequence (1)",
         false},
        {"no-repeat-ngram-size", ARG_INT, &f.ngram, false, "no n-gram of this size twice (0: off)", false},
        {"num-beams", ARG_INT, &f.beams, false, "beam search with this many beams (1: off)", false},
        {"length-penalty", ARG_DOUBLE, &f.length_penalty, false, "beam score = logprob / length^this (1)", false},
        {"early-stopping", ARG_STRING, &f.early, false, "beam search: true, false or never (false)", false},
        {"num-return-sequences", ARG_INT, &f.num_return, false, "sequences per prompt (1)", false},
        {"eos-token-id", ARG_STRING, &f.eos, false, "ids that end a sequence, comma-separated, or none", false},
        {"stop-token", ARG_INT, &f.stop, false, "stop after this token id (one eos id)", false},
        {"batch-size", ARG_INT, &f.batch_size, false, "prompts generated together, left-padded (8)", false},
        {"no-cache", ARG_FLAG, &f.no_cache, false, "recompute the whole sequence every step (no KV cache)", false},
        {"precision", ARG_STRING, &f.precision, false, CLI_PRECISION_HELP "; steps read the weights in that type",
         false},
        {"ipu-config", ARG_STRING, &f.ipu_config, false, "generate over this IPUConfig's inference pipeline (inference_layers_per_ipu, replicas)",
         false},
        {"ipu-config-overrides", ARG_STRING, &f.overrides, false, "\"k1=v1,k2=[1 2]\" over --ipu-config", false},
        CLI_RANK_FLAG_SPECS(rf),
        {"json", ARG_FLAG, &f.json, false, "one {\"prompt\", \"generated_ids\", \"text\"} line per sequence", false},
        {"trace", ARG_STRING, &f.trace, false, "write a timeline of the run (Chrome trace-event JSON, Perfetto) to FILE.json", false},
        {"quiet", ARG_FLAG, &f.quiet, false, "no progress on stderr (shown for --input)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("generate", "Continues prompts as transformers' generate() does (greedy, sampling, beam search), "
                   "with the folder's generation_config.json as defaults; control bytes in the output are written "
                   "as escapes (\\n, \\xHH).", specs, n);
        return 0;
    }
    if (!args_parse("generate", argc, argv, 2, specs, n)) return 2;
    if (!f.prompt == !f.input) {
        fprintf(stderr, "brigade generate: give one of --prompt TEXT and --input FILE.jsonl\n");
        return 2;
    }
    if (f.batch_size < 1 || f.batch_size > 256) {
        fprintf(stderr, "brigade generate: --batch-size %lld is not in [1, 256]\n", (long long)f.batch_size);
        return 2;
    }
    if (f.overrides && !f.ipu_config) {
        fprintf(stderr, "brigade generate: --ipu-config-overrides needs --ipu-config\n");
        return 2;
    }
    if (!cli_trace_begin("generate", f.trace)) return 1;
    run r = {.json = f.json};
    brg_status st = cli_rank_flags_apply(&rf);
    if (st == BRG_OK) st = brg_model_load(f.model, &r.m);
    if (st == BRG_OK && !brg_decoder_supported(r.m))
        st = brg_error(BRG_ERR_UNSUPPORTED, "%s is a %s: generate needs GPT2LMHeadModel or T5ForConditionalGeneration",
                       f.model, r.m->ops->architecture);
    if (st == BRG_OK) {
        r.seq2seq = strcmp(r.m->ops->architecture, "T5ForConditionalGeneration") == 0;
        if (brg_tokenizer_load(f.model, &r.tok) != BRG_OK) brg_clear_error(); /* none: byte-level */
        if (!r.tok && r.m->vocab_size < 256)
            st = brg_error(BRG_ERR_INVALID_ARG,
                           "byte-level prompts need vocab_size >= 256 (the folder has no tokenizer)");
    }
    if (st == BRG_OK) st = build_config(&r, &f, specs, n);
    if (st == BRG_OK && f.ipu_config) st = load_placement(&r, f.ipu_config, f.overrides);
    if (st == BRG_OK) {
        /* Padding as the tokenizer pads (GPT-2's is its eos token), else the generation pad. */
        r.pad_id = -1;
        if (r.tok) {
            r.pad_id = brg_tokenizer_token_to_id(r.tok, r.seq2seq ? "<pad>" : "<|endoftext|>");
            if (r.pad_id >= r.m->vocab_size) r.pad_id = -1;
        }
        st = f.input ? read_input(&r, f.input) : add_prompt(&r, f.prompt, strlen(f.prompt), 0);
    }
    if (st == BRG_OK) {
        cli_progress_init(&r.progress, f.quiet || !f.input ? NULL : stderr, "generate", "prompts", r.n);
        st = generate_all(&r, f.batch_size);
        cli_progress_finish(&r.progress);
    }
    free_run(&r);
    st = cli_trace_end("generate", st);
    return st == BRG_OK ? 0 : cli_fail("generate");
}
