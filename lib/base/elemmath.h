/*
 * elemmath.h - the per-element math of the model and the optimizers, in
 * one place for both back ends. lib/model/cpukern.c and lib/model/optim.c (the CPU
 * reference) call these functions, and so do the CUDA kernels of
 * lib/model/cuda/kernels.h, for which nvcc compiles them __host__ __device__: the
 * CPU tests exercise the GPU's arithmetic (docs/cuda.md).
 *
 * Each function is the arithmetic of one element in the CPU reference's
 * order and types (a float product stays a float product, a sum in double
 * stays in double), so the CPU gives the same bits as before they existed:
 * with -std=c17 gcc contracts no a*b+c into an FMA, and lib/model/cuda is built
 * with nvcc -fmad=false for the same reason.
 *
 * elem_real is model.h's `real`: float, or double with SW_REAL_DOUBLE (the
 * gradient check compiles the model in double). Letters as in model.h.
 */
#ifndef SW_ELEMMATH_H
#define SW_ELEMMATH_H

#include <math.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __CUDACC__
#define SW_HD __host__ __device__
#else
#define SW_HD
#endif
/* inlined whatever the compiler weighs: the activations' functions are
 * too large for gcc to inline by itself, and a call per element keeps
 * the loops around them scalar */
#if defined(__GNUC__) && !defined(__CUDACC__)
#define SW_ALWAYS_INLINE __attribute__((always_inline))
#else
#define SW_ALWAYS_INLINE
#endif

#ifdef SW_REAL_DOUBLE
typedef double elem_real;
#else
typedef float elem_real;
#endif

/*
 * exp in the working precision. In float not libm's expf (a call per
 * element, which keeps every loop around it scalar) but Cephes' expf,
 * inline and branch-free so the loops of the softmax and SwiGLU run in
 * vectors, and the same bits in a vector lane as in scalar code (the
 * CUDA kernels and their host emulation included): exp(x) = 2^n exp(r),
 * n = round(x / ln 2), r = x - n ln 2 with ln 2 in two parts (Cody-Waite),
 * exp(r) by its degree-7 polynomial. Within 1 ulp of the correctly rounded
 * value, as expf is (every float checked once; tests/unit/t-elemexp.c
 * samples them); below
 * -86.6 (results under 2.4e-38) it gives 0 where expf gives a tiny or
 * subnormal number, above 88.72 Inf, NaN for NaN. In double, exp.
 */
SW_HD static inline elem_real elem_exp(elem_real x)
{
#ifdef SW_REAL_DOUBLE
	return exp(x);
#else
	const float hi = 88.72283935546875f, lo = -86.6f;
	union {
		float f;
		int32_t i;
	} scale;
	float xc = x > hi ? hi : x < lo ? lo : x, n, r, y;

	xc = x == x ? xc : 0;           /* NaN: no conversion to int of it */
	/* round to nearest by the 1.5 * 2^23 trick (rintf is a call without SSE4.1) */
	n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	r = xc - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
	      4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
	y = y * (r * r) + r + 1;
	/* 2^n as 2^(n-1) * 2: n runs from -125 to 128 */
	scale.i = ((int32_t)n + 126) << 23;
	y = y * scale.f * 2;
	y = x > hi ? INFINITY : y;
	y = x < lo ? 0 : y;
	return x == x ? y : x;
#endif
}

/* ---- RMSNorm: y = g * x * r, r = (mean(x^2) + eps)^(-1/2) ---------------- */

/* r from the row's sum of squares, summed in double */
SW_HD static inline elem_real elem_rmsnorm_rstd(double sumsq, int C, double eps)
{
	return (elem_real)(1.0 / sqrt(sumsq / C + eps));
}

/* y = x r g (g = 1 without a gain) */
SW_HD static inline elem_real elem_rmsnorm_out(elem_real x, elem_real r, elem_real g)
{
	return x * r * g;
}

/* dL/dg's term of one row: dy xhat, xhat = x r */
SW_HD static inline elem_real elem_rmsnorm_dgain(elem_real dy, elem_real x, elem_real r)
{
	return dy * x * r;
}

/* the row's dot(dxhat, xhat) term, in double: dxhat = dy g */
SW_HD static inline double elem_rmsnorm_dot(elem_real dy, elem_real g, elem_real x, elem_real r)
{
	return (double)dy * g * x * r;
}

/* mean(dxhat * xhat) over the row from its dot */
SW_HD static inline elem_real elem_rmsnorm_mean(double dot, int C)
{
	return (elem_real)(dot / C);
}

/* dx = r (dxhat - xhat mean(dxhat xhat)), the backward of y = g x r */
SW_HD static inline elem_real elem_rmsnorm_dx(elem_real dy, elem_real g, elem_real x, elem_real r,
					      elem_real mean)
{
	elem_real xhat = x * r, dxhat = dy * g;
	return r * (dxhat - xhat * mean);
}

/* ---- LayerNorm: y = g (x - mu) r + b, r = (var(x) + eps)^(-1/2) ---------
 * (GPT-2's; the biased variance of the row, as torch's layer_norm). The
 * row's sums in double: mu from sum x, var from sum (x - mu)^2 with mu
 * rounded to the working precision (two passes); xhat = (x - mu) r. */

/* mu from the row's sum */
SW_HD static inline elem_real elem_layernorm_mean(double sum, int C)
{
	return (elem_real)(sum / C);
}

/* the centered square's term of the variance's sum */
SW_HD static inline double elem_layernorm_sq(elem_real x, elem_real mu)
{
	elem_real d = x - mu;
	return (double)d * d;
}

/* r from the sum of (x - mu)^2 */
SW_HD static inline elem_real elem_layernorm_rstd(double sumsq, int C, double eps)
{
	return (elem_real)(1.0 / sqrt(sumsq / C + eps));
}

/* y = (x - mu) r g + b (g = 1 without a gain, b = 0 without a bias) */
SW_HD static inline elem_real elem_layernorm_out(elem_real x, elem_real mu, elem_real r,
						 elem_real g, elem_real b)
{
	return (x - mu) * r * g + b;
}

/* dL/dg's term of one row: dy xhat (dL/db's is dy) */
SW_HD static inline elem_real elem_layernorm_dgain(elem_real dy, elem_real x, elem_real mu,
						   elem_real r)
{
	return dy * ((x - mu) * r);
}

/* the row's terms of mean(dxhat) and mean(dxhat xhat), in double:
 * dxhat = dy g */
SW_HD static inline double elem_layernorm_dot(elem_real dy, elem_real g, elem_real x, elem_real mu,
					      elem_real r)
{
	return (double)(dy * g) * ((x - mu) * r);
}

/* dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), the backward of
 * y = g xhat + b; m1, m2 those means (elem_rmsnorm_mean of the sums) */
SW_HD static inline elem_real elem_layernorm_dx(elem_real dy, elem_real g, elem_real x, elem_real mu,
						elem_real r, elem_real m1, elem_real m2)
{
	elem_real xhat = (x - mu) * r, dxhat = dy * g;
	return r * (dxhat - m1 - xhat * m2);
}

/* ---- RoPE, rotate-half: (a, b) = (x_i, x_{i+hd/2}) turns by angle t theta_i */

SW_HD static inline void elem_rope_forward(elem_real *a, elem_real *b, elem_real c, elem_real s)
{
	elem_real x = *a, y = *b;
	*a = x * c - y * s;
	*b = y * c + x * s;
}

/* the transpose of the rotation: the rotation back */
SW_HD static inline void elem_rope_backward(elem_real *a, elem_real *b, elem_real c, elem_real s)
{
	elem_real x = *a, y = *b;
	*a = x * c + y * s;
	*b = y * c - x * s;
}

/* ---- softmax, cross-entropy ------------------------------------------------ */

/* 1/sum of the row's exponentials (summed in double) */
SW_HD static inline elem_real elem_softmax_inv(double sum)
{
	return (elem_real)(1.0 / sum);
}

/* -log p of the target, p floored at 1e-300 */
SW_HD static inline elem_real elem_xent_loss(elem_real p)
{
	return (elem_real)-log((double)p > 1e-300 ? (double)p : 1e-300);
}

/* dL/dlogit = (p - onehot(target)) scale, as p scale, then scale off the target */
SW_HD static inline elem_real elem_xent_dlogit(elem_real p, int is_target, elem_real scale)
{
	elem_real d = p * scale;
	return is_target ? d - scale : d;
}

/* attention's softmax backward, with the score scale: dS = P (dP - sum_j P dP) scale */
SW_HD static inline elem_real elem_softmax_dscore(elem_real p, elem_real dp, double sum, elem_real scale)
{
	return p * (dp - (elem_real)sum) * scale;
}

/* the same through a soft-cap of the scores (y = cap tanh(s / cap), t the
 * forward's tanh): dS = P (dP - sum_j P dP) (1 - t^2) scale */
SW_HD static inline elem_real elem_softmax_dscore_capped(elem_real p, elem_real dp, double sum,
							 elem_real t, elem_real scale)
{
	return p * (dp - (elem_real)sum) * (1 - t * t) * scale;
}

/* ---- SwiGLU: h = silu(gate) up, silu(x) = x sigmoid(x) --------------------- */

SW_HD static inline elem_real elem_sigmoid(elem_real x)
{
	return 1 / (1 + elem_exp(-x));
}

SW_HD static inline elem_real elem_swiglu(elem_real gate, elem_real up)
{
	return gate * elem_sigmoid(gate) * up;
}

/* the terms added to dgate and dup: d silu(x)/dx = s (1 + x (1 - s)) */
SW_HD static inline void elem_swiglu_backward(elem_real dh, elem_real gate, elem_real up,
					      elem_real *dgate, elem_real *dup)
{
	elem_real s = elem_sigmoid(gate);
	*dgate = dh * up * s * (1 + gate * (1 - s));
	*dup = dh * gate * s;
}

/* The R-operator's tangents of SwiGLU (modelhvp.h): R{h} = silu'(a) R{a}
 * u + silu(a) R{u}; of its backward (da = dh u silu'(a), du = dh silu(a)),
 * with silu''(a) = s (1 - s) (2 + a (1 - 2 s)): R{da} = R{dh} u silu' + dh
 * (R{u} silu' + u silu'' R{a}), R{du} = R{dh} silu + dh silu' R{a}. Gauss-
 * Newton (no primal dh): has_dh 0. */
SW_HD static inline elem_real elem_swiglu_tangent(elem_real gate, elem_real up, elem_real rgate,
						  elem_real rup)
{
	elem_real s = elem_sigmoid(gate), a = gate;
	return s * (1 + a * (1 - s)) * rgate * up + a * s * rup;
}

SW_HD static inline void elem_swiglu_backward_tangent(elem_real dh, int has_dh, elem_real rdh,
						      elem_real gate, elem_real up,
						      elem_real rgate, elem_real rup,
						      elem_real *rdgate, elem_real *rdup)
{
	elem_real s = elem_sigmoid(gate), a = gate, d1 = s * (1 + a * (1 - s));
	elem_real d2 = s * (1 - s) * (2 + a * (1 - 2 * s));
	*rdgate = rdh * up * d1 + (has_dh ? dh * (rup * d1 + up * d2 * rgate) : 0);
	*rdup = rdh * a * s + (has_dh ? dh * d1 * rgate : 0);
}

/* ---- tanh, the GELUs, the gated unit with any activation, soft-capping ---- */

/*
 * tanh in the working precision. In float Cephes' tanhf, inline and
 * branch-free like elem_exp (both arms computed, one kept), so that the
 * loops over it vectorize and a CUDA kernel gives the CPU's bits: below
 * |x| = 0.625 its odd polynomial, above 1 - 2 / (exp(2|x|) + 1) with the
 * sign; within 2 ulp of tanh (tests/unit/t-elemact.c). exp overflowing
 * gives 1, NaN stays NaN. In double, tanh.
 */
SW_HD SW_ALWAYS_INLINE static inline elem_real elem_tanh(elem_real x)
{
#ifdef SW_REAL_DOUBLE
	return tanh(x);
#else
	float ax = x < 0 ? -x : x, z = x * x, p, e, big;

	p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
	      1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
	e = elem_exp(2 * ax);
	big = 1 - 2 / (e + 1);
	big = x < 0 ? -big : big;
	return ax < 0.625f ? p : big;
#endif
}

/*
 * The activations, by model.h's enum model_act (its values: SiLU 0, the
 * tanh GELU 1, the exact GELU 2; model.c asserts they agree):
 *   SiLU      x s(x), s the sigmoid
 *   GELU tanh 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 *             (transformers' gelu_new, gelu_pytorch_tanh)
 *   GELU      x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (nn.GELU(), nanoGPT's),
 *             erf in double (no float erf is both inline and exact) and
 *             rounded once
 * and their first and second derivatives, which the backward and the
 * R-operator's passes run:
 *   SiLU      s (1 + x (1 - s));  s (1 - s) (2 + x (1 - 2 s))
 *   GELU tanh 0.5 (1 + t) + 0.5 x (1 - t^2) u',  u' = k (1 + 3a x^2);
 *             (1 - t^2) (u' - x t u'^2 + 3 a k x^2)   (t = tanh u)
 *   GELU      Phi + x phi;  phi (2 - x^2)   (phi the normal density)
 * SiLU's forms are SwiGLU's below, in the order they always were.
 */
enum { ELEM_ACT_SILU, ELEM_ACT_GELU_TANH, ELEM_ACT_GELU };
#define ELEM_GELU_K 0.7978845608028654      /* sqrt(2/pi) */
#define ELEM_GELU_A 0.044715
#define ELEM_SQRT1_2 0.70710678118654752440
#define ELEM_INV_SQRT_2PI 0.39894228040143267794

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_gelu_tanh_u(elem_real x)
{
	return (elem_real)ELEM_GELU_K * (x + (elem_real)ELEM_GELU_A * x * x * x);
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_act(int act, elem_real x)
{
	if (act == ELEM_ACT_GELU_TANH)
		return (elem_real)0.5 * x * (1 + elem_tanh(elem_gelu_tanh_u(x)));
	if (act == ELEM_ACT_GELU)
		return (elem_real)(0.5 * (double)x * (1 + erf((double)x * ELEM_SQRT1_2)));
	return x * elem_sigmoid(x);
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_act_d1(int act, elem_real x)
{
	if (act == ELEM_ACT_GELU_TANH) {
		elem_real t = elem_tanh(elem_gelu_tanh_u(x));
		elem_real du = (elem_real)ELEM_GELU_K * (1 + (elem_real)(3 * ELEM_GELU_A) * x * x);
		return (elem_real)0.5 * (1 + t) + (elem_real)0.5 * x * (1 - t * t) * du;
	}
	if (act == ELEM_ACT_GELU) {
		double xd = x, phi = ELEM_INV_SQRT_2PI * exp(-0.5 * xd * xd);
		return (elem_real)(0.5 * (1 + erf(xd * ELEM_SQRT1_2)) + xd * phi);
	}
	elem_real s = elem_sigmoid(x);
	return s * (1 + x * (1 - s));
}

/* act(x) and act'(x) at once: one tanh (one sigmoid), the same bits as
 * elem_act's and elem_act_d1's */
SW_HD SW_ALWAYS_INLINE static inline void elem_act_and_d1(int act, elem_real x, elem_real *a,
							   elem_real *d1)
{
	if (act == ELEM_ACT_GELU_TANH) {
		elem_real t = elem_tanh(elem_gelu_tanh_u(x));
		elem_real du = (elem_real)ELEM_GELU_K * (1 + (elem_real)(3 * ELEM_GELU_A) * x * x);
		*a = (elem_real)0.5 * x * (1 + t);
		*d1 = (elem_real)0.5 * (1 + t) + (elem_real)0.5 * x * (1 - t * t) * du;
		return;
	}
	if (act == ELEM_ACT_GELU) {
		*a = elem_act(act, x);
		*d1 = elem_act_d1(act, x);
		return;
	}
	elem_real s = elem_sigmoid(x);
	*a = x * s;
	*d1 = s * (1 + x * (1 - s));
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_act_d2(int act, elem_real x)
{
	if (act == ELEM_ACT_GELU_TANH) {
		elem_real t = elem_tanh(elem_gelu_tanh_u(x));
		elem_real du = (elem_real)ELEM_GELU_K * (1 + (elem_real)(3 * ELEM_GELU_A) * x * x);
		return (1 - t * t) * (du - x * t * du * du +
				      (elem_real)(3 * ELEM_GELU_A * ELEM_GELU_K) * x * x);
	}
	if (act == ELEM_ACT_GELU) {
		double xd = x, phi = ELEM_INV_SQRT_2PI * exp(-0.5 * xd * xd);
		return (elem_real)(phi * (2 - xd * xd));
	}
	elem_real s = elem_sigmoid(x);
	return s * (1 - s) * (2 + x * (1 - 2 * s));
}

/* The gated unit h = act(gate) up (SwiGLU with SiLU, GeGLU with a GELU),
 * its backward's terms (dgate = dh up act'(gate), dup = dh act(gate)),
 * and the R-operator's tangents of both as SwiGLU's above with act's
 * derivatives. SiLU runs SwiGLU's own functions: the bits they gave. */
SW_HD SW_ALWAYS_INLINE static inline elem_real elem_glu(int act, elem_real gate, elem_real up)
{
	if (act == ELEM_ACT_SILU)
		return elem_swiglu(gate, up);
	return elem_act(act, gate) * up;
}

SW_HD SW_ALWAYS_INLINE static inline void elem_glu_backward(int act, elem_real dh, elem_real gate, elem_real up,
					   elem_real *dgate, elem_real *dup)
{
	if (act == ELEM_ACT_SILU) {
		elem_swiglu_backward(dh, gate, up, dgate, dup);
		return;
	}
	elem_real a, d1;
	elem_act_and_d1(act, gate, &a, &d1);
	*dgate = dh * up * d1;
	*dup = dh * a;
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_glu_tangent(int act, elem_real gate, elem_real up,
					       elem_real rgate, elem_real rup)
{
	elem_real a, d1;

	if (act == ELEM_ACT_SILU)
		return elem_swiglu_tangent(gate, up, rgate, rup);
	elem_act_and_d1(act, gate, &a, &d1);
	return d1 * rgate * up + a * rup;
}

SW_HD SW_ALWAYS_INLINE static inline void elem_glu_backward_tangent(int act, elem_real dh, int has_dh,
						   elem_real rdh, elem_real gate, elem_real up,
						   elem_real rgate, elem_real rup,
						   elem_real *rdgate, elem_real *rdup)
{
	elem_real a, d1, d2;

	if (act == ELEM_ACT_SILU) {
		elem_swiglu_backward_tangent(dh, has_dh, rdh, gate, up, rgate, rup, rdgate, rdup);
		return;
	}
	elem_act_and_d1(act, gate, &a, &d1);
	d2 = has_dh ? elem_act_d2(act, gate) : 0;
	*rdgate = rdh * up * d1 + (has_dh ? dh * (rup * d1 + up * d2 * rgate) : 0);
	*rdup = rdh * a + (has_dh ? dh * d1 * rgate : 0);
}

/* The plain MLP's activation (GPT-2): dx = dh act'(x); the R-operator's
 * R{dx} = act'(x) R{dh} + act''(x) R{x} dh (has_dh 0: Gauss-Newton, the
 * second term drops) */
SW_HD SW_ALWAYS_INLINE static inline elem_real elem_act_backward(int act, elem_real dh, elem_real x)
{
	return dh * elem_act_d1(act, x);
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_act_backward_tangent(int act, elem_real dh, int has_dh,
							elem_real rdh, elem_real x, elem_real rx)
{
	elem_real r = elem_act_d1(act, x) * rdh;
	return has_dh ? r + elem_act_d2(act, x) * rx * dh : r;
}

/*
 * Soft-capping (Gemma2's scores and final logits): y = cap tanh(x / cap),
 * t = tanh(x / cap) kept; the backward dx = dy (1 - t^2); the
 * R-operator's R{y} = (1 - t^2) R{x} and, of the backward, R{dx} = (1 -
 * t^2) R{dy} - 2 t (1 - t^2) / cap dy R{x} (has_dy 0: Gauss-Newton).
 * x / cap as transformers divides.
 */
SW_HD SW_ALWAYS_INLINE static inline elem_real elem_softcap(elem_real x, elem_real cap, elem_real *t)
{
	*t = elem_tanh(x / cap);
	return cap * *t;
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_softcap_backward(elem_real dy, elem_real t)
{
	return dy * (1 - t * t);
}

SW_HD SW_ALWAYS_INLINE static inline elem_real elem_softcap_backward_tangent(elem_real dy, int has_dy,
							    elem_real rdy, elem_real t,
							    elem_real rx, elem_real cap)
{
	elem_real d = 1 - t * t;
	return has_dy ? d * rdy - 2 * t * d / cap * dy * rx : d * rdy;
}

/* ---- the optimizers ---------------------------------------------------------- */

/* The gradient clipping scale: the global norm brought down to max_norm
 * (max_norm 0: off). */
SW_HD static inline double elem_clip_scale(double norm, double max_norm)
{
	return max_norm > 0 && norm > max_norm ? max_norm / norm : 1;
}

/* The factor weight decay multiplies a parameter by: coupled 1 - lr wd
 * (W <- W - lr wd W), independent 1 - wd, none 1. */
SW_HD static inline double elem_wd_decay(enum sw_wd_mode mode, double lr, double wd)
{
	return mode == SW_WD_COUPLED ? 1 - lr * wd : mode == SW_WD_INDEPENDENT ? 1 - wd : 1;
}

/* Blockwise LR (sharpness paper eq. 5): the block's peak is ratio lr_max,
 * lr_min (lo) is shared, so the block's lr decays from ratio lr_max to lo
 * as the base lr `base` decays from lr_max to lo. */
SW_HD static inline double elem_blockwise_lr(double lo, double ratio, double lr_max, double base)
{
	double decay = lr_max > lo ? (base - lo) / (lr_max - lo) : 1;
	return lo + (ratio * lr_max - lo) * decay;
}

/* What AdamW's update of one tensor shares across its elements. */
struct elem_adamw {
	double b1, b2, eps;
	double decay;           /* elem_wd_decay */
	double step;            /* lr / (1 - b1^t) */
	double sbc2;            /* sqrt(1 - b2^t) */
};

SW_HD static inline struct elem_adamw elem_adamw_coef(double b1, double b2, double eps, int64_t t,
						      double lr, double decay)
{
	struct elem_adamw c;
	c.b1 = b1;
	c.b2 = b2;
	c.eps = eps;
	c.decay = decay;
	c.step = lr / (1 - pow(b1, (double)t));
	c.sbc2 = sqrt(1 - pow(b2, (double)t));
	return c;
}

/* PyTorch's AdamW on one element, the gradient g times clip: decay first,
 * then p -= lr m_hat / (sqrt(v_hat) + eps); moments in float. */
SW_HD static inline void elem_adamw(elem_real *p, float *m, float *v, elem_real g, double clip,
				    const struct elem_adamw *c)
{
	float gk = (float)(g * clip);
	*m = (float)(c->b1 * *m + (1 - c->b1) * gk);
	*v = (float)(c->b2 * *v + (1 - c->b2) * (double)gk * gk);
	*p = (elem_real)(*p * c->decay - c->step * *m / (sqrt((double)*v) / c->sbc2 + c->eps));
}

/* Lion (Chen et al. 2023) on one element, the gradient g times clip:
 * decay first (decoupled: p <- p (1 - lr wd)), then p -= lr sign(b1 m +
 * (1 - b1) g), then m <- b2 m + (1 - b2) g; no second moment. */
struct elem_lion {
	double b1, b2, lr;
	double decay;           /* elem_wd_decay */
};

SW_HD static inline void elem_lion(elem_real *p, float *m, elem_real g, double clip,
				   const struct elem_lion *c)
{
	float gk = (float)(g * clip);
	double u = c->b1 * *m + (1 - c->b1) * gk;
	*p = (elem_real)(*p * c->decay - c->lr * (u > 0 ? 1 : u < 0 ? -1 : 0));
	*m = (float)(c->b2 * *m + (1 - c->b2) * gk);
}

/* Adam-mini (Zhang et al. 2024) shares AdamW's coefficients; its second
 * moment is one per block of block_numel elements: the square of one
 * clipped gradient element, in double (a block's sum, added in order on
 * the CPU, in the row kernel's order on the device), then the block's
 * v <- b2 v + (1 - b2) mean(g^2) */
SW_HD static inline double elem_clipped_sq(elem_real g, double clip)
{
	double gk = (float)(g * clip);
	return gk * gk;
}

SW_HD static inline void elem_adam_mini_block_v(float *v, double sumsq, int64_t block_numel,
						double b2)
{
	*v = (float)(b2 * *v + (1 - b2) * (sumsq / (double)block_numel));
}

/* Adam-mini on one element, its block's v already updated
 * (elem_adam_mini_block_v): AdamW's m and step with the block's v. */
SW_HD static inline void elem_adam_mini(elem_real *p, float *m, const float *v, elem_real g,
					double clip, const struct elem_adamw *c)
{
	float gk = (float)(g * clip);
	*m = (float)(c->b1 * *m + (1 - c->b1) * gk);
	*p = (elem_real)(*p * c->decay - c->step * *m / (sqrt((double)*v) / c->sbc2 + c->eps));
}

/*
 * The element-wise optimizers' rules, one element's update each: what a
 * rule shares across a tensor's elements at a step (elem_rule_coef, from
 * the optimizer's betas and eps, the update count t, the tensor's lr and
 * decay) and its update of p and the moments m, v (elem_rule_update; v is
 * the element's own for AdamW, its block's for Adam-mini, which a pass
 * over the blocks updated before, unused by Lion). The
 * device's kernel (kernels.h's elem_rule) calls these; the CPU's optimizer
 * loop (optim.c's elem_tensor) switches on the rule outside its loop, so
 * that the loop vectorizes, and calls the rule's own update. A new
 * element-wise optimizer is a rule here (its enum value, its coefficients,
 * a case in each function), a case in elem_tensor and its name in optim.h
 * and optim.c: three files, both devices.
 */
enum elem_rule { ELEM_RULE_ADAMW, ELEM_RULE_LION, ELEM_RULE_ADAM_MINI };
struct elem_rule_coef {
	enum elem_rule rule;
	struct elem_adamw adamw;        /* AdamW's and Adam-mini's */
	struct elem_lion lion;
};

SW_HD static inline struct elem_rule_coef elem_rule_coef(enum elem_rule rule, double b1, double b2,
							  double eps, int64_t t, double lr,
							  double decay)
{
	struct elem_rule_coef c;
	/* every rule's coefficients, whichever is used (each is cheap) */
	c.rule = rule;
	c.adamw = elem_adamw_coef(b1, b2, eps, t, lr, decay);
	c.lion.b1 = b1;
	c.lion.b2 = b2;
	c.lion.lr = lr;
	c.lion.decay = decay;
	return c;
}

SW_HD static inline void elem_rule_update(const struct elem_rule_coef *c, elem_real *p, float *m,
					  float *v, elem_real g, double clip)
{
	switch (c->rule) {
	case ELEM_RULE_ADAMW:
		elem_adamw(p, m, v, g, clip, &c->adamw);
		break;
	case ELEM_RULE_LION:
		elem_lion(p, m, g, clip, &c->lion);
		break;
	case ELEM_RULE_ADAM_MINI:
		elem_adam_mini(p, m, v, g, clip, &c->adamw);
		break;
	}
}

/* p <- p decay - lr u: the update of Muon and Scion */
SW_HD static inline elem_real elem_apply_update(elem_real p, elem_real u, double decay, double lr)
{
	return (elem_real)(p * decay - lr * u);
}

/* Muon's momentum: buf <- mom buf + (1 - mom) g; returns the Nesterov
 * gradient (1 - mom) g + mom buf that Newton-Schulz orthogonalizes. */
SW_HD static inline elem_real elem_muon_momentum(float *buf, elem_real g, double clip, double mom)
{
	double gk = g * clip;
	*buf = (float)(mom * *buf + (1 - mom) * gk);
	return (elem_real)((1 - mom) * gk + mom * *buf);
}

/* Scion's momentum: M <- mom M + (1 - mom) g; returns M */
SW_HD static inline elem_real elem_scion_momentum(float *mbuf, elem_real g, double clip, double mom)
{
	*mbuf = (float)(mom * *mbuf + (1 - mom) * g * clip);
	return *mbuf;
}

/* Scion's sign LMO (the head: scale 1/d_in; vectors: 1) */
SW_HD static inline elem_real elem_scion_sign(elem_real m, double scale)
{
	return (elem_real)(m > 0 ? scale : m < 0 ? -scale : 0);
}

/* Scion's embedding LMO: each token vector to RMS 1, the factor from its
 * sum of squares over C (0 for a zero row) */
SW_HD static inline double elem_scion_row_factor(double sumsq, int64_t C)
{
	return sumsq > 0 ? sqrt((double)C / sumsq) : 0;
}

/* Newton-Schulz (5 steps): X <- a X + (b A + c A A) X, A = X X^T, after
 * X = G / (||G||_F + 1e-7) */
#define ELEM_NS_A ((elem_real)3.4445)
#define ELEM_NS_B ((elem_real)-4.7750)
#define ELEM_NS_C ((elem_real)2.0315)

/* ||G||_F + 1e-7 from the sum of squares */
SW_HD static inline double elem_ns_norm(double sumsq)
{
	return sqrt(sumsq) + 1e-7;
}

/* b A + c A A, one element */
SW_HD static inline elem_real elem_ns_poly(elem_real a, elem_real aa)
{
	return ELEM_NS_B * a + ELEM_NS_C * aa;
}

/* Muon's and Scion's factor on NS5's result: sqrt(max(1, rows/cols))
 * (Muon), sqrt(rows/cols) (Scion's RMS->RMS LMO) */
SW_HD static inline double elem_muon_scale(int rows, int cols)
{
	return sqrt(rows > cols ? (double)rows / cols : 1.0);
}

/* A matrix entry with its learnable multipliers: W_eff = W (row col), a
 * side 1 where there is none (s W: row = s), the product of the factors
 * first; sw-convert folds multipliers into an export the same way. */
SW_HD static inline elem_real elem_mult_weff(elem_real w, elem_real row, elem_real col)
{
	return w * (row * col);
}

/*
 * A reparameterized gain (arch.h, scale_reparam: 1 or, 2 er) over its n
 * values, serially and in double (one thread per gain on the device; a
 * gain has at most d_ff values): gamma from the direction alpha and the
 * magnitude beta,
 *   or  gamma_i = beta alpha_i / r,            r = sqrt(mean alpha^2)
 *   er  gamma_i = exp(beta + alpha_i - mean alpha);
 * sw-convert exports the same gamma.
 */
SW_HD static inline void elem_sv_gamma(int mode, const elem_real *alpha, elem_real beta, int64_t n,
				       elem_real *gamma)
{
	double s = 0;

	for (int64_t i = 0; i < n; i++)
		s += mode == 1 ? (double)alpha[i] * alpha[i] : (double)alpha[i];
	if (mode == 1) {
		double r = sqrt(s / (double)n);
		for (int64_t i = 0; i < n; i++)
			gamma[i] = (elem_real)((double)beta * alpha[i] / r);
	} else {
		double mean = s / (double)n;
		for (int64_t i = 0; i < n; i++)
			gamma[i] = (elem_real)exp((double)beta + alpha[i] - mean);
	}
}

/*
 * Its backward: from g = dL/dgamma, alpha's and beta's gradients added
 * (+=, as every gradient), and g cleared (the gain is not trained itself):
 *   or  s = sum g_i alpha_i: dbeta = s / r,
 *       dalpha_i = beta / r (g_i - alpha_i s / (n r^2))
 *   er  t = sum g_i gamma_i: dbeta = t, dalpha_i = g_i gamma_i - t / n
 */
SW_HD static inline void elem_sv_backward(int mode, const elem_real *alpha, elem_real beta,
					  const elem_real *gamma, elem_real *g, int64_t n,
					  elem_real *dalpha, elem_real *dbeta)
{
	double s = 0, sq = 0;

	if (mode == 1) {
		double r;
		for (int64_t i = 0; i < n; i++) {
			s += (double)g[i] * alpha[i];
			sq += (double)alpha[i] * alpha[i];
		}
		r = sqrt(sq / (double)n);
		*dbeta += (elem_real)(s / r);
		for (int64_t i = 0; i < n; i++)
			dalpha[i] += (elem_real)((double)beta / r * (g[i] - alpha[i] * s / ((double)n * r * r)));
	} else {
		for (int64_t i = 0; i < n; i++)
			s += (double)g[i] * gamma[i];
		*dbeta += (elem_real)s;
		for (int64_t i = 0; i < n; i++)
			dalpha[i] += (elem_real)((double)g[i] * gamma[i] - s / (double)n);
	}
	for (int64_t i = 0; i < n; i++)
		g[i] = 0;
}

/*
 * The R-operator's (modelhvp.h) of a reparameterized gain. Its tangent
 * along (ralpha, rbeta) (ralpha NULL: 0):
 *   or  rgamma_i = (rbeta alpha_i + beta ralpha_i) / r - beta alpha_i rr / r^2,
 *       rr = sum alpha_i ralpha_i / (n r)
 *   er  rgamma_i = gamma_i (rbeta + ralpha_i - mean ralpha)
 */
SW_HD static inline void elem_sv_gamma_tangent(int mode, const elem_real *alpha, elem_real beta,
					       const elem_real *gamma, const elem_real *ralpha,
					       elem_real rbeta, int64_t n, elem_real *rgamma)
{
	double s = 0, sq = 0;

	for (int64_t i = 0; i < n; i++) {
		double ra = ralpha ? (double)ralpha[i] : 0;
		s += mode == 1 ? (double)alpha[i] * ra : ra;
		sq += (double)alpha[i] * alpha[i];
	}
	if (mode == 1) {
		double r = sqrt(sq / (double)n), rr = s / ((double)n * r);
		for (int64_t i = 0; i < n; i++) {
			double ra = ralpha ? (double)ralpha[i] : 0;
			rgamma[i] = (elem_real)(((double)rbeta * alpha[i] + (double)beta * ra) / r -
						(double)beta * alpha[i] * rr / (r * r));
		}
	} else {
		double mean = s / (double)n;
		for (int64_t i = 0; i < n; i++)
			rgamma[i] = (elem_real)((double)gamma[i] *
						((double)rbeta + (ralpha ? (double)ralpha[i] : 0) - mean));
	}
}

/*
 * The R-operator of elem_sv_backward: from g = dL/dgamma (NULL: 0, the
 * Gauss-Newton product, which leaves out gamma's own curvature), its
 * tangent rg = R{dL/dgamma} and the tangents of alpha, beta (ralpha NULL:
 * 0) and gamma, the tangents of alpha's and beta's gradients, written
 * (=; rdalpha NULL: beta's alone): with s, r as elem_sv_backward's, c = beta / r,
 * u_i = g_i - alpha_i s / (n r^2),
 *   or  R{dbeta} = R{s} / r - s R{r} / r^2,
 *       R{dalpha_i} = R{c} u_i + c R{u_i}
 *   er  t = sum g_i gamma_i: R{dbeta} = R{t},
 *       R{dalpha_i} = rg_i gamma_i + g_i rgamma_i - R{t} / n
 */
SW_HD static inline void elem_sv_backward_tangent(int mode, const elem_real *alpha, elem_real beta,
						  const elem_real *gamma, const elem_real *g,
						  const elem_real *rg, const elem_real *ralpha,
						  elem_real rbeta, const elem_real *rgamma, int64_t n,
						  elem_real *rdalpha, elem_real *rdbeta)
{
	double nn = (double)n;

	if (mode == 1) {
		double s = 0, rs = 0, sq = 0, ar = 0, r, rr, c, rc;
		for (int64_t i = 0; i < n; i++) {
			double gi = g ? (double)g[i] : 0, ra = ralpha ? (double)ralpha[i] : 0;
			s += gi * alpha[i];
			rs += (double)rg[i] * alpha[i] + gi * ra;
			sq += (double)alpha[i] * alpha[i];
			ar += (double)alpha[i] * ra;
		}
		r = sqrt(sq / nn);
		rr = ar / (nn * r);
		c = (double)beta / r;
		rc = (double)rbeta / r - (double)beta * rr / (r * r);
		*rdbeta = (elem_real)(rs / r - s * rr / (r * r));
		for (int64_t i = 0; rdalpha && i < n; i++) {
			double gi = g ? (double)g[i] : 0, ra = ralpha ? (double)ralpha[i] : 0;
			double u = gi - alpha[i] * s / (nn * r * r);
			double ru = (double)rg[i] - (ra * s + alpha[i] * rs) / (nn * r * r) +
				    2 * alpha[i] * s * rr / (nn * r * r * r);
			rdalpha[i] = (elem_real)(rc * u + c * ru);
		}
	} else {
		double rt = 0;
		for (int64_t i = 0; i < n; i++)
			rt += (double)rg[i] * gamma[i] + (g ? (double)g[i] * rgamma[i] : 0);
		*rdbeta = (elem_real)rt;
		for (int64_t i = 0; rdalpha && i < n; i++)
			rdalpha[i] = (elem_real)((double)rg[i] * gamma[i] +
						 (g ? (double)g[i] * rgamma[i] : 0) - rt / nn);
	}
}

#endif
