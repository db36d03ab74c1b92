/*
 * Unit tests of lib/base/elemmath.h, the per-element math the CPU reference and
 * the CUDA kernels share, in double (SW_REAL_DOUBLE, as the gradient check
 * builds the model): each backward against central finite differences of
 * its forward, each optimizer update against its formula written out here
 * from the man page (sw-train(1)), not from elemmath.h. The float build of
 * the same functions is what model.c and optim.c run: t-gradcheck,
 * t-optim, the PyTorch cross-check and t0060's resume cover it there.
 */
#define SW_REAL_DOUBLE
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/elemmath.h"
#include "tap.h"

enum { C = 7 };

static const double x0[C] = {0.3, -1.2, 0.8, 2.1, -0.4, 0.05, -0.9};
static const double g0[C] = {1.1, 0.7, -0.3, 1.4, 0.9, 1.0, -1.2};
static const double w0[C] = {0.2, -0.5, 1.3, 0.4, -0.8, 0.6, 0.1};

/* L = sum_i w_i y_i, y = rmsnorm(x) with the elem functions */
static double rms_loss(const double *x, double eps)
{
	double ss = 0, L = 0;
	for (int i = 0; i < C; i++)
		ss += x[i] * x[i];
	double r = elem_rmsnorm_rstd(ss, C, eps);
	for (int i = 0; i < C; i++)
		L += w0[i] * elem_rmsnorm_out(x[i], r, g0[i]);
	return L;
}

static void test_rmsnorm(void)
{
	double eps = 1e-5, ss = 0, dot = 0, x[C], worst = 0, want, r;

	for (int i = 0; i < C; i++)
		ss += x0[i] * x0[i];
	r = elem_rmsnorm_rstd(ss, C, eps);
	ok(close_rel(r, 1 / sqrt(ss / C + eps), 1e-15), "rmsnorm: r = (mean x^2 + eps)^-1/2");
	for (int i = 0; i < C; i++)
		dot += elem_rmsnorm_dot(w0[i], g0[i], x0[i], r);
	double mean = elem_rmsnorm_mean(dot, C);
	for (int i = 0; i < C; i++) {
		memcpy(x, x0, sizeof x);
		x[i] = x0[i] + 1e-6;
		want = rms_loss(x, eps);
		x[i] = x0[i] - 1e-6;
		want = (want - rms_loss(x, eps)) / 2e-6;
		double d = fabs(elem_rmsnorm_dx(w0[i], g0[i], x0[i], r, mean) - want) / fabs(want);
		worst = d > worst ? d : worst;
	}
	ok(worst < 1e-7, "rmsnorm: dx against finite differences (worst %.2g)", worst);
	/* dL/dg_i = w_i x_i r */
	worst = 0;
	for (int i = 0; i < C; i++) {
		double d = fabs(elem_rmsnorm_dgain(w0[i], x0[i], r) - w0[i] * x0[i] / sqrt(ss / C + eps));
		worst = d > worst ? d : worst;
	}
	ok(worst < 1e-14, "rmsnorm: dgain = dy x r");
}

static void test_rope(void)
{
	double a = 0.7, b = -1.3, ang = 0.37, c = cos(ang), s = sin(ang);
	double ra = a, rb = b;

	/* (a + i b) e^{i ang} */
	elem_rope_forward(&ra, &rb, c, s);
	ok(close_rel(ra, a * c - b * s, 1e-15) && close_rel(rb, a * s + b * c, 1e-15),
	   "rope: the pair turns by the angle, as a complex product");
	elem_rope_backward(&ra, &rb, c, s);
	ok(fabs(ra - a) < 1e-15 && fabs(rb - b) < 1e-15, "rope: backward (the transpose) turns it back");
}

static double swiglu_at(double g, double u) { return elem_swiglu(g, u); }

static void test_swiglu(void)
{
	double worst = 0;

	for (int i = 0; i < C; i++) {
		double g = x0[i] * 2, u = w0[i], dh = g0[i], dg, du;
		elem_swiglu_backward(dh, g, u, &dg, &du);
		double ng = dh * (swiglu_at(g + 1e-6, u) - swiglu_at(g - 1e-6, u)) / 2e-6;
		double nu = dh * (swiglu_at(g, u + 1e-6) - swiglu_at(g, u - 1e-6)) / 2e-6;
		double d = fmax(fabs(dg - ng) / fabs(ng), fabs(du - nu) / fabs(nu));
		worst = d > worst ? d : worst;
		if (!close_rel(elem_swiglu(g, u), g / (1 + exp(-g)) * u, 1e-14))
			worst = 1;
	}
	ok(worst < 1e-7, "swiglu: silu(g) u and both derivatives against finite differences (worst %.2g)",
	   worst);
}

/* softmax of x0 scaled, P; L = sum_u w_u P_u: dL/ds_u = P_u (w_u - sum P w) */
static void test_softmax(void)
{
	double p[C], sum = 0, maxv = -INFINITY, dot = 0, worst = 0;

	for (int i = 0; i < C; i++)
		maxv = x0[i] > maxv ? x0[i] : maxv;
	for (int i = 0; i < C; i++)
		sum += p[i] = elem_exp(x0[i] - maxv);
	double inv = elem_softmax_inv(sum);
	for (int i = 0; i < C; i++) {
		p[i] *= inv;
		dot += p[i] * w0[i];
	}
	for (int i = 0; i < C; i++) {
		double xp[C], sp = 0, sm = 0, Lp = 0, Lm = 0;
		memcpy(xp, x0, sizeof xp);
		xp[i] += 1e-6;
		for (int j = 0; j < C; j++)
			sp += exp(xp[j]);
		for (int j = 0; j < C; j++)
			Lp += w0[j] * exp(xp[j]) / sp;
		xp[i] -= 2e-6;
		for (int j = 0; j < C; j++)
			sm += exp(xp[j]);
		for (int j = 0; j < C; j++)
			Lm += w0[j] * exp(xp[j]) / sm;
		double num = (Lp - Lm) / 2e-6 * 0.5;        /* scale 0.5 */
		double d = fabs(elem_softmax_dscore(p[i], w0[i], dot, 0.5) - num) / fabs(num);
		worst = d > worst ? d : worst;
	}
	ok(worst < 1e-7, "softmax: dscore against finite differences (worst %.2g)", worst);
	/* cross-entropy: dL/dlogit = (p - onehot) scale, the loss -log p */
	worst = 0;
	for (int i = 0; i < C; i++)
		worst = fmax(worst, fabs(elem_xent_dlogit(p[i], i == 3, 0.25) - (p[i] - (i == 3)) * 0.25));
	ok(worst < 1e-15 && close_rel(elem_xent_loss(p[3]), -log(p[3]), 1e-15) &&
	   close_rel(elem_xent_loss(0), -log(1e-300), 1e-15),
	   "cross-entropy: dlogit (p - onehot) scale, loss -log p floored at 1e-300");
}

static void test_optim(void)
{
	double lr = 0.01, wd = 0.1;

	ok(elem_clip_scale(2, 1) == 0.5 && elem_clip_scale(0.5, 1) == 1 && elem_clip_scale(5, 0) == 1,
	   "clip: max/norm above the bound, 1 below it and when off");
	ok(elem_wd_decay(SW_WD_COUPLED, lr, wd) == 1 - lr * wd &&
	   elem_wd_decay(SW_WD_INDEPENDENT, lr, wd) == 1 - wd && elem_wd_decay(SW_WD_NONE, lr, wd) == 1,
	   "weight decay: coupled 1 - lr wd, independent 1 - wd, none 1");
	ok(close_rel(elem_blockwise_lr(1e-4, 10, 1e-3, 1e-3), 1e-2, 1e-12) &&
	   close_rel(elem_blockwise_lr(1e-4, 10, 1e-3, 1e-4), 1e-4, 1e-12) &&
	   close_rel(elem_blockwise_lr(1e-4, 10, 1e-3, 5.5e-4), 1e-4 + (1e-2 - 1e-4) * 0.5, 1e-12),
	   "blockwise lr: ratio lr_max at the peak, lr_min at the end, linear in the base between");

	/* two AdamW steps against PyTorch's formula */
	double p = 0.3, m = 0, v = 0, b1 = 0.9, b2 = 0.95, eps = 1e-8;
	elem_real pe = p;
	float me = 0, ve = 0;
	double grads[2] = {0.2, -0.7};
	for (int t = 1; t <= 2; t++) {
		double g = grads[t - 1] * 0.5;          /* clipped by 0.5 */
		struct elem_adamw c = elem_adamw_coef(b1, b2, eps, t, lr, elem_wd_decay(SW_WD_COUPLED, lr, wd));
		elem_adamw(&pe, &me, &ve, grads[t - 1], 0.5, &c);
		m = b1 * m + (1 - b1) * g;
		v = b2 * v + (1 - b2) * g * g;
		p = p * (1 - lr * wd) - lr * (m / (1 - pow(b1, t))) / (sqrt(v / (1 - pow(b2, t))) + eps);
	}
	ok(close_rel(pe, p, 1e-6), "adamw: two steps as PyTorch's formula (%.9g, %.9g)", pe, p);

	float buf = 0.5f;
	double mom = 0.95, gm = elem_muon_momentum(&buf, 0.4, 0.5, mom);
	double want_buf = mom * 0.5 + (1 - mom) * 0.2;
	ok(close_rel(buf, want_buf, 1e-6) && close_rel(gm, (1 - mom) * 0.2 + mom * want_buf, 1e-6),
	   "muon: momentum and the Nesterov gradient");
	float sb = 0.5f;
	double sm = elem_scion_momentum(&sb, 0.4, 0.5, 0.3);
	ok(close_rel(sm, 0.3 * 0.5 + 0.7 * 0.2, 1e-6) && sm == sb, "scion: momentum");
	ok(elem_scion_sign(-0.2, 0.25) == -0.25 && elem_scion_sign(0.1, 0.25) == 0.25 &&
	   elem_scion_sign(0, 0.25) == 0, "scion: the sign LMO");
	double row[4] = {1, -2, 0.5, 3}, ss = 0, out = 0;
	for (int j = 0; j < 4; j++)
		ss += row[j] * row[j];
	double f = elem_scion_row_factor(ss, 4);
	for (int j = 0; j < 4; j++)
		out += row[j] * f * row[j] * f;
	ok(close_rel(sqrt(out / 4), 1, 1e-14) && elem_scion_row_factor(0, 4) == 0,
	   "scion: an embedding row to RMS 1, a zero row stays zero");
	ok(elem_apply_update(2, 0.5, 0.9, 0.1) == 2 * 0.9 - 0.1 * 0.5, "p decay - lr u");
	ok(close_rel(elem_ns_poly(0.5, 0.25), -4.7750 * 0.5 + 2.0315 * 0.25, 1e-15) && ELEM_NS_A == 3.4445 &&
	   elem_ns_norm(4) == 2 + 1e-7, "newton-schulz: b A + c A A, ||G||_F + 1e-7");
	ok(elem_muon_scale(8, 2) == 2 && elem_muon_scale(2, 8) == 1, "muon: sqrt(max(1, rows/cols))");
}

int main(void)
{
	test_rmsnorm();
	test_rope();
	test_swiglu();
	test_softmax();
	test_optim();
	return tap_done();
}
