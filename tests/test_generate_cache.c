/* The KV caches: at every step the cached decoder's logits equal a full recompute of the
 * sequence so far. GPT-2: the decoder without a cache, and for unpadded rows the tape forward,
 * with left padding, after a beam-style row reorder; a left-padded row equals its prompt alone.
 * T5: the whole model through the tape (encoder included), right-padded encoder inputs, a
 * reorder, relu/tied and gated-gelu/untied. */
#include "brigade/generate.h"
#include "test_util.h"

enum { V = 97, T_MAX = 24 };

static brg_model *random_gpt2(uint64_t seed, int64_t layers) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = layers, c.n_head = 4, c.n_embd = 32, c.n_positions = T_MAX, c.vocab_size = V;
    c.initializer_range = 0.3f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, seed);
    return m;
}

static double max_diff(const float *a, const float *b, int64_t n, double *scale) {
    *scale = fmax(test_max_abs(b, n), 1.0);
    return test_max_abs_diff(a, b, n);
}

/* Logits of the last position of ids[0..n) through the tape forward (positions 0..n-1). */
static void tape_logits(brg_model *m, const int32_t *ids, int64_t n, float *out) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("test", 0, &a));
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    int64_t shape[2] = {1, n};
    brg_tensor in = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, (void *)ids);
    brg_bundle b = {.inputs = TEST_MAP("input_ids", &in)};
    CHECK_OK(brg_model_forward(m, tape, &b));
    if (b.logits) memcpy(out, (const float *)b.logits->data + (n - 1) * V, V * sizeof(float));
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

/* Three rows, left-padded prompts of 6, 4 and 2 tokens, then one token per step; cached and
 * uncached decoders side by side, a reorder halfway. */
static void test_cache_equals_recompute(void) {
    brg_model *m = random_gpt2(11, 3);
    if (!m) return;
    enum { R = 3, P = 6, STEPS = 12 };
    brg_decoder *cached = NULL, *full = NULL;
    CHECK_OK(brg_decoder_create(m, R, P + STEPS, true, &cached));
    CHECK_OK(brg_decoder_create(m, R, P + STEPS, false, &full));
    if (!cached || !full) return;
    int32_t ids[R * P];
    float mask[R * P];
    const int pads[R] = {0, 2, 4};
    brg_rng rng;
    brg_rng_seed(&rng, 5);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < P; t++) {
            ids[r * P + t] = t < pads[r] ? 0 : (int32_t)(brg_rng_next(&rng) % V);
            mask[r * P + t] = t < pads[r] ? 0.0f : 1.0f;
        }
    float a[R * V], b[R * V];
    CHECK_OK(brg_decoder_step(cached, ids, P, mask, a));
    CHECK_OK(brg_decoder_step(full, ids, P, mask, b));
    double scale, worst = 0;
    worst = fmax(worst, max_diff(a, b, R * V, &scale) / scale);
    for (int s = 0; s < STEPS; s++) {
        if (s == STEPS / 2) {
            const int32_t src[R] = {2, 0, 2};
            CHECK_OK(brg_decoder_reorder(cached, src));
            CHECK_OK(brg_decoder_reorder(full, src));
        }
        int32_t next[R];
        for (int r = 0; r < R; r++) next[r] = (int32_t)(brg_rng_next(&rng) % V);
        CHECK_OK(brg_decoder_step(cached, next, 1, NULL, a));
        CHECK_OK(brg_decoder_step(full, next, 1, NULL, b));
        double d = max_diff(a, b, R * V, &scale) / scale;
        CHECK_MSG(d <= 1e-5, "step %d: cached vs recomputed logits differ by %g (relative)", s, d);
        worst = fmax(worst, d);
    }
    CHECK(brg_decoder_length(cached) == P + STEPS);
    printf("KV cache vs recompute over %d steps: max relative difference %.3g\n", STEPS, worst);
    /* The cache is full: one more token is refused. */
    int32_t one[R] = {1, 2, 3};
    CHECK_ERR(brg_decoder_step(cached, one, 1, NULL, a), BRG_ERR_INVALID_ARG, "capacity");
    brg_decoder_destroy(cached);
    brg_decoder_destroy(full);
    brg_model_destroy(m);
}

/* An unpadded row against the tape forward at every length; the same prompt left-padded in a
 * batch gives the same logits. */
static void test_cache_equals_tape(void) {
    brg_model *m = random_gpt2(12, 2);
    if (!m) return;
    enum { P = 5, STEPS = 10, W = 8 };
    int32_t seq[P + STEPS];
    brg_rng rng;
    brg_rng_seed(&rng, 9);
    for (int t = 0; t < P + STEPS; t++) seq[t] = (int32_t)(brg_rng_next(&rng) % V);
    brg_decoder *alone = NULL, *batch = NULL;
    CHECK_OK(brg_decoder_create(m, 1, P + STEPS, true, &alone));
    CHECK_OK(brg_decoder_create(m, 2, W + STEPS, true, &batch));
    if (!alone || !batch) return;
    /* row 0: the prompt left-padded to W; row 1: W other tokens */
    int32_t ids[2 * W];
    float mask[2 * W];
    for (int t = 0; t < W; t++) {
        ids[t] = t < W - P ? 7 : seq[t - (W - P)];
        mask[t] = t < W - P ? 0.0f : 1.0f;
        ids[W + t] = (int32_t)(brg_rng_next(&rng) % V);
        mask[W + t] = 1.0f;
    }
    float a[V], b[2 * V], ref[V];
    CHECK_OK(brg_decoder_step(alone, seq, P, NULL, a));
    CHECK_OK(brg_decoder_step(batch, ids, W, mask, b));
    for (int s = 0;; s++) {
        tape_logits(m, seq, P + s, ref);
        double scale, d1 = max_diff(a, ref, V, &scale) / scale, d2 = max_diff(b, ref, V, &scale) / scale;
        if (s == STEPS) printf("vs tape forward: %.3g, left-padded %.3g (logit scale %.3g)\n", d1, d2, scale);
        CHECK_MSG(d1 <= 1e-5, "length %d: cached vs tape forward differ by %g", P + s, d1);
        CHECK_MSG(d2 <= 1e-5, "length %d: left-padded row vs tape forward differ by %g", P + s, d2);
        if (s == STEPS) break;
        int32_t next[2] = {seq[P + s], 3};
        CHECK_OK(brg_decoder_step(alone, next, 1, NULL, a));
        CHECK_OK(brg_decoder_step(batch, next, 1, NULL, b));
    }
    brg_decoder_destroy(alone);
    brg_decoder_destroy(batch);
    brg_model_destroy(m);
}

static brg_model *random_t5(uint64_t seed, bool gated) {
    brg_t5_config c;
    brg_t5_config_default(&c);
    c.vocab_size = V, c.d_model = 24, c.d_kv = 8, c.d_ff = 40, c.num_heads = 3, c.num_layers = 2;
    c.num_decoder_layers = 3, c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 12;
    c.decoder_start_token_id = 0, c.dropout_rate = 0;
    if (gated) {
        snprintf(c.feed_forward_proj, sizeof c.feed_forward_proj, "gated-gelu");
        snprintf(c.dense_act_fn, sizeof c.dense_act_fn, "gelu_new");
        c.act = BRG_T5_ACT_GELU_TANH, c.is_gated_act = true, c.tie_word_embeddings = false;
        c.scale_decoder_outputs = false;
    }
    brg_model *m = NULL;
    CHECK_OK(brg_t5_create(&c, &m));
    if (m) brg_model_init_weights(m, seed);
    return m;
}

/* T5: the encoder once and the self/cross caches against the whole model through the tape at
 * every step (right-padded encoder inputs, a reorder halfway). */
static void test_t5_cache(bool gated) {
    brg_model *m = random_t5(21 + gated, gated);
    if (!m) return;
    enum { R = 3, TE = 7, STEPS = 14 };
    brg_decoder *cached = NULL, *full = NULL;
    CHECK_OK(brg_decoder_create(m, R, STEPS + 1, true, &cached));
    CHECK_OK(brg_decoder_create(m, R, STEPS + 1, false, &full));
    if (!cached || !full) return;
    int32_t enc[R * TE];
    float mask[R * TE];
    const int lens[R] = {7, 3, 5};
    brg_rng rng;
    brg_rng_seed(&rng, 8);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TE; t++) {
            enc[r * TE + t] = t < lens[r] ? (int32_t)(brg_rng_next(&rng) % V) : 0;
            mask[r * TE + t] = t < lens[r] ? 1.0f : 0.0f;
        }
    int32_t tokens[R] = {0, 0, 0};
    CHECK_ERR(brg_decoder_step(cached, tokens, 1, NULL, NULL), BRG_ERR_INVALID_ARG, "the encoder has not run");
    CHECK_OK(brg_decoder_encode(cached, enc, TE, mask));
    CHECK_OK(brg_decoder_encode(full, enc, TE, mask));
    float a[R * V], b[R * V];
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        if (s == STEPS / 2) {
            const int32_t src[R] = {1, 1, 0};
            CHECK_OK(brg_decoder_reorder(cached, src));
            CHECK_OK(brg_decoder_reorder(full, src));
        }
        CHECK_OK(brg_decoder_step(cached, tokens, 1, NULL, a));
        CHECK_OK(brg_decoder_step(full, tokens, 1, NULL, b));
        double scale, d = max_diff(a, b, R * V, &scale) / scale;
        CHECK_MSG(d <= 1e-5, "T5 step %d: cached vs tape logits differ by %g (relative)", s, d);
        worst = fmax(worst, d);
        for (int r = 0; r < R; r++) tokens[r] = (int32_t)(brg_rng_next(&rng) % V);
    }
    printf("T5%s KV cache vs tape forward over %d steps: max relative difference %.3g\n",
           gated ? " (gated, untied)" : "", STEPS, worst);
    int32_t one[R] = {0};
    CHECK_ERR(brg_decoder_encode(cached, one, 1, NULL), BRG_ERR_INVALID_ARG, "runs before the first decoder step");
    brg_decoder_destroy(cached);
    brg_decoder_destroy(full);
    brg_model_destroy(m);
}

static void test_errors(void) {
    brg_model *m = random_gpt2(13, 1);
    if (!m) return;
    brg_decoder *d = NULL;
    CHECK_ERR(brg_decoder_create(m, 0, 4, true, &d), BRG_ERR_INVALID_ARG, "decoder of 0 rows");
    CHECK_OK(brg_decoder_create(m, 1, T_MAX + 4, true, &d));
    if (d) {
        float lg[V];
        int32_t bad = V;
        CHECK_ERR(brg_decoder_step(d, &bad, 1, NULL, lg), BRG_ERR_INVALID_ARG, "outside the vocabulary");
        CHECK(brg_decoder_length(d) == 0);
        int32_t ids[T_MAX + 1] = {0};
        CHECK_ERR(brg_decoder_step(d, ids, T_MAX + 1, NULL, lg), BRG_ERR_INVALID_ARG, "past the model's n_positions");
        CHECK(brg_decoder_length(d) == 0);
        CHECK_OK(brg_decoder_step(d, ids, T_MAX, NULL, lg));
        CHECK_ERR(brg_decoder_encode(d, ids, 2, NULL), BRG_ERR_INVALID_ARG, "has no encoder");
        const int32_t src = 1;
        CHECK_ERR(brg_decoder_reorder(d, &src), BRG_ERR_INVALID_ARG, "outside [0, 1)");
        brg_decoder_destroy(d);
    }
    brg_model_destroy(m);
    brg_bert_config bc;
    brg_bert_config_default(&bc, BRG_BERT_MASKED_LM);
    bc.num_hidden_layers = 1, bc.hidden_size = 8, bc.num_attention_heads = 2, bc.intermediate_size = 8;
    bc.vocab_size = 20, bc.max_position_embeddings = 8;
    brg_model *bert = NULL;
    CHECK_OK(brg_bert_create(&bc, &bert));
    CHECK(bert && !brg_decoder_supported(bert));
    if (bert) CHECK_ERR(brg_decoder_create(bert, 1, 4, true, &d), BRG_ERR_UNSUPPORTED, "generation needs");
    brg_model_destroy(bert);
}

int main(void) {
    test_cache_equals_recompute();
    test_cache_equals_tape();
    test_t5_cache(false);
    test_t5_cache(true);
    test_errors();
    return test_finish();
}
