/* Reads forward inputs. Checks happen here, before any compute, so bad input never reaches a
 * kernel: ids are range-checked while still 64-bit (no silent truncation to int32). */
#include "brigade/inputs.h"

#include <string.h>

static const char *const accepted[] = {"input_ids", "attention_mask", "labels"};

static void format_index(const brg_tensor *t, int64_t flat, char *buf, size_t len) {
    size_t o = 0;
    int64_t idx[BRG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = flat % t->shape[d];
        flat /= t->shape[d];
    }
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

static brg_status check_2d(const brg_tensor *t, const char *name, const brg_tensor *like) {
    char a[128], b[128];
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "%s must be [batch, sequence] with both at least 1, got %s", name,
                         brg_shape_str(t, a, sizeof a));
    if (like && !brg_tensor_same_shape(t, like))
        return brg_error(BRG_ERR_INVALID_ARG, "%s has shape %s but input_ids has %s", name,
                         brg_shape_str(t, a, sizeof a), brg_shape_str(like, b, sizeof b));
    return BRG_OK;
}

static brg_status load_mask(brg_arena *arena, const brg_tensor *src, brg_tensor **out) {
    BRG_TRY(brg_tensor_new(arena, BRG_DTYPE_F32, 2, src->shape, "attention_mask", out));
    float *dst = (*out)->data;
    int64_t n = brg_tensor_numel(src);
    for (int64_t i = 0; i < n; i++) {
        double v = brg_tensor_get(src, i);
        if (v != 0.0 && v != 1.0) {
            char where[64];
            format_index(src, i, where, sizeof where);
            return brg_error(BRG_ERR_INVALID_ARG, "attention_mask%s = %g: values must be 0 or 1", where, v);
        }
        dst[i] = (float)v;
    }
    return BRG_OK;
}

static brg_status check_names(const brg_safetensors *file) {
    for (size_t i = 0; i < brg_safetensors_count(file); i++) {
        const char *name = brg_safetensors_name(file, i);
        bool ok = false;
        for (size_t k = 0; k < sizeof accepted / sizeof accepted[0]; k++) ok |= strcmp(name, accepted[k]) == 0;
        if (!ok)
            return brg_error(BRG_ERR_INVALID_ARG, "unexpected input tensor '%s' (accepted: input_ids, attention_mask, labels)",
                             name);
    }
    return BRG_OK;
}

brg_status brg_inputs_from_tensors(const brg_model *model, brg_arena *arena, const brg_tensor *ids,
                                   const brg_tensor *mask, const brg_tensor *labels, brg_bundle *b) {
    memset(b, 0, sizeof *b);
    BRG_TRY(check_2d(ids, "input_ids", NULL));
    if (ids->shape[1] > model->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "input_ids has %lld positions, the model takes at most %lld",
                         (long long)ids->shape[1], (long long)model->max_positions);
    BRG_TRY(brg_inputs_to_i32(arena, ids, "input_ids", 0, model->vocab_size, 0, &b->input_ids));
    if (mask) {
        BRG_TRY(check_2d(mask, "attention_mask", ids));
        BRG_TRY(load_mask(arena, mask, &b->attention_mask));
    }
    if (labels) {
        BRG_TRY(check_2d(labels, "labels", ids));
        BRG_TRY(brg_inputs_to_i32(arena, labels, "labels", 0, model->vocab_size, -100, &b->labels));
    }
    return BRG_OK;
}

brg_status brg_inputs_load(const brg_model *model, brg_arena *arena, const brg_safetensors *file, brg_bundle *b) {
    BRG_TRY(check_names(file));
    if (!brg_safetensors_has(file, "input_ids"))
        return brg_error(BRG_ERR_INVALID_ARG, "the inputs have no 'input_ids' tensor");
    brg_tensor ids, mask, labels;
    BRG_TRY(brg_safetensors_get(file, "input_ids", &ids));
    bool has_mask = brg_safetensors_has(file, "attention_mask"), has_labels = brg_safetensors_has(file, "labels");
    if (has_mask) BRG_TRY(brg_safetensors_get(file, "attention_mask", &mask));
    if (has_labels) BRG_TRY(brg_safetensors_get(file, "labels", &labels));
    return brg_inputs_from_tensors(model, arena, &ids, has_mask ? &mask : NULL, has_labels ? &labels : NULL, b);
}
