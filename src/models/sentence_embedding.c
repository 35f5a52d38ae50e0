/* sentence-transformers folders: modules.json, the pooling config, and the pooling itself. */
#include "brigade/sentence_embedding.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/json.h"

static const char *const transformer_type = "sentence_transformers.models.Transformer";
static const char *const pooling_type = "sentence_transformers.models.Pooling";
static const char *const normalize_type = "sentence_transformers.models.Normalize";

static brg_status load_json_in(const char *dir, const char *sub, const char *file, cJSON **out) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s%s%s", dir, sub, *sub ? "/" : "", file) >= sizeof path)
        return brg_error(BRG_ERR_INVALID_ARG, "path too long: %s", dir);
    return brg_json_load_file(path, 1 << 20, out);
}

static bool exists_in(const char *dir, const char *file) {
    char path[4096];
    struct stat sb;
    return (size_t)snprintf(path, sizeof path, "%s/%s", dir, file) < sizeof path && stat(path, &sb) == 0;
}

/* 1_Pooling/config.json: exactly one of the modes brigade implements. */
static brg_status parse_pooling(const cJSON *j, const char *ctx, brg_sentence_config *c) {
    static const struct {
        const char *key;
        brg_pooling mode;
    } modes[] = {{"pooling_mode_mean_tokens", BRG_POOLING_MEAN},
                 {"pooling_mode_cls_token", BRG_POOLING_CLS},
                 {"pooling_mode_max_tokens", BRG_POOLING_MAX},
                 {"pooling_mode_mean_sqrt_len_tokens", BRG_POOLING_MEAN_SQRT_LEN}};
    static const char *const unsupported[] = {"pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
    int on = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        bool v = false;
        BRG_TRY(brg_json_get_bool(j, ctx, modes[i].key, false, false, &v));
        if (v) c->pooling = modes[i].mode, on++;
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        bool v = false;
        BRG_TRY(brg_json_get_bool(j, ctx, unsupported[i], false, false, &v));
        if (v) return brg_error(BRG_ERR_UNSUPPORTED, "%s: %s is not supported (mean, cls, max, mean_sqrt_len)", ctx, unsupported[i]);
    }
    if (on != 1)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %d pooling modes are on; brigade pools with exactly one", ctx, on);
    return brg_json_get_int(j, ctx, "word_embedding_dimension", false, 0, &c->dimension);
}

static brg_status parse_module(const char *dir, const cJSON *m, brg_sentence_config *c, int *seen_pooling) {
    const char *type = NULL, *path = "";
    BRG_TRY(brg_json_get_string(m, "modules.json", "type", true, NULL, &type));
    BRG_TRY(brg_json_get_string(m, "modules.json", "path", false, "", &path));
    if (strcmp(type, transformer_type) == 0) {
        if (*path) return brg_error(BRG_ERR_UNSUPPORTED, "modules.json: the Transformer module must be at the folder's root (path \"%s\")", path);
        return BRG_OK;
    }
    if (strcmp(type, normalize_type) == 0) {
        c->normalize = true;
        return BRG_OK;
    }
    if (strcmp(type, pooling_type) != 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "modules.json: module type %s is not supported (Transformer, Pooling, Normalize)", type);
    cJSON *pj = NULL;
    BRG_TRY(load_json_in(dir, path, "config.json", &pj));
    char ctx[4200];
    snprintf(ctx, sizeof ctx, "%s/%s/config.json", dir, path);
    brg_status st = parse_pooling(pj, ctx, c);
    cJSON_Delete(pj);
    (*seen_pooling)++;
    return st;
}

/* sentence_bert_config.json's max_seq_length, when the folder has one. */
static brg_status load_max_seq_length(const char *dir, brg_sentence_config *out) {
    if (!exists_in(dir, "sentence_bert_config.json")) return BRG_OK;
    cJSON *sb = NULL;
    brg_status st = load_json_in(dir, "", "sentence_bert_config.json", &sb);
    if (st == BRG_OK) st = brg_json_get_int(sb, "sentence_bert_config.json", "max_seq_length", false, 0, &out->max_seq_length);
    cJSON_Delete(sb);
    return st;
}

brg_status brg_sentence_config_load(const char *dir, brg_sentence_config *out) {
    memset(out, 0, sizeof *out);
    out->pooling = BRG_POOLING_MEAN;
    if (!exists_in(dir, "modules.json")) return load_max_seq_length(dir, out);
    cJSON *mods = NULL;
    BRG_TRY(load_json_in(dir, "", "modules.json", &mods));
    brg_status st = cJSON_IsArray(mods) ? BRG_OK : brg_error(BRG_ERR_FORMAT, "%s/modules.json: expected a list of modules", dir);
    int pooling = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, mods) {
        if (st != BRG_OK) break;
        st = cJSON_IsObject(m) ? parse_module(dir, m, out, &pooling)
                               : brg_error(BRG_ERR_FORMAT, "%s/modules.json: every module is an object", dir);
    }
    cJSON_Delete(mods);
    if (st == BRG_OK && pooling != 1)
        st = brg_error(BRG_ERR_UNSUPPORTED, "%s/modules.json: %d Pooling modules; brigade needs exactly one", dir, pooling);
    return st == BRG_OK ? load_max_seq_length(dir, out) : st;
}

/* ---- pooling ---- */

static void pool_row(brg_pooling mode, const float *h, const float *mask, int64_t T, int64_t C, double *acc) {
    double count = 0;
    for (int64_t c = 0; c < C; c++) acc[c] = mode == BRG_POOLING_MAX ? -INFINITY : 0.0;
    if (mode == BRG_POOLING_CLS) {
        for (int64_t c = 0; c < C; c++) acc[c] = h[c];
        return;
    }
    for (int64_t t = 0; t < T; t++) {
        const float w = mask ? mask[t] : 1.0f;
        if (w == 0.0f) continue;
        const float *ht = h + t * C;
        count += w;
        for (int64_t c = 0; c < C; c++) {
            if (mode == BRG_POOLING_MAX) acc[c] = ht[c] > acc[c] ? ht[c] : acc[c];
            else acc[c] += (double)ht[c] * w;
        }
    }
    if (mode == BRG_POOLING_MAX) return;
    /* sentence-transformers clamps the token count at 1e-9 */
    const double denom = mode == BRG_POOLING_MEAN ? fmax(count, 1e-9) : sqrt(fmax(count, 1e-9));
    for (int64_t c = 0; c < C; c++) acc[c] /= denom;
}

brg_status brg_sentence_pool(const brg_sentence_config *cfg, const float *hidden, const float *mask, int64_t B,
                             int64_t T, int64_t C, float *out) {
    double *acc = malloc((size_t)(C > 0 ? C : 1) * sizeof *acc);
    if (!acc) return brg_error(BRG_ERR_OOM, "no memory to pool %lld-wide embeddings", (long long)C);
    for (int64_t b = 0; b < B; b++) {
        pool_row(cfg->pooling, hidden + b * T * C, mask ? mask + b * T : NULL, T, C, acc);
        double norm = 1.0;
        if (cfg->normalize) { /* torch.nn.functional.normalize: divide by max(||x||, 1e-12) */
            double sq = 0;
            for (int64_t c = 0; c < C; c++) sq += acc[c] * acc[c];
            norm = fmax(sqrt(sq), 1e-12);
        }
        for (int64_t c = 0; c < C; c++) out[b * C + c] = (float)(acc[c] / norm);
    }
    free(acc);
    return BRG_OK;
}
