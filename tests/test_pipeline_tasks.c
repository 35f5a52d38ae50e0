/* brigade pipeline TASK against transformers' pipeline() (the folders of tests/fixtures/pipeline, written by
 * tools/pipeline_fixtures.py): every case of every task through the command (the fixture's
 * options are its flags), batched (3 inputs per forward pass, so rows are padded) and one at a
 * time, each result equal to the fixture's (numbers to 1e-4; token indices, spans, labels and
 * texts exactly); the forward-pass tasks again through a 2-stage inference pipeline with 2 device
 * iterations (filler rows), equal to the one-device results (to 1e-6); image-classification on
 * the committed images against tests/fixtures/image_cls_vit/pipeline.json (every run's top_k and
 * function_to_apply; batched, one at a time and pipelined, labels exactly and scores to 1e-4);
 * and the library API
 * (brg_task_pipeline_*) on its own, including its errors. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/brigade.h"
#include "io/json.h"
#include "test_util.h"

#define FIX "tests/fixtures/pipeline"

static const char *cli, *tmpdir;

static const char *const folders[] = {"text_classification", "token_classification", "fill_mask",
                                      "feature_extraction", "question_answering", "text_generation", "text2text"};

static bool integral_key(const char *key) {
    return key && (strcmp(key, "start") == 0 || strcmp(key, "end") == 0 || strcmp(key, "index") == 0 ||
                   strcmp(key, "token") == 0);
}

/* Equal JSON values: same shape, keys in the same order, strings and integral fields exactly,
 * other numbers to tol. *why receives the first difference. */
static bool same(const cJSON *a, const cJSON *b, const char *key, double tol, char *why, size_t n) {
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        const double d = a->valuedouble - b->valuedouble;
        const bool ok = integral_key(key) ? d == 0 : (d <= tol && -d <= tol);
        if (!ok) snprintf(why, n, "%s: %.9g vs %.9g", key ? key : "value", a->valuedouble, b->valuedouble);
        return ok;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b)) {
        const bool ok = strcmp(a->valuestring, b->valuestring) == 0;
        if (!ok) snprintf(why, n, "%s: '%s' vs '%s'", key ? key : "value", a->valuestring, b->valuestring);
        return ok;
    }
    if ((cJSON_IsArray(a) && cJSON_IsArray(b)) || (cJSON_IsObject(a) && cJSON_IsObject(b))) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) {
            snprintf(why, n, "%s: %d vs %d entries", key ? key : "value", cJSON_GetArraySize(a), cJSON_GetArraySize(b));
            return false;
        }
        for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next) {
            if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0) {
                snprintf(why, n, "key '%s' vs '%s'", x->string, y->string);
                return false;
            }
            if (!same(x, y, cJSON_IsObject(a) ? x->string : key, tol, why, n)) return false;
        }
        return true;
    }
    snprintf(why, n, "%s: different types", key ? key : "value");
    return false;
}

static cJSON *load(const char *path) {
    cJSON *j = NULL;
    if (brg_json_load_file(path, 64u << 20, &j) != BRG_OK) fprintf(stderr, "%s\n", brg_last_error());
    return j;
}

/* ' quoted for the shell. */
static void shell_quote(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* Runs the command on the case's inputs; returns its stdout lines (malloc'd array of malloc'd
 * strings, *n of them), NULL when it fails. */
static char **run_cli(const char *task, const char *dir, const cJSON *options, const cJSON *inputs, int batch,
                      const char *ipu_config, int *n) {
    char in_path[4200], cmd_path[4200];
    snprintf(in_path, sizeof in_path, "%s/inputs.jsonl", tmpdir);
    FILE *f = fopen(in_path, "w");
    if (!f) return NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, inputs) {
        char *line = cJSON_PrintUnformatted(e);
        fprintf(f, "%s\n", line);
        free(line);
    }
    fclose(f);
    char *cmd = NULL;
    size_t len = 0;
    FILE *c = open_memstream(&cmd, &len);
    fprintf(c, "%s pipeline %s --model %s --input %s --batch-size %d", cli, task, dir, in_path, batch);
    if (ipu_config) fprintf(c, " --ipu-config %s", ipu_config);
    cJSON_ArrayForEach(e, options) {
        if (cJSON_IsTrue(e)) {
            fprintf(c, " --%s", e->string);
        } else if (cJSON_IsNumber(e)) {
            fprintf(c, " --%s %.17g", e->string, e->valuedouble);
        } else if (cJSON_IsString(e)) {
            fprintf(c, " --%s ", e->string);
            shell_quote(c, e->valuestring);
        }
    }
    fclose(c);
    snprintf(cmd_path, sizeof cmd_path, "%s/cmd.txt", tmpdir);
    FILE *p = popen(cmd, "r");
    char **lines = NULL;
    *n = 0;
    if (p) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t got;
        while ((got = getline(&line, &cap, p)) > 0) {
            if (line[got - 1] == '\n') line[got - 1] = 0;
            lines = realloc(lines, (size_t)(*n + 1) * sizeof *lines);
            lines[(*n)++] = strdup(line);
        }
        free(line);
        if (pclose(p) != 0) {
            fprintf(stderr, "failed: %s\n", cmd);
            for (int i = 0; i < *n; i++) free(lines[i]);
            free(lines);
            lines = NULL;
        }
    }
    free(cmd);
    return lines;
}

static void free_lines(char **lines, int n) {
    for (int i = 0; lines && i < n; i++) free(lines[i]);
    free(lines);
}

static bool is_generation(const char *task) {
    return strcmp(task, "text-generation") == 0 || strcmp(task, "text2text-generation") == 0 ||
           strcmp(task, "summarization") == 0 || strncmp(task, "translation", 11) == 0;
}

/* One case: batched and one at a time against the fixture; pipelined against one device. */
static void check_case(const char *dir, const char *task, const cJSON *c, const char *ipu_config) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *options = cJSON_GetObjectItem(c, "options"), *inputs = cJSON_GetObjectItem(c, "inputs");
    const cJSON *expected = cJSON_GetObjectItem(c, "expected");
    char *first[64] = {0};
    for (int batch = 3; batch >= 1; batch -= 2) {
        int n = 0;
        char **lines = run_cli(task, dir, options, inputs, batch, NULL, &n);
        CHECK_MSG(lines && n == cJSON_GetArraySize(expected), "%s / %s (batch %d): %d lines", dir, name, batch, n);
        for (int i = 0; lines && i < n && i < cJSON_GetArraySize(expected); i++) {
            cJSON *got = cJSON_Parse(lines[i]);
            char why[600] = "";
            CHECK_MSG(got && same(got, cJSON_GetArrayItem(expected, i), NULL, 1e-4, why, sizeof why),
                      "%s / %s (batch %d) input %d: %s\n  got %.400s", dir, name, batch, i, why, lines[i]);
            cJSON_Delete(got);
            if (batch == 3 && i < 64) first[i] = strdup(lines[i]);
        }
        free_lines(lines, n);
    }
    if (ipu_config && !is_generation(task)) {
        int n = 0;
        char **lines = run_cli(task, dir, options, inputs, 3, ipu_config, &n);
        CHECK_MSG(lines && n == cJSON_GetArraySize(expected), "%s / %s (pipelined): %d lines", dir, name, n);
        for (int i = 0; lines && i < n && i < 64 && first[i]; i++) {
            cJSON *a = cJSON_Parse(lines[i]), *b = cJSON_Parse(first[i]);
            char why[600] = "";
            CHECK_MSG(a && b && same(a, b, NULL, 1e-6, why, sizeof why), "%s / %s pipelined input %d: %s", dir, name,
                      i, why);
            cJSON_Delete(a);
            cJSON_Delete(b);
        }
        free_lines(lines, n);
    }
    for (int i = 0; i < 64; i++) free(first[i]);
}

static void check_fixtures(const char *root, const char *ipu_config) {
    for (size_t f = 0; f < sizeof folders / sizeof folders[0]; f++) {
        char dir[4200], path[4300];
        snprintf(dir, sizeof dir, "%s/%s", root, folders[f]);
        snprintf(path, sizeof path, "%s/cases.json", dir);
        cJSON *j = load(path);
        CHECK_MSG(j != NULL, "%s", path);
        if (!j) continue;
        const char *task = cJSON_GetObjectItem(j, "task")->valuestring;
        const cJSON *c;
        int n_cases = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) {
            const cJSON *own = cJSON_GetObjectItem(c, "task");
            check_case(dir, cJSON_IsString(own) ? own->valuestring : task, c, ipu_config);
            n_cases++;
        }
        printf("%s: %d cases (transformers %s)\n", folders[f], n_cases,
               cJSON_GetObjectItem(j, "transformers_version")->valuestring);
        cJSON_Delete(j);
    }
}

/* ---- image-classification ------------------------------------------------------------------ */

#define IMAGE_MODEL "tests/fixtures/image_cls_vit"

/* One run of pipeline.json (its kwargs as the command's flags) against its outputs. */
static void check_image_run(const cJSON *run, const cJSON *inputs, int batch, const char *ipu_config) {
    const cJSON *kw = cJSON_GetObjectItem(run, "kwargs"), *expected = cJSON_GetObjectItem(run, "outputs");
    const cJSON *k = cJSON_GetObjectItem(kw, "top_k"), *fn = cJSON_GetObjectItem(kw, "function_to_apply");
    cJSON *options = cJSON_CreateObject();
    if (k) cJSON_AddNumberToObject(options, "top-k", k->valuedouble);
    if (fn) cJSON_AddStringToObject(options, "function-to-apply", fn->valuestring);
    char *args = cJSON_PrintUnformatted(kw);
    int n = 0;
    char **lines = run_cli("image-classification", IMAGE_MODEL, options, inputs, batch, ipu_config, &n);
    CHECK_MSG(lines && n == cJSON_GetArraySize(expected), "image-classification %s (batch %d%s): %d lines", args,
              batch, ipu_config ? ", pipelined" : "", n);
    for (int i = 0; lines && i < n && i < cJSON_GetArraySize(expected); i++) {
        cJSON *got = cJSON_Parse(lines[i]);
        char why[600] = "";
        CHECK_MSG(got && same(got, cJSON_GetArrayItem(expected, i), NULL, 1e-4, why, sizeof why),
                  "image-classification %s (batch %d%s) image %d: %s\n  got %.400s", args, batch,
                  ipu_config ? ", pipelined" : "", i, why, lines[i]);
        cJSON_Delete(got);
    }
    free_lines(lines, n);
    free(args);
    cJSON_Delete(options);
}

static void check_images(const char *ipu_config) {
    cJSON *j = load(IMAGE_MODEL "/pipeline.json");
    CHECK(j != NULL);
    if (!j) return;
    /* {"image": PATH} lines, the paths relative to the current directory (the source root). */
    cJSON *inputs = cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "images")) {
        char path[4200];
        snprintf(path, sizeof path, "tests/fixtures/%s", e->valuestring);
        cJSON *in = cJSON_CreateObject();
        cJSON_AddStringToObject(in, "image", path);
        cJSON_AddItemToArray(inputs, in);
    }
    CHECK(cJSON_GetArraySize(inputs) >= 25);
    int runs = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "runs")) {
        check_image_run(e, inputs, 3, NULL);
        if (runs++ > 0) continue;
        check_image_run(e, inputs, 1, NULL);
        check_image_run(e, inputs, 8, ipu_config);
    }
    CHECK(runs == 5);
    printf("image-classification: %d runs on %d images\n", runs, cJSON_GetArraySize(inputs));
    cJSON_Delete(inputs);
    cJSON_Delete(j);
}

/* ---- the library API ---------------------------------------------------------------------- */

static void check_image_api(void) {
    brg_task_pipeline *p = NULL;
    CHECK_ERR(brg_task_pipeline_create("image-classification", FIX "/text_classification", NULL, &p),
              BRG_ERR_UNSUPPORTED,
              "is a BertForSequenceClassification: image-classification takes ViTForImageClassification");
    brg_task_options o;
    brg_task_options_default(&o);
    o.function_to_apply = "tanh";
    CHECK_ERR(brg_task_pipeline_create("image-classification", IMAGE_MODEL, &o, &p), BRG_ERR_INVALID_ARG,
              "function_to_apply 'tanh'");
    brg_task_options_default(&o);
    o.top_k = 0;
    o.batch_size = 2;
    CHECK_OK(brg_task_pipeline_create("image-classification", IMAGE_MODEL, &o, &p));
    if (!p) return;
    CHECK(strcmp(brg_task_pipeline_inputs(p), "image") == 0);
    const brg_task_input in[4] = {{.image = "tests/fixtures/images/rgb_37x23.png"},
                                  {.image = "tests/fixtures/images/gray_45x37.jpg"},
                                  {.image = "tests/fixtures/images/none.png"},
                                  {.text = "hello"}};
    char *res[4] = {NULL, NULL, NULL, NULL};
    CHECK_ERR(brg_task_pipeline_run(p, in, 4, 1, res), BRG_ERR_INVALID_ARG,
              "input 4: image-classification does not take \"text\" (its inputs: image)");
    CHECK_ERR(brg_task_pipeline_run(p, in, 3, 1, res), BRG_ERR_NOT_FOUND,
              "input 3: cannot open tests/fixtures/images/none.png");
    CHECK(res[0] == NULL && res[1] == NULL && res[2] == NULL);
    const brg_task_input none = {0};
    CHECK_ERR(brg_task_pipeline_run(p, &none, 1, 9, res), BRG_ERR_INVALID_ARG,
              "input 9: image-classification needs \"image\"");
    /* top_k 0: no labels, as transformers' scores[:0] */
    CHECK_OK(brg_task_pipeline_run(p, in, 2, 0, res));
    CHECK(res[0] && res[1] && strcmp(res[0], "[]") == 0 && strcmp(res[1], "[]") == 0);
    free(res[0]);
    free(res[1]);
    brg_task_pipeline_destroy(p);
}

static void check_api(void) {
    int n;
    const brg_task_info *t = brg_task_list(&n);
    CHECK(n >= 10);
    for (int i = 0; i < n; i++) CHECK_MSG(t[i].implemented, "%s is not implemented", t[i].name);
    CHECK(brg_task_find("image-classification") && strcmp(brg_task_find("image-classification")->inputs, "image") == 0);
    CHECK(brg_task_find("translation_en_to_de") != NULL);
    CHECK(brg_task_find("translation_en_de") == NULL);
    CHECK(strcmp(brg_task_find("summarization")->follows, "transformers 4.57") == 0);

    brg_task_pipeline *p = NULL;
    CHECK_ERR(brg_task_pipeline_create("sentiment", FIX "/text_classification", NULL, &p), BRG_ERR_INVALID_ARG,
              "unknown task 'sentiment'");
    CHECK_ERR(brg_task_pipeline_create("question-answering", FIX "/token_classification", NULL, &p),
              BRG_ERR_UNSUPPORTED, "is a BertForTokenClassification: question-answering takes BertForQuestionAnswering");
    CHECK_ERR(brg_task_pipeline_create("text-generation", FIX "/text2text", NULL, &p), BRG_ERR_UNSUPPORTED,
              "takes GPT2LMHeadModel");
    brg_task_options o;
    brg_task_options_default(&o);
    o.top_k = 0;
    o.function_to_apply = "tanh";
    CHECK_ERR(brg_task_pipeline_create("text-classification", FIX "/text_classification", &o, &p),
              BRG_ERR_INVALID_ARG, "function_to_apply 'tanh'");
    o.function_to_apply = NULL;
    CHECK_OK(brg_task_pipeline_create("text-classification", FIX "/text_classification", &o, &p));
    if (p) {
        CHECK(strcmp(brg_task_pipeline_inputs(p), "text[, text_pair]") == 0);
        const brg_task_input in[3] = {{.text = "hello world"}, {.question = "who?", .context = "anna"},
                                      {.text_pair = "no text"}};
        char *res[3] = {NULL, NULL, NULL};
        CHECK_ERR(brg_task_pipeline_run(p, in, 2, 0, res), BRG_ERR_INVALID_ARG,
                  "input 1: text-classification does not take \"question\"");
        CHECK(res[0] == NULL && res[1] == NULL);
        CHECK_ERR(brg_task_pipeline_run(p, in + 2, 1, 7, res), BRG_ERR_INVALID_ARG,
                  "input 7: text-classification needs \"text\"");
        CHECK_OK(brg_task_pipeline_run(p, in, 1, 0, res));
        /* top_k 0: every label, best first, the scores a softmax */
        cJSON *j = res[0] ? cJSON_Parse(res[0]) : NULL;
        CHECK(j && cJSON_GetArraySize(j) == 3);
        double sum = 0, last = 2;
        const cJSON *e;
        cJSON_ArrayForEach(e, j) {
            const double s = cJSON_GetObjectItem(e, "score")->valuedouble;
            sum += s;
            CHECK(s <= last);
            last = s;
        }
        CHECK_NEAR(sum, 1.0, 1e-6);
        cJSON_Delete(j);
        free(res[0]);
        brg_task_pipeline_destroy(p);
    }
    p = NULL;
    brg_task_options_default(&o);
    CHECK_OK(brg_task_pipeline_create("fill-mask", FIX "/fill_mask", &o, &p));
    if (p) {
        const brg_task_input in = {.text = "no mask here"};
        char *res = NULL;
        CHECK_ERR(brg_task_pipeline_run(p, &in, 1, 5, &res), BRG_ERR_INVALID_ARG,
                  "input 5: no mask_token ([MASK]) found on the input");
        brg_task_pipeline_destroy(p);
    }
    p = NULL;
    o.doc_stride = 500;
    CHECK_ERR(brg_task_pipeline_create("question-answering", FIX "/question_answering", &o, &p), BRG_ERR_INVALID_ARG,
              "`doc_stride` (500) is larger than `max_seq_len` (384)");
    brg_task_options_default(&o);
    o.max_seq_len = 12;
    o.doc_stride = 4;
    o.input_name = "line";
    CHECK_OK(brg_task_pipeline_create("question-answering", FIX "/question_answering", &o, &p));
    if (p) {
        const brg_task_input in = {.question = "where is the quick brown fox with anna?", .context = "in paris"};
        char *res = NULL;
        CHECK_ERR(brg_task_pipeline_run(p, &in, 1, 3, &res), BRG_ERR_INVALID_ARG, "line 3: the question and special");
        brg_task_pipeline_destroy(p);
    }
}

int main(int argc, char **argv) {
    cli = getenv("BRIGADE_CLI");
    const char *t = getenv("BRIGADE_TEST_TMP");
    if (!cli) {
        fprintf(stderr, "BRIGADE_CLI is not set (ctest sets it to the brigade binary)\n");
        return 1;
    }
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/pipeline_tasks", t ? t : "/tmp");
    mkdir(t ? t : "/tmp", 0755);
    mkdir(dir, 0755);
    tmpdir = dir;
    char ipu[4300];
    snprintf(ipu, sizeof ipu, "%s/ipu_config.json", dir);
    FILE *f = fopen(ipu, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [1, 1], "
              "\"inference_device_iterations\": 2}\n", f);
        fclose(f);
    }
    check_api();
    check_image_api();
    check_fixtures(argc > 1 ? argv[1] : FIX, ipu);
    check_images(ipu);
    return test_finish();
}
