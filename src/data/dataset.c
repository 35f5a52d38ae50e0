/* Datasets are small enough to hold in host memory as int32 rows; everything is validated once
 * at load so the training loop never meets a bad id. */
#include "brigade/dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/inputs.h"
#include "brigade/rng.h"
#include "brigade/safetensors.h"

void brg_dataset_free(brg_dataset *d) {
    if (!d) return;
    free(d->ids);
    free(d->mask);
    free(d->labels);
    free(d);
}

static brg_status alloc_dataset(int64_t rows, int64_t seq_len, bool with_mask, brg_dataset **out) {
    brg_dataset *d = calloc(1, sizeof *d);
    size_t n = (size_t)(rows * seq_len);
    if (d) {
        d->rows = rows;
        d->seq_len = seq_len;
        d->ids = malloc(n * sizeof *d->ids);
        d->labels = malloc(n * sizeof *d->labels);
        d->mask = with_mask ? malloc(n * sizeof *d->mask) : NULL;
    }
    if (!d || !d->ids || !d->labels || (with_mask && !d->mask)) {
        brg_dataset_free(d);
        return brg_error(BRG_ERR_OOM, "cannot hold a dataset of %lld rows of %lld tokens", (long long)rows,
                         (long long)seq_len);
    }
    *out = d;
    return BRG_OK;
}

/* Labels default to the ids, ignored where the mask is 0 (a language-model collator). */
static void derive_labels(brg_dataset *d) {
    int64_t n = d->rows * d->seq_len;
    for (int64_t i = 0; i < n; i++) d->labels[i] = d->mask && d->mask[i] == 0.0f ? -100 : d->ids[i];
}

brg_status brg_dataset_from_rows(const int32_t *ids, const float *mask, const int32_t *labels, int64_t rows,
                                 int64_t seq_len, brg_dataset **out) {
    if (rows < 1 || seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "a dataset needs at least one row and one token");
    BRG_TRY(alloc_dataset(rows, seq_len, mask != NULL, out));
    size_t n = (size_t)(rows * seq_len);
    memcpy((*out)->ids, ids, n * sizeof *ids);
    if (mask) memcpy((*out)->mask, mask, n * sizeof *mask);
    if (labels) memcpy((*out)->labels, labels, n * sizeof *labels);
    else derive_labels(*out);
    return BRG_OK;
}

static brg_status copy_column(const brg_tensor *t, const char *name, int64_t lo, int64_t hi, int64_t allowed,
                              int32_t *dst) {
    brg_arena *a;
    BRG_TRY(brg_arena_create("host", 0, &a));
    brg_tensor *conv = NULL;
    brg_status st = brg_inputs_to_i32(a, t, name, lo, hi, allowed, &conv);
    if (st == BRG_OK) memcpy(dst, conv->data, (size_t)brg_tensor_numel(t) * sizeof *dst);
    brg_arena_destroy(a);
    return st;
}

static brg_status check_column(const brg_tensor *t, const char *name, const brg_tensor *ids) {
    char a[64], b[64];
    if (!brg_tensor_same_shape(t, ids))
        return brg_error(BRG_ERR_INVALID_ARG, "dataset column %s has shape %s but input_ids has %s", name,
                         brg_shape_str(t, a, sizeof a), brg_shape_str(ids, b, sizeof b));
    return BRG_OK;
}

static brg_status load_columns(const brg_safetensors *f, int64_t vocab, int64_t max_positions, brg_dataset **out) {
    for (size_t i = 0; i < brg_safetensors_count(f); i++) {
        const char *n = brg_safetensors_name(f, i);
        if (strcmp(n, "input_ids") && strcmp(n, "attention_mask") && strcmp(n, "labels"))
            return brg_error(BRG_ERR_INVALID_ARG, "unexpected dataset column '%s' (accepted: input_ids, attention_mask, labels)", n);
    }
    if (!brg_safetensors_has(f, "input_ids")) return brg_error(BRG_ERR_INVALID_ARG, "the dataset has no input_ids column");
    brg_tensor ids, mask, labels;
    BRG_TRY(brg_safetensors_get(f, "input_ids", &ids));
    char s[64];
    if (ids.ndim != 2 || ids.shape[0] < 1 || ids.shape[1] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "dataset input_ids must be [rows, sequence], got %s", brg_shape_str(&ids, s, sizeof s));
    if (ids.shape[1] > max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "dataset rows hold %lld tokens, the model takes at most %lld",
                         (long long)ids.shape[1], (long long)max_positions);
    bool has_mask = brg_safetensors_has(f, "attention_mask"), has_labels = brg_safetensors_has(f, "labels");
    BRG_TRY(alloc_dataset(ids.shape[0], ids.shape[1], has_mask, out));
    brg_dataset *d = *out;
    brg_status st = copy_column(&ids, "input_ids", 0, vocab, 0, d->ids);
    if (st == BRG_OK && has_mask && (st = brg_safetensors_get(f, "attention_mask", &mask)) == BRG_OK &&
        (st = check_column(&mask, "attention_mask", &ids)) == BRG_OK) {
        int64_t n = brg_tensor_numel(&mask);
        for (int64_t i = 0; i < n && st == BRG_OK; i++) {
            double v = brg_tensor_get(&mask, i);
            if (v != 0.0 && v != 1.0) st = brg_error(BRG_ERR_INVALID_ARG, "dataset attention_mask holds %g (must be 0 or 1)", v);
            d->mask[i] = (float)v;
        }
    }
    if (st == BRG_OK && has_labels && (st = brg_safetensors_get(f, "labels", &labels)) == BRG_OK &&
        (st = check_column(&labels, "labels", &ids)) == BRG_OK)
        st = copy_column(&labels, "labels", 0, vocab, -100, d->labels);
    if (st == BRG_OK && !has_labels) derive_labels(d);
    if (st != BRG_OK) {
        brg_dataset_free(d);
        *out = NULL;
    }
    return st;
}

static brg_status load_text(const char *path, int64_t vocab, int64_t seq_len, brg_dataset **out) {
    if (vocab < 256)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: byte-level text needs a vocabulary of at least 256 (the model has %lld)",
                         path, (long long)vocab);
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t rows = len > 0 ? len / seq_len : 0;
    if (rows < 1) {
        fclose(f);
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %ld bytes of text make no row of %lld tokens", path, len, (long long)seq_len);
    }
    brg_status st = alloc_dataset(rows, seq_len, false, out);
    for (int64_t i = 0; st == BRG_OK && i < rows * seq_len; i++) {
        int c = fgetc(f);
        if (c == EOF) st = brg_error(BRG_ERR_IO, "%s: read failed", path);
        else (*out)->ids[i] = c;
    }
    fclose(f);
    if (st != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
        return st;
    }
    derive_labels(*out);
    return BRG_OK;
}

static bool is_safetensors(const char *path) {
    size_t n = strlen(path);
    return n >= 12 && strcmp(path + n - 12, ".safetensors") == 0;
}

brg_status brg_dataset_load(const char *path, int64_t vocab, int64_t max_positions, int64_t seq_len,
                            brg_dataset **out) {
    *out = NULL;
    if (!is_safetensors(path)) {
        if (seq_len < 1 || seq_len > max_positions)
            return brg_error(BRG_ERR_INVALID_ARG, "sequence length %lld must be in [1, %lld] for text data", (long long)seq_len,
                             (long long)max_positions);
        return load_text(path, vocab, seq_len, out);
    }
    brg_safetensors *f;
    BRG_TRY(brg_safetensors_open(path, &f));
    brg_status st = load_columns(f, vocab, max_positions, out);
    brg_safetensors_close(f);
    return st == BRG_OK ? st : brg_error_wrap(st, "%s", path);
}

/* ---- order ---- */

brg_status brg_data_order_init(brg_data_order *o, const brg_dataset *d, int64_t rows_per_step, bool shuffle,
                               uint64_t seed) {
    memset(o, 0, sizeof *o);
    if (rows_per_step < 1 || rows_per_step > d->rows)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "one step needs %lld rows (micro-batch x accumulation x replicas) but the dataset has %lld",
                         (long long)rows_per_step, (long long)d->rows);
    o->rows = d->rows;
    o->rows_per_step = rows_per_step;
    o->steps_per_epoch = d->rows / rows_per_step;
    o->shuffle = shuffle;
    o->seed = seed;
    o->epoch = -1;
    o->perm = malloc((size_t)d->rows * sizeof *o->perm);
    if (!o->perm) return brg_error(BRG_ERR_OOM, "cannot allocate the data order");
    return BRG_OK;
}

void brg_data_order_free(brg_data_order *o) {
    free(o->perm);
    o->perm = NULL;
}

/* Fisher-Yates from a generator keyed by (seed, epoch): any epoch can be rebuilt on resume. */
static void build_epoch(brg_data_order *o, int64_t epoch) {
    for (int64_t i = 0; i < o->rows; i++) o->perm[i] = i;
    if (o->shuffle) {
        brg_rng rng;
        brg_rng_seed(&rng, o->seed * 1000003ull + (uint64_t)epoch);
        for (int64_t i = o->rows - 1; i > 0; i--) {
            int64_t j = (int64_t)(brg_rng_next(&rng) % (uint64_t)(i + 1));
            int64_t t = o->perm[i];
            o->perm[i] = o->perm[j];
            o->perm[j] = t;
        }
    }
    o->epoch = epoch;
}

int64_t brg_data_order_row(brg_data_order *o, int64_t step, int64_t j) {
    int64_t epoch = step / o->steps_per_epoch;
    if (epoch != o->epoch) build_epoch(o, epoch);
    return o->perm[(step % o->steps_per_epoch) * o->rows_per_step + j];
}

/* ---- step batches ---- */

brg_status brg_step_batch_init(brg_step_batch *b, int replicas, int accumulation, int64_t micro, int64_t seq_len) {
    memset(b, 0, sizeof *b);
    int slots = replicas * accumulation;
    size_t n = (size_t)(slots * micro * seq_len);
    b->replicas = replicas;
    b->accumulation = accumulation;
    b->micro = micro;
    b->seq_len = seq_len;
    b->mbs = calloc((size_t)slots, sizeof *b->mbs);
    b->tensors = calloc((size_t)slots * 3, sizeof *b->tensors);
    b->ids = malloc(n * sizeof *b->ids);
    b->labels = malloc(n * sizeof *b->labels);
    b->mask = malloc(n * sizeof *b->mask);
    if (!b->mbs || !b->tensors || !b->ids || !b->labels || !b->mask) {
        brg_step_batch_free(b);
        return brg_error(BRG_ERR_OOM, "cannot allocate a step batch");
    }
    int64_t shape[2] = {micro, seq_len};
    for (int s = 0; s < slots; s++) {
        size_t off = (size_t)(s * micro * seq_len);
        b->tensors[3 * s] = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, b->ids + off);
        b->tensors[3 * s + 1] = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, b->mask + off);
        b->tensors[3 * s + 2] = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, b->labels + off);
        b->mbs[s] = (brg_micro_batch){.input_ids = &b->tensors[3 * s], .attention_mask = &b->tensors[3 * s + 1], .labels = &b->tensors[3 * s + 2]};
    }
    return BRG_OK;
}

void brg_step_batch_free(brg_step_batch *b) {
    free(b->mbs);
    free(b->tensors);
    free(b->ids);
    free(b->labels);
    free(b->mask);
    memset(b, 0, sizeof *b);
}

void brg_step_batch_fill(brg_step_batch *b, const brg_dataset *d, brg_data_order *o, int64_t step,
                         const brg_model *model) {
    int64_t T = b->seq_len;
    b->loss_items = (brg_loss_items){0, 0};
    for (int r = 0; r < b->replicas; r++)
        for (int a = 0; a < b->accumulation; a++) {
            int slot = r * b->accumulation + a;
            for (int64_t i = 0; i < b->micro; i++) {
                int64_t row = brg_data_order_row(o, step, (a * b->replicas + r) * b->micro + i);
                size_t dst = (size_t)((slot * b->micro + i) * T), src = (size_t)(row * T);
                memcpy(b->ids + dst, d->ids + src, (size_t)T * sizeof *b->ids);
                memcpy(b->labels + dst, d->labels + src, (size_t)T * sizeof *b->labels);
                for (int64_t t = 0; t < T; t++) b->mask[dst + t] = d->mask ? d->mask[src + t] : 1.0f;
            }
            brg_bundle slot_batch = {.input_ids = &b->tensors[3 * slot], .labels = &b->tensors[3 * slot + 2]};
            brg_loss_items n = brg_model_count_loss_items(model, &slot_batch);
            b->loss_items.labels += n.labels;
            b->loss_items.extra += n.extra;
        }
}
