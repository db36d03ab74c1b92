/*
 * rng.h - a small, fast, reproducible random number generator
 * (xoshiro256**, seeded through splitmix64). The state is a value the
 * caller owns: no hidden global state, so runs are deterministic per seed.
 */
#ifndef SW_RNG_H
#define SW_RNG_H

#include <stdint.h>

struct sw_rng {
	uint64_t s[4];
};

void rng_seed(struct sw_rng *r, uint64_t seed);
uint64_t rng_next(struct sw_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(struct sw_rng *r);
/* Standard normal (Box-Muller, one value per call). */
double rng_normal(struct sw_rng *r);

#endif
