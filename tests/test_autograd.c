/* The tape end to end: a small graph of every op, backward against central finite differences
 * of the same graph, plus the tape's bookkeeping (grad mode, clearing, seeding). */
#include "brigade/rng.h"
#include "test_util.h"

typedef struct graph {
    brg_tensor *x, *w1, *b1, *g, *beta, *w2, *bias, *mask, *targets;
} graph;

static brg_tensor *param(brg_arena *a, brg_rng *rng, int nd, const int64_t *shape, float scale, float offset) {
    brg_tensor *t;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, nd, shape, "param", &t));
    for (int64_t i = 0; i < brg_tensor_numel(t); i++)
        ((float *)t->data)[i] = offset + scale * (float)brg_rng_normal(rng);
    CHECK_OK(brg_tensor_ensure_grad(a, t));
    t->requires_grad = true;
    return t;
}

enum { B = 2, T = 5, C = 8, H = 2, D = 3, V = 7 };

static void build(brg_arena *a, graph *gr) {
    brg_rng rng;
    brg_rng_seed(&rng, 11);
    gr->x = param(a, &rng, 3, (int64_t[]){B, T, C}, 1.0f, 0.0f);
    gr->w1 = param(a, &rng, 2, (int64_t[]){C, 3 * H * D}, 0.5f, 0.0f);
    gr->b1 = param(a, &rng, 1, (int64_t[]){3 * H * D}, 0.1f, 0.0f);
    gr->g = param(a, &rng, 1, (int64_t[]){C}, 0.2f, 1.0f);
    gr->beta = param(a, &rng, 1, (int64_t[]){C}, 0.2f, 0.0f);
    gr->w2 = param(a, &rng, 2, (int64_t[]){V, H * D}, 0.5f, 0.0f);
    gr->bias = param(a, &rng, 3, (int64_t[]){H, T, T}, 0.3f, 0.0f);
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, (int64_t[]){B, T}, "mask", &gr->mask));
    float *m = gr->mask->data;
    for (int i = 0; i < B * T; i++) m[i] = (i == B * T - 1 || i == B * T - 2) ? 0.0f : 1.0f;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, 2, (int64_t[]){B, T}, "targets", &gr->targets));
    int32_t *t = gr->targets->data;
    for (int i = 0; i < B * T; i++) t[i] = (i % 4 == 3) ? -100 : (int32_t)((i * 5) % V);
}

/* loss = CE(linear(merge(attn(split(gelu(linear(layernorm(x)))))))) */
static brg_tensor *forward(brg_tape *tape, graph *gr) {
    brg_tensor *n, *h, *a, *q, *k, *v, *att, *m, *logits, *r, *loss, *sum;
    CHECK_OK(brg_layer_norm(tape, gr->x, gr->g, gr->beta, 1e-5f, &n));
    CHECK_OK(brg_linear(tape, n, gr->w1, gr->b1, true, &h));
    CHECK_OK(brg_activation_op(tape, h, BRG_ACT_GELU_TANH, &a));
    CHECK_OK(brg_split_heads(tape, a, 0, H, D, &q));
    CHECK_OK(brg_split_heads(tape, a, H * D, H, D, &k));
    CHECK_OK(brg_split_heads(tape, a, 2 * H * D, H, D, &v));
    brg_attention_opts o = {.scale = 0.7f, .causal = true, .key_mask = gr->mask, .bias = gr->bias};
    CHECK_OK(brg_attention(tape, q, k, v, &o, &att));
    CHECK_OK(brg_merge_heads(tape, att, &m));
    CHECK_OK(brg_reshape(tape, m, 2, (int64_t[]){B * T, H * D}, &r));
    CHECK_OK(brg_add(tape, r, r, &sum));
    CHECK_OK(brg_linear(tape, sum, gr->w2, NULL, false, &logits));
    CHECK_OK(brg_cross_entropy(tape, logits, gr->targets, -100, &loss));
    return loss;
}

static brg_tensor *graph_loss(brg_tape *tape, void *gr) { return forward(tape, gr); }

static void check_param(brg_arena *a, graph *gr, brg_tensor *p, const char *what) {
    test_graph_gradcheck(a, graph_loss, gr, p, what, 2e-3);
}

static void test_graph_gradients(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    graph gr;
    build(a, &gr);
    size_t mark = brg_arena_mark(a);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *loss = forward(tape, &gr);
    CHECK(brg_tape_size(tape) == 12);
    CHECK_OK(brg_tape_backward(tape, loss));
    brg_tape_destroy(tape);
    brg_arena_reset(a, mark);
    check_param(a, &gr, gr.x, "x");
    check_param(a, &gr, gr.w1, "w1");
    check_param(a, &gr, gr.b1, "b1");
    check_param(a, &gr, gr.g, "layer norm weight");
    check_param(a, &gr, gr.beta, "layer norm bias");
    check_param(a, &gr, gr.w2, "w2");
    check_param(a, &gr, gr.bias, "attention bias");
    brg_arena_destroy(a);
}

static void test_grad_mode_and_seeding(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    brg_tensor *x = param(a, &rng, 2, (int64_t[]){3, 4}, 1.0f, 0.0f);
    brg_tensor *w = param(a, &rng, 2, (int64_t[]){4, 2}, 1.0f, 0.0f);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    brg_tensor *y;
    CHECK_OK(brg_linear(tape, x, w, NULL, true, &y));
    CHECK(brg_tape_size(tape) == 0 && !y->requires_grad);
    brg_tape_set_grad_enabled(tape, true);
    CHECK_OK(brg_linear(tape, x, w, NULL, true, &y));
    CHECK(brg_tape_size(tape) == 1 && y->requires_grad);
    /* backward_from with dy = 1 everywhere: dW[i][j] = sum_n x[n][i] */
    float ones[6] = {1, 1, 1, 1, 1, 1};
    CHECK_OK(brg_tape_backward_from(tape, y, ones));
    const float *xd = x->data;
    for (int i = 0; i < 4; i++) {
        double s = xd[i] + xd[4 + i] + xd[8 + i];
        CHECK_NEAR(w->grad[i * 2], s, 1e-5);
        CHECK_NEAR(w->grad[i * 2 + 1], s, 1e-5);
    }
    CHECK_ERR(brg_tape_backward(tape, y), BRG_ERR_INVALID_ARG, "scalar");
    /* A second micro-batch on a cleared tape accumulates into the parameter gradients. */
    brg_tape_clear(tape);
    CHECK(brg_tape_size(tape) == 0);
    CHECK_OK(brg_linear(tape, x, w, NULL, true, &y));
    CHECK_OK(brg_tape_backward_from(tape, y, ones));
    CHECK_NEAR(w->grad[0], 2 * (xd[0] + xd[4] + xd[8]), 1e-5);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

static void test_op_errors(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *x, *w, *ids, *y;
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, (int64_t[]){2, 3}, "x", &x));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, (int64_t[]){4, 5}, "w", &w));
    CHECK_ERR(brg_linear(tape, x, w, NULL, true, &y), BRG_ERR_INVALID_ARG, "does not match");
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, 1, (int64_t[]){2}, "ids", &ids));
    ((int32_t *)ids->data)[1] = 4;
    CHECK_ERR(brg_embedding(tape, ids, w, &y), BRG_ERR_INVALID_ARG, "token id 4 at position 1 is out of range");
    ((int32_t *)ids->data)[1] = 7;
    CHECK_ERR(brg_cross_entropy(tape, x, ids, -100, &y), BRG_ERR_INVALID_ARG, "label 7 at position 1");
    CHECK_ERR(brg_add(tape, x, w, &y), BRG_ERR_INVALID_ARG, "shapes [2, 3] and [4, 5] differ");
    CHECK_ERR(brg_dropout(tape, x, 1.5f, true, 0, 0, &y), BRG_ERR_INVALID_ARG, "dropout probability");
    /* float inputs are F32, F16 or BF16 */
    CHECK_ERR(brg_softmax(tape, ids, &y), BRG_ERR_INVALID_ARG, "softmax: ids is I32, expected F32, F16 or BF16");
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

/* One configuration of brg_linear_act against brg_linear + brg_activation_op: the output and
 * every gradient must be the same bits (the fused passes do the same arithmetic in the same
 * order); the separate ops are themselves checked against finite differences above. */
static void linear_act_case(brg_arena *a, brg_activation act, bool w_in_out, bool with_bias) {
    brg_rng rng;
    brg_rng_seed(&rng, 5 + (uint64_t)act * 4 + (uint64_t)w_in_out * 2 + (uint64_t)with_bias);
    const int64_t out = 37; /* leaves a tail in every 16-wide step */
    brg_tensor *x = param(a, &rng, 3, (int64_t[]){B, T, C}, 1.5f, 0.0f);
    brg_tensor *w = param(a, &rng, 2, w_in_out ? (int64_t[]){C, out} : (int64_t[]){out, C}, 0.7f, 0.0f);
    brg_tensor *b = with_bias ? param(a, &rng, 1, (int64_t[]){out}, 0.5f, 0.0f) : NULL;
    float *seed = malloc((size_t)(B * T * out) * sizeof *seed);
    for (int64_t i = 0; i < B * T * out; i++) seed[i] = (float)brg_rng_normal(&rng);
    brg_tensor *params[3] = {x, w, b};
    float *want[4] = {0};
    for (int fused = 0; fused < 2; fused++) {
        for (int p = 0; p < 3; p++)
            if (params[p]) memset(params[p]->grad, 0, brg_tensor_nbytes(params[p]));
        size_t mark = brg_arena_mark(a);
        brg_tape *tape;
        CHECK_OK(brg_tape_create(a, &tape));
        brg_tensor *y = NULL, *h = NULL;
        if (fused) CHECK_OK(brg_linear_act(tape, x, w, b, w_in_out, act, &y));
        else {
            CHECK_OK(brg_linear(tape, x, w, b, w_in_out, &h));
            if (h) CHECK_OK(brg_activation_op(tape, h, act, &y));
        }
        const float *seeds[1] = {seed};
        if (y) CHECK_OK(brg_tape_backward_multi(tape, &y, seeds, 1));
        const float *got[4] = {y ? y->data : NULL, x->grad, w->grad, b ? b->grad : NULL};
        const int64_t sizes[4] = {B * T * out, B * T * C, C * out, out};
        for (int k = 0; k < 4; k++) {
            if (!got[k]) continue;
            if (!fused) {
                want[k] = malloc((size_t)sizes[k] * sizeof(float));
                memcpy(want[k], got[k], (size_t)sizes[k] * sizeof(float));
            } else {
                CHECK_MSG(want[k] && memcmp(want[k], got[k], (size_t)sizes[k] * sizeof(float)) == 0,
                          "linear_act act=%d w_in_out=%d bias=%d: %s differs from the separate ops", (int)act,
                          w_in_out, with_bias, (const char *[]){"output", "dx", "dw", "db"}[k]);
            }
        }
        brg_tape_destroy(tape);
        brg_arena_reset(a, mark);
    }
    for (int k = 0; k < 4; k++) free(want[k]);
    free(seed);
}

static void test_linear_act(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    for (int act = 0; act < 2; act++)
        for (int layout = 0; layout < 2; layout++)
            for (int bias = 0; bias < 2; bias++) linear_act_case(a, (brg_activation)act, layout, bias);
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    brg_tensor *x = param(a, &rng, 2, (int64_t[]){2, 4}, 1.0f, 0.0f), *w = param(a, &rng, 2, (int64_t[]){4, 3}, 1.0f, 0.0f);
    brg_tape *tape;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *y = NULL;
    CHECK_ERR(brg_linear_act(tape, x, w, NULL, true, (brg_activation)9, &y), BRG_ERR_INVALID_ARG, "unknown activation 9");
    CHECK_ERR(brg_linear_act(tape, x, w, NULL, false, BRG_ACT_GELU_TANH, &y), BRG_ERR_INVALID_ARG, "input width 4");
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

int main(void) {
    test_graph_gradients();
    test_linear_act();
    test_grad_mode_and_seeding();
    test_op_errors();
    return test_finish();
}
