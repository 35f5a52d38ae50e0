/* The task pipelines (brigade/task_pipeline.h) on arbitrary inputs, over the small models of
 * tests/fixtures/pipeline: the input's first byte picks the task (low 3 bits) and its options
 * (high 5 bits); the rest is the input's text, or its question and context (or text and
 * text_pair), cut at the first NUL byte. Byte 0x01 becomes the tokenizer's mask token, so
 * fill-mask sees masks.
 *
 * Beyond "no crash, leak, hang or UB report": a refused input says one line; a result is valid
 * UTF-8 and parses as JSON; question answering's spans lie in the context and its answer is the
 * context's code points [start, end); token classification's spans lie in the text; fill-mask's
 * tokens are in the vocabulary; and the input's result is the same alone and batched beside
 * another input (brg_task_pipeline_run's results do not depend on the batch). */
#include <cJSON.h>
#include <math.h>

#include "brigade/task_pipeline.h"
#include "fuzz_util.h"
#include "io/json.h"

enum { TASKS = 8, VOCAB = 1405 /* the BERT fixtures' WordPiece vocabulary */ };

/* The task and options of a selector byte: the options spread over its high bits. */
static const char *task_of(unsigned sel, brg_task_options *o) {
    static const char *const aggregations[] = {"none", "simple", "first", "average", "max"};
    static const char *const functions[] = {NULL, "softmax", "sigmoid", "none"};
    const unsigned hi = sel >> 3;
    brg_task_options_default(o);
    o->batch_size = 1 + (int64_t)(hi & 1);
    switch (sel & 7) {
    case 0: /* one label, or all of them, through each function */
        o->top_k = hi & 2 ? 0 : BRG_TASK_UNSET;
        o->function_to_apply = functions[(hi >> 2) & 3];
        return "text-classification";
    case 1:
        (void)brg_aggregation_parse(aggregations[(hi >> 1) % 5], &o->aggregation);
        return "token-classification";
    case 2: o->top_k = 1 + (int64_t)((hi >> 1) & 3); return "fill-mask";
    case 3: /* short windows, so a context of a few words already spans several */
        o->max_seq_len = (hi & 2) ? 24 : 64;
        o->doc_stride = (hi & 4) ? 4 : BRG_TASK_UNSET;
        o->max_answer_len = (hi & 8) ? 3 : BRG_TASK_UNSET;
        o->top_k = (hi & 16) ? 3 : BRG_TASK_UNSET;
        o->handle_impossible_answer = (hi & 16) != 0;
        o->no_align_to_words = (hi & 8) != 0;
        return "question-answering";
    case 4: return "feature-extraction";
    case 5:
        o->generate_kwargs = (hi & 2) ? "{\"max_new_tokens\": 3, \"do_sample\": true, \"seed\": 5}"
                                      : "{\"max_new_tokens\": 3}";
        o->no_full_text = (hi & 4) != 0;
        return "text-generation";
    case 6: o->generate_kwargs = "{\"max_new_tokens\": 3, \"num_beams\": 2}"; return "summarization";
    default: o->top_k = 2, o->function_to_apply = functions[(hi >> 1) & 3]; return "text-classification";
    }
}

static const char *folder_of(unsigned sel) {
    static const char *const folders[TASKS] = {"text_classification", "token_classification", "fill_mask",
                                               "question_answering", "feature_extraction", "text_generation",
                                               "text2text", "text_classification"};
    return folders[sel & 7];
}

/* One pipeline per selector byte, made at its first input and kept for the process. */
static brg_task_pipeline *pipeline(unsigned sel) {
    static brg_task_pipeline *made[256];
    if (!made[sel]) {
        brg_task_options o;
        const char *task = task_of(sel, &o);
        char folder[64];
        snprintf(folder, sizeof folder, "tests/fixtures/pipeline/%s", folder_of(sel));
        if (brg_task_pipeline_create(task, fuzz_source_path(folder), &o, &made[sel]) != BRG_OK) {
            fprintf(stderr, "fuzz_task_input: %s\n", brg_last_error());
            abort();
        }
    }
    return made[sel];
}

/* Code points of an input a pipeline answered: it must have been valid UTF-8 text. */
static int64_t code_points(const char *s) {
    if (!brg_utf8_valid(s, strlen(s), NULL)) abort();
    int64_t n = 0;
    for (const char *p = s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

/* The byte offset of code point `cp` of valid UTF-8 text. */
static size_t byte_at(const char *s, int64_t cp) {
    size_t b = 0;
    for (int64_t i = 0; i < cp && s[b]; i++)
        do b++;
        while ((s[b] & 0xC0) == 0x80);
    return b;
}

static int64_t int_field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) abort();
    return (int64_t)v->valuedouble;
}

/* A span [start, end) of `text`'s code points. */
static void check_span(const cJSON *o, int64_t length) {
    const int64_t start = int_field(o, "start"), end = int_field(o, "end");
    if (start < 0 || start > end || end > length) abort();
}

static void check_answer(const cJSON *o, const char *context) {
    check_span(o, code_points(context));
    const int64_t start = int_field(o, "start"), end = int_field(o, "end");
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(o, "answer");
    const size_t b0 = byte_at(context, start), b1 = byte_at(context, end);
    if (!cJSON_IsString(answer) || strlen(answer->valuestring) != b1 - b0 ||
        memcmp(answer->valuestring, context + b0, b1 - b0) != 0)
        abort();
}

static void check_tokens(const cJSON *list) {
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const int64_t token = int_field(e, "token");
        if (token < 0 || token >= VOCAB) abort();
    }
}

/* The properties of a task's result that do not need the model's numbers. */
static void check_result(unsigned sel, const brg_task_input *in, const cJSON *r) {
    const cJSON *e;
    switch (sel & 7) {
    case 1:
        if (!cJSON_IsArray(r)) abort();
        cJSON_ArrayForEach(e, r) check_span(e, code_points(in->text));
        break;
    case 2: /* one list per mask, or the single mask's list */
        if (cJSON_IsArray(r->child)) cJSON_ArrayForEach(e, r) check_tokens(e);
        else check_tokens(r);
        break;
    case 3:
        if (cJSON_IsArray(r)) cJSON_ArrayForEach(e, r) check_answer(e, in->context);
        else check_answer(r, in->context);
        break;
    default: break;
    }
}

/* The input's text(s), 0x01 standing for the mask token. */
static char *with_masks(const uint8_t *data, size_t size) {
    size_t masks = 0;
    for (size_t i = 0; i < size; i++) masks += data[i] == 1;
    char *s = malloc(size + masks * 5 + 1), *p = s;
    if (!s) abort();
    for (size_t i = 0; i < size; i++) {
        if (data[i] == 1) memcpy(p, "[MASK]", 6), p += 6;
        else *p++ = (char)data[i];
    }
    *p = '\0';
    return s;
}

static brg_task_input input_of(unsigned sel, const char *first, const char *second) {
    switch (sel & 7) {
    case 0: return (brg_task_input){.text = first, .text_pair = second};
    case 3: return (brg_task_input){.question = first, .context = second ? second : ""};
    default: return (brg_task_input){.text = first};
    }
}

/* The other input of a batch: a mask for fill-mask, a question and context for QA. For
 * text-generation one token, so the input is never the row left-padded (a padded row's logits
 * equal its own to rounding only, as in transformers); the encoders pad on the right, which adds
 * exact zeros. */
static brg_task_input companion(unsigned sel) {
    switch (sel & 7) {
    case 2: return input_of(sel, "a [MASK] b", NULL);
    case 5: return input_of(sel, "a", NULL);
    default: return input_of(sel, "a b", "c d");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned sel = data[0];
    const uint8_t *body = data + 1, *nul = memchr(body, 0, size - 1);
    const size_t first_len = nul ? (size_t)(nul - body) : size - 1;
    char *first = with_masks(body, first_len), *second = nul ? with_masks(nul + 1, size - 1 - first_len - 1) : NULL;
    brg_task_pipeline *p = pipeline(sel);
    const brg_task_input in = input_of(sel, first, second), both[2] = {in, companion(sel)};
    char *alone = NULL, *batched[2] = {NULL, NULL};
    if (brg_task_pipeline_run(p, &in, 1, 1, &alone) != BRG_OK) fuzz_check_refusal();
    else {
        cJSON *r = NULL; /* brigade's strict parse: well-formed UTF-8 and nothing after the value */
        if (brg_json_parse(alone, strlen(alone), "the result", &r) != BRG_OK) abort();
        check_result(sel, &in, r);
        cJSON_Delete(r);
        if (brg_task_pipeline_run(p, both, 2, 1, batched) != BRG_OK || strcmp(alone, batched[0]) != 0) abort();
    }
    brg_clear_error();
    free(alone), free(batched[0]), free(batched[1]), free(first), free(second);
    return 0;
}
