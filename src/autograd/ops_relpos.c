/* Relative position attention bias (T5): the bucket table of query-key distances, and the
 * bias gathered from a [num_buckets, heads] table by it. */
#include "ops_cost.h"
#include "ops_internal.h"

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
    ops_k(tape)->relative_position_buckets((*buckets)->data, Tq, Tk, bidirectional, num_buckets, max_distance);
    return BRG_OK;
}

typedef struct relpos_ctx {
    brg_tensor *table, *buckets, *y;
} relpos_ctx;

static brg_status relpos_backward(brg_tape *tape, void *p) {
    relpos_ctx *c = p;
    if (!c->y->grad) return BRG_OK;
    OPS_GRAD(dt, tape, c->table);
    ops_k(tape)->relpos_bias_bwd(dt, ops_dy(tape, c->y), c->buckets->data, c->table->shape[1], c->buckets->shape[0],
                          c->buckets->shape[1]);
    return BRG_OK;
}

brg_status brg_relative_position_bias(brg_tape *tape, brg_tensor *table, brg_tensor *buckets, brg_tensor **bias) {
    BRG_TRY(ops_check_float("relative_position_bias", table, 2));
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
    BRG_TRY(ops_new(tape, 3, shape, rec, "relative position bias", bias));
    float *out = ops_write(*bias, 1);
    ops_k(tape)->relpos_bias_fwd(out, ops_read(tape, table, 0), bk, H, Tq, Tk);
    ops_store(tape, *bias, out);
    if (!rec) return BRG_OK;
    return OPS_RECORD(tape, relpos_backward, relpos_ctx, table, buckets, *bias);
}

void ops_cost_relative_position_buckets(ops_cost *c, double Tq, double Tk) {
    ops_cost_tensor(c, Tq * Tk, sizeof(int32_t), false);
}

void ops_cost_relative_position_bias(ops_cost *c, double H, double Tq, double Tk) {
    ops_cost_tensor(c, H * Tq * Tk, ops_cost_act(c), true);
    ops_cost_context(c, sizeof(relpos_ctx));
    /* the output in slot 1; the table's few rows ([num_buckets, H]) in slot 0, which a linear's
     * input rows already fill */
    ops_cost_stage(c, 1, H * Tq * Tk);
    /* the attention that adds this bias widens it into staging slot 4 (ops_attention.c) */
    ops_cost_stage(c, 4, H * Tq * Tk);
    ops_cost_grad_stage(c, 3, H * Tq * Tk); /* the attention's backward adds into its gradient */
}
