/* JSON helpers: strict loading, typed getters and their messages, atomic writes. */
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/json.h"
#include "test_util.h"

static char path_buf[1024];

static const char *tmp_file(const char *name, const char *content, size_t len) {
    snprintf(path_buf, sizeof path_buf, "%s/json_%s", test_tmp_dir(), name);
    if (content) {
        FILE *fp = fopen(path_buf, "wb");
        CHECK(fp != NULL);
        if (fp) {
            CHECK(fwrite(content, 1, len, fp) == len);
            fclose(fp);
        }
    }
    return path_buf;
}

static brg_status load_text(const char *text, cJSON **root) {
    return brg_json_load_file(tmp_file("t.json", text, strlen(text)), 1 << 20, root);
}

static void test_utf8(void) {
    size_t bad = 99;
    const char *good = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9d\x84\x9e";
    CHECK(brg_utf8_valid(good, strlen(good), NULL));
    CHECK(!brg_utf8_valid("ab\xc0\x80", 4, &bad) && bad == 2);       /* overlong NUL */
    CHECK(!brg_utf8_valid("\xed\xa0\x80", 3, &bad) && bad == 0);     /* surrogate */
    CHECK(!brg_utf8_valid("\xf4\x90\x80\x80", 4, &bad));             /* past U+10FFFF */
    CHECK(!brg_utf8_valid("x\xe2\x82", 3, &bad) && bad == 1);        /* cut short */
    CHECK(!brg_utf8_valid("\x80", 1, &bad));                         /* stray continuation */
    CHECK(!brg_utf8_valid("\xe0\x80\xaf", 3, &bad));                 /* overlong '/' */
}

static void test_load_file_errors(void) {
    cJSON *root = NULL;
    CHECK_ERR(brg_json_load_file(tmp_file("missing.json", NULL, 0), 100, &root), BRG_ERR_NOT_FOUND, "missing.json");
    CHECK_ERR(load_text("{\n  \"a\": 1,\n  \"b\": ]\n}", &root), BRG_ERR_FORMAT, "invalid JSON at line 3, column");
    CHECK(strstr(brg_last_error(), "json_t.json") != NULL);
    CHECK_ERR(load_text("{} x", &root), BRG_ERR_FORMAT, "invalid JSON");
    CHECK_ERR(load_text("", &root), BRG_ERR_FORMAT, "empty");
    CHECK_ERR(load_text("\xef\xbb\xbf{}", &root), BRG_ERR_FORMAT, "byte-order mark");
    CHECK_ERR(load_text("{\"a\": \"x\ty\"}", &root), BRG_ERR_FORMAT, "raw control character inside a string");
    CHECK_ERR(load_text("{\"a\":\x0b 1}", &root), BRG_ERR_FORMAT, "unexpected byte 0x0b");
    CHECK_ERR(load_text("{\"a\": \"\xff\"}", &root), BRG_ERR_FORMAT, "not valid UTF-8");
    CHECK_ERR(load_text("{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}}", &root), BRG_ERR_FORMAT, "duplicate key 'c'");
    const char *big = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
    CHECK_ERR(brg_json_load_file(tmp_file("big.json", big, strlen(big)), 10, &root), BRG_ERR_FORMAT,
              "larger than 10 bytes");
    CHECK_ERR(brg_json_load_file(test_tmp_dir(), 100, &root), BRG_ERR_IO, "directory");
    CHECK(root == NULL);
    /* A NUL byte must not end the document early. */
    CHECK_ERR(brg_json_load_file(tmp_file("nul.json", "{}\0{", 4), 100, &root), BRG_ERR_FORMAT, "0x00");
    CHECK_OK(load_text(" \n{\"ok\": [1, 2.5, \"\\u00e9\\n\", null, true]}\n", &root));
    CHECK(cJSON_IsObject(root));
    cJSON_Delete(root);
}

static void test_getters(void) {
    cJSON *cfg = NULL;
    CHECK_OK(load_text("{\"n_layer\": 12, \"big\": 9007199254740992, \"huge\": 1e300, \"neg\": -3,"
                       " \"half\": 1.5, \"lr\": 5e-05, \"flag\": true, \"one\": 1, \"name\": \"gpt2\","
                       " \"n_inner\": null, \"list\": [1]}",
                       &cfg));
    if (!cfg) return;
    int64_t i = 0;
    CHECK_OK(brg_json_get_int(cfg, "config.json", "n_layer", true, 0, &i));
    CHECK(i == 12);
    CHECK_OK(brg_json_get_int(cfg, "config.json", "big", true, 0, &i));
    CHECK(i == 9007199254740992LL);
    CHECK_OK(brg_json_get_int(cfg, "config.json", "neg", true, 0, &i));
    CHECK(i == -3);
    CHECK_OK(brg_json_get_int(cfg, "config.json", "absent", false, 7, &i));
    CHECK(i == 7);
    CHECK_OK(brg_json_get_int(cfg, "config.json", "n_inner", false, -1, &i)); /* null = unset */
    CHECK(i == -1);
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "n_head", true, 0, &i), BRG_ERR_FORMAT,
              "config.json: missing field 'n_head'");
    CHECK(strcmp(brg_last_error(), "config.json: missing field 'n_head'") == 0);
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "n_inner", true, 0, &i), BRG_ERR_FORMAT,
              "missing field 'n_inner' (it is null)");
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "half", true, 0, &i), BRG_ERR_FORMAT,
              "config.json: field 'half' must be an integer, got 1.5");
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "huge", true, 0, &i), BRG_ERR_FORMAT, "'huge' = 1e+300 is out of range");
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "name", true, 0, &i), BRG_ERR_FORMAT, "must be an integer, got a string");
    CHECK_ERR(brg_json_get_int(cfg, "config.json", "N_LAYER", true, 0, &i), BRG_ERR_FORMAT, "missing"); /* case matters */

    double d = 0;
    CHECK_OK(brg_json_get_double(cfg, "config.json", "lr", true, 0, &d));
    CHECK(d == 5e-05);
    CHECK_OK(brg_json_get_double(cfg, "config.json", "n_layer", true, 0, &d));
    CHECK(d == 12.0);
    CHECK_OK(brg_json_get_double(cfg, "config.json", "absent", false, 0.25, &d));
    CHECK(d == 0.25);
    CHECK_ERR(brg_json_get_double(cfg, "config.json", "flag", true, 0, &d), BRG_ERR_FORMAT,
              "field 'flag' must be a number, got true");

    bool b = false;
    CHECK_OK(brg_json_get_bool(cfg, "config.json", "flag", true, false, &b));
    CHECK(b);
    CHECK_OK(brg_json_get_bool(cfg, "config.json", "absent", false, true, &b));
    CHECK(b);
    CHECK_ERR(brg_json_get_bool(cfg, "config.json", "one", true, false, &b), BRG_ERR_FORMAT,
              "field 'one' must be true or false, got 1");

    const char *s = NULL;
    CHECK_OK(brg_json_get_string(cfg, "config.json", "name", true, NULL, &s));
    CHECK(s && strcmp(s, "gpt2") == 0);
    CHECK_OK(brg_json_get_string(cfg, "config.json", "absent", false, "dflt", &s));
    CHECK(s && strcmp(s, "dflt") == 0);
    CHECK_ERR(brg_json_get_string(cfg, "config.json", "list", true, NULL, &s), BRG_ERR_FORMAT,
              "field 'list' must be a string, got an array");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(cfg, "list");
    CHECK_ERR(brg_json_get_int(list, "config.json", "x", false, 0, &i), BRG_ERR_FORMAT, "expected a JSON object");
    cJSON_Delete(cfg);
}

static void test_write_atomic(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "n_embd", 768);
    cJSON_AddNumberToObject(root, "lr", 3e-4);
    cJSON_AddStringToObject(root, "name", "caf\xc3\xa9 \"q\"");
    const char *path = tmp_file("out.json", NULL, 0);
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", path);
    CHECK_OK(brg_json_write_file_atomic(keep, root));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", keep, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
    cJSON *back = NULL;
    CHECK_OK(brg_json_load_file(keep, 1 << 20, &back));
    CHECK(back && cJSON_Compare(root, back, 1));
    cJSON_Delete(back);

    /* An aborted write leaves the old file as it was. */
    brg_atomic_file f;
    CHECK_OK(brg_atomic_file_open(keep, &f));
    CHECK_OK(brg_atomic_file_write(&f, "garbage", 7));
    brg_atomic_file_abort(&f);
    CHECK(access(tmp, F_OK) != 0);
    back = NULL;
    CHECK_OK(brg_json_load_file(keep, 1 << 20, &back));
    CHECK(back && cJSON_Compare(root, back, 1));
    cJSON_Delete(back);

    char missing[1100];
    snprintf(missing, sizeof missing, "%s/no/such/dir.json", test_tmp_dir());
    CHECK_ERR(brg_json_write_file_atomic(missing, root), BRG_ERR_IO, "cannot create");
    CHECK(access(missing, F_OK) != 0);
    cJSON_Delete(root);
}

/* Floats round from the double; a model folder's config.json round-trips through write_config
 * and load_config, and a folder name too long for the path is an error, not a truncation. */
static void test_float_and_config_folder(void) {
    cJSON *cfg = NULL;
    CHECK_OK(load_text("{\"eps\": 1e-05, \"name\": \"x\"}", &cfg));
    float f = 0.0f;
    CHECK_OK(brg_json_get_float(cfg, "config.json", "eps", true, 0.0f, &f));
    CHECK(f == 1e-05f);
    CHECK_OK(brg_json_get_float(cfg, "config.json", "absent", false, 0.5f, &f));
    CHECK(f == 0.5f);
    CHECK_ERR(brg_json_get_float(cfg, "config.json", "name", false, 0.0f, &f), BRG_ERR_FORMAT, "'name'");

    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s", test_tmp_dir());
    CHECK_OK(brg_json_write_config(cJSON_Duplicate(cfg, true), dir));
    cJSON *back = NULL;
    CHECK_OK(brg_json_load_config(dir, path, sizeof path, &back));
    CHECK(back && cJSON_Compare(cfg, back, 1));
    CHECK(strstr(path, "/config.json") != NULL);
    cJSON_Delete(back);
    char small[8];
    CHECK_ERR(brg_json_config_path(dir, small, sizeof small), BRG_ERR_INVALID_ARG, "model path too long");
    char long_dir[5000];
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[sizeof long_dir - 1] = '\0';
    CHECK_ERR(brg_json_write_config(cJSON_Duplicate(cfg, true), long_dir), BRG_ERR_INVALID_ARG, "model path too long");
    cJSON_Delete(cfg);
}

int main(void) {
    test_utf8();
    test_float_and_config_folder();
    test_load_file_errors();
    test_getters();
    test_write_atomic();
    return test_finish();
}
