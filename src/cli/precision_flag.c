#include "precision_flag.h"

brg_status cli_forward_precision(const char *text, brg_dtype *compute) {
    *compute = BRG_DTYPE_F32;
    if (!text) return BRG_OK;
    brg_precision p;
    BRG_TRY(brg_precision_parse(text, &p));
    if (brg_precision_master_dtype(p) != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "--precision %s keeps half master weights, which only training has: a forward pass computes "
                         "on the weights as loaded (use %s.32)",
                         text, brg_precision_compute_dtype(p) == BRG_DTYPE_BF16 ? "bf16" : "16");
    *compute = brg_precision_compute_dtype(p);
    return BRG_OK;
}
