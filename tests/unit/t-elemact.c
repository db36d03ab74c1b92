/*
 * Unit tests of elemmath.h's float tanh (elem_tanh) and of the
 * activations and soft-cap built on it: tanh within 2 ulp of double tanh
 * rounded to float, sampled at every 61st float of (-12, 12) and beyond
 * (a prime stride: all exponents and mantissa patterns), exactly +-1
 * past 9.1, odd, NaN for NaN, the same bits in vector code (built with
 * model.c's flags: Makefile) as in scalar code; the GELUs' values against
 * their definitions in double (the tanh form's constants sqrt(2/pi) and
 * 0.044715, erf's), their first and second derivatives against central
 * differences of the double definitions (h = 1e-4: the difference's
 * truncation error h^2 f'''/6 about 1e-9, the float results' rounding
 * about 1e-7 of the values, so within 2e-6; the tanh GELU's second
 * within 5e-6: 1 - t^2 from a float t is off by up to 1.2e-7, times its
 * x u'^2 term, up to 25 at |x| = 4 where 1 - t^2 has not yet vanished),
 * the gated unit's and the
 * soft-cap's forms against the same, and SiLU through the new functions
 * giving SwiGLU's bits.
 */
#include <math.h>
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

static int64_t ordered(float f)
{
	int32_t i;
	memcpy(&i, &f, sizeof i);
	return i < 0 ? -(int64_t)(i & 0x7fffffff) : i;
}

ISA_VECTOR_CLONES
static void tanh_vector(float *restrict out, const float *restrict x, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		out[i] = elem_tanh(x[i]);
}

ISA_VECTOR_CLONES
static void gelu_vector(float *restrict out, const float *restrict x, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		out[i] = elem_glu(ELEM_ACT_GELU_TANH, x[i], 1.5f);
}

/* the definitions, in double */
static double gelu_tanh_ref(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_ref(double x)
{
	return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double silu_ref(double x)
{
	return x / (1 + exp(-x));
}

static double (*const refs[3])(double) = {silu_ref, gelu_tanh_ref, gelu_ref};
static const char *const names[3] = {"SiLU", "tanh GELU", "exact GELU"};

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
		if (!(f > -20 && f < 20))
			continue;
		float got = elem_tanh(f), want = (float)tanh((double)f);
		int64_t d = ordered(got) - ordered(want);
		if (d < 0)
			d = -d;
		if (d > worst) {
			worst = d;
			worst_x = f;
		}
		if (seen++ % 40 == 0 && n < cap)
			x[n++] = f;
	}
	ok(worst <= 2, "tanh within 2 ulp of the rounded tanh over (-20, 20) (worst %lld ulp at %.9g)",
	   (long long)worst, worst_x);
	ok(elem_tanh(0) == 0 && elem_tanh(10) == 1 && elem_tanh(-10) == -1 &&
	   elem_tanh(1000) == 1 && elem_tanh(-INFINITY) == -1 && elem_tanh(0.3f) == -elem_tanh(-0.3f),
	   "tanh: 0 at 0, +-1 far out and at +-Inf, odd");
	ok(isnan(elem_tanh(NAN)), "tanh: NaN for NaN");
	tanh_vector(vec, x, n);
	for (size_t i = 0; i < n; i++) {
		volatile float xi = x[i];
		float s = elem_tanh(xi);
		mismatched += memcmp(&s, &vec[i], sizeof s) != 0;
	}
	ok(n > 10000 && mismatched == 0, "tanh: vector code gives the scalar bits (%zu of %zu differ)",
	   mismatched, n);
	gelu_vector(vec, x, n);
	mismatched = 0;
	for (size_t i = 0; i < n; i++) {
		volatile float xi = x[i];
		float s = elem_glu(ELEM_ACT_GELU_TANH, xi, 1.5f);
		mismatched += memcmp(&s, &vec[i], sizeof s) != 0;
	}
	ok(mismatched == 0, "GeGLU: vector code gives the scalar bits (%zu of %zu differ)", mismatched, n);

	for (int act = 0; act < 3; act++) {
		double e0 = 0, e1 = 0, e2 = 0, h = 1e-4;
		for (double xd = -6; xd <= 6; xd += 0.0137) {
			float xf = (float)xd;
			double v = xf, f = refs[act](v);
			double d1 = (refs[act](v + h) - refs[act](v - h)) / (2 * h);
			double d2 = (refs[act](v + h) - 2 * f + refs[act](v - h)) / (h * h);
			e0 = fmax(e0, fabs(elem_act(act, xf) - f) / (1 + fabs(f)));
			e1 = fmax(e1, fabs(elem_act_d1(act, xf) - d1));
			/* the second difference's rounding: 1e-16 / h^2 = 1e-8 */
			e2 = fmax(e2, fabs(elem_act_d2(act, xf) - d2));
		}
		ok(e0 < 1e-6 && e1 < 2e-6 && e2 < (act == ELEM_ACT_GELU_TANH ? 5e-6 : 2e-6),
		   "%s: value, first and second derivative on [-6, 6] (worst %.2g, %.2g, %.2g)",
		   names[act], e0, e1, e2);
	}
	{
		/* the gated unit's and the plain MLP's forms from the derivatives */
		float g = 0.7f, u = -1.3f, dh = 0.9f, rg = 0.4f, ru = -0.2f, rdh = 0.6f;
		double gd = g, e = 0;
		for (int act = 1; act < 3; act++) {
			float dg, du, rdg, rdu;
			double a = refs[act](gd), d1 = elem_act_d1(act, g), d2 = elem_act_d2(act, g);
			elem_glu_backward(act, dh, g, u, &dg, &du);
			elem_glu_backward_tangent(act, dh, 1, rdh, g, u, rg, ru, &rdg, &rdu);
			e = fmax(e, fabs(elem_glu(act, g, u) - a * u));
			e = fmax(e, fabs(dg - dh * u * d1) + fabs(du - dh * a));
			e = fmax(e, fabs(elem_glu_tangent(act, g, u, rg, ru) - (d1 * rg * u + a * ru)));
			e = fmax(e, fabs(rdg - (rdh * u * d1 + dh * (ru * d1 + u * d2 * rg))));
			e = fmax(e, fabs(rdu - (rdh * a + dh * d1 * rg)));
			e = fmax(e, fabs(elem_act_backward(act, dh, g) - dh * d1));
			e = fmax(e, fabs(elem_act_backward_tangent(act, dh, 1, rdh, g, rg) -
					 (d1 * rdh + d2 * rg * dh)));
			e = fmax(e, fabs(elem_act_backward_tangent(act, dh, 0, rdh, g, rg) - d1 * rdh));
		}
		ok(e < 1e-6, "GeGLU and the plain MLP: backward and tangent forms (worst %.2g)", e);
	}
	{
		/* SiLU through the generic functions: SwiGLU's bits */
		int same = 1;
		for (float v = -5; v < 5; v += 0.173f) {
			float a, b, c, d, w = 0.3f - v;
			same &= elem_glu(ELEM_ACT_SILU, v, w) == elem_swiglu(v, w);
			elem_glu_backward(ELEM_ACT_SILU, 0.7f, v, w, &a, &b);
			elem_swiglu_backward(0.7f, v, w, &c, &d);
			same &= a == c && b == d;
			same &= elem_glu_tangent(ELEM_ACT_SILU, v, w, 0.2f, -0.4f) ==
				elem_swiglu_tangent(v, w, 0.2f, -0.4f);
			elem_glu_backward_tangent(ELEM_ACT_SILU, 0.7f, 1, 0.1f, v, w, 0.2f, -0.4f, &a, &b);
			elem_swiglu_backward_tangent(0.7f, 1, 0.1f, v, w, 0.2f, -0.4f, &c, &d);
			same &= a == c && b == d;
		}
		ok(same, "SiLU through the gated unit's functions: SwiGLU's bits");
	}
	{
		/* soft-cap: cap tanh(x / cap), its backward and tangents against
		 * differences of the double definition */
		double e = 0, cap = 1.5, h = 1e-4;
		for (double xd = -5; xd <= 5; xd += 0.031) {
			float t, y = elem_softcap((float)xd, (float)cap, &t);
			double v = (float)xd, f = cap * tanh(v / cap);
			double d1 = (cap * tanh((v + h) / cap) - cap * tanh((v - h) / cap)) / (2 * h);
			double d2 = (cap * tanh((v + h) / cap) - 2 * f + cap * tanh((v - h) / cap)) / (h * h);
			e = fmax(e, fabs(y - f) + fabs(t - tanh(v / cap)));
			e = fmax(e, fabs(elem_softcap_backward(0.8f, t) - 0.8 * d1));
			/* R{dx} = d1 R{dy} + d2 dy R{x} */
			e = fmax(e, fabs(elem_softcap_backward_tangent(0.8f, 1, 0.3f, t, -0.5f, (float)cap) -
					 (d1 * 0.3 + d2 * 0.8 * -0.5)));
			e = fmax(e, fabs(elem_softcap_backward_tangent(0.8f, 0, 0.3f, t, -0.5f, (float)cap) -
					 d1 * 0.3));
		}
		ok(e < 2e-6, "soft-cap: value, t, backward and tangent (worst %.2g)", e);
	}
	free(x);
	free(vec);
	return tap_done();
}
