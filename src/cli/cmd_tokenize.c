/* brigade tokenize / detokenize: a model folder's tokenizer over lines of text, one JSON line
 * out per line in (the Python `tokenizers` results: ids, tokens, code point offsets). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/tokenizer.h"
#include "commands.h"
#include "io/json.h"
#include "lines.h"

/* A JSON string literal (UTF-8 kept, control characters escaped as Python's json does). */
static void put_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\u%04x", *p);
            else fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void put_ints(FILE *out, const char *key, const int32_t *v, size_t n, bool last) {
    fprintf(out, "\"%s\": [", key);
    for (size_t i = 0; i < n; i++) fprintf(out, i ? ", %d" : "%d", v[i]);
    fputs(last ? "]" : "], ", out);
}

static void put_encoding(FILE *out, const brg_encoding *e) {
    fputc('{', out);
    put_ints(out, "input_ids", e->ids, e->n, false);
    fputs("\"tokens\": [", out);
    for (size_t i = 0; i < e->n; i++) {
        if (i) fputs(", ", out);
        put_json_string(out, e->tokens[i]);
    }
    fputs("], \"offsets\": [", out);
    for (size_t i = 0; i < e->n; i++)
        fprintf(out, i ? ", [%lld, %lld]" : "[%lld, %lld]", (long long)e->offsets[i][0], (long long)e->offsets[i][1]);
    fputs("], ", out);
    put_ints(out, "attention_mask", e->attention_mask, e->n, true);
    fputs("}\n", out);
}

static brg_status setup_truncation(brg_tokenizer *tok, int64_t max_length, bool truncation) {
    if (!truncation) return BRG_OK;
    brg_truncation t = {.enabled = true, .max_length = (size_t)max_length, .strategy = BRG_TRUNC_LONGEST_FIRST};
    return brg_tokenizer_set_truncation(tok, &t);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *input = NULL;
    bool no_special = false, truncation = false;
    int64_t max_length = -1;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "folder with tokenizer.json, vocab.txt or vocab.json+merges.txt", false},
        {"input", ARG_STRING, &input, false, "UTF-8 text file, one input per line (default: stdin)", false},
        {"no-special-tokens", ARG_FLAG, &no_special, false, "do not add [CLS]/[SEP]-style tokens", false},
        {"max-length", ARG_INT, &max_length, false, "with --truncation: keep at most N tokens", false},
        {"truncation", ARG_FLAG, &truncation, false, "truncate to --max-length (longest first, right)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("tokenize", "Tokenizes lines of text; writes one JSON line per input line.", specs, n);
        return 0;
    }
    if (!args_parse("tokenize", argc, argv, 2, specs, n)) return 2;
    if (truncation != (max_length >= 0)) {
        fprintf(stderr, "brigade tokenize: --truncation and --max-length N (N >= 0) go together\n");
        return 2;
    }
    brg_tokenizer *tok = NULL;
    if (brg_tokenizer_load(model, &tok) != BRG_OK) return cli_fail("tokenize");
    if (setup_truncation(tok, max_length, truncation) != BRG_OK) {
        brg_tokenizer_free(tok);
        return cli_fail("tokenize");
    }
    FILE *in = cli_open_input("tokenize", input);
    if (!in) {
        brg_tokenizer_free(tok);
        return 1;
    }
    brg_status st = BRG_OK;
    size_t len, line_no = 0;
    for (char *line; st == BRG_OK && (line = cli_read_line(in, &len));) {
        line_no++;
        brg_encoding e;
        st = brg_tokenizer_encode(tok, line, len, !no_special, &e);
        if (st == BRG_OK) put_encoding(stdout, &e);
        else brg_error_wrap(st, "line %zu", line_no);
        brg_encoding_free(&e);
        free(line);
    }
    if (in != stdin) fclose(in);
    brg_tokenizer_free(tok);
    if (fflush(stdout) != 0 && st == BRG_OK) st = brg_error(BRG_ERR_IO, "cannot write the output");
    return st == BRG_OK ? 0 : cli_fail("tokenize");
}

/* Ids from a tokenize line ({"input_ids": [...]}) or a bare array. */
static brg_status parse_ids(const char *line, size_t len, int32_t **ids, size_t *n) {
    cJSON *root = NULL;
    BRG_TRY(brg_json_parse(line, len, "input", &root));
    const cJSON *arr = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "input_ids") : root;
    brg_status st = BRG_OK;
    if (!cJSON_IsArray(arr)) st = brg_error(BRG_ERR_INVALID_ARG, "expected {\"input_ids\": [...]} or an array of ids");
    size_t k = 0;
    int32_t *v = st == BRG_OK ? calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *v) : NULL;
    if (st == BRG_OK && !v) st = brg_error(BRG_ERR_OOM, "out of memory");
    for (const cJSON *e = st == BRG_OK ? arr->child : NULL; e && st == BRG_OK; e = e->next) {
        int64_t id;
        if (!brg_json_integer(e, &id) || id < 0 || id > INT32_MAX)
            st = brg_error(BRG_ERR_INVALID_ARG, "id %zu is not an integer in [0, 2^31)", k);
        else
            v[k++] = (int32_t)id;
    }
    cJSON_Delete(root);
    if (st != BRG_OK) {
        free(v);
        return st;
    }
    *ids = v;
    *n = k;
    return BRG_OK;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL, *input = NULL;
    bool skip = false;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "folder with tokenizer.json, vocab.txt or vocab.json+merges.txt", false},
        {"input", ARG_STRING, &input, false, "JSON lines of ids (default: stdin)", false},
        {"skip-special-tokens", ARG_FLAG, &skip, false, "leave special tokens out of the text", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("detokenize", "Decodes lines of ids ({\"input_ids\": [...]} or [...]) into {\"text\": ...} lines.",
                   specs, n);
        return 0;
    }
    if (!args_parse("detokenize", argc, argv, 2, specs, n)) return 2;
    brg_tokenizer *tok = NULL;
    if (brg_tokenizer_load(model, &tok) != BRG_OK) return cli_fail("detokenize");
    FILE *in = cli_open_input("detokenize", input);
    if (!in) {
        brg_tokenizer_free(tok);
        return 1;
    }
    brg_status st = BRG_OK;
    size_t len, line_no = 0;
    for (char *line; st == BRG_OK && (line = cli_read_line(in, &len));) {
        line_no++;
        int32_t *ids = NULL;
        size_t k = 0;
        char *text = NULL;
        st = parse_ids(line, len, &ids, &k);
        if (st == BRG_OK) st = brg_tokenizer_decode(tok, ids, k, skip, &text);
        if (st == BRG_OK) {
            fputs("{\"text\": ", stdout);
            put_json_string(stdout, text);
            fputs("}\n", stdout);
        } else {
            brg_error_wrap(st, "line %zu", line_no);
        }
        free(text);
        free(ids);
        free(line);
    }
    if (in != stdin) fclose(in);
    brg_tokenizer_free(tok);
    return st == BRG_OK ? 0 : cli_fail("detokenize");
}
