/* brigade embed: sentence embeddings for lines of text, from a sentence-transformers folder (or
 * any folder with an encoder model and its tokenizer): tokenize a batch of lines, run the model
 * (on one device, or with --ipu-config as the inference pipeline its inference_* attributes
 * describe), pool its last_hidden_state and normalise as the folder's modules say, one JSON line
 * out per line in: {"embedding": [...]}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/registry.h"
#include "brigade/sentence_embedding.h"
#include "brigade/tokenizer.h"
#include "commands.h"
#include "ipu_flags.h"
#include "lines.h"
#include "precision_flag.h"
#include "progress.h"
#include "rank_flags.h"
#include "trace_flag.h"

typedef struct embedder {
    brg_model *model;
    brg_tokenizer *tok;
    brg_sentence_config cfg;
    brg_arena *arena;
    brg_inference *pipeline; /* --ipu-config: the inference pipeline; NULL: one device */
    int64_t multiple;        /* rows a pipelined batch must be a multiple of */
    brg_dtype compute;       /* --precision: the products' type */
    cli_progress progress;   /* lines embedded */
    int64_t batches, lines;
} embedder;

#define MAX_BATCH 64

/* A batch of tokenized lines, padded to the longest (padding is masked out of attention and of
 * the pooling, so its ids do not matter). */
typedef struct batch {
    brg_encoding enc[MAX_BATCH];
    int n;
    int64_t T;
} batch;

static void batch_clear(batch *b) {
    for (int i = 0; i < b->n; i++) brg_encoding_free(&b->enc[i]);
    b->n = 0;
    b->T = 0;
}

static brg_status setup(embedder *e, const char *dir) {
    BRG_TRY(brg_sentence_config_load(dir, &e->cfg));
    BRG_TRY(brg_tokenizer_load(dir, &e->tok));
    BRG_TRY(brg_model_load(dir, &e->model));
    int64_t max_len = e->cfg.max_seq_length > 0 ? e->cfg.max_seq_length : e->model->max_positions;
    if (max_len > e->model->max_positions) max_len = e->model->max_positions;
    /* sentence-transformers: truncation to max_seq_length, padding to the batch's longest. */
    brg_truncation t = {.enabled = true, .max_length = (size_t)max_len, .strategy = BRG_TRUNC_LONGEST_FIRST};
    BRG_TRY(brg_tokenizer_set_truncation(e->tok, &t));
    brg_padding none = {.enabled = false};
    BRG_TRY(brg_tokenizer_set_padding(e->tok, &none));
    return brg_arena_create("embed", 0, &e->arena);
}

static brg_status new_input(embedder *e, int64_t rows, int64_t T, brg_dtype dtype, const char *name,
                            brg_tensor **out) {
    const int64_t shape[2] = {rows, T};
    BRG_TRY(brg_tensor_new(e->arena, dtype, 2, shape, name, out));
    memset((*out)->data, 0, (size_t)(rows * T) * (dtype == BRG_DTYPE_I32 ? sizeof(int32_t) : sizeof(float)));
    return BRG_OK;
}

/* `rows` rows: the batch's lines, then (a pipeline's last, partial batch) rows of one attended
 * padding token, whose embeddings are dropped: every row is computed on its own, so they change
 * nothing in the others. */
static brg_status fill_inputs(embedder *e, const batch *b, int64_t rows, brg_tensor_map *in) {
    brg_tensor *ids_t, *mask_t, *types_t;
    BRG_TRY(new_input(e, rows, b->T, BRG_DTYPE_I32, "input_ids", &ids_t));
    BRG_TRY(new_input(e, rows, b->T, BRG_DTYPE_F32, "attention_mask", &mask_t));
    BRG_TRY(new_input(e, rows, b->T, BRG_DTYPE_I32, "token_type_ids", &types_t));
    BRG_TRY(brg_tensor_map_put(in, "input_ids", ids_t));
    BRG_TRY(brg_tensor_map_put(in, "attention_mask", mask_t));
    BRG_TRY(brg_tensor_map_put(in, "token_type_ids", types_t));
    int32_t *ids = ids_t->data, *types = types_t->data;
    float *mask = mask_t->data;
    for (int r = 0; r < b->n; r++)
        for (size_t t = 0; t < b->enc[r].n; t++) {
            ids[r * b->T + (int64_t)t] = b->enc[r].ids[t];
            types[r * b->T + (int64_t)t] = b->enc[r].type_ids[t];
            mask[r * b->T + (int64_t)t] = 1.0f;
        }
    for (int64_t r = b->n; r < rows; r++) mask[r * b->T] = 1.0f;
    return BRG_OK;
}

static const brg_tensor *hidden_of(const brg_named_tensor *outs, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(outs[i].name, "last_hidden_state") == 0) return outs[i].tensor;
    return NULL;
}

static void put_embedding(const float *v, int64_t C) {
    fputs("{\"embedding\": [", stdout);
    for (int64_t c = 0; c < C; c++) printf(c ? ", %.9g" : "%.9g", (double)v[c]);
    fputs("]}\n", stdout);
}

/* The model's outputs for the batch: one forward on the host, or the pipeline's. */
static brg_status run_model(embedder *e, brg_bundle *in, brg_named_tensor *outs, int *n) {
    if (e->pipeline) {
        brg_inference_outputs o;
        BRG_TRY(brg_inference_run(e->pipeline, &in->inputs, e->arena, &o));
        for (*n = 0; *n < o.n_named; (*n)++) outs[*n] = o.named[*n];
        return BRG_OK;
    }
    brg_tape *tape = NULL;
    BRG_TRY(brg_tape_create(e->arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    const brg_dtype before = brg_compute_dtype_set(e->compute); /* this thread is the one device */
    brg_status st = brg_model_forward(e->model, tape, in);
    brg_compute_dtype_set(before);
    if (st == BRG_OK)
        st = brg_model_outputs(e->model, &in->inputs, in->logits, e->arena, outs, BRG_INFERENCE_MAX_OUTPUTS, n);
    brg_tape_destroy(tape);
    return st;
}

/* The model on the batch, pooled, printed. */
static brg_status embed_batch(embedder *e, const batch *b) {
    size_t mark = brg_arena_mark(e->arena);
    /* A pipelined batch has a multiple of replicas x device iterations rows: the last, partial
     * one is padded up to it. */
    int64_t rows = e->pipeline ? (b->n + e->multiple - 1) / e->multiple * e->multiple : b->n;
    brg_bundle in = {0};
    brg_named_tensor outs[BRG_INFERENCE_MAX_OUTPUTS];
    int n = 0;
    brg_status st = fill_inputs(e, b, rows, &in.inputs);
    const uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    if (st == BRG_OK) st = run_model(e, &in, outs, &n);
    if (t0) brg_trace_named("forward batch", t0, e->batches);
    e->batches++;
    const brg_tensor *h = st == BRG_OK ? hidden_of(outs, n) : NULL;
    if (st == BRG_OK && (!h || h->ndim != 3))
        st = brg_error(BRG_ERR_UNSUPPORTED, "%s gives no last_hidden_state to pool (a BertModel folder is what embed takes)",
                       e->model->ops->architecture);
    float *pooled = st == BRG_OK ? malloc((size_t)(b->n * h->shape[2]) * sizeof *pooled) : NULL;
    if (st == BRG_OK && !pooled) st = brg_error(BRG_ERR_OOM, "no memory for the embeddings");
    if (st == BRG_OK)
        st = brg_sentence_pool(&e->cfg, h->data, brg_bundle_input(&in, "attention_mask")->data, b->n, b->T,
                               h->shape[2], pooled);
    for (int r = 0; st == BRG_OK && r < b->n; r++) put_embedding(pooled + r * h->shape[2], h->shape[2]);
    free(pooled);
    brg_arena_reset(e->arena, mark);
    e->lines += b->n;
    if (st == BRG_OK) cli_progress_update(&e->progress, e->lines, NULL);
    return st;
}

/* The lines of a regular file, counted before the run so progress has a total; 0 for a pipe or
 * stdin (progress then shows the count and the rate only). */
static int64_t count_lines(FILE *in) {
    struct stat sb;
    if (in == stdin || fstat(fileno(in), &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    int64_t lines = 0;
    int c, last = '\n';
    while ((c = getc(in)) != EOF) {
        if (c == '\n') lines++;
        last = c;
    }
    if (last != '\n') lines++;
    rewind(in);
    return lines;
}

static brg_status run(embedder *e, FILE *in, int64_t batch_size) {
    static batch b;
    brg_status st = BRG_OK;
    size_t len;
    int64_t line_no = 0;
    for (char *line; st == BRG_OK && (line = cli_read_line(in, &len));) {
        line_no++;
        st = brg_tokenizer_encode(e->tok, line, len, true, &b.enc[b.n]);
        free(line);
        if (st != BRG_OK) {
            st = brg_error_wrap(st, "line %lld", (long long)line_no);
            break;
        }
        if ((int64_t)b.enc[b.n].n > b.T) b.T = (int64_t)b.enc[b.n].n;
        if (++b.n == batch_size) {
            st = embed_batch(e, &b);
            batch_clear(&b);
        }
    }
    if (st == BRG_OK && b.n) st = embed_batch(e, &b);
    batch_clear(&b);
    return st;
}

/* --ipu-config: the pipeline, and the batch size it takes (lines per batch, a multiple of
 * inference_replication_factor x inference_device_iterations; without --batch-size, the
 * smallest such multiple of at least 16). */
static brg_status setup_pipeline(embedder *e, const char *ref, const char *overrides, bool size_given,
                                 int64_t *batch_size) {
    brg_ipu_config cfg;
    BRG_TRY(cli_load_ipu_config(ref, overrides, BRG_IPU_MODE_INFERENCE, &cfg));
    brg_ipu_view v;
    brg_ipu_config_view(&cfg, BRG_IPU_MODE_INFERENCE, &v);
    const int64_t multiple = v.replication_factor * v.device_iterations;
    if (!size_given) *batch_size = (*batch_size + multiple - 1) / multiple * multiple;
    if (*batch_size > MAX_BATCH)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "inference_device_iterations (%lld) x inference_replication_factor (%lld) = %lld lines per "
                         "batch at least, more than the %d embed takes at once",
                         (long long)v.device_iterations, (long long)v.replication_factor, (long long)multiple, MAX_BATCH);
    int64_t micro;
    brg_status st = brg_inference_micro_batch(&cfg, *batch_size, &micro);
    if (st != BRG_OK) return brg_error_wrap(st, "--batch-size %lld", (long long)*batch_size);
    e->multiple = multiple;
    const brg_inference_options opts = {.compute_dtype = e->compute};
    return brg_inference_create(e->model, &cfg, &opts, &e->pipeline);
}

int cmd_embed(int argc, char **argv) {
    const char *model = NULL, *input = NULL, *ipu_config = NULL, *overrides = NULL, *trace = NULL, *precision = NULL;
    int64_t batch_size = 16;
    bool quiet = false;
    cli_rank_flags ranks = CLI_RANK_FLAGS_INIT;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "sentence-transformers folder (or an encoder folder with its tokenizer)", false},
        {"input", ARG_STRING, &input, false, "UTF-8 text file, one sentence per line (default: stdin)", false},
        {"batch-size", ARG_INT, &batch_size, false,
         "lines per forward pass, 1 to 64 (default 16; with --ipu-config a multiple of inference replicas x "
         "device iterations, by default the first from 16)", false},
        {"ipu-config", ARG_STRING, &ipu_config, false, "run as the inference pipeline of this ipu_config.json", false},
        {"ipu-config-overrides", ARG_STRING, &overrides, false, "\"k1=v1,k2=[1 2],k3=true\"", false},
        {"precision", ARG_STRING, &precision, false, CLI_PRECISION_HELP, false},
        CLI_RANK_FLAG_SPECS(ranks),
        {"trace", ARG_STRING, &trace, false, "write a timeline of the run (Chrome trace-event JSON, Perfetto) to FILE.json", false},
        {"quiet", ARG_FLAG, &quiet, false, "no progress on stderr", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("embed", "Sentence embeddings of lines of text; writes one {\"embedding\": [...]} JSON line per line.",
                   specs, n);
        return 0;
    }
    if (!args_parse("embed", argc, argv, 2, specs, n)) return 2;
    if (batch_size < 1 || batch_size > MAX_BATCH) {
        fprintf(stderr, "brigade embed: --batch-size %lld is not in [1, %d]\n", (long long)batch_size, MAX_BATCH);
        return 2;
    }
    if (cli_rank_flags_apply(&ranks) != BRG_OK) return cli_fail("embed");
    FILE *in = cli_open_input("embed", input);
    if (!in) return 1;
    if (!cli_trace_begin("embed", trace)) {
        if (in != stdin) fclose(in);
        return 1;
    }
    embedder e = {0};
    const int64_t total = count_lines(in);
    brg_status st = cli_forward_precision(precision, &e.compute);
    if (st == BRG_OK) st = setup(&e, model);
    if (st == BRG_OK && ipu_config)
        st = setup_pipeline(&e, ipu_config, overrides, args_seen(specs, n, "batch-size"), &batch_size);
    cli_progress_init(&e.progress, quiet ? NULL : stderr, "embed", "lines", total); /* the rate from here */
    if (st == BRG_OK) st = run(&e, in, batch_size);
    cli_progress_finish(&e.progress);
    if (in != stdin) fclose(in);
    brg_inference_destroy(e.pipeline);
    brg_arena_destroy(e.arena);
    brg_model_destroy(e.model);
    brg_tokenizer_free(e.tok);
    st = cli_trace_end("embed", st);
    return st == BRG_OK ? 0 : cli_fail("embed");
}
