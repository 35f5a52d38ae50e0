/* The executable cache as a library call (brigade/exe_cache.h): a first start prepares and stores,
 * a second maps the entry (the model's weights live in it, bit for bit those a plain load gives,
 * and the pipeline gives the same logits bits); a damaged entry is not used, and is rewritten;
 * "disabled" never touches the folder. With confirm_later the payload is checked while the
 * pipeline runs: an intact entry is confirmed a hit, a damaged one runs first (a provisional hit)
 * and is then caught by brg_cached_inference_confirm, which prepares afresh for a second run whose
 * logits are the uncached ones. */
#include <sys/stat.h>

#include "test_util.h"

enum { ROWS = 4, T = 5, VOCAB = 37 };

static char dir[512], model_dir[600], cache_dir[600];

static void make_model(void) {
    snprintf(dir, sizeof dir, "%s/exe_cache", test_tmp_dir());
    snprintf(model_dir, sizeof model_dir, "%s/m", dir);
    snprintf(cache_dir, sizeof cache_dir, "%s/ec", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = VOCAB;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    brg_model_init_weights(m, 5);
    CHECK_OK(brg_model_save(m, model_dir));
    brg_model_destroy(m);
}

static void load_config(const char *cache, brg_ipu_config *cfg) {
    char json[1400];
    snprintf(json, sizeof json,
             "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [1, 1], "
             "\"inference_device_iterations\": 2, \"executable_cache_dir\": \"%s\"}", cache);
    CHECK_OK(brg_ipu_config_from_json(json, "test", cfg));
    CHECK_OK(brg_ipu_config_set_mode(cfg, "inference"));
}

typedef struct run {
    bool hit, provisional, again;
    float logits[ROWS * T * VOCAB];
} run;

/* The batch through the start's pipeline; its logits into r. */
static void run_batch(brg_cached_inference *c, brg_tensor *ids, run *r) {
    brg_arena *arena = NULL;
    CHECK_OK(brg_arena_create("host", 0, &arena));
    brg_tensor_map b = TEST_MAP("input_ids", ids);
    brg_inference_outputs out;
    CHECK_OK(brg_inference_run(brg_cached_inference_pipeline(c), &b, arena, &out));
    if (out.logits) memcpy(r->logits, out.logits->data, sizeof r->logits);
    brg_arena_destroy(arena);
}

/* One start: open, run the batch (with `later`: confirm, and run again if told to), store, close. */
static void start_with(const char *cache, bool later, run *r) {
    brg_ipu_config cfg;
    load_config(cache, &cfg);
    int32_t ids[ROWS * T];
    int64_t shape[2] = {ROWS, T};
    for (int i = 0; i < ROWS * T; i++) ids[i] = (7 * i + 3) % VOCAB;
    brg_tensor t = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, ids);
    brg_named_tensor in = {"input_ids", &t};
    brg_cached_inference_request rq = {model_dir, &cfg, NULL, &in, 1, "test", later};
    brg_cached_inference *c = NULL;
    CHECK_OK(brg_cached_inference_open(&rq, &c));
    if (!c) return;
    r->hit = r->provisional = brg_cached_inference_hit(c);
    if (later) {
        run_batch(c, &t, r);
        CHECK_OK(brg_cached_inference_confirm(c, &r->again));
        r->hit = brg_cached_inference_hit(c);
        CHECK(r->again == (r->provisional && !r->hit));
        bool twice = false;
        CHECK_OK(brg_cached_inference_confirm(c, &twice)); /* once only */
        CHECK(!twice);
    }
    brg_model *plain = NULL;
    CHECK_OK(brg_model_load(model_dir, &plain));
    brg_model *m = brg_cached_inference_model(c);
    bool same = plain && plain->n_params == m->n_params;
    for (int p = 0; same && p < m->n_params; p++)
        same = memcmp(m->params[p].tensor->data, plain->params[p].tensor->data,
                      (size_t)brg_tensor_nbytes(plain->params[p].tensor)) == 0;
    CHECK_MSG(same, "the %s start's weights differ from a plain load's", r->hit ? "cached" : "uncached");
    brg_model_destroy(plain);
    if (!later || r->again) run_batch(c, &t, r);
    brg_cached_inference_store(c);
    brg_cached_inference_close(c);
}

static void start(const char *cache, run *r) { start_with(cache, false, r); }

/* A start that checks later but is closed before it confirms (an error path): the background check
 * is stopped and joined before the entry is unmapped (ASan/valgrind would see it otherwise). */
static void close_unconfirmed(const char *cache) {
    brg_ipu_config cfg;
    load_config(cache, &cfg);
    int32_t ids[ROWS * T] = {0};
    brg_tensor t = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){ROWS, T}, ids);
    brg_named_tensor in = {"input_ids", &t};
    brg_cached_inference_request rq = {model_dir, &cfg, NULL, &in, 1, "test", true};
    brg_cached_inference *c = NULL;
    CHECK_OK(brg_cached_inference_open(&rq, &c));
    CHECK(c && brg_cached_inference_hit(c));
    brg_cached_inference_close(c);
}

static int entries(void) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "exit $(ls '%s' 2>/dev/null | grep -c '\\.brgexe$')", cache_dir);
    return WEXITSTATUS(system(cmd));
}

/* Flips a byte in the middle of the only entry. */
static void damage(void) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "f=$(ls '%s'/*.brgexe) && printf 'Z' | dd of=\"$f\" bs=1 seek=$(( $(stat -c %%s \"$f\") / 2 )) "
                              "conv=notrunc status=none", cache_dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    make_model();
    static run off, first, second, damaged, again;
    start("disabled", &off);
    struct stat st;
    CHECK_MSG(stat(cache_dir, &st) != 0, "\"disabled\" made %s", cache_dir);
    start(cache_dir, &first);
    CHECK(!first.hit && entries() == 1);
    start(cache_dir, &second);
    CHECK_MSG(second.hit, "the second start did not come from the cache");
    CHECK(memcmp(first.logits, off.logits, sizeof off.logits) == 0);
    CHECK_MSG(memcmp(second.logits, off.logits, sizeof off.logits) == 0, "a cached start's logits differ");
    damage();
    start(cache_dir, &damaged);
    CHECK_MSG(!damaged.hit, "a damaged entry was used");
    CHECK(memcmp(damaged.logits, off.logits, sizeof off.logits) == 0);
    start(cache_dir, &again);
    CHECK_MSG(again.hit && entries() == 1, "the damaged entry was not rewritten");
    CHECK(memcmp(again.logits, off.logits, sizeof off.logits) == 0);
    /* checked in the background */
    static run later, later_damaged, later_again;
    start_with(cache_dir, true, &later);
    CHECK_MSG(later.provisional && later.hit && !later.again, "an intact entry was not confirmed");
    CHECK(memcmp(later.logits, off.logits, sizeof off.logits) == 0);
    damage();
    start_with(cache_dir, true, &later_damaged);
    CHECK_MSG(later_damaged.provisional, "a damaged payload was caught before the run: nothing was checked later");
    CHECK_MSG(!later_damaged.hit && later_damaged.again, "a damaged entry was confirmed");
    CHECK_MSG(memcmp(later_damaged.logits, off.logits, sizeof off.logits) == 0, "the second run's logits differ");
    start(cache_dir, &later_again);
    close_unconfirmed(cache_dir);
    CHECK_MSG(later_again.hit && entries() == 1, "the entry damaged under a later check was not rewritten");
    CHECK(memcmp(later_again.logits, off.logits, sizeof off.logits) == 0);
    return test_finish();
}
