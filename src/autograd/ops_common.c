#include "ops_internal.h"

brg_status ops_check_f32(const char *op, const brg_tensor *t, int min_dims) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "%s: missing input", op);
    if (t->dtype != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s is %s, expected F32", op, t->name ? t->name : "input",
                         brg_dtype_name(t->dtype));
    if (!brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s is not contiguous", op, t->name ? t->name : "input");
    if (t->ndim < min_dims)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s has %d dims, expected at least %d", op,
                         t->name ? t->name : "input", t->ndim, min_dims);
    return BRG_OK;
}

brg_status ops_check_i32(const char *op, const brg_tensor *t) {
    if (!t) return brg_error(BRG_ERR_INVALID_ARG, "%s: missing index input", op);
    if (t->dtype != BRG_DTYPE_I32 || !brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: indices must be contiguous I32 (got %s)", op,
                         brg_dtype_name(t->dtype));
    return BRG_OK;
}
