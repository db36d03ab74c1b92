/*
 * moe.c - a mixture of experts' feed-forward layer on the CPU (moe.h):
 * the router, the grouped experts, the shared expert, the load-balancing
 * loss, forward and backward.
 */
#include "moe.h"
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the reals and ints of a layer's activations, in moe_acts_alloc's order */
static void sizes(const struct sw_config *c, int N, size_t *reals, size_t *ints, size_t *doubles)
{
	size_t n = (size_t)N, E = (size_t)c->n_experts, K = (size_t)c->n_experts_active,
	       F = (size_t)c->moe_d_ff, C = (size_t)c->d_model,
	       FS = c->n_shared_experts ? (size_t)c->shared_d_ff : 0, NK = n * K;

	*reals = n * E * 2 + n * K + NK * C * 2 + NK * F * 3 +    /* probs, dp, wts, xg, out, g/u/h */
		 (FS ? n * FS * 3 + n * C + n : 0) +               /* the shared expert */
		 NK * C * 2 + NK * F * 3 + NK +                    /* dout, dxg, dh, dgate, dup, dw */
		 (FS ? n * C + n * FS * 3 + n : 0);                /* dsout, dsh, dsgate, dsup, dsl */
	*ints = n * K + (E + 1) + NK + E;
	*doubles = 2 * E;
}

double moe_acts_bytes(const struct sw_config *c, int N)
{
	size_t r, i, d;

	sizes(c, N, &r, &i, &d);
	return (double)r * sizeof(real) + (double)i * sizeof(int) + (double)d * sizeof(double) +
	       sizeof(struct moe_acts);
}

struct moe_acts *moe_acts_alloc(const struct sw_config *c, int N)
{
	size_t r, i, d;
	struct moe_acts *a;
	real *p;
	int *q;

	sizes(c, N, &r, &i, &d);
	a = calloc(1, sizeof *a + d * sizeof(double) + i * sizeof(int) + r * sizeof(real) + 64);
	if (!a)
		return NULL;
	a->N = N;
	a->E = (int)c->n_experts;
	a->K = (int)c->n_experts_active;
	a->F = (int)c->moe_d_ff;
	a->C = (int)c->d_model;
	a->S = (int)c->n_shared_experts;
	a->FS = a->S ? (int)c->shared_d_ff : 0;
	a->load = (double *)(a + 1);
	a->pmean = a->load + a->E;
	q = (int *)(a->pmean + a->E);
	a->sel = q; q += (size_t)N * a->K;
	a->start = q; q += a->E + 1;
	a->slot = q; q += (size_t)N * a->K;
	a->fill = q; q += a->E;
	/* the reals aligned past the ints */
	p = (real *)(((uintptr_t)q + 63) & ~(uintptr_t)63);
	{
		size_t n = (size_t)N, E = (size_t)a->E, K = (size_t)a->K, F = (size_t)a->F,
		       C = (size_t)a->C, FS = (size_t)a->FS, NK = n * K;
#define TAKE(field, cnt) do { a->field = p; p += (cnt); } while (0)
		TAKE(probs, n * E); TAKE(dp, n * E); TAKE(wts, n * K);
		TAKE(xg, NK * C); TAKE(out, NK * C);
		TAKE(gate, NK * F); TAKE(up, NK * F); TAKE(h, NK * F);
		TAKE(dout, NK * C); TAKE(dxg, NK * C);
		TAKE(dh, NK * F); TAKE(dgate, NK * F); TAKE(dup, NK * F); TAKE(dw, NK);
		if (FS) {
			TAKE(sgate, n * FS); TAKE(sup, n * FS); TAKE(sh, n * FS);
			TAKE(sout, n * C); TAKE(sg, n);
			TAKE(dsout, n * C); TAKE(dsh, n * FS); TAKE(dsgate, n * FS); TAKE(dsup, n * FS);
			TAKE(dsl, n);
		}
#undef TAKE
	}
	return a;
}

void moe_acts_free(struct moe_acts *a)
{
	free(a);
}

/* expert e's gate, up and down in a layer's block of experts (layout.c
 * lays each expert's three out in turn) */
static const real *expert_w(const struct moe_acts *a, const real *experts, int e, int which)
{
	size_t fc = (size_t)a->F * a->C;

	return experts + (size_t)e * 3 * fc + (size_t)which * fc;
}

void moe_forward(const struct sw_config *c, const struct layer_ptrs *w, struct moe_acts *a,
		 real *y, const real *x, int N, int act, int renorm)
{
	int E = a->E, K = a->K, F = a->F, C = a->C, FS = a->FS;
	double ent = 0;

	(void)c;
	/* the router: p = softmax(x Wr^T), in double per row */
	model_matmul_forward(a->probs, x, w->router, N, C, E);
	for (int e = 0; e < E; e++)
		a->load[e] = a->pmean[e] = 0;
	for (int t = 0; t < N; t++) {
		real *p = a->probs + (size_t)t * E;
		double mx = p[0], sum = 0, chosen = 0;
		for (int e = 1; e < E; e++)
			mx = p[e] > mx ? p[e] : mx;
		for (int e = 0; e < E; e++)
			sum += exp((double)p[e] - mx);
		for (int e = 0; e < E; e++) {
			double q = exp((double)p[e] - mx) / sum;
			p[e] = (real)q;
			a->pmean[e] += q;
			ent -= q > 0 ? q * log(q) : 0;
		}
		/* the top K, the larger first, a tie to the lower index */
		for (int k = 0; k < K; k++) {
			int best = -1;
			for (int e = 0; e < E; e++) {
				int taken = 0;
				for (int j = 0; j < k; j++)
					taken |= a->sel[(size_t)t * K + j] == e;
				if (!taken && (best < 0 || p[e] > p[best]))
					best = e;
			}
			a->sel[(size_t)t * K + k] = best;
			chosen += p[best];
		}
		for (int k = 0; k < K; k++) {
			real q = p[a->sel[(size_t)t * K + k]];
			a->wts[(size_t)t * K + k] = renorm ? (real)((double)q / chosen) : q;
		}
	}
	a->entropy = N ? ent / N : 0;
	/* gather: rows expert by expert, each expert's in token order */
	for (int e = 0; e <= E; e++)
		a->start[e] = 0;
	for (size_t s = 0; s < (size_t)N * K; s++)
		a->start[a->sel[s] + 1]++;
	for (int e = 0; e < E; e++)
		a->start[e + 1] += a->start[e];
	for (int e = 0; e < E; e++)
		a->fill[e] = a->start[e];
	for (size_t s = 0; s < (size_t)N * K; s++) {
		int r = a->fill[a->sel[s]]++;
		a->slot[r] = (int)s;
		memcpy(a->xg + (size_t)r * C, x + (s / K) * C, (size_t)C * sizeof(real));
	}
	for (int e = 0; e < E; e++) {
		int r0 = a->start[e], M = a->start[e + 1] - r0;
		a->load[e] = N ? (double)M / N : 0;
		a->pmean[e] = N ? a->pmean[e] / N : 0;
		if (!M)
			continue;
		model_matmul_forward(a->gate + (size_t)r0 * F, a->xg + (size_t)r0 * C,
				     expert_w(a, w->experts, e, 0), M, C, F);
		model_matmul_forward(a->up + (size_t)r0 * F, a->xg + (size_t)r0 * C,
				     expert_w(a, w->experts, e, 1), M, C, F);
		model_swiglu_forward(a->h + (size_t)r0 * F, a->gate + (size_t)r0 * F,
				     a->up + (size_t)r0 * F, (size_t)M * F, act);
		model_matmul_forward(a->out + (size_t)r0 * C, a->h + (size_t)r0 * F,
				     expert_w(a, w->experts, e, 2), M, F, C);
	}
	/* scatter the weighted outputs, in gathered order */
	memset(y, 0, (size_t)N * C * sizeof(real));
	for (int r = 0; r < N * K; r++) {
		int s = a->slot[r];
		real wt = a->wts[s], *yt = y + (size_t)(s / K) * C;
		const real *o = a->out + (size_t)r * C;
		for (int i = 0; i < C; i++)
			yt[i] += wt * o[i];
	}
	if (!FS)
		return;
	/* the shared expert, scaled by sigmoid(x ws) */
	model_matmul_forward(a->sgate, x, w->shared_gate, N, C, FS);
	model_matmul_forward(a->sup, x, w->shared_up, N, C, FS);
	model_swiglu_forward(a->sh, a->sgate, a->sup, (size_t)N * FS, act);
	model_matmul_forward(a->sout, a->sh, w->shared_down, N, FS, C);
	model_matmul_forward(a->sg, x, w->shared_router, N, C, 1);
	for (int t = 0; t < N; t++) {
		real g = (real)(1.0 / (1.0 + exp(-(double)a->sg[t]))), *yt = y + (size_t)t * C;
		const real *o = a->sout + (size_t)t * C;
		a->sg[t] = g;
		for (int i = 0; i < C; i++)
			yt[i] += g * o[i];
	}
}

double moe_aux_loss(struct moe_acts *const *layers, int nl, double *fbar)
{
	int E = nl ? layers[0]->E : 0;
	double aux = 0;

	for (int e = 0; e < E; e++) {
		double f = 0, p = 0;
		for (int l = 0; l < nl; l++) {
			f += layers[l]->load[e];
			p += layers[l]->pmean[e];
		}
		fbar[e] = f / nl;
		aux += fbar[e] * (p / nl);
	}
	return E * aux;
}

void moe_backward(const struct sw_config *c, const struct layer_ptrs *w, const struct layer_ptrs *g,
		  struct moe_acts *a, real *dx, const real *dy, const real *x, int N, int act,
		  int renorm, const double *fbar, double aux_scale)
{
	int E = a->E, K = a->K, F = a->F, C = a->C, FS = a->FS;

	(void)c;
	if (FS) {
		/* y += s o: do = s dy, ds = dy . o, through the sigmoid */
		for (int t = 0; t < N; t++) {
			const real *d = dy + (size_t)t * C, *o = a->sout + (size_t)t * C;
			real s = a->sg[t], *dso = a->dsout + (size_t)t * C;
			double dot = 0;
			for (int i = 0; i < C; i++) {
				dso[i] = s * d[i];
				dot += (double)d[i] * o[i];
			}
			a->dsl[t] = (real)(dot * s * (1 - s));
		}
		/* the gate's (1, C) product: dws += dl^T x, dx += dl ws */
		model_matmul_backward(dx, g->shared_router, a->dsl, x, w->shared_router, N, C, 1);
		model_zero(a->dsh, (size_t)N * FS);
		model_matmul_backward(a->dsh, g->shared_down, a->dsout, a->sh, w->shared_down, N, FS, C);
		model_zero(a->dsgate, (size_t)N * FS);
		model_zero(a->dsup, (size_t)N * FS);
		model_swiglu_backward(a->dsgate, a->dsup, a->dsh, a->sgate, a->sup, (size_t)N * FS, act);
		model_matmul_backward(dx, g->shared_gate, a->dsgate, x, w->shared_gate, N, C, FS);
		model_matmul_backward(dx, g->shared_up, a->dsup, x, w->shared_up, N, C, FS);
	}
	/* the routed experts: each gathered row's output gradient w dy, and
	 * its weight's gradient dy . out */
	for (int r = 0; r < N * K; r++) {
		int s = a->slot[r];
		const real *d = dy + (size_t)(s / K) * C, *o = a->out + (size_t)r * C;
		real wt = a->wts[s], *dor = a->dout + (size_t)r * C;
		double dot = 0;
		for (int i = 0; i < C; i++) {
			dor[i] = wt * d[i];
			dot += (double)d[i] * o[i];
		}
		a->dw[s] = (real)dot;
	}
	for (int e = 0; e < E; e++) {
		int r0 = a->start[e], M = a->start[e + 1] - r0;
		real *ge = g->experts + (size_t)e * 3 * F * C;
		if (!M)
			continue;
		model_zero(a->dh + (size_t)r0 * F, (size_t)M * F);
		model_matmul_backward(a->dh + (size_t)r0 * F, ge + 2 * (size_t)F * C,
				      a->dout + (size_t)r0 * C, a->h + (size_t)r0 * F,
				      expert_w(a, w->experts, e, 2), M, F, C);
		model_zero(a->dgate + (size_t)r0 * F, (size_t)M * F);
		model_zero(a->dup + (size_t)r0 * F, (size_t)M * F);
		model_swiglu_backward(a->dgate + (size_t)r0 * F, a->dup + (size_t)r0 * F,
				      a->dh + (size_t)r0 * F, a->gate + (size_t)r0 * F,
				      a->up + (size_t)r0 * F, (size_t)M * F, act);
		model_zero(a->dxg + (size_t)r0 * C, (size_t)M * C);
		model_matmul_backward(a->dxg + (size_t)r0 * C, ge, a->dgate + (size_t)r0 * F,
				      a->xg + (size_t)r0 * C, expert_w(a, w->experts, e, 0), M, C, F);
		model_matmul_backward(a->dxg + (size_t)r0 * C, ge + (size_t)F * C,
				      a->dup + (size_t)r0 * F, a->xg + (size_t)r0 * C,
				      expert_w(a, w->experts, e, 1), M, C, F);
	}
	for (int r = 0; r < N * K; r++) {
		real *d = dx + (size_t)(a->slot[r] / K) * C;
		const real *s = a->dxg + (size_t)r * C;
		for (int i = 0; i < C; i++)
			d[i] += s[i];
	}
	/* the router: dp from the weights (renormalized: w_k = p_k / sum, so
	 * dp_k = (dw_k - sum_j dw_j w_j) / sum) and the load-balancing
	 * term, then through the softmax */
	for (int t = 0; t < N; t++) {
		const real *p = a->probs + (size_t)t * E;
		real *dp = a->dp + (size_t)t * E;
		const int *sel = a->sel + (size_t)t * K;
		const real *dw = a->dw + (size_t)t * K, *wts = a->wts + (size_t)t * K;
		double sum = 0, dot = 0, pdp = 0;
		for (int e = 0; e < E; e++)
			dp[e] = (real)(aux_scale * fbar[e]);
		if (renorm) {
			for (int k = 0; k < K; k++) {
				sum += p[sel[k]];
				dot += (double)dw[k] * wts[k];
			}
			for (int k = 0; k < K; k++)
				dp[sel[k]] += (real)(((double)dw[k] - dot) / sum);
		} else {
			for (int k = 0; k < K; k++)
				dp[sel[k]] += dw[k];
		}
		for (int e = 0; e < E; e++)
			pdp += (double)p[e] * dp[e];
		for (int e = 0; e < E; e++)
			dp[e] = (real)((double)p[e] * ((double)dp[e] - pdp));
	}
	model_matmul_backward(dx, g->router, a->dp, x, w->router, N, C, E);
}
