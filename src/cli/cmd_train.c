/* brigade train: a model folder, an ipu_config.json and data in; a trained model folder out. */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/generate.h"
#include "brigade/registry.h"
#include "brigade/tokenizer.h"
#include "brigade/trainer.h"
#include "commands.h"
#include "rank_flags.h"
#include "brigade/trace.h"
#include "io/json.h"
#include "progress.h"
#include "train/checkpoint_dir.h"
#include "trace_flag.h"
#include "train_data.h"

typedef struct train_flags {
    const char *model, *ipu_config, *data, *output, *optimizer, *lr_schedule, *log, *eval_data, *overrides;
    const char *resume, *device_memory, *schedule, *source_prefix, *trace, *precision;
    int64_t steps, micro_batch, warmup, seed, eval_every, save_every, save_total_limit, seq_len, rows, threads,
        schedule_steps, logging_steps, max_target_length, doc_stride, loss_scaling_interval, dataloader_workers;
    double epochs, lr, weight_decay, max_grad_norm, mlm_probability, loss_scaling;
    bool no_shuffle, quiet, pin, overwrite_output, line_by_line, stochastic_rounding, no_stochastic_rounding;
} train_flags;

static void print_warnings(const brg_ipu_config *cfg) {
    for (int i = 0; i < cfg->n_warnings; i++) fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
}

static brg_status load_ipu_config(const train_flags *f, brg_ipu_config *cfg) {
    brg_ipu_config_init(cfg);
    if (f->ipu_config) BRG_TRY(brg_ipu_config_load(f->ipu_config, cfg));
    if (f->overrides) BRG_TRY(brg_ipu_config_update_from_string(cfg, f->overrides));
    BRG_TRY(brg_ipu_config_validate(cfg));
    brg_ipu_config_train(cfg);
    print_warnings(cfg);
    return BRG_OK;
}

/* "builtin:NAME" is a dataset brigade generates; anything else a file. */
static bool is_safetensors(const char *path) {
    const size_t n = strlen(path);
    return n >= 12 && strcmp(path + n - 12, ".safetensors") == 0;
}

/* Text goes through the model folder's tokenizer when it has one (never as bytes then), prepared
 * for what the model's head trains on (train_data.c); without a tokenizer, text is bytes. */
static brg_status load_data(const char *ref, const train_flags *f, const brg_model *m, int64_t seq_len, int64_t rows,
                            uint64_t seed, bool eval, brg_dataset **out) {
    if (strncmp(ref, "builtin:", 8) == 0) {
        if (m->vocab_size < 256)
            return brg_error(BRG_ERR_INVALID_ARG, "built-in datasets are byte-level: the model needs vocab_size >= 256");
        return brg_dataset_builtin(ref + 8, rows, seq_len, seed, out);
    }
    if (is_safetensors(ref)) return brg_dataset_load(ref, m, seq_len, out);
    const train_text_flags text = {.seq_len = seq_len, .mlm_probability = f->mlm_probability,
                                   .line_by_line = f->line_by_line, .seed = seed, .source_prefix = f->source_prefix,
                                   .max_target_length = f->max_target_length, .doc_stride = f->doc_stride};
    return train_data_load_text(ref, f->model, m, &text, eval, out);
}

/* On a terminal the trainer's progress goes to a bar; elsewhere it prints its lines itself. */
static cli_progress bar;

static void show_bar(void *ctx, const brg_train_progress *p) {
    cli_progress *b = ctx;
    if (!b->out) {
        cli_progress_init(b, stdout, "train", "steps", p->total_steps);
        b->first = p->first_step;
    }
    char extra[160], ppl[40] = "";
    if (!isnan(p->perplexity)) snprintf(ppl, sizeof ppl, "  ppl %.4g", p->perplexity);
    snprintf(extra, sizeof extra, "epoch %.2f  loss %.4f%s  lr %.3g  %.0f tokens/s", p->epoch, p->loss, ppl, p->lr,
             p->tokens_per_s);
    cli_progress_show(b, p->step, p->steps_per_s, p->eta_seconds, extra);
}

static brg_status fill_options(const train_flags *f, const brg_ipu_config *cfg, const brg_placement *pl,
                               brg_train_options *o) {
    brg_train_options_default(o);
    BRG_TRY(brg_train_options_from_ipu_config(cfg, pl, o));
    if (f->schedule) BRG_TRY(brg_schedule_kind_parse(f->schedule, &o->schedule));
    if (f->device_memory) BRG_TRY(brg_parse_bytes(f->device_memory, &o->device_memory));
    o->micro_batch = f->micro_batch;
    o->steps = f->steps;
    o->epochs = f->epochs;
    o->shuffle = !f->no_shuffle;
    o->seed = (uint64_t)(f->seed >= 0 ? f->seed : cfg->has_seed ? cfg->seed : 42);
    brg_optimizer_kind kind;
    BRG_TRY(brg_optimizer_kind_parse(f->optimizer, &kind));
    o->optimizer = brg_optimizer_config_default(kind);
    o->optimizer.lr = f->lr;
    o->optimizer.weight_decay = f->weight_decay;
    BRG_TRY(brg_lr_schedule_kind_parse(f->lr_schedule, &o->lr_schedule.kind));
    o->lr_schedule.warmup_steps = f->warmup;
    o->lr_schedule.total_steps = f->schedule_steps; /* 0: the run's (or a resumed run's original) */
    o->max_grad_norm = (float)f->max_grad_norm;
    if (f->precision) BRG_TRY(brg_precision_parse(f->precision, &o->precision));
    if (f->loss_scaling < 0 || f->loss_scaling > 3.0e38)
        return brg_error(BRG_ERR_INVALID_ARG, "--loss-scaling must be a positive scale (got %g)", f->loss_scaling);
    o->loss_scaling = (float)f->loss_scaling;
    o->loss_scaling_interval = f->loss_scaling_interval;
    if (f->stochastic_rounding && f->no_stochastic_rounding)
        return brg_error(BRG_ERR_INVALID_ARG, "--stochastic-rounding and --no-stochastic-rounding contradict each other");
    if (f->stochastic_rounding) o->stochastic_rounding = 1;
    if (f->no_stochastic_rounding) o->stochastic_rounding = 0;
    o->output_dir = f->output;
    o->save_every = f->save_every;
    o->save_total_limit = (int)f->save_total_limit;
    o->overwrite_output = f->overwrite_output;
    o->log_path = f->log;
    o->logging_steps = f->logging_steps;
    o->resume_dir = f->resume;
    o->eval_every = f->eval_every;
    o->progress = f->quiet ? NULL : stdout;
    if (o->progress && isatty(STDOUT_FILENO)) {
        o->on_progress = show_bar;
        o->on_progress_ctx = &bar;
    }
    o->pin_threads = f->pin;
    o->intra_threads = (int)f->threads;
    o->dataloader_workers = (int)f->dataloader_workers;
    if (o->accumulation < o->stages)
        fprintf(stderr,
                "warning: gradient_accumulation_steps (%d) is less than the %d pipeline stages: the pipeline is "
                "never full and idles %.0f%% of each step (ideal efficiency m/(m+p-1) = %.0f%%)\n",
                o->accumulation, o->stages, 100 * (1 - brg_schedule_ideal_efficiency(o->stages, o->accumulation)),
                100 * brg_schedule_ideal_efficiency(o->stages, o->accumulation));
    return BRG_OK;
}

/* ---- flags that make no sense together or alone ---- */

typedef struct int_floor {
    const char *flag;
    int64_t value, min;
} int_floor;

static brg_status check_floors(const train_flags *f, const arg_spec *specs, int n) {
    /* A 0 or negative count never means "off" or "default" when written out: it is a mistake. */
    const int_floor floors[] = {
        {"steps", f->steps, 1},           {"micro-batch-size", f->micro_batch, 1}, {"save-every", f->save_every, 1},
        {"save-total-limit", f->save_total_limit, 1}, {"lr-schedule-steps", f->schedule_steps, 1},
        {"logging-steps", f->logging_steps, 1},
        {"eval-every", f->eval_every, 1}, {"sequence-length", f->seq_len, 1},      {"rows", f->rows, 1},
        {"warmup-steps", f->warmup, 0}, {"max-target-length", f->max_target_length, 1}, {"doc-stride", f->doc_stride, 0},
    };
    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++)
        if (args_seen(specs, n, floors[i].flag) && floors[i].value < floors[i].min)
            return brg_error(BRG_ERR_INVALID_ARG, "--%s %lld: give at least %lld", floors[i].flag,
                             (long long)floors[i].value, (long long)floors[i].min);
    if (f->threads < 1 || f->threads > 256)
        return brg_error(BRG_ERR_INVALID_ARG, "--threads-per-device %lld is not in [1, 256]", (long long)f->threads);
    if (f->dataloader_workers < 0 || f->dataloader_workers > BRG_DATA_LOADER_MAX_WORKERS)
        return brg_error(BRG_ERR_INVALID_ARG, "--dataloader-workers %lld is not in [0, %d]",
                         (long long)f->dataloader_workers, BRG_DATA_LOADER_MAX_WORKERS);
    if (args_seen(specs, n, "epochs") && !(f->epochs > 0))
        return brg_error(BRG_ERR_INVALID_ARG, "--epochs %g: give a positive number", f->epochs);
    if (!(f->mlm_probability > 0 && f->mlm_probability < 1))
        return brg_error(BRG_ERR_INVALID_ARG, "--mlm-probability %g: give a number between 0 and 1", f->mlm_probability);
    return BRG_OK;
}

/* The step of the checkpoint --resume takes from `dir` (its newest complete one), or -1 when there
 * is none with a readable trainer_state.json (the trainer's own checks then say what is wrong). */
static int64_t checkpoint_step(const char *dir) {
    char ckpt[4096], path[4200];
    if (brg_ckpt_dir_find(dir, ckpt, sizeof ckpt) != BRG_OK) {
        brg_clear_error();
        return -1;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/trainer_state.json", ckpt) >= sizeof path) return -1;
    cJSON *j;
    if (brg_json_load_file(path, 1 << 20, &j) != BRG_OK) return -1;
    int64_t step = -1;
    if (brg_json_get_int(j, path, "global_step", true, 0, &step) != BRG_OK) step = -1;
    cJSON_Delete(j);
    brg_clear_error();
    return step;
}

/* The output folder is written into: it must not be one of the run's inputs. */
static brg_status check_output_path(const train_flags *f) {
    char *out = realpath(f->output, NULL);
    if (!out) return BRG_OK; /* not there yet: it cannot be an input */
    const struct {
        const char *flag, *path;
    } inputs[] = {{"--model", f->model}, {"--data", f->data}, {"--eval-data", f->eval_data}, {"--ipu-config", f->ipu_config}};
    brg_status st = BRG_OK;
    for (size_t i = 0; st == BRG_OK && i < sizeof inputs / sizeof inputs[0]; i++) {
        char *in = inputs[i].path ? realpath(inputs[i].path, NULL) : NULL;
        if (in && strcmp(in, out) == 0)
            st = brg_error(BRG_ERR_INVALID_ARG, "--output %s is the %s folder or file: write the run somewhere else",
                           f->output, inputs[i].flag);
        free(in);
    }
    free(out);
    return st;
}

static brg_status check_flags(const train_flags *f, const arg_spec *specs, int n) {
    BRG_TRY(check_floors(f, specs, n));
    BRG_TRY(check_output_path(f));
    bool steps = args_seen(specs, n, "steps");
    if (steps && args_seen(specs, n, "epochs"))
        return brg_error(BRG_ERR_INVALID_ARG, "--steps and --epochs both say how long to train: give one of them");
    if (args_seen(specs, n, "eval-every") && !f->eval_data)
        return brg_error(BRG_ERR_INVALID_ARG, "--eval-every needs --eval-data (the data to evaluate on)");
    int64_t done = f->resume && steps ? checkpoint_step(f->resume) : -1;
    if (done > f->steps)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "--steps %lld is the total number of steps, and the checkpoint in %s is already at step "
                         "%lld: pass --steps above %lld to train further",
                         (long long)f->steps, f->resume, (long long)done, (long long)done);
    return BRG_OK;
}

/* For byte-level built-in tasks: show what the model now does with a few prompts. */
static void print_samples(brg_model *m, const char *data) {
    if (strcmp(data, "builtin:reverse") != 0) return;
    const char *words[] = {"relay", "pipe", "hello", "stage"};
    printf("samples (greedy):\n");
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        int32_t ids[64];
        int64_t n = 0, len = 0;
        for (const char *p = words[w]; *p; p++) ids[n++] = (unsigned char)*p;
        ids[n++] = '>';
        if (brg_generate_greedy(m, ids, n, 64, 12, '.', &len) != BRG_OK) return;
        printf("  %s> ", words[w]);
        brg_generate_write_text(stdout, ids + n, len - n);
        putchar('\n');
    }
}

/* ---- SIGINT and SIGTERM ---- */

/* The first SIGINT or SIGTERM received (0: none). The trainer reads it before every step, so
 * the step in progress ends and a checkpoint is written; a second signal ends the process at
 * once, for a run that is stuck or whose user does not want to wait. */
static volatile sig_atomic_t stop_signal;
/* On a terminal the progress line is rewritten in place: a message must start a line of its own. */
static bool stdout_tty;

static void say(const char *msg, size_t len) {
    if (stdout_tty) (void)!write(STDERR_FILENO, "\n", 1);
    (void)!write(STDERR_FILENO, msg, len);
}

/* Set by the first signal. Handlers can run at the same moment on two threads (the device
 * threads, OpenBLAS's pool): the test-and-set decides which one was first, so the other always
 * takes the second signal's path. Lock-free, so safe in a handler. */
static atomic_flag signalled = ATOMIC_FLAG_INIT;

static void on_signal(int sig) {
    if (atomic_flag_test_and_set(&signalled)) {
        static const char msg[] = "brigade train: interrupted again: stopping now, without a checkpoint\n";
        say(msg, sizeof msg - 1);
        _exit(128 + sig);
    }
    stop_signal = sig;
    static const char msg[] = "brigade train: stopping after this step to write a checkpoint (interrupt again to "
                              "stop now)\n";
    say(msg, sizeof msg - 1);
}

/* Installed even where the signals were ignored at start (a job started with & in a script
 * ignores SIGINT): training is long, and stopping it cleanly must always be possible. */
static void install_signal_handlers(void) {
    stdout_tty = isatty(STDOUT_FILENO);
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static brg_status run(const train_flags *f) {
    brg_ipu_config cfg;
    BRG_TRY(load_ipu_config(f, &cfg));
    brg_model *m = NULL;
    brg_dataset *data = NULL, *eval = NULL;
    brg_placement pl = {0};
    brg_train_options o;
    uint64_t t0 = brg_trace_enabled() ? brg_trace_now() : 0;
    brg_status st = brg_model_load(f->model, &m);
    if (t0) brg_trace_named("load model", t0, -1);
    if (st == BRG_OK) st = brg_model_parallelize(m, &cfg, BRG_IPU_MODE_TRAINING, &pl);
    if (st == BRG_OK && !f->quiet) brg_placement_print(stdout, m, &pl);
    if (st == BRG_OK) st = fill_options(f, &cfg, &pl, &o);
    int64_t seq = f->seq_len > 0 ? f->seq_len : m ? m->max_positions : 0;
    t0 = t0 ? brg_trace_now() : 0;
    if (st == BRG_OK) st = load_data(f->data, f, m, seq, f->rows, o.seed, false, &data);
    if (st == BRG_OK && f->eval_data)
        st = load_data(f->eval_data, f, m, seq, f->rows / 8 + 1, o.seed + 1, true, &eval);
    if (t0) brg_trace_named("load data", t0, -1);
    if (st == BRG_OK) {
        o.eval_data = eval;
        o.stop = &stop_signal;
        brg_train_result r;
        st = brg_train(m, data, &o, &r);
    }
    const bool host = brg_ranks_is_host(); /* under mpirun, rank 0 writes the output */
    if (st == BRG_OK && host) st = brg_ipu_config_save_pretrained(&cfg, f->output);
    /* The trained folder keeps its tokenizer, so generate, tokenize and embed work on it. */
    int copied = 0;
    if (st == BRG_OK && host) st = brg_tokenizer_copy_files(f->model, f->output, &copied);
    if (st == BRG_OK && !f->quiet) print_samples(m, f->data);
    brg_placement_free(&pl);
    brg_dataset_free(data);
    brg_dataset_free(eval);
    brg_model_destroy(m);
    return st;
}

/* The exit status of a stop request is the shell's for death by that signal (130, 143). */
static int interrupted(const train_flags *f) {
    fprintf(stderr, "brigade train: %s; to continue, run the same command with --resume %s\n", brg_last_error(), f->output);
    return 128 + stop_signal;
}

int cmd_train(int argc, char **argv) {
    /* Through a pipe or into a file, stdout would be block-buffered: the allocation table and the
     * progress lines would come late, or be lost if the run dies. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    cli_rank_flags ranks = CLI_RANK_FLAGS_INIT;
    train_flags f = {.optimizer = "adamw", .lr_schedule = "linear", .micro_batch = 1, .seed = -1, .lr = 5e-5,
                     .rows = 4096, .threads = 1, .mlm_probability = 0.15, .max_target_length = 128, .doc_stride = 128};
    arg_spec specs[] = {
        {"model", ARG_STRING, &f.model, true, "model folder or hub id in the local cache", false},
        {"ipu-config", ARG_STRING, &f.ipu_config, false, "ipu_config.json, a folder or hub id holding one", false},
        {"ipu-config-overrides", ARG_STRING, &f.overrides, false, "\"k1=v1,k2=[1 2],k3=true\"", false},
        {"data", ARG_STRING, &f.data, true,
         "safetensors columns, text (.txt, .jsonl, .csv; through the folder's tokenizer) or builtin:reverse", false},
        {"output", ARG_STRING, &f.output, true, "folder for the trained model and checkpoint", false},
        {"steps", ARG_INT, &f.steps, false, "optimizer steps (or --epochs)", false},
        {"epochs", ARG_DOUBLE, &f.epochs, false, "passes over the data (default 1 when --steps is absent)", false},
        {"micro-batch-size", ARG_INT, &f.micro_batch, false, "rows per micro-batch (default 1)", false},
        {"lr", ARG_DOUBLE, &f.lr, false, "peak learning rate (default 5e-5)", false},
        {"optimizer", ARG_STRING, &f.optimizer, false, "sgd, adam, adamw (default), rmsprop, lamb", false},
        {"lr-schedule", ARG_STRING, &f.lr_schedule, false, "constant, constant_with_warmup, linear (default), cosine", false},
        {"warmup-steps", ARG_INT, &f.warmup, false, "linear warm-up steps (default 0)", false},
        {"weight-decay", ARG_DOUBLE, &f.weight_decay, false, "weight decay (decoupled for adamw), not on biases/LayerNorm (default 0)", false},
        {"max-grad-norm", ARG_DOUBLE, &f.max_grad_norm, false, "clip the global gradient norm (default: off)", false},
        {"precision", ARG_STRING, &f.precision, false,
         "compute.master types: 32.32 (default), 16.32, bf16.32, 16.16, bf16.16 (docs/precision.md)", false},
        {"loss-scaling", ARG_DOUBLE, &f.loss_scaling, false,
         "static loss scale (with the IPUConfig's auto_loss_scaling: the starting one, default 65536)", false},
        {"loss-scaling-interval", ARG_INT, &f.loss_scaling_interval, false,
         "automatic loss scaling: clean steps before the scale doubles (default 2000)", false},
        {"stochastic-rounding", ARG_FLAG, &f.stochastic_rounding, false, "round half weight updates stochastically (default for .16)", false},
        {"no-stochastic-rounding", ARG_FLAG, &f.no_stochastic_rounding, false, "round half weight updates to nearest", false},
        {"seed", ARG_INT, &f.seed, false, "seed for shuffling and dropout (default: the IPUConfig's, else 42)", false},
        {"log", ARG_STRING, &f.log, false, "JSON-lines log, one line per logged step", false},
        {"logging-steps", ARG_INT, &f.logging_steps, false, "log and show progress every K steps (default 1)", false},
        {"eval-data", ARG_STRING, &f.eval_data, false, "data to evaluate on", false},
        {"eval-every", ARG_INT, &f.eval_every, false, "evaluate every K steps (and at the end)", false},
        {"lr-schedule-steps", ARG_INT, &f.schedule_steps, false,
         "length of the LR schedule (default: --steps; on --resume, the original run's)", false},
        {"save-every", ARG_INT, &f.save_every, false, "write OUT/checkpoint-N every K steps (and at the end)", false},
        {"save-total-limit", ARG_INT, &f.save_total_limit, false, "keep only the newest K checkpoints", false},
        {"overwrite-output", ARG_FLAG, &f.overwrite_output, false, "write into an --output folder that holds other files", false},
        {"resume", ARG_STRING, &f.resume, false, "continue from OUT's newest checkpoint (or a checkpoint folder)", false},
        {"no-shuffle", ARG_FLAG, &f.no_shuffle, false, "read rows in order", false},
        {"device-memory", ARG_STRING, &f.device_memory, false, "memory budget per device, e.g. 2GiB", false},
        {"schedule", ARG_STRING, &f.schedule, false, "pipeline schedule: 1f1b (default) or gpipe", false},
        {"sequence-length", ARG_INT, &f.seq_len, false, "tokens per row for text data (default n_positions)", false},
        {"rows", ARG_INT, &f.rows, false, "rows of a built-in dataset (default 4096)", false},
        {"mlm-probability", ARG_DOUBLE, &f.mlm_probability, false, "masked LM: share of tokens masked (default 0.15)", false},
        {"line-by-line", ARG_FLAG, &f.line_by_line, false, "masked LM: each text line its own row, padded", false},
        {"source-prefix", ARG_STRING, &f.source_prefix, false, "seq2seq: text put before every source, e.g. \"summarize: \"", false},
        {"max-target-length", ARG_INT, &f.max_target_length, false, "seq2seq: target tokens, truncated and padded (default 128)", false},
        {"doc-stride", ARG_INT, &f.doc_stride, false, "question answering: context tokens shared by consecutive windows (default 128)", false},
        {"pin-devices", ARG_FLAG, &f.pin, false, "pin each device's thread to its own core", false},
        {"threads-per-device", ARG_INT, &f.threads, false, "threads per device for matrix products (default 1)", false},
        {"dataloader-workers", ARG_INT, &f.dataloader_workers, false,
         "threads preparing the next steps' batches ahead, up to device_iterations steps (default 0: between steps)", false},
        {"quiet", ARG_FLAG, &f.quiet, false, "no allocation, progress or samples on stdout", false},
        CLI_RANK_FLAG_SPECS(ranks),
        {"trace", ARG_STRING, &f.trace, false, "write a timeline of the run (Chrome trace-event JSON, Perfetto) to FILE.json", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("train", "Trains a model pipelined and replicated as its IPUConfig says.", specs, n);
        return 0;
    }
    if (!args_parse("train", argc, argv, 2, specs, n)) return 2;
    if (check_flags(&f, specs, n) != BRG_OK || cli_rank_flags_apply(&ranks) != BRG_OK) return cli_fail("train");
    if (!cli_trace_begin("train", f.trace)) return 1;
    install_signal_handlers();
    brg_status st = run(&f);
    st = cli_trace_end("train", st); /* after a failure or a stop request too: the run so far */
    if (st == BRG_ERR_INTERRUPTED) return interrupted(&f);
    return st == BRG_OK ? 0 : cli_fail("train");
}
