/* Generation against transformers: fixtures tools/generate_fixtures.py wrote (a random-init
 * GPT-2 and T5 with a tokenizer, each case one generate() call: greedy, beam search with
 * length_penalty 1.0 and 0.6, early_stopping true and "never", num_return_sequences, eos lists,
 * min_new_tokens, max_length, repetition_penalty, no_repeat_ngram_size, batches of prompts).
 * The prompts go through brigade's tokenizer, the config is the folder's generation_config.json
 * with the case's kwargs over it, and the output rebuilt as generate() returns it (padded prompt,
 * new tokens, fill) must equal transformers' token for token; beam scores to 1e-4. Every case
 * runs with and without the KV cache. With arguments, checks those folders (make parity passes
 * freshly generated ones). */
#include <cJSON.h>

#include "brigade/generate.h"
#include "brigade/tokenizer.h"
#include "io/json.h"
#include "parity_util.h"

/* The row generate() returns for sequence s of a batch whose longest prompt is `width`. */
static int64_t rebuild_row(const brg_generation *g, int64_t s, const int32_t *prompt, int64_t plen, int64_t gen_width,
                           int32_t *row) {
    int64_t n = 0;
    if (g->decoder_start_id >= 0) row[n++] = g->decoder_start_id;
    for (int64_t t = 0; t < g->prompt_width - plen; t++) row[n++] = g->prompt_pad_id;
    for (int64_t t = 0; g->prompt_width && t < plen; t++) row[n++] = prompt[t];
    for (int64_t t = 0; t < gen_width; t++) row[n++] = t < g->lengths[s] ? g->ids[s][t] : g->fill_id;
    return n;
}

static void print_row(const char *what, const int32_t *row, int64_t n) {
    fprintf(stderr, "    %s:", what);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)row[i]);
    fputc('\n', stderr);
}

typedef struct prompt_set {
    int64_t n;
    int32_t *ids[16];
    int64_t lengths[16];
} prompt_set;

static void free_prompts(prompt_set *p) {
    for (int64_t i = 0; i < p->n; i++) free(p->ids[i]);
    p->n = 0;
}

/* Encodes the case's prompts (checked against the ids transformers' tokenizer gave). */
static bool encode_prompts(const brg_tokenizer *tok, const cJSON *c, const char *name, prompt_set *p) {
    const cJSON *texts = cJSON_GetObjectItem(c, "prompts"), *ref = cJSON_GetObjectItem(c, "prompt_ids");
    p->n = 0;
    const cJSON *t;
    int64_t i = 0;
    cJSON_ArrayForEach(t, texts) {
        if (i >= 16) break;
        brg_encoding e;
        CHECK_OK(brg_tokenizer_encode(tok, t->valuestring, strlen(t->valuestring), true, &e));
        const cJSON *want = cJSON_GetArrayItem(ref, (int)i);
        bool same = (int)e.n == cJSON_GetArraySize(want);
        for (size_t k = 0; same && k < e.n; k++) same = e.ids[k] == cJSON_GetArrayItem(want, (int)k)->valueint;
        CHECK_MSG(same, "%s: prompt %lld tokenized differently", name, (long long)i);
        p->ids[i] = malloc((e.n ? e.n : 1) * sizeof(int32_t));
        memcpy(p->ids[i], e.ids, e.n * sizeof(int32_t));
        p->lengths[i] = (int64_t)e.n;
        brg_encoding_free(&e);
        i++;
        p->n = i;
        if (!same) return false;
    }
    return true;
}

static void check_case(brg_model *m, const brg_tokenizer *tok, const char *dir, const cJSON *c, bool use_cache,
                       int32_t pad_id) {
    char name[256];
    snprintf(name, sizeof name, "%s %s%s", dir, cJSON_GetObjectItem(c, "name")->valuestring,
             use_cache ? "" : " (no cache)");
    prompt_set p;
    if (!encode_prompts(tok, c, name, &p)) {
        free_prompts(&p);
        return;
    }
    brg_generation_config cfg;
    CHECK_OK(brg_generation_config_for_model(m, dir, &cfg));
    char *kw = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "kwargs"));
    CHECK_OK(brg_generation_config_update_from_json(&cfg, kw, strlen(kw), "kwargs"));
    free(kw);
    cfg.use_cache = use_cache;
    const brg_prompts batch = {.n = p.n, .ids = (const int32_t *const *)p.ids, .lengths = p.lengths, .pad_id = pad_id};
    brg_generation g;
    brg_status st = brg_generate(m, &cfg, &batch, &g);
    CHECK_MSG(st == BRG_OK, "%s: %s", name, brg_last_error());
    if (st != BRG_OK) {
        free_prompts(&p);
        return;
    }
    const cJSON *seqs = cJSON_GetObjectItem(c, "sequences"), *scores = cJSON_GetObjectItem(c, "sequences_scores");
    CHECK_MSG(g.n_sequences == cJSON_GetArraySize(seqs), "%s: %lld sequences, transformers %d", name,
              (long long)g.n_sequences, cJSON_GetArraySize(seqs));
    int64_t gen_width = 0;
    for (int64_t s = 0; s < g.n_sequences; s++) gen_width = g.lengths[s] > gen_width ? g.lengths[s] : gen_width;
    const int64_t per_prompt = g.n_sequences / p.n;
    int bad = 0;
    for (int64_t s = 0; s < g.n_sequences && s < cJSON_GetArraySize(seqs); s++) {
        int32_t row[512];
        const int64_t pi = s / per_prompt;
        const int64_t n = rebuild_row(&g, s, p.ids[pi], p.lengths[pi], gen_width, row);
        const cJSON *want = cJSON_GetArrayItem(seqs, (int)s);
        bool same = n == cJSON_GetArraySize(want);
        for (int64_t k = 0; same && k < n; k++) same = row[k] == cJSON_GetArrayItem(want, (int)k)->valueint;
        if (!same && bad++ < 4) {
            fprintf(stderr, "  %s: sequence %lld differs\n", name, (long long)s);
            print_row("brigade     ", row, n);
            int32_t ref[512];
            int64_t rn = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, want) if (rn < 512) ref[rn++] = e->valueint;
            print_row("transformers", ref, rn);
        }
        if (scores) {
            const double want_score = cJSON_GetArrayItem(scores, (int)s)->valuedouble;
            CHECK_MSG(fabs(g.scores[s] - want_score) <= 1e-4, "%s: sequence %lld score %.6f, transformers %.6f", name,
                      (long long)s, g.scores[s], want_score);
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %lld sequences differ from transformers", name, bad, (long long)g.n_sequences);
    brg_generation_free(&g);
    free_prompts(&p);
}

static void check_fixture(const char *dir) {
    brg_model *m = NULL;
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    CHECK_OK(brg_tokenizer_load(dir, &tok));
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    cJSON *doc = NULL;
    CHECK_OK(brg_json_load_file(path, 64u << 20, &doc));
    if (m && tok && doc) {
        /* The tokenizer pads as the fixture's does: GPT-2 with <|endoftext|>, T5 with <pad>. */
        int32_t pad = brg_tokenizer_token_to_id(tok, "<|endoftext|>");
        if (pad < 0) pad = brg_tokenizer_token_to_id(tok, "<pad>");
        const cJSON *cases = cJSON_GetObjectItem(doc, "cases"), *c;
        int n = 0;
        cJSON_ArrayForEach(c, cases) {
            check_case(m, tok, dir, c, true, pad);
            check_case(m, tok, dir, c, false, pad);
            n++;
        }
        CHECK_MSG(n > 0, "%s: no cases", dir);
        printf("%s: %d cases\n", dir, n);
    }
    cJSON_Delete(doc);
    brg_tokenizer_free(tok);
    brg_model_destroy(m);
}

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/generate_*", 2, check_fixture); }
