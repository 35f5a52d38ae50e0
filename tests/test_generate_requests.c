/* brg_generate_requests: requests generated at once over pipeline stages and replicas give what
 * brg_generate gives for each alone (greedy, seeded sampling, beam search; GPT-2 and T5 split
 * over the stages, T5 with and without its caches; fp32 and the half compute types), bad
 * placements are refused, and a failing request is named while the others' results are
 * released. A decoder in a half compute type gives logits near fp32's, not them, for the
 * prompt (the GEMM's rounded operands) and for a cached step (the half weight copies). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/generate.h"
#include "test_util.h"

enum { V = 97, T_MAX = 40, REQUESTS = 7, PER = 3, PLEN = 6 };

static brg_model *random_gpt2(uint64_t seed) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 4, c.n_head = 4, c.n_embd = 32, c.n_positions = T_MAX, c.vocab_size = V;
    c.initializer_range = 0.3f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, seed);
    return m;
}

static brg_model *random_t5(uint64_t seed) {
    brg_t5_config c;
    brg_t5_config_default(&c);
    c.vocab_size = V, c.d_model = 24, c.d_kv = 8, c.d_ff = 40, c.num_heads = 3, c.num_layers = 2;
    c.num_decoder_layers = 2, c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 12;
    c.decoder_start_token_id = 0, c.dropout_rate = 0;
    brg_model *m = NULL;
    CHECK_OK(brg_t5_create(&c, &m));
    if (m) brg_model_init_weights(m, seed);
    return m;
}

/* REQUESTS requests of PER prompts each, of 2..PLEN tokens. */
typedef struct request_set {
    int32_t ids[REQUESTS][PER][PLEN];
    const int32_t *rows[REQUESTS][PER];
    int64_t lengths[REQUESTS][PER];
    uint64_t keys[REQUESTS][PER];
    brg_prompts prompts[REQUESTS];
} request_set;

static void make_requests(request_set *s, uint64_t seed) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int i = 0; i < REQUESTS; i++) {
        for (int p = 0; p < PER; p++) {
            s->lengths[i][p] = 2 + (int64_t)(brg_rng_next(&rng) % (PLEN - 1));
            for (int t = 0; t < PLEN; t++) s->ids[i][p][t] = 1 + (int32_t)(brg_rng_next(&rng) % (V - 1));
            s->rows[i][p] = s->ids[i][p];
            s->keys[i][p] = (uint64_t)(i * PER + p);
        }
        s->prompts[i] = (brg_prompts){.n = PER, .ids = s->rows[i], .lengths = s->lengths[i], .keys = s->keys[i],
                                      .pad_id = -1};
    }
}

static bool same(const brg_generation *a, const brg_generation *b) {
    if (a->n_sequences != b->n_sequences) return false;
    for (int64_t s = 0; s < a->n_sequences; s++) {
        if (a->lengths[s] != b->lengths[s] || a->scores[s] != b->scores[s]) return false;
        if (memcmp(a->ids[s], b->ids[s], (size_t)a->lengths[s] * sizeof(int32_t)) != 0) return false;
    }
    return true;
}

/* Every request through brg_generate alone, then all at once on the placement. */
static void check_equal(brg_model *m, const brg_generation_config *cfg, const brg_generate_placement *pl,
                        const char *what) {
    request_set s;
    make_requests(&s, 3);
    brg_generation alone[REQUESTS], together[REQUESTS];
    for (int i = 0; i < REQUESTS; i++) CHECK_OK(brg_generate(m, cfg, &s.prompts[i], &alone[i]));
    CHECK_OK(brg_generate_requests(m, cfg, s.prompts, REQUESTS, pl, together));
    int64_t tokens = 0;
    for (int i = 0; i < REQUESTS; i++) {
        CHECK_MSG(same(&alone[i], &together[i]), "%s: request %d differs from brg_generate's", what, i);
        for (int64_t q = 0; q < together[i].n_sequences; q++) tokens += together[i].lengths[q];
        brg_generation_free(&alone[i]);
        brg_generation_free(&together[i]);
    }
    CHECK_MSG(tokens > REQUESTS * PER, "%s: only %lld tokens generated", what, (long long)tokens);
}

/* Logits of the prompt (ids[0..n-1]) and of one cached step after it, in `type`. */
static void decoder_logits(brg_model *m, bool encoder, brg_dtype type, const int32_t *ids, int64_t n, float *prompt,
                           float *step) {
    brg_decoder *d = NULL;
    CHECK_OK(brg_decoder_create(m, 1, T_MAX, true, &d));
    if (!d) return;
    CHECK_OK(brg_decoder_set_compute_dtype(d, type));
    const int32_t enc[4] = {3, 9, 27, 81 % V};
    if (encoder) CHECK_OK(brg_decoder_encode(d, enc, 4, NULL));
    CHECK_OK(brg_decoder_step(d, ids, n - 1, NULL, prompt));
    CHECK_OK(brg_decoder_step(d, ids + n - 1, 1, NULL, step));
    CHECK_ERR(brg_decoder_set_compute_dtype(d, BRG_DTYPE_F32), BRG_ERR_INVALID_ARG, "before its first step");
    brg_decoder_destroy(d);
}

static void check_near(const float *half, const float *full, const char *what) {
    double diff = 0, scale = 0;
    for (int i = 0; i < V; i++) {
        diff = fmax(diff, fabs((double)half[i] - full[i]));
        scale = fmax(scale, fabs((double)full[i]));
    }
    CHECK_MSG(diff > 0 && diff <= 0.03 * scale, "%s: logits differ from fp32's by %.3g (largest %.3g)", what, diff,
              scale);
}

static void check_half_logits(brg_model *m, bool encoder, const char *name) {
    const int32_t ids[5] = {4, 8, 15, 16, 23};
    float full[2][V], bf16[2][V], f16[2][V];
    decoder_logits(m, encoder, BRG_DTYPE_F32, ids, 5, full[0], full[1]);
    decoder_logits(m, encoder, BRG_DTYPE_BF16, ids, 5, bf16[0], bf16[1]);
    decoder_logits(m, encoder, BRG_DTYPE_F16, ids, 5, f16[0], f16[1]);
    char what[64];
    for (int k = 0; k < 2; k++) {
        snprintf(what, sizeof what, "%s bf16 %s", name, k ? "cached step" : "prompt");
        check_near(bf16[k], full[k], what);
        snprintf(what, sizeof what, "%s fp16 %s", name, k ? "cached step" : "prompt");
        check_near(f16[k], full[k], what);
    }
    brg_decoder *d = NULL;
    CHECK_OK(brg_decoder_create(m, 1, T_MAX, true, &d));
    CHECK_ERR(brg_decoder_set_compute_dtype(d, BRG_DTYPE_I32), BRG_ERR_INVALID_ARG, "not I32");
    brg_decoder_destroy(d);
}

static void test_gpt2(void) {
    brg_model *m = random_gpt2(5);
    if (!m) return;
    /* blocks: embeddings, 4 layers, head */
    const int split[6] = {0, 0, 0, 1, 1, 1}, three[6] = {0, 0, 1, 1, 2, 2};
    const brg_generate_placement pipe2 = {2, split, 1}, pipe2x2 = {2, split, 2}, pipe3 = {3, three, 1};
    const brg_generate_placement one = {1, NULL, 1}, rep3 = {1, NULL, 3};
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = 9, cfg.n_eos = 0, cfg.pad_token_id = 0;
    check_equal(m, &cfg, &one, "greedy, one device");
    check_equal(m, &cfg, &pipe2, "greedy, 2 stages");
    check_equal(m, &cfg, &pipe2x2, "greedy, 2 stages x 2 replicas");
    check_equal(m, &cfg, &pipe3, "greedy, 3 stages");
    check_equal(m, &cfg, &rep3, "greedy, 3 replicas");
    cfg.do_sample = true, cfg.top_k = 20, cfg.temperature = 0.8f, cfg.seed = 17;
    check_equal(m, &cfg, &pipe2x2, "sampling, 2 stages x 2 replicas");
    cfg.do_sample = false, cfg.num_beams = 3, cfg.num_return_sequences = 2, cfg.length_penalty = 0.6f;
    cfg.eos_token_ids[0] = 5, cfg.n_eos = 1;
    check_equal(m, &cfg, &pipe2, "beam search, 2 stages");
    cfg.compute_dtype = BRG_DTYPE_BF16;
    check_equal(m, &cfg, &pipe2x2, "bf16 beam search, 2 stages x 2 replicas");
    cfg.compute_dtype = BRG_DTYPE_F16;
    check_equal(m, &cfg, &pipe3, "fp16 beam search, 3 stages");
    cfg.compute_dtype = BRG_DTYPE_F32;
    check_half_logits(m, false, "GPT-2");
    /* bad placements */
    request_set s;
    make_requests(&s, 4);
    brg_generation outs[REQUESTS];
    const int falling[6] = {0, 1, 1, 0, 1, 1};
    const brg_generate_placement bad_order = {2, falling, 1}, bad_count = {0, NULL, 1}, past = {1, split, 1};
    CHECK_ERR(brg_generate_requests(m, &cfg, s.prompts, REQUESTS, &bad_order, outs), BRG_ERR_INVALID_ARG,
              "stages must rise");
    CHECK_ERR(brg_generate_requests(m, &cfg, s.prompts, REQUESTS, &bad_count, outs), BRG_ERR_INVALID_ARG,
              "0 stages");
    CHECK_ERR(brg_generate_requests(m, &cfg, s.prompts, REQUESTS, &past, outs), BRG_ERR_INVALID_ARG,
              "placed on stage 1");
    /* request 4 holds a token outside the vocabulary: it is named, every result released */
    s.ids[4][1][0] = V + 3;
    CHECK_ERR(brg_generate_requests(m, &cfg, s.prompts, REQUESTS, &pipe2x2, outs), BRG_ERR_INVALID_ARG,
              "request 4: prompt 1: token 100 is outside the vocabulary");
    for (int i = 0; i < REQUESTS; i++) CHECK(outs[i].n_sequences == 0 && outs[i].ids == NULL);
    brg_model_destroy(m);
}

static void test_t5(void) {
    brg_model *m = random_t5(9);
    if (!m) return;
    int *stages = calloc((size_t)m->n_blocks, sizeof *stages);
    for (int b = m->n_blocks / 2; b < m->n_blocks; b++) stages[b] = 1;
    const brg_generate_placement pipe2x2 = {2, stages, 2};
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = 7, cfg.n_eos = 0, cfg.decoder_start_token_id = 0, cfg.pad_token_id = 0;
    check_equal(m, &cfg, &pipe2x2, "T5 greedy, 2 stages x 2 replicas");
    cfg.num_beams = 2;
    check_equal(m, &cfg, &pipe2x2, "T5 beam search, 2 stages x 2 replicas");
    cfg.compute_dtype = BRG_DTYPE_BF16;
    check_equal(m, &cfg, &pipe2x2, "T5 bf16 beam search, 2 stages x 2 replicas");
    cfg.num_beams = 1, cfg.use_cache = false;
    check_equal(m, &cfg, &pipe2x2, "T5 bf16 without caches, 2 stages x 2 replicas");
    cfg.compute_dtype = BRG_DTYPE_F32;
    check_equal(m, &cfg, &pipe2x2, "T5 without caches, 2 stages x 2 replicas");
    check_half_logits(m, true, "T5");
    free(stages);
    brg_model_destroy(m);
}

int main(void) {
    test_gpt2();
    test_t5();
    return test_finish();
}
