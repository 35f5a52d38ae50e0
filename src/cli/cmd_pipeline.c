/* brigade pipeline TASK: transformers' pipeline(TASK, model=DIR) on inputs from the command line
 * (--text, --text-pair; --question and --context; --image) or a JSONL file (--input, "-" for stdin: one
 * object per line with the task's fields), one JSON line out per input, shaped as the Python call
 * on that input returns it. An image path is taken as given, relative to the current directory
 * (not to the JSONL file), as transformers opens the string. The task layer is the library's (brigade/task_pipeline.h); this file
 * reads flags and lines, and writes results. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/task_pipeline.h"
#include "commands.h"
#include "io/json.h"
#include "ipu_flags.h"
#include "lines.h"
#include "precision_flag.h"
#include "rank_flags.h"
#include "trace_flag.h"

#define MAX_BATCH 1024

typedef struct flags {
    const char *model, *text, *text_pair, *question, *context, *image, *input, *ipu_config, *overrides, *precision;
    const char *function, *aggregation, *ignore, *targets, *early, *kwargs, *clean_up, *trace;
    int64_t batch_size, top_k, doc_stride, max_answer_len, max_seq_len;
    int64_t max_new, min_new, max_length, min_length, beams, num_return, ngram, seed;
    double temperature, top_p, typical_p, repetition, length_penalty;
    bool impossible, no_align, sample, greedy, no_full_text, no_cache;
} flags;

static bool is_generation(const char *task) {
    const brg_task_info *t = brg_task_find(task);
    return t && (strcmp(t->name, "text-generation") == 0 || strcmp(t->name, "text2text-generation") == 0 ||
                 strcmp(t->name, "summarization") == 0 || strcmp(t->name, "translation") == 0);
}

/* "a,b,c" -> a list of its parts (malloc'd, pointing into a copy of s). */
static const char **split_list(const char *s, int *n, char **storage) {
    *storage = strdup(s);
    int cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    const char **out = calloc((size_t)cap, sizeof *out);
    *n = 0;
    if (!*storage || !out) {
        free(*storage);
        free(out);
        return NULL;
    }
    if (!**storage) return out; /* "": an empty list */
    for (char *tok = *storage, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = 0;
        out[(*n)++] = tok;
    }
    return out;
}

/* generate() keyword arguments: --generate-kwargs, then each generation flag given over it. */
static brg_status build_kwargs(const flags *f, const arg_spec *specs, int n, char **out) {
    *out = NULL;
    cJSON *j = NULL;
    if (f->kwargs) {
        BRG_TRY(brg_json_parse(f->kwargs, strlen(f->kwargs), "--generate-kwargs", &j));
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return brg_error(BRG_ERR_INVALID_ARG, "--generate-kwargs: give a JSON object, e.g. '{\"num_beams\": 2}'");
        }
    } else if (!(j = cJSON_CreateObject())) {
        return brg_error(BRG_ERR_OOM, "no memory for the generation arguments");
    }
    static const struct {
        const char *flag, *key;
        int kind; /* 0 int, 1 double */
        size_t at;
    } nums[] = {
        {"max-new-tokens", "max_new_tokens", 0, offsetof(flags, max_new)},
        {"min-new-tokens", "min_new_tokens", 0, offsetof(flags, min_new)},
        {"max-length", "max_length", 0, offsetof(flags, max_length)},
        {"min-length", "min_length", 0, offsetof(flags, min_length)},
        {"num-beams", "num_beams", 0, offsetof(flags, beams)},
        {"num-return-sequences", "num_return_sequences", 0, offsetof(flags, num_return)},
        {"no-repeat-ngram-size", "no_repeat_ngram_size", 0, offsetof(flags, ngram)},
        {"top-k", "top_k", 0, offsetof(flags, top_k)},
        {"seed", "seed", 0, offsetof(flags, seed)},
        {"temperature", "temperature", 1, offsetof(flags, temperature)},
        {"top-p", "top_p", 1, offsetof(flags, top_p)},
        {"typical-p", "typical_p", 1, offsetof(flags, typical_p)},
        {"repetition-penalty", "repetition_penalty", 1, offsetof(flags, repetition)},
        {"length-penalty", "length_penalty", 1, offsetof(flags, length_penalty)},
    };
    bool ok = true;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (!args_seen(specs, n, nums[i].flag)) continue;
        const char *at = (const char *)f + nums[i].at;
        const double v = nums[i].kind ? *(const double *)at : (double)*(const int64_t *)at;
        cJSON_DeleteItemFromObjectCaseSensitive(j, nums[i].key);
        ok = ok && cJSON_AddNumberToObject(j, nums[i].key, v);
    }
    if (f->sample || f->greedy) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "do_sample");
        ok = ok && cJSON_AddBoolToObject(j, "do_sample", f->sample);
    }
    if (f->no_cache) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "use_cache");
        ok = ok && cJSON_AddBoolToObject(j, "use_cache", false);
    }
    if (f->early) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "early_stopping");
        if (strcmp(f->early, "true") == 0 || strcmp(f->early, "false") == 0)
            ok = ok && cJSON_AddBoolToObject(j, "early_stopping", strcmp(f->early, "true") == 0);
        else if (strcmp(f->early, "never") == 0) ok = ok && cJSON_AddStringToObject(j, "early_stopping", "never");
        else {
            cJSON_Delete(j);
            return brg_error(BRG_ERR_INVALID_ARG, "--early-stopping '%s': give true, false or never", f->early);
        }
    }
    *out = ok ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return *out ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for the generation arguments");
}

/* ---- inputs --------------------------------------------------------------------------------- */

typedef struct batch {
    brg_task_input in[MAX_BATCH];
    cJSON *json[MAX_BATCH];
    int64_t n, first_line;
} batch;

static void batch_clear(batch *b) {
    for (int64_t i = 0; i < b->n; i++) cJSON_Delete(b->json[i]);
    b->n = 0;
}

/* A string field of the line's object (NULL when absent; an error when not a string). */
static brg_status field(const cJSON *j, const char *key, int64_t line, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *out = NULL;
    if (!v) return BRG_OK;
    if (!cJSON_IsString(v))
        return brg_error(BRG_ERR_FORMAT, "line %lld: \"%s\" must be a string", (long long)line, key);
    *out = v->valuestring;
    return BRG_OK;
}

static brg_status parse_line(batch *b, const char *line, size_t len, int64_t no, const char *path) {
    char ctx[4200];
    snprintf(ctx, sizeof ctx, "%s:%lld", path, (long long)no);
    cJSON *j = NULL;
    BRG_TRY(brg_json_parse(line, len, ctx, &j));
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", ctx);
    }
    brg_task_input *in = &b->in[b->n];
    memset(in, 0, sizeof *in);
    brg_status st = field(j, "text", no, &in->text);
    if (st == BRG_OK) st = field(j, "text_pair", no, &in->text_pair);
    if (st == BRG_OK) st = field(j, "question", no, &in->question);
    if (st == BRG_OK) st = field(j, "context", no, &in->context);
    if (st == BRG_OK) st = field(j, "image", no, &in->image);
    if (st != BRG_OK) {
        cJSON_Delete(j);
        return st;
    }
    if (b->n == 0) b->first_line = no;
    b->json[b->n++] = j;
    return BRG_OK;
}

static brg_status flush(brg_task_pipeline *p, batch *b) {
    static char *results[MAX_BATCH];
    if (b->n == 0) return BRG_OK;
    brg_status st = brg_task_pipeline_run(p, b->in, b->n, b->first_line, results);
    for (int64_t i = 0; st == BRG_OK && i < b->n; i++) {
        fputs(results[i], stdout);
        fputc('\n', stdout);
    }
    for (int64_t i = 0; st == BRG_OK && i < b->n; i++) free(results[i]);
    fflush(stdout);
    batch_clear(b);
    return st;
}

/* Every line of `path` (stdin for "-"): batches of consecutive lines, so that "line N" in a
 * message is the file's line N; a blank line ends a batch. */
static brg_status run_file(brg_task_pipeline *p, const char *path, int64_t batch_size) {
    static batch b;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    brg_status st = BRG_OK;
    int64_t no = 0, seen = 0;
    size_t len;
    for (char *line; st == BRG_OK && (line = cli_read_line(f, &len));) {
        no++;
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i == len) st = flush(p, &b);
        else {
            st = parse_line(&b, line, len, no, path);
            seen++;
            if (st == BRG_OK && b.n == batch_size) st = flush(p, &b);
        }
        free(line);
    }
    if (st == BRG_OK) st = flush(p, &b);
    batch_clear(&b);
    if (f != stdin) fclose(f);
    if (st == BRG_OK && seen == 0) st = brg_error(BRG_ERR_INVALID_ARG, "%s holds no inputs", path);
    return st;
}

static brg_status run_one(brg_task_pipeline *p, const flags *f) {
    const brg_task_input in = {.text = f->text, .text_pair = f->text_pair, .question = f->question,
                               .context = f->context, .image = f->image};
    char *result = NULL;
    BRG_TRY(brg_task_pipeline_run(p, &in, 1, 1, &result));
    puts(result);
    free(result);
    return BRG_OK;
}

/* ---- the command ------------------------------------------------------------------------------ */

static void usage_tasks(void) {
    int n;
    const brg_task_info *t = brg_task_list(&n);
    printf("\ntasks (input fields -> one JSON line per input):\n");
    for (int i = 0; i < n; i++)
        printf("  %-21s %s -> %s%s\n                        models: %s; follows %s\n", t[i].name, t[i].inputs,
               t[i].returns, t[i].implemented ? "" : " (not implemented yet)", t[i].models, t[i].follows);
    printf("  translation_XX_to_YY  as translation, with config.json's task_specific_params entry of that name\n");
}

int cmd_pipeline(int argc, char **argv) {
    flags f = {.batch_size = 8};
    cli_rank_flags ranks = CLI_RANK_FLAGS_INIT;
    arg_spec specs[] = {
        {"model", ARG_STRING, &f.model, true, "model folder (or cached hub id); the text tasks need its tokenizer",
         false},
        {"text", ARG_STRING, &f.text, false, "one input's text", false},
        {"text-pair", ARG_STRING, &f.text_pair, false, "text-classification: its second sequence", false},
        {"question", ARG_STRING, &f.question, false, "question-answering: the question", false},
        {"context", ARG_STRING, &f.context, false, "question-answering: the context", false},
        {"image", ARG_STRING, &f.image, false, "image-classification: a PNG or JPEG file", false},
        {"input", ARG_STRING, &f.input, false,
         "JSONL file (- for stdin), one object per line: {\"text\"[, \"text_pair\"]}, {\"question\", \"context\"} or "
         "{\"image\": PATH} (relative to the current directory)",
         false},
        {"batch-size", ARG_INT, &f.batch_size, false,
         "inputs per forward pass (question answering: windows), 1 to 1024 (8); results do not depend on it", false},
        {"ipu-config", ARG_STRING, &f.ipu_config, false,
         "run the forward passes as this IPUConfig's inference pipeline (generation: checked, decoded on one device)",
         false},
        {"ipu-config-overrides", ARG_STRING, &f.overrides, false, "\"k1=v1,k2=[1 2]\" over --ipu-config", false},
        {"precision", ARG_STRING, &f.precision, false, CLI_PRECISION_HELP, false},
        CLI_RANK_FLAG_SPECS(ranks),
        {"trace", ARG_STRING, &f.trace, false, "write a timeline of the run (Chrome trace-event JSON, Perfetto) to FILE.json",
         false},
        {"top-k", ARG_INT, &f.top_k, false,
         "labels (text-classification, 0: all; image-classification, 5), predictions per mask (fill-mask, 5), "
         "answers (question-answering, 1); generation: sample from the k most likely tokens", false},
        {"function-to-apply", ARG_STRING, &f.function, false,
         "text-classification, image-classification: softmax, sigmoid or none", false},
        {"aggregation-strategy", ARG_STRING, &f.aggregation, false,
         "token-classification: none, simple, first, average or max (none)", false},
        {"ignore-labels", ARG_STRING, &f.ignore, false, "token-classification: labels dropped, comma-separated (O)",
         false},
        {"targets", ARG_STRING, &f.targets, false, "fill-mask: score only these tokens, comma-separated", false},
        {"doc-stride", ARG_INT, &f.doc_stride, false,
         "question-answering: context tokens windows share (min(max-seq-len / 2, 128))", false},
        {"max-answer-len", ARG_INT, &f.max_answer_len, false, "question-answering: tokens an answer spans at most (15)",
         false},
        {"max-seq-len", ARG_INT, &f.max_seq_len, false,
         "question-answering: tokens per window, question included (min(model_max_length, 384))", false},
        {"handle-impossible-answer", ARG_FLAG, &f.impossible, false, "question-answering: the empty answer competes",
         false},
        {"no-align-to-words", ARG_FLAG, &f.no_align, false, "question-answering: answers end at tokens, not words",
         false},
        {"max-new-tokens", ARG_INT, &f.max_new, false, "generation: tokens to add at most", false},
        {"min-new-tokens", ARG_INT, &f.min_new, false, "generation: no eos before this many new tokens", false},
        {"max-length", ARG_INT, &f.max_length, false, "generation: max_length", false},
        {"min-length", ARG_INT, &f.min_length, false, "generation: min_length", false},
        {"do-sample", ARG_FLAG, &f.sample, false, "generation: sample (text-generation's default)", false},
        {"greedy", ARG_FLAG, &f.greedy, false, "generation: do_sample=False (greedy or beam search)", false},
        {"temperature", ARG_DOUBLE, &f.temperature, false, "generation: sampling temperature", false},
        {"top-p", ARG_DOUBLE, &f.top_p, false, "generation: nucleus sampling mass", false},
        {"typical-p", ARG_DOUBLE, &f.typical_p, false, "generation: typical sampling mass", false},
        {"seed", ARG_INT, &f.seed, false, "generation: sampling seed (brigade's generator)", false},
        {"repetition-penalty", ARG_DOUBLE, &f.repetition, false, "generation: penalty for repeated tokens", false},
        {"no-repeat-ngram-size", ARG_INT, &f.ngram, false, "generation: no n-gram of this size twice", false},
        {"num-beams", ARG_INT, &f.beams, false, "generation: beam search with this many beams", false},
        {"length-penalty", ARG_DOUBLE, &f.length_penalty, false, "generation: beam score = logprob / length^this",
         false},
        {"early-stopping", ARG_STRING, &f.early, false, "generation: true, false or never", false},
        {"num-return-sequences", ARG_INT, &f.num_return, false, "generation: sequences per input", false},
        {"no-cache", ARG_FLAG, &f.no_cache, false, "generation: no KV cache", false},
        {"generate-kwargs", ARG_STRING, &f.kwargs, false,
         "generation: generate() arguments as a JSON object (generation_config.json keys); the flags above win", false},
        {"no-full-text", ARG_FLAG, &f.no_full_text, false, "text-generation: the continuation only (return_full_text=False)",
         false},
        {"clean-up-tokenization-spaces", ARG_STRING, &f.clean_up, false,
         "true or false (default: tokenizer_config.json's; false for text2text tasks)", false},
    };
    const int n = (int)(sizeof specs / sizeof specs[0]);
    if (argc < 3 || args_wants_help(argc, argv, 2)) {
        args_usage("pipeline TASK", "transformers' pipeline(TASK) on a model folder: one JSON line per input, shaped "
                   "as the Python call on that input returns it.", specs, n);
        usage_tasks();
        return argc < 3 && !args_wants_help(argc, argv, 2) ? 2 : 0;
    }
    const char *task = argv[2];
    if (strncmp(task, "--", 2) == 0) {
        fprintf(stderr, "brigade pipeline: give the task first: brigade pipeline TASK --model DIR ... (see brigade "
                        "pipeline --help)\n");
        return 2;
    }
    if (!args_parse("pipeline", argc, argv, 3, specs, n)) return 2;
    const bool qa_flags = f.question || f.context, text_flags = f.text || f.text_pair, image = f.image != NULL;
    if ((f.input != NULL) + (qa_flags || text_flags || image) != 1 || qa_flags + text_flags + image > 1) {
        fprintf(stderr, "brigade pipeline: give --input FILE.jsonl, or --text TEXT [--text-pair TEXT], or --question Q "
                        "--context C, or --image PATH\n");
        return 2;
    }
    if (f.batch_size < 1 || f.batch_size > MAX_BATCH) {
        fprintf(stderr, "brigade pipeline: --batch-size %lld is not in [1, %d]\n", (long long)f.batch_size, MAX_BATCH);
        return 2;
    }
    if (f.overrides && !f.ipu_config) {
        fprintf(stderr, "brigade pipeline: --ipu-config-overrides needs --ipu-config\n");
        return 2;
    }
    if (f.sample && f.greedy) {
        fprintf(stderr, "brigade pipeline: --do-sample and --greedy contradict each other\n");
        return 2;
    }
    if (cli_rank_flags_apply(&ranks) != BRG_OK) return cli_fail("pipeline");
    if (!cli_trace_begin("pipeline", f.trace)) return 1;
    brg_task_options o;
    brg_task_options_default(&o);
    o.batch_size = f.batch_size;
    o.input_name = f.input ? "line" : "input";
    const bool gen = is_generation(task);
    brg_status st = BRG_OK;
    if (!gen && args_seen(specs, n, "top-k")) o.top_k = f.top_k;
    o.function_to_apply = f.function;
    if (f.aggregation) st = brg_aggregation_parse(f.aggregation, &o.aggregation);
    char *ignore_store = NULL, *target_store = NULL, *kwargs = NULL;
    const char **ignore = NULL, **targets = NULL;
    if (st == BRG_OK && f.ignore) {
        ignore = split_list(f.ignore, &o.n_ignore_labels, &ignore_store);
        o.ignore_labels = ignore;
        if (!ignore) st = brg_error(BRG_ERR_OOM, "no memory for --ignore-labels");
    }
    if (st == BRG_OK && f.targets) {
        targets = split_list(f.targets, &o.n_targets, &target_store);
        o.targets = targets;
        if (!targets) st = brg_error(BRG_ERR_OOM, "no memory for --targets");
    }
    if (args_seen(specs, n, "doc-stride")) o.doc_stride = f.doc_stride;
    if (args_seen(specs, n, "max-answer-len")) o.max_answer_len = f.max_answer_len;
    if (args_seen(specs, n, "max-seq-len")) o.max_seq_len = f.max_seq_len;
    o.handle_impossible_answer = f.impossible;
    o.no_align_to_words = f.no_align;
    o.no_full_text = f.no_full_text;
    if (st == BRG_OK && f.clean_up) {
        if (strcmp(f.clean_up, "true") == 0) o.clean_up_tokenization_spaces = 1;
        else if (strcmp(f.clean_up, "false") == 0) o.clean_up_tokenization_spaces = 0;
        else st = brg_error(BRG_ERR_INVALID_ARG, "--clean-up-tokenization-spaces '%s': give true or false", f.clean_up);
    }
    if (st == BRG_OK && gen) st = build_kwargs(&f, specs, n, &kwargs);
    o.generate_kwargs = kwargs;
    if (st == BRG_OK) st = cli_forward_precision(f.precision, &o.inference.compute_dtype);
    brg_ipu_config cfg;
    if (st == BRG_OK && f.ipu_config) {
        st = cli_load_ipu_config(f.ipu_config, f.overrides, BRG_IPU_MODE_INFERENCE, &cfg);
        o.ipu_config = &cfg;
    }
    brg_task_pipeline *p = NULL;
    if (st == BRG_OK) st = brg_task_pipeline_create(task, f.model, &o, &p);
    if (st == BRG_OK) st = f.input ? run_file(p, f.input, f.batch_size) : run_one(p, &f);
    brg_task_pipeline_destroy(p);
    free(ignore);
    free(ignore_store);
    free(targets);
    free(target_store);
    free(kwargs);
    st = cli_trace_end("pipeline", st);
    return st == BRG_OK ? 0 : cli_fail("pipeline");
}
