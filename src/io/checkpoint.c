/* Model folders: hub-cache lookup and (possibly sharded) safetensors weights.
 *
 * The cache layout is huggingface_hub's: models--{org}--{name}/refs/<revision> holds a commit
 * hash, and snapshots/<commit>/ holds the files. brigade only ever reads it: a model that is not
 * there is an error that says where it looked, never a download. */
#include "core/str.h"
#include "brigade/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/safetensors.h"
#include "io/json.h"

#define SINGLE_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"
#define MAX_REF_BYTES 255

typedef struct ck_tensor {
    const char *name; /* owned by the shard's handle */
    size_t shard;
} ck_tensor;

struct brg_checkpoint {
    char *dir;
    brg_safetensors **shards;
    char **shard_files; /* plain file names, sorted */
    size_t n_shards;
    ck_tensor *tensors; /* listing order */
    ck_tensor *sorted;  /* by name, for lookups */
    size_t n;
};


static bool is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool exists(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0;
}

static brg_status copy_out(const char *path, char *dir, size_t dir_len) {
    size_t len = strlen(path);
    if (len + 1 > dir_len)
        return brg_error(BRG_ERR_INVALID_ARG, "model folder path %s is %zu bytes, longer than the %zu-byte buffer given",
                         path, len, dir_len);
    memcpy(dir, path, len + 1);
    return BRG_OK;
}

/* ---- hub ids and the cache -------------------------------------------------------------- */

static bool valid_id_part(const char *s, size_t len) {
    if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

/* A revision is a branch, tag or commit: one path component or more, none of them "..". */
static bool valid_revision(const char *s) {
    if (!*s || *s == '/' || strstr(s, "..")) return false;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '\\') return false;
    return true;
}

static bool is_commit_hash(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return false;
    return n == 40;
}

/* "org/name@rev" -> folder "models--org--name" and revision "rev" (NULL when not given). */
static bool parse_hub_id(const char *ref, char **folder, char **revision) {
    *folder = NULL;
    *revision = NULL;
    const char *at = strchr(ref, '@');
    size_t id_len = at ? (size_t)(at - ref) : strlen(ref);
    const char *slash = memchr(ref, '/', id_len);
    bool ok = slash ? valid_id_part(ref, (size_t)(slash - ref)) &&
                          valid_id_part(slash + 1, id_len - (size_t)(slash - ref) - 1)
                    : valid_id_part(ref, id_len);
    if (!ok || (at && !valid_revision(at + 1))) return false;
    *folder = slash ? brg_str_printf("models--%.*s--%.*s", (int)(slash - ref), ref, (int)(id_len - (size_t)(slash - ref) - 1),
                                 slash + 1)
                    : brg_str_printf("models--%.*s", (int)id_len, ref);
    *revision = at ? strdup(at + 1) : NULL;
    return *folder && (!at || *revision);
}

static char *expand_home(const char *v) {
    const char *home = getenv("HOME");
    if (v[0] == '~' && (v[1] == '/' || v[1] == '\0') && home && *home) return brg_str_printf("%s%s", home, v + 1);
    return strdup(v);
}

static const char *env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The same precedence as huggingface_hub's constants module. */
static brg_status cache_root(char **root, const char **origin) {
    static const struct { const char *var, *suffix, *origin; } order[] = {
        {"HF_HUB_CACHE", "", "$HF_HUB_CACHE"},
        {"HUGGINGFACE_HUB_CACHE", "", "$HUGGINGFACE_HUB_CACHE"},
        {"HF_HOME", "/hub", "$HF_HOME/hub"},
        {"XDG_CACHE_HOME", "/huggingface/hub", "$XDG_CACHE_HOME/huggingface/hub"},
        {"HOME", "/.cache/huggingface/hub", "~/.cache/huggingface/hub"},
    };
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        const char *v = env_set(order[i].var);
        if (!v) continue;
        char *base = expand_home(v);
        *root = base ? brg_str_printf("%s%s", base, order[i].suffix) : NULL;
        free(base);
        *origin = order[i].origin;
        return *root ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for the cache path");
    }
    return brg_error(BRG_ERR_NOT_FOUND, "cannot locate the Hugging Face cache: none of HF_HUB_CACHE, HF_HOME or HOME "
                                        "is set");
}

/* Reads a refs/ file: one commit hash, possibly with a trailing newline. */
static brg_status read_ref(const char *path, char **commit) {
    *commit = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return BRG_ERR_NOT_FOUND; /* the caller words the message */
    char buf[MAX_REF_BYTES + 2];
    size_t len = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) len--;
    buf[len] = '\0';
    if (len == 0 || len > MAX_REF_BYTES || strchr(buf, '/') || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0 ||
        strlen(buf) != len)
        return brg_error(BRG_ERR_FORMAT, "%s does not hold a commit hash", path);
    *commit = strdup(buf);
    return *commit ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory");
}

/* With no refs/main (a cache filled by hand or by an old tool), a lone snapshot is unambiguous. */
static brg_status single_snapshot(const char *repo, const char *id, char **commit) {
    char *snaps = brg_str_printf("%s/snapshots", repo);
    if (!snaps) return brg_error(BRG_ERR_OOM, "no memory");
    DIR *d = opendir(snaps);
    size_t count = 0;
    char *found = NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = brg_str_printf("%s/%s", snaps, e->d_name);
        if (is_dir(p) && count++ == 0) found = strdup(e->d_name);
        free(p);
    }
    if (d) closedir(d);
    brg_status s = BRG_OK;
    if (count == 0)
        s = brg_error(BRG_ERR_NOT_FOUND, "model '%s' has no snapshot in the Hugging Face cache (%s has no refs/main and "
                                         "%s is empty or missing); brigade never downloads: fetch the model first",
                      id, repo, snaps);
    else if (count > 1)
        s = brg_error(BRG_ERR_NOT_FOUND, "model '%s': %s has no refs/main and %zu snapshots; choose one with %s@<commit>",
                      id, repo, count, id);
    else if (!found)
        s = brg_error(BRG_ERR_OOM, "no memory");
    free(snaps);
    if (s != BRG_OK) {
        free(found);
        return s;
    }
    *commit = found;
    return BRG_OK;
}

static brg_status find_commit(const char *repo, const char *id, const char *rev, char **commit) {
    if (rev && is_commit_hash(rev)) {
        *commit = strdup(rev);
        return *commit ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory");
    }
    char *ref_path = brg_str_printf("%s/refs/%s", repo, rev ? rev : "main");
    if (!ref_path) return brg_error(BRG_ERR_OOM, "no memory");
    brg_status s = read_ref(ref_path, commit);
    if (s == BRG_ERR_NOT_FOUND && rev)
        s = brg_error(BRG_ERR_NOT_FOUND, "revision '%s' of model '%s' is not in the Hugging Face cache (no %s); brigade "
                                         "never downloads: fetch that revision first",
                      rev, id, ref_path);
    else if (s == BRG_ERR_NOT_FOUND)
        s = single_snapshot(repo, id, commit);
    free(ref_path);
    return s;
}

/* `id` is the reference without its "@revision". */
static brg_status resolve_in_cache(const char *id, const char *folder, const char *rev, char *dir, size_t dir_len) {
    char *root = NULL, *repo = NULL, *commit = NULL, *snap = NULL;
    const char *origin = "";
    brg_status s = cache_root(&root, &origin);
    if (s == BRG_OK && !(repo = brg_str_printf("%s/%s", root, folder))) s = brg_error(BRG_ERR_OOM, "no memory");
    if (s == BRG_OK && !is_dir(repo))
        s = brg_error(BRG_ERR_NOT_FOUND,
                      "model '%s' is not a local folder and is not in the Hugging Face cache: looked for %s (cache "
                      "%s). brigade never downloads: fetch it first (huggingface-cli download %s%s%s) or pass a model "
                      "folder",
                      id, repo, origin, id, rev ? " --revision " : "", rev ? rev : "");
    if (s == BRG_OK) s = find_commit(repo, id, rev, &commit);
    if (s == BRG_OK && !(snap = brg_str_printf("%s/snapshots/%s", repo, commit))) s = brg_error(BRG_ERR_OOM, "no memory");
    if (s == BRG_OK && !is_dir(snap))
        s = brg_error(BRG_ERR_NOT_FOUND, "model '%s': the cache names snapshot %s, which is missing; brigade never "
                                         "downloads: fetch the model again",
                      id, snap);
    if (s == BRG_OK) s = copy_out(snap, dir, dir_len);
    free(root);
    free(repo);
    free(commit);
    free(snap);
    return s;
}

brg_status brg_hf_resolve(const char *ref, char *dir, size_t dir_len) {
    if (!ref || !*ref) return brg_error(BRG_ERR_INVALID_ARG, "empty model reference (expected a folder or a hub id)");
    struct stat sb;
    if (stat(ref, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return copy_out(ref, dir, dir_len);
        return brg_error(BRG_ERR_INVALID_ARG, "%s is a file; a model is a folder (config.json + model.safetensors) or a "
                                              "hub id", ref);
    }
    char *folder, *rev;
    if (!parse_hub_id(ref, &folder, &rev)) {
        free(folder);
        free(rev);
        return brg_error(BRG_ERR_NOT_FOUND, "model '%s': no such folder, and it is not a hub id like 'gpt2' or "
                                            "'org/name[@revision]'", ref);
    }
    char *id = strndup(ref, strcspn(ref, "@"));
    brg_status s = id ? resolve_in_cache(id, folder, rev, dir, dir_len) : brg_error(BRG_ERR_OOM, "no memory");
    free(id);
    free(folder);
    free(rev);
    return s;
}

/* ---- checkpoints ------------------------------------------------------------------------ */

static int compare_tensor_name(const void *a, const void *b) {
    return strcmp(((const ck_tensor *)a)->name, ((const ck_tensor *)b)->name);
}

/* Ties broken by shard so that a duplicate is reported the same way every time. */
static int compare_tensor_name_shard(const void *pa, const void *pb) {
    const ck_tensor *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->shard > b->shard) - (a->shard < b->shard);
}

static int compare_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static brg_status open_shard(brg_checkpoint *ck, size_t k, const char *file, const char *index_path) {
    char *path = brg_str_printf("%s/%s", ck->dir, file);
    ck->shard_files[k] = strdup(file);
    if (!path || !ck->shard_files[k]) {
        free(path);
        return brg_error(BRG_ERR_OOM, "no memory");
    }
    brg_status s = brg_safetensors_open(path, &ck->shards[k]);
    free(path);
    if (s != BRG_OK && index_path) return brg_error_wrap(s, "%s lists %s, but", index_path, file);
    return s;
}

/* Lists every tensor of every shard and rejects a name held by two shards. */
static brg_status build_tensor_table(brg_checkpoint *ck) {
    for (size_t k = 0; k < ck->n_shards; k++) ck->n += brg_safetensors_count(ck->shards[k]);
    ck->tensors = calloc(ck->n ? ck->n : 1, sizeof *ck->tensors);
    ck->sorted = calloc(ck->n ? ck->n : 1, sizeof *ck->sorted);
    if (!ck->tensors || !ck->sorted) return brg_error(BRG_ERR_OOM, "%s: no memory for %zu tensors", ck->dir, ck->n);
    size_t j = 0;
    for (size_t k = 0; k < ck->n_shards; k++)
        for (size_t i = 0; i < brg_safetensors_count(ck->shards[k]); i++)
            ck->tensors[j++] = (ck_tensor){brg_safetensors_name(ck->shards[k], i), k};
    memcpy(ck->sorted, ck->tensors, ck->n * sizeof *ck->sorted);
    qsort(ck->sorted, ck->n, sizeof *ck->sorted, compare_tensor_name_shard);
    for (size_t i = 1; i < ck->n; i++)
        if (strcmp(ck->sorted[i - 1].name, ck->sorted[i].name) == 0)
            return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s", ck->dir, ck->sorted[i].name,
                             ck->shard_files[ck->sorted[i - 1].shard], ck->shard_files[ck->sorted[i].shard]);
    return BRG_OK;
}

static const ck_tensor *find(const brg_checkpoint *ck, const char *name) {
    ck_tensor key = {name, 0};
    return bsearch(&key, ck->sorted, ck->n, sizeof key, compare_tensor_name);
}

static brg_status alloc_shards(brg_checkpoint *ck, size_t n) {
    ck->shards = calloc(n, sizeof *ck->shards);
    ck->shard_files = calloc(n, sizeof *ck->shard_files);
    if (!ck->shards || !ck->shard_files) return brg_error(BRG_ERR_OOM, "no memory");
    ck->n_shards = n;
    return BRG_OK;
}

static brg_status check_shard_name(const char *index_path, const char *tensor, const cJSON *file) {
    if (!cJSON_IsString(file))
        return brg_error(BRG_ERR_FORMAT, "%s: weight_map entry '%s' must be a file name (a string)", index_path, tensor);
    const char *f = file->valuestring;
    if (!*f || strchr(f, '/') || strchr(f, '\\') || strstr(f, ".."))
        return brg_error(BRG_ERR_FORMAT, "%s: weight_map puts '%s' in \"%s\", which is not a plain file name in the "
                                         "model folder",
                         index_path, tensor, f);
    return BRG_OK;
}

/* Validates the weight_map and returns its distinct file names, sorted (pointers into map). */
static brg_status index_shard_names(const cJSON *root, const char *index_path, const char ***names, size_t *count) {
    *names = NULL;
    *count = 0;
    if (!cJSON_IsObject(root)) return brg_error(BRG_ERR_FORMAT, "%s: must be a JSON object", index_path);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta))
        return brg_error(BRG_ERR_FORMAT, "%s: \"metadata\" must be an object", index_path);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!map) return brg_error(BRG_ERR_FORMAT, "%s: missing field 'weight_map'", index_path);
    if (!cJSON_IsObject(map))
        return brg_error(BRG_ERR_FORMAT, "%s: \"weight_map\" must be an object of tensor name -> file name", index_path);
    size_t n = (size_t)cJSON_GetArraySize(map);
    if (n == 0) return brg_error(BRG_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
    for (const cJSON *c = map->child; c; c = c->next) BRG_TRY(check_shard_name(index_path, c->string, c));
    const char **all = malloc(n * sizeof *all);
    if (!all) return brg_error(BRG_ERR_OOM, "no memory");
    size_t i = 0, u = 0;
    for (const cJSON *c = map->child; c; c = c->next) all[i++] = c->valuestring;
    qsort(all, n, sizeof *all, compare_str_ptr);
    for (i = 0; i < n; i++)
        if (u == 0 || strcmp(all[u - 1], all[i]) != 0) all[u++] = all[i];
    *names = all;
    *count = u;
    return BRG_OK;
}

/* Every weight_map entry must be found in the shard it names. */
static brg_status check_weight_map(const brg_checkpoint *ck, const cJSON *root, const char *index_path) {
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    for (const cJSON *c = map->child; c; c = c->next) {
        const ck_tensor *t = find(ck, c->string);
        if (!t)
            return brg_error(BRG_ERR_FORMAT, "%s: weight_map lists tensor '%s' in %s, but that file has no such tensor",
                             index_path, c->string, c->valuestring);
        if (strcmp(ck->shard_files[t->shard], c->valuestring) != 0)
            return brg_error(BRG_ERR_FORMAT, "%s: weight_map lists tensor '%s' in %s, but it is in %s", index_path,
                             c->string, c->valuestring, ck->shard_files[t->shard]);
    }
    return BRG_OK;
}

static brg_status open_index(brg_checkpoint *ck, const char *index_path) {
    cJSON *root;
    BRG_TRY(brg_json_load_file(index_path, BRG_JSON_DEFAULT_MAX_BYTES, &root));
    const char **names = NULL;
    size_t n = 0;
    brg_status s = index_shard_names(root, index_path, &names, &n);
    if (s == BRG_OK) s = alloc_shards(ck, n);
    for (size_t k = 0; k < n && s == BRG_OK; k++) s = open_shard(ck, k, names[k], index_path);
    free(names);
    if (s == BRG_OK) s = build_tensor_table(ck);
    if (s == BRG_OK) s = check_weight_map(ck, root, index_path);
    cJSON_Delete(root);
    return s;
}

static brg_status no_weights(const char *dir) {
    char *bin = brg_str_printf("%s/pytorch_model.bin", dir), *bin_index = brg_str_printf("%s/pytorch_model.bin.index.json", dir);
    bool torch = exists(bin) || exists(bin_index);
    free(bin);
    free(bin_index);
    return brg_error(BRG_ERR_NOT_FOUND, "no model weights in %s: expected %s or %s%s", dir, SINGLE_FILE, INDEX_FILE,
                     torch ? " (it has PyTorch .bin weights, which brigade does not read: re-save the model with "
                             "save_pretrained(..., safe_serialization=True))"
                           : "");
}

static brg_status open_weights(brg_checkpoint *ck) {
    char *single = brg_str_printf("%s/%s", ck->dir, SINGLE_FILE), *index = brg_str_printf("%s/%s", ck->dir, INDEX_FILE);
    brg_status s;
    if (!single || !index) {
        s = brg_error(BRG_ERR_OOM, "no memory");
    } else if (exists(single)) {
        s = alloc_shards(ck, 1);
        if (s == BRG_OK) s = open_shard(ck, 0, SINGLE_FILE, NULL);
        if (s == BRG_OK) s = build_tensor_table(ck);
    } else if (exists(index)) {
        s = open_index(ck, index);
    } else {
        s = no_weights(ck->dir);
    }
    free(single);
    free(index);
    return s;
}

brg_status brg_checkpoint_open(const char *dir, brg_checkpoint **out) {
    *out = NULL;
    if (!dir || !*dir) return brg_error(BRG_ERR_INVALID_ARG, "empty model folder path");
    if (!is_dir(dir)) return brg_error(BRG_ERR_NOT_FOUND, "model folder %s does not exist or is not a folder", dir);
    brg_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->dir = strdup(dir))) {
        free(ck);
        return brg_error(BRG_ERR_OOM, "no memory");
    }
    brg_status s = open_weights(ck);
    if (s != BRG_OK) {
        brg_checkpoint_close(ck);
        return s;
    }
    *out = ck;
    return BRG_OK;
}

void brg_checkpoint_close(brg_checkpoint *ck) {
    if (!ck) return;
    for (size_t k = 0; k < ck->n_shards; k++) {
        brg_safetensors_close(ck->shards[k]);
        free(ck->shard_files[k]);
    }
    free(ck->shards);
    free(ck->shard_files);
    free(ck->tensors);
    free(ck->sorted);
    free(ck->dir);
    free(ck);
}

size_t brg_checkpoint_count(const brg_checkpoint *ck) { return ck->n; }

const char *brg_checkpoint_name(const brg_checkpoint *ck, size_t i) {
    BRG_ASSERT(i < ck->n);
    return ck->tensors[i].name;
}

bool brg_checkpoint_has(const brg_checkpoint *ck, const char *name) { return find(ck, name) != NULL; }

brg_status brg_checkpoint_get(const brg_checkpoint *ck, const char *name, brg_tensor *out) {
    const ck_tensor *t = find(ck, name);
    if (!t) return brg_error(BRG_ERR_NOT_FOUND, "tensor '%s' is not in the checkpoint %s", name, ck->dir);
    return brg_safetensors_get(ck->shards[t->shard], name, out);
}

const char *brg_checkpoint_dir(const brg_checkpoint *ck) { return ck->dir; }

size_t brg_checkpoint_shard_count(const brg_checkpoint *ck) { return ck->n_shards; }
