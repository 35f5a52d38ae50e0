#include "test_util.h"

static void test_arena_budget_and_reset(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("device 1", 1 << 20, &a));
    size_t m0 = brg_arena_mark(a);
    void *p = brg_arena_alloc(a, 1000, "weights");
    CHECK(p != NULL && ((uintptr_t)p % BRG_ARENA_ALIGN) == 0);
    size_t m1 = brg_arena_mark(a);
    CHECK(brg_arena_alloc(a, 2 << 20, "activations") == NULL);
    CHECK(strstr(brg_last_error(), "device 1 out of memory") != NULL);
    CHECK(strstr(brg_last_error(), "activations") != NULL);
    CHECK(strstr(brg_last_error(), "1.00 MiB") != NULL);
    float *q = brg_arena_alloc(a, 4000, "x");
    CHECK(q != NULL);
    q[0] = 42;
    brg_arena_reset(a, m1);
    CHECK(brg_arena_used(a) == m1);
    float *r = brg_arena_alloc(a, 4000, "x");
    CHECK(r == q);          /* memory is reused after a reset */
    CHECK(r && r[0] == 0);  /* and handed out zeroed */
    brg_arena_reset(a, m0);
    CHECK(brg_arena_used(a) == 0);
    CHECK(brg_arena_peak(a) >= 5000);
    brg_arena_destroy(a);
}

static void test_arena_many_chunks(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    void *big1 = brg_arena_alloc(a, 3 << 20, "a");
    size_t mark = brg_arena_mark(a);
    void *big2 = brg_arena_alloc(a, 3 << 20, "b");
    void *big3 = brg_arena_alloc(a, 9 << 20, "c");
    CHECK(big1 && big2 && big3);
    brg_arena_reset(a, mark);
    CHECK(brg_arena_alloc(a, 3 << 20, "b") == big2);
    CHECK(brg_arena_alloc(a, 9 << 20, "c") == big3);
    brg_arena_destroy(a);
}

/* Uninitialised bytes (an op's output) are handed out as an earlier allocation left them, or as
 * 0xFF bytes under BRIGADE_ARENA_POISON=1 (ctest runs this file both ways); a zeroing allocation
 * of the same bytes afterwards clears either. */
static void test_arena_uninit(void) {
    const char *v = getenv("BRIGADE_ARENA_POISON");
    const bool poison = v && strcmp(v, "1") == 0;
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    const size_t mark = brg_arena_mark(a);
    float *p = brg_arena_alloc(a, 64 * sizeof(float), "earlier step");
    CHECK(p != NULL);
    for (int i = 0; i < 64; i++) p[i] = 7.0f;
    brg_arena_reset(a, mark);
    float *q = brg_arena_alloc_uninit(a, 128 * sizeof(float), "op output");
    CHECK(q == p && ((uintptr_t)q % BRG_ARENA_ALIGN) == 0);
    int as_expected = 0;
    for (int i = 0; i < 128; i++) {
        uint32_t bits;
        memcpy(&bits, q + i, sizeof bits);
        if (poison) as_expected += bits == 0xFFFFFFFFu && isnan(q[i]);
        else as_expected += i >= 64 || q[i] == 7.0f;
    }
    CHECK_MSG(as_expected == 128, "%d of 128 floats as expected (poison %d)", as_expected, poison);
    brg_arena_reset(a, mark);
    float *r = brg_arena_alloc(a, 128 * sizeof(float), "zeroed");
    int zeros = 0;
    for (int i = 0; i < 128; i++) zeros += r[i] == 0.0f && !signbit(r[i]);
    CHECK_MSG(zeros == 128, "%d of 128 floats zeroed after uninitialised use", zeros);
    brg_tensor *t;
    const int64_t shape[2] = {3, 5};
    CHECK_OK(brg_tensor_new_uninit(a, BRG_DTYPE_F32, 2, shape, "output", &t));
    CHECK(brg_tensor_numel(t) == 15 && t->shape[1] == 5 && t->data != NULL);
    brg_arena_destroy(a);
}

static void test_arena_children_share_the_budget(void) {
    brg_arena *dev, *mb0, *mb1;
    CHECK_OK(brg_arena_create("device 2", 1 << 20, &dev));
    CHECK_OK(brg_arena_create_child(dev, "micro-batch 0", &mb0));
    CHECK_OK(brg_arena_create_child(dev, "micro-batch 1", &mb1));
    CHECK(brg_arena_alloc(dev, 400 << 10, "weights") != NULL);
    CHECK(brg_arena_alloc(mb0, 300 << 10, "activations") != NULL);
    CHECK(brg_arena_alloc(mb1, 400 << 10, "activations") == NULL); /* 1100 KiB > 1 MiB */
    CHECK(strstr(brg_last_error(), "device 2 out of memory: activations") != NULL);
    brg_arena_reset(mb0, 0); /* the first micro-batch is done: its bytes return to the device */
    CHECK(brg_arena_alloc(mb1, 400 << 10, "activations") != NULL);
    CHECK(brg_arena_peak(dev) >= (800u << 10) && brg_arena_peak(dev) < (1u << 20));
    brg_arena_destroy(mb0);
    brg_arena_destroy(mb1);
    CHECK(brg_arena_alloc(dev, 500 << 10, "more weights") != NULL); /* children gave everything back */
    brg_arena_destroy(dev);
}

static void test_parse_bytes(void) {
    size_t n;
    CHECK_OK(brg_parse_bytes("2GiB", &n));
    CHECK(n == (size_t)2 << 30);
    CHECK_OK(brg_parse_bytes("512MiB", &n));
    CHECK(n == (size_t)512 << 20);
    CHECK_OK(brg_parse_bytes("1.5G", &n));
    CHECK(n == 1500000000u);
    CHECK_OK(brg_parse_bytes("4096", &n));
    CHECK(n == 4096);
    CHECK_ERR(brg_parse_bytes("lots", &n), BRG_ERR_INVALID_ARG, "lots");
    CHECK_ERR(brg_parse_bytes("3X", &n), BRG_ERR_INVALID_ARG, "3X");
}

static void test_tensor_views_and_copy(void) {
    brg_arena *a;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_tensor *t;
    int64_t shape[2] = {2, 3};
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, 2, shape, "t", &t));
    for (int i = 0; i < 6; i++) ((float *)t->data)[i] = (float)i;
    brg_tensor tt;
    CHECK_OK(brg_tensor_view_transpose(t, 0, 1, &tt));
    CHECK(tt.shape[0] == 3 && tt.shape[1] == 2 && !brg_tensor_is_contiguous(&tt));
    CHECK(brg_tensor_get(&tt, 1) == 3.0);  /* tt[0][1] = t[1][0] */
    brg_tensor *c;
    int64_t s2[2] = {3, 2};
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_I64, 2, s2, "c", &c));
    CHECK_OK(brg_tensor_copy(c, &tt));
    CHECK(((int64_t *)c->data)[1] == 3 && ((int64_t *)c->data)[2] == 1);
    brg_tensor sl;
    CHECK_OK(brg_tensor_view_slice(t, 1, 1, 2, &sl));
    CHECK(brg_tensor_get(&sl, 0) == 1.0 && brg_tensor_get(&sl, 3) == 5.0);
    brg_tensor r;
    int64_t s3[1] = {6};
    CHECK_OK(brg_tensor_view_reshape(t, 1, s3, &r));
    int64_t s4[1] = {7};
    CHECK_ERR(brg_tensor_view_reshape(t, 1, s4, &r), BRG_ERR_INVALID_ARG, "cannot reshape [2, 3]");
    CHECK_ERR(brg_tensor_view_slice(t, 1, 2, 2, &sl), BRG_ERR_INVALID_ARG, "out of range");
    brg_arena_destroy(a);
}

static void test_half_conversions(void) {
    CHECK(brg_f32_to_f16(1.0f) == 0x3c00);
    CHECK(brg_f32_to_f16(-2.0f) == 0xc000);
    CHECK(brg_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(brg_f32_to_f16(65520.0f) == 0x7c00);      /* rounds to inf */
    CHECK(brg_f32_to_f16(0x1p-24f) == 0x0001);      /* smallest subnormal */
    CHECK(brg_f32_to_f16(0x1p-25f) == 0x0000);      /* ties to even: 0 */
    CHECK(brg_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00); /* tie, even stays */
    CHECK(brg_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02); /* tie, rounds up to even */
    CHECK(brg_f16_to_f32(0x3555) == 0x1.554p-2f);
    CHECK(brg_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(isinf(brg_f16_to_f32(0x7c00)) && isnan(brg_f16_to_f32(0x7e00)));
    for (uint32_t h = 0; h < 0x7c00; h++) CHECK_MSG(brg_f32_to_f16(brg_f16_to_f32((uint16_t)h)) == h, "%x", h);
    CHECK(brg_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(brg_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);   /* tie to even */
    CHECK(brg_f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
    CHECK(brg_bf16_to_f32(0x4049) == 3.140625f);
    CHECK(isnan(brg_bf16_to_f32(brg_f32_to_bf16(NAN))));
}

int main(void) {
    test_arena_budget_and_reset();
    test_arena_many_chunks();
    test_arena_uninit();
    test_arena_children_share_the_budget();
    test_parse_bytes();
    test_tensor_views_and_copy();
    test_half_conversions();
    return test_finish();
}
