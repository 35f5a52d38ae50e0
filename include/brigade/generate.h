/* Greedy decoding for causal language models (one device, no cache: the whole prefix is run
 * again for every new token, which is fine for the small models and short samples it serves). */
#ifndef BRIGADE_GENERATE_H
#define BRIGADE_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "brigade/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Appends up to max_new tokens to ids[0..n) (capacity `cap`), stopping after `stop_id` (pass -1
 * for none) or at the model's position limit. *out_len receives the new length. */
brg_status brg_generate_greedy(brg_model *model, int32_t *ids, int64_t n, int64_t cap, int64_t max_new,
                               int32_t stop_id, int64_t *out_len);

/* Writes byte-level tokens (id = byte) as text that cannot drive a terminal: printable ASCII and
 * well-formed UTF-8 as they are; control bytes (newline included, so a sample stays on its
 * line), DEL, C1 controls and bytes of broken UTF-8 as \n, \t, \r or \xHH; a backslash as \\;
 * ids past 255 as '?'. */
void brg_generate_write_text(FILE *f, const int32_t *ids, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
