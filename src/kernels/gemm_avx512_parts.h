/* Parts shared by the AVX-512 GEMM kernels (gemm_avx512.c, gemm_bf16.c): lane masks, the
 * in-register 16x16 transpose of 32-bit elements that packing uses, and the store of a tile's
 * accumulators into C (internal). Include after
 * <immintrin.h>; the functions inline into callers compiled for AVX-512. */
#ifndef BRIGADE_KERNELS_GEMM_AVX512_PARTS_H
#define BRIGADE_KERNELS_GEMM_AVX512_PARTS_H

#include <immintrin.h>
#include <stdint.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define AVX512_INLINE static inline __attribute__((always_inline)) AVX512

/* The mask of the first n lanes (n clamped to [0, 16]). */
static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* In-register transpose: on entry r[row] holds row `row` (16 lanes = 16 columns); on exit
 * r[col] holds column `col` (16 lanes = 16 rows). Three shuffle stages of 32-bit, 64-bit and
 * 128-bit granularity. */
AVX512_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* After this stage, 128-bit lane L of s[4g + q] holds rows 4g..4g+3 of column 4L + q. */
    __m512 s[16];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512d a0 = _mm512_castps_pd(t[4 * g]), a1 = _mm512_castps_pd(t[4 * g + 1]);
        __m512d a2 = _mm512_castps_pd(t[4 * g + 2]), a3 = _mm512_castps_pd(t[4 * g + 3]);
        s[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        s[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        s[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        s[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* Gather lane L of s[q], s[4+q], s[8+q], s[12+q] into column 4L + q. */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512 lo01 = _mm512_shuffle_f32x4(s[q], s[4 + q], 0x44);      /* lanes 0,1 of each */
        __m512 hi01 = _mm512_shuffle_f32x4(s[8 + q], s[12 + q], 0x44);
        __m512 lo23 = _mm512_shuffle_f32x4(s[q], s[4 + q], 0xEE);      /* lanes 2,3 of each */
        __m512 hi23 = _mm512_shuffle_f32x4(s[8 + q], s[12 + q], 0xEE);
        r[q] = _mm512_shuffle_f32x4(lo01, hi01, 0x88);
        r[4 + q] = _mm512_shuffle_f32x4(lo01, hi01, 0xDD);
        r[8 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0xDD);
    }
}

/* C[0:mr, 0:nr] = alpha * acc + beta * C for a tile of ROWS x 32 accumulators: fl(alpha acc),
 * then one FMA with beta * C unless beta == 0 (C is then never read). */
AVX512_INLINE void brg_avx512_tile_store(const int ROWS, __m512 acc[][2], float *c, int64_t ldc, float alpha,
                                         float beta, int64_t mr, int64_t nr) {
    enum { NR = 32, NV = 2 };
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    if (mr == ROWS && nr == NR) {
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; i++) {
            float *ci = c + i * ldc;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                __m512 r = _mm512_mul_ps(acc[i][v], va);
                if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16 * v), r);
                _mm512_storeu_ps(ci + 16 * v, r);
            }
        }
        return;
    }
    __mmask16 mask[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) mask[v] = lanes(nr - 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m512 r = _mm512_mul_ps(acc[i][v], va);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + 16 * v), r);
            _mm512_mask_storeu_ps(ci + 16 * v, mask[v], r);
        }
    }
}

#endif
