/* Reads forward inputs by transformers' keyword names. Checks happen here, before any compute,
 * so bad input never reaches a kernel: ids are range-checked while still 64-bit (no silent
 * truncation to int32); shapes are checked against the batch's first input. What a model takes,
 * and how each input is checked, comes from its declarations (brg_model_ops.inputs). */
#include "brigade/inputs.h"

#include <string.h>

static const brg_input_decl default_inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL},
};

static const char *const default_carried[] = {"hidden", NULL};

const brg_input_decl *brg_model_inputs(const brg_model *m) { return m->ops->inputs ? m->ops->inputs : default_inputs; }

const char *const *brg_model_carried(const brg_model *m) { return m->ops->carried ? m->ops->carried : default_carried; }

const brg_input_decl *brg_model_input(const brg_model *m, const char *name) {
    for (const brg_input_decl *d = brg_model_inputs(m); d->name; d++)
        if (strcmp(d->name, name) == 0) return d;
    return NULL;
}

bool brg_model_has_targets(const brg_model *m, const brg_tensor_map *batch) {
    for (const brg_input_decl *d = brg_model_inputs(m); d->name; d++)
        if (d->target && brg_tensor_map_get(batch, d->name)) return true;
    return false;
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

static bool is_float(brg_dtype t) { return t == BRG_DTYPE_F32 || t == BRG_DTYPE_F16 || t == BRG_DTYPE_BF16; }

static brg_status floats_to_f32(brg_arena *arena, const brg_tensor *src, const char *name, brg_tensor **out) {
    if (!is_float(src->dtype))
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be a float tensor, not %s", name, brg_dtype_name(src->dtype));
    return to_f32(arena, src, name, out);
}

static brg_status check_batch_rows(const brg_tensor *src, const char *name, int64_t batch) {
    char s[64];
    if (src->ndim < 1 || src->shape[0] != batch)
        return brg_error(BRG_ERR_INVALID_ARG, "%s has shape %s: its first dimension must be the batch (%lld)", name,
                         brg_shape_str(src, s, sizeof s), (long long)batch);
    return BRG_OK;
}

/* Class ids, token labels and answer positions are integers (-100 ignored; the loss checks the
 * upper bound, which depends on the head); regression and multi-label targets are floats. */
static brg_status load_labels(brg_arena *arena, const brg_tensor *src, const char *name, int64_t batch,
                              brg_tensor **out) {
    BRG_TRY(check_batch_rows(src, name, batch));
    if (src->dtype == BRG_DTYPE_I32 || src->dtype == BRG_DTYPE_I64)
        return brg_inputs_to_i32(arena, src, name, 0, INT32_MAX, -100, out);
    if (is_float(src->dtype)) return to_f32(arena, src, name, out);
    return brg_error(BRG_ERR_INVALID_ARG, "%s must be an integer or float tensor, not %s", name, brg_dtype_name(src->dtype));
}

static brg_status load_pixels(brg_arena *arena, const brg_tensor *p, const char *name, brg_tensor **out) {
    char s[64];
    if (p->ndim != 4 || p->shape[0] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be [batch, channels, height, width], got %s", name,
                         brg_shape_str(p, s, sizeof s));
    return floats_to_f32(arena, p, name, out);
}

static brg_status load_floats(brg_arena *arena, const brg_tensor *src, const char *name, int64_t batch,
                              brg_tensor **out) {
    BRG_TRY(check_batch_rows(src, name, batch));
    return floats_to_f32(arena, src, name, out);
}

/* [batch] integers: a class per row (in [0, classes), or -100) or a position (any value). */
static brg_status load_per_row(brg_arena *arena, const brg_tensor *src, const brg_input_decl *d, int64_t batch,
                               brg_tensor **out) {
    char sh[64];
    if (src->ndim != 1 || src->shape[0] != batch)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be [batch] = [%lld], got %s", d->name, (long long)batch,
                         brg_shape_str(src, sh, sizeof sh));
    if (d->kind == BRG_INPUT_CLASSES) return brg_inputs_to_i32(arena, src, d->name, 0, d->classes, -100, out);
    return brg_inputs_to_i32(arena, src, d->name, INT32_MIN, INT32_MAX, INT32_MIN, out);
}

/* The batch's first input: token ids bounded by the model's positions, or pixels. */
static brg_status convert_first(const brg_model *m, brg_arena *arena, const brg_input_decl *d, const brg_tensor *src,
                                brg_tensor **out) {
    if (d->kind == BRG_INPUT_PIXELS) return load_pixels(arena, src, d->name, out);
    if (d->kind == BRG_INPUT_FLOATS) {
        if (src->ndim < 1 || src->shape[0] < 1)
            return brg_error(BRG_ERR_INVALID_ARG, "%s must have at least one row", d->name);
        return load_floats(arena, src, d->name, src->shape[0], out);
    }
    if (d->kind != BRG_INPUT_TOKENS)
        return brg_error(BRG_ERR_INTERNAL, "%s's first input %s must be token ids, pixels or features",
                         m->ops->architecture, d->name);
    BRG_TRY(check_rank(src, d->name, NULL, choices_of(m)));
    if (src->shape[src->ndim - 1] > m->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "%s has %lld positions, the model takes at most %lld", d->name,
                         (long long)src->shape[src->ndim - 1], (long long)m->max_positions);
    return brg_inputs_to_i32(arena, src, d->name, 0, m->vocab_size, 0, out);
}

static brg_status check_like(const brg_tensor *src, const brg_input_decl *d, const brg_tensor_map *converted,
                             bool choices) {
    const brg_tensor *like = d->like ? brg_tensor_map_get(converted, d->like) : NULL;
    if (d->like && !like)
        return brg_error(BRG_ERR_INVALID_ARG, "%s is shaped as %s, which the inputs do not have", d->name, d->like);
    BRG_TRY(check_rank(src, d->name, NULL, choices));
    char a[128], b[128];
    if (like && !brg_tensor_same_shape(src, like))
        return brg_error(BRG_ERR_INVALID_ARG, "%s has shape %s but %s has %s", d->name, brg_shape_str(src, a, sizeof a),
                         d->like, brg_shape_str(like, b, sizeof b));
    return BRG_OK;
}

brg_status brg_input_convert(const brg_model *m, brg_arena *arena, const brg_input_decl *d, const brg_tensor *src,
                             const brg_tensor_map *converted, brg_tensor **out) {
    if (converted->n == 0) return convert_first(m, arena, d, src, out);
    const int64_t batch = brg_tensor_map_rows(converted);
    const bool choices = choices_of(m);
    switch (d->kind) {
    case BRG_INPUT_TOKENS:
        BRG_TRY(check_rank(src, d->name, NULL, choices));
        if (src->shape[0] != batch) return brg_error(BRG_ERR_INVALID_ARG, "%s has a different batch size", d->name);
        return brg_inputs_to_i32(arena, src, d->name, 0, m->vocab_size, 0, out);
    case BRG_INPUT_TYPE_IDS:
        BRG_TRY(check_like(src, d, converted, choices));
        return brg_inputs_to_i32(arena, src, d->name, 0, INT32_MAX, 0, out);
    case BRG_INPUT_MASK:
        BRG_TRY(check_like(src, d, converted, choices));
        return load_mask(arena, src, d->name, out);
    case BRG_INPUT_PIXELS: {
        BRG_TRY(load_pixels(arena, src, d->name, out));
        if ((*out)->shape[0] != batch) return brg_error(BRG_ERR_INVALID_ARG, "%s has a different batch size", d->name);
        return BRG_OK;
    }
    case BRG_INPUT_LABELS: return load_labels(arena, src, d->name, batch, out);
    case BRG_INPUT_FLOATS: return load_floats(arena, src, d->name, batch, out);
    case BRG_INPUT_CLASSES:
    case BRG_INPUT_POSITIONS: return load_per_row(arena, src, d, batch, out);
    }
    return brg_error(BRG_ERR_INTERNAL, "%s declares input %s of an unknown kind %d", m->ops->architecture, d->name,
                     (int)d->kind);
}

static brg_status put_converted(const brg_model *m, brg_arena *arena, const char *name, const brg_tensor *src,
                                brg_tensor_map *inputs) {
    const brg_input_decl *d = brg_model_input(m, name);
    if (!d) return brg_error(BRG_ERR_INTERNAL, "%s takes no %s", m->ops->architecture, name);
    brg_tensor *t;
    BRG_TRY(brg_input_convert(m, arena, d, src, inputs, &t));
    return brg_tensor_map_put(inputs, d->name, t);
}

brg_status brg_inputs_from_tensors(const brg_model *model, brg_arena *arena, const brg_tensor *ids,
                                   const brg_tensor *mask, const brg_tensor *labels, brg_tensor_map *inputs) {
    memset(inputs, 0, sizeof *inputs);
    BRG_TRY(put_converted(model, arena, "input_ids", ids, inputs));
    if (mask) BRG_TRY(put_converted(model, arena, "attention_mask", mask, inputs));
    if (!labels) return BRG_OK;
    /* token labels line up with the tokens */
    if (labels->ndim == 2 && !choices_of(model)) BRG_TRY(check_rank(labels, "labels", ids, false));
    return put_converted(model, arena, "labels", labels, inputs);
}

static brg_status check_names(const brg_model *m, const brg_safetensors *file) {
    for (size_t i = 0; i < brg_safetensors_count(file); i++) {
        const char *name = brg_safetensors_name(file, i);
        if (brg_model_input(m, name)) continue;
        char list[256] = "";
        size_t o = 0;
        for (const brg_input_decl *d = brg_model_inputs(m); d->name && o < sizeof list; d++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", d->name);
        return brg_error(BRG_ERR_INVALID_ARG, "unexpected input tensor '%s' (%s takes: %s)", name, m->ops->architecture,
                         list);
    }
    return BRG_OK;
}

/* An input that only makes sense with another (a decoder mask without decoder ids, half of an
 * answer span). */
static brg_status check_needs(const brg_model *m, const brg_safetensors *file) {
    for (const brg_input_decl *d = brg_model_inputs(m); d->name; d++)
        if (d->needs && brg_safetensors_has(file, d->name) && !brg_safetensors_has(file, d->needs))
            return brg_error(BRG_ERR_INVALID_ARG, "%s needs %s", d->name, d->needs);
    return BRG_OK;
}

brg_status brg_inputs_load(const brg_model *model, brg_arena *arena, const brg_safetensors *file,
                           brg_tensor_map *inputs) {
    memset(inputs, 0, sizeof *inputs);
    BRG_TRY(check_names(model, file));
    const brg_input_decl *first = brg_model_inputs(model);
    if (!brg_safetensors_has(file, first->name))
        return brg_error(BRG_ERR_INVALID_ARG, "the inputs have no '%s' tensor", first->name);
    BRG_TRY(check_needs(model, file));
    for (const brg_input_decl *d = first; d->name; d++) {
        brg_tensor src, *t;
        if (!brg_safetensors_has(file, d->name)) continue;
        BRG_TRY(brg_safetensors_get(file, d->name, &src));
        BRG_TRY(brg_input_convert(model, arena, d, &src, inputs, &t));
        BRG_TRY(brg_tensor_map_put(inputs, d->name, t));
    }
    return BRG_OK;
}
