/* The executable cache's key: what a prepared inference start depends on, hashed part by part
 * (brigade/exe_cache.h lists them). Cheap by design: files are identified by their metadata and
 * safetensors headers, never by reading the weights. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/version.h"
#include "exe_cache_internal.h"
#include "kernels/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#define PRIME 0x9E3779B97F4A7C15ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void exe_hash_init(exe_hash *h, uint64_t seed) {
    for (int k = 0; k < 8; k++) h->lane[k] = mix(seed + (uint64_t)(k + 1) * PRIME);
    h->bytes = 0;
}

/* Eight independent lanes so the multiplies overlap: the checksum of a whole entry runs at
 * memory speed. */
void exe_hash_add(exe_hash *h, const void *data, size_t n) {
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            h->lane[k] = rotl((h->lane[k] ^ w) * PRIME, 31);
        }
    for (; i < n; i++) h->lane[i & 7] = rotl((h->lane[i & 7] ^ p[i]) * PRIME, 31);
    h->bytes += n;
}

uint64_t exe_hash_end(const exe_hash *h) {
    uint64_t x = mix(h->bytes);
    for (int k = 0; k < 8; k++) x = mix(x ^ h->lane[k]);
    return x;
}

uint64_t exe_hash_of(const void *data, size_t n, uint64_t seed) {
    exe_hash h;
    exe_hash_init(&h, seed);
    exe_hash_add(&h, data, n);
    return exe_hash_end(&h);
}

const char *exe_key_part_name(exe_key_part part) {
    static const char *const names[EXE_KEY_PARTS] = {
        "the model's config.json",
        "the weights files (path, size, mtime or safetensors header)",
        "the IPUConfig",
        "the input shapes",
        "the precision",
        "the CPU features (cpuid, BRIGADE_ISA, BRIGADE_GEMM, BRIGADE_SIMD)",
        "the brigade version",
    };
    return part < EXE_KEY_PARTS ? names[part] : "?";
}

static void add_str(exe_hash *h, const char *s) {
    s = s ? s : "(unset)";
    exe_hash_add(h, s, strlen(s) + 1);
}

static void add_u64(exe_hash *h, uint64_t v) { exe_hash_add(h, &v, sizeof v); }

static brg_status read_file(const char *path, size_t max, unsigned char **buf, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return brg_error(BRG_ERR_IO, "cannot open %s", path);
    *buf = malloc(max ? max : 1);
    *len = *buf ? fread(*buf, 1, max, fp) : 0;
    fclose(fp);
    return *buf ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot read %s", path);
}

static brg_status hash_file(const char *path, exe_hash *h) {
    struct stat st;
    if (stat(path, &st) != 0) return brg_error(BRG_ERR_IO, "cannot stat %s", path);
    unsigned char *buf;
    size_t len;
    BRG_TRY(read_file(path, (size_t)st.st_size, &buf, &len));
    exe_hash_add(h, buf, len);
    free(buf);
    return BRG_OK;
}

/* A safetensors file's identity: size, mtime, inode and its header (names, dtypes, shapes,
 * offsets), read without touching the tensors. */
static brg_status hash_safetensors(const char *path, const struct stat *st, exe_hash *h) {
    add_str(h, path);
    add_u64(h, (uint64_t)st->st_size);
    add_u64(h, (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec);
    add_u64(h, (uint64_t)st->st_ino);
    FILE *fp = fopen(path, "rb");
    if (!fp) return brg_error(BRG_ERR_IO, "cannot open %s", path);
    unsigned char len8[8] = {0};
    uint64_t n = 0;
    if (fread(len8, 1, 8, fp) == 8)
        for (int i = 0; i < 8; i++) n |= (uint64_t)len8[i] << (8 * i);
    brg_status s = BRG_OK;
    if (n > 0 && n <= (100u << 20) && n + 8 <= (uint64_t)st->st_size) {
        unsigned char *hdr = malloc(n);
        if (hdr && fread(hdr, 1, n, fp) == n) exe_hash_add(h, hdr, n);
        else s = brg_error(BRG_ERR_IO, "cannot read the header of %s", path);
        free(hdr);
    }
    fclose(fp);
    return s;
}

static bool weights_name(const char *name) {
    size_t n = strlen(name);
    return (n > 12 && strcmp(name + n - 12, ".safetensors") == 0) || strcmp(name, "model.safetensors.index.json") == 0;
}

/* Every weights file of the folder, in name order (sharded checkpoints have several). */
static brg_status hash_weights(const char *dir, exe_hash *h) {
    char real[PATH_MAX];
    if (!realpath(dir, real)) return brg_error(BRG_ERR_IO, "cannot resolve %s", dir);
    add_str(h, real);
    struct dirent **list;
    int n = scandir(real, &list, NULL, alphasort);
    if (n < 0) return brg_error(BRG_ERR_IO, "cannot list %s", real);
    brg_status s = BRG_OK;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        struct stat st;
        if (s == BRG_OK && weights_name(list[i]->d_name) &&
            snprintf(path, sizeof path, "%s/%s", real, list[i]->d_name) < (int)sizeof path &&
            stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (strstr(list[i]->d_name, ".json")) s = hash_file(path, h);
            else s = hash_safetensors(path, &st, h);
        }
        free(list[i]);
    }
    free(list);
    return s;
}

static void hash_shapes(const brg_cached_inference_request *rq, exe_hash *h) {
    for (int i = 0; i < rq->n_inputs; i++) {
        const brg_tensor *t = rq->inputs[i].tensor;
        add_str(h, rq->inputs[i].name);
        add_u64(h, (uint64_t)t->dtype);
        add_u64(h, (uint64_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) add_u64(h, (uint64_t)t->shape[d]);
    }
}

/* The feature flags the kernels' dispatch can look at, the caps set in the environment and what
 * they select. */
static void hash_cpu(exe_hash *h) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) add_u64(h, ((uint64_t)c << 32) | d);
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) add_u64(h, ((uint64_t)b << 32) ^ ((uint64_t)c << 16) ^ d);
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) add_u64(h, a);
    add_str(h, getenv("BRIGADE_ISA"));
    add_str(h, getenv("BRIGADE_GEMM"));
    add_str(h, getenv("BRIGADE_SIMD"));
    add_str(h, brg_isa_name(brg_isa_detected()));
    add_str(h, brg_isa_name(brg_simd_isa()));
    add_str(h, brg_gemm_backend());
    add_str(h, brg_gemm_pack_layout_name(brg_gemm_pack_layout_now())); /* the stored panels' layout */
}

brg_status exe_key_compute(const brg_cached_inference_request *rq, const char *dir, exe_key *out) {
    exe_hash h;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", dir);
    exe_hash_init(&h, EXE_KEY_MODEL_CONFIG);
    BRG_TRY(hash_file(path, &h));
    out->part[EXE_KEY_MODEL_CONFIG] = exe_hash_end(&h);

    exe_hash_init(&h, EXE_KEY_WEIGHTS);
    BRG_TRY(hash_weights(dir, &h));
    out->part[EXE_KEY_WEIGHTS] = exe_hash_end(&h);

    char *json = NULL;
    BRG_TRY(brg_ipu_config_to_json(rq->cfg, &json));
    out->part[EXE_KEY_IPU_CONFIG] = exe_hash_of(json, strlen(json), EXE_KEY_IPU_CONFIG);
    free(json);

    exe_hash_init(&h, EXE_KEY_SHAPES);
    hash_shapes(rq, &h);
    out->part[EXE_KEY_SHAPES] = exe_hash_end(&h);

    /* Inference prepares in F32 (the weights widened from the checkpoint's type); the products'
     * type decides whether weights are packed at all (only for F32 products). */
    exe_hash_init(&h, EXE_KEY_PRECISION);
    add_str(&h, "weights F32, compute");
    add_str(&h, brg_dtype_name(rq->opts ? rq->opts->compute_dtype : BRG_DTYPE_F32));
    out->part[EXE_KEY_PRECISION] = exe_hash_end(&h);

    exe_hash_init(&h, EXE_KEY_CPU);
    hash_cpu(&h);
    out->part[EXE_KEY_CPU] = exe_hash_end(&h);

    exe_hash_init(&h, EXE_KEY_BUILD);
    add_str(&h, brg_version());
    add_u64(&h, sizeof(void *));
    out->part[EXE_KEY_BUILD] = exe_hash_end(&h);
    return BRG_OK;
}
