/* Text for a causal LM through its tokenizer (run_clm.py's preparation): each line one example,
 * tokenized as the tokenizer does by default, concatenated and cut into rows (the tail dropped),
 * labels equal to the ids; the same from a .jsonl file's "text" fields; bad lines, ids past the
 * vocabulary and text too short for one row are errors naming what is wrong. */
#include <stdio.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"
#include "test_util.h"

static const char *write_file(const char *name, const char *text) {
    static char path[1100];
    snprintf(path, sizeof path, "%s/%s", test_tmp_dir(), name);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *const lines[] = {"Hello world, this is brigade.", "", "Caf\xc3\xa9 au lait \xe6\x97\xa5\xe6\x9c\xac",
                                    "  spaces   and\ttabs  "};

/* The ids the loader must produce: every line's encoding, concatenated. */
static int64_t expected_ids(const brg_tokenizer *tok, int32_t *out, int64_t cap) {
    int64_t n = 0;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        brg_encoding e;
        CHECK_OK(brg_tokenizer_encode(tok, lines[i], strlen(lines[i]), true, &e));
        for (size_t k = 0; k < e.n && n < cap; k++) out[n++] = e.ids[k];
        brg_encoding_free(&e);
    }
    return n;
}

static void check_rows(const brg_dataset *d, const int32_t *want, int64_t n, int64_t seq) {
    CHECK(d->rows == n / seq && d->seq_len == seq);
    const brg_tensor *label_col = brg_tensor_map_get(&d->columns, "labels");
    const int32_t *ids = brg_tensor_map_get(&d->columns, "input_ids")->data, *labels = label_col ? label_col->data : NULL;
    CHECK(labels != NULL);
    for (int64_t i = 0; labels && i < d->rows * seq; i++) CHECK_MSG(ids[i] == want[i] && labels[i] == want[i], "id %lld", (long long)i);
}

int main(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_tokenizer_load("tests/fixtures/tokenizers/gpt2_bpe", &tok));
    if (!tok) return test_finish();
    int32_t want[512];
    const int64_t n = expected_ids(tok, want, 512);
    CHECK(n > 10);

    char text[1024] = "", jsonl[1024] = "";
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        strcat(text, lines[i]);
        strcat(text, "\n");
    }
    /* The JSON spelling of each line (no quotes or backslashes in them; the tab escaped). */
    strcat(jsonl, "{\"text\": \"Hello world, this is brigade.\"}\n{\"text\": \"\"}\n\n");
    strcat(jsonl, "{\"text\": \"Caf\xc3\xa9 au lait \xe6\x97\xa5\xe6\x9c\xac\", \"id\": 3}\n{\"text\": \"  spaces   and\\ttabs  \"}\n");
    for (int64_t seq = 3; seq <= 5; seq++) {
        brg_dataset *d = NULL;
        CHECK_OK(brg_dataset_load_text_tokens(write_file("lines.txt", text), tok, 50257, seq, &d));
        if (d) check_rows(d, want, n, seq);
        brg_dataset_free(d);
        d = NULL;
        CHECK_OK(brg_dataset_load_text_tokens(write_file("lines.jsonl", jsonl), tok, 50257, seq, &d));
        if (d) check_rows(d, want, n, seq);
        brg_dataset_free(d);
    }

    brg_dataset *d = NULL;
    CHECK_ERR(brg_dataset_load_text_tokens(write_file("bad.txt", "fine\nnot \xff fine\n"), tok, 50257, 2, &d),
              BRG_ERR_INVALID_ARG, "line 2");
    CHECK_ERR(brg_dataset_load_text_tokens(write_file("bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": 1}\n"), tok, 50257, 1, &d),
              BRG_ERR_FORMAT, "line 2: expected a JSON object with a \"text\" string");
    CHECK_ERR(brg_dataset_load_text_tokens(write_file("lines.txt", text), tok, 5, 2, &d), BRG_ERR_INVALID_ARG,
              "past the model's vocabulary of 5");
    CHECK_ERR(brg_dataset_load_text_tokens(write_file("short.txt", "hi\n"), tok, 50257, 64, &d), BRG_ERR_INVALID_ARG,
              "make no row of 64");
    CHECK_ERR(brg_dataset_load_text_tokens("/nonexistent/x.txt", tok, 50257, 4, &d), BRG_ERR_IO, "cannot open");
    CHECK(d == NULL);
    brg_tokenizer_free(tok);
    return test_finish();
}
