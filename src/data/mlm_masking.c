/* Masked-LM masking as transformers' DataCollatorForLanguageModeling draws it (selection with
 * mlm_probability; of the selected, mask_replace become the mask token, random_replace a random
 * token, the rest unchanged), from a generator keyed by (seed, epoch, row) so that a step's masks
 * never depend on the batch layout, the order rows are read in, or a resume. */
#include <math.h>

#include "brigade/dataset.h"
#include "brigade/rng.h"

brg_mlm_masking brg_mlm_masking_default(int32_t mask_id, int64_t vocab_size, uint64_t seed) {
    return (brg_mlm_masking){.probability = 0.15, .mask_replace = 0.8, .random_replace = 0.1, .mask_id = mask_id,
                             .vocab_size = vocab_size, .seed = seed};
}

brg_status brg_mlm_masking_validate(const brg_mlm_masking *m) {
    if (!(m->probability > 0 && m->probability < 1))
        return brg_error(BRG_ERR_INVALID_ARG, "mlm probability %g must be in (0, 1)", m->probability);
    if (!(m->mask_replace >= 0 && m->random_replace >= 0 && m->mask_replace + m->random_replace <= 1))
        return brg_error(BRG_ERR_INVALID_ARG, "mask and random replacement rates %g and %g must be >= 0 and add up to "
                         "at most 1", m->mask_replace, m->random_replace);
    if (m->vocab_size < 1 || m->mask_id < 0 || m->mask_id >= m->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG, "mask token id %d is outside the vocabulary [0, %lld)", m->mask_id,
                         (long long)m->vocab_size);
    return BRG_OK;
}

/* splitmix64's finaliser: nearby keys give unrelated streams. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void brg_mlm_mask_row(const brg_mlm_masking *m, int64_t epoch, int64_t row, int32_t *ids, const uint8_t *never_mask,
                      int32_t *labels, int64_t n) {
    brg_rng rng;
    brg_rng_seed(&rng, mix(mix(mix(m->seed) ^ (uint64_t)epoch) ^ (uint64_t)row));
    /* Of the selected tokens not turned into the mask, the share that become random ones. */
    const double rest = 1.0 - m->mask_replace;
    const double random_of_rest = rest > 0 ? m->random_replace / rest : 0.0;
    for (int64_t i = 0; i < n; i++) {
        labels[i] = -100;
        if (never_mask && never_mask[i]) continue;
        if (!(brg_rng_uniform(&rng) < m->probability)) continue;
        labels[i] = ids[i];
        if (brg_rng_uniform(&rng) < m->mask_replace) ids[i] = m->mask_id;
        else if (brg_rng_uniform(&rng) < random_of_rest) ids[i] = (int32_t)(brg_rng_next(&rng) % (uint64_t)m->vocab_size);
    }
}
