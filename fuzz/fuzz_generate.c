/* Generation (brigade/generate.h) under arbitrary generate() options and prompts, on a small
 * random GPT-2 and T5: the input's first byte picks the model (bit 0) and whether the prompts also
 * go through a 2-stage pipeline (bit 1); then generation_config.json text up to a NUL byte, read
 * over the defaults; then the prompts' tokens, one byte each (modulo the vocabulary), byte 0xFF
 * starting the next prompt (at most 4). Lengths and beams are capped so an input stays fast.
 *
 * Beyond "no crash, leak, hang or UB report", for a configuration that validates: a refusal says
 * one line; the sequences number prompts x num_return_sequences, their tokens are in the
 * vocabulary, none is longer than the new-token limit, and an eos only ends one; beam search
 * returns each prompt's sequences best first; the same call again gives the same bits; the
 * longest prompts (not padded) alone give what they get in the batch; and the pipeline gives
 * what one device gives. */
#include "brigade/generate.h"
#include "brigade/gpt2.h"
#include "brigade/t5.h"
#include "fuzz_util.h"

enum { VOCAB = 61, POSITIONS = 24, MAX_PROMPTS = 4, MAX_NEW = 6, MAX_BEAMS = 5 };

static brg_model *gpt2(void) {
    static brg_model *m;
    if (!m) {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.vocab_size = VOCAB, c.n_positions = POSITIONS, c.n_embd = 16, c.n_layer = 2, c.n_head = 2;
        c.initializer_range = 0.5f, c.bos_token_id = 1, c.eos_token_id = 2;
        if (brg_gpt2_create(&c, &m) != BRG_OK) abort();
        brg_model_init_weights(m, 7);
    }
    return m;
}

static brg_model *t5(void) {
    static brg_model *m;
    if (!m) {
        brg_t5_config c;
        brg_t5_config_default(&c);
        c.vocab_size = VOCAB, c.d_model = 16, c.d_kv = 8, c.d_ff = 24, c.num_heads = 2, c.num_layers = 2;
        c.num_decoder_layers = 2, c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 12;
        c.n_positions = POSITIONS, c.decoder_start_token_id = 0, c.dropout_rate = 0;
        if (brg_t5_create(&c, &m) != BRG_OK) abort();
        brg_model_init_weights(m, 7);
    }
    return m;
}

/* A model's blocks, the first half on stage 0. */
static const int *two_stages(const brg_model *m) {
    static int stage[64];
    if (m->n_blocks > 64) abort();
    for (int b = 0; b < m->n_blocks; b++) stage[b] = b >= m->n_blocks / 2;
    return stage;
}

typedef struct prompts {
    int32_t ids[MAX_PROMPTS][POSITIONS];
    const int32_t *rows[MAX_PROMPTS];
    int64_t lengths[MAX_PROMPTS];
    brg_prompts batch;
} prompts;

/* The prompts of the input's tail: empty ones are skipped, each capped to the positions. */
static void read_prompts(const uint8_t *p, size_t n, prompts *out) {
    int64_t count = 0;
    for (size_t i = 0; i <= n && count < MAX_PROMPTS; i++) {
        if (i < n && p[i] != 0xFF) {
            if (out->lengths[count] < POSITIONS) out->ids[count][out->lengths[count]++] = (int32_t)(p[i] % VOCAB);
        } else if (out->lengths[count] > 0) {
            out->rows[count] = out->ids[count];
            count++;
        }
    }
    out->batch = (brg_prompts){.n = count, .ids = out->rows, .lengths = out->lengths, .pad_id = -1};
}

/* Lengths, beams and sequences no larger than an input can afford. */
static void cap(brg_generation_config *c) {
    if (c->max_new_tokens < 0 || c->max_new_tokens > MAX_NEW) c->max_new_tokens = MAX_NEW;
    c->max_length = -1;
    if (c->min_new_tokens > MAX_NEW) c->min_new_tokens = MAX_NEW;
    if (c->min_length > POSITIONS) c->min_length = POSITIONS;
    if (c->num_beams > MAX_BEAMS) c->num_beams = MAX_BEAMS;
    if (c->num_return_sequences > MAX_BEAMS) c->num_return_sequences = MAX_BEAMS;
}

static bool is_eos(const brg_generation_config *c, int32_t id) {
    for (int e = 0; e < c->n_eos; e++)
        if (c->eos_token_ids[e] == id) return true;
    return false;
}

static void check_shape(const brg_generation_config *c, int64_t n_prompts, const brg_generation *g) {
    const int64_t per = c->num_return_sequences;
    if (g->n_sequences != n_prompts * per) abort();
    for (int64_t s = 0; s < g->n_sequences; s++) {
        if (g->lengths[s] < 0 || g->lengths[s] > c->max_new_tokens) abort();
        for (int64_t t = 0; t < g->lengths[s]; t++) {
            const int32_t id = g->ids[s][t];
            if (id < 0 || id >= VOCAB || (t + 1 < g->lengths[s] && is_eos(c, id))) abort();
        }
        if (c->num_beams > 1 && s % per > 0 && g->scores[s] > g->scores[s - 1]) abort();
    }
}

static bool same_sequence(const brg_generation *a, int64_t i, const brg_generation *b, int64_t j) {
    return a->lengths[i] == b->lengths[j] && memcmp(&a->scores[i], &b->scores[j], sizeof(float)) == 0 &&
           memcmp(a->ids[i], b->ids[j], (size_t)a->lengths[i] * sizeof(int32_t)) == 0;
}

static bool same(const brg_generation *a, const brg_generation *b) {
    if (a->n_sequences != b->n_sequences) return false;
    for (int64_t s = 0; s < a->n_sequences; s++)
        if (!same_sequence(a, s, b, s)) return false;
    return true;
}

static int64_t batch_width(const prompts *p) {
    int64_t width = 0;
    for (int64_t i = 0; i < p->batch.n; i++) width = p->lengths[i] > width ? p->lengths[i] : width;
    return width;
}

/* The longest prompts alone give their sequences of the batch: their rows are not padded, and
 * the batch's limits (positions, min_length, no_repeat_ngram_size's padded rows) are theirs. A
 * shorter prompt is padded there, and its masked positions change how its sums are grouped, so
 * its logits equal its own to rounding only, as in transformers (tests/test_generate_cache.c
 * holds them to 1e-5). */
static void check_alone(brg_model *m, const brg_generation_config *c, const prompts *p, const brg_generation *all) {
    const int64_t width = batch_width(p);
    for (int64_t i = 0; i < p->batch.n; i++) {
        if (p->lengths[i] < width) continue;
        const uint64_t key = (uint64_t)i; /* its sampling stream in the batch */
        const brg_prompts one = {.n = 1, .ids = &p->rows[i], .lengths = &p->lengths[i], .keys = &key, .pad_id = -1};
        brg_generation g;
        if (brg_generate(m, c, &one, &g) != BRG_OK) abort();
        for (int64_t s = 0; s < c->num_return_sequences; s++)
            if (!same_sequence(&g, s, all, i * c->num_return_sequences + s)) abort();
        brg_generation_free(&g);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *json = data + 1, *nul = memchr(json, 0, size - 1);
    if (!nul) return 0;
    brg_model *m = data[0] & 1 ? t5() : gpt2();
    brg_generation_config c;
    brg_generation_config_default(&c);
    if (brg_generation_config_update_from_json(&c, (const char *)json, (size_t)(nul - json), "fuzz") != BRG_OK) {
        fuzz_check_refusal();
        brg_clear_error();
        return 0;
    }
    cap(&c);
    prompts p = {0};
    read_prompts(nul + 1, size - (size_t)(nul + 1 - data), &p);
    if (p.batch.n == 0 || brg_generation_config_validate(&c, m) != BRG_OK) {
        brg_clear_error();
        return 0;
    }
    brg_generation g, again;
    if (brg_generate(m, &c, &p.batch, &g) != BRG_OK) {
        fuzz_check_refusal();
        brg_clear_error();
        return 0;
    }
    check_shape(&c, p.batch.n, &g);
    if (brg_generate(m, &c, &p.batch, &again) != BRG_OK || !same(&g, &again)) abort();
    brg_generation_free(&again);
    check_alone(m, &c, &p, &g);
    if (data[0] & 2) {
        const brg_generate_placement pl = {2, two_stages(m), 1};
        if (brg_generate_requests(m, &c, &p.batch, 1, &pl, &again) != BRG_OK || !same(&g, &again)) abort();
        brg_generation_free(&again);
    }
    brg_generation_free(&g);
    return 0;
}
