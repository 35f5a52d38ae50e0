/* What every task pipeline shares: tokenizer_config.json's special tokens and settings, the
 * labels of config.json, batched forward passes (one device or the inference pipeline),
 * transformers' decode clean-up, code-point helpers and the JSON writer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brigade/precision.h"
#include "brigade/tape.h"
#include "io/json.h"
#include "pipelines/task_internal.h"
#include "tokenizers/tk_internal.h"

/* ---- tokenizer_config.json --------------------------------------------------------------- */

/* A special token as transformers writes it: a string, or an AddedToken {"content": ...}. */
static const char *token_value(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static cJSON *load_optional(const char *dir, const char *name, brg_status *st) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) return NULL;
    cJSON *j = NULL;
    *st = brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j);
    if (*st == BRG_OK && !cJSON_IsObject(j)) {
        *st = brg_error(BRG_ERR_FORMAT, "%s: not a JSON object", path);
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

/* The defaults of the tokenizer class transformers picks for a folder without the setting. */
static const char *default_token(const char *model_type, const char *which) {
    static const struct {
        const char *type, *mask, *pad, *unk, *cls;
    } d[] = {
        {"bert", "[MASK]", "[PAD]", "[UNK]", "[CLS]"},
        {"t5", NULL, "<pad>", "<unk>", NULL},
        {"gpt2", NULL, NULL, "<|endoftext|>", NULL},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (model_type && strcmp(model_type, d[i].type) == 0) {
            if (strcmp(which, "mask_token") == 0) return d[i].mask;
            if (strcmp(which, "pad_token") == 0) return d[i].pad;
            if (strcmp(which, "unk_token") == 0) return d[i].unk;
            return d[i].cls;
        }
    return NULL;
}

static int32_t special_id(const brg_tokenizer *tok, const cJSON *cfg, const cJSON *map, const char *model_type,
                          const char *which, char *name, size_t name_len) {
    const char *v = cfg ? token_value(cJSON_GetObjectItemCaseSensitive(cfg, which)) : NULL;
    if (!v && map) v = token_value(cJSON_GetObjectItemCaseSensitive(map, which));
    if (!v) v = default_token(model_type, which);
    if (!v) return -1;
    if (name) snprintf(name, name_len, "%s", v);
    return brg_tokenizer_token_to_id(tok, v);
}

static const char *model_type_of(const brg_model *m) {
    const char *a = m->ops->architecture;
    if (strncmp(a, "Bert", 4) == 0) return "bert";
    if (strncmp(a, "GPT2", 4) == 0) return "gpt2";
    if (strncmp(a, "T5", 2) == 0) return "t5";
    return NULL;
}

brg_status task_tokens_load(const char *dir, const brg_model *m, const brg_tokenizer *tok, task_tokens *out) {
    memset(out, 0, sizeof *out);
    brg_status st = BRG_OK;
    cJSON *cfg = load_optional(dir, "tokenizer_config.json", &st);
    cJSON *map = st == BRG_OK ? load_optional(dir, "special_tokens_map.json", &st) : NULL;
    const char *model_type = model_type_of(m);
    const char *cls = NULL;
    if (st == BRG_OK && cfg) {
        st = brg_json_get_string(cfg, "tokenizer_config.json", "tokenizer_class", false, NULL, &cls);
        /* The generic classes have no special tokens of their own. */
        if (cls && (strcmp(cls, "PreTrainedTokenizerFast") == 0 || strcmp(cls, "TokenizersBackend") == 0))
            model_type = NULL;
    }
    if (st == BRG_OK) {
        out->mask_id = special_id(tok, cfg, map, model_type, "mask_token", out->mask_token, sizeof out->mask_token);
        out->pad_id = special_id(tok, cfg, map, model_type, "pad_token", NULL, 0);
        out->unk_id = special_id(tok, cfg, map, model_type, "unk_token", NULL, 0);
        out->cls_id = special_id(tok, cfg, map, model_type, "cls_token", NULL, 0);
    }
    if (st == BRG_OK && cfg) {
        const char *ctx = "tokenizer_config.json", *side = NULL;
        double max_len = 0;
        st = brg_json_get_double(cfg, ctx, "model_max_length", false, 0, &max_len);
        /* int(1e30), VERY_LARGE_INTEGER, is "no limit". */
        if (st == BRG_OK) out->model_max_length = max_len >= 1 && max_len < 1e18 ? (int64_t)max_len : 0;
        if (st == BRG_OK)
            st = brg_json_get_bool(cfg, ctx, "clean_up_tokenization_spaces", false, false, &out->clean_up);
        if (st == BRG_OK)
            st = brg_json_get_bool(cfg, ctx, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output",
                                   false, false, &out->clean_up_bpe);
        if (st == BRG_OK) st = brg_json_get_string(cfg, ctx, "padding_side", false, "right", &side);
        if (st == BRG_OK) out->padding_left = strcmp(side, "left") == 0;
        /* The tokenizer returns (and the model gets) only model_input_names. */
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(cfg, "model_input_names"), *e;
        if (st == BRG_OK && cJSON_IsArray(names)) {
            out->no_token_types = true;
            cJSON_ArrayForEach(e, names) if (cJSON_IsString(e) && strcmp(e->valuestring, "token_type_ids") == 0)
                out->no_token_types = false;
        }
    }
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    return st;
}

/* ---- config.json -------------------------------------------------------------------------- */

brg_status task_labels_load(brg_task_pipeline *p) {
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(p->config, "id2label");
    int64_t n = 0;
    if (cJSON_IsObject(id2label)) {
        n = cJSON_GetArraySize(id2label);
    } else {
        BRG_TRY(brg_json_get_int(p->config, "config.json", "num_labels", false, 2, &n));
        id2label = NULL;
    }
    if (n < 1 || n > 1 << 20) return brg_error(BRG_ERR_FORMAT, "%s/config.json: %lld labels", p->dir, (long long)n);
    p->labels = calloc((size_t)n, sizeof *p->labels);
    if (!p->labels) return brg_error(BRG_ERR_OOM, "no memory for %lld labels", (long long)n);
    p->n_labels = n;
    const cJSON *e;
    if (id2label) cJSON_ArrayForEach(e, id2label) {
            char *end;
            long id = strtol(e->string, &end, 10);
            if (*end || end == e->string || id < 0 || id >= n || !cJSON_IsString(e) || p->labels[id])
                return brg_error(BRG_ERR_FORMAT, "%s/config.json: id2label must map the ids 0..%lld to strings (\"%s\")",
                                 p->dir, (long long)n - 1, e->string);
            if (!(p->labels[id] = strdup(e->valuestring))) return brg_error(BRG_ERR_OOM, "no memory for a label");
        }
    for (int64_t i = 0; i < n; i++) {
        if (p->labels[i]) continue;
        char name[32];
        snprintf(name, sizeof name, "LABEL_%lld", (long long)i);
        if (!(p->labels[i] = strdup(name))) return brg_error(BRG_ERR_OOM, "no memory for a label");
    }
    return BRG_OK;
}

const char *task_problem_type(const brg_task_pipeline *p) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->config, "problem_type");
    return cJSON_IsString(v) ? v->valuestring : "";
}

bool task_arch_is(const brg_model *m, const char *const *names) {
    for (; *names; names++)
        if (strcmp(m->ops->architecture, *names) == 0) return true;
    return false;
}

/* ---- encoding and forward passes ------------------------------------------------------------ */

brg_status task_encode(brg_task_pipeline *p, const char *text, const char *pair, bool special, int64_t index,
                       brg_encoding *out) {
    brg_status st = pair ? brg_tokenizer_encode_pair(p->tok, text, strlen(text), pair, strlen(pair), special, out)
                         : brg_tokenizer_encode(p->tok, text, strlen(text), special, out);
    return st == BRG_OK ? BRG_OK : brg_error_wrap(st, "%s %lld", p->in_name, (long long)index);
}

static brg_status new_input(brg_arena *a, int64_t rows, int64_t T, brg_dtype dtype, const char *name,
                            brg_tensor **out) {
    const int64_t shape[2] = {rows, T};
    BRG_TRY(brg_tensor_new(a, dtype, 2, shape, name, out));
    memset((*out)->data, 0, (size_t)(rows * T) * 4);
    return BRG_OK;
}

static brg_status run_rows(brg_task_pipeline *p, const brg_encoding *const *rows, int64_t n, brg_named_tensor *outs,
                           int *n_outs, int64_t *T_out) {
    int64_t T = 1;
    for (int64_t r = 0; r < n; r++) T = (int64_t)rows[r]->n > T ? (int64_t)rows[r]->n : T;
    const int64_t R = p->inf ? (n + p->multiple - 1) / p->multiple * p->multiple : n;
    const int32_t pad = p->tokens.pad_id >= 0 ? p->tokens.pad_id : 0;
    brg_bundle in = {0};
    brg_tensor *ids_t, *mask_t, *types_t = NULL;
    BRG_TRY(new_input(p->arena, R, T, BRG_DTYPE_I32, "input_ids", &ids_t));
    BRG_TRY(new_input(p->arena, R, T, BRG_DTYPE_F32, "attention_mask", &mask_t));
    if (p->token_types) BRG_TRY(new_input(p->arena, R, T, BRG_DTYPE_I32, "token_type_ids", &types_t));
    BRG_TRY(brg_tensor_map_put(&in.inputs, "input_ids", ids_t));
    BRG_TRY(brg_tensor_map_put(&in.inputs, "attention_mask", mask_t));
    if (types_t) BRG_TRY(brg_tensor_map_put(&in.inputs, "token_type_ids", types_t));
    int32_t *ids = ids_t->data, *types = types_t ? types_t->data : NULL;
    float *mask = mask_t->data;
    for (int64_t i = 0; i < R * T; i++) ids[i] = pad;
    for (int64_t r = 0; r < n; r++)
        for (size_t t = 0; t < rows[r]->n; t++) {
            ids[r * T + (int64_t)t] = rows[r]->ids[t];
            if (types) types[r * T + (int64_t)t] = rows[r]->type_ids[t];
            mask[r * T + (int64_t)t] = (float)rows[r]->attention_mask[t];
        }
    for (int64_t r = n; r < R; r++) mask[r * T] = 1.0f; /* filler rows: one attended pad token */
    *T_out = T;
    if (p->inf) {
        brg_inference_outputs o;
        BRG_TRY(brg_inference_run(p->inf, &in.inputs, p->arena, &o));
        for (*n_outs = 0; *n_outs < o.n_named; (*n_outs)++) outs[*n_outs] = o.named[*n_outs];
        return BRG_OK;
    }
    brg_tape *tape = NULL;
    BRG_TRY(brg_tape_create(p->arena, &tape));
    brg_tape_set_grad_enabled(tape, false);
    const brg_dtype before = brg_compute_dtype_set(p->opts.inference.compute_dtype); /* the one device */
    brg_status st = brg_model_forward(p->model, tape, &in);
    brg_compute_dtype_set(before);
    if (st == BRG_OK)
        st = brg_model_outputs(p->model, &in.inputs, in.logits, p->arena, outs, BRG_INFERENCE_MAX_OUTPUTS, n_outs);
    brg_tape_destroy(tape);
    return st;
}

/* A copy of rows [r0, r0 + n) of every output into `dst` (for one-row-at-a-time runs). */
static brg_status gather_rows(brg_task_pipeline *p, brg_named_tensor *dst, const brg_named_tensor *src, int n_out,
                              int64_t r0, int64_t n_total) {
    for (int i = 0; i < n_out; i++) {
        const brg_tensor *s = src[i].tensor;
        if (!dst[i].tensor) {
            int64_t shape[8];
            for (int d = 0; d < s->ndim; d++) shape[d] = s->shape[d];
            shape[0] = n_total;
            brg_tensor *t;
            BRG_TRY(brg_tensor_new(p->arena, s->dtype, s->ndim, shape, src[i].name, &t));
            dst[i] = (brg_named_tensor){src[i].name, t};
        }
        const size_t row = brg_tensor_nbytes(s) / (size_t)s->shape[0];
        if (row * (size_t)s->shape[0] != brg_tensor_nbytes(dst[i].tensor) / (size_t)n_total)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: rows of different lengths cannot be run one at a time",
                             src[i].name);
        memcpy((char *)dst[i].tensor->data + (size_t)r0 * row, s->data, row);
    }
    return BRG_OK;
}

brg_status task_forward(brg_task_pipeline *p, const brg_encoding *const *rows, int64_t n, brg_named_tensor *outs,
                        int *n_outs, int64_t *T) {
    if (!p->one_row || n == 1) return run_rows(p, rows, n, outs, n_outs, T);
    /* One row at a time, each padded to the longest so the outputs stack. */
    int64_t longest = 0;
    for (int64_t r = 0; r < n; r++) longest = (int64_t)rows[r]->n > longest ? (int64_t)rows[r]->n : longest;
    for (int64_t r = 0; r < n; r++)
        if ((int64_t)rows[r]->n != longest)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s without a pad token (pad_token_id in config.json) takes rows of "
                             "one length per batch", p->model->ops->architecture);
    memset(outs, 0, sizeof *outs * BRG_INFERENCE_MAX_OUTPUTS);
    for (int64_t r = 0; r < n; r++) {
        brg_named_tensor one[BRG_INFERENCE_MAX_OUTPUTS];
        int n_one = 0;
        BRG_TRY(run_rows(p, &rows[r], 1, one, &n_one, T));
        BRG_TRY(gather_rows(p, outs, one, n_one, r, n));
        *n_outs = n_one;
    }
    return BRG_OK;
}

const brg_tensor *task_output(const brg_named_tensor *outs, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(outs[i].name, name) == 0) return outs[i].tensor;
    return NULL;
}

void task_softmax(const float *x, int64_t n, float *out) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0;
    for (int64_t i = 0; i < n; i++) sum += out[i] = expf(x[i] - mx);
    for (int64_t i = 0; i < n; i++) out[i] /= sum;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* Every occurrence of `from` replaced by `to` (not longer), in place, left to right. */
static void replace_all(char *s, const char *from, const char *to) {
    const size_t fl = strlen(from), tl = strlen(to);
    char *w = s;
    for (const char *r = s; *r;) {
        if (strncmp(r, from, fl) == 0) {
            memmove(w, to, tl);
            w += tl;
            r += fl;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

void task_clean_up_tokenization(char *s) {
    static const char *const pairs[][2] = {{" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},
                                           {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},
                                           {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(s, pairs[i][0], pairs[i][1]);
}

brg_status task_decode(const brg_task_pipeline *p, const int32_t *ids, size_t n, bool skip_special, bool clean_up,
                       char **text) {
    BRG_TRY(brg_tokenizer_decode(p->tok, ids, n, skip_special, text));
    /* transformers 5 skips the clean-up for BPE models: it would eat their spaces. */
    if (clean_up && (strcmp(brg_tokenizer_model_type(p->tok), "BPE") != 0 || p->tokens.clean_up_bpe))
        task_clean_up_tokenization(*text);
    return BRG_OK;
}

/* ---- code points ---------------------------------------------------------------------------- */

int64_t task_code_points(const char *s, size_t len) {
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

size_t task_byte_offset(const char *s, size_t len, int64_t cp) {
    size_t i = 0;
    for (int64_t k = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
    }
    return len;
}

char *task_slice(const char *s, int64_t from, int64_t to) {
    const size_t len = strlen(s);
    const size_t a = task_byte_offset(s, len, from < 0 ? 0 : from);
    size_t b = task_byte_offset(s, len, to < from ? from : to);
    char *out = malloc(b - a + 1);
    if (!out) return NULL;
    memcpy(out, s + a, b - a);
    out[b - a] = 0;
    return out;
}

/* The full lowercase of s as code points (malloc'd, *n of them). */
static uint32_t *lowered(const char *s, size_t *n) {
    const size_t len = strlen(s);
    uint32_t *out = malloc((3 * len + 1) * sizeof *out);
    if (!out) return NULL;
    *n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += tk_utf8_decode(s + i, len - i, &cp);
        *n += (size_t)tk_lowercase(cp, out + *n);
    }
    return out;
}

bool task_lower_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint32_t *la = lowered(a, &na), *lb = lowered(b, &nb);
    const bool eq = la && lb && na == nb && memcmp(la, lb, na * sizeof *la) == 0;
    free(la);
    free(lb);
    return eq;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

brg_status task_json_open(task_json *j) {
    j->buf = NULL;
    j->len = 0;
    j->f = open_memstream(&j->buf, &j->len);
    return j->f ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for a result");
}

void task_json_str(task_json *j, const char *s) {
    fputc('"', j->f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", j->f); break;
        case '\\': fputs("\\\\", j->f); break;
        case '\n': fputs("\\n", j->f); break;
        case '\r': fputs("\\r", j->f); break;
        case '\t': fputs("\\t", j->f); break;
        case '\b': fputs("\\b", j->f); break;
        case '\f': fputs("\\f", j->f); break;
        default:
            if (*c < 0x20 || *c == 0x7f) fprintf(j->f, "\\u%04x", *c);
            else fputc(*c, j->f);
        }
    }
    fputc('"', j->f);
}

void task_json_num(task_json *j, double v) {
    if (isnan(v)) fputs("NaN", j->f);
    else if (isinf(v)) fputs(v > 0 ? "Infinity" : "-Infinity", j->f);
    else fprintf(j->f, "%.9g", v);
}

void task_json_int(task_json *j, int64_t v) { fprintf(j->f, "%lld", (long long)v); }

void task_json_raw(task_json *j, const char *s) { fputs(s, j->f); }

brg_status task_json_close(task_json *j, char **out) {
    const bool bad = ferror(j->f);
    fclose(j->f);
    if (bad || !j->buf) {
        free(j->buf);
        *out = NULL;
        return brg_error(BRG_ERR_OOM, "no memory for a result");
    }
    *out = j->buf;
    return BRG_OK;
}

brg_status task_run_batches(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, bool pairs,
                            task_check_fn check, task_results_fn results, char **out) {
    const int64_t B = p->opts.batch_size;
    brg_encoding *enc = calloc((size_t)B, sizeof *enc);
    const brg_encoding **rows = calloc((size_t)B, sizeof *rows);
    brg_status st = enc && rows ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for a batch");
    for (int64_t b0 = 0; st == BRG_OK && b0 < n; b0 += B) {
        const int64_t nb = n - b0 < B ? n - b0 : B;
        int64_t done = 0;
        while (st == BRG_OK && done < nb) {
            const brg_task_input *x = &in[b0 + done];
            st = task_encode(p, x->text, pairs ? x->text_pair : NULL, true, first + b0 + done, &enc[done]);
            if (st != BRG_OK) break;
            rows[done] = &enc[done];
            done++;
            if (check) st = check(p, &enc[done - 1], first + b0 + done - 1);
        }
        const size_t mark = brg_arena_mark(p->arena);
        brg_named_tensor outs[BRG_INFERENCE_MAX_OUTPUTS];
        task_batch b = {.in = in + b0, .enc = enc, .n = nb, .outs = outs};
        if (st == BRG_OK) st = task_forward(p, rows, nb, outs, &b.n_outs, &b.T);
        if (st == BRG_OK) st = results(p, &b, out + b0);
        brg_arena_reset(p->arena, mark);
        for (int64_t r = 0; r < done; r++) brg_encoding_free(&enc[r]);
    }
    free(enc);
    free(rows);
    return st;
}
