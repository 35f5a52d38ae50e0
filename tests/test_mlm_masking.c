/* Masked-LM masking (DataCollatorForLanguageModeling's rule) and masked-LM text datasets: over
 * a large sample the selection, [MASK], random and unchanged rates lie within 5 standard
 * deviations of 15% / 80% / 10% / 10%; special and padding tokens are never selected; labels are
 * the original id where selected and -100 elsewhere; the masks are the same for the same seed,
 * epoch and row (whatever the batch layout) and new every epoch; rows are run_mlm.py's. */
#include "brigade/bert.h"
#include "text_data_util.h"

#define VOCAB 1000
#define MASK_ID 4

static double sigmas(double count, double n, double p) { return fabs(count - n * p) / sqrt(n * p * (1 - p)); }

static void check_rates(void) {
    enum { ROWS = 2000, T = 128 };
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, VOCAB, 7);
    CHECK_OK(brg_mlm_masking_validate(&m));
    int32_t *ids = malloc(sizeof(int32_t) * ROWS * T), *orig = malloc(sizeof(int32_t) * ROWS * T);
    int32_t *labels = malloc(sizeof(int32_t) * ROWS * T);
    uint8_t *never = malloc(ROWS * T);
    for (int64_t i = 0; i < ROWS * T; i++) {
        orig[i] = ids[i] = 5 + (int32_t)((i * 7919) % (VOCAB - 5)); /* never the mask id itself */
        never[i] = i % T == 0 || i % T == T - 1 || i % 17 == 3;     /* [CLS], [SEP], padding */
    }
    for (int64_t r = 0; r < ROWS; r++) brg_mlm_mask_row(&m, 0, r, ids + r * T, never + r * T, labels + r * T, T);
    double candidates = 0, selected = 0, masked = 0, random = 0, kept = 0;
    int64_t bad_special = 0, bad_label = 0, bad_range = 0;
    for (int64_t i = 0; i < ROWS * T; i++) {
        if (ids[i] < 0 || ids[i] >= VOCAB) bad_range++;
        if (never[i]) {
            bad_special += ids[i] != orig[i] || labels[i] != -100;
            continue;
        }
        candidates++;
        if (labels[i] == -100) {
            bad_label += ids[i] != orig[i]; /* an unselected token is never changed */
            continue;
        }
        bad_label += labels[i] != orig[i];
        selected++;
        if (ids[i] == MASK_ID) masked++;
        else if (ids[i] != orig[i]) random++;
        else kept++;
    }
    CHECK_MSG(bad_special == 0 && bad_label == 0 && bad_range == 0, "special %lld, labels %lld, range %lld",
              (long long)bad_special, (long long)bad_label, (long long)bad_range);
    CHECK_MSG(sigmas(selected, candidates, 0.15) < 5, "selected %.0f of %.0f", selected, candidates);
    CHECK_MSG(sigmas(masked, selected, 0.8) < 5, "[MASK] %.0f of %.0f", masked, selected);
    /* A random token equal to the original one (1 in VOCAB) counts as kept. */
    CHECK_MSG(sigmas(random, selected, 0.1 * (1 - 1.0 / VOCAB)) < 5, "random %.0f of %.0f", random, selected);
    CHECK_MSG(sigmas(kept, selected, 0.1 + 0.1 / VOCAB) < 5, "kept %.0f of %.0f", kept, selected);
    free(ids);
    free(orig);
    free(labels);
    free(never);
}

/* Returns how many of n positions the masks of (seed, epoch, row) select, in sel. */
static int64_t draw(uint64_t seed, int64_t epoch, int64_t row, int32_t *sel, int64_t n) {
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, VOCAB, seed);
    int32_t ids[256];
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) ids[i] = 10 + (int32_t)i;
    brg_mlm_mask_row(&m, epoch, row, ids, NULL, sel, n);
    for (int64_t i = 0; i < n; i++) {
        k += sel[i] != -100;
        if (sel[i] != -100) sel[i] = ids[i]; /* what the token became */
    }
    return k;
}

static void check_determinism(void) {
    int32_t a[256], b[256];
    CHECK(draw(1, 0, 5, a, 256) > 0);
    draw(1, 0, 5, b, 256);
    CHECK(memcmp(a, b, sizeof a) == 0);
    draw(1, 1, 5, b, 256);
    CHECK_MSG(memcmp(a, b, sizeof a) != 0, "epoch 1 drew epoch 0's masks");
    draw(1, 0, 6, b, 256);
    CHECK_MSG(memcmp(a, b, sizeof a) != 0, "row 6 drew row 5's masks");
    draw(2, 0, 5, b, 256);
    CHECK_MSG(memcmp(a, b, sizeof a) != 0, "seed 2 drew seed 1's masks");
    brg_mlm_masking bad = brg_mlm_masking_default(MASK_ID, VOCAB, 1);
    bad.probability = 1.5;
    CHECK_ERR(brg_mlm_masking_validate(&bad), BRG_ERR_INVALID_ARG, "mlm probability 1.5 must be in (0, 1)");
    bad = brg_mlm_masking_default(VOCAB, VOCAB, 1);
    CHECK_ERR(brg_mlm_masking_validate(&bad), BRG_ERR_INVALID_ARG, "mask token id 1000 is outside the vocabulary [0, 1000)");
}

static const char *const lines[] = {"Hello world, this is brigade.", "", "Masked language models predict tokens.",
                                    "   ", "One more line of text to fill the rows with words."};

static brg_text_format bert_format(int64_t seq) {
    return (brg_text_format){.seq_len = seq, .vocab_size = 1405, .pad_id = 0, .token_type_ids = true};
}

/* Rows are the lines' encodings concatenated (group_texts), specials marked never to mask. */
static void check_grouped(brg_tokenizer *tok, const char *file) {
    int32_t want[512];
    uint8_t special[512];
    int64_t n = 0;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        brg_encoding e;
        CHECK_OK(brg_tokenizer_encode(tok, lines[i], strlen(lines[i]), true, &e));
        for (size_t k = 0; k < e.n; k++, n++) {
            want[n] = e.ids[k];
            special[n] = e.special_tokens_mask[k] != 0;
        }
        brg_encoding_free(&e);
    }
    brg_text_format fmt = bert_format(8);
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, 1405, 3);
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_mlm(file, tok, &fmt, &m, false, &d));
    if (!d) return;
    CHECK_MSG(d->rows == n / 8 && d->seq_len == 8, "%lld rows for %lld tokens", (long long)d->rows, (long long)n);
    const int32_t *ids = brg_tensor_map_get(&d->columns, "input_ids")->data,
                  *labels = brg_tensor_map_get(&d->columns, "labels")->data;
    int64_t bad = 0;
    for (int64_t i = 0; i < d->rows * 8; i++)
        bad += ids[i] != want[i] || d->never_mask[i] != special[i] || labels[i] != -100;
    CHECK_MSG(bad == 0, "%lld grouped positions differ", (long long)bad);
    CHECK(d->masking && d->masking->seed == 3 && brg_tensor_map_get(&d->columns, "token_type_ids") &&
          brg_tensor_map_get(&d->columns, "attention_mask"));
    brg_dataset_free(d);
}

/* --line-by-line: blank lines skipped, each other line one padded row. */
static void check_line_by_line(brg_tokenizer *tok, const char *file) {
    brg_text_format fmt = bert_format(16);
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, 1405, 3);
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_mlm(file, tok, &fmt, &m, true, &d));
    if (!d) return;
    CHECK(d->rows == 3);
    const int32_t *ids = brg_tensor_map_get(&d->columns, "input_ids")->data;
    const float *mask = brg_tensor_map_get(&d->columns, "attention_mask")->data;
    const size_t which[3] = {0, 2, 4};
    for (int64_t r = 0; r < 3; r++) {
        brg_encoding e;
        CHECK_OK(brg_tokenizer_encode(tok, lines[which[r]], strlen(lines[which[r]]), true, &e));
        const int64_t len = e.n < 16 ? (int64_t)e.n : 16;
        for (int64_t t = 0; t < 16; t++) {
            const bool real = t < len;
            CHECK_MSG(mask[r * 16 + t] == (real ? 1.0f : 0.0f), "row %lld mask at %lld", (long long)r, (long long)t);
            if (!real) CHECK(ids[r * 16 + t] == 0 && d->never_mask[r * 16 + t] == 1);
            if (real && t < len - 1) CHECK(ids[r * 16 + t] == e.ids[t]);
        }
        CHECK(ids[r * 16 + len - 1] == 3); /* [SEP] ends every row, truncated or not */
        brg_encoding_free(&e);
    }
    brg_dataset_free(d);
}

/* Batches draw masks per step: the same step twice gives the same masks, another epoch other
 * ones; only selected positions carry labels, and the loss counts them. */
static void check_batches(brg_tokenizer *tok, const char *file) {
    brg_text_format fmt = bert_format(8);
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, 1405, 11);
    m.probability = 0.5; /* enough selections in a few rows */
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_mlm(file, tok, &fmt, &m, false, &d));
    /* A masked LM over the tokenizer's ids (a step refuses ids past the model's vocabulary). */
    brg_bert_config c;
    brg_bert_config_default(&c, BRG_BERT_MASKED_LM);
    c.vocab_size = 1405, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 8, c.max_position_embeddings = 16;
    brg_model *model = NULL;
    CHECK_OK(brg_bert_create(&c, &model));
    if (!d || !model) return;
    brg_data_order order;
    brg_step_batch batch;
    CHECK_OK(brg_data_order_init(&order, d, 2, false, 0));
    CHECK_OK(brg_step_batch_init(&batch, d, 1, 1, 2));
    int32_t first[16], again[16], next_epoch[16];
    CHECK_OK(brg_step_batch_fill(&batch, d, &order, 0, model));
    memcpy(first, brg_tensor_map_get(&batch.mbs[0], "input_ids")->data, sizeof first);
    const int32_t *ids = brg_tensor_map_get(&batch.mbs[0], "input_ids")->data,
                  *labels = brg_tensor_map_get(&batch.mbs[0], "labels")->data;
    const int32_t *stored = brg_tensor_map_get(&d->columns, "input_ids")->data;
    int64_t counted = 0, bad = 0;
    for (int i = 0; i < 16; i++) {
        counted += labels[i] != -100;
        bad += labels[i] != -100 ? labels[i] != stored[i] : ids[i] != stored[i];
        bad += d->never_mask[i] && labels[i] != -100;
    }
    CHECK(counted > 0 && bad == 0);
    CHECK_MSG(batch.loss_items.labels == (double)counted, "loss items %g, labels %lld", batch.loss_items.labels,
              (long long)counted);
    CHECK_OK(brg_step_batch_fill(&batch, d, &order, 0, model));
    memcpy(again, brg_tensor_map_get(&batch.mbs[0], "input_ids")->data, sizeof again);
    CHECK(memcmp(first, again, sizeof first) == 0);
    CHECK_OK(brg_step_batch_fill(&batch, d, &order, order.steps_per_epoch, model)); /* the same rows, next epoch */
    memcpy(next_epoch, brg_tensor_map_get(&batch.mbs[0], "input_ids")->data, sizeof next_epoch);
    CHECK_MSG(memcmp(first, next_epoch, sizeof first) != 0, "the next epoch drew the same masks");
    /* the stored rows stay unmasked */
    CHECK(memcmp(brg_tensor_map_get(&d->columns, "input_ids")->data, stored, 16 * sizeof(int32_t)) == 0);
    brg_step_batch_free(&batch);
    brg_data_order_free(&order);
    /* An evaluation set keeps epoch 0's masks. */
    brg_dataset_fix_masks(d);
    CHECK(d->masking == NULL);
    brg_dataset_free(d);
    brg_model_destroy(model);
}

static void check_bad_input(brg_tokenizer *tok) {
    brg_text_format fmt = bert_format(8);
    brg_mlm_masking m = brg_mlm_masking_default(MASK_ID, 1405, 3);
    brg_dataset *d = NULL;
    CHECK_ERR(brg_dataset_load_text_mlm(text_data_write("blank.txt", "\n  \n\t\n"), tok, &fmt, &m, true, &d),
              BRG_ERR_FORMAT, "blank.txt: no examples in the file (every line is blank)");
    CHECK_ERR(brg_dataset_load_text_mlm(text_data_write("short.txt", "hi\n"), tok, &fmt, &m, false, &d),
              BRG_ERR_INVALID_ARG, "short.txt: the file's tokens make no row of 8");
    CHECK_ERR(brg_dataset_load_text_mlm(text_data_write("bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n"), tok, &fmt,
                                        &m, false, &d),
              BRG_ERR_FORMAT, "bad.jsonl: line 2: missing field 'text'");
    CHECK_ERR(brg_dataset_load_text_mlm(text_data_write("bad.txt", "fine\nnot \xff fine\n"), tok, &fmt, &m, false, &d),
              BRG_ERR_FORMAT, "bad.txt: line 2: not valid UTF-8");
    m.probability = 0;
    CHECK_ERR(brg_dataset_load_text_mlm(text_data_write("ok.txt", "fine\n"), tok, &fmt, &m, false, &d),
              BRG_ERR_INVALID_ARG, "mlm probability 0 must be in (0, 1)");
    CHECK(d == NULL);
}

int main(void) {
    check_rates();
    check_determinism();
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/bert_uncased", &tok));
    if (!tok) return test_finish();
    char text[1024] = "", csv[1024] = "text\n";
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        strcat(text, lines[i]);
        strcat(text, "\n");
        strcat(csv, "\"");
        strcat(csv, lines[i]);
        strcat(csv, "\"\n");
    }
    const char *txt = text_data_write("mlm.txt", text);
    check_grouped(tok, txt);
    check_grouped(tok, text_data_write("mlm.csv", csv));
    check_line_by_line(tok, txt);
    check_batches(tok, txt);
    check_bad_input(tok);
    brg_tokenizer_free(tok);
    return test_finish();
}
