/* Seq2seq from .jsonl and .csv files: sources (with the prefix) and labels equal what
 * transformers' run_summarization.py makes of the same pairs (expected.json: max_length
 * padding, truncation, target padding -100), no decoder column is stored (T5 shifts the labels),
 * the tokenizer's own settings survive, and bad input is an error naming the file and line. */
#include "text_data_util.h"

static brg_text_format t5_format(int64_t seq_len) {
    return (brg_text_format){.seq_len = seq_len, .vocab_size = 512, .pad_id = 0, .token_type_ids = false};
}

static void check_against_transformers(brg_tokenizer *tok, const char *file) {
    const cJSON *want = text_data_expected("seq2seq");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(want, "prefix");
    CHECK(cJSON_IsString(prefix) && text_data_int(want, "source_length") == 20 && text_data_int(want, "target_length") == 6);
    if (!cJSON_IsString(prefix)) return;
    brg_text_format fmt = t5_format(20);
    const brg_seq2seq_format s2s = {.source_prefix = prefix->valuestring, .max_target_length = 6};
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_seq2seq(file, tok, &fmt, &s2s, &d));
    if (!d) return;
    CHECK(d->rows == 3 && d->seq_len == 20);
    text_data_check_matrix(want, "input_ids", brg_tensor_map_get(&d->columns, "input_ids"), 0);
    text_data_check_matrix(want, "attention_mask", brg_tensor_map_get(&d->columns, "attention_mask"), 0);
    const brg_tensor *labels = brg_tensor_map_get(&d->columns, "labels");
    text_data_check_matrix(want, "labels", labels, 0);
    CHECK(labels->dtype == BRG_DTYPE_I32 && labels->ndim == 2 && labels->shape[1] == 6);
    CHECK(!brg_tensor_map_get(&d->columns, "decoder_input_ids") &&
          !brg_tensor_map_get(&d->columns, "decoder_attention_mask") &&
          !brg_tensor_map_get(&d->columns, "token_type_ids"));
    brg_dataset_free(d);
}

/* The same pairs as CSV rows (RFC 4180 quoting) make the same rows. */
static const char *csv_of_fixture(void) {
    return text_data_write("pairs.csv",
                           "target,source\r\n"
                           "A fox jumps.,The quick brown fox jumps over the lazy dog near the river bank.\r\n"
                           "\"Brigade trains models.\",Brigade trains transformer models in C.\r\n"
                           "a target that is long enough to be cut at the target length,short\r\n");
}

/* Without a prefix the source is the text alone; a prefix changes only the sources. */
static void check_prefix(brg_tokenizer *tok) {
    brg_text_format fmt = t5_format(8);
    const char *file = text_data_write("p.jsonl", "{\"source\": \"short\", \"target\": \"a fox\"}\n");
    brg_seq2seq_format s2s = {.max_target_length = 4};
    brg_dataset *plain = NULL, *prefixed = NULL;
    CHECK_OK(brg_dataset_load_text_seq2seq(file, tok, &fmt, &s2s, &plain));
    s2s.source_prefix = "summarize: ";
    CHECK_OK(brg_dataset_load_text_seq2seq(file, tok, &fmt, &s2s, &prefixed));
    if (plain && prefixed) {
        const int32_t *a = brg_tensor_map_get(&plain->columns, "input_ids")->data,
                      *b = brg_tensor_map_get(&prefixed->columns, "input_ids")->data;
        CHECK(memcmp(a, b, 8 * sizeof *a) != 0);
        CHECK(memcmp(brg_tensor_map_get(&plain->columns, "labels")->data,
                     brg_tensor_map_get(&prefixed->columns, "labels")->data, 4 * sizeof(int32_t)) == 0);
        /* "short" is a few tokens and </s>; the rest is padding */
        const float *mask = brg_tensor_map_get(&plain->columns, "attention_mask")->data;
        CHECK(mask[0] == 1 && mask[7] == 0 && a[7] == 0);
    }
    brg_dataset_free(plain);
    brg_dataset_free(prefixed);
}

typedef struct bad_case {
    const char *name, *text, *needle;
} bad_case;

static void check_bad_input(brg_tokenizer *tok) {
    const bad_case cases[] = {
        {"s.jsonl", "{\"source\": \"a\", \"target\": \"b\"}\n{\"source\": \"x\"}\n", "s.jsonl: line 2: missing field 'target'"},
        {"s.jsonl", "{\"target\": \"b\"}\n", "s.jsonl: line 1: missing field 'source'"},
        {"s.jsonl", "{\"source\": \"a\", \"target\": 3}\n", "line 1: field 'target' must be a string"},
        {"s.jsonl", "{\"source\": \"a\", \"target\": \"b\"\n", "line 1: invalid JSON at column"},
        {"s.jsonl", "", "s.jsonl: no examples in the file"},
        {"s.csv", "source,target\n", "s.csv: no examples in the file"},
        {"s.csv", "source,summary\na,b\n", "s.csv: line 2: missing field 'target'"},
        {"s.csv", "source,target\na,b,c\n", "line 2: 3 fields, but the header names 2 columns"},
    };
    brg_text_format fmt = t5_format(8);
    const brg_seq2seq_format s2s = {.max_target_length = 4};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brg_dataset *d = (brg_dataset *)1;
        brg_status st = brg_dataset_load_text_seq2seq(text_data_write(cases[i].name, cases[i].text), tok, &fmt, &s2s, &d);
        CHECK_MSG(st != BRG_OK && strstr(brg_last_error(), cases[i].needle) && d == NULL, "case %zu: '%s' lacks '%s'", i,
                  brg_last_error(), cases[i].needle);
        CHECK_MSG(strchr(brg_last_error(), '\n') == NULL, "case %zu: more than one line", i);
    }
    brg_dataset *d = NULL;
    const char *file = text_data_write("s.jsonl", "{\"source\": \"a fox\", \"target\": \"b\"}\n");
    const brg_seq2seq_format none = {.max_target_length = 0};
    CHECK_ERR(brg_dataset_load_text_seq2seq(file, tok, &fmt, &none, &d), BRG_ERR_INVALID_ARG, "targets of 0 tokens");
    fmt.vocab_size = 10;
    CHECK_ERR(brg_dataset_load_text_seq2seq(file, tok, &fmt, &s2s, &d), BRG_ERR_INVALID_ARG,
              "s.jsonl: line 1: token id");
}

int main(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/unigram_t5", &tok));
    if (!tok) return test_finish();
    /* The tokenizer's own truncation and padding come back after a load. */
    brg_padding pad = {.enabled = true, .fixed_length = 7, .pad_id = 0};
    brg_tokenizer_set_padding(tok, &pad);
    check_against_transformers(tok, TEXT_DATA "/seq2seq.jsonl");
    check_against_transformers(tok, csv_of_fixture());
    CHECK(brg_tokenizer_get_padding(tok).enabled && brg_tokenizer_get_padding(tok).fixed_length == 7);
    CHECK(!brg_tokenizer_get_truncation(tok).enabled);
    brg_tokenizer_set_padding(tok, NULL);
    check_prefix(tok);
    check_bad_input(tok);
    brg_tokenizer_free(tok);
    return test_finish();
}
