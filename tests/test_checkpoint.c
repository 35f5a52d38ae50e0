/* Model folders: single and sharded weights, bad index files, hub-cache lookup. */
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/gpt2.h"
#include "test_util.h"

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define HASH_MAIN "0123456789abcdef0123456789abcdef01234567"
#define HASH_V1 "89abcdef0123456789abcdef0123456789abcdef"

static char scratch[1024];

/* snprintf that fails the test instead of silently cutting a path short. */
#define FMT(buf, len, ...) CHECK(snprintf((buf), (len), __VA_ARGS__) < (int)(len))

/* "<tmp>/ck_<name>", emptied and created. */
static const char *fresh_dir(const char *name, char *out, size_t len) {
    FMT(out, len, "%s/ck_%s", test_tmp_dir(), name);
    char cmd[1200];
    FMT(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
    CHECK(system(cmd) == 0);
    return out;
}

static const char *join(const char *dir, const char *file) {
    FMT(scratch, sizeof scratch, "%s/%s", dir, file);
    return scratch;
}

static void mkdirs(const char *dir, const char *sub) {
    char cmd[1200];
    FMT(cmd, sizeof cmd, "mkdir -p '%s/%s'", dir, sub);
    CHECK(system(cmd) == 0);
}

static void write_text(const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fputs(text, fp);
    fclose(fp);
}

/* A shard whose tensors are [2] F32 filled with `base`, `base + 1`. */
static void write_shard(const char *dir, const char *file, const char **names, int n, float base) {
    static float data[8][2];
    brg_tensor t[8];
    brg_named_tensor nt[8];
    int64_t shape[1] = {2};
    for (int i = 0; i < n; i++) {
        data[i][0] = base + (float)i;
        data[i][1] = base + (float)i + 0.5f;
        t[i] = brg_tensor_wrap(BRG_DTYPE_F32, 1, shape, data[i]);
        nt[i] = (brg_named_tensor){names[i], &t[i]};
    }
    CHECK_OK(brg_safetensors_write(join(dir, file), nt, (size_t)n, NULL, 0));
}

static void test_single_file(void) {
    char dir[1024];
    fresh_dir("single", dir, sizeof dir);
    const char *names[2] = {"wte", "ln_f.bias"};
    write_shard(dir, "model.safetensors", names, 2, 10);
    brg_checkpoint *ck;
    CHECK_OK(brg_checkpoint_open(dir, &ck));
    if (!ck) return;
    CHECK(brg_checkpoint_count(ck) == 2 && brg_checkpoint_shard_count(ck) == 1);
    CHECK(strcmp(brg_checkpoint_name(ck, 0), "ln_f.bias") == 0); /* data order: by name within F32 */
    CHECK(strcmp(brg_checkpoint_dir(ck), dir) == 0);
    brg_tensor t;
    CHECK_OK(brg_checkpoint_get(ck, "wte", &t));
    CHECK(t.ndim == 1 && t.shape[0] == 2 && brg_tensor_get(&t, 0) == 10.0);
    CHECK(brg_checkpoint_has(ck, "ln_f.bias") && !brg_checkpoint_has(ck, "lm_head.weight"));
    CHECK_ERR(brg_checkpoint_get(ck, "lm_head.weight", &t), BRG_ERR_NOT_FOUND,
              "tensor 'lm_head.weight' is not in the checkpoint");
    CHECK(strstr(brg_last_error(), dir) != NULL);
    brg_checkpoint_close(ck);
}

static void make_two_shards(const char *dir) {
    const char *s1[2] = {"h.0.w", "h.0.b"}, *s2[1] = {"h.1.w"};
    write_shard(dir, SHARD1, s1, 2, 1);
    write_shard(dir, SHARD2, s2, 1, 5);
}

static const char *GOOD_INDEX = "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {"
                                "\"h.1.w\": \"" SHARD2 "\", \"h.0.w\": \"" SHARD1 "\", \"h.0.b\": \"" SHARD1 "\"}}";

static void test_sharded(void) {
    char dir[1024];
    fresh_dir("sharded", dir, sizeof dir);
    make_two_shards(dir);
    write_text(join(dir, "model.safetensors.index.json"), GOOD_INDEX);
    brg_checkpoint *ck;
    CHECK_OK(brg_checkpoint_open(dir, &ck));
    if (!ck) return;
    CHECK(brg_checkpoint_count(ck) == 3 && brg_checkpoint_shard_count(ck) == 2);
    const char *order[3] = {"h.0.b", "h.0.w", "h.1.w"};
    for (size_t i = 0; i < 3 && brg_checkpoint_count(ck) == 3; i++)
        CHECK(strcmp(brg_checkpoint_name(ck, i), order[i]) == 0);
    brg_tensor t;
    CHECK_OK(brg_checkpoint_get(ck, "h.1.w", &t));
    CHECK(brg_tensor_get(&t, 1) == 5.5);
    CHECK_OK(brg_checkpoint_get(ck, "h.0.b", &t));
    CHECK(brg_tensor_get(&t, 0) == 2.0);
    brg_checkpoint_close(ck);
}

static void check_bad_index(const char *dir, const char *index, brg_status status, const char *needle) {
    write_text(join(dir, "model.safetensors.index.json"), index);
    brg_checkpoint *ck = NULL;
    CHECK_ERR(brg_checkpoint_open(dir, &ck), status, needle);
    CHECK(ck == NULL);
}

#define MAP(body) "{\"weight_map\": {" body "}}"

static void test_bad_index(void) {
    char dir[1024];
    fresh_dir("badindex", dir, sizeof dir);
    make_two_shards(dir);
    const char *dup[1] = {"h.0.w"};
    write_shard(dir, "dup.safetensors", dup, 1, 9);
    write_text(join(dir, "broken.safetensors"), "abc");
    check_bad_index(dir, "{\"metadata\": {}}", BRG_ERR_FORMAT, "missing field 'weight_map'");
    check_bad_index(dir, "{\"weight_map\": [\"" SHARD1 "\"]}", BRG_ERR_FORMAT, "\"weight_map\" must be an object");
    check_bad_index(dir, MAP(), BRG_ERR_FORMAT, "\"weight_map\" is empty");
    check_bad_index(dir, "[]", BRG_ERR_FORMAT, "must be a JSON object");
    check_bad_index(dir, "{\"metadata\": 3, \"weight_map\": {\"h.0.w\": \"" SHARD1 "\"}}", BRG_ERR_FORMAT,
                    "\"metadata\" must be an object");
    check_bad_index(dir, MAP("\"h.0.w\": 1"), BRG_ERR_FORMAT, "weight_map entry 'h.0.w' must be a file name");
    check_bad_index(dir, MAP("\"h.0.w\": \"../" SHARD1 "\""), BRG_ERR_FORMAT, "not a plain file name");
    check_bad_index(dir, MAP("\"h.0.w\": \"sub/x.safetensors\""), BRG_ERR_FORMAT, "not a plain file name");
    check_bad_index(dir, MAP("\"h.0.w\": \"\""), BRG_ERR_FORMAT, "not a plain file name");
    check_bad_index(dir, MAP("\"h.0.w\": \"model-00003-of-00003.safetensors\""), BRG_ERR_NOT_FOUND,
                    "lists model-00003-of-00003.safetensors, but: cannot open");
    check_bad_index(dir, MAP("\"h.0.w\": \"broken.safetensors\""), BRG_ERR_FORMAT, "too small");
    check_bad_index(dir, MAP("\"zzz\": \"" SHARD1 "\""), BRG_ERR_FORMAT,
                    "weight_map lists tensor 'zzz' in " SHARD1 ", but that file has no such tensor");
    check_bad_index(dir, MAP("\"h.0.b\": \"" SHARD2 "\", \"h.0.w\": \"" SHARD1 "\""), BRG_ERR_FORMAT,
                    "lists tensor 'h.0.b' in " SHARD2 ", but it is in " SHARD1);
    check_bad_index(dir, MAP("\"h.0.b\": \"" SHARD1 "\", \"h.1.w\": \"dup.safetensors\""), BRG_ERR_FORMAT,
                    "tensor 'h.0.w' is in two shards, dup.safetensors and " SHARD1);
    check_bad_index(dir, MAP("\"h.0.w\": \"" SHARD1 "\", \"h.0.w\": \"" SHARD1 "\""), BRG_ERR_FORMAT,
                    "duplicate key 'h.0.w'");
    check_bad_index(dir, "{\"weight_map\": {", BRG_ERR_FORMAT, "invalid JSON");
    /* Tensors a shard holds beyond the weight_map still load, as transformers loads whole files. */
    write_text(join(dir, "model.safetensors.index.json"), MAP("\"h.1.w\": \"" SHARD2 "\""));
    brg_checkpoint *ck;
    CHECK_OK(brg_checkpoint_open(dir, &ck));
    CHECK(ck && brg_checkpoint_count(ck) == 1);
    brg_checkpoint_close(ck);
}

static void test_no_weights(void) {
    char dir[1024];
    fresh_dir("empty", dir, sizeof dir);
    brg_checkpoint *ck;
    CHECK_ERR(brg_checkpoint_open(dir, &ck), BRG_ERR_NOT_FOUND,
              "expected model.safetensors or model.safetensors.index.json");
    CHECK(strstr(brg_last_error(), dir) != NULL);
    write_text(join(dir, "pytorch_model.bin"), "x");
    CHECK_ERR(brg_checkpoint_open(dir, &ck), BRG_ERR_NOT_FOUND, "PyTorch .bin weights");
    CHECK_ERR(brg_checkpoint_open(join(dir, "nope"), &ck), BRG_ERR_NOT_FOUND, "does not exist");
}

/* A model folder whose config.json loads but whose weights do not: each architecture's
 * load_dir fails naming the folder (and the model it created is freed; ASan checks). */
static void test_load_dir_without_weights(void) {
    char dir[1024];
    fresh_dir("config_only", dir, sizeof dir);
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.n_positions = 8, c.vocab_size = 11;
    brg_model *m = NULL, *back = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    CHECK_OK(brg_model_save(m, dir));
    CHECK(unlink(join(dir, "model.safetensors")) == 0);
    CHECK_ERR(brg_gpt2_load_dir(dir, &back), BRG_ERR_NOT_FOUND, "loading");
    CHECK(strstr(brg_last_error(), dir) != NULL && back == NULL);
    CHECK_ERR(brg_model_load_dir_weights(m, dir, "transformer.", NULL, &back), BRG_ERR_NOT_FOUND, dir);
    CHECK(back == NULL); /* m was destroyed */
}

/* ---- hub cache ---- */

static void make_cached_model(const char *hub, const char *folder) {
    char repo[1100], path[1300];
    FMT(repo, sizeof repo, "%s/%s", hub, folder);
    mkdirs(repo, "refs");
    mkdirs(repo, "blobs");
    mkdirs(repo, "snapshots/" HASH_MAIN);
    mkdirs(repo, "snapshots/" HASH_V1);
    write_text(join(repo, "refs/main"), HASH_MAIN "\n");
    write_text(join(repo, "refs/v1"), HASH_V1);
    /* As huggingface_hub does: snapshot files are links into blobs/. */
    const char *names[1] = {"wte"};
    write_shard(repo, "blobs/5a1e", names, 1, 3);
    FMT(path, sizeof path, "%s/snapshots/" HASH_MAIN "/model.safetensors", repo);
    CHECK(symlink("../../blobs/5a1e", path) == 0);
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static void test_hub_cache(void) {
    char home[1024], hub[1100], out[1200];
    fresh_dir("hfhome", home, sizeof home);
    FMT(hub, sizeof hub, "%s/hub", home);
    make_cached_model(hub, "models--gpt2");
    make_cached_model(hub, "models--Graphcore--gpt2-small-ipu");
    mkdirs(hub, "models--solo/snapshots/only");
    mkdirs(hub, "models--twins/snapshots/a");
    mkdirs(hub, "models--twins/snapshots/b");
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    setenv("HF_HOME", home, 1);

    CHECK_OK(brg_hf_resolve("gpt2", out, sizeof out));
    CHECK_MSG(ends_with(out, "/hub/models--gpt2/snapshots/" HASH_MAIN), "%s", out);
    brg_checkpoint *ck;
    CHECK_OK(brg_checkpoint_open(out, &ck)); /* through the blob symlink */
    CHECK(ck && brg_checkpoint_has(ck, "wte"));
    brg_checkpoint_close(ck);
    CHECK_OK(brg_hf_resolve("Graphcore/gpt2-small-ipu", out, sizeof out));
    CHECK(ends_with(out, "models--Graphcore--gpt2-small-ipu/snapshots/" HASH_MAIN));
    CHECK_OK(brg_hf_resolve("gpt2@v1", out, sizeof out));
    CHECK(ends_with(out, "models--gpt2/snapshots/" HASH_V1));
    CHECK_OK(brg_hf_resolve("gpt2@" HASH_V1, out, sizeof out));
    CHECK(ends_with(out, "/snapshots/" HASH_V1));
    CHECK_OK(brg_hf_resolve("solo", out, sizeof out));
    CHECK(ends_with(out, "models--solo/snapshots/only"));
    CHECK_OK(brg_hf_resolve(home, out, sizeof out)); /* a folder is used as is */
    CHECK(strcmp(out, home) == 0);

    CHECK_ERR(brg_hf_resolve("twins", out, sizeof out), BRG_ERR_NOT_FOUND, "no refs/main and 2 snapshots");
    CHECK_ERR(brg_hf_resolve("gpt2@v9", out, sizeof out), BRG_ERR_NOT_FOUND, "revision 'v9' of model 'gpt2'");
    CHECK_ERR(brg_hf_resolve("gpt2@" HASH_MAIN "x", out, sizeof out), BRG_ERR_NOT_FOUND, "revision");
    CHECK_ERR(brg_hf_resolve("org/absent-model", out, sizeof out), BRG_ERR_NOT_FOUND, "brigade never downloads");
    CHECK(strstr(brg_last_error(), "/hub/models--org--absent-model") != NULL);
    CHECK(strstr(brg_last_error(), "$HF_HOME/hub") != NULL);
    CHECK_ERR(brg_hf_resolve("./no/such/folder", out, sizeof out), BRG_ERR_NOT_FOUND, "no such folder");
    CHECK_ERR(brg_hf_resolve("a/b/c", out, sizeof out), BRG_ERR_NOT_FOUND, "no such folder");
    CHECK_ERR(brg_hf_resolve("gpt2", out, 10), BRG_ERR_INVALID_ARG, "longer than the 10-byte buffer");
    CHECK_ERR(brg_hf_resolve(join(home, "hub/models--gpt2/refs/main"), out, sizeof out), BRG_ERR_INVALID_ARG,
              "is a file");

    /* A missing snapshot that refs/main points at. */
    write_text(join(hub, "models--gpt2/refs/main"), "feedface");
    CHECK_ERR(brg_hf_resolve("gpt2", out, sizeof out), BRG_ERR_NOT_FOUND, "snapshots/feedface, which is missing");

    /* HF_HUB_CACHE wins over HF_HOME. */
    setenv("HF_HUB_CACHE", join(home, "elsewhere"), 1);
    CHECK_ERR(brg_hf_resolve("gpt2", out, sizeof out), BRG_ERR_NOT_FOUND, "$HF_HUB_CACHE");
    CHECK(strstr(brg_last_error(), "elsewhere/models--gpt2") != NULL);
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
}

int main(void) {
    test_single_file();
    test_sharded();
    test_bad_index();
    test_no_weights();
    test_load_dir_without_weights();
    test_hub_cache();
    return test_finish();
}
