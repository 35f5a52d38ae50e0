/* Generation pieces without transformers: the logits processors and warpers against their
 * definitions, the generation config (defaults, generation_config.json, validation), seeded
 * sampling (the same seed gives the same tokens run to run, whatever the batch, with or without
 * the cache), and brg_generate's refusals. */
#include "brigade/generate.h"
#include "models/generate_internal.h"
#include "test_util.h"

enum { V = 11 };

static gen_job job_for(brg_generation_config *c, int64_t min_length) {
    gen_job j = {.cfg = *c, .vocab = V, .min_length = min_length};
    return j;
}

static int count_finite(const float *s, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += s[i] != -INFINITY;
    return k;
}

static void test_processors(void) {
    brg_generation_config c;
    brg_generation_config_default(&c);
    const int32_t seq[6] = {1, 3, 3, 7, 1, 3};
    /* repetition_penalty: each seen token once, negative scores multiplied; the padding skipped */
    c.repetition_penalty = 2.0f;
    gen_job j = job_for(&c, 0);
    gen_proc p;
    CHECK_OK(gen_proc_init(&p, &j, false, 1));
    float s[V] = {1, 4, 1, -2, 1, 1, 1, -6, 1, 1, 1};
    gen_process(&p, s, seq, 6, 1); /* seq[0] = 1 is padding, but 1 reappears later */
    CHECK(s[1] == 2.0f && s[3] == -4.0f && s[7] == -12.0f && s[0] == 1.0f);
    gen_proc_free(&p);
    /* no_repeat_ngram_size 2: after ... 1 3, the bigrams (1,3) and (3,3), (3,7), (7,1) exist;
     * the last token 3 was followed by 3 and 7, so both are banned */
    brg_generation_config_default(&c);
    c.no_repeat_ngram_size = 2;
    j = job_for(&c, 0);
    CHECK_OK(gen_proc_init(&p, &j, false, 1));
    float t[V] = {0};
    gen_process(&p, t, seq, 6, 0);
    CHECK(t[3] == -INFINITY && t[7] == -INFINITY && count_finite(t, V) == V - 2);
    gen_proc_free(&p);
    /* min_length: every eos id banned while shorter */
    brg_generation_config_default(&c);
    c.n_eos = 2, c.eos_token_ids[0] = 4, c.eos_token_ids[1] = 9;
    j = job_for(&c, 7);
    CHECK_OK(gen_proc_init(&p, &j, false, 1));
    float u[V] = {0};
    gen_process(&p, u, seq, 6, 0);
    CHECK(u[4] == -INFINITY && u[9] == -INFINITY && count_finite(u, V) == V - 2);
    float u2[V] = {0};
    const int32_t seq7[7] = {1, 2, 3, 4, 5, 6, 7};
    gen_process(&p, u2, seq7, 7, 0);
    CHECK(count_finite(u2, V) == V);
    gen_proc_free(&p);
}

static void test_warpers(void) {
    brg_generation_config c;
    brg_generation_config_default(&c);
    const int32_t seq[1] = {0};
    /* top_k 3 keeps ties with the third largest */
    c.top_k = 3;
    gen_job j = job_for(&c, 0);
    gen_proc p;
    CHECK_OK(gen_proc_init(&p, &j, true, 1));
    float s[V] = {0, 5, 1, 4, 4, 2, 3, 0, 0, 0, -1};
    gen_process(&p, s, seq, 1, 0);
    CHECK(count_finite(s, V) == 3 && s[1] == 5 && s[3] == 4 && s[4] == 4);
    float tie[V] = {0, 5, 1, 4, 3, 2, 3, 0, 0, 0, -1};
    gen_process(&p, tie, seq, 1, 0);
    CHECK(count_finite(tie, V) == 4 && tie[4] == 3 && tie[6] == 3);
    gen_proc_free(&p);
    /* temperature 0.5 doubles; top_p 0.7 over probabilities .5 .3 .2: .5 + .3 reach it */
    brg_generation_config_default(&c);
    c.top_k = 0, c.temperature = 0.5f, c.top_p = 0.7f;
    j = job_for(&c, 0);
    CHECK_OK(gen_proc_init(&p, &j, true, 1));
    float q[V];
    for (int i = 0; i < V; i++) q[i] = -INFINITY;
    q[2] = logf(0.5f) / 2, q[5] = logf(0.3f) / 2, q[8] = logf(0.2f) / 2;
    gen_process(&p, q, seq, 1, 0);
    CHECK(count_finite(q, V) == 2 && q[8] == -INFINITY && fabsf(q[2] - logf(0.5f)) < 1e-6f);
    gen_proc_free(&p);
    /* typical_p keeps tokens closest to the entropy first: uniform-ish mass, one outlier goes */
    brg_generation_config_default(&c);
    c.top_k = 0, c.typical_p = 0.5f;
    j = job_for(&c, 0);
    CHECK_OK(gen_proc_init(&p, &j, true, 1));
    float w[V] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6};
    gen_process(&p, w, seq, 1, 0);
    CHECK(w[10] == 6); /* the outlier is the typical token here (most of the mass) */
    CHECK(count_finite(w, V) == 1);
    gen_proc_free(&p);
}

static void test_sampling_draws(void) {
    brg_rng a, b;
    gen_rng_seed(&a, 42, 3, 0);
    gen_rng_seed(&b, 42, 3, 0);
    double scratch[V];
    float s[V] = {0, 1, 2, -INFINITY, 0.5f, 0, 0, 0, 0, 0, 3};
    int counts[V] = {0}, mismatches = 0;
    for (int i = 0; i < 20000; i++) {
        int32_t x = gen_sample(&a, s, V, scratch), y = gen_sample(&b, s, V, scratch);
        mismatches += x != y;
        counts[x]++;
    }
    CHECK(mismatches == 0);
    CHECK(counts[3] == 0);
    /* frequencies follow softmax: token 10 (e^3) about e times token 2 (e^2) */
    CHECK(fabs((double)counts[10] / counts[2] - exp(1.0)) < 0.25);
    gen_rng_seed(&b, 42, 4, 0);
    int differ = 0;
    for (int i = 0; i < 64; i++) differ += gen_sample(&a, s, V, scratch) != gen_sample(&b, s, V, scratch);
    CHECK(differ > 0);
    int32_t out[4];
    CHECK(gen_sample_distinct(&a, s, V, 4, out, scratch) == 4);
    CHECK(out[0] != out[1] && out[0] != out[2] && out[1] != out[2] && out[2] != out[3] && out[0] != out[3]);
    float two[V];
    for (int i = 0; i < V; i++) two[i] = -INFINITY;
    two[1] = two[6] = 0;
    CHECK(gen_sample_distinct(&a, two, V, 4, out, scratch) == 2);
}

static brg_model *tiny_gpt2(void) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 32, c.vocab_size = 50, c.initializer_range = 0.5f;
    c.bos_token_id = c.eos_token_id = 49;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 77);
    return m;
}

static bool same_generation(const brg_generation *a, int64_t i, const brg_generation *b, int64_t j) {
    if (a->lengths[i] != b->lengths[j]) return false;
    return memcmp(a->ids[i], b->ids[j], (size_t)a->lengths[i] * sizeof(int32_t)) == 0;
}

static void test_seeded_sampling(brg_model *m) {
    brg_generation_config c;
    CHECK_OK(brg_generation_config_for_model(m, NULL, &c));
    c.do_sample = true, c.max_new_tokens = 12, c.temperature = 1.5f, c.top_k = 20, c.top_p = 0.95f, c.seed = 1234;
    c.n_eos = 0, c.num_return_sequences = 2;
    const int32_t p0[3] = {5, 6, 7}, p1[5] = {1, 2, 3, 4, 5};
    const int32_t *both[2] = {p0, p1}, *only1[1] = {p1};
    const int64_t lb[2] = {3, 5}, l1[1] = {5};
    const uint64_t keys[2] = {0, 1}, key1[1] = {1};
    brg_generation g1, g2, g3, g4;
    const brg_prompts batch = {.n = 2, .ids = both, .lengths = lb, .keys = keys, .pad_id = -1};
    const brg_prompts alone = {.n = 1, .ids = only1, .lengths = l1, .keys = key1, .pad_id = -1};
    CHECK_OK(brg_generate(m, &c, &batch, &g1));
    CHECK_OK(brg_generate(m, &c, &batch, &g2));
    CHECK_OK(brg_generate(m, &c, &alone, &g3));
    c.use_cache = false;
    CHECK_OK(brg_generate(m, &c, &batch, &g4));
    CHECK(g1.n_sequences == 4 && g3.n_sequences == 2);
    for (int64_t s = 0; s < 4 && g1.ids && g2.ids && g4.ids; s++) {
        CHECK_MSG(same_generation(&g1, s, &g2, s), "run to run: sequence %lld", (long long)s);
        CHECK_MSG(same_generation(&g1, s, &g4, s), "cache vs none: sequence %lld", (long long)s);
    }
    /* prompt 1 alone (left-padded nowhere) samples what it samples in the batch */
    if (g1.ids && g3.ids) {
        CHECK(same_generation(&g1, 2, &g3, 0) && same_generation(&g1, 3, &g3, 1));
        CHECK(!same_generation(&g1, 2, &g1, 3)); /* the two samples of one prompt differ */
    }
    c.use_cache = true, c.seed = 1235;
    brg_generation g5;
    CHECK_OK(brg_generate(m, &c, &batch, &g5));
    if (g5.ids && g1.ids) CHECK(!same_generation(&g1, 0, &g5, 0) || !same_generation(&g1, 2, &g5, 2));
    /* beam sampling: reproducible too */
    c.num_beams = 3, c.num_return_sequences = 2, c.n_eos = 1, c.eos_token_ids[0] = 9;
    brg_generation b1, b2;
    CHECK_OK(brg_generate(m, &c, &batch, &b1));
    CHECK_OK(brg_generate(m, &c, &batch, &b2));
    for (int64_t s = 0; s < 4 && b1.ids && b2.ids; s++) CHECK(same_generation(&b1, s, &b2, s));
    brg_generation_free(&g1);
    brg_generation_free(&g2);
    brg_generation_free(&g3);
    brg_generation_free(&g4);
    brg_generation_free(&g5);
    brg_generation_free(&b1);
    brg_generation_free(&b2);
}

static void test_generate_errors(brg_model *m) {
    brg_generation_config c;
    CHECK_OK(brg_generation_config_for_model(m, NULL, &c));
    CHECK(c.n_eos == 1 && c.eos_token_ids[0] == 49 && c.bos_token_id == 49 && c.pad_token_id == -1);
    int32_t longp[32] = {0};
    const int32_t *pp[1] = {longp};
    int64_t len = 32;
    brg_prompts one = {.n = 1, .ids = pp, .lengths = &len, .pad_id = -1};
    brg_generation g;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG,
              "the prompt is 32 tokens and the model takes at most 32");
    len = 0;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "prompt 0 is empty");
    len = 3;
    longp[1] = 50;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "outside the vocabulary");
    longp[1] = 0;
    c.max_length = 3;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "max_length is 3");
    c.max_length = -1;
    c.num_beams = 2, c.num_return_sequences = 3;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "num_return_sequences 3 is more than num_beams 2");
    c.num_beams = 1;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "needs sampling or beam search");
    c.num_return_sequences = 1, c.eos_token_ids[0] = 50;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "eos_token_id 50 is outside");
    c.eos_token_ids[0] = 49;
    one.pad_id = 60;
    CHECK_ERR(brg_generate(m, &c, &one, &g), BRG_ERR_INVALID_ARG, "pad id 60");
    one.pad_id = -1;
    /* max_new_tokens past the positions stops at the last one */
    c.max_new_tokens = 100, c.n_eos = 0;
    CHECK_OK(brg_generate(m, &c, &one, &g));
    if (g.lengths) CHECK(g.lengths[0] == 32 - 3);
    brg_generation_free(&g);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_config_files(brg_model *m) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/generate_cfg", test_tmp_dir());
    snprintf(path, sizeof path, "mkdir -p '%s'", dir);
    CHECK(system(path) == 0);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    write_text(path, "{\"eos_token_id\": [3, 4], \"pad_token_id\": 2, \"num_beams\": 4, \"early_stopping\": \"never\","
                     " \"length_penalty\": 0.6, \"max_length\": null, \"top_k\": 7, \"foo\": 1,"
                     " \"transformers_version\": \"5.24.0\"}");
    brg_generation_config c;
    CHECK_OK(brg_generation_config_for_model(m, dir, &c));
    CHECK(c.n_eos == 2 && c.eos_token_ids[0] == 3 && c.eos_token_ids[1] == 4 && c.pad_token_id == 2);
    CHECK(c.num_beams == 4 && c.early_stopping == BRG_EARLY_STOPPING_NEVER && c.top_k == 7 && c.max_length == -1);
    CHECK(fabsf(c.length_penalty - 0.6f) < 1e-7f && c.bos_token_id == 49);
    write_text(path, "{\"early_stopping\": \"sometimes\"}");
    CHECK_ERR(brg_generation_config_for_model(m, dir, &c), BRG_ERR_FORMAT, "early_stopping must be");
    write_text(path, "{\"suppress_tokens\": [1, 2]}");
    CHECK_ERR(brg_generation_config_for_model(m, dir, &c), BRG_ERR_UNSUPPORTED, "'suppress_tokens' is set");
    write_text(path, "{\"num_beam_groups\": 1, \"renormalize_logits\": false, \"eos_token_id\": \"x\"}");
    CHECK_ERR(brg_generation_config_for_model(m, dir, &c), BRG_ERR_FORMAT, "eos_token_id must be");
    write_text(path, "{\"num_beams\": 2.5}");
    CHECK_ERR(brg_generation_config_for_model(m, dir, &c), BRG_ERR_FORMAT, "num_beams");
    brg_generation_config_default(&c);
    CHECK_OK(brg_generation_config_update_from_json(&c, "{\"top_p\": 1.5}", 14, "kw"));
    CHECK_ERR(brg_generation_config_validate(&c, m), BRG_ERR_INVALID_ARG, "top_p 1.5");
    CHECK_ERR(brg_generation_config_update_from_json(&c, "{\"top_p\": 1.5,}", 15, "kw"), BRG_ERR_FORMAT, "kw");
}

int main(void) {
    test_processors();
    test_warpers();
    test_sampling_draws();
    brg_model *m = tiny_gpt2();
    if (m) {
        test_seeded_sampling(m);
        test_generate_errors(m);
        test_config_files(m);
    }
    brg_model_destroy(m);
    return test_finish();
}
