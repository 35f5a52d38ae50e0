/* --precision for the commands that only run forward passes (forward, embed, pipeline) and for
 * inference plans. */
#ifndef BRIGADE_CLI_PRECISION_FLAG_H
#define BRIGADE_CLI_PRECISION_FLAG_H

#include "brigade/precision.h"

/* The products' type of `text` (NULL: fp32). The .32 modes only: a forward pass computes on the
 * weights as they were loaded, so half master weights (.16) mean nothing here. */
brg_status cli_forward_precision(const char *text, brg_dtype *compute);

#define CLI_PRECISION_HELP "products in 32.32 (default), bf16.32 or 16.32: operands rounded, fp32 sums"

#endif
