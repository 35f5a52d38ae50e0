/* The instruction sets the kernels can use, detected once per process (internal to the library
 * and its tests).
 *
 * Every SIMD body is compiled per function with a target attribute, never with global -m flags,
 * so the library runs on any x86-64 CPU; these functions say which bodies may run.
 *
 * BRIGADE_ISA=avx512|avx2|scalar caps what detection reports, so an AVX-512 machine can run
 * exactly the defaults an AVX2-only or a pre-AVX2 machine would get (as oneDNN's
 * ONEDNN_MAX_CPU_ISA does); it never raises the level above what the CPU has. */
#ifndef BRIGADE_KERNELS_CPU_ISA_H
#define BRIGADE_KERNELS_CPU_ISA_H

#include <stdbool.h>

/* Ordered: a level includes everything below it. */
typedef enum brg_isa {
    BRG_ISA_SCALAR = 0, /* plain C loops */
    BRG_ISA_AVX2 = 1,   /* AVX2 + FMA (Haswell, Zen 1-4, Intel client CPUs since Alder Lake) */
    BRG_ISA_AVX512 = 2, /* AVX-512 F/BW/DQ/VL + FMA (Skylake-SP and later servers, Zen 4/5) */
} brg_isa;

/* True when the CPU and the OS (saved register state) support the level's instructions,
 * whatever BRIGADE_ISA says. */
bool brg_isa_hardware(brg_isa isa);

/* The highest level the CPU supports, capped by BRIGADE_ISA. */
brg_isa brg_isa_detected(void);

/* "scalar", "avx2", "avx512". */
const char *brg_isa_name(brg_isa isa);

/* Parses a level's name; false when `name` is none of them. */
bool brg_isa_parse(const char *name, brg_isa *out);

/* True on an AMD CPU: for the few tuning choices measured to differ between AMD and Intel cores
 * (a prefetch distance), never for what a kernel may run. */
bool brg_cpu_is_amd(void);

#endif
