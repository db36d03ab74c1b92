/*
 * Unit tests of elemmath.h's float exp (elem_exp), which the softmax,
 * the loss and SwiGLU run on: within 1 ulp of the correctly rounded
 * exp (double exp rounded to float) over the range where it is neither 0
 * nor Inf, sampled at every 61st float (a prime stride: all exponents and
 * mantissa patterns), its stated edges (0 below -86.6, Inf above 88.72,
 * NaN for NaN), and the same bits in vector code (the loop below, built
 * with model.c's flags and for its CPUs: Makefile) as in scalar code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/elemmath.h"
#include "../../lib/base/isa.h"
#include "tap.h"

static float from_bits(uint32_t b)
{
	float f;
	memcpy(&f, &b, sizeof f);
	return f;
}

/* floats in order as integers, for distances in ulps */
static int64_t ordered(float f)
{
	int32_t i;
	memcpy(&i, &f, sizeof i);
	return i < 0 ? -(int64_t)(i & 0x7fffffff) : i;
}

/* out[i] = elem_exp(x[i]) in the widest vectors there are */
ISA_VECTOR_CLONES
static void exp_vector(float *restrict out, const float *restrict x, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		out[i] = elem_exp(x[i]);
}

int main(void)
{
	int64_t worst = 0;
	float worst_x = 0;
	size_t n = 0, cap = 1 << 20, mismatched = 0, seen = 0;
	float *x = malloc(cap * sizeof *x), *vec = malloc(cap * sizeof *vec);

	if (!x || !vec)
		return 70;
	for (uint64_t b = 0; b <= 0xffffffffu; b += 61) {
		float f = from_bits((uint32_t)b);
		if (!(f > -86.6f && f < 88.72f))
			continue;
		float got = elem_exp(f), want = (float)exp((double)f);
		int64_t d = ordered(got) - ordered(want);
		if (d < 0)
			d = -d;
		if (d > worst) {
			worst = d;
			worst_x = f;
		}
		/* every 40th for the vector check: spread over the whole range */
		if (seen++ % 40 == 0 && n < cap)
			x[n++] = f;
	}
	ok(worst <= 1, "within 1 ulp of the rounded exp over (-86.6, 88.72) (worst %lld ulp at %.9g)",
	   (long long)worst, worst_x);
	ok(elem_exp(0) == 1 && elem_exp(-0.0f) == 1, "exp(0) is 1");
	ok(elem_exp(88.73f) == INFINITY && elem_exp(1000) == INFINITY && elem_exp(INFINITY) == INFINITY,
	   "Inf above 88.72");
	ok(elem_exp(-86.61f) == 0 && elem_exp(-1000) == 0 && elem_exp(-INFINITY) == 0, "0 below -86.6");
	ok(elem_exp(-86.5f) > 0 && elem_exp(88.7f) < INFINITY, "finite and positive just inside");
	ok(isnan(elem_exp(NAN)), "NaN for NaN");
	exp_vector(vec, x, n);
	for (size_t i = 0; i < n; i++) {
		volatile float xi = x[i];       /* one call, in scalar code */
		float s = elem_exp(xi);
		mismatched += memcmp(&s, &vec[i], sizeof s) != 0;
	}
	ok(n > 900000 && x[n - 1] < -86 && mismatched == 0,
	   "vector code gives the scalar bits (%zu of %zu differ, %g to %g)", mismatched, n, x[0], x[n - 1]);
	free(x);
	free(vec);
	return tap_done();
}
