/* Datasets live in host memory as one contiguous tensor per input (I32 ids, F32 masks and
 * pixels), validated once at load so the training loop never meets bad input. */
#include "brigade/dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/rng.h"
#include "brigade/safetensors.h"
#include "data/data_internal.h"

void brg_dataset_free(brg_dataset *d) {
    if (!d) return;
    brg_arena_destroy(d->arena);
    free(d);
}

brg_status data_dataset_new(brg_dataset **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return brg_error(BRG_ERR_OOM, "cannot allocate a dataset");
    brg_status st = brg_arena_create("dataset", 0, &(*out)->arena);
    if (st != BRG_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

brg_status data_add_column(brg_dataset *d, brg_tensor **out, brg_dtype dtype, int ndim, const int64_t *shape,
                           const char *name, const void *src) {
    brg_tensor *t;
    BRG_TRY(brg_tensor_new(d->arena, dtype, ndim, shape, name, &t));
    if (src) memcpy(t->data, src, brg_tensor_nbytes(t));
    BRG_TRY(brg_tensor_map_put(&d->columns, name, t));
    if (out) *out = t;
    return BRG_OK;
}

/* Labels default to the ids, ignored where the mask is 0 (a language-model collator). */
static brg_status derive_labels(brg_dataset *d) {
    const brg_tensor *ids_t = brg_tensor_map_get(&d->columns, "input_ids");
    const brg_tensor *mask_t = brg_tensor_map_get(&d->columns, "attention_mask");
    brg_tensor *labels_t;
    BRG_TRY(data_add_column(d, &labels_t, BRG_DTYPE_I32, 2, ids_t->shape, "labels", NULL));
    const int32_t *ids = ids_t->data;
    const float *mask = mask_t ? mask_t->data : NULL;
    int32_t *labels = labels_t->data;
    for (int64_t i = 0; i < brg_tensor_numel(ids_t); i++) labels[i] = mask && mask[i] == 0.0f ? -100 : ids[i];
    return BRG_OK;
}

static brg_status lm_columns(brg_dataset *d, int64_t rows, int64_t seq_len, bool with_mask) {
    int64_t shape[2] = {rows, seq_len};
    d->rows = rows;
    d->seq_len = seq_len;
    BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_I32, 2, shape, "input_ids", NULL));
    if (with_mask) BRG_TRY(data_add_column(d, NULL, BRG_DTYPE_F32, 2, shape, "attention_mask", NULL));
    return BRG_OK;
}

static brg_status fill_rows(brg_dataset *d, const int32_t *ids, const float *mask, const int32_t *labels) {
    size_t n = (size_t)(d->rows * d->seq_len);
    const brg_tensor *ids_t = brg_tensor_map_get(&d->columns, "input_ids");
    memcpy(ids_t->data, ids, n * sizeof *ids);
    if (mask) memcpy(brg_tensor_map_get(&d->columns, "attention_mask")->data, mask, n * sizeof *mask);
    if (!labels) return derive_labels(d);
    brg_tensor *labels_t;
    BRG_TRY(data_add_column(d, &labels_t, BRG_DTYPE_I32, 2, ids_t->shape, "labels", NULL));
    memcpy(labels_t->data, labels, n * sizeof *labels);
    return BRG_OK;
}

brg_status brg_dataset_from_rows(const int32_t *ids, const float *mask, const int32_t *labels, int64_t rows,
                                 int64_t seq_len, brg_dataset **out) {
    if (rows < 1 || seq_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "a dataset needs at least one row and one token");
    BRG_TRY(data_dataset_new(out));
    brg_status st = lm_columns(*out, rows, seq_len, mask != NULL);
    if (st == BRG_OK) st = fill_rows(*out, ids, mask, labels);
    if (st != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
    }
    return st;
}

static brg_status load_text(const char *path, const brg_model *m, int64_t seq_len, brg_dataset *d) {
    if (m->vocab_size < 256)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: byte-level text needs a vocabulary of at least 256 (the model has %lld)",
                         path, (long long)m->vocab_size);
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t rows = len > 0 ? len / seq_len : 0;
    brg_status st = rows >= 1 ? lm_columns(d, rows, seq_len, false)
                              : brg_error(BRG_ERR_INVALID_ARG, "%s: %ld bytes of text make no row of %lld tokens", path,
                                          len, (long long)seq_len);
    int32_t *ids = st == BRG_OK ? brg_tensor_map_get(&d->columns, "input_ids")->data : NULL;
    for (int64_t i = 0; st == BRG_OK && i < rows * seq_len; i++) {
        int c = fgetc(f);
        if (c == EOF) st = brg_error(BRG_ERR_IO, "%s: read failed", path);
        else ids[i] = c;
    }
    fclose(f);
    return st == BRG_OK ? derive_labels(d) : st;
}

/* Columns are read exactly as brigade forward reads inputs, into the dataset's arena. */
static brg_status load_columns(const char *path, const brg_model *m, brg_dataset *d) {
    brg_safetensors *f;
    BRG_TRY(brg_safetensors_open(path, &f));
    brg_status st = brg_inputs_load(m, d->arena, f, &d->columns);
    brg_safetensors_close(f);
    BRG_TRY(st);
    const brg_tensor *ids = brg_tensor_map_get(&d->columns, "input_ids");
    const brg_tensor *lead = ids ? ids : brg_tensor_map_get(&d->columns, "pixel_values");
    d->rows = lead->shape[0];
    d->seq_len = ids ? ids->shape[1] : 0;
    if (!brg_tensor_map_get(&d->columns, "labels") && ids && m->ops->labels_from_inputs) return derive_labels(d);
    return BRG_OK;
}

static bool is_safetensors(const char *path) {
    size_t n = strlen(path);
    return n >= 12 && strcmp(path + n - 12, ".safetensors") == 0;
}

brg_status brg_dataset_load(const char *path, const brg_model *model, int64_t seq_len, brg_dataset **out) {
    *out = NULL;
    bool text = !is_safetensors(path);
    if (text && (seq_len < 1 || seq_len > model->max_positions))
        return brg_error(BRG_ERR_INVALID_ARG, "sequence length %lld must be in [1, %lld] for text data", (long long)seq_len,
                         (long long)model->max_positions);
    BRG_TRY(data_dataset_new(out));
    brg_status st = text ? load_text(path, model, seq_len, *out) : load_columns(path, model, *out);
    if (st != BRG_OK) {
        brg_dataset_free(*out);
        *out = NULL;
        return brg_error_wrap(st, "dataset %s", path);
    }
    return BRG_OK;
}

void brg_dataset_rows(const brg_dataset *d, int64_t first, int64_t rows, brg_tensor views[BRG_TENSOR_MAP_MAX],
                      brg_tensor_map *out) {
    memset(out, 0, sizeof *out);
    for (int k = 0; k < d->columns.n; k++) {
        const brg_tensor_map_item *c = &d->columns.items[k];
        BRG_ASSERT(brg_tensor_view_slice(c->tensor, 0, first, rows, &views[k]) == BRG_OK);
        BRG_ASSERT(brg_tensor_map_put(out, c->name, &views[k]) == BRG_OK);
    }
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

/* Slot s gets a tensor of micro rows per column, named after the column (the name copied into
 * the batch's arena, which the tensor's lifetime follows). */
static brg_status init_slot(brg_step_batch *b, const brg_dataset *d, int s) {
    for (int k = 0; k < d->columns.n; k++) {
        const brg_tensor_map_item *c = &d->columns.items[k];
        int64_t shape[BRG_MAX_DIMS];
        memcpy(shape, c->tensor->shape, sizeof shape);
        shape[0] = b->micro;
        const size_t len = strlen(c->name) + 1;
        void *name;
        BRG_TRY(brg_arena_alloc_into(b->arena, len, c->name, &name));
        memcpy(name, c->name, len);
        brg_tensor *t;
        BRG_TRY(brg_tensor_new(b->arena, c->tensor->dtype, c->tensor->ndim, shape, name, &t));
        BRG_TRY(brg_tensor_map_put(&b->mbs[s], c->name, t));
    }
    return BRG_OK;
}

brg_status brg_step_batch_init(brg_step_batch *b, const brg_dataset *d, int replicas, int accumulation,
                               int64_t micro) {
    memset(b, 0, sizeof *b);
    int slots = replicas * accumulation;
    b->replicas = replicas;
    b->accumulation = accumulation;
    b->micro = micro;
    b->mbs = calloc((size_t)slots, sizeof *b->mbs);
    brg_status st = b->mbs ? brg_arena_create("host batches", 0, &b->arena)
                           : brg_error(BRG_ERR_OOM, "cannot allocate a step batch");
    for (int s = 0; st == BRG_OK && s < slots; s++) st = init_slot(b, d, s);
    if (st != BRG_OK) brg_step_batch_free(b);
    return st;
}

void brg_step_batch_free(brg_step_batch *b) {
    free(b->mbs);
    brg_arena_destroy(b->arena);
    memset(b, 0, sizeof *b);
}

static void copy_row(brg_micro_batch *slot, const brg_dataset *d, int64_t i, int64_t row) {
    for (int k = 0; k < d->columns.n; k++) {
        const brg_tensor *c = d->columns.items[k].tensor;
        size_t bytes = brg_tensor_nbytes(c) / (size_t)c->shape[0];
        brg_tensor *dst = brg_tensor_map_get(slot, d->columns.items[k].name);
        memcpy((char *)dst->data + (size_t)i * bytes, (const char *)c->data + (size_t)row * bytes, bytes);
    }
}

/* A masked LM's row i of a slot gets the masks of its epoch over the stored, unmasked ids. */
static void mask_row(brg_micro_batch *slot, const brg_dataset *d, int64_t i, int64_t row, int64_t epoch) {
    const int64_t T = d->seq_len;
    brg_mlm_mask_row(d->masking, epoch, row, (int32_t *)brg_tensor_map_get(slot, "input_ids")->data + i * T,
                     d->never_mask + row * T, (int32_t *)brg_tensor_map_get(slot, "labels")->data + i * T, T);
}

/* An id outside the vocabulary would index past the embedding table: a row built by a caller
 * (brg_dataset_from_rows) is checked here, when a step first reads it. */
static brg_status check_ids(const brg_tensor *t, const char *name, int64_t i, int64_t row, int64_t vocab) {
    if (!t || vocab <= 0) return BRG_OK;
    const int64_t n = brg_tensor_numel(t) / t->shape[0];
    const int32_t *ids = (const int32_t *)t->data + i * n;
    for (int64_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= vocab)
            return brg_error(BRG_ERR_INVALID_ARG, "dataset row %lld: %s holds token %d, outside the model's vocabulary "
                             "[0, %lld)", (long long)row, name, (int)ids[k], (long long)vocab);
    return BRG_OK;
}

/* The columns the model declares as token ids (input_ids, decoder_input_ids): their names into
 * names[0..n), in the columns' order. */
static int token_columns(const brg_dataset *d, const brg_model *model, const char *names[BRG_TENSOR_MAP_MAX]) {
    int n = 0;
    for (int k = 0; k < d->columns.n; k++) {
        const brg_input_decl *decl = brg_model_input(model, d->columns.items[k].name);
        if (decl && decl->kind == BRG_INPUT_TOKENS) names[n++] = d->columns.items[k].name;
    }
    return n;
}

static brg_status check_row(const brg_micro_batch *slot, const char *const *tokens, int n_tokens, int64_t i,
                            int64_t row, const brg_model *model) {
    for (int k = 0; k < n_tokens; k++)
        BRG_TRY(check_ids(brg_tensor_map_get(slot, tokens[k]), tokens[k], i, row, model->vocab_size));
    return BRG_OK;
}

brg_status brg_step_batch_fill(brg_step_batch *b, const brg_dataset *d, brg_data_order *o, int64_t step,
                               const brg_model *model) {
    b->loss_items = (brg_loss_items){0, 0};
    const char *tokens[BRG_TENSOR_MAP_MAX];
    const int n_tokens = token_columns(d, model, tokens);
    for (int r = 0; r < b->replicas; r++)
        for (int a = 0; a < b->accumulation; a++) {
            brg_micro_batch *slot = &b->mbs[r * b->accumulation + a];
            for (int64_t i = 0; i < b->micro; i++) {
                const int64_t row =
                    brg_data_order_row(o, step, brg_micro_batch_first_row(a, r, b->replicas, b->micro) + i);
                copy_row(slot, d, i, row);
                BRG_TRY(check_row(slot, tokens, n_tokens, i, row, model));
                if (d->masking) mask_row(slot, d, i, row, step / o->steps_per_epoch);
            }
            brg_loss_items n = brg_model_count_loss_items(model, slot);
            b->loss_items.labels += n.labels;
            b->loss_items.extra += n.extra;
        }
    return BRG_OK;
}
