/* CPU feature detection for the kernel dispatch (see cpu_isa.h). */
#include "kernels/cpu_isa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[] = {"scalar", "avx2", "avx512"};

bool brg_isa_hardware(brg_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    /* libgcc's feature bits already require the OS to save the ymm/zmm and opmask state
     * (XCR0), so a set bit means the instructions are usable, not merely present. */
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    switch (isa) {
    case BRG_ISA_SCALAR: return true;
    case BRG_ISA_AVX2: return avx2;
    case BRG_ISA_AVX512:
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    }
    return false;
#else
    return isa == BRG_ISA_SCALAR;
#endif
}

const char *brg_isa_name(brg_isa isa) {
    return (unsigned)isa < sizeof isa_names / sizeof *isa_names ? isa_names[isa] : "unknown";
}

bool brg_isa_parse(const char *name, brg_isa *out) {
    for (int i = 0; i < (int)(sizeof isa_names / sizeof *isa_names); i++) {
        if (name && strcmp(name, isa_names[i]) == 0) {
            *out = (brg_isa)i;
            return true;
        }
    }
    return false;
}

bool brg_cpu_is_amd(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}

static brg_isa detected = BRG_ISA_SCALAR;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    brg_isa best = BRG_ISA_SCALAR;
    if (brg_isa_hardware(BRG_ISA_AVX512)) best = BRG_ISA_AVX512;
    else if (brg_isa_hardware(BRG_ISA_AVX2)) best = BRG_ISA_AVX2;
    const char *env = getenv("BRIGADE_ISA");
    brg_isa cap;
    if (env && *env) {
        if (!brg_isa_parse(env, &cap))
            /* A typo must not silently test or benchmark the wrong kernels. */
            fprintf(stderr, "brigade: BRIGADE_ISA=%s is not one of scalar, avx2, avx512; using %s\n", env,
                    isa_names[best]);
        else if (cap < best)
            best = cap;
    }
    detected = best;
}

brg_isa brg_isa_detected(void) {
    pthread_once(&detect_once, detect);
    return detected;
}
