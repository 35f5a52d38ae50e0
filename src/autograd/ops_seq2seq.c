/* Ops of the encoder-decoder models (T5): RMS norm, ReLU, elementwise product, relative position
 * buckets and bias. */
#include "ops_cost.h"
#include "ops_internal.h"

static brg_status new_like(brg_tape *tape, const brg_tensor *x, bool rec, const char *what, brg_tensor **y) {
    return brg_tape_new_tensor(tape, BRG_DTYPE_F32, x->ndim, x->shape, rec, what, y);
}

/* ---- RMS norm ---- */
typedef struct rms_norm_ctx {
    brg_tensor *x, *w, *y;
    float *rstd;
    int64_t n, c;
} rms_norm_ctx;

static brg_status rms_norm_backward(brg_tape *tape, void *p) {
    rms_norm_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    OPS_GRAD(dw, tape, c->w);
    brg_k_rmsnorm_bwd(dx, dw, c->y->grad, OPS_CF32(c->x), OPS_CF32(c->w), c->rstd, c->n, c->c);
    return BRG_OK;
}

brg_status brg_rms_norm(brg_tape *tape, brg_tensor *x, brg_tensor *weight, float eps, brg_tensor **y) {
    BRG_TRY(ops_check_f32("rms_norm", x, 1));
    BRG_TRY(ops_check_f32("rms_norm", weight, 1));
    int64_t c = x->shape[x->ndim - 1], n = c ? brg_tensor_numel(x) / c : 0;
    if (weight->ndim != 1 || weight->shape[0] != c)
        return brg_error(BRG_ERR_INVALID_ARG, "rms_norm: weight %s has %lld entries, the input's width is %lld",
                         weight->name ? weight->name : "", (long long)brg_tensor_numel(weight), (long long)c);
    if (!(eps >= 0.0f)) return brg_error(BRG_ERR_INVALID_ARG, "rms_norm: epsilon %g must be >= 0", eps);
    const brg_tensor *ins[2] = {x, weight};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(new_like(tape, x, rec, "rms_norm output", y));
    float *rstd = brg_arena_alloc(brg_tape_arena(tape), (size_t)(n ? n : 1) * sizeof(float), "rms_norm statistics");
    if (!rstd) return BRG_ERR_OOM;
    brg_k_rmsnorm_fwd(OPS_F32(*y), rstd, OPS_CF32(x), OPS_CF32(weight), n, c, eps);
    if (!rec) return BRG_OK;
    rms_norm_ctx *ctx = brg_tape_record(tape, rms_norm_backward, sizeof *ctx);
    if (!ctx) return BRG_ERR_OOM;
    *ctx = (rms_norm_ctx){x, weight, *y, rstd, n, c};
    return BRG_OK;
}

/* ---- ReLU ---- */
typedef struct unary_ctx {
    brg_tensor *x, *y;
    float s;
} unary_ctx;

static brg_status relu_backward(brg_tape *tape, void *p) {
    unary_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dx, tape, c->x);
    brg_k_relu_bwd(dx, c->y->grad, OPS_CF32(c->x), brg_tensor_numel(c->x));
    return BRG_OK;
}

brg_status brg_relu(brg_tape *tape, brg_tensor *x, brg_tensor **y) {
    BRG_TRY(ops_check_f32("relu", x, 0));
    const brg_tensor *ins[1] = {x};
    bool rec = brg_tape_needs(tape, ins, 1);
    BRG_TRY(new_like(tape, x, rec, "relu output", y));
    brg_k_relu_fwd(OPS_F32(*y), OPS_CF32(x), brg_tensor_numel(x));
    if (!rec) return BRG_OK;
    unary_ctx *c = brg_tape_record(tape, relu_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (unary_ctx){x, *y, 0.0f};
    return BRG_OK;
}

/* ---- product ---- */
typedef struct mul_ctx {
    brg_tensor *a, *b, *y;
} mul_ctx;

static brg_status mul_backward(brg_tape *tape, void *p) {
    mul_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(da, tape, c->a);
    OPS_GRAD(db, tape, c->b);
    brg_k_mul_bwd(da, db, c->y->grad, OPS_CF32(c->a), OPS_CF32(c->b), brg_tensor_numel(c->y));
    return BRG_OK;
}

brg_status brg_mul(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y) {
    BRG_TRY(ops_check_f32("mul", a, 0));
    BRG_TRY(ops_check_f32("mul", b, 0));
    if (!brg_tensor_same_shape(a, b)) {
        char sa[128], sb[128];
        return brg_error(BRG_ERR_INVALID_ARG, "mul: shapes %s and %s differ", brg_shape_str(a, sa, sizeof sa),
                         brg_shape_str(b, sb, sizeof sb));
    }
    const brg_tensor *ins[2] = {a, b};
    bool rec = brg_tape_needs(tape, ins, 2);
    BRG_TRY(new_like(tape, a, rec, "mul output", y));
    brg_k_mul_fwd(OPS_F32(*y), OPS_CF32(a), OPS_CF32(b), brg_tensor_numel(a));
    if (!rec) return BRG_OK;
    mul_ctx *c = brg_tape_record(tape, mul_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (mul_ctx){a, b, *y};
    return BRG_OK;
}

/* ---- relative position buckets and bias ---- */

brg_status brg_relative_position_buckets(brg_tape *tape, int64_t Tq, int64_t Tk, bool bidirectional,
                                         int64_t num_buckets, int64_t max_distance, brg_tensor **buckets) {
    if (Tq < 0 || Tk < 0) return brg_error(BRG_ERR_INVALID_ARG, "relative_position_buckets: negative length");
    if (num_buckets < 4 || num_buckets > INT32_MAX || max_distance <= num_buckets / 2)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "relative_position_buckets: relative_attention_num_buckets (%lld) must be at least 4 and "
                         "relative_attention_max_distance (%lld) greater than half of it",
                         (long long)num_buckets, (long long)max_distance);
    int64_t shape[2] = {Tq, Tk};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 2, shape, false, "relative position buckets", buckets));
    brg_k_relative_position_buckets((*buckets)->data, Tq, Tk, bidirectional, num_buckets, max_distance);
    return BRG_OK;
}

typedef struct relpos_ctx {
    brg_tensor *table, *buckets, *y;
} relpos_ctx;

static brg_status relpos_backward(brg_tape *tape, void *p) {
    relpos_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->table);
    brg_k_relpos_bias_bwd(dt, c->y->grad, c->buckets->data, c->table->shape[1], c->buckets->shape[0],
                          c->buckets->shape[1]);
    return BRG_OK;
}

brg_status brg_relative_position_bias(brg_tape *tape, brg_tensor *table, brg_tensor *buckets, brg_tensor **bias) {
    BRG_TRY(ops_check_f32("relative_position_bias", table, 2));
    BRG_TRY(ops_check_i32("relative_position_bias", buckets));
    if (table->ndim != 2 || buckets->ndim != 2)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "relative_position_bias: table must be [buckets, heads] and buckets [Tq, Tk]");
    const int32_t *bk = buckets->data;
    for (int64_t i = 0; i < brg_tensor_numel(buckets); i++)
        if (bk[i] < 0 || bk[i] >= table->shape[0])
            return brg_error(BRG_ERR_INVALID_ARG, "relative_position_bias: bucket %d outside %s's %lld rows", bk[i],
                             table->name ? table->name : "the table", (long long)table->shape[0]);
    const brg_tensor *ins[1] = {table};
    bool rec = brg_tape_needs(tape, ins, 1);
    int64_t H = table->shape[1], Tq = buckets->shape[0], Tk = buckets->shape[1], shape[3] = {H, Tq, Tk};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 3, shape, rec, "relative position bias", bias));
    brg_k_relpos_bias_fwd(OPS_F32(*bias), OPS_CF32(table), bk, H, Tq, Tk);
    if (!rec) return BRG_OK;
    relpos_ctx *c = brg_tape_record(tape, relpos_backward, sizeof *c);
    if (!c) return BRG_ERR_OOM;
    *c = (relpos_ctx){table, buckets, *bias};
    return BRG_OK;
}

/* ---- memory plans ---- */

void ops_cost_rms_norm(ops_cost *c, double rows, double width) {
    ops_cost_tensor(c, rows * width, sizeof(float), true);
    c->fwd += ops_cost_align((rows < 1 ? 1 : rows) * sizeof(float)); /* rstd */
    ops_cost_context(c, sizeof(rms_norm_ctx));
}

void ops_cost_relu(ops_cost *c, double n) {
    ops_cost_tensor(c, n, sizeof(float), true);
    ops_cost_context(c, sizeof(unary_ctx));
}

void ops_cost_mul(ops_cost *c, double n) {
    ops_cost_tensor(c, n, sizeof(float), true);
    ops_cost_context(c, sizeof(mul_ctx));
}

void ops_cost_relative_position_buckets(ops_cost *c, double Tq, double Tk) {
    ops_cost_tensor(c, Tq * Tk, sizeof(int32_t), false);
}

void ops_cost_relative_position_bias(ops_cost *c, double H, double Tq, double Tk) {
    ops_cost_tensor(c, H * Tq * Tk, sizeof(float), true);
    ops_cost_context(c, sizeof(relpos_ctx));
}
