/* Tensor headers, views, dtype conversion. Element access goes through memcpy because tensors
 * viewed inside a mapped safetensors file need not be aligned for their dtype. */
#include "brigade/tensor.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[BRG_DTYPE_COUNT] = {
    [BRG_DTYPE_F32] = {"F32", 4},  [BRG_DTYPE_F16] = {"F16", 2}, [BRG_DTYPE_BF16] = {"BF16", 2},
    [BRG_DTYPE_I32] = {"I32", 4},  [BRG_DTYPE_I64] = {"I64", 8}, [BRG_DTYPE_BOOL] = {"BOOL", 1},
};

size_t brg_dtype_size(brg_dtype dtype) {
    BRG_ASSERT(dtype >= 0 && dtype < BRG_DTYPE_COUNT);
    return dtype_info[dtype].size;
}

bool brg_dtype_is_half(brg_dtype dtype) { return dtype == BRG_DTYPE_F16 || dtype == BRG_DTYPE_BF16; }

const char *brg_dtype_name(brg_dtype dtype) {
    if (dtype < 0 || dtype >= BRG_DTYPE_COUNT) return "?";
    return dtype_info[dtype].name;
}

brg_status brg_dtype_from_name(const char *name, brg_dtype *out) {
    for (int i = 0; i < BRG_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_info[i].name) == 0) {
            *out = (brg_dtype)i;
            return BRG_OK;
        }
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "dtype %s is not supported (use F32, F16, BF16, I32, I64 or BOOL)", name);
}

int64_t brg_tensor_numel(const brg_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t brg_tensor_nbytes(const brg_tensor *t) { return (size_t)brg_tensor_numel(t) * brg_dtype_size(t->dtype); }

static void contiguous_strides(brg_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

bool brg_tensor_is_contiguous(const brg_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

bool brg_tensor_same_shape(const brg_tensor *a, const brg_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

brg_tensor brg_tensor_wrap(brg_dtype dtype, int ndim, const int64_t *shape, void *data) {
    BRG_ASSERT(ndim >= 0 && ndim <= BRG_MAX_DIMS);
    brg_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    contiguous_strides(&t);
    t.data = data;
    return t;
}

static brg_status tensor_new(brg_arena *arena, brg_dtype dtype, int ndim, const int64_t *shape, const char *what,
                             bool zero, brg_tensor **out) {
    if (ndim < 0 || ndim > BRG_MAX_DIMS)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %d dimensions (at most %d)", what, ndim, BRG_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return brg_error(BRG_ERR_INVALID_ARG, "%s: negative dimension %lld", what, (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / shape[i]) return brg_error(BRG_ERR_INVALID_ARG, "%s: shape overflows", what);
        n *= shape[i];
    }
    brg_tensor *t = brg_arena_alloc(arena, sizeof *t, what);
    if (!t) return BRG_ERR_OOM;
    const size_t bytes = (size_t)n * brg_dtype_size(dtype);
    void *data = zero ? brg_arena_alloc(arena, bytes, what) : brg_arena_alloc_uninit(arena, bytes, what);
    if (!data) return BRG_ERR_OOM;
    *t = brg_tensor_wrap(dtype, ndim, shape, data);
    t->name = what;
    *out = t;
    return BRG_OK;
}

brg_status brg_tensor_new(brg_arena *arena, brg_dtype dtype, int ndim, const int64_t *shape, const char *what,
                          brg_tensor **out) {
    return tensor_new(arena, dtype, ndim, shape, what, true, out);
}

brg_status brg_tensor_new_uninit(brg_arena *arena, brg_dtype dtype, int ndim, const int64_t *shape,
                                 const char *what, brg_tensor **out) {
    return tensor_new(arena, dtype, ndim, shape, what, false, out);
}

size_t brg_tensor_grad_bytes(const brg_tensor *t) {
    return (size_t)brg_tensor_numel(t) * brg_dtype_size(t->grad_dtype);
}

brg_status brg_tensor_ensure_grad(brg_arena *arena, brg_tensor *t) {
    if (t->grad) return BRG_OK;
    t->grad = brg_arena_alloc(arena, brg_tensor_grad_bytes(t), t->name ? t->name : "gradient");
    return t->grad ? BRG_OK : BRG_ERR_OOM;
}

void brg_tensor_settle_grad(brg_tensor *t) {
    if (!t->grad_zero_pending) return;
    if (t->grad) memset(t->grad, 0, brg_tensor_grad_bytes(t));
    t->grad_zero_pending = false;
}

brg_status brg_tensor_view_reshape(const brg_tensor *t, int ndim, const int64_t *shape, brg_tensor *out) {
    if (!brg_tensor_is_contiguous(t)) return brg_error(BRG_ERR_INVALID_ARG, "reshape of a non-contiguous tensor");
    if (ndim < 0 || ndim > BRG_MAX_DIMS) return brg_error(BRG_ERR_INVALID_ARG, "reshape to %d dimensions", ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if (n != brg_tensor_numel(t)) {
        char buf[128];
        return brg_error(BRG_ERR_INVALID_ARG, "cannot reshape %s (%lld elements) to %lld elements",
                         brg_shape_str(t, buf, sizeof buf), (long long)brg_tensor_numel(t), (long long)n);
    }
    *out = brg_tensor_wrap(t->dtype, ndim, shape, t->data);
    out->name = t->name;
    return BRG_OK;
}

brg_status brg_tensor_view_transpose(const brg_tensor *t, int d0, int d1, brg_tensor *out) {
    if (d0 < 0 || d1 < 0 || d0 >= t->ndim || d1 >= t->ndim)
        return brg_error(BRG_ERR_INVALID_ARG, "transpose dims %d,%d of a %d-d tensor", d0, d1, t->ndim);
    *out = *t;
    out->grad = NULL;
    out->grad_dtype = BRG_DTYPE_F32;
    out->grad_arena = NULL;
    out->grad_zero_pending = false;
    out->shape[d0] = t->shape[d1];
    out->shape[d1] = t->shape[d0];
    out->stride[d0] = t->stride[d1];
    out->stride[d1] = t->stride[d0];
    return BRG_OK;
}

brg_status brg_tensor_view_slice(const brg_tensor *t, int dim, int64_t start, int64_t len, brg_tensor *out) {
    if (dim < 0 || dim >= t->ndim || start < 0 || len < 0 || start + len > t->shape[dim])
        return brg_error(BRG_ERR_INVALID_ARG, "slice [%lld, %lld) of dim %d out of range", (long long)start,
                         (long long)(start + len), dim);
    *out = *t;
    out->grad = NULL;
    out->grad_dtype = BRG_DTYPE_F32;
    out->grad_arena = NULL;
    out->shape[dim] = len;
    out->data = (char *)t->data + (size_t)(start * t->stride[dim]) * brg_dtype_size(t->dtype);
    return BRG_OK;
}

static int64_t element_offset(const brg_tensor *t, int64_t flat) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t dim = t->shape[i];
        off += (flat % dim) * t->stride[i];
        flat /= dim;
    }
    return off;
}

double brg_tensor_get(const brg_tensor *t, int64_t flat_index) {
    const char *p = (const char *)t->data + element_offset(t, flat_index) * (int64_t)brg_dtype_size(t->dtype);
    switch (t->dtype) {
    case BRG_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case BRG_DTYPE_F16: { uint16_t v; memcpy(&v, p, 2); return brg_f16_to_f32(v); }
    case BRG_DTYPE_BF16: { uint16_t v; memcpy(&v, p, 2); return brg_bf16_to_f32(v); }
    case BRG_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case BRG_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case BRG_DTYPE_BOOL: return *(const unsigned char *)p ? 1.0 : 0.0;
    default: BRG_ASSERT(!"bad dtype");
    }
    return 0;
}

int64_t brg_tensor_get_int(const brg_tensor *t, int64_t flat_index) {
    const char *p = (const char *)t->data + element_offset(t, flat_index) * (int64_t)brg_dtype_size(t->dtype);
    switch (t->dtype) {
    case BRG_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case BRG_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case BRG_DTYPE_BOOL: return *(const unsigned char *)p ? 1 : 0;
    default: BRG_ASSERT(!"brg_tensor_get_int on a float tensor");
    }
    return 0;
}

void brg_tensor_set(brg_tensor *t, int64_t flat_index, double value) {
    char *p = (char *)t->data + element_offset(t, flat_index) * (int64_t)brg_dtype_size(t->dtype);
    switch (t->dtype) {
    case BRG_DTYPE_F32: { float v = (float)value; memcpy(p, &v, 4); break; }
    case BRG_DTYPE_F16: { uint16_t v = brg_f32_to_f16((float)value); memcpy(p, &v, 2); break; }
    case BRG_DTYPE_BF16: { uint16_t v = brg_f32_to_bf16((float)value); memcpy(p, &v, 2); break; }
    case BRG_DTYPE_I32: { int32_t v = (int32_t)value; memcpy(p, &v, 4); break; }
    case BRG_DTYPE_I64: { int64_t v = (int64_t)value; memcpy(p, &v, 8); break; }
    case BRG_DTYPE_BOOL: *(unsigned char *)p = value != 0; break;
    default: BRG_ASSERT(!"bad dtype");
    }
}

brg_status brg_tensor_copy(brg_tensor *dst, const brg_tensor *src) {
    if (!brg_tensor_same_shape(dst, src)) {
        char a[128], b[128];
        return brg_error(BRG_ERR_INVALID_ARG, "copy between shapes %s and %s", brg_shape_str(dst, a, sizeof a),
                         brg_shape_str(src, b, sizeof b));
    }
    int64_t n = brg_tensor_numel(src);
    if (dst->dtype == src->dtype && brg_tensor_is_contiguous(dst) && brg_tensor_is_contiguous(src)) {
        memcpy(dst->data, src->data, brg_tensor_nbytes(src));
        return BRG_OK;
    }
    /* Integers go through int64 so that large ids survive; floats through double. */
    bool ints = (src->dtype == BRG_DTYPE_I64 || src->dtype == BRG_DTYPE_I32) &&
                (dst->dtype == BRG_DTYPE_I64 || dst->dtype == BRG_DTYPE_I32);
    for (int64_t i = 0; i < n; i++) {
        if (ints && dst->dtype == BRG_DTYPE_I64) {
            int64_t v = brg_tensor_get_int(src, i);
            memcpy((char *)dst->data + element_offset(dst, i) * 8, &v, 8);
        } else {
            brg_tensor_set(dst, i, brg_tensor_get(src, i));
        }
    }
    return BRG_OK;
}

const char *brg_shape_str(const brg_tensor *t, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < t->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float brg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    /* inf, or nan made quiet (as VCVTPH2PS and any fp32 arithmetic would) */
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t brg_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf or nan (keep nan quiet) */
        return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504: inf */
    if (abs < 0x38800000u) {
        /* result is subnormal or zero: scale into the subnormal grid and round to nearest even */
        float a = bits_f32(abs);
        float scaled = a * 0x1p24f;             /* exact */
        uint32_t r = (uint32_t)nearbyintf(scaled); /* default rounding mode: nearest even */
        return (uint16_t)(sign | r);
    }
    uint32_t mant_round = abs + 0xfffu + ((abs >> 13) & 1u); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | (((mant_round >> 13) - (112u << 10)) & 0x7fff));
}

float brg_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t brg_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
