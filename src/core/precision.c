/* Precision modes (names, their compute and master types) and the calling thread's product
 * precision, which brg_gemm reads. */
#include "brigade/precision.h"

#include <ctype.h>
#include <string.h>

static const char *const names[BRG_PRECISION_COUNT] = {"32.32", "16.32", "16.16", "bf16.32", "bf16.16"};

const char *brg_precision_name(brg_precision p) {
    return (unsigned)p < BRG_PRECISION_COUNT ? names[p] : "unknown";
}

/* Lower-cases `text` into buf without a leading "fp" (Graphcore's examples write FP16.32). */
static void normalise(const char *text, char *buf, size_t cap) {
    size_t n = 0;
    if ((text[0] == 'f' || text[0] == 'F') && (text[1] == 'p' || text[1] == 'P')) text += 2;
    for (; text[n] && n + 1 < cap; n++) buf[n] = (char)tolower((unsigned char)text[n]);
    buf[n] = '\0';
}

brg_status brg_precision_parse(const char *text, brg_precision *out) {
    char buf[16];
    normalise(text ? text : "", buf, sizeof buf);
    for (int p = 0; p < BRG_PRECISION_COUNT; p++)
        if (strcmp(buf, names[p]) == 0) return *out = (brg_precision)p, BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG,
                     "precision '%s' is not one of 32.32, 16.32, 16.16, bf16.32, bf16.16 (compute type . master type)",
                     text ? text : "");
}

brg_dtype brg_precision_compute_dtype(brg_precision p) {
    switch (p) {
    case BRG_PRECISION_16_32:
    case BRG_PRECISION_16_16: return BRG_DTYPE_F16;
    case BRG_PRECISION_BF16_32:
    case BRG_PRECISION_BF16_16: return BRG_DTYPE_BF16;
    default: return BRG_DTYPE_F32;
    }
}

brg_dtype brg_precision_master_dtype(brg_precision p) {
    switch (p) {
    case BRG_PRECISION_16_16: return BRG_DTYPE_F16;
    case BRG_PRECISION_BF16_16: return BRG_DTYPE_BF16;
    default: return BRG_DTYPE_F32;
    }
}

brg_dtype brg_precision_activation_dtype(brg_precision p) { return brg_precision_master_dtype(p); }

static _Thread_local brg_dtype compute_dtype = BRG_DTYPE_F32;

brg_dtype brg_compute_dtype_set(brg_dtype dtype) {
    brg_dtype before = compute_dtype;
    compute_dtype = dtype == BRG_DTYPE_F16 || dtype == BRG_DTYPE_BF16 ? dtype : BRG_DTYPE_F32;
    return before;
}

brg_dtype brg_compute_dtype(void) { return compute_dtype; }

brg_status brg_compute_dtype_check(brg_dtype dtype) {
    if (dtype == BRG_DTYPE_F32 || dtype == BRG_DTYPE_F16 || dtype == BRG_DTYPE_BF16) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG, "products compute in F32, F16 or BF16, not %s", brg_dtype_name(dtype));
}
