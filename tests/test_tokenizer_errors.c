/* Tokenizers on bad and odd input: malformed tokenizer.json files are one-line errors naming
 * what is wrong, invalid UTF-8 is an error naming the byte, and edge inputs (empty, NUL bytes,
 * unknown ids on decode) behave as `tokenizers` does. */
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

/* A small WordPiece tokenizer.json with `model_extra` spliced into the model object and
 * `top_extra` into the top level (each may be ""). */
static const char *wordpiece_json(char *buf, size_t len, const char *model_extra, const char *top_extra) {
    snprintf(buf, len,
             "{\"version\": \"1.0\", %s \"added_tokens\": [{\"id\": 0, \"content\": \"[UNK]\", \"special\": true},"
             " {\"id\": 1, \"content\": \"[CLS]\", \"special\": true},"
             " {\"id\": 2, \"content\": \"[SEP]\", \"special\": true}],"
             " \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true},"
             " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
             " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 2], \"cls\": [\"[CLS]\", 1]},"
             " \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
             " \"model\": {\"type\": \"WordPiece\", %s \"unk_token\": \"[UNK]\","
             " \"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1,"
             " \"[SEP]\": 2, \"hello\": 3, \"world\": 4, \"##s\": 5, \"!\": 6, \"caf\": 7, \"##e\": 8}}}",
             top_extra, model_extra);
    return buf;
}

static char *write_file(const char *name, const char *text) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmp_dir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static brg_status load_text(const char *text, brg_tokenizer **tok) {
    return brg_tokenizer_load(write_file("tok_errors.json", text), tok);
}

/* Loading must fail with `status` and a one-line message containing `needle`. */
static void expect_load_error(const char *text, brg_status status, const char *needle) {
    brg_tokenizer *tok = NULL;
    CHECK_ERR(load_text(text, &tok), status, needle);
    CHECK(tok == NULL);
    CHECK_MSG(strchr(brg_last_error(), '\n') == NULL, "multi-line message: %s", brg_last_error());
}

static void test_malformed_files(void) {
    char buf[4096];
    char *json = strdup(wordpiece_json(buf, sizeof buf, "", ""));
    brg_tokenizer *tok = NULL;
    CHECK_OK(load_text(json, &tok));
    brg_tokenizer_free(tok);

    expect_load_error("{\"model\": ", BRG_ERR_FORMAT, "tok_errors.json");
    expect_load_error("{\"version\": \"1.0\"}", BRG_ERR_FORMAT, "'model' is missing");
    expect_load_error("{\"version\": \"2.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                      BRG_ERR_UNSUPPORTED, "unknown tokenizer version");
    const char *unknown[][2] = {
        {"\"normalizer\": {\"type\": \"BertNormalizer\"", "\"normalizer\": {\"type\": \"Frobnicate\""},
        {"\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}", "\"pre_tokenizer\": {\"type\": \"Shredder\"}"},
        {"\"decoder\": {\"type\": \"WordPiece\"", "\"decoder\": {\"type\": \"Mangler\""},
        {"\"post_processor\": {\"type\": \"BertProcessing\"", "\"post_processor\": {\"type\": \"Decorator\""},
        {"\"model\": {\"type\": \"WordPiece\"", "\"model\": {\"type\": \"Oracle\""},
    };
    const char *names[] = {"Frobnicate", "Shredder", "Mangler", "Decorator", "Oracle"};
    for (int i = 0; i < 5; i++) {
        char bad[4096], *at = strstr(json, unknown[i][0]);
        CHECK(at != NULL);
        if (!at) continue;
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - json), json, unknown[i][1], at + strlen(unknown[i][0]));
        char needle[64];
        snprintf(needle, sizeof needle, "'%s'", names[i]);
        expect_load_error(bad, BRG_ERR_UNSUPPORTED, needle);
    }
    free(json);
}

static void test_bad_values(void) {
    char buf[4096];
    /* The later "vocab" key would be a duplicate: use a model of its own instead. */
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": -1}}}", BRG_ERR_FORMAT,
                      "id out of range");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 1.5}}}", BRG_ERR_FORMAT, "'a'");
    /* A huge id must not size the reverse table (the fuzzer's out-of-memory input). */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2000000000}, \"merges\": []}}", BRG_ERR_FORMAT,
                      "BPE vocabulary id 2000000000 is out of range");
    expect_load_error("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 16777216}, \"unk_token\": \"a\"}}",
                      BRG_ERR_FORMAT, "WordLevel vocabulary id 16777216 is out of range");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"ab\"]}}",
                      BRG_ERR_FORMAT, "merge 0 'ab' is not two tokens");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
                      BRG_ERR_FORMAT, "makes a token that is not in the vocabulary");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\", \"z\"]]}}",
                      BRG_ERR_FORMAT, "uses a token that is not in the vocabulary");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": [], \"dropout\": 2}}",
                      BRG_ERR_FORMAT, "dropout");
    expect_load_error("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 5, \"vocab\": [[\"a\", -1.0]]}}",
                      BRG_ERR_FORMAT, "unk_id 5 is out of range");
    expect_load_error("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}", BRG_ERR_FORMAT,
                      "vocab entry 0 must be [piece, score]");
    expect_load_error(wordpiece_json(buf, sizeof buf, "", "\"truncation\": {\"max_length\": -3},"), BRG_ERR_FORMAT,
                      "max_length");
    expect_load_error("{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"@@@@\"},"
                      " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                      BRG_ERR_FORMAT, "not base64");
    expect_load_error("{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAAAAA==\"},"
                      " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                      BRG_ERR_FORMAT, "malformed");
    expect_load_error("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
                      "\"behavior\": \"Isolated\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                      BRG_ERR_FORMAT, "bad regex '('");
    expect_load_error("{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                      "{\"id\": \"[X]\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}},"
                      " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
                      BRG_ERR_FORMAT, "'[X]' is used but not in special_tokens");
    expect_load_error("{\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 77], \"cls\": [\"a\", 0]},"
                      " \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"[UNK]\": 1}}}",
                      BRG_ERR_FORMAT, "special token '[SEP]' has id 77, which no token has");
    brg_tokenizer *tok = NULL;
    CHECK_ERR(brg_tokenizer_load("/nonexistent/tokenizer", &tok), BRG_ERR_NOT_FOUND, "/nonexistent/tokenizer");
    char empty[1100];
    snprintf(empty, sizeof empty, "%s/tok_empty_folder", test_tmp_dir());
    mkdir(empty, 0755);
    CHECK_ERR(brg_tokenizer_load(empty, &tok), BRG_ERR_NOT_FOUND, "has no tokenizer.json");
}

static void test_inputs(void) {
    char buf[4096];
    brg_tokenizer *tok = NULL;
    CHECK_OK(load_text(wordpiece_json(buf, sizeof buf, "", ""), &tok));
    if (!tok) return;
    brg_encoding e;
    /* Invalid UTF-8 is an error naming the byte, never a crash or a silent replacement. */
    CHECK_ERR(brg_tokenizer_encode(tok, "ab\xff cd", 6, true, &e), BRG_ERR_INVALID_ARG, "byte offset 2");
    CHECK_ERR(brg_tokenizer_encode(tok, "hello \xc3", 7, true, &e), BRG_ERR_INVALID_ARG, "byte offset 6");
    CHECK_ERR(brg_tokenizer_encode(tok, "\xed\xa0\x80", 3, true, &e), BRG_ERR_INVALID_ARG, "byte offset 0");
    CHECK_ERR(brg_tokenizer_encode_pair(tok, "ok", 2, "\xc0\xaf", 2, true, &e), BRG_ERR_INVALID_ARG,
              "second sequence");
    /* Empty text: only the special tokens. */
    CHECK_OK(brg_tokenizer_encode(tok, "", 0, true, &e));
    CHECK(e.n == 2 && e.ids[0] == 1 && e.ids[1] == 2 && e.special_tokens_mask[0] == 1);
    brg_encoding_free(&e);
    CHECK_OK(brg_tokenizer_encode(tok, "", 0, false, &e));
    CHECK(e.n == 0);
    brg_encoding_free(&e);
    /* A NUL byte is text like any other (BertNormalizer's clean_text removes it). */
    CHECK_OK(brg_tokenizer_encode(tok, "hello\0world", 11, false, &e));
    CHECK(e.n == 1 && e.ids[0] == 0); /* "helloworld" is one unknown word */
    CHECK(e.n == 1 && e.offsets[0][0] == 0 && e.offsets[0][1] == 11);
    brg_encoding_free(&e);
    /* Literal special tokens, lowercasing, WordPiece continuation, unknown words. */
    CHECK_OK(brg_tokenizer_encode(tok, "HELLO [SEP] worlds! xyz", 23, true, &e));
    int32_t want[] = {1, 3, 2, 4, 5, 6, 0, 2};
    CHECK(e.n == 8 && memcmp(e.ids, want, sizeof want) == 0);
    CHECK(e.n == 8 && e.offsets[4][0] == 17 && e.offsets[4][1] == 18 && e.word_ids[4] == 2);
    char *text = NULL;
    CHECK_OK(brg_tokenizer_decode(tok, e.ids, e.n, true, &text));
    CHECK_MSG(text && strcmp(text, "hello worlds!") == 0, "decoded '%s'", text); /* [UNK] is special */
    free(text);
    CHECK_OK(brg_tokenizer_decode(tok, e.ids, e.n, false, &text));
    CHECK_MSG(text && strcmp(text, "[CLS] hello [SEP] worlds! [UNK] [SEP]") == 0, "decoded '%s'", text);
    free(text);
    brg_encoding_free(&e);
    /* Unknown ids are dropped on decode, as `tokenizers` does. */
    int32_t ids[] = {3, 999, -5, 4};
    CHECK_OK(brg_tokenizer_decode(tok, ids, 4, false, &text));
    CHECK_MSG(text && strcmp(text, "hello world") == 0, "decoded '%s'", text);
    free(text);
    CHECK(brg_tokenizer_vocab_size(tok) == 9);
    CHECK(brg_tokenizer_token_to_id(tok, "##s") == 5 && brg_tokenizer_token_to_id(tok, "nope") == -1);
    CHECK(brg_tokenizer_id_to_token(tok, 7) && strcmp(brg_tokenizer_id_to_token(tok, 7), "caf") == 0);
    CHECK(brg_tokenizer_id_to_token(tok, 9) == NULL);
    /* Truncation keeps room for the special tokens; a stride past max_length is refused. */
    brg_truncation tr = {.enabled = true, .max_length = 4};
    CHECK_OK(brg_tokenizer_set_truncation(tok, &tr));
    CHECK_OK(brg_tokenizer_encode(tok, "hello world hello", 17, true, &e));
    CHECK(e.n == 4 && e.ids[0] == 1 && e.ids[1] == 3 && e.ids[2] == 4 && e.ids[3] == 2);
    brg_encoding_free(&e);
    brg_truncation bad = {.enabled = true, .max_length = 4, .stride = 4};
    CHECK_ERR(brg_tokenizer_set_truncation(tok, &bad), BRG_ERR_INVALID_ARG, "stride");
    brg_tokenizer_free(tok);
}

/* Byte-level decoding of ids that cut a character in half gives U+FFFD, as from_utf8_lossy. */
static void test_byte_level_decode(void) {
    char json[8192];
    size_t o = (size_t)snprintf(json, sizeof json, "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                                "\"add_prefix_space\": false}, \"decoder\": {\"type\": \"ByteLevel\"}, "
                                "\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
    /* Bytes 0x21..0x7e and 0xa1..0xac, 0xae..0xff stand for themselves; enough here. */
    for (int b = 0xa1; b <= 0xac; b++) o += (size_t)snprintf(json + o, sizeof json - o, "\"\\u%04x\": %d, ", b, b);
    snprintf(json + o, sizeof json - o, "\"a\": 1}}}");
    brg_tokenizer *tok = NULL;
    CHECK_OK(load_text(json, &tok));
    if (!tok) return;
    /* U+00E9 is C3 A9; 0xa9 alone is an invalid sequence. */
    int32_t ids[] = {1, 0xa9, 1};
    char *text = NULL;
    CHECK_OK(brg_tokenizer_decode(tok, ids, 3, false, &text));
    CHECK_MSG(text && strcmp(text, "a\xef\xbf\xbd" "a") == 0, "decoded '%s'", text);
    free(text);
    /* A character the vocabulary lacks and no unk token: dropped, as `tokenizers` does. */
    brg_encoding e;
    CHECK_OK(brg_tokenizer_encode(tok, "a\xc3\xa9" "a", 4, false, &e));
    CHECK(e.n == 3 && e.ids[0] == 1 && e.ids[1] == 0xa9 && e.ids[2] == 1);
    brg_encoding_free(&e);
    brg_tokenizer_free(tok);
}

/* CTC with an empty pad or word-delimiter token (found by fuzz_tokenizer: the replacement looped
 * for ever): an empty pattern matches at every character boundary, as Rust's str::replace has
 * it, so the expected strings are the `tokenizers` library's own decodes. */
static void test_ctc_empty_tokens(void) {
    static const struct {
        const char *pad, *delimiter, *want;
    } cases[] = {{"", "|", "ab\xc3\xa9 c<pad>"},
                 {"<pad>", "", " a  b \xc3\xa9  |  c  "},
                 {"", "", " a  b \xc3\xa9  |  c  < p a d > "}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"decoder\": {\"type\": \"CTC\", \"pad_token\": \"%s\", \"word_delimiter_token\": \"%s\", "
                 "\"cleanup\": true}, \"model\": {\"type\": \"WordLevel\", \"unk_token\": \"<pad>\", \"vocab\": "
                 "{\"<pad>\": 0, \"a\": 1, \"b\u00e9\": 2, \"|\": 3, \"c\": 4}}}",
                 cases[k].pad, cases[k].delimiter);
        brg_tokenizer *tok = NULL;
        CHECK_OK(load_text(json, &tok));
        if (!tok) continue;
        int32_t ids[] = {1, 2, 2, 3, 4, 0};
        char *text = NULL;
        CHECK_OK(brg_tokenizer_decode(tok, ids, 6, false, &text));
        CHECK_MSG(text && strcmp(text, cases[k].want) == 0, "CTC pad '%s' delimiter '%s': decoded '%s'", cases[k].pad,
                  cases[k].delimiter, text ? text : "(null)");
        free(text);
        brg_tokenizer_free(tok);
    }
}

/* Added tokens get ids as `tokenizers` gives them, whatever the file says: the model's id when
 * the model has the token, else the next one after the model's vocabulary, in file order. */
static void test_added_ids(void) {
    brg_tokenizer *tok = NULL;
    CHECK_OK(load_text("{\"added_tokens\": [{\"id\": 50, \"content\": \"<x>\", \"special\": true},"
                       " {\"id\": 7, \"content\": \"b\"}, {\"id\": 3, \"content\": \"<y>\", \"special\": false}],"
                       " \"model\": {\"type\": \"WordLevel\", \"unk_token\": \"?\","
                       " \"vocab\": {\"?\": 0, \"a\": 1, \"b\": 2}}}", &tok));
    if (!tok) return;
    CHECK(brg_tokenizer_token_to_id(tok, "<x>") == 3);
    CHECK(brg_tokenizer_token_to_id(tok, "b") == 2);
    CHECK(brg_tokenizer_token_to_id(tok, "<y>") == 4);
    CHECK(brg_tokenizer_vocab_size(tok) == 5);
    brg_encoding e;
    CHECK_OK(brg_tokenizer_encode(tok, "a<y>b<x>", 8, true, &e));
    int32_t want[] = {1, 4, 2, 3};
    CHECK(e.n == 4 && memcmp(e.ids, want, sizeof want) == 0);
    char *text = NULL;
    CHECK_OK(brg_tokenizer_decode(tok, e.ids, e.n, true, &text));
    CHECK_MSG(text && strcmp(text, "a <y> b") == 0, "decoded '%s'", text); /* no decoder: joined by spaces */
    free(text);
    brg_encoding_free(&e);
    brg_tokenizer_free(tok);
}

int main(void) {
    test_malformed_files();
    test_added_ids();
    test_bad_values();
    test_inputs();
    test_byte_level_decode();
    test_ctc_empty_tokens();
    return test_finish();
}
