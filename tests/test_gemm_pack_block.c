/* The block packers of the AVX-512 and AVX2 GEMM kernels (B not transposed, A transposed: a
 * whole block's micro-panels at once, one source row after the other) write exactly the bytes
 * the per-panel packers write: every source type (fp32, fp16, bf16 bits of any value), widths
 * that leave a partial last panel or a single lane, depths of 1 up to a whole KC, and rows longer
 * than the block (the leading dimension). The destinations start as different garbage, so a lane
 * or panel left unwritten differs; each is exactly the size of the block, so the sanitizer build
 * sees a write past it. */
#include <stdint.h>
#include <string.h>

#include "brigade/rng.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemm_blocked.h"
#include "test_util.h"

typedef void pack_block_fn(void *restrict, int64_t, const void *restrict, int64_t, int64_t, int64_t);

static const char *type_name(brg_dtype t) { return t == BRG_DTYPE_F32 ? "f32" : t == BRG_DTYPE_F16 ? "f16" : "bf16"; }

/* Packs [kc, n] of src (row stride ld) into w-lane panels both ways and compares the bytes. */
static void check_block(const char *kernel, const char *operand, brg_dtype type, brg_pack_cols_fn *panel,
                        pack_block_fn *block, int64_t w, int64_t n, int64_t kc, int64_t ld, brg_rng *rng) {
    const size_t es = type == BRG_DTYPE_F32 ? 4 : 2;
    unsigned char *src = malloc((size_t)(kc * ld) * es);
    for (size_t i = 0; i < (size_t)(kc * ld) * es; i++) src[i] = (unsigned char)brg_rng_next(rng);
    const int64_t panels = (n + w - 1) / w;
    const size_t bytes = (size_t)(panels * w * kc) * sizeof(float);
    float *want = malloc(bytes), *got = malloc(bytes);
    memset(want, 0xA5, bytes);
    memset(got, 0x5A, bytes);
    for (int64_t p = 0; p < panels; p++) {
        const int64_t cols = n - p * w < w ? n - p * w : w;
        panel(want + p * w * kc, w, src + (size_t)(p * w) * es, ld, cols, kc);
    }
    block(got, w, src, ld, n, kc);
    CHECK_MSG(memcmp(want, got, bytes) == 0, "%s %s %s: %lld lanes, depth %lld, ld %lld: the block packer's bytes "
              "differ from the panels'", kernel, operand, type_name(type), (long long)n, (long long)kc, (long long)ld);
    free(src), free(want), free(got);
}

static void check_kernel(const char *name, const brg_gemm_kernel *k, brg_rng *rng) {
    const brg_dtype types[] = {BRG_DTYPE_F32, BRG_DTYPE_F16, BRG_DTYPE_BF16};
    const int64_t depths[] = {1, 7, 64, k->KC};
    for (size_t t = 0; t < 3; t++) {
        const brg_dtype type = types[t];
        CHECK_MSG(k->pack_cols_block[type] && k->pack_cols_a_block[type], "%s %s: no block packer", name,
                  type_name(type));
        if (!k->pack_cols_block[type] || !k->pack_cols_a_block[type]) continue;
        brg_pack_cols_fn *a_panel = k->pack_cols_a[type] ? k->pack_cols_a[type] : k->pack_cols[type];
        const int64_t widths_b[] = {1, k->NR - 1, k->NR, k->NR + 1, 3 * k->NR + 5, k->NC};
        const int64_t widths_a[] = {1, k->MR - 1, k->MR, k->MR + 1, 5 * k->MR + 3, 70};
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
            for (size_t i = 0; i < 6; i++) {
                check_block(name, "B", type, k->pack_cols[type], k->pack_cols_block[type], k->NR, widths_b[i],
                            depths[d], widths_b[i] + (int64_t)(i % 3) * 9, rng);
                check_block(name, "A^T", type, a_panel, k->pack_cols_a_block[type], k->MR, widths_a[i], depths[d],
                            widths_a[i] + (int64_t)(i % 2) * 13, rng);
            }
    }
}

int main(void) {
    brg_rng rng;
    brg_rng_seed(&rng, 31);
    if (brg_isa_hardware(BRG_ISA_AVX512)) check_kernel("avx512", brg_gemm_avx512_kernel(), &rng);
    else printf("SKIP avx512: not on this CPU\n");
    if (brg_isa_hardware(BRG_ISA_AVX2)) check_kernel("avx2", brg_gemm_avx2_kernel(), &rng);
    else printf("SKIP avx2: not on this CPU\n");
    return test_finish();
}
