/* Ops that gather and pack per-row results: the heads of the base models and of GPT-2's
 * sequence classifier. (Internal: the models use them; the public op set is brigade/ops.h.) */
#ifndef BRIGADE_AUTOGRAD_OPS_PACK_H
#define BRIGADE_AUTOGRAD_OPS_PACK_H

#include "brigade/ops.h"

/* y [B, na + nb]: each row is a's row (flattened) followed by b's; a and b are [B, ...]. */
brg_status brg_concat_rows(brg_tape *tape, brg_tensor *a, brg_tensor *b, brg_tensor **y);
/* y [B, C] = x[b, index[b], :] for x [B, T, C] and index I32 [B] with values in [0, T). */
brg_status brg_gather_positions(brg_tape *tape, brg_tensor *x, brg_tensor *index, brg_tensor **y);

#endif
