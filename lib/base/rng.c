/* rng.c - xoshiro256** with splitmix64 seeding (see rng.h). */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void rng_seed(struct sw_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(struct sw_rng *r)
{
	uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double rng_uniform(struct sw_rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

double rng_normal(struct sw_rng *r)
{
	double u1 = rng_uniform(r), u2 = rng_uniform(r);

	/* 1 - u1 is in (0, 1]: log never sees 0 */
	return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}
