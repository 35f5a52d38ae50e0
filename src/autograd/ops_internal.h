/* Shared checks for the op wrappers. */
#ifndef BRIGADE_OPS_INTERNAL_H
#define BRIGADE_OPS_INTERNAL_H

#include "brigade/ops.h"
#include "kernels/kernels.h"

/* Fails unless t is a contiguous F32 tensor with at least `min_dims` dimensions. */
brg_status ops_check_f32(const char *op, const brg_tensor *t, int min_dims);
/* Same for I32 index tensors. */
brg_status ops_check_i32(const char *op, const brg_tensor *t);

#define OPS_F32(t) ((float *)(t)->data)
#define OPS_CF32(t) ((const float *)(t)->data)

/* Gradient of an input inside a backward (NULL when it needs none); returns on OOM. */
#define OPS_GRAD(var, tape, t)                           \
    brg_status var##_st_ = BRG_OK;                       \
    float *var = brg_tape_grad((tape), (t), &var##_st_); \
    if (var##_st_ != BRG_OK) return var##_st_

/* The same for a writer that overwrites the whole gradient when `overwrite` comes back true. */
#define OPS_GRAD_FOR_WRITE(var, overwrite, tape, t)                            \
    brg_status var##_st_ = BRG_OK;                                             \
    bool overwrite = false;                                                    \
    float *var = brg_tape_grad_for_write((tape), (t), &overwrite, &var##_st_); \
    if (var##_st_ != BRG_OK) return var##_st_

#endif
