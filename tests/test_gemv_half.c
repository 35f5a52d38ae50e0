/* The decode rows kernel with half weights equals, bit for bit, the fp32 rows kernel on the
 * widened operands (x rounded to the weights' type): BF16 and F16, both weight layouts, 1 to 8
 * rows (the fp32 kernel's AVX-512 register blocks from 4 rows, its portable loops below), widths
 * over several tiles, with and without bias, on one thread and on a team of 3; and it is not the
 * fp32 product of the unrounded operands. */
#include "brigade/rng.h"
#include "kernels/gemv.h"
#include "kernels/half.h"
#include "kernels/kernels.h"
#include "test_util.h"

typedef struct shape {
    int64_t m, in, out;
} shape;

static void round_trip(brg_dtype type, float *dst, uint16_t *bits, const float *src, int64_t n) {
    if (type == BRG_DTYPE_BF16) {
        brg_f32_to_bf16_row(bits, src, n);
        brg_bf16_to_f32_row(dst, bits, n);
    } else {
        brg_f32_to_f16_row(bits, src, n);
        brg_f16_to_f32_row(dst, bits, n);
    }
}

static void check_case(brg_dtype type, bool w_in_out, bool bias, const shape *s, const char *team) {
    const int64_t nx = s->m * s->in, nw = s->in * s->out, ny = s->m * s->out;
    float *x = malloc((size_t)nx * sizeof *x), *xr = malloc((size_t)nx * sizeof *xr);
    float *w = malloc((size_t)nw * sizeof *w), *wr = malloc((size_t)nw * sizeof *wr);
    float *b = malloc((size_t)s->out * sizeof *b);
    float *y = malloc((size_t)ny * sizeof *y), *ref = malloc((size_t)ny * sizeof *ref);
    float *exact = malloc((size_t)ny * sizeof *exact);
    uint16_t *xb = malloc((size_t)nx * sizeof *xb), *wb = malloc((size_t)nw * sizeof *wb);
    BRG_ASSERT(x && xr && w && wr && b && y && ref && exact && xb && wb);
    brg_rng rng;
    brg_rng_seed(&rng, (uint64_t)(s->m * 1000003 + s->in * 1009 + s->out));
    for (int64_t i = 0; i < nx; i++) x[i] = (float)brg_rng_normal(&rng);
    for (int64_t i = 0; i < nw; i++) w[i] = (float)(0.1 * brg_rng_normal(&rng));
    for (int64_t i = 0; i < s->out; i++) b[i] = (float)brg_rng_normal(&rng);
    round_trip(type, xr, xb, x, nx);
    round_trip(type, wr, wb, w, nw);
    brg_k_linear_rows_half_fwd(y, x, wb, type, bias ? b : NULL, s->m, s->in, s->out, w_in_out);
    brg_k_linear_rows_fwd(ref, xr, wr, bias ? b : NULL, s->m, s->in, s->out, w_in_out);
    brg_k_linear_rows_fwd(exact, x, w, bias ? b : NULL, s->m, s->in, s->out, w_in_out);
    CHECK_MSG(memcmp(y, ref, (size_t)ny * sizeof *y) == 0, "%s %s %s m=%lld in=%lld out=%lld (%s): not the fp32 "
              "kernel's bits on the widened operands", brg_dtype_name(type), w_in_out ? "[in, out]" : "[out, in]",
              bias ? "bias" : "no bias", (long long)s->m, (long long)s->in, (long long)s->out, team);
    CHECK_MSG(memcmp(y, exact, (size_t)ny * sizeof *y) != 0, "%s m=%lld: the half kernel gave the unrounded product",
              brg_dtype_name(type), (long long)s->m);
    free(x), free(xr), free(w), free(wr), free(b), free(y), free(ref), free(exact), free(xb), free(wb);
}

static void check_all(const char *team) {
    /* the last two are large enough for a team to split (BRG_TEAM_MIN_ELEMENTS) */
    const shape shapes[] = {{1, 37, 1000}, {1, 64, 5000}, {3, 129, 700}, {4, 96, 1536}, {8, 77, 513}, {2, 768, 50},
                            {1, 48, 777}, {2, 60, 300},
                            {1, 512, 2048}, {5, 300, 3000}};
    const brg_dtype types[] = {BRG_DTYPE_BF16, BRG_DTYPE_F16};
    for (size_t t = 0; t < 2; t++)
        for (int layout = 0; layout < 2; layout++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_case(types[t], layout == 0, s % 2 == 0, &shapes[s], team);
}

int main(void) {
    check_all("one thread");
    brg_gemm_team *team = NULL;
    CHECK_OK(brg_gemm_team_create(3, &team));
    if (team) {
        brg_gemm_team_bind(team);
        check_all("a team of 3");
        brg_gemm_team_bind(NULL);
        brg_gemm_team_destroy(team);
    }
    return test_finish();
}
