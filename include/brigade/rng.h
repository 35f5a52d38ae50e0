/* A small seeded generator (xoshiro256**) for initialisation and data shuffling. */
#ifndef BRIGADE_RNG_H
#define BRIGADE_RNG_H

#include <stdint.h>

typedef struct brg_rng {
    uint64_t s[4];
} brg_rng;

void brg_rng_seed(brg_rng *rng, uint64_t seed);
uint64_t brg_rng_next(brg_rng *rng);
/* Uniform in [0, 1). */
double brg_rng_uniform(brg_rng *rng);
/* Standard normal (Box-Muller). */
double brg_rng_normal(brg_rng *rng);

#endif
