/* Packed inference weights (runtime/packed_weights.h): an inference pipeline's devices pack their
 * linear and LM-head weights once, at the first micro-batch, count the panels in their memory and
 * reuse them in every later micro-batch and run, with outputs bit for bit those of one plain
 * forward on the host (our GEMM kernels; OpenBLAS and ref keep the plain products). A device with
 * a memory budget packs nothing. The executable cache stores the panels in its entry and a cached
 * start adopts them instead of packing; an entry packed for another kernel layout is stale. */
#include <sys/stat.h>

#include "brigade/exe_cache.h"
#include "brigade/pipeline.h"
#include "kernels/kernels.h"
#include "runtime/packed_weights.h"
#include "test_util.h"

enum { ROWS = 4, T = 5, VOCAB = 37, EMBD = 48 };

static char dir[512], model_dir[600], cache_dir[600];
static int32_t ids[ROWS * T];
static brg_tensor t_ids;

static brg_model *make_model(void) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = EMBD, c.n_positions = 16, c.vocab_size = VOCAB;
    c.initializer_range = 0.2f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (m) brg_model_init_weights(m, 7);
    return m;
}

static void load_config(const char *cache, brg_ipu_config *cfg) {
    char json[1400];
    snprintf(json, sizeof json,
             "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [1, 1], "
             "\"inference_device_iterations\": 2, \"executable_cache_dir\": \"%s\"}", cache);
    CHECK_OK(brg_ipu_config_from_json(json, "test", cfg));
    CHECK_OK(brg_ipu_config_set_mode(cfg, "inference"));
}

/* Panel bytes of every weight the devices multiply by: the layers' Conv1D weights [in, out] and
 * the tied LM head (wte [vocab, embd] read transposed). */
static size_t expected_pack_bytes(const brg_model *m) {
    const brg_gemm_pack_layout layout = brg_gemm_pack_layout_now();
    size_t sum = 0;
    for (int p = 0; p < m->n_params; p++) {
        const brg_tensor *t = m->params[p].tensor;
        const char *name = m->params[p].name;
        if (t->ndim != 2) continue;
        if (strstr(name, "wte")) sum += brg_gemm_pack_bytes(layout, t->shape[1], t->shape[0]);
        else if (strstr(name, "attn.") || strstr(name, "mlp.")) sum += brg_gemm_pack_bytes(layout, t->shape[0], t->shape[1]);
    }
    return sum;
}

static size_t borrowed(brg_inference *inf) {
    brg_runtime *rt = inference_runtime(inf);
    size_t sum = 0;
    for (int d = 0; d < brg_runtime_device_count(rt); d++) sum += brg_arena_borrowed(brg_device_arena(brg_runtime_device(rt, d)));
    return sum;
}

static void run(brg_inference *inf, float *logits) {
    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("host", 0, &arena));
    brg_tensor_map b = TEST_MAP("input_ids", &t_ids);
    brg_inference_outputs out;
    CHECK_OK(brg_inference_run(inf, &b, arena, &out));
    if (out.logits) memcpy(logits, out.logits->data, sizeof(float) * ROWS * T * VOCAB);
    brg_arena_destroy(arena);
}

static void host_forward(brg_model *m, float *logits) {
    brg_arena *arena = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("host", 0, &arena));
    CHECK_OK(brg_tape_create(arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_bundle b = {.inputs = TEST_MAP("input_ids", &t_ids)};
    CHECK_OK(brg_model_forward(m, tape, &b));
    if (b.logits) memcpy(logits, b.logits->data, sizeof(float) * ROWS * T * VOCAB);
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
}

static bool exact(void) { return brg_gemm_pack_layout_now() != BRG_GEMM_PACK_NONE; }

static bool same(const float *a, const float *b) {
    if (exact()) return memcmp(a, b, sizeof(float) * ROWS * T * VOCAB) == 0;
    return test_max_abs_diff(a, b, ROWS * T * VOCAB) <= 1e-6;
}

/* Packed once at the first run, counted, reused by the second; the host's bits. */
static void check_pipeline(brg_model *m, const char *backend) {
    static float want[ROWS * T * VOCAB], first[ROWS * T * VOCAB], second[ROWS * T * VOCAB];
    host_forward(m, want);
    brg_ipu_config cfg;
    load_config("disabled", &cfg);
    brg_inference *inf = NULL;
    CHECK_OK(brg_inference_create(m, &cfg, NULL, &inf));
    if (!inf) return;
    const size_t before = borrowed(inf);
    run(inf, first);
    const size_t packed = borrowed(inf) - before;
    run(inf, second);
    CHECK_MSG(packed == expected_pack_bytes(m), "%s: the devices packed %zu bytes, wanted %zu", backend, packed,
              expected_pack_bytes(m));
    CHECK_MSG(borrowed(inf) - before == packed, "%s: the second run packed again", backend);
    CHECK_MSG(same(want, first) && same(want, second), "%s: packed inference differs from the host forward", backend);
    brg_inference_destroy(inf);

    /* A budget: nothing packed, the same outputs. */
    brg_inference_options o = {.device_memory = (size_t)1 << 30};
    CHECK_OK(brg_inference_create(m, &cfg, &o, &inf));
    if (!inf) return;
    const size_t budgeted = borrowed(inf);
    run(inf, first);
    CHECK_MSG(borrowed(inf) == budgeted, "%s: a device with a budget packed its weights", backend);
    CHECK_MSG(same(want, first), "%s: budgeted inference differs", backend);
    brg_inference_destroy(inf);
}

typedef struct start_result {
    bool hit;
    size_t borrowed_before, borrowed_after;
    float logits[ROWS * T * VOCAB];
} start_result;

static void start(start_result *r) {
    brg_ipu_config cfg;
    load_config(cache_dir, &cfg);
    brg_named_tensor in = {"input_ids", &t_ids};
    brg_cached_inference_request rq = {model_dir, &cfg, NULL, &in, 1, "test", false};
    brg_cached_inference *c = NULL;
    CHECK_OK(brg_cached_inference_open(&rq, &c));
    if (!c) return;
    r->hit = brg_cached_inference_hit(c);
    r->borrowed_before = borrowed(brg_cached_inference_pipeline(c));
    run(brg_cached_inference_pipeline(c), r->logits);
    r->borrowed_after = borrowed(brg_cached_inference_pipeline(c));
    brg_cached_inference_store(c);
    brg_cached_inference_close(c);
}

static off_t entry_size(void) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "stat -c %%s '%s'/*.brgexe > '%s/size'", cache_dir, dir);
    if (system(cmd) != 0) return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/size", dir);
    FILE *f = fopen(path, "r");
    long long n = -1;
    if (f && fscanf(f, "%lld", &n) != 1) n = -1;
    if (f) fclose(f);
    return (off_t)n;
}

/* Flips a byte near the end of the entry: inside the last packed weight's panels. */
static void damage_panels(void) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "f=$(ls '%s'/*.brgexe) && printf 'Z' | dd of=\"$f\" bs=1 seek=$(( $(stat -c %%s \"$f\") - 200 )) "
                              "conv=notrunc status=none", cache_dir);
    CHECK(system(cmd) == 0);
}

static void check_cache(brg_model *m) {
    static float want[ROWS * T * VOCAB];
    host_forward(m, want);
    static start_result first, second, damaged, again;
    start(&first);
    CHECK(!first.hit);
    size_t params = 0;
    for (int p = 0; p < m->n_params; p++) params += (size_t)brg_tensor_nbytes(m->params[p].tensor);
    CHECK_MSG((size_t)entry_size() >= params + expected_pack_bytes(m), "the entry (%lld bytes) lacks the panels",
              (long long)entry_size());
    start(&second);
    CHECK_MSG(second.hit, "the second start did not come from the cache");
    /* A cached start's devices hold the entry's panels from the start and pack nothing more. */
    CHECK_MSG(second.borrowed_before == first.borrowed_after && second.borrowed_after == second.borrowed_before,
              "a cached start packed again (%zu, %zu; uncached %zu)", second.borrowed_before, second.borrowed_after,
              first.borrowed_after);
    CHECK_MSG(same(want, first.logits) && same(want, second.logits), "cached or uncached logits differ");
    if (!exact()) return;
    damage_panels();
    start(&damaged);
    CHECK_MSG(!damaged.hit && same(want, damaged.logits), "an entry with damaged panels was used");
    start(&again);
    CHECK_MSG(again.hit && same(want, again.logits), "the damaged entry was not rewritten");
    /* Panels of another layout: the entry is stale and rebuilt (only where both kernels run). */
    const bool was_avx512 = brg_gemm_pack_layout_now() == BRG_GEMM_PACK_AVX512;
    if (was_avx512 && strcmp(brg_gemm_force_backend("avx2"), "avx2") == 0) {
        start_result other;
        start(&other);
        CHECK_MSG(!other.hit, "an entry packed for avx512 was used by avx2");
        start(&other);
        CHECK_MSG(other.hit, "the avx2 entry was not written");
    }
    brg_gemm_force_backend(NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/packed_weights", test_tmp_dir());
    snprintf(model_dir, sizeof model_dir, "%s/m", dir);
    snprintf(cache_dir, sizeof cache_dir, "%s/ec", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);
    for (int i = 0; i < ROWS * T; i++) ids[i] = (11 * i + 5) % VOCAB;
    const int64_t shape[2] = {ROWS, T};
    t_ids = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, ids);
    brg_model *m = make_model();
    if (!m) return test_finish();
    const char *backends[] = {"avx512", "avx2", "ref", "openblas"};
    for (int b = 0; b < 4; b++) {
        const char *now = brg_gemm_force_backend(backends[b]);
        check_pipeline(m, now);
    }
    brg_gemm_force_backend(NULL);
    CHECK_OK(brg_model_save(m, model_dir));
    check_cache(m);
    brg_model_destroy(m);
    return test_finish();
}
