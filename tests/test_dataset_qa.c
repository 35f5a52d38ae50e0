/* Question answering from SQuAD's .json and the hub's flattened .jsonl rows: every feature
 * (window) equals what transformers' run_qa.py prepare_train_features makes of the same
 * examples (expected.json: max length 40, doc stride 8, 23 features with their start and end
 * positions), and bad input is an error naming the file and the example. */
#include "text_data_util.h"

static brg_text_format bert_format(int64_t seq_len) {
    return (brg_text_format){.seq_len = seq_len, .vocab_size = 1405, .pad_id = 0, .token_type_ids = true};
}

static void check_against_transformers(brg_tokenizer *tok, const char *file) {
    const cJSON *want = text_data_expected("qa");
    CHECK(text_data_int(want, "seq_len") == 40 && text_data_int(want, "doc_stride") == 8);
    brg_text_format fmt = bert_format(40);
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_qa(file, tok, &fmt, 8, &d));
    if (!d) return;
    CHECK_MSG(d->rows == 23 && d->seq_len == 40, "%s: %lld features", file, (long long)d->rows);
    text_data_check_matrix(want, "input_ids", brg_tensor_map_get(&d->columns, "input_ids"), 0);
    text_data_check_matrix(want, "attention_mask", brg_tensor_map_get(&d->columns, "attention_mask"), 0);
    text_data_check_matrix(want, "token_type_ids", brg_tensor_map_get(&d->columns, "token_type_ids"), 0);
    const brg_tensor *start = brg_tensor_map_get(&d->columns, "start_positions");
    const brg_tensor *end = brg_tensor_map_get(&d->columns, "end_positions");
    text_data_check_matrix(want, "start_positions", start, 0);
    text_data_check_matrix(want, "end_positions", end, 0);
    CHECK(start->ndim == 1 && end->ndim == 1);
    brg_dataset_free(d);
}

/* A context that fits is one feature; the answer's tokens are found from its characters, past
 * multi-byte text (answer_start counts characters, not bytes). */
static void check_single_window(brg_tokenizer *tok) {
    brg_text_format fmt = bert_format(32);
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_qa(
        text_data_write("one.jsonl", "{\"question\": \"where\", \"context\": \"caf\xc3\xa9 in paris\", "
                                     "\"answers\": {\"text\": [\"paris\"], \"answer_start\": [8]}}\n"),
        tok, &fmt, 128, &d));
    if (d) {
        CHECK(d->rows == 1);
        const int32_t *ids = brg_tensor_map_get(&d->columns, "input_ids")->data,
                      start = *(int32_t *)brg_tensor_map_get(&d->columns, "start_positions")->data,
                      end = *(int32_t *)brg_tensor_map_get(&d->columns, "end_positions")->data;
        /* [CLS] w ##h ##er ##e [SEP] cafe in par ##is [SEP] */
        CHECK_MSG(start == 8 && end == 9 && ids[start] == brg_tokenizer_token_to_id(tok, "par"), "paris at %d..%d", start,
                  end);
    }
    brg_dataset_free(d);
}

typedef struct bad_case {
    const char *name, *text, *needle;
} bad_case;

#define QA_LINE(fields) "{\"id\": \"x\", " fields "}\n"
#define CONTEXT "\"context\": \"the cat sat on the mat\""

static void check_bad_input(brg_tokenizer *tok) {
    const bad_case cases[] = {
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT ", \"answers\": {\"text\": [\"cat\"], \"answer_start\": [40]}"),
         "q.jsonl: line 1: answer_start 40 puts the answer's 3 characters outside the context (22 characters)"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT ", \"answers\": {\"text\": [\"cat\"], \"answer_start\": [-1]}"),
         "line 1: answer_start -1 puts"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT ", \"answers\": {\"text\": [\"cat\"], \"answer_start\": [8]}"),
         "q.jsonl: line 1: answer 'cat' is not the context's text at answer_start 8 ('sat')"},
        {"q.jsonl", "\n" QA_LINE(CONTEXT ", \"answers\": {\"text\": [], \"answer_start\": []}"),
         "q.jsonl: line 2: missing field 'question'"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", \"answers\": {\"text\": [], \"answer_start\": []}"),
         "line 1: missing field 'context'"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT), "line 1: missing field 'answers'"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT ", \"answers\": {\"text\": [\"cat\"], \"answer_start\": []}"),
         "line 1: answers has 1 texts and 0 answer_start values"},
        {"q.jsonl", QA_LINE("\"question\": \"who\", " CONTEXT ", \"answers\": [{\"text\": \"cat\", \"answer_start\": 4}]"),
         "line 1: field 'answers' must be {\"text\": [...], \"answer_start\": [...]}"},
        {"q.jsonl", "", "q.jsonl: no examples in the file"},
        {"q.json", "", "q.json"},
        {"q.json", "{\"data\": []}", "q.json: no examples in the file"},
        {"q.json", "{\"version\": \"1.1\"}", "q.json: a SQuAD file is {\"data\": [{\"paragraphs\": [...]}, ...]}"},
        {"q.json", "{\"data\": [{\"title\": \"t\"}]}", "q.json: data[0]: missing field 'paragraphs'"},
        {"q.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"question\": \"q\", \"answers\": []}]}]}]}", "data[0].paragraphs[0]: missing field 'context'"},
        {"q.json", "{\"data\": [{\"paragraphs\": [{" CONTEXT ", \"qas\": [{\"id\": \"q7\", \"answers\": []}]}]}]}",
         "q.json: data[0].paragraphs[0].qas[0] (id q7): missing field 'question'"},
        {"q.json",
         "{\"data\": [{\"paragraphs\": [{" CONTEXT ", \"qas\": [{\"id\": \"q7\", \"question\": \"who\", \"answers\": "
         "[{\"text\": \"dog\", \"answer_start\": 4}]}]}]}]}",
         "q.json: data[0].paragraphs[0].qas[0] (id q7): answer 'dog' is not the context's text at answer_start 4 ('cat')"},
        {"q.json",
         "{\"data\": [{\"paragraphs\": [{" CONTEXT ", \"qas\": [{\"question\": \"who\", \"answers\": "
         "[{\"text\": \"cat\"}]}]}]}]}",
         "data[0].paragraphs[0].qas[0]: answers[0]: missing field 'answer_start'"},
        {"q.txt", "who\n", "q.txt: question answering reads SQuAD's .json file or its rows as .jsonl"},
    };
    brg_text_format fmt = bert_format(24);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brg_dataset *d = (brg_dataset *)1;
        brg_status st = brg_dataset_load_text_qa(text_data_write(cases[i].name, cases[i].text), tok, &fmt, 4, &d);
        CHECK_MSG(st != BRG_OK && strstr(brg_last_error(), cases[i].needle) && d == NULL, "case %zu: '%s' lacks '%s'", i,
                  brg_last_error(), cases[i].needle);
        CHECK_MSG(strchr(brg_last_error(), '\n') == NULL, "case %zu: more than one line", i);
    }
    /* A stride as long as the room a row leaves the context cannot advance the windows. */
    brg_dataset *d = NULL;
    fmt = bert_format(12);
    const char *file = text_data_write(
        "long.jsonl", QA_LINE("\"question\": \"the\", \"context\": \"the cat sat on the mat and the dog sat on the log\", "
                              "\"answers\": {\"text\": [], \"answer_start\": []}"));
    CHECK_ERR(brg_dataset_load_text_qa(file, tok, &fmt, 8, &d), BRG_ERR_INVALID_ARG,
              "long.jsonl: line 1: --doc-stride 8 must be less than the 8 context tokens a row holds next to this question");
    CHECK_OK(brg_dataset_load_text_qa(file, tok, &fmt, 7, &d));
    if (d) CHECK(d->rows == 11); /* 18 context tokens in windows of 8, one every token: from 0 to 10 */
    brg_dataset_free(d);
    d = NULL;
    fmt = bert_format(4);
    CHECK_ERR(brg_dataset_load_text_qa(file, tok, &fmt, 0, &d), BRG_ERR_INVALID_ARG,
              "line 1: the question and special tokens take 4 of the 4 tokens of a row: no room for the context");
}

int main(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/bert_uncased", &tok));
    if (!tok) return test_finish();
    check_against_transformers(tok, TEXT_DATA "/squad.json");
    check_against_transformers(tok, TEXT_DATA "/squad.jsonl");
    CHECK(!brg_tokenizer_get_truncation(tok).enabled && !brg_tokenizer_get_padding(tok).enabled);
    check_single_window(tok);
    check_bad_input(tok);
    brg_tokenizer_free(tok);
    return test_finish();
}
