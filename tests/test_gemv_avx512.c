/* The AVX-512 bodies of the decode step's small-row linear layer against the portable loops'
 * formula written out in scalar C, bit for bit, and so are the bodies for fewer than 4 rows: every
 * row count across the 8-row register block, depths with and without a 16-wide tail and past one
 * weight-row pass, column ranges that start and end inside a vector, with and without a bias, and
 * signed zeros. y starts as sentinels, and the columns outside the range must keep them (no write
 * past the range; past the buffer, the sanitizer build and the op table's guard pages catch it). */
#include <stdint.h>
#include <string.h>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_avx512.h"
#include "test_kernels_util.h"

static const float SENTINEL = 12345.5f;

/* y[r, c] = b[c] (or +0) + x[r, 0] w[0, c] + x[r, 1] w[1, c] + ..., each product and sum rounded. */
static float in_out_ref(const float *x, const float *w, const float *b, int64_t in, int64_t out, int64_t c) {
    float s = b ? b[c] : 0.0f;
    for (int64_t k = 0; k < in; k++) {
        const float p = x[k] * w[k * out + c];
        s = s + p;
    }
    return s;
}

/* 16 partial sums (term i into sum i mod 16), added in order from +0, then the bias. */
static float out_in_ref(const float *x, const float *w, const float *b, int64_t in, int64_t c) {
    float lane[16] = {0};
    for (int64_t i = 0; i < in; i++) {
        const float p = x[i] * w[c * in + i];
        lane[i % 16] = lane[i % 16] + p;
    }
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s = s + lane[l];
    return s + (b ? b[c] : 0.0f);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* few: the bodies for fewer than BLOCK_ROWS rows (16-row passes against W [in, out], one stream of
 * weight rows against W [out, in]) instead of the register blocks. */
static void check_case(int64_t m, int64_t in, int64_t out, int64_t c0, int64_t c1, bool w_in_out, bool bias,
                       bool few) {
    float *x = tk_rand(m * in, -1, 1), *w = tk_rand(in * out, -1, 1), *b = bias ? tk_rand(out, -1, 1) : NULL;
    /* signed zeros: a -0 product added to a +0 start, and a -0 bias */
    if (m * in > 0) x[0] = -0.0f;
    if (bias && out > 0) b[out - 1] = -0.0f;
    float *y = malloc((size_t)(m * out > 0 ? m * out : 1) * sizeof(float));
    for (int64_t i = 0; i < m * out; i++) y[i] = SENTINEL;
    if (few && w_in_out) brg_gemv_in_out_avx512_few(y, x, w, b, m, in, out, c0, c1);
    else if (few) brg_gemv_out_in_avx512_few(y, x, w, b, m, in, out, c0, c1);
    else if (w_in_out) brg_gemv_in_out_avx512(y, x, w, b, m, in, out, c0, c1);
    else brg_gemv_out_in_avx512(y, x, w, b, m, in, out, c0, c1);
    int64_t wrong = 0, overrun = 0;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < out; c++) {
            const float got = y[r * out + c];
            if (c < c0 || c >= c1) {
                overrun += !same_bits(got, SENTINEL);
                continue;
            }
            const float want = w_in_out ? in_out_ref(x + r * in, w, b, in, out, c) : out_in_ref(x + r * in, w, b, in, c);
            wrong += !same_bits(got, want);
        }
    CHECK_MSG(wrong == 0 && overrun == 0, "%s%s m %lld in %lld out %lld columns [%lld, %lld) bias %d: %lld wrong, "
              "%lld written outside", w_in_out ? "W [in, out]" : "W [out, in]", few ? " (few rows)" : "", (long long)m,
              (long long)in, (long long)out, (long long)c0, (long long)c1, bias, (long long)wrong, (long long)overrun);
    free(x), free(w), free(b), free(y);
}

int main(void) {
    if (brg_isa_detected() < BRG_ISA_AVX512) {
        printf("SKIP: this CPU (or BRIGADE_ISA) has no AVX-512\n");
        return 0;
    }
    tk_seed(14);
    const int64_t rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
    const int64_t depths[] = {0, 1, 15, 16, 17, 33, 100};
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++)
            for (int wio = 0; wio < 2; wio++)
                for (int bias = 0; bias < 2; bias++)
                    for (int few = 0; few < (rows[ri] < 4 ? 2 : 1); few++) {
                        check_case(rows[ri], depths[di], 97, 0, 97, wio, bias, few);
                        check_case(rows[ri], depths[di], 97, 5, 60, wio, bias, few);
                    }
    /* ranges of one column, of a team's half, and the GPT-2 shapes' depths */
    check_case(8, 768, 130, 64, 65, true, true, false);
    check_case(8, 768, 130, 64, 65, false, true, false);
    check_case(8, 768, 1000, 500, 1000, true, true, false);
    check_case(8, 768, 1000, 0, 500, false, false, false);
    check_case(3, 3072, 200, 0, 200, true, true, false);
    check_case(1, 768, 1000, 500, 1000, false, true, true);
    check_case(2, 3072, 200, 64, 200, false, false, true);
    check_case(1, 3072, 200, 0, 200, true, true, true);
    return test_finish();
}
