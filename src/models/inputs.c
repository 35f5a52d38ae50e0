/* Reads forward inputs by transformers' keyword names. Checks happen here, before any compute,
 * so bad input never reaches a kernel: ids are range-checked while still 64-bit (no silent
 * truncation to int32); shapes are checked against input_ids (or pixel_values). Which names a
 * model takes comes from its ops; each name has one role. */
#include "brigade/inputs.h"

#include <string.h>

static const char *const default_inputs[] = {"input_ids", "attention_mask", "labels", NULL};

/* extra_labels carries end_positions (its only use so far). */
static const char *const input_names[BRG_BUNDLE_INPUTS] = {
    "input_ids",         "attention_mask",         "labels",       "token_type_ids", "pixel_values",
    "decoder_input_ids", "decoder_attention_mask", "end_positions"};

const char *brg_bundle_input_name(int k) { return k >= 0 && k < BRG_BUNDLE_INPUTS ? input_names[k] : NULL; }

brg_tensor **brg_bundle_input(brg_bundle *b, int k) {
    switch (k) {
    case 0: return &b->input_ids;
    case 1: return &b->attention_mask;
    case 2: return &b->labels;
    case 3: return &b->token_type_ids;
    case 4: return &b->pixel_values;
    case 5: return &b->decoder_input_ids;
    case 6: return &b->decoder_attention_mask;
    case 7: return &b->extra_labels;
    }
    return NULL;
}

static void format_index(const brg_tensor *t, int64_t flat, char *buf, size_t len) {
    size_t o = 0;
    int64_t idx[BRG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = flat % t->shape[d];
        flat /= t->shape[d];
    }
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "[%lld]", (long long)idx[d]);
}

brg_status brg_inputs_to_i32(brg_arena *arena, const brg_tensor *src, const char *src_name, int64_t lo, int64_t hi,
                             int64_t allowed, brg_tensor **out) {
    if (src->dtype != BRG_DTYPE_I32 && src->dtype != BRG_DTYPE_I64)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be I32 or I64, not %s", src_name, brg_dtype_name(src->dtype));
    BRG_TRY(brg_tensor_new(arena, BRG_DTYPE_I32, src->ndim, src->shape, src_name, out));
    int32_t *dst = (*out)->data;
    int64_t n = brg_tensor_numel(src);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = brg_tensor_get_int(src, i);
        if ((v < lo || v >= hi) && v != allowed) {
            char where[128];
            format_index(src, i, where, sizeof where);
            return brg_error(BRG_ERR_INVALID_ARG, "%s%s = %lld is out of range [%lld, %lld)%s", src_name, where,
                             (long long)v, (long long)lo, (long long)hi,
                             allowed != lo ? " (and is not the ignore index -100)" : "");
        }
        dst[i] = (int32_t)v;
    }
    return BRG_OK;
}

/* [batch, sequence], or [batch, num_choices, sequence] for multiple-choice heads (like: the
 * tensor whose shape t must have, or NULL). */
static brg_status check_rank(const brg_tensor *t, const char *name, const brg_tensor *like, bool choices) {
    char a[128], b[128];
    int rank = choices ? 3 : 2;
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) empty |= t->shape[d] < 1;
    if (t->ndim != rank || empty)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be %s with each at least 1, got %s", name,
                         choices ? "[batch, num_choices, sequence]" : "[batch, sequence]", brg_shape_str(t, a, sizeof a));
    if (like && !brg_tensor_same_shape(t, like))
        return brg_error(BRG_ERR_INVALID_ARG, "%s has shape %s but input_ids has %s", name,
                         brg_shape_str(t, a, sizeof a), brg_shape_str(like, b, sizeof b));
    return BRG_OK;
}

static brg_status check_2d(const brg_tensor *t, const char *name, const brg_tensor *like) {
    return check_rank(t, name, like, false);
}

static bool choices_of(const brg_model *m) { return m->ops->choices; }

static brg_status to_f32(brg_arena *arena, const brg_tensor *src, const char *name, brg_tensor **out) {
    BRG_TRY(brg_tensor_new(arena, BRG_DTYPE_F32, src->ndim, src->shape, name, out));
    return brg_tensor_copy(*out, src);
}

static brg_status load_mask(brg_arena *arena, const brg_tensor *src, const char *name, brg_tensor **out) {
    BRG_TRY(to_f32(arena, src, name, out));
    const float *v = (*out)->data;
    int64_t n = brg_tensor_numel(src);
    for (int64_t i = 0; i < n; i++)
        if (v[i] != 0.0f && v[i] != 1.0f) {
            char where[64];
            format_index(src, i, where, sizeof where);
            return brg_error(BRG_ERR_INVALID_ARG, "%s%s = %g: values must be 0 or 1", name, where, (double)v[i]);
        }
    return BRG_OK;
}

/* Class ids, token labels and answer positions are integers (-100 ignored; the loss checks the
 * upper bound, which depends on the head); regression and multi-label targets are floats. */
static brg_status load_labels(brg_arena *arena, const brg_tensor *src, const char *name, int64_t batch,
                              brg_tensor **out) {
    char s[64];
    if (src->ndim < 1 || src->shape[0] != batch)
        return brg_error(BRG_ERR_INVALID_ARG, "%s has shape %s: its first dimension must be the batch (%lld)", name,
                         brg_shape_str(src, s, sizeof s), (long long)batch);
    if (src->dtype == BRG_DTYPE_I32 || src->dtype == BRG_DTYPE_I64)
        return brg_inputs_to_i32(arena, src, name, 0, INT32_MAX, -100, out);
    if (src->dtype == BRG_DTYPE_F32 || src->dtype == BRG_DTYPE_F16 || src->dtype == BRG_DTYPE_BF16)
        return to_f32(arena, src, name, out);
    return brg_error(BRG_ERR_INVALID_ARG, "%s must be an integer or float tensor, not %s", name, brg_dtype_name(src->dtype));
}

brg_status brg_inputs_from_tensors(const brg_model *model, brg_arena *arena, const brg_tensor *ids,
                                   const brg_tensor *mask, const brg_tensor *labels, brg_bundle *b) {
    memset(b, 0, sizeof *b);
    bool choices = choices_of(model);
    BRG_TRY(check_rank(ids, "input_ids", NULL, choices));
    if (ids->shape[ids->ndim - 1] > model->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "input_ids has %lld positions, the model takes at most %lld",
                         (long long)ids->shape[ids->ndim - 1], (long long)model->max_positions);
    BRG_TRY(brg_inputs_to_i32(arena, ids, "input_ids", 0, model->vocab_size, 0, &b->input_ids));
    if (mask) {
        BRG_TRY(check_rank(mask, "attention_mask", ids, choices));
        BRG_TRY(load_mask(arena, mask, "attention_mask", &b->attention_mask));
    }
    if (labels) {
        if (labels->ndim == 2 && !choices) BRG_TRY(check_2d(labels, "labels", ids));
        BRG_TRY(load_labels(arena, labels, "labels", ids->shape[0], &b->labels));
    }
    return BRG_OK;
}

static bool takes(const brg_model *m, const char *name) {
    const char *const *list = m->ops->inputs ? m->ops->inputs : default_inputs;
    for (; *list; list++)
        if (strcmp(*list, name) == 0) return true;
    return false;
}

static brg_status check_names(const brg_model *m, const brg_safetensors *file) {
    for (size_t i = 0; i < brg_safetensors_count(file); i++) {
        const char *name = brg_safetensors_name(file, i);
        if (takes(m, name)) continue;
        char list[256] = "";
        size_t o = 0;
        for (const char *const *n = m->ops->inputs ? m->ops->inputs : default_inputs; *n && o < sizeof list; n++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", *n);
        return brg_error(BRG_ERR_INVALID_ARG, "unexpected input tensor '%s' (%s takes: %s)", name, m->ops->architecture,
                         list);
    }
    return BRG_OK;
}

static const brg_tensor *get(const brg_safetensors *f, const char *name, brg_tensor *slot) {
    if (!brg_safetensors_has(f, name) || brg_safetensors_get(f, name, slot) != BRG_OK) return NULL;
    return slot;
}

static brg_status load_text_side(const brg_model *m, brg_arena *arena, const brg_safetensors *f, brg_bundle *b) {
    brg_tensor t;
    const brg_tensor *ids = get(f, "input_ids", &t);
    if (!ids) return brg_error(BRG_ERR_INVALID_ARG, "the inputs have no 'input_ids' tensor");
    brg_tensor ids_copy = *ids, mask_t, labels_t;
    const brg_tensor *mask = get(f, "attention_mask", &mask_t);
    const brg_tensor *labels = get(f, "labels", &labels_t);
    BRG_TRY(brg_inputs_from_tensors(m, arena, &ids_copy, mask, NULL, b));
    int64_t batch = ids_copy.shape[0];
    brg_tensor x;
    if (get(f, "token_type_ids", &x)) {
        BRG_TRY(check_rank(&x, "token_type_ids", &ids_copy, choices_of(m)));
        BRG_TRY(brg_inputs_to_i32(arena, &x, "token_type_ids", 0, INT32_MAX, 0, &b->token_type_ids));
    }
    if (get(f, "decoder_input_ids", &x)) {
        BRG_TRY(check_2d(&x, "decoder_input_ids", NULL));
        if (x.shape[0] != batch) return brg_error(BRG_ERR_INVALID_ARG, "decoder_input_ids has a different batch size");
        BRG_TRY(brg_inputs_to_i32(arena, &x, "decoder_input_ids", 0, m->vocab_size, 0, &b->decoder_input_ids));
        if (get(f, "decoder_attention_mask", &x)) {
            BRG_TRY(check_2d(&x, "decoder_attention_mask", NULL));
            if (!brg_tensor_same_shape(&x, b->decoder_input_ids))
                return brg_error(BRG_ERR_INVALID_ARG, "decoder_attention_mask must have the shape of decoder_input_ids");
            BRG_TRY(load_mask(arena, &x, "decoder_attention_mask", &b->decoder_attention_mask));
        }
    } else if (brg_safetensors_has(f, "decoder_attention_mask")) {
        return brg_error(BRG_ERR_INVALID_ARG, "decoder_attention_mask needs decoder_input_ids");
    }
    if (labels) BRG_TRY(load_labels(arena, labels, "labels", batch, &b->labels));
    /* BertForPreTraining's second target travels as extra_labels, as end_positions does */
    if (get(f, "next_sentence_label", &x)) {
        if (x.ndim != 1 || x.shape[0] != batch)
            return brg_error(BRG_ERR_INVALID_ARG, "next_sentence_label must be [batch] = [%lld]", (long long)batch);
        BRG_TRY(brg_inputs_to_i32(arena, &x, "next_sentence_label", 0, 2, -100, &b->extra_labels));
    }
    return BRG_OK;
}

static brg_status load_positions(brg_arena *arena, const brg_safetensors *f, int64_t batch, brg_bundle *b) {
    brg_tensor s, e;
    const brg_tensor *start = get(f, "start_positions", &s), *end = get(f, "end_positions", &e);
    if (!start && !end) return BRG_OK;
    if (!start || !end) return brg_error(BRG_ERR_INVALID_ARG, "give both start_positions and end_positions, or neither");
    /* Any position is accepted: the head clamps those outside the sequence, as transformers does. */
    char sh[64];
    if (start->ndim != 1 || start->shape[0] != batch || !brg_tensor_same_shape(start, end))
        return brg_error(BRG_ERR_INVALID_ARG, "start_positions and end_positions must be [batch] = [%lld], got %s",
                         (long long)batch, brg_shape_str(start, sh, sizeof sh));
    BRG_TRY(brg_inputs_to_i32(arena, start, "start_positions", INT32_MIN, INT32_MAX, INT32_MIN, &b->labels));
    return brg_inputs_to_i32(arena, end, "end_positions", INT32_MIN, INT32_MAX, INT32_MIN, &b->extra_labels);
}

static brg_status load_pixels(brg_arena *arena, const brg_safetensors *f, brg_bundle *b) {
    brg_tensor p, l;
    char s[64];
    if (!get(f, "pixel_values", &p)) return brg_error(BRG_ERR_INVALID_ARG, "the inputs have no 'pixel_values' tensor");
    if (p.ndim != 4 || p.shape[0] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "pixel_values must be [batch, channels, height, width], got %s",
                         brg_shape_str(&p, s, sizeof s));
    if (p.dtype != BRG_DTYPE_F32 && p.dtype != BRG_DTYPE_F16 && p.dtype != BRG_DTYPE_BF16)
        return brg_error(BRG_ERR_INVALID_ARG, "pixel_values must be a float tensor, not %s", brg_dtype_name(p.dtype));
    BRG_TRY(to_f32(arena, &p, "pixel_values", &b->pixel_values));
    if (get(f, "labels", &l)) BRG_TRY(load_labels(arena, &l, "labels", p.shape[0], &b->labels));
    return BRG_OK;
}

brg_status brg_inputs_load(const brg_model *model, brg_arena *arena, const brg_safetensors *file, brg_bundle *b) {
    memset(b, 0, sizeof *b);
    BRG_TRY(check_names(model, file));
    if (takes(model, "pixel_values")) return load_pixels(arena, file, b);
    BRG_TRY(load_text_side(model, arena, file, b));
    return load_positions(arena, file, b->input_ids->shape[0], b);
}
