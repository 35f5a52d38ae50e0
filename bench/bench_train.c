/* brigade_bench: training and inference throughput of GPT-2 on this machine, against the
 * machine's own measured fp32 FMA peak.
 *
 *   brigade_bench [--model small|tiny|all] [--mode train|infer|all] [--bt 4x64|8x128|all]
 *                 [--config NAME[,NAME...]|all] [--steps N] [--warmup N] [--peak-only] [--no-peak]
 *                 [--peak1 GFLOPS --peak2 GFLOPS] [--verbose]
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
 * FLOPs per token: 6 N + 6 L C T in training (forward + backward + AdamW, N = parameters), a
 * third of that for inference. The share of peak divides by the peak of the cores in use.
 *
 * Besides the human-readable lines, every measurement prints one "RESULT key=value ..." line;
 * bench/run.sh collects those. Timings exclude model creation and the warm-up steps. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <immintrin.h>

#include "brigade/brigade.h"
#include "brigade/gpt2.h"
#include "brigade/runtime.h"
#include "brigade/trainer.h"
#include "kernels/gemm_avx512.h"
#include "kernels/kernels.h"

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

typedef struct model_spec {
    const char *name;
    int64_t layers, heads, width, vocab, positions;
} model_spec;

static const model_spec MODELS[] = {
    {"small", 12, 12, 768, 50257, 1024}, /* GPT-2 small, 124M */
    {"tiny", 4, 4, 256, 8192, 256},      /* overhead-dominated: what is not GEMM shows */
};

typedef struct shape_spec {
    const char *name;
    int64_t batch, seq;
} shape_spec;

static const shape_spec SHAPES[] = {{"4x64", 4, 64}, {"8x128", 8, 128}};

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
} settings;

typedef struct measurement {
    double ms_per_step, tokens_per_s, gflops, pipe_eff, ideal;
    int steps;
} measurement;

static int devices_of(config c) { return c == CONFIG_1DEV || c == CONFIG_1DEV_2T ? 1 : 2; }
static int cores_of(config c) { return c == CONFIG_1DEV ? 1 : 2; }
static int intra_threads_of(config c) { return c == CONFIG_1DEV_2T ? 2 : 1; }
static bool pipelined(config c) { return c == CONFIG_PIPE2 || c == CONFIG_PIPE2_BALANCED; }

/* Heavy runs get fewer steps so `make bench` stays within minutes. */
static int default_steps(const model_spec *m, const shape_spec *s, config c, bool train) {
    if (strcmp(m->name, "tiny") == 0) return 5;
    if (!train) return pipelined(c) ? (s->batch * s->seq >= 1024 ? 1 : 2) : 4;
    if (pipelined(c)) return s->batch * s->seq >= 1024 ? 1 : 2;
    return 2;
}

static brg_status make_model(const model_spec *ms, brg_model **out) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = ms->layers, c.n_head = ms->heads, c.n_embd = ms->width;
    c.vocab_size = ms->vocab, c.n_positions = ms->positions;
    BRG_TRY(brg_gpt2_create(&c, out));
    brg_model_init_weights(*out, 1234);
    return BRG_OK;
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

typedef struct step_clock {
    double *t;
    int64_t n;
} step_clock;

static void on_step(void *ctx, int64_t step, double loss, float lr) {
    (void)loss, (void)lr;
    step_clock *c = ctx;
    if (step >= 1 && step <= c->n) c->t[step - 1] = now();
}

static brg_status bench_train(brg_model *m, const model_spec *ms, const shape_spec *s, config c, int warmup, int steps,
                              bool verbose, bool recompute, measurement *out) {
    const int reps = c == CONFIG_REP2 ? 2 : 1, accum = pipelined(c) ? PIPE_MICRO_BATCHES : 1;
    const int total = warmup + steps;
    const int64_t rows = s->batch * accum * reps * total;
    int32_t *ids = malloc((size_t)(rows * s->seq) * sizeof *ids);
    double *t = calloc((size_t)total, sizeof *t);
    int *stage = pipelined(c) ? two_stage_split(m, s, c == CONFIG_PIPE2_BALANCED) : NULL;
    if (!ids || !t || (pipelined(c) && !stage)) {
        free(ids), free(t), free(stage);
        return brg_error(BRG_ERR_OOM, "cannot allocate the benchmark data");
    }
    uint64_t seed = 42;
    for (int64_t i = 0; i < rows * s->seq; i++) ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)m->vocab_size);
    brg_dataset *d = NULL;
    brg_status st = brg_dataset_from_rows(ids, NULL, NULL, rows, s->seq, &d);
    brg_train_options o;
    brg_train_options_default(&o);
    o.replicas = reps, o.stages = devices_of(c) / reps, o.accumulation = accum, o.block_stage = stage;
    o.micro_batch = s->batch, o.steps = total, o.shuffle = false, o.seed = 7;
    o.device_memory = device_budget(devices_of(c));
    o.intra_threads = intra_threads_of(c);
    o.recompute = recompute;
    step_clock clock = {t, total};
    o.on_step = on_step, o.on_step_ctx = &clock;
    o.progress = verbose ? stderr : NULL;
    brg_train_result r;
    double t0 = now();
    if (st == BRG_OK) st = brg_train(m, d, &o, &r);
    if (st == BRG_OK) {
        double start = warmup > 0 ? t[warmup - 1] : t0;
        out->ms_per_step = (t[total - 1] - start) / steps * 1e3;
        out->tokens_per_s = (double)(s->batch * accum * reps * s->seq) / (out->ms_per_step * 1e-3);
        out->pipe_eff = r.pipeline_efficiency;
        out->ideal = r.ideal_efficiency;
        out->steps = steps;
    }
    brg_dataset_free(d);
    free(ids), free(t), free(stage);
    return st;
}

static brg_status bench_infer(brg_model *m, const model_spec *ms, const shape_spec *s, config c, int warmup, int steps,
                              measurement *out) {
    const int reps = c == CONFIG_REP2 ? 2 : 1, accum = pipelined(c) ? PIPE_MICRO_BATCHES : 1;
    const int slots = reps * accum;
    brg_arena *arena = NULL;
    BRG_TRY(brg_arena_create("bench inputs", BRG_ARENA_UNLIMITED, &arena));
    brg_micro_batch *mbs = calloc((size_t)slots, sizeof *mbs);
    float **sinks = calloc((size_t)slots, sizeof *sinks); /* NULL: logits stay on the device */
    float *losses = calloc((size_t)slots, sizeof *losses);
    int *stage = pipelined(c) ? two_stage_split(m, s, c == CONFIG_PIPE2_BALANCED) : NULL;
    brg_status st = mbs && sinks && losses && (!pipelined(c) || stage) ? BRG_OK : BRG_ERR_OOM;
    uint64_t seed = 42;
    const int64_t shape[2] = {s->batch, s->seq};
    for (int i = 0; st == BRG_OK && i < slots; i++) {
        st = brg_tensor_new(arena, BRG_DTYPE_I32, 2, shape, "input_ids", &mbs[i].input_ids);
        for (int64_t j = 0; st == BRG_OK && j < s->batch * s->seq; j++)
            ((int32_t *)mbs[i].input_ids->data)[j] = (int32_t)(rng_next(&seed) % (uint64_t)m->vocab_size);
    }
    brg_runtime *rt = NULL;
    brg_runtime_options ro = {.replicas = reps, .stages = devices_of(c) / reps, .block_stage = stage,
                              .micro_batches = accum, .training = false, .intra_threads = intra_threads_of(c)};
    int zero_stage[64] = {0};
    if (!stage) ro.block_stage = zero_stage;
    if (st == BRG_OK && m->n_blocks > 64 && !stage) st = brg_error(BRG_ERR_INVALID_ARG, "too many blocks");
    if (st == BRG_OK) st = brg_runtime_create(m, &ro, &rt);
    for (int i = 0; st == BRG_OK && i < warmup; i++) st = brg_runtime_infer(rt, mbs, 0, sinks, losses);
    const int devices = rt ? brg_runtime_device_count(rt) : 0;
    double busy0 = 0, busy1 = 0;
    for (int d = 0; d < devices; d++) {
        brg_device_stats ds;
        brg_runtime_device_stats(rt, d, &ds);
        busy0 += ds.busy_seconds;
    }
    double t = now();
    for (int i = 0; st == BRG_OK && i < steps; i++) st = brg_runtime_infer(rt, mbs, 0, sinks, losses);
    t = now() - t;
    for (int d = 0; d < devices; d++) {
        brg_device_stats ds;
        brg_runtime_device_stats(rt, d, &ds);
        busy1 += ds.busy_seconds;
    }
    if (st == BRG_OK) {
        out->ms_per_step = t / steps * 1e3;
        out->tokens_per_s = (double)(slots * s->batch * s->seq) / (t / steps);
        out->pipe_eff = devices > 0 && t > 0 ? (busy1 - busy0) / (devices * t) : 0;
        out->ideal = pipelined(c) ? (double)accum / (accum + 1) : 1.0;
        out->steps = steps;
    }
    brg_runtime_destroy(rt);
    brg_arena_destroy(arena);
    free(mbs), free(sinks), free(losses), free(stage);
    return st;
}

static void report(const model_spec *ms, const shape_spec *s, bool train, config c, const char *label,
                   const brg_model *m, measurement *r, const settings *set) {
    const double N = (double)brg_model_num_parameters(m);
    const double per_token = (6.0 * N + 6.0 * (double)(ms->layers * ms->width * s->seq)) / (train ? 1.0 : 3.0);
    r->gflops = per_token * r->tokens_per_s * 1e-9;
    const double peak = cores_of(c) == 1 ? set->peak1 : set->peak2;
    const double share = peak > 0 ? r->gflops / peak : 0;
    printf("  %-5s %-5s %-6s %-15s %9.1f ms/step  %9.0f tokens/s  %7.1f GFLOP/s  %5.1f%% of %d-core peak"
           "  pipeline %5.1f%% (ideal %5.1f%%)\n",
           ms->name, train ? "train" : "infer", s->name, label, r->ms_per_step, r->tokens_per_s, r->gflops,
           100 * share, cores_of(c), 100 * r->pipe_eff, 100 * r->ideal);
    printf("RESULT impl=brigade model=%s mode=%s bt=%s config=%s cores=%d threads=%d ms_per_step=%.3f "
           "tokens_per_s=%.3f gflops=%.3f peak_share=%.4f pipe_eff=%.4f ideal=%.4f steps=%d params=%.0f gemm=%s\n",
           ms->name, train ? "train" : "infer", s->name, label, cores_of(c), intra_threads_of(c), r->ms_per_step,
           r->tokens_per_s, r->gflops, share, r->pipe_eff, r->ideal, r->steps, N, brg_gemm_backend());
    fflush(stdout);
}

/* `want` is "all" or a comma-separated list of names. */
static bool pick(const char *want, const char *name) {
    if (strcmp(want, "all") == 0) return true;
    const size_t n = strlen(name);
    for (const char *p = want; (p = strstr(p, name)) != NULL; p += n)
        if ((p == want || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return true;
    return false;
}

static int usage(void) {
    fprintf(stderr, "usage: brigade_bench [--model small|tiny|all] [--mode train|infer|all] [--bt 4x64|8x128|all]\n"
                    "                     [--config 1dev,1dev2t,rep2,pipe2,pipe2bal|all] [--steps N] [--warmup N]\n"
                    "                     [--peak-only] [--no-peak] [--peak1 GFLOPS --peak2 GFLOPS] [--verbose]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *model = "all", *mode = "all", *bt = "all", *cfg = "all";
    settings set = {0};
    bool peak_only = false, no_peak = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--peak-only") == 0) peak_only = true;
        else if (strcmp(a, "--verbose") == 0) set.verbose = true;
        else if (strcmp(a, "--no-peak") == 0) no_peak = true;
        else if (!v) return usage();
        else if (strcmp(a, "--model") == 0) model = v, i++;
        else if (strcmp(a, "--mode") == 0) mode = v, i++;
        else if (strcmp(a, "--bt") == 0) bt = v, i++;
        else if (strcmp(a, "--config") == 0) cfg = v, i++;
        else if (strcmp(a, "--steps") == 0) set.steps = atoi(v), i++;
        else if (strcmp(a, "--warmup") == 0) set.warmup = atoi(v), i++;
        else if (strcmp(a, "--peak1") == 0) set.peak1 = atof(v), i++;
        else if (strcmp(a, "--peak2") == 0) set.peak2 = atof(v), i++;
        else return usage();
    }
    brg_gemm_set_threads(1);
    device_budget(1); /* fixes the memory budget before anything is allocated */
    printf("brigade_bench: brg_gemm backend %s (OpenBLAS core %s, OPENBLAS_CORETYPE=%s)\n", brg_gemm_backend(),
           openblas_get_corename(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    if (!no_peak && set.peak1 == 0) {
        __builtin_cpu_init();
        const bool avx512 = brg_gemm_avx512_supported();
        if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
            printf("no AVX2/FMA: the FMA peak is not measured\n");
        } else {
            set.peak1 = measure_peak(1, avx512);
            set.peak2 = measure_peak(2, avx512);
            printf("fp32 FMA peak (%s loop): 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s\n",
                   avx512 ? "AVX-512" : "AVX2", set.peak1, set.peak2);
            printf("RESULT impl=peak isa=%s peak1=%.3f peak2=%.3f\n", avx512 ? "avx512" : "avx2", set.peak1, set.peak2);
        }
    }
    if (peak_only) return 0;

    int failures = 0;
    for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++) {
        const model_spec *ms = &MODELS[mi];
        if (!pick(model, ms->name)) continue;
        brg_model *m = NULL;
        if (make_model(ms, &m) != BRG_OK) {
            fprintf(stderr, "brigade_bench: %s: %s\n", ms->name, brg_last_error());
            return 1;
        }
        printf("GPT-2 %s: %d layers, %d heads, width %d, vocab %d: %lld parameters\n", ms->name, (int)ms->layers,
               (int)ms->heads, (int)ms->width, (int)ms->vocab, (long long)brg_model_num_parameters(m));
        for (int train = 1; train >= 0; train--) {
            if (!pick(mode, train ? "train" : "infer")) continue;
            for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
                const shape_spec *s = &SHAPES[si];
                if (!pick(bt, s->name)) continue;
                for (int c = 0; c < CONFIG_COUNT; c++) {
                    if (!pick(cfg, CONFIG_NAMES[c])) continue;
                    const int steps = set.steps > 0 ? set.steps : default_steps(ms, s, (config)c, train);
                    const int warmup = set.warmup > 0 ? set.warmup : 1;
                    measurement r = {0};
                    char label[32];
                    snprintf(label, sizeof label, "%s", CONFIG_NAMES[c]);
                    brg_status st = train ? bench_train(m, ms, s, (config)c, warmup, steps, set.verbose, false, &r)
                                          : bench_infer(m, ms, s, (config)c, warmup, steps, &r);
                    if (st == BRG_ERR_OOM && train) {
                        /* Out of memory: the same step with activations recomputed from each
                         * layer's input (more FLOPs than the 6N formula counts). */
                        printf("  %s %s %s: %s; again with recompute\n", ms->name, s->name, CONFIG_NAMES[c],
                               brg_last_error());
                        snprintf(label, sizeof label, "%s+recompute", CONFIG_NAMES[c]);
                        st = bench_train(m, ms, s, (config)c, warmup, steps, set.verbose, true, &r);
                    }
                    if (st != BRG_OK) {
                        fprintf(stderr, "brigade_bench: %s %s %s %s: %s\n", ms->name, train ? "train" : "infer",
                                s->name, label, brg_last_error());
                        failures++;
                        continue;
                    }
                    report(ms, s, train, (config)c, label, m, &r, &set);
                }
            }
        }
        brg_model_destroy(m);
    }
    return failures ? 1 : 0;
}
