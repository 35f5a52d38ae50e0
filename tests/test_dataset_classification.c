/* Sequence classification from .jsonl and .csv files: the rows equal what transformers'
 * tokenizer makes of the same examples (padding="max_length", truncation=True; expected.json),
 * label names go through config.json's label2id, regression and multi-label targets, the
 * tokenizer's own settings survive, and every bad input is an error naming the file and line. */
#include "text_data_util.h"

static brg_text_format bert_format(void) {
    return (brg_text_format){.seq_len = 16, .vocab_size = 1405, .pad_id = 0, .token_type_ids = true};
}

static void check_against_transformers(brg_tokenizer *tok, const brg_label_map *labels, const char *file) {
    const cJSON *want = text_data_expected("classification");
    CHECK(text_data_int(want, "seq_len") == 16);
    brg_text_format fmt = bert_format();
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_classification(file, tok, &fmt, labels, &d));
    if (!d) return;
    CHECK(d->rows == 6 && d->seq_len == 16);
    text_data_check_matrix(want, "input_ids", brg_tensor_map_get(&d->columns, "input_ids"), 0);
    text_data_check_matrix(want, "attention_mask", brg_tensor_map_get(&d->columns, "attention_mask"), 0);
    text_data_check_matrix(want, "token_type_ids", brg_tensor_map_get(&d->columns, "token_type_ids"), 0);
    const brg_tensor *y = brg_tensor_map_get(&d->columns, "labels");
    text_data_check_matrix(want, "labels", y, 0);
    CHECK(y->dtype == BRG_DTYPE_I32 && y->ndim == 1);
    brg_dataset_free(d);
}

static void check_label_map(const brg_label_map *m) {
    CHECK(m->num_labels == 3 && m->n_names == 3 && m->problem == BRG_PROBLEM_AUTO);
    for (int64_t i = 0; i < m->n_names; i++) {
        const char *want = m->ids[i] == 0 ? "negative" : m->ids[i] == 1 ? "positive" : "neutral";
        CHECK_MSG(strcmp(m->names[i], want) == 0, "label %lld is '%s'", (long long)m->ids[i], m->names[i]);
    }
}

/* num_labels 1: numbers (or numeric CSV cells) become F32 targets. */
static void check_regression(brg_tokenizer *tok) {
    brg_label_map m = {.num_labels = 1};
    brg_text_format fmt = bert_format();
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_classification(
        text_data_write("reg.jsonl", "{\"text\": \"good\", \"label\": 0.75}\n{\"text\": \"bad\", \"label\": -2}\n"), tok,
        &fmt, &m, &d));
    if (d) {
        const brg_tensor *labels = brg_tensor_map_get(&d->columns, "labels");
        const float *y = labels->data;
        CHECK(labels->dtype == BRG_DTYPE_F32 && labels->ndim == 1 && y[0] == 0.75f && y[1] == -2.0f);
    }
    brg_dataset_free(d);
    d = NULL;
    CHECK_OK(brg_dataset_load_text_classification(text_data_write("reg.csv", "label,text\n1.5,good\n"), tok, &fmt, &m, &d));
    if (d) CHECK(((const float *)brg_tensor_map_get(&d->columns, "labels")->data)[0] == 1.5f);
    brg_dataset_free(d);
    d = NULL;
    CHECK_ERR(brg_dataset_load_text_classification(text_data_write("reg.csv", "label,text\nhigh,good\n"), tok, &fmt, &m, &d),
              BRG_ERR_FORMAT, "line 2: a regression model (num_labels 1) takes a number as label");
}

/* problem_type multi_label_classification: a list of ids or names, multi-hot F32. */
static void check_multi_label(brg_tokenizer *tok, const brg_label_map *names) {
    brg_label_map m = *names;
    m.problem = BRG_PROBLEM_MULTI_LABEL;
    brg_text_format fmt = bert_format();
    brg_dataset *d = NULL;
    CHECK_OK(brg_dataset_load_text_classification(
        text_data_write("multi.jsonl", "{\"text\": \"a\", \"label\": [\"neutral\", 0]}\n{\"text\": \"b\", \"label\": []}\n"),
        tok, &fmt, &m, &d));
    if (d) {
        const brg_tensor *labels = brg_tensor_map_get(&d->columns, "labels");
        const float *y = labels->data;
        CHECK(labels->ndim == 2 && labels->shape[1] == 3);
        CHECK(y[0] == 1 && y[1] == 0 && y[2] == 1 && y[3] == 0 && y[4] == 0 && y[5] == 0);
    }
    brg_dataset_free(d);
    d = NULL;
    CHECK_ERR(brg_dataset_load_text_classification(text_data_write("multi.jsonl", "{\"text\": \"a\", \"label\": 1}\n"), tok,
                                                   &fmt, &m, &d),
              BRG_ERR_FORMAT, "line 1: a multi-label model takes a list of labels");
}

/* A model without token_type_ids (GPT-2) gets no such column; without a pad token, a row that
 * needs padding is an error, one that fills the row is not. */
static void check_format_options(brg_tokenizer *tok, const brg_label_map *m) {
    brg_text_format fmt = bert_format();
    fmt.token_type_ids = false;
    brg_dataset *d = NULL;
    const char *file = text_data_write("fmt.jsonl", "{\"text\": \"hello world\", \"label\": 1}\n");
    CHECK_OK(brg_dataset_load_text_classification(file, tok, &fmt, m, &d));
    if (d)
        CHECK(brg_tensor_map_get(&d->columns, "token_type_ids") == NULL &&
              brg_tensor_map_get(&d->columns, "attention_mask") != NULL);
    brg_dataset_free(d);
    d = NULL;
    fmt.pad_id = -1;
    CHECK_ERR(brg_dataset_load_text_classification(file, tok, &fmt, m, &d), BRG_ERR_INVALID_ARG,
              "line 1: 4 tokens need padding to 16 and there is no pad token (set pad_token_id in config.json)");
    fmt.seq_len = 4;
    CHECK_OK(brg_dataset_load_text_classification(file, tok, &fmt, m, &d));
    brg_dataset_free(d);
    d = NULL;
    fmt = bert_format();
    fmt.vocab_size = 100;
    CHECK_ERR(brg_dataset_load_text_classification(file, tok, &fmt, m, &d), BRG_ERR_INVALID_ARG,
              "line 1: token id 593 is past the model's vocabulary of 100");
}

typedef struct bad_case {
    const char *name, *text, *needle;
} bad_case;

static void check_bad_input(brg_tokenizer *tok, const brg_label_map *m) {
    const bad_case cases[] = {
        {"a.jsonl", "{\"text\": \"ok\", \"label\": 0}\n{\"text\": \"x\"}\n", "a.jsonl: line 2: missing field 'label'"},
        {"a.jsonl", "{\"text\": \"ok\", \"label\": \"happy\"}\n",
         "line 1: label 'happy' is not one of config.json's label2id names (negative, positive, neutral)"},
        {"a.jsonl", "{\"text\": \"ok\", \"label\": 3}\n", "line 1: label 3 is outside the model's 3 classes [0, 3)"},
        {"a.jsonl", "{\"text\": \"ok\", \"label\": 1.5}\n", "line 1: label 1.5 is not a class id (an integer)"},
        {"a.jsonl", "{\"text\": \"ok\", \"label\": true}\n", "line 1: label must be a class id or a label name"},
        {"a.jsonl", "\n{\"label\": 1}\n", "line 2: missing field 'text'"},
        {"a.jsonl", "{\"text\": 5, \"label\": 1}\n", "line 1: field 'text' must be a string"},
        {"a.jsonl", "{\"text\": \"ok\", \"label\": 1\n", "line 1: invalid JSON at column"},
        {"a.jsonl", "[1, 2]\n", "line 1: expected a JSON object"},
        {"a.jsonl", "{\"text\": \"ok\", \"text\": \"no\", \"label\": 1}\n", "line 1: duplicate key 'text'"},
        {"a.jsonl", "{\"text\": \"caf\xff\", \"label\": 1}\n", "line 1: not valid UTF-8 (byte 13 of the line)"},
        {"a.jsonl", "", "a.jsonl: no examples in the file"},
        {"a.jsonl", "\n\n", "no examples in the file"},
        {"a.csv", "", "a.csv: empty CSV file: expected a header line naming the columns"},
        {"a.csv", "text,label\n", "a.csv: no examples in the file"},
        {"a.csv", "text,label\nfine,1\nab\"c,1\n", "a.csv: line 3: a quote inside unquoted field 1"},
        {"a.csv", "text,label\n\"ab\"c,1\n", "line 2: text after the closing quote of field 1"},
        {"a.csv", "text,label\n\"open,1\nmore\n", "line 2: a quoted field is not closed before the end of the file"},
        {"a.csv", "text,label\nfine,1,extra\n", "line 2: 3 fields, but the header names 2 columns"},
        {"a.csv", "text,text\nfine,1\n", "line 1: the header names column 'text' twice"},
        {"a.csv", "sentence,label\nfine,1\n", "line 2: missing field 'text'"},
        {"a.csv", "text,label\n\"a\nb\",happy\n", "line 2: label 'happy' is not one of"},
        {"a.csv", "text,label\nok,0\n\xc3(,1\n", "line 3: not valid UTF-8"},
    };
    brg_text_format fmt = bert_format();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brg_dataset *d = (brg_dataset *)1;
        brg_status st = brg_dataset_load_text_classification(text_data_write(cases[i].name, cases[i].text), tok, &fmt, m, &d);
        CHECK_MSG(st != BRG_OK && strstr(brg_last_error(), cases[i].needle) && d == NULL, "case %zu: '%s' lacks '%s'", i,
                  brg_last_error(), cases[i].needle);
        CHECK_MSG(strchr(brg_last_error(), '\n') == NULL, "case %zu: more than one line", i);
    }
    brg_dataset *d = NULL;
    CHECK_ERR(brg_dataset_load_text_classification("/nonexistent/a.jsonl", tok, &fmt, m, &d), BRG_ERR_NOT_FOUND,
              "dataset /nonexistent/a.jsonl: cannot open it");
}

/* Quoting as RFC 4180 allows it: CRLF and LF records, quoted line breaks, doubled quotes, a
 * byte-order mark, blank lines, a last record without a line break. */
static void check_csv_forms(brg_tokenizer *tok, const brg_label_map *m) {
    brg_text_format fmt = bert_format();
    brg_dataset *a = NULL, *b = NULL;
    CHECK_OK(brg_dataset_load_text_classification(
        text_data_write("forms.csv", "\xef\xbb\xbftext,label\r\n\"say \"\"hi\"\", ok\",positive\r\n\r\n\"two\nlines\",0"),
        tok, &fmt, m, &a));
    CHECK_OK(brg_dataset_load_text_classification(
        text_data_write("forms.jsonl", "{\"text\": \"say \\\"hi\\\", ok\", \"label\": 1}\n{\"text\": \"two\\nlines\", \"label\": 0}\n"),
        tok, &fmt, m, &b));
    if (a && b) {
        CHECK(a->rows == 2 && b->rows == 2);
        const brg_tensor *ia = brg_tensor_map_get(&a->columns, "input_ids"), *ib = brg_tensor_map_get(&b->columns, "input_ids");
        const brg_tensor *la = brg_tensor_map_get(&a->columns, "labels"), *lb = brg_tensor_map_get(&b->columns, "labels");
        CHECK(memcmp(ia->data, ib->data, brg_tensor_nbytes(ia)) == 0);
        CHECK(memcmp(la->data, lb->data, brg_tensor_nbytes(la)) == 0);
    }
    brg_dataset_free(a);
    brg_dataset_free(b);
}

int main(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/bert_uncased", &tok));
    brg_label_map labels;
    CHECK_OK(brg_label_map_load(TEXT_DATA, &labels));
    if (!tok || labels.num_labels != 3) return test_finish();
    check_label_map(&labels);
    /* The tokenizer's own truncation and padding come back after a load. */
    brg_padding pad = {.enabled = true, .fixed_length = 7, .pad_id = 0};
    brg_tokenizer_set_padding(tok, &pad);
    check_against_transformers(tok, &labels, TEXT_DATA "/cls.jsonl");
    check_against_transformers(tok, &labels, TEXT_DATA "/cls.csv");
    CHECK(brg_tokenizer_get_padding(tok).enabled && brg_tokenizer_get_padding(tok).fixed_length == 7);
    CHECK(!brg_tokenizer_get_truncation(tok).enabled);
    brg_tokenizer_set_padding(tok, NULL);
    check_regression(tok);
    check_multi_label(tok, &labels);
    check_format_options(tok, &labels);
    check_csv_forms(tok, &labels);
    check_bad_input(tok, &labels);
    brg_label_map_free(&labels);
    brg_tokenizer_free(tok);
    return test_finish();
}
