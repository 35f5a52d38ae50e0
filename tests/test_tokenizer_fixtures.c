/* Every tokenizer under tests/fixtures/tokenizers/ (written by tools/tokenizer_fixtures.py with
 * the Python `tokenizers` library) against what that library returned: ids, tokens, offsets,
 * type ids, masks, word ids and both decodes, for every test string.
 *
 *   test_tokenizer_fixtures [FOLDER]   another set of fixture folders (make parity's fresh ones) */
#include <dirent.h>
#include <stdint.h>

#include "io/json.h"
#include "test_util.h"

#define FIXTURES "tests/fixtures/tokenizers"

/* Compares an int list of the case with n values produced by the tokenizer. */
static bool ints_equal(const cJSON *arr, const int32_t *v, size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if ((int64_t)e->valuedouble != v[i]) return false;
    return true;
}

static bool tokens_equal(const cJSON *arr, char **t, size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if (!cJSON_IsString(e) || strcmp(e->valuestring, t[i]) != 0) return false;
    return true;
}

static bool offsets_equal(const cJSON *arr, int64_t (*o)[2], size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
        if (!a || !b || (int64_t)a->valuedouble != o[i][0] || (int64_t)b->valuedouble != o[i][1]) return false;
    }
    return true;
}

static void show_case(const char *fixture, const cJSON *c, const brg_encoding *e, const char *what) {
    char *expected = cJSON_PrintUnformatted(c);
    fprintf(stderr, "  %s: %s differs\n    expected %s\n    got ids", fixture, what, expected);
    for (size_t i = 0; i < e->n; i++) fprintf(stderr, " %d", e->ids[i]);
    fprintf(stderr, "\n    got tokens");
    for (size_t i = 0; i < e->n; i++) fprintf(stderr, " '%s'", e->tokens[i]);
    fprintf(stderr, "\n    got offsets");
    for (size_t i = 0; i < e->n; i++)
        fprintf(stderr, " [%lld,%lld]", (long long)e->offsets[i][0], (long long)e->offsets[i][1]);
    fprintf(stderr, "\n");
    free(expected);
}

/* Encodes a case's text (and pair, when it has one). */
static brg_status encode_case(const brg_tokenizer *tok, const cJSON *c, bool add, brg_encoding *e) {
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    const cJSON *pair = cJSON_GetObjectItem(c, "pair");
    if (!cJSON_IsString(pair)) return brg_tokenizer_encode(tok, text, strlen(text), add, e);
    return brg_tokenizer_encode_pair(tok, text, strlen(text), pair->valuestring, strlen(pair->valuestring), add, e);
}

/* One case; returns true when everything matches. */
static bool check_case(const char *fixture, const brg_tokenizer *tok, const cJSON *c, int *shown) {
    const cJSON *text = cJSON_GetObjectItem(c, "text");
    bool add = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_special_tokens"));
    brg_encoding e;
    brg_status st = encode_case(tok, c, add, &e);
    if (st != BRG_OK) {
        fprintf(stderr, "  %s: encode of '%s' failed: %s\n", fixture, text->valuestring, brg_last_error());
        return false;
    }
    const char *bad = NULL;
    if (!ints_equal(cJSON_GetObjectItem(c, "ids"), e.ids, e.n)) bad = "ids";
    else if (!tokens_equal(cJSON_GetObjectItem(c, "tokens"), e.tokens, e.n)) bad = "tokens";
    else if (!offsets_equal(cJSON_GetObjectItem(c, "offsets"), e.offsets, e.n)) bad = "offsets";
    else if (!ints_equal(cJSON_GetObjectItem(c, "type_ids"), e.type_ids, e.n)) bad = "type_ids";
    else if (!ints_equal(cJSON_GetObjectItem(c, "attention_mask"), e.attention_mask, e.n)) bad = "attention_mask";
    else if (!ints_equal(cJSON_GetObjectItem(c, "special_tokens_mask"), e.special_tokens_mask, e.n))
        bad = "special_tokens_mask";
    else if (!ints_equal(cJSON_GetObjectItem(c, "word_ids"), e.word_ids, e.n)) bad = "word_ids";
    for (int skip = 0; skip < 2 && !bad; skip++) {
        char *decoded = NULL;
        const cJSON *want = cJSON_GetObjectItem(c, skip ? "decoded_skip" : "decoded");
        if (!cJSON_IsString(want)) continue; /* settings cases carry no decode */
        if (brg_tokenizer_decode(tok, e.ids, e.n, skip, &decoded) != BRG_OK || strcmp(decoded, want->valuestring))
            bad = skip ? "decoded_skip" : "decoded";
        if (bad && (*shown)++ < 6)
            fprintf(stderr, "  %s: %s: got '%s' for '%s'\n", fixture, bad, decoded ? decoded : brg_last_error(),
                    want->valuestring);
        free(decoded);
        if (bad) {
            brg_encoding_free(&e);
            return false;
        }
    }
    if (bad && (*shown)++ < 6) show_case(fixture, c, &e, bad);
    brg_encoding_free(&e);
    return bad == NULL;
}

/* Applies a settings case's truncation / padding (null = off) and encode_special_tokens. */
static void apply_settings(brg_tokenizer *tok, const cJSON *c) {
    const cJSON *t = cJSON_GetObjectItem(c, "truncation"), *p = cJSON_GetObjectItem(c, "padding");
    brg_truncation tr = {0};
    brg_padding pd = {0};
    if (cJSON_IsObject(t)) {
        const char *strategy = cJSON_GetObjectItem(t, "strategy")->valuestring;
        tr.enabled = true;
        tr.max_length = (size_t)cJSON_GetObjectItem(t, "max_length")->valuedouble;
        tr.left = strcmp(cJSON_GetObjectItem(t, "direction")->valuestring, "left") == 0;
        tr.strategy = strcmp(strategy, "only_first") == 0    ? BRG_TRUNC_ONLY_FIRST
                      : strcmp(strategy, "only_second") == 0 ? BRG_TRUNC_ONLY_SECOND
                                                             : BRG_TRUNC_LONGEST_FIRST;
    }
    if (cJSON_IsObject(p)) {
        const cJSON *len = cJSON_GetObjectItem(p, "length"), *mult = cJSON_GetObjectItem(p, "pad_to_multiple_of");
        pd.enabled = true;
        pd.fixed_length = cJSON_IsNumber(len) ? (size_t)len->valuedouble : 0;
        pd.pad_to_multiple_of = cJSON_IsNumber(mult) ? (size_t)mult->valuedouble : 0;
        pd.left = strcmp(cJSON_GetObjectItem(p, "direction")->valuestring, "left") == 0;
        pd.pad_id = (int32_t)cJSON_GetObjectItem(p, "pad_id")->valuedouble;
        snprintf(pd.pad_token, sizeof pd.pad_token, "%s", cJSON_GetObjectItem(p, "pad_token")->valuestring);
    }
    CHECK_OK(brg_tokenizer_set_truncation(tok, tr.enabled ? &tr : NULL));
    CHECK_OK(brg_tokenizer_set_padding(tok, pd.enabled ? &pd : NULL));
    brg_tokenizer_set_encode_special_tokens(tok, cJSON_IsTrue(cJSON_GetObjectItem(c, "encode_special_tokens")));
}

/* A settings case the library refused must fail here too. */
static bool check_refused(const char *fixture, const brg_tokenizer *tok, const cJSON *c) {
    const cJSON *text = cJSON_GetObjectItem(c, "text");
    brg_encoding e;
    brg_status st = encode_case(tok, c, true, &e);
    if (st == BRG_OK) {
        fprintf(stderr, "  %s: '%s' encoded although tokenizers refuses these settings\n", fixture, text->valuestring);
        brg_encoding_free(&e);
    }
    return st == BRG_ERR_INVALID_ARG;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_fixture(const char *root_dir, const char *name, int *total_cases, int *total_ok) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/%s", root_dir, name);
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *root = NULL;
    brg_tokenizer *tok = NULL;
    CHECK_OK(brg_json_load_file(path, (size_t)64 << 20, &root));
    CHECK_OK(brg_tokenizer_load(dir, &tok));
    if (!root || !tok) {
        cJSON_Delete(root);
        brg_tokenizer_free(tok);
        return;
    }
    int cases = 0, ok = 0, shown = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, cases++)
        ok += check_case(name, tok, c, &shown);
    const cJSON *settings = cJSON_GetObjectItem(root, "settings_cases");
    for (const cJSON *c = settings ? settings->child : NULL; c; c = c->next, cases++) {
        apply_settings(tok, c);
        bool refused = cJSON_IsTrue(cJSON_GetObjectItem(c, "error"));
        ok += refused ? check_refused(name, tok, c) : check_case(name, tok, c, &shown);
    }
    printf("%-22s %3d/%3d cases match\n", name, ok, cases);
    CHECK_MSG(ok == cases && cases > 0, "%s: %d of %d cases differ", name, cases - ok, cases);
    *total_cases += cases;
    *total_ok += ok;
    cJSON_Delete(root);
    brg_tokenizer_free(tok);
}

int main(int argc, char **argv) {
    const char *root_dir = argc > 1 ? argv[1] : FIXTURES;
    DIR *d = opendir(root_dir);
    CHECK_MSG(d != NULL, "cannot open %s", root_dir);
    if (!d) return test_finish();
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    CHECK_MSG(n >= (argc > 1 ? 1 : 10), "only %d tokenizer fixtures found", n);
    int cases = 0, ok = 0;
    for (int i = 0; i < n; i++) {
        check_fixture(root_dir, names[i], &cases, &ok);
        free(names[i]);
    }
    printf("all fixtures: %d/%d cases match\n", ok, cases);
    return test_finish();
}
