/* How much of the arena a backward holds: the gradients a tape's replay allocates for its own
 * outputs are released when the replay ends, those of its inputs stay (moved down, values kept).
 * A chain of N blocks, one tape each as a device runs a model, then adds one input gradient per
 * block to the arena's peak, not all of every block's gradients; the gradients are bit for bit
 * those of the whole chain recorded on one tape. An op's output can also go over a donated input's
 * buffer (brg_tape_donate), and a loss's input gradient over donated logits when backward spends
 * the tape's outputs (brg_tape_set_outputs_spent). Measured through the arena's own counters. */
#include <string.h>

#include "test_util.h"

enum { N_MAX = 8, WIDTH = 1000 };

/* The arena's rounding of one gradient of WIDTH floats. */
static size_t grad_size(void) {
    size_t bytes = WIDTH * sizeof(float);
    return (bytes + BRG_ARENA_ALIGN - 1) / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN;
}

/* Block k: out = x + 0.5 x (a scale and a residual add), recorded on `tape`. */
static brg_tensor *block(brg_tape *tape, brg_tensor *x) {
    brg_tensor *h = NULL, *out = NULL;
    CHECK_OK(brg_scale(tape, x, 0.5f, &h));
    if (h) CHECK_OK(brg_add(tape, h, x, &out));
    return out;
}

typedef struct chain {
    brg_arena *arena;
    brg_tensor *x0;          /* the leaf */
    brg_tensor *out[N_MAX];  /* each block's output */
    brg_tape *tapes[N_MAX];
    size_t forward_used;     /* the arena after the forward */
} chain;

/* N blocks on N tapes (or all on one when `one_tape`) over one arena. */
static void chain_forward(chain *c, int n, bool one_tape) {
    memset(c, 0, sizeof *c);
    CHECK_OK(brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &c->arena));
    int64_t shape[1] = {WIDTH};
    CHECK_OK(brg_tensor_new(c->arena, BRG_DTYPE_F32, 1, shape, "x0", &c->x0));
    for (int i = 0; i < WIDTH; i++) ((float *)c->x0->data)[i] = (float)(i % 7) - 3.0f;
    c->x0->requires_grad = true;
    brg_tensor *x = c->x0;
    for (int k = 0; k < n; k++) {
        if (!one_tape || k == 0) CHECK_OK(brg_tape_create(c->arena, &c->tapes[k]));
        x = c->out[k] = block(c->tapes[one_tape ? 0 : k], x);
    }
    c->forward_used = brg_arena_used(c->arena);
}

/* Seeds the last output with ones and replays the tapes from the last to the first. */
static void chain_backward(chain *c, int n, bool one_tape) {
    static float ones[WIDTH];
    for (int i = 0; i < WIDTH; i++) ones[i] = 1.0f;
    int top = one_tape ? 0 : n - 1;
    CHECK_OK(brg_tape_backward_from(c->tapes[top], c->out[n - 1], ones));
    for (int k = top - 1; k >= 0; k--) CHECK_OK(brg_tape_backward_multi(c->tapes[k], NULL, NULL, 0));
}

static void chain_free(chain *c) {
    for (int k = 0; k < N_MAX; k++) brg_tape_destroy(c->tapes[k]);
    brg_arena_destroy(c->arena);
}

/* The backward's share of the peak: the seed, the input gradient each block hands down, and the
 * lowest block's two fresh gradients at once, whatever N. */
static void test_peak_bounded(void) {
    const size_t g = grad_size();
    for (int n = 1; n <= N_MAX; n++) {
        chain c;
        chain_forward(&c, n, false);
        chain_backward(&c, n, false);
        size_t extra = brg_arena_peak(c.arena) - c.forward_used;
        CHECK_MSG(extra == (size_t)(n + 2) * g, "%d blocks: backward took %zu bytes past the forward, expected %zu",
                  n, extra, (size_t)(n + 2) * g);
        /* what stays: the seed and every block's input gradient */
        CHECK_MSG(brg_arena_used(c.arena) == c.forward_used + (size_t)(n + 1) * g, "%d blocks: %zu bytes left in use",
                  n, brg_arena_used(c.arena) - c.forward_used);
        chain_free(&c);
    }
}

/* The same numbers as one tape holding the whole chain, exact: d out / d x0 = 1.5^n. */
static void test_same_gradients(void) {
    const int n = N_MAX;
    chain split, whole;
    chain_forward(&split, n, false);
    chain_backward(&split, n, false);
    chain_forward(&whole, n, true);
    chain_backward(&whole, n, true);
    CHECK(split.x0->grad && whole.x0->grad);
    if (split.x0->grad && whole.x0->grad) {
        CHECK(memcmp(split.x0->grad, whole.x0->grad, WIDTH * sizeof(float)) == 0);
        float expect = 1.0f;
        for (int k = 0; k < n; k++) expect *= 1.5f;
        int wrong = 0;
        for (int i = 0; i < WIDTH; i++) wrong += split.x0->grad[i] != expect;
        CHECK_MSG(wrong == 0, "%d of %d input gradients differ from %g", wrong, WIDTH, (double)expect);
    }
    /* each block's input gradient is kept (the one below reads it), the block's own others not */
    for (int k = 0; k + 1 < n; k++) CHECK(split.out[k]->grad != NULL);
    /* one tape: only the seed and the leaf's gradient are left past the forward */
    CHECK(brg_arena_used(whole.arena) == whole.forward_used + 2 * grad_size());
    for (int k = 0; k + 1 < n; k++) CHECK(whole.out[k]->grad == NULL);
    chain_free(&split);
    chain_free(&whole);
}

/* A view made by brg_reshape is an output like any other: its gradient goes when the replay ends. */
static void test_view_released(void) {
    brg_arena *a = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &a));
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *x = NULL, *v = NULL, *y = NULL;
    int64_t shape[2] = {10, WIDTH / 10}, flat[1] = {WIDTH};
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, shape, "x", &x));
    x->requires_grad = true;
    CHECK_OK(brg_reshape(tape, x, 1, flat, &v));
    CHECK_OK(brg_scale(tape, v, 2.0f, &y));
    static float ones[WIDTH];
    for (int i = 0; i < WIDTH; i++) ones[i] = 1.0f;
    size_t before = brg_arena_used(a);
    CHECK_OK(brg_tape_backward_from(tape, y, ones));
    CHECK(v->grad == NULL && x->grad != NULL && y->grad != NULL);
    CHECK(brg_arena_used(a) == before + 2 * grad_size()); /* the seed, then x's */
    if (x->grad) CHECK(x->grad[0] == 2.0f && x->grad[WIDTH - 1] == 2.0f);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

/* A donated operand's buffer takes the output (a header more, no data), with the same numbers and
 * gradients as a new buffer; the donation is used once. */
static void test_donated_buffer(void) {
    brg_arena *a = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &a));
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tensor *x = NULL, *h = NULL, *y = NULL, *z = NULL;
    int64_t shape[1] = {WIDTH};
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 1, shape, "x", &x));
    for (int i = 0; i < WIDTH; i++) ((float *)x->data)[i] = (float)i;
    x->requires_grad = true;
    CHECK_OK(brg_scale(tape, x, 0.5f, &h));
    size_t before = brg_arena_used(a);
    brg_tape_donate(tape, h);
    CHECK_OK(brg_add(tape, x, h, &y));
    CHECK(y->data == h->data && y != h);
    CHECK(brg_arena_used(a) - before < grad_size()); /* a header and a context, no data */
    for (int i = 0; i < WIDTH; i++) CHECK(((float *)y->data)[i] == 1.5f * (float)i);
    CHECK(!brg_tape_take_donated(tape, h)); /* used up */
    CHECK_OK(brg_add(tape, x, y, &z));        /* not donated: a buffer of its own */
    CHECK(z->data != y->data);
    static float ones[WIDTH];
    for (int i = 0; i < WIDTH; i++) ones[i] = 1.0f;
    CHECK_OK(brg_tape_backward_from(tape, z, ones));
    if (x->grad) CHECK(x->grad[0] == 2.5f && x->grad[WIDTH - 1] == 2.5f);
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

/* A linear layer's logits and their cross-entropy, backward, on a fresh arena: `spent` sets the
 * tape's outputs spent by backward, `donate` donates the logits to the loss. Returns the arena's
 * peak past the forward and copies the input and weight gradients out. */
enum { CE_ROWS = 6, CE_IN = 8, CE_CLASSES = 300 };

static size_t logits_backward(bool spent, bool donate, float *dx, float *dw, bool *logits_grad_left) {
    brg_arena *a = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("device 0", BRG_ARENA_UNLIMITED, &a));
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_outputs_spent(tape, spent);
    brg_tensor *x = NULL, *w = NULL, *t = NULL, *logits = NULL, *loss = NULL;
    int64_t xs[2] = {CE_ROWS, CE_IN}, ws[2] = {CE_CLASSES, CE_IN}, ts[1] = {CE_ROWS};
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, xs, "x", &x));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, ws, "w", &w));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I32, 1, ts, "targets", &t));
    for (int i = 0; i < CE_ROWS * CE_IN; i++) ((float *)x->data)[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
    for (int i = 0; i < CE_CLASSES * CE_IN; i++) ((float *)w->data)[i] = (float)((i * 5) % 13) * 0.05f - 0.3f;
    for (int i = 0; i < CE_ROWS; i++) ((int32_t *)t->data)[i] = i == 2 ? -100 : (i * 37) % CE_CLASSES;
    x->requires_grad = w->requires_grad = true;
    CHECK_OK(brg_linear(tape, x, w, NULL, false, &logits));
    if (donate) brg_tape_donate(tape, logits);
    CHECK_OK(brg_cross_entropy(tape, logits, t, -100, &loss));
    const size_t forward_used = brg_arena_used(a);
    CHECK_OK(brg_tape_backward(tape, loss));
    const size_t extra = brg_arena_peak(a) - forward_used;
    if (x->grad) memcpy(dx, x->grad, sizeof(float) * CE_ROWS * CE_IN);
    if (w->grad) memcpy(dw, w->grad, sizeof(float) * CE_CLASSES * CE_IN);
    *logits_grad_left = logits->grad != NULL;
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
    return extra;
}

/* Donated logits on a tape whose outputs backward spends take their gradient over their values:
 * the backward's peak is a logits-sized buffer lower, the gradients are the same bits, and no
 * gradient is left on the logits. Neither the donation nor the promise alone does it. */
static void test_spent_logits(void) {
    static float dx[4][CE_ROWS * CE_IN], dw[4][CE_CLASSES * CE_IN];
    bool left[4];
    const size_t plain = logits_backward(false, false, dx[0], dw[0], &left[0]);
    const size_t spent = logits_backward(true, true, dx[1], dw[1], &left[1]);
    const size_t promise_only = logits_backward(true, false, dx[2], dw[2], &left[2]);
    const size_t donation_only = logits_backward(false, true, dx[3], dw[3], &left[3]);
    const size_t logits_bytes = CE_ROWS * CE_CLASSES * sizeof(float);
    CHECK_MSG(spent + logits_bytes <= plain, "spent logits: backward peaked %zu bytes past the forward, plain %zu",
              spent, plain);
    CHECK_MSG(promise_only == plain && donation_only == plain, "the promise alone %zu, the donation alone %zu, "
              "plain %zu bytes", promise_only, donation_only, plain);
    for (int k = 1; k < 4; k++) {
        CHECK_MSG(memcmp(dx[k], dx[0], sizeof dx[0]) == 0 && memcmp(dw[k], dw[0], sizeof dw[0]) == 0,
                  "case %d: gradients differ from the plain backward", k);
        CHECK(!left[k]);
    }
}

int main(void) {
    test_peak_bounded();
    test_same_gradients();
    test_view_released();
    test_donated_buffer();
    test_spent_logits();
    return test_finish();
}
