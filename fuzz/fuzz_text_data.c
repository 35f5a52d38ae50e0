/* The text datasets of src/data through a BERT WordPiece tokenizer (tests/fixtures, loaded once
 * per process): the input's first byte chooses the loader and the file kind (low 4 bits) and the
 * row sizes (high 4 bits); the rest is the file. Covers the RFC 4180 CSV reader, JSONL and CSV
 * records, classification labels (names, ids, numbers, multi-label lists, config.json's
 * label2id), masked LM, causal LM tokens, seq2seq and SQuAD .json / .jsonl windows. Every dataset
 * that loads is walked row by row, so an accepted file must really be readable. */
#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "data/csv.h"
#include "data/records.h"
#include "fuzz_util.h"

/* What the reads add up to: stored, so the compiler keeps the reads. */
static volatile uint64_t sink;

#define VOCAB 1405 /* bert_uncased's vocabulary */

static brg_tokenizer *tokenizer(void) {
    static brg_tokenizer *tok;
    if (!tok && brg_tokenizer_load(fuzz_source_path("tests/fixtures/tokenizers/bert_uncased"), &tok) != BRG_OK) {
        fprintf(stderr, "fuzz_text_data: %s\n", brg_last_error());
        abort();
    }
    return tok;
}

/* The label map of tests/fixtures/text_data/config.json, as a classifier of `problem` sees it. */
static brg_label_map labels(brg_problem_type problem) {
    static char *names[] = {"negative", "positive", "neutral"};
    static int64_t ids[] = {0, 1, 2};
    const bool regression = problem == BRG_PROBLEM_REGRESSION;
    return (brg_label_map){.num_labels = regression ? 1 : 3, .problem = problem, .n_names = regression ? 0 : 3,
                           .names = names, .ids = ids};
}

/* Reads every row back: views of each column, and a step batch over them. */
static void walk(brg_dataset *d) {
    if (!d) return;
    brg_tensor views[BRG_TENSOR_MAP_MAX];
    brg_tensor_map b;
    for (int64_t r = 0; r < d->rows; r++) {
        brg_dataset_rows(d, r, 1, views, &b);
        const brg_tensor *ids = brg_tensor_map_get(&b, "input_ids");
        if (ids)
            for (int64_t i = 0; i < d->seq_len; i++) sink += ((const int32_t *)ids->data)[i];
    }
    brg_dataset_free(d);
}

/* The raw CSV reader and the records over it, field by field. */
static void read_records(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) abort();
    csv_reader r;
    csv_init(&r, f);
    bool eof = false;
    while (csv_next(&r, &eof) == BRG_OK && !eof)
        for (size_t i = 0; i < r.n_fields; i++) sink += strlen(r.fields[i]);
    csv_free(&r);
    fclose(f);
    records *rec = NULL;
    if (records_open(path, &rec) != BRG_OK) return;
    const cJSON *obj;
    int64_t line;
    while (records_next(rec, &obj, &line) == BRG_OK && obj) {
        const char *text;
        (void)records_string(obj, line, "text", false, &text);
    }
    records_close(rec);
}

/* config.json read for its labels, then a fixed file classified with them. */
static void label_config(const uint8_t *data, size_t size, brg_tokenizer *tok, const brg_text_format *fmt) {
    fuzz_write_file("config.json", data, size);
    char dir[600];
    snprintf(dir, sizeof dir, "%s", fuzz_write_file("cls.jsonl", (const uint8_t *)"", 0));
    *strrchr(dir, '/') = '\0';
    brg_label_map m;
    if (brg_label_map_load(dir, &m) != BRG_OK) return;
    static const char cls[] = "{\"text\": \"good\", \"label\": 0}\n{\"text\": \"bad\", \"label\": [1]}\n"
                              "{\"text\": \"ok\", \"label\": \"positive\"}\n{\"text\": \"x\", \"label\": 0.5}\n";
    const char *path = fuzz_write_file("cls.jsonl", (const uint8_t *)cls, sizeof cls - 1);
    brg_dataset *d = NULL;
    if (brg_dataset_load_text_classification(path, tok, fmt, &m, &d) == BRG_OK) walk(d);
    brg_label_map_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0] & 15, v = data[0] >> 4;
    data++, size--;
    static const int64_t seq_lens[] = {6, 16, 32, 96}, strides[] = {1, 3, 8, 128};
    brg_tokenizer *tok = tokenizer();
    brg_text_format fmt = {.seq_len = seq_lens[v & 3], .vocab_size = VOCAB, .pad_id = v == 15 ? -1 : 0,
                           .token_type_ids = !(v & 4)};
    brg_mlm_masking masking = brg_mlm_masking_default(103, VOCAB, 7);
    brg_seq2seq_format s2s = {.source_prefix = v & 8 ? "summarize: " : NULL, .max_target_length = seq_lens[v >> 2]};
    brg_label_map m;
    brg_dataset *d = NULL;
    brg_status st = BRG_ERR_FORMAT;
    switch (mode) {
    case 0: m = labels(BRG_PROBLEM_AUTO);
        st = brg_dataset_load_text_classification(fuzz_write_file("d.csv", data, size), tok, &fmt, &m, &d); break;
    case 1: m = labels(BRG_PROBLEM_AUTO);
        st = brg_dataset_load_text_classification(fuzz_write_file("d.jsonl", data, size), tok, &fmt, &m, &d); break;
    case 2: m = labels(BRG_PROBLEM_REGRESSION);
        st = brg_dataset_load_text_classification(fuzz_write_file("d.jsonl", data, size), tok, &fmt, &m, &d); break;
    case 3: m = labels(BRG_PROBLEM_MULTI_LABEL);
        st = brg_dataset_load_text_classification(fuzz_write_file("d.jsonl", data, size), tok, &fmt, &m, &d); break;
    case 4: m = labels(v & 1 ? BRG_PROBLEM_MULTI_LABEL : BRG_PROBLEM_REGRESSION);
        st = brg_dataset_load_text_classification(fuzz_write_file("d.csv", data, size), tok, &fmt, &m, &d); break;
    case 5: st = brg_dataset_load_text_mlm(fuzz_write_file("d.txt", data, size), tok, &fmt, &masking, v & 8, &d); break;
    case 6: st = brg_dataset_load_text_mlm(fuzz_write_file("d.jsonl", data, size), tok, &fmt, &masking, v & 8, &d); break;
    case 7: st = brg_dataset_load_text_mlm(fuzz_write_file("d.csv", data, size), tok, &fmt, &masking, v & 8, &d); break;
    case 8: st = brg_dataset_load_text_seq2seq(fuzz_write_file("d.jsonl", data, size), tok, &fmt, &s2s, &d); break;
    case 9: st = brg_dataset_load_text_seq2seq(fuzz_write_file("d.csv", data, size), tok, &fmt, &s2s, &d); break;
    case 10: st = brg_dataset_load_text_qa(fuzz_write_file("d.json", data, size), tok, &fmt, strides[v >> 2], &d); break;
    case 11: st = brg_dataset_load_text_qa(fuzz_write_file("d.jsonl", data, size), tok, &fmt, strides[v >> 2], &d); break;
    case 12: st = brg_dataset_load_text_tokens(fuzz_write_file("d.txt", data, size), tok, VOCAB, fmt.seq_len, &d); break;
    case 13: st = brg_dataset_load_text_tokens(fuzz_write_file("d.jsonl", data, size), tok, VOCAB, fmt.seq_len, &d); break;
    case 14: label_config(data, size, tok, &fmt); break;
    default: read_records(fuzz_write_file(v & 1 ? "d.jsonl" : "d.csv", data, size)); break;
    }
    if (st == BRG_OK) {
        /* A masked-LM set draws masks per step: draw epoch 0's into the rows, as evaluation does. */
        if (d && d->masking) brg_dataset_fix_masks(d);
        walk(d);
    }
    return 0;
}
