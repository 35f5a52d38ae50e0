/* fp16 / bf16 conversions and the half-precision GEMMs.
 *
 * Conversions: the scalar reference (include/brigade/tensor.h) against known values and against an independent
 * formulation (rounding in double with nearbyint, checked through the exact widening); every
 * vector body (AVX2+F16C, AVX-512, AVX-512-BF16: those the CPU has) against the reference, bit
 * for bit, on a stratified sample of ~10^7 fp32 patterns: every one of the 2^16 upper halves
 * (sign, exponent, top mantissa bits) with the lower halves around every rounding boundary of
 * both formats plus random ones; `--exhaustive` runs all 2^32 patterns instead. Widening: all
 * 2^16 patterns of each format, and the round trip.
 *
 * GEMMs: the widening kernels give the bits of the fp32 kernel on the widened operands; the
 * reference the bits of brg_gemm_ref on them; the VDPBF16PS kernel the bits of its documented
 * fp32 FMA order (gemm_bf16.h) and stays within the derived bound of the double reference; the
 * AMX kernel, whose order Intel does not document, stays within the same bound (gemm_amx.h);
 * row/column slices and a 2-thread team give the bits of the whole product; BRIGADE_GEMM picks
 * the documented kernels, and the AMX kernel is offered exactly where /proc/cpuinfo lists the
 * tiles. A kernel the CPU lacks prints a note and is skipped. */
#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_half.h"
#include "kernels/half.h"
#include "test_kernels_util.h"

static bool exhaustive;

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- scalar reference: known values ---- */

static void test_known_values(void) {
    CHECK(brg_f32_to_f16(1.0f) == 0x3C00 && brg_f32_to_f16(-2.0f) == 0xC000);
    CHECK(brg_f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(brg_f32_to_f16(65519.996f) == 0x7BFF); /* just below the tie above the largest finite */
    CHECK(brg_f32_to_f16(65520.0f) == 0x7C00);   /* the tie: to even, which is inf */
    CHECK(brg_f32_to_f16(INFINITY) == 0x7C00 && brg_f32_to_f16(-INFINITY) == 0xFC00);
    CHECK(brg_f32_to_f16(0x1p-14f) == 0x0400);          /* smallest normal */
    CHECK(brg_f32_to_f16(0x1p-24f) == 0x0001);          /* smallest subnormal */
    CHECK(brg_f32_to_f16(0x1p-25f) == 0x0000);          /* tie between 0 and 2^-24: to even */
    CHECK(brg_f32_to_f16(0x1.000002p-25f) == 0x0001);   /* just above the tie */
    CHECK(brg_f32_to_f16(0x1.8p-24f) == 0x0002);        /* 1.5 units: tie, to even (2) */
    CHECK(brg_f32_to_f16(0x1.ffcp-15f) == 0x0400);      /* rounds up out of the subnormals */
    CHECK(brg_f32_to_f16(-0x1p-149f) == 0x8000);        /* fp32 subnormal: signed zero */
    CHECK(brg_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);   /* tie, even stays */
    CHECK(brg_f32_to_f16(1.0f + 0x3p-11f) == 0x3C02);   /* tie, odd rounds up */
    CHECK(brg_f32_to_f16(float_of(0x7FA12345)) == 0x7F09); /* NaN: top payload bits, quiet */
    CHECK(brg_f32_to_f16(float_of(0xFF800001)) == 0xFE00);
    CHECK(brg_f32_to_bf16(1.0f) == 0x3F80);
    CHECK(brg_f32_to_bf16(float_of(0x3F808000)) == 0x3F80); /* tie, even stays */
    CHECK(brg_f32_to_bf16(float_of(0x3F818000)) == 0x3F82); /* tie, odd rounds up */
    CHECK(brg_f32_to_bf16(float_of(0x7F7FFFFF)) == 0x7F80); /* FLT_MAX -> inf */
    CHECK(brg_f32_to_bf16(float_of(0x7F7F7FFF)) == 0x7F7F);
    CHECK(brg_f32_to_bf16(float_of(0x807FFFFF)) == 0x8080); /* subnormal rounded, not flushed */
    CHECK(brg_f32_to_bf16(float_of(0x00000001)) == 0x0000);
    CHECK(brg_f32_to_bf16(float_of(0x7FA12345)) == 0x7FE1 && brg_f32_to_bf16(float_of(0xFFFFFFFF)) == 0xFFFF);
    CHECK(brg_f32_to_bf16(float_of(0x7F800001)) == 0x7FC0); /* a NaN never becomes inf */
    CHECK(brg_f32_to_bf16(-INFINITY) == 0xFF80);
    CHECK(bits_of(brg_f16_to_f32(0x0001)) == bits_of(0x1p-24f));
    CHECK(bits_of(brg_f16_to_f32(0x03FF)) == bits_of(0x1.ff8p-15f));
    CHECK(bits_of(brg_f16_to_f32(0xFC00)) == bits_of(-INFINITY));
    CHECK(bits_of(brg_f16_to_f32(0x7C01)) == 0x7FC02000u); /* NaN: payload << 13, quiet bit */
    CHECK(bits_of(brg_f16_to_f32(0xFE00)) == 0xFFC00000u);
    CHECK(bits_of(brg_bf16_to_f32(0xFF81)) == 0xFF810000u);
}

/* ---- scalar reference: an independent formulation ---- */

/* x rounded to the grid of a format with `mant` fraction bits, smallest normal exponent emin
 * and overflow threshold `big` (the tie above the largest finite value), in double: exact,
 * since the unit is a power of two and nearbyint rounds to nearest even. */
static double rounded_in_double(float x, int mant, int emin, double big) {
    const double v = fabs((double)x);
    if (v >= big) return copysign(INFINITY, x);
    if (v == 0) return copysign(0.0, x);
    int e;
    frexp(v, &e); /* v = f 2^e, f in [0.5, 1): the exponent of v is e - 1 */
    const int ex = e - 1 < emin ? emin : e - 1;
    const double unit = ldexp(1.0, ex - mant);
    return copysign(nearbyint(v / unit) * unit, x);
}

/* The reference's result for x, checked by value (through the widening) against the double
 * formulation; NaNs must give the documented NaN. */
static bool reference_agrees(uint32_t u) {
    const float x = float_of(u);
    const uint16_t h = brg_f32_to_f16(x), b = brg_f32_to_bf16(x);
    if (isnan(x)) return h == (((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu)) && b == ((u >> 16) | 0x40u);
    const double want_h = (u & 0x7FFFFFFFu) < 0x00800000u ? copysign(0.0, x) /* fp32 subnormal: below 2^-25 */
                                                         : rounded_in_double(x, 10, -14, 65520.0);
    const double want_b = rounded_in_double(x, 7, -126, ldexp(2.0 - ldexp(1.0, -8), 127));
    const float got_h = brg_f16_to_f32(h), got_b = brg_bf16_to_f32(b);
    return bits_of(got_h) == bits_of((float)want_h) && bits_of(got_b) == bits_of((float)want_b);
}

/* ---- the patterns the bodies are checked on ---- */

/* Lower halves: around every multiple of 0x1000 (the fp16 rounding position is bit 13 for
 * normals and higher for subnormals; bf16's is bit 16, its tie 0x8000), and random ones. */
enum { N_LOW = 48 + 104 };
static uint16_t low_halves[N_LOW];

static void make_low_halves(void) {
    int n = 0;
    for (uint32_t b = 0; b < 0x10000u; b += 0x1000u) {
        low_halves[n++] = (uint16_t)(b - 1);
        low_halves[n++] = (uint16_t)b;
        low_halves[n++] = (uint16_t)(b + 1);
    }
    while (n < N_LOW) low_halves[n++] = (uint16_t)(tk_uniform() * 65536.0);
}

/* Fills buf with the `chunk`-th block of patterns: all 2^16 lower halves of one upper half
 * (exhaustive) or the sample's lower halves for 256 upper halves; returns the count. */
static int64_t patterns(uint32_t *buf, uint32_t chunk) {
    int64_t n = 0;
    if (exhaustive) {
        for (uint32_t lo = 0; lo < 0x10000u; lo++) buf[n++] = (chunk << 16) | lo;
        return n;
    }
    for (uint32_t hi = chunk * 256; hi < chunk * 256 + 256; hi++)
        for (int l = 0; l < N_LOW; l++) buf[n++] = (hi << 16) | low_halves[l];
    return n;
}

static uint32_t n_chunks(void) { return exhaustive ? 0x10000u : 256u; }

/* ---- vector bodies against the reference ---- */

static void test_reference_independent(void) {
    uint32_t *buf = malloc(sizeof(uint32_t) * 65536 * 2);
    int64_t bad = 0, total = 0;
    uint32_t first_bad = 0;
    for (uint32_t c = 0; c < n_chunks(); c++) {
        const int64_t n = patterns(buf, c);
        for (int64_t i = 0; i < n; i++)
            if (!reference_agrees(buf[i]) && bad++ == 0) first_bad = buf[i];
        total += n;
    }
    CHECK_MSG(bad == 0, "scalar reference differs from the double formulation on %lld of %lld patterns (first 0x%08x)",
              (long long)bad, (long long)total, first_bad);
    printf("reference vs double formulation: %lld patterns\n", (long long)total);
    free(buf);
}

static void test_narrowing_bodies(void) {
    uint32_t *buf = malloc(sizeof(uint32_t) * 65536 * 2);
    uint16_t *got = malloc(sizeof(uint16_t) * 65536 * 2), *want = malloc(sizeof(uint16_t) * 65536 * 2);
    for (int p = BRG_HALF_AVX2; p < BRG_HALF_PATH_COUNT; p++) {
        if (!brg_half_path_hardware((brg_half_path)p)) {
            printf("note: this CPU lacks the %s conversions; skipped\n", brg_half_path_name((brg_half_path)p));
            continue;
        }
        int64_t bad_h = 0, bad_b = 0, total = 0;
        uint32_t first_h = 0, first_b = 0;
        for (uint32_t c = 0; c < n_chunks(); c++) {
            const int64_t n = patterns(buf, c);
            const float *x = (const float *)buf;
            for (int64_t i = 0; i < n; i++) want[i] = brg_f32_to_f16(x[i]);
            brg_f32_to_f16_row_with((brg_half_path)p, got, x, n);
            for (int64_t i = 0; i < n; i++)
                if (got[i] != want[i] && bad_h++ == 0) first_h = buf[i];
            for (int64_t i = 0; i < n; i++) want[i] = brg_f32_to_bf16(x[i]);
            brg_f32_to_bf16_row_with((brg_half_path)p, got, x, n);
            for (int64_t i = 0; i < n; i++)
                if (got[i] != want[i] && bad_b++ == 0) first_b = buf[i];
            total += n;
        }
        CHECK_MSG(bad_h == 0, "%s fp32->fp16 differs on %lld of %lld patterns (first 0x%08x)",
                  brg_half_path_name((brg_half_path)p), (long long)bad_h, (long long)total, first_h);
        CHECK_MSG(bad_b == 0, "%s fp32->bf16 differs on %lld of %lld patterns (first 0x%08x)",
                  brg_half_path_name((brg_half_path)p), (long long)bad_b, (long long)total, first_b);
        printf("%s narrowing: %lld patterns\n", brg_half_path_name((brg_half_path)p), (long long)total);
    }
    free(buf), free(got), free(want);
}

/* fp16 widening against a formulation by value, all 2^16 patterns. */
static void test_widening_reference(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const int e = (int)(h >> 10) & 0x1F, m = (int)(h & 0x3FF);
        const double sign = (h & 0x8000) ? -1.0 : 1.0;
        const float got = brg_f16_to_f32((uint16_t)h);
        if (e == 0x1F) {
            bad += m ? !(isnan(got) && (bits_of(got) & 0x1FFFu) == 0 && ((bits_of(got) >> 13) & 0x3FF) == (0x200u | (uint32_t)m))
                     : got != (float)(sign * INFINITY);
            continue;
        }
        const double v = sign * (e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25));
        bad += bits_of(got) != bits_of((float)v);
    }
    CHECK_MSG(bad == 0, "fp16 widening reference wrong on %d patterns", bad);
    /* Round trip: every non-NaN half survives widening and narrowing. */
    int trip = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = brg_f16_to_f32((uint16_t)h), b = brg_bf16_to_f32((uint16_t)h);
        if (!isnan(f)) trip += brg_f32_to_f16(f) != h;
        if (!isnan(b)) trip += brg_f32_to_bf16(b) != h;
    }
    CHECK_MSG(trip == 0, "%d half patterns do not survive the round trip", trip);
}

static void test_widening_bodies(void) {
    uint16_t *src = malloc(sizeof(uint16_t) * 65536);
    float *got = malloc(sizeof(float) * 65536);
    for (uint32_t h = 0; h < 0x10000u; h++) src[h] = (uint16_t)h;
    for (int p = BRG_HALF_AVX2; p < BRG_HALF_PATH_COUNT; p++) {
        if (!brg_half_path_hardware((brg_half_path)p)) continue;
        int bad_h = 0, bad_b = 0;
        brg_f16_to_f32_row_with((brg_half_path)p, got, src, 65536);
        for (uint32_t h = 0; h < 0x10000u; h++) bad_h += bits_of(got[h]) != bits_of(brg_f16_to_f32((uint16_t)h));
        brg_bf16_to_f32_row_with((brg_half_path)p, got, src, 65536);
        for (uint32_t h = 0; h < 0x10000u; h++) bad_b += bits_of(got[h]) != bits_of(brg_bf16_to_f32((uint16_t)h));
        CHECK_MSG(bad_h == 0 && bad_b == 0, "%s widening differs: fp16 %d, bf16 %d patterns",
                  brg_half_path_name((brg_half_path)p), bad_h, bad_b);
    }
    free(src), free(got);
}

/* Rows of every length up to 40 at odd offsets: tails right, nothing written past the end. */
static void test_row_tails(void) {
    float f[64], fo[64];
    uint16_t h[64], ho[64];
    for (int i = 0; i < 64; i++) f[i] = (float)(tk_uniform() * 8 - 4);
    for (int p = 0; p < BRG_HALF_PATH_COUNT; p++) {
        if (!brg_half_path_hardware((brg_half_path)p)) continue;
        int bad = 0;
        for (int n = 0; n <= 40; n++) {
            for (int i = 0; i < 64; i++) ho[i] = 0xABCD, fo[i] = -7.0f;
            brg_f32_to_bf16_row_with((brg_half_path)p, ho + 1, f + 3, n);
            for (int i = 0; i < 64; i++) bad += ho[i] != (i >= 1 && i <= n ? brg_f32_to_bf16(f[i + 2]) : 0xABCD);
            brg_f32_to_f16_row_with((brg_half_path)p, ho + 1, f + 3, n);
            for (int i = 0; i < 64; i++) bad += ho[i] != (i >= 1 && i <= n ? brg_f32_to_f16(f[i + 2]) : 0xABCD);
            for (int i = 0; i < 64; i++) h[i] = ho[i];
            brg_f16_to_f32_row_with((brg_half_path)p, fo + 1, h + 1, n);
            for (int i = 0; i < 64; i++) bad += fo[i] != (i >= 1 && i <= n ? brg_f16_to_f32(h[i]) : -7.0f);
            for (int i = 0; i < 64; i++) fo[i] = -7.0f;
            brg_bf16_to_f32_row_with((brg_half_path)p, fo + 1, h + 1, n);
            for (int i = 0; i < 64; i++) bad += fo[i] != (i >= 1 && i <= n ? brg_bf16_to_f32(h[i]) : -7.0f);
        }
        CHECK_MSG(bad == 0, "%s row tails: %d wrong elements", brg_half_path_name((brg_half_path)p), bad);
    }
    /* The dispatched converters take the active path. */
    const brg_half_path active = brg_half_path_active();
    CHECK(brg_half_path_hardware(active));
    printf("row converters: %s\n", brg_half_path_name(active));
}

/* ---- GEMM operands ---- */

static int64_t elem_size(brg_dtype t) { return t == BRG_DTYPE_F32 ? 4 : 2; }
static const char *type_name(brg_dtype t) {
    return t == BRG_DTYPE_F32 ? "f32" : t == BRG_DTYPE_F16 ? "f16" : "bf16";
}

/* A random operand of n elements of type t in [-1, 1], and its exact fp32 widening. For bf16
 * the magnitudes below 2^-8 are zeroed: then no product or partial sum of the VDPBF16PS kernel
 * is subnormal (all are multiples of 2^-30), where the instruction's flushing would differ. */
typedef struct operand {
    brg_dtype t;
    void *data;
    float *wide;
} operand;

static operand operand_rand(brg_dtype t, int64_t n) {
    operand o = {t, malloc((size_t)(n + 16) * (size_t)elem_size(t)), tk_zeros(n + 16)};
    for (int64_t i = 0; i < n + 16; i++) {
        float x = (float)(tk_uniform() * 2 - 1);
        if (t == BRG_DTYPE_F32) {
            ((float *)o.data)[i] = x;
        } else if (t == BRG_DTYPE_F16) {
            ((uint16_t *)o.data)[i] = brg_f32_to_f16(x);
        } else {
            if (fabsf(x) < 0x1p-8f) x = 0.0f;
            ((uint16_t *)o.data)[i] = brg_f32_to_bf16(x);
        }
        o.wide[i] = t == BRG_DTYPE_F32 ? x
                    : t == BRG_DTYPE_F16 ? brg_f16_to_f32(((uint16_t *)o.data)[i])
                                         : brg_bf16_to_f32(((uint16_t *)o.data)[i]);
    }
    return o;
}

static void operand_free(operand *o) { free(o->data), free(o->wide); }

/* The fp32 product the widening kernels are meant to reproduce, by kernel. */
typedef bool fp32_kernel_fn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* VDPBF16PS's order (gemm_bf16.h) in scalar fp32 FMAs, for one case. */
static void bf16_emulated(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    const int64_t KC = BRG_GEMM_BF16_KC;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float c = C[i * ldc + j];
            for (int64_t pc = 0; pc < K; pc += KC) {
                const int64_t kc = K - pc < KC ? K - pc : KC;
                float acc = 0.0f;
                for (int64_t s = 0; s < kc; s += 2) {
                    for (int64_t half = 1; half >= 0; half--) {
                        const int64_t p = pc + s + half;
                        const float a = s + half < kc ? (ta ? A[p * lda + i] : A[i * lda + p]) : 0.0f;
                        const float b = s + half < kc ? (tb ? B[j * ldb + p] : B[p * ldb + j]) : 0.0f;
                        acc = fmaf(a, b, acc);
                    }
                }
                const float r = alpha * acc, bk = pc == 0 ? beta : 1.0f;
                c = bk == 0.0f ? r : fmaf(bk, c, r);
            }
            C[i * ldc + j] = c;
        }
}

/* The kernels held to the error bound against the double reference, and their depth blocks. */
static int64_t bounded_kc(brg_gemm_half_kernel k) {
    return k == BRG_GEMM_HALF_AVX512BF16 ? BRG_GEMM_BF16_KC : k == BRG_GEMM_HALF_AMXBF16 ? BRG_GEMM_AMX_KC : 0;
}

/* NaN where an operand's rows are padded past their `cols` elements (ld > cols): no kernel may
 * read there. */
static void nan_padding(operand *o, int64_t rows, int64_t cols, int64_t ld) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = cols; c < ld; c++) {
            const int64_t i = r * ld + c;
            if (o->t == BRG_DTYPE_F32) ((float *)o->data)[i] = NAN;
            else ((uint16_t *)o->data)[i] = o->t == BRG_DTYPE_F16 ? 0x7E00 : 0x7FC0;
            o->wide[i] = NAN;
        }
}

/* Runs kernel k on NaN operands M x K by K x N (dense), which leaves NaN in the thread's packing
 * buffers: a later product of lesser depth whose padding the kernel fails to clear shows it. */
static void poison_buffers(brg_gemm_half_kernel k, brg_dtype at, brg_dtype bt, bool ta, bool tb, int64_t M, int64_t N,
                           int64_t K) {
    operand A = {at, malloc((size_t)(M * K) * (size_t)elem_size(at)), tk_zeros(M * K)};
    operand B = {bt, malloc((size_t)(K * N) * (size_t)elem_size(bt)), tk_zeros(K * N)};
    nan_padding(&A, 1, 0, M * K), nan_padding(&B, 1, 0, K * N);
    float *C = tk_zeros(M * N);
    CHECK(brg_gemm_half_with(k, ta, tb, M, N, K, 1.0f, at, A.data, ta ? M : K, bt, B.data, tb ? K : N, 0.0f, C, N));
    operand_free(&A), operand_free(&B);
    free(C);
}

/* One case: kernel k on the typed operands against `twin` (an fp32 computation on the widened
 * operands that must give the same bits; for the AMX kernel, which has none, nothing), plus,
 * for the bf16 kernels, the error bound against the double reference. C starts random (NaN for
 * beta == 0, which must not be read). */
static bool gemm_half_case(brg_gemm_half_kernel k, fp32_kernel_fn *twin, brg_dtype at, brg_dtype bt, bool ta, bool tb,
                           int64_t M, int64_t N, int64_t K, float alpha, float beta, int64_t pad) {
    const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + 2 * pad, ldc = N + pad;
    const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
    operand A = operand_rand(at, na), B = operand_rand(bt, nb);
    float *C1 = tk_rand(nc, -1, 1), *C2 = tk_zeros(nc), *C0 = tk_zeros(nc);
    if (beta == 0.0f)
        for (int64_t i = 0; i < nc; i++) C1[i] = NAN;
    memcpy(C2, C1, (size_t)nc * sizeof *C1);
    memcpy(C0, C1, (size_t)nc * sizeof *C1);
    /* NaN in the packing buffers and in the operands' padding must not reach C. */
    poison_buffers(k, at, bt, ta, tb, M, N, K + 64);
    nan_padding(&A, ta ? K : M, ta ? M : K, lda), nan_padding(&B, tb ? N : K, tb ? K : N, ldb);
    CHECK(brg_gemm_half_with(k, ta, tb, M, N, K, alpha, at, A.data, lda, bt, B.data, ldb, beta, C1, ldc));
    if (twin) CHECK(twin(ta, tb, M, N, K, alpha, A.wide, lda, B.wide, ldb, beta, C2, ldc));
    else if (k == BRG_GEMM_HALF_AVX512BF16)
        bf16_emulated(ta, tb, M, N, K, alpha, A.wide, lda, B.wide, ldb, beta, C2, ldc);
    else
        memcpy(C2, C1, (size_t)nc * sizeof *C1);
    bool ok = memcmp(C1, C2, (size_t)nc * sizeof *C1) == 0;
    double worst = 0.0;
    const int64_t KC = bounded_kc(k);
    if (KC) {
        /* Each element passes through at most K additions, one alpha product and one FMA per
         * depth block: n roundings of unit u = 2^-24 bound it by gamma_n = n u / (1 - n u)
         * times the sum of the magnitudes involved; the double reference's own final rounding
         * adds u |C|. */
        float *R = tk_copy(C0, nc);
        brg_gemm_half_ref(ta, tb, M, N, K, alpha, at, A.data, lda, bt, B.data, ldb, beta, R, ldc);
        const double u = 0x1p-24, nr = (double)K + 2.0 * (double)((K + KC - 1) / KC) + 1;
        const double gamma = nr * u / (1 - nr * u);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double mag = 0.0;
                for (int64_t p = 0; p < K; p++)
                    mag += fabs((double)(ta ? A.wide[p * lda + i] : A.wide[i * lda + p]) *
                                (double)(tb ? B.wide[j * ldb + p] : B.wide[p * ldb + j]));
                mag = fabs(alpha) * mag + (beta == 0.0f ? 0.0 : fabs((double)beta * C0[i * ldc + j]));
                const double err = fabs((double)C1[i * ldc + j] - (double)R[i * ldc + j]);
                const double bound = gamma * mag + u * fabs((double)R[i * ldc + j]);
                if (!(err <= bound)) ok = false;
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        free(R);
    }
    CHECK_MSG(ok, "%s gemm a=%s b=%s ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld differs from its %s",
              brg_gemm_half_kernel_name(k), type_name(at), type_name(bt), ta, tb, (long long)M, (long long)N,
              (long long)K, alpha, beta, (long long)pad, twin ? "fp32 twin" : "emulation/bound");
    operand_free(&A), operand_free(&B);
    free(C1), free(C2), free(C0);
    return ok;
}

static bool ref_twin(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    brg_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return true;
}

typedef struct half_kernel_case {
    brg_gemm_half_kernel k;
    fp32_kernel_fn *twin; /* NULL: the bf16 emulation (avx512bf16), none (amxbf16) */
    int64_t MR, NR, KC, MC, NC;
} half_kernel_case;

static const half_kernel_case half_kernels[] = {
    {BRG_GEMM_HALF_AMXBF16, NULL, BRG_GEMM_AMX_MR, BRG_GEMM_AMX_NR, BRG_GEMM_AMX_KC, BRG_GEMM_AMX_MC, BRG_GEMM_AMX_NC},
    {BRG_GEMM_HALF_AVX512BF16, NULL, BRG_GEMM_BF16_MR, BRG_GEMM_BF16_NR, BRG_GEMM_BF16_KC, BRG_GEMM_BF16_MC,
     BRG_GEMM_BF16_NC},
    {BRG_GEMM_HALF_AVX512, brg_gemm_avx512, BRG_GEMM_AVX512_MR, BRG_GEMM_AVX512_NR, BRG_GEMM_AVX512_KC,
     BRG_GEMM_AVX512_MC, BRG_GEMM_AVX512_NC},
    {BRG_GEMM_HALF_AVX2, brg_gemm_avx2, BRG_GEMM_AVX2_MR, BRG_GEMM_AVX2_NR, BRG_GEMM_AVX2_KC, BRG_GEMM_AVX2_MC,
     BRG_GEMM_AVX2_NC},
    {BRG_GEMM_HALF_REF, ref_twin, 4, 4, 64, 64, 64},
};

static const brg_dtype types[] = {BRG_DTYPE_F32, BRG_DTYPE_F16, BRG_DTYPE_BF16};

/* Tile edges, odd depths, block edges in K (and the last pair of a block), transposes, alpha
 * and beta, padded leading dimensions, every type pair the kernel reads. */
static void test_gemm_half_kernel(const half_kernel_case *c) {
    const int64_t MR = c->MR, NR = c->NR, KC = c->KC;
    const int64_t shapes[][3] = {
        {1, 1, 1},          {MR, NR, 2},          {MR + 1, NR + 1, 3},      {MR - 1, NR - 1, 17},
        {2 * MR + 5, 2 * NR + 3, 33}, {9, 5, KC},  {5, 9, KC + 1},           {2 * MR, NR / 2, 2 * KC + 3},
        {3, 40, 64},        {37, 45, 70},         {c->MC + 3, 7, 9},        {6, c->NC + 17, 11},
    };
    const float alphas[] = {1.0f, -0.75f, 2.0f}, betas[] = {0.0f, 1.0f, -0.5f};
    int n = 0, failed = 0;
    for (int ai = 0; ai < 3; ai++)
        for (int bi = 0; bi < 3; bi++) {
            if (!brg_gemm_half_kernel_supported(c->k, types[ai], types[bi])) continue;
            if (c->k == BRG_GEMM_HALF_REF && (ai + bi) % 2) continue; /* slow: a few type pairs suffice */
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && failed < 5; s++)
                for (int t = 0; t < 4 && failed < 5; t++, n++) {
                    if (c->k == BRG_GEMM_HALF_REF && s >= 10) continue;
                    failed += !gemm_half_case(c->k, c->twin, types[ai], types[bi], t & 1, t & 2, shapes[s][0],
                                              shapes[s][1], shapes[s][2], alphas[n % 3], betas[(n / 3) % 3], n % 3);
                }
        }
    /* alpha 1 and beta 0 on whole 32- and 16-row blocks, which the AMX kernel stores straight
     * from its tiles */
    const int64_t whole[][3] = {{MR, NR, 40}, {16, 2 * NR, 40}};
    for (int w = 0; w < 2; w++)
        for (int t = 0; t < 4; t++, n++)
            if (brg_gemm_half_kernel_supported(c->k, BRG_DTYPE_BF16, BRG_DTYPE_BF16))
                gemm_half_case(c->k, c->twin, BRG_DTYPE_BF16, BRG_DTYPE_BF16, t & 1, t & 2, whole[w][0], whole[w][1],
                               whole[w][2], 1.0f, 0.0f, 0);
    printf("%s: %d cases\n", brg_gemm_half_kernel_name(c->k), n);
}

/* Row and column slices of a product equal the whole product bit for bit. */
static void test_gemm_half_slices(const half_kernel_case *c, brg_dtype at, brg_dtype bt) {
    const int64_t M = 2 * c->MR + 5, N = 3 * c->NR + 3, K = c->KC + 7;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        operand A = operand_rand(at, M * K), B = operand_rand(bt, K * N);
        float *C0 = tk_rand(M * N, -1, 1), *whole = tk_copy(C0, M * N), *rows = tk_copy(C0, M * N);
        float *cols = tk_copy(C0, M * N);
        const char *a = A.data, *b = B.data;
        const int64_t ea = elem_size(at), eb = elem_size(bt);
        CHECK(brg_gemm_half_with(c->k, ta, tb, M, N, K, 0.5f, at, a, lda, bt, b, ldb, 1.0f, whole, N));
        const int64_t cut_m[] = {0, 1, c->MR + 2, M}, cut_n[] = {0, 5, c->NR + 1, N};
        for (int s = 0; s < 3; s++) {
            const int64_t r0 = cut_m[s], r1 = cut_m[s + 1], c0 = cut_n[s], c1 = cut_n[s + 1];
            CHECK(brg_gemm_half_with(c->k, ta, tb, r1 - r0, N, K, 0.5f, at, a + (ta ? r0 : r0 * lda) * ea, lda, bt, b,
                                     ldb, 1.0f, rows + r0 * N, N));
            CHECK(brg_gemm_half_with(c->k, ta, tb, M, c1 - c0, K, 0.5f, at, a, lda, bt, b + (tb ? c0 * ldb : c0) * eb,
                                     ldb, 1.0f, cols + c0, N));
        }
        CHECK_MSG(memcmp(whole, rows, (size_t)(M * N) * sizeof(float)) == 0, "%s %s x %s ta=%d tb=%d: row slices differ",
                  brg_gemm_half_kernel_name(c->k), type_name(at), type_name(bt), ta, tb);
        CHECK_MSG(memcmp(whole, cols, (size_t)(M * N) * sizeof(float)) == 0,
                  "%s %s x %s ta=%d tb=%d: column slices differ", brg_gemm_half_kernel_name(c->k), type_name(at),
                  type_name(bt), ta, tb);
        operand_free(&A), operand_free(&B);
        free(C0), free(whole), free(rows), free(cols);
    }
}

static void test_gemm_half_kernels(void) {
    for (size_t i = 0; i < sizeof half_kernels / sizeof half_kernels[0]; i++) {
        const half_kernel_case *c = &half_kernels[i];
        if (!brg_gemm_half_kernel_supported(c->k, BRG_DTYPE_BF16, BRG_DTYPE_BF16)) {
            printf("note: this CPU lacks the instructions of the %s half GEMM; its tests are skipped\n",
                   brg_gemm_half_kernel_name(c->k));
            continue;
        }
        test_gemm_half_kernel(c);
        if (c->k == BRG_GEMM_HALF_REF) continue;
        test_gemm_half_slices(c, BRG_DTYPE_BF16, BRG_DTYPE_BF16);
        if (brg_gemm_half_kernel_supported(c->k, BRG_DTYPE_F16, BRG_DTYPE_F32))
            test_gemm_half_slices(c, BRG_DTYPE_F16, BRG_DTYPE_F32);
    }
}

/* ---- fp32 operands rounded while packed ---- */

/* fp32 values that stress the rounding: ties to even both ways, subnormals (which VCVTNEPS2BF16
 * alone would flush), and ordinary values; no NaN or Inf, so the product is finite. */
static float rounding_value(int64_t i) {
    switch (i % 7) {
    case 0: return float_of(0x3F808000u ^ (uint32_t)(i & 1) << 16); /* ties */
    case 1: return float_of(0x007F8000u + (uint32_t)(i % 1000)) * (i & 2 ? -1.0f : 1.0f); /* subnormals */
    case 2: return (float)(tk_uniform() * 2 - 1) * 1e-3f;
    default: return (float)(tk_uniform() * 2 - 1);
    }
}

/* brg_gemm_amxbf16_rounding gives the bits of brg_gemm_amxbf16 on bf16 copies rounded by the
 * reference, over tile edges, depth blocks, transposes and padded rows (NaN in the padding). */
static void test_amx_rounding(void) {
    if (!brg_isa_has_amx_bf16()) {
        printf("note: no AMX-BF16 here; the rounding kernel's tests are skipped\n");
        return;
    }
    const int64_t MR = BRG_GEMM_AMX_MR, NR = BRG_GEMM_AMX_NR, KC = BRG_GEMM_AMX_KC;
    const int64_t shapes[][3] = {
        {1, 1, 1}, {MR + 1, NR - 1, 33}, {2 * MR + 5, 2 * NR + 3, KC + 1}, {17, 70, 2 * KC + 3}};
    int cases = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int t = 0; t < 4; t++, cases++) {
            const bool ta = t & 1, tb = t & 2;
            const int64_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], pad = t % 3;
            const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
            const int64_t lda = a_cols + pad, ldb = b_cols + pad;
            float *A = tk_zeros(a_rows * lda), *B = tk_zeros(b_rows * ldb);
            uint16_t *Ah = calloc((size_t)(a_rows * lda), 2), *Bh = calloc((size_t)(b_rows * ldb), 2);
            for (int64_t i = 0; i < a_rows * lda; i++) {
                A[i] = i % lda < a_cols ? rounding_value(i) : NAN;
                Ah[i] = brg_f32_to_bf16(A[i]);
            }
            for (int64_t i = 0; i < b_rows * ldb; i++) {
                B[i] = i % ldb < b_cols ? rounding_value(i + 3) : NAN;
                Bh[i] = brg_f32_to_bf16(B[i]);
            }
            float *C0 = tk_rand(M * N, -1, 1), *got = tk_copy(C0, M * N), *want = tk_copy(C0, M * N);
            CHECK(brg_gemm_amxbf16_rounding(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, got, N));
            CHECK(brg_gemm_amxbf16(ta, tb, M, N, K, 0.75f, Ah, lda, Bh, ldb, 0.5f, want, N));
            CHECK_MSG(memcmp(got, want, (size_t)(M * N) * sizeof(float)) == 0,
                      "amx rounding while packing M=%lld N=%lld K=%lld ta=%d tb=%d: not the bits on rounded copies",
                      (long long)M, (long long)N, (long long)K, ta, tb);
            bool finite = true;
            for (int64_t i = 0; i < M * N; i++) finite &= isfinite(got[i]);
            CHECK_MSG(finite, "amx rounding M=%lld N=%lld K=%lld ta=%d tb=%d: NaN padding reached C", (long long)M,
                      (long long)N, (long long)K, ta, tb);
            free(A), free(B), free(Ah), free(Bh), free(C0), free(got), free(want);
        }
    /* fp32 subnormals just below 2^-126 round up to it, a normal bf16 the tiles do not flush:
     * 64 of them times 1 is 2^-120 (flushing them first would give 0). */
    float a[64], b[64], c = 1.0f;
    for (int i = 0; i < 64; i++) a[i] = float_of(0x007FC000u), b[i] = 1.0f;
    CHECK(brg_gemm_amxbf16_rounding(false, false, 1, 1, 64, 1.0f, a, 64, b, 1, 0.0f, &c, 1));
    CHECK_MSG(c == 0x1p-120f, "64 fp32 subnormals rounding up to 2^-126: sum %a, want 0x1p-120", c);
    printf("amxbf16 rounding while packing: %d cases\n", cases);
}

/* brg_gemm_half_rounded: the bits of brg_gemm_half on rounded copies, alone and on a team of 2;
 * false exactly where the process's bf16 kernel is not amxbf16. */
static void test_gemm_half_rounded(void) {
    const int64_t M = 70, N = 130, K = 200;
    const bool amx = strcmp(brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16), "amxbf16") == 0;
    brg_gemm_team *team = NULL;
    CHECK_OK(brg_gemm_team_create(2, &team));
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        float *A = tk_rand(M * K, -1, 1), *B = tk_rand(K * N, -1, 1);
        uint16_t *Ah = malloc((size_t)(M * K) * 2), *Bh = malloc((size_t)(K * N) * 2);
        brg_f32_to_bf16_row(Ah, A, M * K), brg_f32_to_bf16_row(Bh, B, K * N);
        float *C0 = tk_rand(M * N, -1, 1), *alone = tk_copy(C0, M * N), *two = tk_copy(C0, M * N);
        float *want = tk_copy(C0, M * N);
        brg_gemm_half(ta, tb, M, N, K, 0.75f, BRG_DTYPE_BF16, Ah, lda, BRG_DTYPE_BF16, Bh, ldb, 0.5f, want, N);
        const bool took =
            brg_gemm_half_rounded(BRG_DTYPE_BF16, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, alone, N);
        CHECK_MSG(took == amx, "brg_gemm_half_rounded took the product: %d, the bf16 kernel amxbf16: %d", took, amx);
        if (took) {
            brg_gemm_team_bind(team);
            CHECK(brg_gemm_half_rounded(BRG_DTYPE_BF16, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, two, N));
            brg_gemm_team_bind(NULL);
            CHECK_MSG(memcmp(alone, want, (size_t)(M * N) * sizeof(float)) == 0 &&
                          memcmp(two, want, (size_t)(M * N) * sizeof(float)) == 0,
                      "brg_gemm_half_rounded ta=%d tb=%d: not the bits of brg_gemm_half on rounded copies", ta, tb);
        } else {
            CHECK_MSG(memcmp(alone, C0, (size_t)(M * N) * sizeof(float)) == 0, "declined, yet C changed");
        }
        free(A), free(B), free(Ah), free(Bh), free(C0), free(alone), free(two), free(want);
    }
    brg_gemm_team_destroy(team);
}

/* ---- out of memory ---- */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* The child of test_out_of_memory, a fresh process (no packing buffers, nothing freed that a
 * later allocation could reuse): held to the address space it has, a kernel that cannot get its
 * packing buffers declines, and brg_gemm_half (and brg_gemm_half_rounded, where bf16 runs on
 * AMX) then give the double reference's bits on the (rounded) operands. Exit 0 when so. */
#ifndef UNDER_ASAN
static int child_out_of_memory(void) {
    const int64_t M = 256, N = 96, K = 1536; /* an A buffer of 768 KiB or more */
    float *A = tk_rand(M * K, -1, 1), *B = tk_rand(K * N, -1, 1);
    uint16_t *Ah = malloc((size_t)(M * K) * 2), *Bh = malloc((size_t)(K * N) * 2);
    float *want = tk_zeros(M * N), *rounded = tk_zeros(M * N), *half = tk_zeros(M * N);
    if (!Ah || !Bh) return 3;
    brg_f32_to_bf16_row(Ah, A, M * K), brg_f32_to_bf16_row(Bh, B, K * N);
    brg_gemm_half_ref(false, false, M, N, K, 0.75f, BRG_DTYPE_BF16, Ah, K, BRG_DTYPE_BF16, Bh, N, 0.0f, want, N);
    const brg_gemm_half_kernel k = brg_gemm_half_kernel_for(BRG_DTYPE_BF16, BRG_DTYPE_BF16);
    const bool amx = k == BRG_GEMM_HALF_AMXBF16, packs = k != BRG_GEMM_HALF_REF && k != BRG_GEMM_HALF_OPENBLAS;
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) return 3;
    fclose(f);
    const rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    const struct rlimit lim = {now, now};
    if (setrlimit(RLIMIT_AS, &lim) != 0) return 3;
    const size_t bytes = (size_t)(M * N) * sizeof(float);
    if (packs && brg_gemm_half_with(k, false, false, M, N, K, 0.75f, BRG_DTYPE_BF16, Ah, K, BRG_DTYPE_BF16, Bh, N,
                                    0.0f, half, N))
        return 4; /* the limit did not starve the kernel: nothing tested */
    brg_gemm_half(false, false, M, N, K, 0.75f, BRG_DTYPE_BF16, Ah, K, BRG_DTYPE_BF16, Bh, N, 0.0f, half, N);
    if (memcmp(half, want, bytes) != 0) return 5;
    const bool taken =
        brg_gemm_half_rounded(BRG_DTYPE_BF16, false, false, M, N, K, 0.75f, A, K, B, N, 0.0f, rounded, N);
    if (taken != amx) return 6;
    if (amx && memcmp(rounded, want, bytes) != 0) return 7;
    return 0;
}
#endif

static void test_out_of_memory(const char *self) {
#ifdef UNDER_ASAN
    (void)self;
    printf("note: ASan's allocator aborts instead of failing; the out-of-memory fallback is not tested here\n");
#else
    if (!self) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --child-oom", self);
    const int status = system(cmd);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "out of memory: the half products did not fall back to the reference's bits (child exit %d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    printf("out of memory: %s falls back to the reference%s\n", brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16),
           brg_isa_has_amx_bf16() ? ", and so does rounding while packing" : "");
#endif
}

/* ---- the dispatched entry point ---- */

/* brg_gemm_half with a team of 2 gives the bits it gives alone; and whatever it dispatches to
 * keeps its kernel's equality (fp32 twin when brg_gemm runs the same family). */
static void test_gemm_half_team(void) {
    const int64_t M = 64, N = 130, K = 200; /* above the team's threshold of 2^20 multiply-adds */
    brg_gemm_team *team = NULL;
    CHECK_OK(brg_gemm_team_create(2, &team));
    for (int ai = 0; ai < 3; ai++)
        for (int bi = 0; bi < 3; bi++) {
            const brg_dtype at = types[ai], bt = types[bi];
            for (int t = 0; t < 4; t++) {
                const bool ta = t & 1, tb = t & 2;
                const int64_t lda = ta ? M : K, ldb = tb ? K : N;
                operand A = operand_rand(at, M * K), B = operand_rand(bt, K * N);
                float *C0 = tk_rand(M * N, -1, 1), *alone = tk_copy(C0, M * N), *two = tk_copy(C0, M * N);
                float *twin = tk_copy(C0, M * N);
                brg_gemm_half(ta, tb, M, N, K, 0.75f, at, A.data, lda, bt, B.data, ldb, 0.5f, alone, N);
                brg_gemm_team_bind(team);
                brg_gemm_half(ta, tb, M, N, K, 0.75f, at, A.data, lda, bt, B.data, ldb, 0.5f, two, N);
                brg_gemm_team_bind(NULL);
                CHECK_MSG(memcmp(alone, two, (size_t)(M * N) * sizeof(float)) == 0,
                          "brg_gemm_half (%s) %s x %s ta=%d tb=%d: 2 threads differ from 1",
                          brg_gemm_half_backend(at, bt), type_name(at), type_name(bt), ta, tb);
                const char *hb = brg_gemm_half_backend(at, bt);
                if (strcmp(hb, "avx512bf16") == 0) {
                    bf16_emulated(ta, tb, M, N, K, 0.75f, A.wide, lda, B.wide, ldb, 0.5f, twin, N);
                } else if (strcmp(hb, brg_gemm_backend()) == 0) {
                    brg_gemm(ta, tb, M, N, K, 0.75f, A.wide, lda, B.wide, ldb, 0.5f, twin, N);
                } else {
                    memcpy(twin, alone, (size_t)(M * N) * sizeof(float)); /* no twin to compare with */
                }
                CHECK_MSG(memcmp(alone, twin, (size_t)(M * N) * sizeof(float)) == 0,
                          "brg_gemm_half (%s, brg_gemm %s) %s x %s ta=%d tb=%d: not the bits of its twin", hb,
                          brg_gemm_backend(), type_name(at), type_name(bt), ta, tb);
                operand_free(&A), operand_free(&B);
                free(C0), free(alone), free(two), free(twin);
            }
        }
    brg_gemm_team_destroy(team);
}

static void test_gemm_half_degenerate(void) {
    uint16_t A[8] = {0}, B[8] = {0};
    float C[6];
    for (int i = 0; i < 6; i++) C[i] = NAN;
    brg_gemm_half(false, false, 2, 3, 0, 1.0f, BRG_DTYPE_BF16, A, 1, BRG_DTYPE_F16, B, 3, 0.0f, C, 3);
    int zero = 1;
    for (int i = 0; i < 6; i++) zero &= C[i] == 0.0f;
    CHECK_MSG(zero, "K == 0, beta == 0 must zero C");
    for (int i = 0; i < 6; i++) C[i] = 2.0f;
    brg_gemm_half(true, true, 2, 3, 2, 0.0f, BRG_DTYPE_BF16, A, 2, BRG_DTYPE_BF16, B, 2, 0.5f, C, 3);
    CHECK(C[0] == 1.0f && C[5] == 1.0f);
    brg_gemm_half(false, false, 0, 3, 2, 1.0f, BRG_DTYPE_BF16, A, 2, BRG_DTYPE_BF16, B, 3, 0.0f, C, 3);
    CHECK(C[0] == 1.0f);
    /* Inf and NaN operands propagate as in fp32. */
    const uint16_t a[2] = {0x7F80, 0x3F80}, b[2] = {0x3F80, 0x3F80}, n[2] = {0x7FC0, 0};
    float c = 0;
    brg_gemm_half(false, false, 1, 1, 2, 1.0f, BRG_DTYPE_BF16, a, 2, BRG_DTYPE_BF16, b, 1, 0.0f, &c, 1);
    CHECK(isinf(c) && c > 0);
    brg_gemm_half(false, false, 1, 1, 2, 1.0f, BRG_DTYPE_BF16, n, 2, BRG_DTYPE_BF16, b, 1, 0.0f, &c, 1);
    CHECK(isnan(c));
    CHECK(!brg_gemm_half_partials_available());
}

/* ---- backend choice ---- */

/* What brg_gemm_half_backend must say for a BRIGADE_GEMM value on this CPU (as BRIGADE_ISA caps
 * it), for bf16 x bf16 and for f16 x bf16 operands. */
static const char *expected_half(const char *env, bool both_bf16) {
    const brg_isa isa = brg_isa_detected();
    const char *widen = isa >= BRG_ISA_AVX512 ? "avx512" : isa >= BRG_ISA_AVX2 ? "avx2" : "openblas";
    const bool bf16_dot = isa >= BRG_ISA_AVX512 && brg_isa_has_avx512bf16() && both_bf16;
    const bool tiles = isa >= BRG_ISA_AVX512 && brg_isa_has_amx_bf16() && both_bf16;
    const char *best = tiles ? "amxbf16" : bf16_dot && brg_isa_bf16_dot_outruns_fma() ? "avx512bf16" : widen;
    if (!env) return best;
    if (strcmp(env, "amxbf16") == 0) return tiles ? "amxbf16" : best;
    if (strcmp(env, "avx512bf16") == 0) return bf16_dot ? "avx512bf16" : best;
    if (strcmp(env, "openblas") == 0 || strcmp(env, "ref") == 0) return env;
    if (strcmp(env, "avx512") == 0) return widen;
    if (strcmp(env, "avx2") == 0) return isa >= BRG_ISA_AVX2 ? "avx2" : "openblas";
    return best; /* unknown names */
}

/* VDPBF16PS is the default bf16 kernel on AMD only: the vendor as /proc/cpuinfo names it, not as
 * cpuid (which brg_isa_bf16_dot_outruns_fma reads) does. */
static void test_bf16_dot_vendor(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return; /* not Linux: nothing independent to compare with */
    char line[4096], vendor[64] = "";
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "vendor_id : %63s", vendor) == 1) break;
    fclose(f);
    const bool amd = strcmp(vendor, "AuthenticAMD") == 0;
    CHECK_MSG(brg_isa_bf16_dot_outruns_fma() == (amd && brg_isa_has_avx512bf16()),
              "vendor %s, AVX512_BF16 %d: VDPBF16PS outruns the FMAs %d", vendor, brg_isa_has_avx512bf16(),
              brg_isa_bf16_dot_outruns_fma());
}

/* The AMX kernel runs exactly where Linux lists the tiles and their bf16 products in
 * /proc/cpuinfo (it lists them only when it enables their state), next to AVX512_BF16. */
static void test_amx_flags(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return; /* not Linux: nothing independent to compare with */
    char line[8192];
    bool tile = false, bf16 = false, found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        found = true;
        for (char *w = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \n"); w; w = strtok(NULL, " \n")) {
            tile |= strcmp(w, "amx_tile") == 0;
            bf16 |= strcmp(w, "amx_bf16") == 0;
        }
    }
    fclose(f);
    if (!found) return;
    const bool want = tile && bf16 && brg_isa_has_avx512bf16();
    CHECK_MSG(brg_isa_has_amx_bf16() == want, "/proc/cpuinfo amx_tile %d amx_bf16 %d: the AMX kernel is %s", tile, bf16,
              brg_isa_has_amx_bf16() ? "offered" : "not offered");
    printf("AMX-BF16 tiles: %s\n", want ? "yes" : "no");
}

static void test_backend_env(const char *self) {
    CHECK_MSG(strcmp(brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16), expected_half(getenv("BRIGADE_GEMM"), true)) == 0,
              "half backend %s", brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16));
    printf("brg_gemm_half: bf16 x bf16 %s, f16 x f32 %s; brg_gemm %s\n",
           brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16), brg_gemm_half_backend(BRG_DTYPE_F16, BRG_DTYPE_F32),
           brg_gemm_backend());
    if (!self) return;
    const char *values[] = {"openblas", "amxbf16", "avx512bf16", "avx512", "avx2", "ref", "bogus"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char cmd[4200], line[256] = "";
        snprintf(cmd, sizeof cmd, "BRIGADE_GEMM=%s '%s' --child-backend 2>/dev/null", values[i], self);
        FILE *f = popen(cmd, "r");
        CHECK(f != NULL);
        if (!f) continue;
        if (!fgets(line, sizeof line, f)) line[0] = '\0';
        int rc = pclose(f);
        line[strcspn(line, "\n")] = '\0';
        char want[128];
        snprintf(want, sizeof want, "%s %s", expected_half(values[i], true), expected_half(values[i], false));
        CHECK_MSG(rc == 0 && strcmp(line, want) == 0, "BRIGADE_GEMM=%s: child said '%s' (exit %d), wanted '%s'",
                  values[i], line, rc, want);
    }
}

/* The child of test_backend_env: prints both choices, then checks the dispatched products. */
static int child_backend(void) {
    printf("%s %s\n", brg_gemm_half_backend(BRG_DTYPE_BF16, BRG_DTYPE_BF16),
           brg_gemm_half_backend(BRG_DTYPE_F16, BRG_DTYPE_BF16));
    fflush(stdout);
    test_gemm_half_team();
    test_gemm_half_rounded();
    return test_failed_ ? 1 : 0;
}

int main(int argc, char **argv) {
    tk_seed(7);
    if (argc > 1 && strcmp(argv[1], "--child-backend") == 0) return child_backend();
#ifndef UNDER_ASAN
    if (argc > 1 && strcmp(argv[1], "--child-oom") == 0) return child_out_of_memory();
#endif
    exhaustive = argc > 1 && strcmp(argv[1], "--exhaustive") == 0;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) self[len] = '\0';
    make_low_halves();
    test_known_values();
    test_reference_independent();
    test_narrowing_bodies();
    test_widening_reference();
    test_widening_bodies();
    test_row_tails();
    if (exhaustive) return test_finish(); /* the conversions alone */
    test_gemm_half_kernels();
    test_gemm_half_team();
    test_amx_rounding();
    test_gemm_half_rounded();
    test_out_of_memory(len > 0 ? self : NULL);
    test_gemm_half_degenerate();
    test_bf16_dot_vendor();
    test_amx_flags();
    test_backend_env(len > 0 ? self : NULL);
    return test_finish();
}
