/* brigade_bench: training and inference throughput of GPT-2, BERT-base, ViT-base and T5-small on
 * this machine, against the machine's own measured fp32 FMA peak.
 *
 *   brigade_bench [--model small|tiny|bert-base|vit-base|t5-small|all] [--mode train|infer|decode|all]
 *                 [--bt 4x64|8x128|default|all] [--config NAME[,NAME...]|all] [--steps N] [--warmup N]
 *                 [--peak-only] [--no-peak] [--peak1 GFLOPS --peak2 GFLOPS] [--env-tag NAME] [--verbose]
 *                 [--precision 32.32|16.32|bf16.32|16.16|bf16.16] (training; decode: the X.32 modes'
 *                 products, steps reading half weights; RESULT precision=)
 *                 [--trace FILE.json] (training traced into FILE; RESULT trace=on)
 *                 [--mode decode [--prompt N] [--new-tokens N] [--bw-mib N]]
 *
 * --mode decode (GPT-2 only, not part of "all"): greedy brg_generate with the KV cache, batches 1
 * and 8 of random prompts (default 128 tokens, 128 new tokens, no eos), as 1dev (one thread) and
 * 1dev2t (a 2-thread intra-op team bound to the generating thread); first it measures the
 * streaming read bandwidth of 1 and 2 threads over a --bw-mib buffer (default 1 GiB), then again
 * right before and after each timed generate with the row's thread count, and each row's bound
 * is the batch over the bytes a decode step reads at the higher of those two (see
 * bandwidth_around).
 *
 * Models: GPT-2 small and tiny at B x T 4x64 and 8x128; at one shape each, called "default":
 * bert-base (BertForSequenceClassification, 2 labels, B = 4 sequences of 128 tokens), vit-base
 * (ViTForImageClassification, 224x224 patch 16, 1000 labels, B = 2 images of 196 patches + [CLS])
 * and t5-small (T5ForConditionalGeneration, B = 4 pairs of 128 source and 32 target tokens).
 *
 * Configurations (a device is one thread unless it has intra-op threads):
 *   1dev      one device, micro-batch B, one micro-batch per step
 *   1dev2t    the same device with 2 intra-op threads (its matrix products split by rows of C)
 *   rep2      two replicas, micro-batch B each per step
 *   pipe2     two pipelined devices, layers split in half (embeddings with the first half, head
 *             with the second), 8 micro-batches of B per step (1F1B in training)
 *   pipe2bal  as pipe2, with the split `brigade plan --balance-by compute` proposes: it evens the
 *             stages' FLOPs, and the LM head (vocab x width) weighs as much as several layers, so
 *             GPT-2 small splits 9/3 instead of 6/6
 * FLOPs (training; a third of it for inference): see flops_per_row. GPT-2: 6 N + 6 L C T per token
 * (N = parameters, tied embeddings once; llm.c's formula). The others count the products each token
 * meets: 6 N_layers per token plus 12 L C T per token for bidirectional attention (BERT, ViT with
 * T = 197, T5's encoder and cross-attention), 6 L C T for causal (T5's decoder), and T5's tied LM
 * head (6 V C per target token). "Tokens" are 128 per BERT row, 197 per image, 128 + 32 per T5 pair.
 * The share of peak divides by the peak of the cores in use.
 *
 * Besides the human-readable lines, every measurement prints one "RESULT key=value ..." line;
 * bench/run.sh collects those. peak_rss_mb is the process's peak resident set so far (getrusage):
 * rss=fresh marks the first measurement of a process, whose peak is that workload's alone (run one
 * model, mode, shape and configuration per process to get it for a given workload), rss=cumulative
 * the later ones. A decode row restarts the peak before its timed generate (reset_peak_rss), so its
 * peak is the generate's over what the process holds then, not the bandwidth buffers'. act_mib
 * (training) is the most one micro-batch held on stage 0's device: its activations, their gradients
 * and its stage inputs (brg_train_result.stage_micro_batch_bytes; the 16.16 goal compares it with
 * fp32's); act_peak_mib all that the run added to that device at its peak above what it holds
 * throughout, the kernels' scratch too. Timings exclude model creation and the warm-up steps. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <immintrin.h>

#include "brigade/bert.h"
#include "brigade/brigade.h"
#include "brigade/dataset.h"
#include "brigade/generate.h"
#include "brigade/gpt2.h"
#include "brigade/runtime.h"
#include "brigade/t5.h"
#include "brigade/trainer.h"
#include "brigade/vit.h"
#include "kernels/gemm_avx512.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

/* Last: OpenBLAS's header pulls in <complex.h>, whose macro I clashes with parameter names. */
#include <cblas.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- FMA peak ----------------------------------------------------------------------------
 * Independent accumulator chains (more than FMA latency x FMA ports) doing nothing but FMAs:
 * the rate no real kernel can beat. AVX-512 when the CPU has it, else AVX2. */

#define PEAK_ITERS 100000000L

__attribute__((target("avx512f,fma"))) static float peak_loop_avx512(long iters) {
    __m512 acc[16];
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    }
    __m512 s = acc[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

/* 12 chains + 2 constants fit the 16 ymm registers AVX2 has. */
__attribute__((target("avx2,fma"))) static float peak_loop_avx2(long iters) {
    __m256 acc[12];
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    }
    __m256 s = acc[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, acc[i]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

typedef struct peak_job {
    bool avx512;
    long iters;
    float sink;
} peak_job;

static void *peak_thread(void *p) {
    peak_job *j = p;
    j->sink = j->avx512 ? peak_loop_avx512(j->iters) : peak_loop_avx2(j->iters);
    return NULL;
}

/* GFLOP/s of `threads` threads running the loop at once; best of five (others share the
 * machine, and the clock settles over the first runs). */
static double measure_peak(int threads, bool avx512) {
    const long iters = avx512 ? PEAK_ITERS : 2 * PEAK_ITERS;
    const double flops = (double)iters * (avx512 ? 16.0 * 16 : 12.0 * 8) * 2.0 * threads;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[8];
        peak_job jobs[8];
        double t = now();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (peak_job){avx512, iters, 0};
            pthread_create(&th[i], NULL, peak_thread, &jobs[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        t = now() - t;
        if (flops / t * 1e-9 > best) best = flops / t * 1e-9;
    }
    return best;
}

/* ---- workloads ---------------------------------------------------------------------------- */

typedef enum arch { ARCH_GPT2 = 0, ARCH_BERT, ARCH_VIT, ARCH_T5 } arch;

typedef struct shape_spec {
    const char *name;
    int64_t batch, seq; /* seq: tokens per row (ViT: patches + [CLS]; T5: source tokens) */
    int64_t target;     /* T5: target tokens per row; 0 otherwise */
} shape_spec;

typedef struct model_spec {
    const char *name, *title;
    arch arch;
    int64_t layers, heads, width, vocab, positions; /* GPT-2's sizes; the others use their defaults */
    shape_spec shape; /* the one shape ("default") of the non-GPT-2 models */
} model_spec;

static const model_spec MODELS[] = {
    {"small", "GPT-2 small", ARCH_GPT2, 12, 12, 768, 50257, 1024, {0}}, /* 124M */
    {"tiny", "GPT-2 tiny", ARCH_GPT2, 4, 4, 256, 8192, 256, {0}},      /* overhead-dominated */
    {"bert-base", "BertForSequenceClassification (bert-base, 2 labels)", ARCH_BERT, 0, 0, 0, 0, 0,
     {"default", 4, 128, 0}},
    {"vit-base", "ViTForImageClassification (vit-base, 224x224, patch 16, 1000 labels)", ARCH_VIT, 0, 0, 0, 0, 0,
     {"default", 2, 197, 0}},
    {"t5-small", "T5ForConditionalGeneration (t5-small, 128 -> 32 tokens)", ARCH_T5, 0, 0, 0, 0, 0,
     {"default", 4, 128, 32}},
};

static const shape_spec GPT2_SHAPES[] = {{"4x64", 4, 64, 0}, {"8x128", 8, 128, 0}};

/* In the order they run: the memory-hungry pipelines last. */
typedef enum config {
    CONFIG_1DEV = 0,
    CONFIG_1DEV_2T,
    CONFIG_REP2,
    CONFIG_PIPE2,
    CONFIG_PIPE2_BALANCED,
    CONFIG_COUNT
} config;
static const char *const CONFIG_NAMES[] = {"1dev", "1dev2t", "rep2", "pipe2", "pipe2bal"};
enum { PIPE_MICRO_BATCHES = 8 };

typedef struct settings {
    int steps, warmup; /* 0: the defaults below */
    bool verbose;        /* the trainer's progress and per-device summary on stderr */
    double peak1, peak2; /* GFLOP/s of 1 and 2 cores; 0 when not measured */
    const char *env_tag; /* NULL, or the env= field of the RESULT lines (run.sh marks its RSS runs) */
    int measured;        /* measurements this process has reported (the first one's RSS is its own) */
    int64_t prompt, new_tokens; /* decode: tokens per prompt, new tokens per row */
    int bw_mib;                 /* decode: the bandwidth buffer, MiB */
    double bandwidth[3];        /* decode: streaming read GB/s of 1 and 2 threads at the start */
} settings;

typedef struct measurement {
    double ms_per_step, rows_per_s, tokens_per_s, gflops, pipe_eff, ideal;
    double act_mib;      /* training: the most one micro-batch held on stage 0's device (MiB) */
    double act_peak_mib; /* training: all the run added to that device at its peak, kernel scratch too */
    int steps;
} measurement;

static int devices_of(config c) { return c == CONFIG_1DEV || c == CONFIG_1DEV_2T ? 1 : 2; }
static int cores_of(config c) { return c == CONFIG_1DEV ? 1 : 2; }
static int intra_threads_of(config c) { return c == CONFIG_1DEV_2T ? 2 : 1; }
static bool pipelined(config c) { return c == CONFIG_PIPE2 || c == CONFIG_PIPE2_BALANCED; }

/* Heavy runs get fewer steps so `make bench` stays within minutes (bench_torch.py takes as many). */
static int default_steps(const model_spec *m, const shape_spec *s, config c, bool train) {
    if (strcmp(m->name, "tiny") == 0) return 5;
    if (m->arch != ARCH_GPT2) return train ? 1 : 2;
    if (!train) return pipelined(c) ? (s->batch * s->seq >= 1024 ? 1 : 2) : 4;
    if (pipelined(c)) return s->batch * s->seq >= 1024 ? 1 : 2;
    return 2;
}

/* What the FLOP count needs: layers (T5: of each stack), attention width (heads x head size),
 * model width and vocabulary. */
typedef struct model_dims {
    int64_t layers, decoder_layers, attn, width, vocab;
} model_dims;

/* Random weights as transformers initialises them; configurations as transformers' defaults for
 * these models (bench/bench_torch.py builds the same ones). */
static brg_status make_model(const model_spec *ms, brg_model **out, model_dims *d) {
    switch (ms->arch) {
    case ARCH_BERT: {
        brg_bert_config c;
        brg_bert_config_default(&c, BRG_BERT_SEQUENCE_CLASSIFICATION);
        c.num_labels = 2;
        *d = (model_dims){c.num_hidden_layers, 0, c.hidden_size, c.hidden_size, c.vocab_size};
        BRG_TRY(brg_bert_create(&c, out));
        brg_bert_init_weights(*out, 1234);
        return BRG_OK;
    }
    case ARCH_VIT: {
        brg_vit_config c;
        brg_vit_config_default(&c);
        c.num_labels = 1000;
        *d = (model_dims){c.num_hidden_layers, 0, c.hidden_size, c.hidden_size, 0};
        BRG_TRY(brg_vit_create(&c, out));
        break;
    }
    case ARCH_T5: {
        brg_t5_config c;
        brg_t5_config_default(&c);
        c.decoder_start_token_id = 0; /* as t5-small's config.json and T5Config */
        *d = (model_dims){c.num_layers, c.num_decoder_layers, c.num_heads * c.d_kv, c.d_model, c.vocab_size};
        BRG_TRY(brg_t5_create(&c, out));
        break;
    }
    case ARCH_GPT2: {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.n_layer = ms->layers, c.n_head = ms->heads, c.n_embd = ms->width;
        c.vocab_size = ms->vocab, c.n_positions = ms->positions;
        *d = (model_dims){ms->layers, 0, ms->width, ms->width, ms->vocab};
        BRG_TRY(brg_gpt2_create(&c, out));
        break;
    }
    }
    brg_model_init_weights(*out, 1234);
    return BRG_OK;
}

/* Parameters owned by the layer blocks in [first, last). */
static double layer_params(const brg_model *m, int first, int last) {
    double n = 0;
    for (int p = 0; p < m->n_params; p++) {
        const int b = m->params[p].block;
        if (b >= first && b < last && m->blocks[b].kind == BRG_BLOCK_LAYER)
            n += (double)brg_tensor_numel(m->params[p].tensor);
    }
    return n;
}

/* Training FLOPs of one row (sequence, image or T5 pair); see the comment at the top. */
static double flops_per_row(const model_spec *ms, const shape_spec *s, const brg_model *m, const model_dims *d) {
    const double T = (double)s->seq, L = (double)d->layers, A = (double)d->attn;
    switch (ms->arch) {
    case ARCH_GPT2:
        return (6.0 * (double)brg_model_num_parameters(m) + 6.0 * L * A * T) * T;
    case ARCH_BERT:
    case ARCH_VIT:
        return 6.0 * layer_params(m, 0, m->n_blocks) * T + 12.0 * L * A * T * T;
    case ARCH_T5: {
        const int dec = brg_t5_first_decoder_block(m);
        const double Td = (double)s->target, Ld = (double)d->decoder_layers;
        return 6.0 * (layer_params(m, 0, dec) * T + layer_params(m, dec, m->n_blocks) * Td +
                      (double)(d->vocab * d->width) * Td) +
               12.0 * L * A * T * T + 6.0 * Ld * A * Td * Td + 12.0 * Ld * A * Td * T;
    }
    }
    return 0;
}

/* The first layer of stage 1 that `brigade plan --balance-by compute` proposes: the split that
 * evens the two stages' FLOPs, the LM head included. `stage` places the blocks that are not
 * layers (embeddings on 0, head on 1). */
static bool compute_balanced_first(const brg_model *m, const shape_spec *s, const int *stage, int *first) {
    brg_block_cost *costs = calloc((size_t)m->n_blocks, sizeof *costs);
    brg_ipu_list split;
    bool ok = costs && brg_model_block_costs(m, s->batch, s->seq, costs) == BRG_OK &&
              brg_plan_balance_for(costs, m->n_blocks, stage, 2, BRG_IPU_MODE_TRAINING, false, BRG_BALANCE_COMPUTE,
                                   &split) == BRG_OK;
    if (ok) *first = split.v[0];
    free(costs);
    return ok;
}

/* Two stages: embeddings and layers [0, first) on stage 0, the rest and the head on stage 1;
 * `first` is half the layers, or the compute-balanced split. */
static int *two_stage_split(const brg_model *m, const shape_spec *s, bool balanced) {
    int *stage = malloc((size_t)m->n_blocks * sizeof *stage);
    if (!stage) return NULL;
    int layers = 0;
    for (int b = 0; b < m->n_blocks; b++) {
        stage[b] = m->blocks[b].kind == BRG_BLOCK_HEAD;
        layers += m->blocks[b].kind == BRG_BLOCK_LAYER;
    }
    int first = layers / 2;
    if (balanced && !compute_balanced_first(m, s, stage, &first)) {
        free(stage);
        return NULL;
    }
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        stage[b] = blk->kind == BRG_BLOCK_HEAD || (blk->kind == BRG_BLOCK_LAYER && blk->layer >= first);
    }
    return stage;
}

/* The memory each device may use: 75% of what the kernel said was available when the program
 * started, shared by the devices. A run that would need more is refused by the trainer's budget
 * check (or fails an allocation) instead of pushing a shared machine into the OOM killer. Read
 * once: memory an earlier run freed may stay with this process and not count as available.
 * 0 (no budget) when unknown. */
static size_t device_budget(int devices) {
    static unsigned long long kib = 0;
    static bool read = false;
    if (!read) {
        read = true;
        FILE *f = fopen("/proc/meminfo", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
        if (f) fclose(f);
    }
    return (size_t)((double)kib * 1024.0 * 0.75 / devices);
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static brg_status random_ids(brg_arena *a, int64_t rows, int64_t cols, int64_t below, const char *name, uint64_t *seed,
                             brg_tensor **out) {
    const int64_t shape[2] = {rows, cols};
    BRG_TRY(brg_tensor_new(a, BRG_DTYPE_I32, cols > 0 ? 2 : 1, shape, name, out));
    int32_t *v = (*out)->data;
    for (int64_t i = 0; i < brg_tensor_numel(*out); i++) v[i] = (int32_t)(rng_next(seed) % (uint64_t)below);
    return BRG_OK;
}

/* `rows` random rows of the model's inputs: token ids and labels (GPT-2: labels are the ids),
 * pixels in [-1, 1) for ViT. T5 gets its labels in training and the decoder inputs (the
 * labels shifted right, as transformers derives them) in inference, which has no labels. */
static brg_status fill_columns(const model_spec *ms, const shape_spec *s, const brg_model *m, bool train,
                               brg_dataset *d) {
    brg_tensor_map *c = &d->columns;
    uint64_t seed = 42;
    brg_tensor *ids, *labels;
    switch (ms->arch) {
    case ARCH_GPT2:
        BRG_TRY(random_ids(d->arena, d->rows, s->seq, m->vocab_size, "input_ids", &seed, &ids));
        BRG_TRY(brg_tensor_map_put(c, "input_ids", ids));
        if (!train) return BRG_OK;
        BRG_TRY(brg_tensor_new(d->arena, BRG_DTYPE_I32, 2, ids->shape, "labels", &labels));
        memcpy(labels->data, ids->data, brg_tensor_nbytes(ids));
        return brg_tensor_map_put(c, "labels", labels);
    case ARCH_BERT:
        BRG_TRY(random_ids(d->arena, d->rows, s->seq, m->vocab_size, "input_ids", &seed, &ids));
        BRG_TRY(brg_tensor_map_put(c, "input_ids", ids));
        if (!train) return BRG_OK;
        BRG_TRY(random_ids(d->arena, d->rows, 0, 2, "labels", &seed, &labels));
        return brg_tensor_map_put(c, "labels", labels);
    case ARCH_VIT: {
        const int64_t shape[4] = {d->rows, 3, 224, 224};
        brg_tensor *pixels;
        BRG_TRY(brg_tensor_new(d->arena, BRG_DTYPE_F32, 4, shape, "pixel_values", &pixels));
        BRG_TRY(brg_tensor_map_put(c, "pixel_values", pixels));
        float *px = pixels->data;
        for (int64_t i = 0; i < brg_tensor_numel(pixels); i++)
            px[i] = (float)rng_next(&seed) / 2147483648.0f * 2.0f - 1.0f;
        if (!train) return BRG_OK;
        BRG_TRY(random_ids(d->arena, d->rows, 0, 1000, "labels", &seed, &labels));
        return brg_tensor_map_put(c, "labels", labels);
    }
    case ARCH_T5: {
        BRG_TRY(random_ids(d->arena, d->rows, s->seq, m->vocab_size, "input_ids", &seed, &ids));
        BRG_TRY(brg_tensor_map_put(c, "input_ids", ids));
        BRG_TRY(random_ids(d->arena, d->rows, s->target, m->vocab_size, "labels", &seed, &labels));
        if (train) return brg_tensor_map_put(c, "labels", labels);
        brg_tensor *decoder;
        BRG_TRY(brg_tensor_new(d->arena, BRG_DTYPE_I32, 2, labels->shape, "decoder_input_ids", &decoder));
        BRG_TRY(brg_tensor_map_put(c, "decoder_input_ids", decoder));
        const int32_t *l = labels->data;
        int32_t *dec = decoder->data;
        for (int64_t r = 0; r < d->rows; r++)
            for (int64_t j = 0; j < s->target; j++) dec[r * s->target + j] = j == 0 ? 0 : l[r * s->target + j - 1];
        return BRG_OK;
    }
    }
    return BRG_OK;
}

static brg_status make_data(const model_spec *ms, const shape_spec *s, const brg_model *m, bool train, int64_t rows,
                            brg_dataset **out) {
    brg_dataset *d = calloc(1, sizeof *d);
    if (!d) return brg_error(BRG_ERR_OOM, "cannot allocate the benchmark data");
    brg_status st = brg_arena_create("bench data", 0, &d->arena);
    d->rows = rows;
    d->seq_len = ms->arch == ARCH_VIT ? 0 : s->seq;
    if (st == BRG_OK) st = fill_columns(ms, s, m, train, d);
    if (st != BRG_OK) {
        brg_dataset_free(d);
        return st;
    }
    *out = d;
    return BRG_OK;
}

typedef struct step_clock {
    double *t;
    int64_t n;
} step_clock;

static void on_step(void *ctx, int64_t step, double loss, float lr) {
    (void)loss, (void)lr;
    step_clock *c = ctx;
    if (step >= 1 && step <= c->n) c->t[step - 1] = now();
}

/* --precision: the mode training runs in, and the compute type of decode (its .32 modes) and of
 * --mode infer's forward passes (products on operands rounded to it; weights stay fp32). */
static brg_precision train_precision = BRG_PRECISION_32_32;
/* --trace FILE: training runs traced into FILE (what tracing costs; RESULT trace=on). */
static const char *train_trace;

/* The kernel the run's half products went to ("none" in fp32): on AVX512_BF16 CPUs it depends on
 * the vendor (gemm_half.c), and the precision goal's line names it. */
static const char *half_products_kernel(void) {
    const brg_dtype t = brg_precision_compute_dtype(train_precision);
    return t == BRG_DTYPE_F32 ? "none" : brg_gemm_half_backend(t, t);
}

static brg_status bench_train(brg_model *m, const model_spec *ms, const shape_spec *s, config c, int warmup, int steps,
                              bool verbose, bool recompute, measurement *out) {
    const int reps = c == CONFIG_REP2 ? 2 : 1, accum = pipelined(c) ? PIPE_MICRO_BATCHES : 1;
    const int total = warmup + steps;
    const int64_t rows = s->batch * accum * reps * total;
    double *t = calloc((size_t)total, sizeof *t);
    int *stage = pipelined(c) ? two_stage_split(m, s, c == CONFIG_PIPE2_BALANCED) : NULL;
    if (!t || (pipelined(c) && !stage)) {
        free(t), free(stage);
        return brg_error(BRG_ERR_OOM, "cannot allocate the benchmark data");
    }
    brg_dataset *d = NULL;
    brg_status st = make_data(ms, s, m, true, rows, &d);
    brg_train_options o;
    brg_train_options_default(&o);
    o.replicas = reps, o.stages = devices_of(c) / reps, o.accumulation = accum, o.block_stage = stage;
    o.micro_batch = s->batch, o.steps = total, o.shuffle = false, o.seed = 7;
    o.device_memory = device_budget(devices_of(c));
    o.intra_threads = intra_threads_of(c);
    o.recompute = recompute;
    o.precision = train_precision;
    step_clock clock = {t, total};
    o.on_step = on_step, o.on_step_ctx = &clock;
    o.progress = verbose ? stderr : NULL;
    brg_train_result r;
    double t0 = now();
    if (st == BRG_OK && train_trace) st = brg_trace_start(train_trace, "brigade_bench");
    if (st == BRG_OK) st = brg_train(m, d, &o, &r);
    if (train_trace && brg_trace_enabled()) {
        const brg_status fin = brg_trace_finish();
        if (st == BRG_OK) st = fin;
    }
    if (st == BRG_OK) {
        double start = warmup > 0 ? t[warmup - 1] : t0;
        out->ms_per_step = (t[total - 1] - start) / steps * 1e3;
        out->rows_per_s = (double)(s->batch * accum * reps) / (out->ms_per_step * 1e-3);
        out->pipe_eff = r.pipeline_efficiency;
        out->ideal = r.ideal_efficiency;
        out->act_mib = (double)r.stage_micro_batch_bytes[0] / (1 << 20);
        out->act_peak_mib = (double)r.stage_activation_bytes[0] / (1 << 20);
        out->steps = steps;
    }
    brg_dataset_free(d);
    free(t), free(stage);
    return st;
}

static double busy_seconds(brg_runtime *rt) {
    double busy = 0;
    for (int d = 0; rt && d < brg_runtime_device_count(rt); d++) {
        brg_device_stats ds;
        brg_runtime_device_stats(rt, d, &ds);
        busy += ds.busy_seconds;
    }
    return busy;
}

static brg_status bench_infer(brg_model *m, const model_spec *ms, const shape_spec *s, config c, int warmup, int steps,
                              measurement *out) {
    const int reps = c == CONFIG_REP2 ? 2 : 1, accum = pipelined(c) ? PIPE_MICRO_BATCHES : 1;
    const int slots = reps * accum;
    brg_dataset *d = NULL;
    BRG_TRY(make_data(ms, s, m, false, slots * s->batch, &d));
    brg_micro_batch *mbs = calloc((size_t)slots, sizeof *mbs);
    brg_tensor(*views)[BRG_TENSOR_MAP_MAX] = calloc((size_t)slots, sizeof *views);
    float **sinks = calloc((size_t)slots, sizeof *sinks); /* NULL: logits stay on the device */
    float *losses = calloc((size_t)slots, sizeof *losses);
    int *stage = pipelined(c) ? two_stage_split(m, s, c == CONFIG_PIPE2_BALANCED) : NULL;
    brg_status st = mbs && views && sinks && losses && (!pipelined(c) || stage) ? BRG_OK : BRG_ERR_OOM;
    /* inference data holds input_ids, pixel_values or decoder_input_ids only: every column goes */
    for (int i = 0; st == BRG_OK && i < slots; i++) brg_dataset_rows(d, i * s->batch, s->batch, views[i], &mbs[i]);
    brg_runtime *rt = NULL;
    brg_runtime_options ro = {.replicas = reps, .stages = devices_of(c) / reps, .block_stage = stage,
                              .micro_batches = accum, .training = false, .intra_threads = intra_threads_of(c),
                              .compute_dtype = brg_precision_compute_dtype(train_precision)};
    int zero_stage[64] = {0};
    if (!stage) ro.block_stage = zero_stage;
    if (st == BRG_OK && m->n_blocks > 64 && !stage) st = brg_error(BRG_ERR_INVALID_ARG, "too many blocks");
    if (st == BRG_OK) st = brg_runtime_create(m, &ro, &rt);
    for (int i = 0; st == BRG_OK && i < warmup; i++) st = brg_runtime_infer(rt, mbs, 0, sinks, losses);
    const int devices = rt ? brg_runtime_device_count(rt) : 0;
    const double busy0 = busy_seconds(rt);
    double t = now();
    for (int i = 0; st == BRG_OK && i < steps; i++) st = brg_runtime_infer(rt, mbs, 0, sinks, losses);
    t = now() - t;
    const double busy1 = busy_seconds(rt);
    if (st == BRG_OK) {
        out->ms_per_step = t / steps * 1e3;
        out->rows_per_s = (double)(slots * s->batch) / (t / steps);
        out->pipe_eff = devices > 0 && t > 0 ? (busy1 - busy0) / (devices * t) : 0;
        out->ideal = pipelined(c) ? (double)accum / (accum + 1) : 1.0;
        out->steps = steps;
    }
    brg_runtime_destroy(rt);
    brg_dataset_free(d);
    free(mbs), free(views), free(sinks), free(losses), free(stage);
    return st;
}

/* The peak resident set of this process so far, MiB (Linux reports ru_maxrss in KiB). */
static double peak_rss_mb(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (double)u.ru_maxrss / 1024.0 : 0.0;
}

static void report(const model_spec *ms, const shape_spec *s, bool train, config c, const char *label,
                   const brg_model *m, const model_dims *dims, measurement *r, settings *set) {
    const double N = (double)brg_model_num_parameters(m);
    r->tokens_per_s = r->rows_per_s * (double)(s->seq + s->target);
    r->gflops = flops_per_row(ms, s, m, dims) / (train ? 1.0 : 3.0) * r->rows_per_s * 1e-9;
    const double peak = cores_of(c) == 1 ? set->peak1 : set->peak2;
    const double share = peak > 0 ? r->gflops / peak : 0;
    const double rss = peak_rss_mb();
    printf("  %-9s %-5s %-7s %-15s %9.1f ms/step  %9.0f tokens/s  %7.1f GFLOP/s  %5.1f%% of %d-core peak"
           "  pipeline %5.1f%% (ideal %5.1f%%)  peak RSS %.0f MiB%s\n",
           ms->name, train ? "train" : "infer", s->name, label, r->ms_per_step, r->tokens_per_s, r->gflops,
           100 * share, cores_of(c), 100 * r->pipe_eff, 100 * r->ideal, rss, set->measured ? " (process so far)" : "");
    printf("RESULT impl=brigade model=%s mode=%s bt=%s config=%s cores=%d threads=%d ms_per_step=%.3f "
           "tokens_per_s=%.3f gflops=%.3f peak_share=%.4f pipe_eff=%.4f ideal=%.4f steps=%d params=%.0f gemm=%s "
           "half_gemm=%s simd=%s peak_rss_mb=%.1f rss=%s precision=%s trace=%s act_mib=%.2f act_peak_mib=%.2f%s%s\n",
           ms->name, train ? "train" : "infer", s->name, label, cores_of(c), intra_threads_of(c), r->ms_per_step,
           r->tokens_per_s, r->gflops, share, r->pipe_eff, r->ideal, r->steps, N, brg_gemm_backend(),
           half_products_kernel(), brg_isa_name(brg_simd_isa()), rss, set->measured ? "cumulative" : "fresh",
           brg_precision_name(train_precision), train && train_trace ? "on" : "off",
           train ? r->act_mib : 0.0, train ? r->act_peak_mib : 0.0, set->env_tag ? " env=" : "", set->env_tag ? set->env_tag : "");
    fflush(stdout);
    set->measured++;
}

/* `want` is "all" or a comma-separated list of names. */
static bool pick(const char *want, const char *name) {
    if (strcmp(want, "all") == 0) return true;
    const size_t n = strlen(name);
    for (const char *p = want; (p = strstr(p, name)) != NULL; p += n)
        if ((p == want || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return true;
    return false;
}

/* ---- streaming bandwidth -----------------------------------------------------------------
 * The rate a decode step can at best read its weights at: threads summing disjoint parts of a
 * buffer far larger than the last-level cache, so every byte comes from memory. SSE2 (every
 * x86-64 has it) with eight accumulators already issues loads faster than DRAM delivers them.
 * Two ways of reading, the best taken: one stream per thread, which the hardware prefetcher
 * follows, and 16 streams side by side with each asked into L2 a KiB ahead, as the decode
 * products read their weight rows. On an Intel AVX-512 VM the second read 16.3 GB/s against 12.7
 * for one thread (31.5 against 21.9 for two): with the first alone, decode rows read faster than
 * their "bound". */

enum { BW_STREAMS = 16, BW_AHEAD = 256 /* floats */, BW_PASSES = 10 /* a measurement's best of */ };

typedef struct bw_job {
    const float *p;
    size_t n; /* floats, a multiple of 32 * BW_STREAMS */
    bool streams;
    float sink;
} bw_job;

static inline void bw_add(__m128 acc[8], const float *p) {
    for (int a = 0; a < 8; a++) acc[a] = _mm_add_ps(acc[a], _mm_load_ps(p + 4 * (size_t)a));
}

static void *bw_thread(void *arg) {
    bw_job *j = arg;
    __m128 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm_setzero_ps();
    if (!j->streams)
        for (size_t i = 0; i < j->n; i += 32) bw_add(acc, j->p + i);
    else {
        const size_t len = j->n / BW_STREAMS;
        for (size_t i = 0; i < len; i += 32)
            for (size_t s = 0; s < BW_STREAMS; s++) {
                const float *q = j->p + s * len + i;
                if (i + BW_AHEAD + 32 <= len) {
                    _mm_prefetch((const char *)(q + BW_AHEAD), _MM_HINT_T1);
                    _mm_prefetch((const char *)(q + BW_AHEAD + 16), _MM_HINT_T1);
                }
                bw_add(acc, q);
            }
    }
    for (int a = 1; a < 8; a++) acc[0] = _mm_add_ps(acc[0], acc[a]);
    float out[4];
    _mm_storeu_ps(out, acc[0]);
    j->sink = out[0] + out[1] + out[2] + out[3];
    return NULL;
}

/* GB/s (1e9 bytes) of `threads` threads reading `buf` (n floats) once each pass; the best of
 * `passes` / 2 passes of each way of reading. */
static double measure_bandwidth(const float *buf, size_t n, int threads, int passes) {
    double best = 0;
    const size_t unit = 32 * BW_STREAMS, units = n / unit;
    for (int rep = 0; rep < passes; rep++) {
        pthread_t th[8];
        bw_job jobs[8];
        const double t = now();
        for (int i = 0; i < threads; i++) {
            const size_t first = units * (size_t)i / (size_t)threads * unit,
                         last = units * (size_t)(i + 1) / (size_t)threads * unit;
            jobs[i] = (bw_job){buf + first, last - first, rep % 2 == 1, 0};
            pthread_create(&th[i], NULL, bw_thread, &jobs[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        const double gbps = (double)(units * unit) * sizeof(float) / (now() - t) * 1e-9;
        if (gbps > best) best = gbps;
    }
    return best;
}

/* A bandwidth buffer of `mib` MiB, touched (the page faults stay outside the timing); NULL when
 * it cannot be allocated. */
static float *bandwidth_buffer(int mib, size_t *n) {
    const size_t bytes = (size_t)mib << 20;
    float *buf = aligned_alloc(64, bytes);
    *n = bytes / sizeof(float);
    for (size_t i = 0; buf && i < *n; i++) buf[i] = 1.0f;
    return buf;
}

/* Fills set->bandwidth[1..2] and prints one RESULT line per thread count. */
static bool measure_bandwidths(settings *set) {
    size_t n;
    float *buf = bandwidth_buffer(set->bw_mib, &n);
    if (!buf) {
        fprintf(stderr, "brigade_bench: cannot allocate the %d MiB bandwidth buffer\n", set->bw_mib);
        return false;
    }
    for (int t = 1; t <= 2; t++) {
        set->bandwidth[t] = measure_bandwidth(buf, n, t, BW_PASSES);
        printf("streaming read bandwidth (%d MiB buffer), %d thread%s: %.1f GB/s\n", set->bw_mib, t, t > 1 ? "s" : "",
               set->bandwidth[t]);
        printf("RESULT impl=bandwidth kind=bandwidth threads=%d gbps=%.3f buffer_mib=%d\n", t, set->bandwidth[t],
               set->bw_mib);
    }
    free(buf);
    fflush(stdout);
    return true;
}

/* ---- decode ------------------------------------------------------------------------------
 * Greedy generation through brg_generate (KV cache) of `new_tokens` tokens after a random
 * prompt of `prompt` tokens per row, no eos, so every row generates them all. The prefill
 * (the prompt's forward and the first new token from its logits) is timed as a generate of one
 * new token; the decode time is the full generate's less that, which covers the new_tokens - 1
 * steps that feed one token per row each. */

static const int DECODE_BATCHES[] = {1, 8};

static brg_status generate_once(brg_model *m, const brg_prompts *p, int64_t new_tokens, double *seconds) {
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = new_tokens, cfg.min_new_tokens = new_tokens;
    cfg.n_eos = 0;
    cfg.compute_dtype = brg_precision_compute_dtype(train_precision);
    brg_generation g;
    const double t = now();
    BRG_TRY(brg_generate(m, &cfg, p, &g));
    *seconds = now() - t;
    const bool full = g.lengths[0] == new_tokens;
    brg_generation_free(&g);
    return full ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "generate stopped before %lld tokens", (long long)new_tokens);
}

/* Bytes a decode step reads: every weight once (the tied LM head is the token embedding, so
 * it counts once; of the position embedding only the row in use), in the compute type's size
 * (a half type's steps read half copies), and each row's fp32 keys and values over the mean
 * cache length of the steps. */
static double decode_step_bytes(const brg_model *m, const model_spec *ms, int64_t batch, int64_t prompt,
                                int64_t new_tokens) {
    const double C = (double)ms->width, L = (double)ms->layers;
    const double weights = (double)brg_model_num_parameters(m) - ((double)ms->positions - 1) * C;
    const double mean_len = (double)prompt + (double)new_tokens / 2.0; /* keys of steps prompt+1 .. prompt+new-1 */
    const double weight_bytes = (double)brg_dtype_size(brg_precision_compute_dtype(train_precision));
    return weight_bytes * weights + 4.0 * (double)batch * 2.0 * L * mean_len * C;
}

typedef struct decode_timing {
    double prefill_s, decode_s;
    double bw_gbps;     /* streaming read GB/s at the thread count, around the generate timed */
    double peak_rss_mb; /* the process's peak during the full generates (0: not measured) */
} decode_timing;

/* The streaming bandwidth a decode row is held to: measured with its thread count right before
 * and right after the generate it times, the higher of the two. On a shared host the bandwidth
 * two threads get moves with the neighbours' load for seconds at a time (a Zen 4 VM read 25-36
 * GB/s for stretches and 41-56 for others, one thread 23-28 throughout), so a reading taken
 * minutes earlier would hold the decode to another machine's bound; the higher of the two
 * readings keeps a momentary dip from lowering it. */
static double bandwidth_around(const settings *set, int threads) {
    size_t n;
    float *buf = bandwidth_buffer(set->bw_mib, &n);
    if (!buf) return set->bandwidth[threads];
    const double gbps = measure_bandwidth(buf, n, threads, BW_PASSES);
    free(buf);
    return gbps;
}

/* Restarts the process's peak RSS from what it holds now, so a decode row's peak is its generate's
 * and not the bandwidth buffers' (false where the kernel does not allow it). */
static bool reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Best of `reps` prefills and of `reps` full generates: the least disturbed of each, with the
 * bandwidth measured around the fastest generate. */
static brg_status time_decode(brg_model *m, const brg_prompts *p, int64_t new_tokens, int reps, const settings *set,
                              int threads, decode_timing *out) {
    double s;
    BRG_TRY(generate_once(m, p, 2, &s)); /* warm-up: first touches of the weights and buffers */
    out->prefill_s = out->decode_s = 1e30;
    out->peak_rss_mb = 0;
    for (int i = 0; i < reps; i++) {
        BRG_TRY(generate_once(m, p, 1, &s));
        if (s < out->prefill_s) out->prefill_s = s;
        const double before = bandwidth_around(set, threads);
        const bool reset = reset_peak_rss();
        BRG_TRY(generate_once(m, p, new_tokens, &s));
        const double rss = reset ? peak_rss_mb() : 0;
        if (rss > out->peak_rss_mb) out->peak_rss_mb = rss;
        const double after = bandwidth_around(set, threads);
        if (s < out->decode_s) out->decode_s = s, out->bw_gbps = before > after ? before : after;
    }
    /* A run too short to time (a few tokens of the tiny model on a busy machine) can come out at
     * or below its prefill: it reports 0 tokens/s rather than a negative or infinite rate. */
    out->decode_s = out->decode_s > out->prefill_s ? out->decode_s - out->prefill_s : 0.0;
    return BRG_OK;
}

static void report_decode(const model_spec *ms, const brg_model *m, int64_t batch, int threads, const decode_timing *t,
                          settings *set) {
    const int64_t P = set->prompt, G = set->new_tokens;
    const double tps = t->decode_s > 0 ? (double)((G - 1) * batch) / t->decode_s : 0.0;
    const double step_bytes = decode_step_bytes(m, ms, batch, P, G);
    const double bw = t->bw_gbps, bound = bw > 0 ? (double)batch * bw * 1e9 / step_bytes : 0;
    const double mean_len = (double)P + (double)G / 2.0;
    const double gflops = tps * (2.0 * (double)brg_model_num_parameters(m) + 4.0 * (double)ms->layers *
                                 (double)ms->width * mean_len) * 1e-9;
    const double rss = t->peak_rss_mb > 0 ? t->peak_rss_mb : peak_rss_mb();
    printf("  %-9s decode %lldx%lld+%lld %-7s prefill %8.1f ms  decode %9.1f tokens/s  bound %8.1f tokens/s (%5.1f%%)"
           "  %.1f MB/token at %.1f GB/s\n",
           ms->name, (long long)batch, (long long)P, (long long)G, threads > 1 ? "1dev2t" : "1dev", t->prefill_s * 1e3,
           tps, bound, bound > 0 ? 100 * tps / bound : 0, step_bytes / (double)batch * 1e-6, bw);
    printf("RESULT impl=brigade model=%s mode=decode bt=%lldx%lld config=%s cores=%d threads=%d batch=%lld prompt=%lld "
           "new_tokens=%lld prefill_ms=%.3f ms_per_step=%.3f decode_tokens_per_s=%.3f tokens_per_s=%.3f gflops=%.3f "
           "bytes_per_token=%.0f bw_gbps=%.3f bw_when=around bw_start_gbps=%.3f bw_bound_tokens_per_s=%.3f params=%lld "
           "gemm=%s simd=%s peak_rss_mb=%.1f rss=%s precision=%s%s%s\n",
           ms->name, (long long)batch, (long long)P, threads > 1 ? "1dev2t" : "1dev", threads, threads,
           (long long)batch, (long long)P, (long long)G, t->prefill_s * 1e3, t->decode_s / (double)(G - 1) * 1e3, tps,
           tps, gflops, step_bytes / (double)batch, bw, set->bandwidth[threads], bound,
           (long long)brg_model_num_parameters(m),
           brg_gemm_backend(), brg_isa_name(brg_simd_isa()), rss, set->measured ? "cumulative" : "fresh",
           brg_precision_name(train_precision), set->env_tag ? " env=" : "", set->env_tag ? set->env_tag : "");
    fflush(stdout);
    set->measured++;
}

/* One batch size at one thread count; `threads` 2 binds a 2-thread intra-op team to this
 * thread, as a device with intra_threads = 2 has (generate runs on the calling thread). */
static bool bench_decode_one(brg_model *m, const model_spec *ms, int64_t batch, int threads, settings *set) {
    const int64_t P = set->prompt;
    int32_t *ids = malloc((size_t)(batch * P) * sizeof *ids);
    const int32_t **rows = malloc((size_t)batch * sizeof *rows);
    int64_t *lengths = malloc((size_t)batch * sizeof *lengths);
    brg_gemm_team *team = NULL;
    brg_status st = ids && rows && lengths ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the prompts");
    uint64_t seed = 42;
    for (int64_t i = 0; st == BRG_OK && i < batch * P; i++) ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)ms->vocab);
    for (int64_t r = 0; st == BRG_OK && r < batch; r++) rows[r] = ids + r * P, lengths[r] = P;
    if (st == BRG_OK && threads > 1) st = brg_gemm_team_create(threads, &team);
    brg_gemm_team_bind(team);
    const brg_prompts prompts = {.n = batch, .ids = rows, .lengths = lengths, .pad_id = -1};
    decode_timing t = {0};
    const int reps = set->steps > 0 ? set->steps : 1;
    if (st == BRG_OK) st = time_decode(m, &prompts, set->new_tokens, reps, set, threads, &t);
    brg_gemm_team_bind(NULL);
    brg_gemm_team_destroy(team);
    free(ids), free(rows), free(lengths);
    if (st != BRG_OK) {
        fprintf(stderr, "brigade_bench: %s decode batch %lld: %s\n", ms->name, (long long)batch, brg_last_error());
        return false;
    }
    report_decode(ms, m, batch, threads, &t, set);
    return true;
}

/* ---- decode requests in flight ----------------------------------------------------------
 * DECODE_REQUESTS requests of one prompt each through brg_generate_requests, on one device
 * (1dev: the requests take turns on its thread) and on a 2-stage pipeline (pipe2) split so each
 * stage reads about half the weights a step reads: a layer reads 12 C^2 of them, the head (the
 * tied embedding) V C. Tokens/s = all new tokens over the whole call, prefill included. The
 * streaming bandwidth of the threads in use (1 and 2) is measured around the timed call, as for
 * the decode rows: the pipeline's gain over one device is bounded by how much more two threads
 * read than one at the time. */

enum { DECODE_REQUESTS = 4 };

static int *decode_split(const brg_model *m, const model_spec *ms) {
    int *stage = malloc((size_t)m->n_blocks * sizeof *stage);
    if (!stage) return NULL;
    const double layer = 12.0 * (double)ms->width * (double)ms->width, head = (double)ms->vocab * (double)ms->width;
    int first = (int)((double)ms->layers / 2.0 + head / layer / 2.0 + 0.5);
    if (first > (int)ms->layers) first = (int)ms->layers;
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        stage[b] = blk->kind == BRG_BLOCK_HEAD || (blk->kind == BRG_BLOCK_LAYER && blk->layer >= first);
    }
    return stage;
}

static bool bench_decode_requests(brg_model *m, const model_spec *ms, bool pipe, settings *set) {
    const int64_t P = set->prompt, G = set->new_tokens;
    int32_t *ids = malloc((size_t)(DECODE_REQUESTS * P) * sizeof *ids);
    int *stage = pipe ? decode_split(m, ms) : NULL;
    brg_status st = ids && (!pipe || stage) ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the requests");
    uint64_t seed = 43;
    for (int64_t i = 0; st == BRG_OK && i < DECODE_REQUESTS * P; i++) ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)ms->vocab);
    const int32_t *rows[DECODE_REQUESTS];
    int64_t lengths[DECODE_REQUESTS];
    brg_prompts req[DECODE_REQUESTS];
    for (int r = 0; r < DECODE_REQUESTS; r++) {
        rows[r] = ids + r * P, lengths[r] = P;
        req[r] = (brg_prompts){.n = 1, .ids = &rows[r], .lengths = &lengths[r], .pad_id = -1};
    }
    brg_generation_config cfg;
    brg_generation_config_default(&cfg);
    cfg.max_new_tokens = G, cfg.min_new_tokens = G, cfg.n_eos = 0;
    cfg.compute_dtype = brg_precision_compute_dtype(train_precision);
    const brg_generate_placement pl = {pipe ? 2 : 1, stage, 1};
    brg_generation outs[DECODE_REQUESTS];
    double best = 1e30, bw = 0;
    const int reps = set->steps > 0 ? set->steps : 1;
    for (int i = 0; st == BRG_OK && i <= reps; i++) { /* the first: warm-up */
        const double before = i > 0 ? bandwidth_around(set, pipe ? 2 : 1) : 0, t = now();
        st = brg_generate_requests(m, &cfg, req, DECODE_REQUESTS, &pl, outs);
        const double s = now() - t, after = i > 0 && st == BRG_OK ? bandwidth_around(set, pipe ? 2 : 1) : 0;
        if (i > 0 && s < best) best = s, bw = before > after ? before : after;
        for (int r = 0; st == BRG_OK && r < DECODE_REQUESTS; r++) brg_generation_free(&outs[r]);
    }
    free(ids), free(stage);
    if (st != BRG_OK) {
        fprintf(stderr, "brigade_bench: %s decode requests: %s\n", ms->name, brg_last_error());
        return false;
    }
    const double tps = (double)(DECODE_REQUESTS * G) / best;
    printf("  %-9s decode %d requests x 1x%lld+%lld %-7s %9.1f tokens/s\n", ms->name, DECODE_REQUESTS, (long long)P,
           (long long)G, pipe ? "pipe2" : "1dev", tps);
    printf("RESULT impl=brigade model=%s mode=decode-requests bt=%dx1x%lld config=%s cores=%d threads=1 requests=%d "
           "new_tokens=%lld ms_per_step=%.3f tokens_per_s=%.3f gflops=0 bw_gbps=%.3f bw_when=around params=%lld "
           "gemm=%s simd=%s%s%s\n",
           ms->name, DECODE_REQUESTS, (long long)P, pipe ? "pipe2" : "1dev", pipe ? 2 : 1, DECODE_REQUESTS,
           (long long)G, best * 1e3, tps, bw, (long long)brg_model_num_parameters(m), brg_gemm_backend(),
           brg_isa_name(brg_simd_isa()), set->env_tag ? " env=" : "", set->env_tag ? set->env_tag : "");
    fflush(stdout);
    set->measured++;
    return true;
}

/* Batches 1 and 8 at 1 and 2 threads; `cfg` picks 1dev and/or 1dev2t. Returns the failures. */
static int bench_decode(brg_model *m, const model_spec *ms, const char *cfg, settings *set) {
    if (ms->arch != ARCH_GPT2 || set->prompt < 1 || set->new_tokens < 2 ||
        set->prompt + set->new_tokens > ms->positions) {
        fprintf(stderr, "brigade_bench: decode needs a GPT-2 model, a prompt >= 1, >= 2 new tokens and prompt + new "
                        "within %lld positions\n", (long long)ms->positions);
        return 1;
    }
    int failures = 0;
    for (size_t b = 0; b < sizeof DECODE_BATCHES / sizeof DECODE_BATCHES[0]; b++)
        for (int threads = 1; threads <= 2; threads++)
            if (pick(cfg, threads > 1 ? "1dev2t" : "1dev") && !bench_decode_one(m, ms, DECODE_BATCHES[b], threads, set))
                failures++;
    for (int pipe = 0; pipe <= 1; pipe++)
        if (pick(cfg, pipe ? "pipe2" : "1dev") && !bench_decode_requests(m, ms, pipe, set)) failures++;
    return failures;
}

static int usage(void) {
    fprintf(stderr, "usage: brigade_bench [--model small|tiny|bert-base|vit-base|t5-small|all]\n"
                    "                     [--mode train|infer|decode|all] [--bt 4x64|8x128|default|all]\n"
                    "                     [--config 1dev,1dev2t,rep2,pipe2,pipe2bal|all]\n"
                    "                     [--steps N] [--warmup N] [--peak-only] [--no-peak]\n"
                    "                     [--peak1 GFLOPS --peak2 GFLOPS] [--env-tag NAME] [--verbose]\n"
                    "                     [--prompt N] [--new-tokens N] [--bw-mib N]\n");
    return 2;
}

typedef struct selection {
    const char *model, *mode, *bt, *cfg;
} selection;

/* One configuration of one workload; returns false when it failed (the error is printed). */
static bool bench_one(brg_model *m, const model_spec *ms, const model_dims *dims, const shape_spec *s, bool train,
                      config c, settings *set) {
    const int steps = set->steps > 0 ? set->steps : default_steps(ms, s, c, train);
    const int warmup = set->warmup > 0 ? set->warmup : 1;
    measurement r = {0};
    char label[32];
    snprintf(label, sizeof label, "%s", CONFIG_NAMES[c]);
    brg_status st = train ? bench_train(m, ms, s, c, warmup, steps, set->verbose, false, &r)
                          : bench_infer(m, ms, s, c, warmup, steps, &r);
    if (st == BRG_ERR_OOM && train) {
        /* Out of memory: the same step with activations recomputed from each layer's input
         * (more FLOPs than the formula counts). */
        printf("  %s %s %s: %s; again with recompute\n", ms->name, s->name, CONFIG_NAMES[c], brg_last_error());
        snprintf(label, sizeof label, "%s+recompute", CONFIG_NAMES[c]);
        st = bench_train(m, ms, s, c, warmup, steps, set->verbose, true, &r);
    }
    if (st != BRG_OK) {
        fprintf(stderr, "brigade_bench: %s %s %s %s: %s\n", ms->name, train ? "train" : "infer", s->name, label,
                brg_last_error());
        return false;
    }
    report(ms, s, train, c, label, m, dims, &r, set);
    return true;
}

/* Decode runs only when named: "all" stays training and inference, as bench/run.sh's rounds
 * run decode as workloads of their own. */
static bool wants_decode(const char *mode) { return strcmp(mode, "all") != 0 && pick(mode, "decode"); }

/* Every selected mode, shape and configuration of one model; returns the number that failed. */
static int bench_model(const model_spec *ms, const selection *sel, settings *set) {
    brg_model *m = NULL;
    model_dims dims;
    if (make_model(ms, &m, &dims) != BRG_OK) {
        fprintf(stderr, "brigade_bench: %s: %s\n", ms->name, brg_last_error());
        return 1;
    }
    if (ms->arch == ARCH_GPT2)
        printf("GPT-2 %s: %d layers, %d heads, width %d, vocab %d: %lld parameters\n", ms->name, (int)ms->layers,
               (int)ms->heads, (int)ms->width, (int)ms->vocab, (long long)brg_model_num_parameters(m));
    else
        printf("%s: %s, B = %lld: %lld parameters\n", ms->name, ms->title, (long long)ms->shape.batch,
               (long long)brg_model_num_parameters(m));
    const shape_spec *shapes = ms->arch == ARCH_GPT2 ? GPT2_SHAPES : &ms->shape;
    const size_t n_shapes = ms->arch == ARCH_GPT2 ? sizeof GPT2_SHAPES / sizeof GPT2_SHAPES[0] : 1;
    int failures = 0;
    if (wants_decode(sel->mode)) failures += bench_decode(m, ms, sel->cfg, set);
    for (int train = 1; train >= 0; train--) {
        if (!pick(sel->mode, train ? "train" : "infer")) continue;
        for (size_t si = 0; si < n_shapes; si++) {
            if (!pick(sel->bt, shapes[si].name)) continue;
            for (int c = 0; c < CONFIG_COUNT; c++)
                if (pick(sel->cfg, CONFIG_NAMES[c]) && !bench_one(m, ms, &dims, &shapes[si], train, (config)c, set))
                    failures++;
        }
    }
    brg_model_destroy(m);
    return failures;
}

static void measure_peaks(settings *set) {
    __builtin_cpu_init();
    const bool avx512 = brg_gemm_avx512_supported();
    if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        printf("no AVX2/FMA: the FMA peak is not measured\n");
        return;
    }
    set->peak1 = measure_peak(1, avx512);
    set->peak2 = measure_peak(2, avx512);
    printf("fp32 FMA peak (%s loop): 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s\n", avx512 ? "AVX-512" : "AVX2",
           set->peak1, set->peak2);
    printf("RESULT impl=peak isa=%s peak1=%.3f peak2=%.3f\n", avx512 ? "avx512" : "avx2", set->peak1, set->peak2);
}

int main(int argc, char **argv) {
    selection sel = {"all", "all", "all", "all"};
    settings set = {.prompt = 128, .new_tokens = 128, .bw_mib = 1024};
    bool peak_only = false, no_peak = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--peak-only") == 0) peak_only = true;
        else if (strcmp(a, "--verbose") == 0) set.verbose = true;
        else if (strcmp(a, "--no-peak") == 0) no_peak = true;
        else if (!v) return usage();
        else if (strcmp(a, "--model") == 0) sel.model = v, i++;
        else if (strcmp(a, "--mode") == 0) sel.mode = v, i++;
        else if (strcmp(a, "--bt") == 0) sel.bt = v, i++;
        else if (strcmp(a, "--config") == 0) sel.cfg = v, i++;
        else if (strcmp(a, "--steps") == 0) set.steps = atoi(v), i++;
        else if (strcmp(a, "--warmup") == 0) set.warmup = atoi(v), i++;
        else if (strcmp(a, "--peak1") == 0) set.peak1 = atof(v), i++;
        else if (strcmp(a, "--peak2") == 0) set.peak2 = atof(v), i++;
        else if (strcmp(a, "--env-tag") == 0) set.env_tag = v, i++;
        else if (strcmp(a, "--trace") == 0 && v) train_trace = v, i++;
        else if (strcmp(a, "--precision") == 0) {
            if (!v || brg_precision_parse(v, &train_precision) != BRG_OK) {
                fprintf(stderr, "brigade_bench: %s\n", brg_last_error());
                return 2;
            }
            i++;
        }
        else if (strcmp(a, "--prompt") == 0) set.prompt = atoll(v), i++;
        else if (strcmp(a, "--new-tokens") == 0) set.new_tokens = atoll(v), i++;
        else if (strcmp(a, "--bw-mib") == 0) set.bw_mib = atoi(v), i++;
        else return usage();
    }
    brg_gemm_set_threads(1);
    device_budget(1); /* fixes the memory budget before anything is allocated */
    printf("brigade_bench: brg_gemm backend %s (OpenBLAS core %s, OPENBLAS_CORETYPE=%s)\n", brg_gemm_backend(),
           openblas_get_corename(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    if (!no_peak && set.peak1 == 0) measure_peaks(&set);
    if (peak_only) return 0;
    /* Measured in the same process as the decode rows, so both see the same load. */
    if (wants_decode(sel.mode) && (set.bw_mib < 1 || !measure_bandwidths(&set))) return 1;

    int failures = 0;
    for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++)
        if (pick(sel.model, MODELS[mi].name)) failures += bench_model(&MODELS[mi], &sel, &set);
    return failures ? 1 : 0;
}
