/* Text for a causal language model through its tokenizer, as transformers' run_clm.py prepares
 * it: every line of a .txt file (or the "text" field of every line of a .jsonl file) is one
 * example, tokenized as the tokenizer does by default (its post-processor included); the ids of
 * all examples are concatenated and cut into rows of seq_len, the tail that does not fill a row
 * dropped (group_texts); labels are the ids. */
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/dataset.h"
#include "brigade/tokenizer.h"

typedef struct id_list {
    int32_t *v;
    int64_t n, cap;
} id_list;

static brg_status append(id_list *l, const int32_t *ids, size_t n) {
    if (l->n + (int64_t)n > l->cap) {
        int64_t cap = l->cap ? l->cap : 4096;
        while (cap < l->n + (int64_t)n) cap *= 2;
        int32_t *grown = realloc(l->v, (size_t)cap * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_OOM, "no memory for the tokenized text (%lld ids)", (long long)cap);
        l->v = grown;
        l->cap = cap;
    }
    memcpy(l->v + l->n, ids, n * sizeof *ids);
    l->n += (int64_t)n;
    return BRG_OK;
}

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* The example text of one line: the line itself, or a .jsonl line's "text" string. */
static brg_status example_of(char *line, bool jsonl, int64_t line_no, cJSON **json, const char **text, size_t *len) {
    *json = NULL;
    if (!jsonl) {
        *text = line;
        *len = strlen(line);
        return BRG_OK;
    }
    *json = cJSON_Parse(line);
    const cJSON *t = *json ? cJSON_GetObjectItemCaseSensitive(*json, "text") : NULL;
    if (!cJSON_IsString(t))
        return brg_error(BRG_ERR_FORMAT, "line %lld: expected a JSON object with a \"text\" string", (long long)line_no);
    *text = t->valuestring;
    *len = strlen(t->valuestring);
    return BRG_OK;
}

static brg_status tokenize_file(FILE *f, bool jsonl, const brg_tokenizer *tok, int64_t vocab, id_list *ids) {
    char *line = NULL;
    size_t cap = 0;
    brg_status st = BRG_OK;
    int64_t line_no = 0;
    for (ssize_t n; st == BRG_OK && (n = getline(&line, &cap, f)) >= 0;) {
        line_no++;
        if (n && line[n - 1] == '\n') line[--n] = '\0';
        if (n && line[n - 1] == '\r') line[--n] = '\0';
        if (jsonl && n == 0) continue; /* a blank line between JSON records */
        cJSON *json = NULL;
        const char *text = "";
        size_t len = 0;
        st = example_of(line, jsonl, line_no, &json, &text, &len);
        brg_encoding enc;
        if (st == BRG_OK && (st = brg_tokenizer_encode(tok, text, len, true, &enc)) != BRG_OK)
            st = brg_error_wrap(st, "line %lld", (long long)line_no);
        else if (st == BRG_OK) {
            for (size_t i = 0; st == BRG_OK && i < enc.n; i++)
                if (enc.ids[i] >= vocab)
                    st = brg_error(BRG_ERR_INVALID_ARG, "line %lld: token id %d is past the model's vocabulary of %lld",
                                   (long long)line_no, enc.ids[i], (long long)vocab);
            if (st == BRG_OK) st = append(ids, enc.ids, enc.n);
            brg_encoding_free(&enc);
        }
        cJSON_Delete(json);
    }
    free(line);
    return st;
}

brg_status brg_dataset_load_text_tokens(const char *path, const brg_tokenizer *tok, int64_t vocab_size,
                                        int64_t seq_len, brg_dataset **out) {
    *out = NULL;
    if (seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "rows of %lld tokens: give at least 1", (long long)seq_len);
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    id_list ids = {0};
    brg_status st = tokenize_file(f, ends_with(path, ".jsonl"), tok, vocab_size, &ids);
    fclose(f);
    const int64_t rows = ids.n / seq_len;
    if (st == BRG_OK && rows < 1)
        st = brg_error(BRG_ERR_INVALID_ARG, "%lld tokens of text make no row of %lld", (long long)ids.n, (long long)seq_len);
    if (st == BRG_OK) st = brg_dataset_from_rows(ids.v, NULL, NULL, rows, seq_len, out);
    free(ids.v);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "dataset %s", path);
}
