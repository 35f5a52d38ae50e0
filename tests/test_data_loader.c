/* The host data loader: training with 0, 1 and 3 workers gives bit-identical losses and final
 * weights (a shuffled causal LM on tokenized text over several epochs, a plain causal LM read in
 * order on two replicas, a masked LM whose masks are drawn every step); a bad row a worker meets
 * stops the run with the message the host thread gives; a stop request while workers prefetch,
 * and a diverged run, end cleanly with the same step as without workers. */
#include "brigade/bert.h"
#include "brigade/data_loader.h"
#include "brigade/rng.h"
#include "brigade/trainer.h"
#include "text_data_util.h"

enum { MAX_STEPS = 16, MAX_PARAMS = 128 };

static brg_model *tiny_gpt2(int64_t vocab) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = vocab;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 5);
    return m;
}

static brg_model *tiny_bert(int64_t vocab) {
    brg_bert_config c;
    brg_bert_config_default(&c, BRG_BERT_MASKED_LM);
    c.vocab_size = vocab, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 32, c.max_position_embeddings = 16;
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (m) brg_model_init_weights(m, 7);
    return m;
}

typedef struct run_out {
    brg_status status;
    char error[1024];
    int64_t steps;
    double losses[MAX_STEPS];
    float *weights[MAX_PARAMS];
    int n_params;
    volatile sig_atomic_t stop; /* set after stop_after steps (0: never) */
    int64_t stop_after;
} run_out;

static void record(void *ctx, int64_t step, double loss, float lr) {
    (void)lr;
    run_out *o = ctx;
    if (step >= 1 && step <= MAX_STEPS) o->losses[step - 1] = loss;
    if (o->stop_after && step == o->stop_after) o->stop = 1;
}

static void base_options(brg_train_options *o, int64_t steps) {
    brg_train_options_default(o);
    o->steps = steps;
    o->seed = 11;
    o->optimizer.lr = 1e-2;
}

/* Trains a fresh model from `make` and keeps what the run did. */
static void train(brg_model *(*make)(int64_t), int64_t vocab, const brg_dataset *d, const brg_train_options *base,
                  int workers, run_out *out) {
    memset(out, 0, sizeof *out);
    brg_model *m = make(vocab);
    if (!m) return;
    brg_train_options o = *base;
    o.dataloader_workers = workers;
    o.on_step = record;
    o.on_step_ctx = out;
    o.stop = &out->stop;
    out->stop_after = base->on_step_ctx ? *(const int64_t *)base->on_step_ctx : 0;
    brg_train_result r;
    out->status = brg_train(m, d, &o, &r);
    snprintf(out->error, sizeof out->error, "%s", out->status == BRG_OK ? "" : brg_last_error());
    out->steps = r.steps;
    out->n_params = m->n_params < MAX_PARAMS ? m->n_params : MAX_PARAMS;
    for (int i = 0; i < out->n_params; i++) {
        const brg_tensor *t = m->params[i].tensor;
        const size_t bytes = (size_t)brg_tensor_numel(t) * sizeof(float);
        out->weights[i] = malloc(bytes);
        memcpy(out->weights[i], t->data, bytes);
    }
    brg_model_destroy(m);
}

static void free_out(run_out *o) {
    for (int i = 0; i < o->n_params; i++) free(o->weights[i]);
}

/* Bit for bit: the status, the message, every step's loss and every weight. */
static void compare(const run_out *ref, const run_out *got, const char *what, int workers) {
    CHECK_MSG(ref->status == got->status && strcmp(ref->error, got->error) == 0,
              "%s, %d workers: status %d '%s', without workers %d '%s'", what, workers, got->status, got->error,
              ref->status, ref->error);
    CHECK_MSG(ref->steps == got->steps, "%s, %d workers: %lld steps, without %lld", what, workers,
              (long long)got->steps, (long long)ref->steps);
    CHECK_MSG(memcmp(ref->losses, got->losses, sizeof ref->losses) == 0, "%s, %d workers: the losses differ", what,
              workers);
    CHECK(ref->n_params == got->n_params);
}

static void compare_weights(const run_out *ref, const run_out *got, brg_model *(*make)(int64_t), int64_t vocab,
                            const char *what, int workers) {
    brg_model *m = make(vocab); /* for the parameters' sizes */
    if (!m) return;
    int differ = 0;
    for (int i = 0; i < ref->n_params && i < got->n_params; i++)
        differ += memcmp(ref->weights[i], got->weights[i],
                         (size_t)brg_tensor_numel(m->params[i].tensor) * sizeof(float)) != 0;
    CHECK_MSG(differ == 0, "%s, %d workers: %d of %d weights differ", what, workers, differ, ref->n_params);
    brg_model_destroy(m);
}

/* The same run with 0, 1 and 3 workers. */
static void check_identical(const char *what, brg_model *(*make)(int64_t), int64_t vocab, const brg_dataset *d,
                            const brg_train_options *o) {
    run_out ref, got;
    train(make, vocab, d, o, 0, &ref);
    CHECK_MSG(ref.status == BRG_OK, "%s: %s", what, ref.error);
    CHECK_MSG(ref.losses[0] > 0 && ref.losses[o->steps - 1] < ref.losses[0], "%s: the loss did not fall (%g, %g)",
              what, ref.losses[0], ref.losses[o->steps - 1]);
    const int workers[] = {1, 3};
    for (size_t k = 0; k < sizeof workers / sizeof workers[0]; k++) {
        train(make, vocab, d, o, workers[k], &got);
        compare(&ref, &got, what, workers[k]);
        compare_weights(&ref, &got, make, vocab, what, workers[k]);
        free_out(&got);
    }
    free_out(&ref);
}

static const char *text_lines(void) {
    static char text[8192];
    static const char *const words[] = {"the", "pipeline", "keeps", "devices", "fed", "with", "batches", "of",
                                        "tokens", "while", "workers", "prepare", "steps", "ahead", "in", "order"};
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    text[0] = 0;
    for (int line = 0; line < 40; line++) {
        for (int w = 0; w < 6; w++) {
            strcat(text, words[brg_rng_next(&rng) % 16]);
            strcat(text, w == 5 ? ".\n" : " ");
        }
    }
    return text;
}

/* A causal LM on text through GPT-2's tokenizer, shuffled, over more than one epoch. */
static void check_causal_text(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/gpt2_bpe", &tok));
    brg_dataset *d = NULL;
    if (tok) CHECK_OK(brg_dataset_load_text_tokens(text_data_write("loader.txt", text_lines()), tok, 50257, 8, &d));
    brg_tokenizer_free(tok);
    if (!d) return;
    brg_train_options o;
    base_options(&o, 10);
    o.micro_batch = 4, o.accumulation = 3, o.device_iterations = 3;
    CHECK_MSG(d->rows / 12 < o.steps, "%lld rows: one epoch holds all 10 steps", (long long)d->rows);
    check_identical("shuffled causal LM text", tiny_gpt2, 50257, d, &o);
    brg_dataset_free(d);
}

static brg_dataset *rows_data(int64_t rows, int64_t seq, int64_t vocab, int64_t bad_row) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(rows * seq));
    brg_rng rng;
    brg_rng_seed(&rng, 5);
    for (int64_t i = 0; i < rows * seq; i++) ids[i] = (int32_t)(brg_rng_next(&rng) % (uint64_t)vocab);
    if (bad_row >= 0) ids[bad_row * seq + 3] = (int32_t)vocab + 2;
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_from_rows(ids, NULL, NULL, rows, seq, &d));
    free(ids);
    return d;
}

/* A causal LM read in order, on two replicas. */
static void check_causal_plain(void) {
    brg_dataset *d = rows_data(24, 8, 64, -1);
    if (!d) return;
    brg_train_options o;
    base_options(&o, 6);
    o.shuffle = false, o.replicas = 2, o.micro_batch = 2;
    check_identical("causal LM in order, 2 replicas", tiny_gpt2, 64, d, &o);
    brg_dataset_free(d);
}

/* A masked LM through BERT's tokenizer: the masks are drawn for each step's rows. */
static void check_masked_lm(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/bert_uncased", &tok));
    const brg_text_format fmt = {.seq_len = 8, .vocab_size = 1405, .pad_id = 0, .token_type_ids = true};
    brg_mlm_masking mask = brg_mlm_masking_default(4, 1405, 9);
    brg_dataset *d = NULL;
    if (tok) CHECK_OK(brg_dataset_load_text_mlm(text_data_write("mlm.txt", text_lines()), tok, &fmt, &mask, false, &d));
    brg_tokenizer_free(tok);
    if (!d) return;
    CHECK(d->masking != NULL);
    brg_train_options o;
    base_options(&o, 6);
    o.micro_batch = 2, o.accumulation = 2, o.device_iterations = 2;
    check_identical("masked LM", tiny_bert, 1405, d, &o);
    brg_dataset_free(d);
}

/* Row 9 holds a token past the vocabulary: step 5 (rows 8, 9) fails, after 4 applied steps. */
static void check_worker_error(void) {
    brg_dataset *d = rows_data(16, 8, 64, 9);
    if (!d) return;
    brg_train_options o;
    base_options(&o, 8);
    o.shuffle = false, o.micro_batch = 2, o.device_iterations = 4;
    run_out ref, got;
    train(tiny_gpt2, 64, d, &o, 0, &ref);
    CHECK_MSG(ref.status == BRG_ERR_INVALID_ARG && ref.steps == 4, "status %d after %lld steps: %s", ref.status,
              (long long)ref.steps, ref.error);
    CHECK_MSG(strstr(ref.error, "dataset row 9: input_ids holds token 66, outside the model's vocabulary [0, 64)"),
              "message: %s", ref.error);
    for (int workers = 1; workers <= 3; workers += 2) {
        train(tiny_gpt2, 64, d, &o, workers, &got);
        compare(&ref, &got, "a bad row", workers);
        free_out(&got);
    }
    free_out(&ref);
    brg_dataset_free(d);
}

/* A stop request after step 2 while 3 workers have up to 4 steps prepared or waiting for a slot. */
static void check_stop(void) {
    brg_dataset *d = rows_data(64, 8, 64, -1);
    if (!d) return;
    brg_train_options o;
    base_options(&o, 12);
    o.device_iterations = 4;
    int64_t after = 2;
    o.on_step_ctx = &after;
    run_out ref, got;
    train(tiny_gpt2, 64, d, &o, 0, &ref);
    CHECK_MSG(ref.status == BRG_ERR_INTERRUPTED && ref.steps == 2, "status %d after %lld steps: %s", ref.status,
              (long long)ref.steps, ref.error);
    train(tiny_gpt2, 64, d, &o, 3, &got);
    compare(&ref, &got, "a stop request", 3);
    compare_weights(&ref, &got, tiny_gpt2, 64, "a stop request", 3);
    free_out(&got);
    free_out(&ref);
    brg_dataset_free(d);
}

/* A learning rate that blows the weights up: the run stops at the same step, workers or not. */
static void check_diverged(void) {
    brg_dataset *d = rows_data(64, 8, 64, -1);
    if (!d) return;
    brg_train_options o;
    base_options(&o, 12);
    o.optimizer = brg_optimizer_config_default(BRG_OPTIMIZER_SGD);
    o.optimizer.lr = 1e30;
    o.device_iterations = 3;
    run_out ref, got;
    train(tiny_gpt2, 64, d, &o, 0, &ref);
    CHECK_MSG(ref.status == BRG_ERR_DIVERGED && ref.steps < 12, "status %d after %lld steps: %s", ref.status,
              (long long)ref.steps, ref.error);
    train(tiny_gpt2, 64, d, &o, 3, &got);
    compare(&ref, &got, "a diverged run", 3);
    free_out(&got);
    free_out(&ref);
    brg_dataset_free(d);
}

/* The loader on its own: bad options are refused with one line. */
static void check_options(void) {
    brg_dataset *d = rows_data(8, 8, 64, -1);
    brg_model *m = tiny_gpt2(64);
    if (!d || !m) return;
    brg_data_loader *l = NULL;
    brg_data_loader_options o = {.workers = BRG_DATA_LOADER_MAX_WORKERS + 1, .prefetch = 1, .replicas = 1,
                                 .accumulation = 1, .micro = 2, .first_step = 0, .end_step = 4};
    CHECK_ERR(brg_data_loader_create(d, m, &o, &l), BRG_ERR_INVALID_ARG, "dataloader workers 65 is not in [0, 64]");
    o.workers = 2, o.micro = 9;
    CHECK_ERR(brg_data_loader_create(d, m, &o, &l), BRG_ERR_INVALID_ARG, "one step needs 9 rows");
    CHECK(l == NULL);
    /* Destroyed before any step was read: the workers stop while waiting for a free slot. */
    o.micro = 2;
    CHECK_OK(brg_data_loader_create(d, m, &o, &l));
    brg_data_loader_destroy(l);
    brg_model_destroy(m);
    brg_dataset_free(d);
}

int main(void) {
    check_options();
    check_causal_text();
    check_causal_plain();
    check_masked_lm();
    check_worker_error();
    check_stop();
    check_diverged();
    return test_finish();
}
