/* fp16 / bf16 row conversions of half.h: the scalar loops over the reference (tensor.c) and the
 * SIMD bodies. */
#include "kernels/half.h"

#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/simd.h"
#if defined(__x86_64__) || defined(__i386__)
#include "kernels/bf16_round.h"
#endif

/* ---- scalar: the reference of include/brigade/tensor.h ---- */

static void f32_to_f16_scalar(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = brg_f32_to_f16(src[i]);
}
static void f16_to_f32_scalar(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = brg_f16_to_f32(src[i]);
}
static void f32_to_bf16_scalar(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = brg_f32_to_bf16(src[i]);
}
static void bf16_to_f32_scalar(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = brg_bf16_to_f32(src[i]);
}

/* ---- hardware ---- */

static bool detect_avx512bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return brg_isa_hardware(BRG_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* AMD's Zen 4 and 5 issue VDPBF16PS as fast as an fp32 FMA, so it does twice the arithmetic a
 * cycle. Intel's AVX-512 cores issue it on one port where fp32 FMAs use two: on an Intel Xeon VM
 * with AVX512_BF16 and AMX, brigade_bench_gemm --half measured the VDPBF16PS kernel at 0.67x the
 * fp32 one over GPT-2's products (101.8 against 151.1 GFLOP/s) and the widening kernel at 1.03x,
 * and GPT-2 small bf16.32 training at 0.65-0.71x fp32. */
bool brg_isa_bf16_dot_outruns_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned max_leaf = 0, vendor[3] = {0}; /* leaf 0 spells the vendor in EBX, EDX, ECX */
    if (!brg_isa_has_avx512bf16() || !__get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1])) return false;
    return memcmp(vendor, "AuthenticAMD", 12) == 0;
#else
    return false;
#endif
}

/* Asked for every row converted, so detected once: -1 unknown, else 0 or 1. */
static atomic_int has_bf16 = -1;

bool brg_isa_has_avx512bf16(void) {
    int v = atomic_load_explicit(&has_bf16, memory_order_relaxed);
    if (v < 0) {
        v = detect_avx512bf16();
        atomic_store_explicit(&has_bf16, v, memory_order_relaxed);
    }
    return v != 0;
}

static bool detect_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
    /* CPUID.1:ECX.F16C read directly: clang before 15 has no "f16c" in __builtin_cpu_supports.
     * F16C is VEX-encoded, so it also needs the OS to save AVX state ("avx" checks that). */
    unsigned a, b, c, d;
    __builtin_cpu_init();
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx");
#else
    return false;
#endif
}

/* Read once: CPUID is slow (a virtual machine traps it), and the row converters ask per row. */
static atomic_int has_f16c = -1;

bool brg_isa_has_f16c(void) {
    int v = atomic_load_explicit(&has_f16c, memory_order_relaxed);
    if (v < 0) {
        v = detect_f16c();
        atomic_store_explicit(&has_f16c, v, memory_order_relaxed);
    }
    return v != 0;
}

static const char *const path_names[] = {"scalar", "avx2", "avx512", "avx512bf16"};

const char *brg_half_path_name(brg_half_path path) {
    return (unsigned)path < BRG_HALF_PATH_COUNT ? path_names[path] : "unknown";
}

bool brg_half_path_hardware(brg_half_path path) {
    switch (path) {
    case BRG_HALF_SCALAR: return true;
    case BRG_HALF_AVX2: return brg_isa_hardware(BRG_ISA_AVX2) && brg_isa_has_f16c();
    case BRG_HALF_AVX512: return brg_isa_hardware(BRG_ISA_AVX512);
    case BRG_HALF_AVX512BF16: return brg_isa_has_avx512bf16();
    case BRG_HALF_PATH_COUNT: break;
    }
    return false;
}

brg_half_path brg_half_path_active(void) {
    switch (brg_simd_isa()) {
    case BRG_ISA_AVX512: return brg_isa_has_avx512bf16() ? BRG_HALF_AVX512BF16 : BRG_HALF_AVX512;
    case BRG_ISA_AVX2: return brg_isa_has_f16c() ? BRG_HALF_AVX2 : BRG_HALF_SCALAR;
    default: return BRG_HALF_SCALAR;
    }
}

#if defined(__x86_64__) || defined(__i386__)

#define HALF_AVX2 __attribute__((target("avx2,fma,f16c")))

/* ---- AVX-512 bodies: 16 elements a step, the tail through masks ---- */

/* VCVTPS2PH with imm RNE is the reference for every input, NaNs included; MXCSR.DAZ could only
 * turn fp32 subnormals into zeros, which they become anyway. */
BRG_AVX512 static void f32_to_f16_avx512(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = brg_step_mask(i, n);
        const __m512 x = _mm512_maskz_loadu_ps(m, src + i);
        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

BRG_AVX512 static void f16_to_f32_avx512(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = brg_step_mask(i, n);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
}

BRG_AVX512 static void f32_to_bf16_avx512(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = brg_step_mask(i, n);
        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(brg_bf16_rne512(_mm512_maskz_loadu_ps(m, src + i))));
    }
}

/* VCVTNEPS2BF16, subnormal lanes fixed up (bf16_round.h). */
BRG_AVX512BF16 static void f32_to_bf16_avx512bf16(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = brg_step_mask(i, n);
        _mm256_mask_storeu_epi16(dst + i, m, brg_bf16_round16(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

BRG_AVX512 static void bf16_to_f32_avx512(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = brg_step_mask(i, n);
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
        _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

/* ---- AVX2 bodies: 8 elements a step; AVX2 has no 16-bit masked moves, so a row's tail goes
 * through a zero-padded copy on the stack ---- */

#define TAIL_VIA_STACK(body, dst_t, src_t, dst, src, i, n)                 \
    do {                                                                   \
        if ((i) < (n)) {                                                   \
            src_t in_[8] = {0};                                            \
            dst_t out_[8];                                                 \
            memcpy(in_, (src) + (i), (size_t)((n) - (i)) * sizeof(src_t)); \
            body(out_, in_, 8);                                            \
            memcpy((dst) + (i), out_, (size_t)((n) - (i)) * sizeof(dst_t)); \
        }                                                                  \
    } while (0)

HALF_AVX2 static void f32_to_f16_avx2(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    TAIL_VIA_STACK(f32_to_f16_avx2, uint16_t, float, dst, src, i, n);
}

HALF_AVX2 static void f16_to_f32_avx2(float *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    TAIL_VIA_STACK(f16_to_f32_avx2, float, uint16_t, dst, src, i, n);
}

HALF_AVX2 static void f32_to_bf16_avx2(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        const __m256i u = _mm256_castps_si256(x);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        r = _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
        /* Every lane is <= 0xFFFF, so the unsigned saturating pack keeps it exactly. */
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
    }
    TAIL_VIA_STACK(f32_to_bf16_avx2, uint16_t, float, dst, src, i, n);
}

HALF_AVX2 static void bf16_to_f32_avx2(float *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    TAIL_VIA_STACK(bf16_to_f32_avx2, float, uint16_t, dst, src, i, n);
}

#define HALF_DISPATCH(path, scalar, avx2, avx512, avx512bf16, ...) \
    switch (path) {                                               \
    case BRG_HALF_AVX512BF16: avx512bf16(__VA_ARGS__); break;     \
    case BRG_HALF_AVX512: avx512(__VA_ARGS__); break;             \
    case BRG_HALF_AVX2: avx2(__VA_ARGS__); break;                 \
    default: scalar(__VA_ARGS__); break;                          \
    }
#else
#define HALF_DISPATCH(path, scalar, avx2, avx512, avx512bf16, ...) scalar(__VA_ARGS__)
#endif

void brg_f32_to_f16_row_with(brg_half_path path, uint16_t *dst, const float *src, int64_t n) {
    HALF_DISPATCH(path, f32_to_f16_scalar, f32_to_f16_avx2, f32_to_f16_avx512, f32_to_f16_avx512, dst, src, n);
}
void brg_f16_to_f32_row_with(brg_half_path path, float *dst, const uint16_t *src, int64_t n) {
    HALF_DISPATCH(path, f16_to_f32_scalar, f16_to_f32_avx2, f16_to_f32_avx512, f16_to_f32_avx512, dst, src, n);
}
void brg_f32_to_bf16_row_with(brg_half_path path, uint16_t *dst, const float *src, int64_t n) {
    HALF_DISPATCH(path, f32_to_bf16_scalar, f32_to_bf16_avx2, f32_to_bf16_avx512, f32_to_bf16_avx512bf16, dst, src,
                  n);
}
void brg_bf16_to_f32_row_with(brg_half_path path, float *dst, const uint16_t *src, int64_t n) {
    HALF_DISPATCH(path, bf16_to_f32_scalar, bf16_to_f32_avx2, bf16_to_f32_avx512, bf16_to_f32_avx512, dst, src, n);
}

void brg_f32_to_f16_row(uint16_t *dst, const float *src, int64_t n) {
    brg_f32_to_f16_row_with(brg_half_path_active(), dst, src, n);
}
void brg_f16_to_f32_row(float *dst, const uint16_t *src, int64_t n) {
    brg_f16_to_f32_row_with(brg_half_path_active(), dst, src, n);
}
void brg_f32_to_bf16_row(uint16_t *dst, const float *src, int64_t n) {
    brg_f32_to_bf16_row_with(brg_half_path_active(), dst, src, n);
}
void brg_bf16_to_f32_row(float *dst, const uint16_t *src, int64_t n) {
    brg_bf16_to_f32_row_with(brg_half_path_active(), dst, src, n);
}

void brg_k_widen(float *dst, const void *src, brg_dtype type, int64_t n) {
    BRG_ASSERT(type == BRG_DTYPE_F16 || type == BRG_DTYPE_BF16);
    if (type == BRG_DTYPE_BF16) brg_bf16_to_f32_row(dst, src, n);
    else brg_f16_to_f32_row(dst, src, n);
}

void brg_k_narrow(void *dst, const float *src, brg_dtype type, int64_t n) {
    BRG_ASSERT(type == BRG_DTYPE_F16 || type == BRG_DTYPE_BF16);
    if (type == BRG_DTYPE_BF16) brg_f32_to_bf16_row(dst, src, n);
    else brg_f32_to_f16_row(dst, src, n);
}
