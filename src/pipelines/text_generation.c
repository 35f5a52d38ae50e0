/* The generation tasks, through brg_generate:
 *
 * text-generation, as transformers 5's TextGenerationPipeline (GPT2LMHeadModel): the prompt
 *   (after config.json's "prefix", if any) encoded without special tokens; generate() gets the
 *   caller's keyword arguments, and the pipeline's defaults max_new_tokens=256, do_sample=True,
 *   temperature=0.7 (only when sampling) and the tokenizer's pad token for each parameter that
 *   neither the caller nor the model's generation config (generation_config.json's keys, the
 *   special tokens of config.json) sets (max_new_tokens not when max_length is set). Result:
 *   [{"generated_text": prompt + the new tokens decoded without special tokens}] (return_full_text
 *   false: the new text alone), one per returned sequence. v5 ignores task_specific_params.
 *
 * text2text-generation, summarization, translation[_XX_to_YY], as transformers 4.57's
 *   Text2TextGenerationPipeline and its subclasses (T5ForConditionalGeneration): the generation
 *   config is the model's with the pipeline's max_new_tokens=256 and num_beams=4 over it
 *   (max_new_tokens dropped when the model sets a max_length other than 20), then config.json's
 *   task_specific_params[task] (its "prefix" goes before every input; "translation" alone takes
 *   the first translation_* entry), the tokenizer's pad token when the config has none, and the
 *   caller's keyword arguments last. The input (prefix + text) is encoded with special tokens;
 *   the output decoded without special tokens nor clean-up: [{"generated_text"}],
 *   [{"summary_text"}] or [{"translation_text"}]. Sampling draws from brigade's generator, not
 *   torch's (see brigade/generate.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/generate.h"
#include "io/json.h"
#include "pipelines/task_internal.h"

typedef struct state {
    brg_generation_config cfg;
    char *prefix;          /* NULL: none */
    const char *out_key;   /* "generated_text", "summary_text", "translation_text" */
    bool seq2seq;
} state;

static bool fits_causal(const brg_model *m) { return strcmp(m->ops->architecture, "GPT2LMHeadModel") == 0; }
static bool fits_seq2seq(const brg_model *m) { return strcmp(m->ops->architecture, "T5ForConditionalGeneration") == 0; }

static bool has_key(const cJSON *j, const char *key) {
    const cJSON *v = j ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
    return v && !cJSON_IsNull(v);
}

/* The caller's generate() keyword arguments, parsed once (NULL: none). */
static brg_status kwargs_of(const brg_task_pipeline *p, cJSON **out) {
    *out = NULL;
    if (!p->opts.generate_kwargs) return BRG_OK;
    BRG_TRY(brg_json_parse(p->opts.generate_kwargs, strlen(p->opts.generate_kwargs), "generate kwargs", out));
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return brg_error(BRG_ERR_INVALID_ARG, "generate kwargs: not a JSON object");
    }
    return BRG_OK;
}

static brg_status apply_kwargs(brg_task_pipeline *p, brg_generation_config *cfg) {
    if (!p->opts.generate_kwargs) return BRG_OK;
    return brg_generation_config_update_from_json(cfg, p->opts.generate_kwargs, strlen(p->opts.generate_kwargs),
                                                  "generate kwargs");
}

static brg_status set_prefix(state *s, const char *prefix) {
    free(s->prefix);
    s->prefix = prefix ? strdup(prefix) : NULL;
    return !prefix || s->prefix ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for the prefix");
}

static brg_status config_prefix(const brg_task_pipeline *p, state *s) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->config, "prefix");
    return set_prefix(s, cJSON_IsString(v) ? v->valuestring : NULL);
}

/* v5's _prepare_generate_kwargs: which parameters the model's generation config sets. */
static brg_status model_sets(const brg_task_pipeline *p, const char *key, bool *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/generation_config.json", p->dir);
    struct stat sb;
    *out = false;
    if (strcmp(key, "pad_token_id") == 0) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->config, "pad_token_id");
        if (cJSON_IsNumber(v)) *out = true;
    }
    if (stat(path, &sb) != 0) return BRG_OK;
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j));
    *out = *out || has_key(j, key);
    cJSON_Delete(j);
    return BRG_OK;
}

static brg_status setup_causal(brg_task_pipeline *p) {
    state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the pipeline");
    p->state = s;
    s->out_key = "generated_text";
    BRG_TRY(config_prefix(p, s));
    brg_generation_config *c = &s->cfg;
    BRG_TRY(brg_generation_config_for_model(p->model, p->dir, c));
    cJSON *kw;
    BRG_TRY(kwargs_of(p, &kw));
    bool set[5];
    static const char *const keys[5] = {"max_new_tokens", "max_length", "do_sample", "temperature", "pad_token_id"};
    brg_status st = BRG_OK;
    for (int i = 0; st == BRG_OK && i < 5; i++) {
        st = model_sets(p, keys[i], &set[i]);
        set[i] = set[i] || has_key(kw, keys[i]);
    }
    cJSON_Delete(kw);
    BRG_TRY(st);
    /* The pipeline's defaults where nobody set the parameter; the caller's arguments over all. */
    if (!set[2]) c->do_sample = true;
    BRG_TRY(apply_kwargs(p, c));
    const bool sample = c->do_sample;
    if (!set[0] && !set[1]) c->max_new_tokens = 256;
    if (!set[3] && sample) c->temperature = 0.7f;
    if (!set[4] && p->tokens.pad_id >= 0 && p->tokens.pad_id < p->model->vocab_size) c->pad_token_id = p->tokens.pad_id;
    c->compute_dtype = p->opts.inference.compute_dtype; /* --precision: the decode's products */
    return brg_generation_config_validate(c, p->model);
}

/* 4.57's task_specific_params entry for the task (NULL: none); "translation" alone becomes the
 * first translation_* entry. */
static const cJSON *task_params(const brg_task_pipeline *p) {
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(p->config, "task_specific_params");
    if (!cJSON_IsObject(all)) return NULL;
    if (strcmp(p->task, "translation") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, all) if (strncmp(e->string, "translation", 11) == 0) return e;
        return NULL;
    }
    return cJSON_GetObjectItemCaseSensitive(all, p->task);
}

static brg_status setup_seq2seq(brg_task_pipeline *p, const char *out_key) {
    state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the pipeline");
    p->state = s;
    s->out_key = out_key;
    s->seq2seq = true;
    BRG_TRY(config_prefix(p, s));
    brg_generation_config *c = &s->cfg;
    BRG_TRY(brg_generation_config_for_model(p->model, p->dir, c));
    /* _prepare_generation_config(_default_generation_config, use_model_defaults=True): the
     * pipeline's non-default values stay, every other field is the model's. */
    c->max_new_tokens = 256;
    c->num_beams = 4;
    if (c->max_length > 0 && c->max_length != 20) c->max_new_tokens = -1;
    const cJSON *tp = task_params(p);
    if (tp) {
        if (!cJSON_IsObject(tp))
            return brg_error(BRG_ERR_FORMAT, "%s/config.json: task_specific_params.%s is not an object", p->dir,
                             tp->string);
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(tp, "prefix");
        if (cJSON_IsString(prefix)) BRG_TRY(set_prefix(s, prefix->valuestring));
        char *text = cJSON_PrintUnformatted(tp);
        if (!text) return brg_error(BRG_ERR_OOM, "no memory for task_specific_params");
        char ctx[160];
        snprintf(ctx, sizeof ctx, "config.json task_specific_params.%s", tp->string);
        brg_status st = brg_generation_config_update_from_json(c, text, strlen(text), ctx);
        free(text);
        BRG_TRY(st);
    }
    if (c->pad_token_id < 0 && p->tokens.pad_id >= 0 && p->tokens.pad_id < p->model->vocab_size)
        c->pad_token_id = p->tokens.pad_id;
    BRG_TRY(apply_kwargs(p, c));
    c->compute_dtype = p->opts.inference.compute_dtype; /* --precision: the decode's products */
    return brg_generation_config_validate(c, p->model);
}

static brg_status setup_text2text(brg_task_pipeline *p) { return setup_seq2seq(p, "generated_text"); }
static brg_status setup_summarization(brg_task_pipeline *p) { return setup_seq2seq(p, "summary_text"); }
static brg_status setup_translation(brg_task_pipeline *p) { return setup_seq2seq(p, "translation_text"); }

static void destroy(brg_task_pipeline *p) {
    state *s = p->state;
    if (s) free(s->prefix);
    free(s);
}

/* ---- running --------------------------------------------------------------------------------- */

typedef struct prompt {
    int32_t *ids;
    int64_t n;
} prompt;

static brg_status encode_prompt(brg_task_pipeline *p, const char *text, int64_t index, prompt *out) {
    const state *s = p->state;
    char *joined = NULL;
    if (s->prefix) {
        const size_t a = strlen(s->prefix), b = strlen(text);
        if (!(joined = malloc(a + b + 1))) return brg_error(BRG_ERR_OOM, "no memory for a prompt");
        memcpy(joined, s->prefix, a);
        memcpy(joined + a, text, b + 1);
    }
    brg_encoding e;
    brg_status st = task_encode(p, joined ? joined : text, NULL, s->seq2seq, index, &e);
    free(joined);
    BRG_TRY(st);
    if (e.n == 0) st = brg_error(BRG_ERR_INVALID_ARG, "%s %lld: the prompt encodes to no tokens", p->in_name, (long long)index);
    out->n = (int64_t)e.n;
    out->ids = st == BRG_OK ? malloc(e.n * sizeof *out->ids) : NULL;
    if (st == BRG_OK && !out->ids) st = brg_error(BRG_ERR_OOM, "no memory for a prompt");
    if (st == BRG_OK) memcpy(out->ids, e.ids, e.n * sizeof *out->ids);
    brg_encoding_free(&e);
    return st;
}

static brg_status write_results(brg_task_pipeline *p, const brg_task_input *in, const brg_generation *g, int64_t nb,
                                char **results) {
    const state *s = p->state;
    const int64_t per = g->n_sequences / nb;
    const bool clean = p->opts.clean_up_tokenization_spaces >= 0 ? p->opts.clean_up_tokenization_spaces
                                                                 : (s->seq2seq ? false : p->tokens.clean_up);
    for (int64_t r = 0; r < nb; r++) {
        task_json j;
        BRG_TRY(task_json_open(&j));
        task_json_raw(&j, "[");
        brg_status st = BRG_OK;
        for (int64_t k = 0; st == BRG_OK && k < per; k++) {
            const int64_t q = r * per + k;
            char *text = NULL;
            st = task_decode(p, g->ids[q], (size_t)g->lengths[q], true, clean, &text);
            if (st != BRG_OK) break;
            task_json_raw(&j, k ? ", {\"" : "{\"");
            task_json_raw(&j, s->out_key);
            task_json_raw(&j, "\": ");
            if (!s->seq2seq && !p->opts.no_full_text) {
                const size_t a = strlen(in[r].text), b = strlen(text);
                char *full = malloc(a + b + 1);
                if (!full) {
                    free(text);
                    st = brg_error(BRG_ERR_OOM, "no memory for a result");
                    break;
                }
                memcpy(full, in[r].text, a);
                memcpy(full + a, text, b + 1);
                free(text);
                text = full;
            }
            task_json_str(&j, text);
            task_json_raw(&j, "}");
            free(text);
        }
        task_json_raw(&j, "]");
        brg_status closed = task_json_close(&j, &results[r]);
        BRG_TRY(st);
        BRG_TRY(closed);
    }
    return BRG_OK;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    state *s = p->state;
    const int64_t B = p->opts.batch_size;
    prompt *pr = calloc((size_t)B, sizeof *pr);
    const int32_t **ids = calloc((size_t)B, sizeof *ids);
    int64_t *lengths = calloc((size_t)B, sizeof *lengths);
    uint64_t *keys = calloc((size_t)B, sizeof *keys);
    brg_status st = pr && ids && lengths && keys ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for a batch");
    for (int64_t b0 = 0; st == BRG_OK && b0 < n; b0 += B) {
        const int64_t nb = n - b0 < B ? n - b0 : B;
        int64_t done = 0;
        while (st == BRG_OK && done < nb) {
            st = encode_prompt(p, in[b0 + done].text, first + b0 + done, &pr[done]);
            if (st != BRG_OK) break;
            ids[done] = pr[done].ids;
            lengths[done] = pr[done].n;
            keys[done] = (uint64_t)(first + b0 + done); /* an input samples the same in any batch */
            done++;
        }
        const int32_t pad = p->tokens.pad_id >= 0 && p->tokens.pad_id < p->model->vocab_size ? p->tokens.pad_id : -1;
        const brg_prompts batch = {.n = nb, .ids = ids, .lengths = lengths, .keys = keys, .pad_id = pad};
        brg_generation g;
        if (st == BRG_OK) {
            st = brg_generate(p->model, &s->cfg, &batch, &g);
            if (st != BRG_OK) st = brg_error_wrap(st, "%ss %lld to %lld", p->in_name, (long long)(first + b0),
                                                  (long long)(first + b0 + nb - 1));
            if (st == BRG_OK) {
                st = write_results(p, in + b0, &g, nb, results + b0);
                brg_generation_free(&g);
            }
        }
        for (int64_t r = 0; r < done; r++) free(pr[r].ids);
    }
    free(pr);
    free(ids);
    free(lengths);
    free(keys);
    return st;
}

const task_def task_text_generation = {
    .name = "text-generation",
    .info = {.name = "text-generation",
             .inputs = "text",
             .models = "GPT2LMHeadModel",
             .returns = "[{\"generated_text\"}]",
             .follows = "transformers 5",
             .implemented = true},
    .fits = fits_causal,
    .setup = setup_causal,
    .run = run,
    .destroy = destroy,
};

const task_def task_text2text = {
    .name = "text2text-generation",
    .info = {.name = "text2text-generation",
             .inputs = "text",
             .models = "T5ForConditionalGeneration",
             .returns = "[{\"generated_text\"}]",
             .follows = "transformers 4.57",
             .implemented = true},
    .fits = fits_seq2seq,
    .setup = setup_text2text,
    .run = run,
    .destroy = destroy,
};

const task_def task_summarization = {
    .name = "summarization",
    .info = {.name = "summarization",
             .inputs = "text",
             .models = "T5ForConditionalGeneration",
             .returns = "[{\"summary_text\"}]",
             .follows = "transformers 4.57",
             .implemented = true},
    .fits = fits_seq2seq,
    .setup = setup_summarization,
    .run = run,
    .destroy = destroy,
};

const task_def task_translation = {
    .name = "translation",
    .info = {.name = "translation",
             .inputs = "text",
             .models = "T5ForConditionalGeneration",
             .returns = "[{\"translation_text\"}]",
             .follows = "transformers 4.57",
             .implemented = true},
    .fits = fits_seq2seq,
    .setup = setup_translation,
    .run = run,
    .destroy = destroy,
};
