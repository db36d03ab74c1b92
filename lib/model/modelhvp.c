/*
 * modelhvp.c - the R-operator of the model on the CPU (see modelhvp.h):
 * the tangent of each layer's forward and backward, named rop_ after the
 * kernel of cpukern.c it differentiates, as the CPU's table of step.h's
 * tangent operations; model_rop_forward and model_rop_backward run
 * step.c's R-operator sequence over it. The kernels it runs unchanged
 * (on tangents) are cpukern.h's; the primal backward beside them is
 * model.c's CPU step, through modelint.h.
 */
#include "modelhvp.h"
#include "../base/isa.h"
#include "../base/elemmath.h"
#include "cpukern.h"
#include "layout.h"
#include "model.h"
#include "modelint.h"
#include "../base/par.h"
#include "step.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The tangents R{f} of each layer's forward and backward (modelhvp.h). A
 * NULL tangent weight is zero; a NULL primal derivative dy means the
 * Gauss-Newton product, where every term pairing a primal derivative with
 * a tangent drops and what stays is the backward pass applied to R{dy}.
 */

/* Does v move tensor i (a linear weight's effective weight also moves
 * with its multiplier)? Its tangent gradient is then wanted too. */
int model_rop_wanted(const struct model *m, const unsigned char *want, int i)
{
	int li;

	if (i < 0)
		return 0;
	if (!want || want[i])
		return 1;
	li = m->tensors[i].linear;
	return li >= 0 && ((m->linears[li].mult_tensor >= 0 && want[m->linears[li].mult_tensor]) ||
			   (m->linears[li].col_tensor >= 0 && want[m->linears[li].col_tensor]));
}

/* The lowest layer holding a wanted tensor: -1 for the embedding or the
 * position embeddings (the whole model), n_layers when only the final
 * norm (and its bias) and head are wanted. */
int model_rop_first(const struct model *m, const unsigned char *want)
{
	int first = (int)m->c.n_layers;

	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		if (!model_rop_wanted(m, want, i))
			continue;
		/* the embedding block: the tokens' and the positions' (pos_embed) */
		if (t->block == SW_BLOCK_EMB)
			return -1;
		if (t->layer >= 0 && t->layer < first)
			first = t->layer;
	}
	return first;
}

void model_rop_gains_tangent(const struct model *m, real *v, const unsigned char *want,
			     unsigned char *rop_want)
{
	for (int i = 0; i < m->ntensors; i++)
		rop_want[i] = want ? want[i] : 1;
	for (int i = 0; i < m->nreparams; i++) {
		const struct model_reparam *r = &m->reparams[i];
		const struct model_tensor *g = &m->tensors[r->gain], *d = &m->tensors[r->dir],
					  *b = &m->tensors[r->mag];
		int wd = !want || want[r->dir], wb = !want || want[r->mag];
		if (!wd && !wb) {
			rop_want[r->gain] = 0;
			continue;
		}
		elem_sv_gamma_tangent((int)r->mode, m->params + d->offset, m->params[b->offset],
				      m->params + g->offset, wd ? v + d->offset : NULL,
				      wb ? v[b->offset] : 0, (int64_t)g->numel, v + g->offset);
		rop_want[r->gain] = 1;
	}
}

void model_rop_gains_backward(const struct model *m, const real *v, real *hv, const real *gain_grads,
			      const unsigned char *want)
{
	for (int i = 0; i < m->nreparams; i++) {
		const struct model_reparam *r = &m->reparams[i];
		const struct model_tensor *g = &m->tensors[r->gain], *d = &m->tensors[r->dir],
					  *b = &m->tensors[r->mag];
		int wd = !want || want[r->dir], wb = !want || want[r->mag];
		real rdbeta;
		if (!wd && !wb)
			continue;
		/* the entries of a tensor not wanted are left as they are */
		elem_sv_backward_tangent((int)r->mode, m->params + d->offset, m->params[b->offset],
					 m->params + g->offset, gain_grads ? gain_grads + g->offset : NULL,
					 hv + g->offset, wd ? v + d->offset : NULL, wb ? v[b->offset] : 0,
					 v + g->offset, (int64_t)g->numel, wd ? hv + d->offset : NULL, &rdbeta);
		if (wb)
			hv[b->offset] = rdbeta;
	}
}

static int rop_keep(const struct model *m, int tensor, const void *want)
{
	return model_rop_wanted(m, want, tensor);
}

/* Layer l's pointers of all (rm's weights or gradients), NULL where v
 * does not reach. */
static void rop_layer_views(const struct model *m, const unsigned char *want,
			    const struct layer_ptrs *all, int l, struct layer_ptrs *out)
{
	model_layer_views_keep(m, l, all, out, rop_keep, want);
}

/* R{y} of rmsnorm_forward: with xhat = x r, r = (mean(x^2) + eps)^(-1/2),
 * R{r} = -r^3 mean(x R{x}), R{xhat} = R{x} r + x R{r},
 * R{y} = g R{xhat} + R{g} xhat. */
static void rop_rmsnorm_forward(real *ry, real *rrstd, const real *inp, const real *rinp,
				const real *gain, const real *rgain, const real *rstd, int N, int C)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * C)
	for (int n = 0; n < N; n++) {
		const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
		real *y = ry + (size_t)n * C;
		double r = rstd[n], dot = 0, rr;
		for (int i = 0; i < C; i++)
			dot += (double)x[i] * rx[i];
		rr = -r * r * r * dot / C;
		rrstd[n] = (real)rr;
		for (int i = 0; i < C; i++) {
			real xhat = (real)(x[i] * r), rxhat = (real)(rx[i] * r + x[i] * rr);
			y[i] = rxhat * (gain ? gain[i] : 1) + (rgain ? rgain[i] * xhat : 0);
		}
	}
}

/*
 * R{} of rmsnorm_backward (dxhat = dy g, mu = mean(dxhat xhat),
 * dx = r (dxhat - xhat mu), dg = sum_n dy xhat):
 * R{dxhat} = R{dy} g + dy R{g}, R{mu} = mean(R{dxhat} xhat + dxhat R{xhat}),
 * R{dx} = R{r} (dxhat - xhat mu) + r (R{dxhat} - R{xhat} mu - xhat R{mu}),
 * R{dg} = sum_n R{dy} xhat + dy R{xhat}. Adds into rdx and rdgain (NULL:
 * not wanted).
 */
static void rop_rmsnorm_backward(real *rdinp, real *rdgain, const real *dout, const real *rdout,
				 const real *inp, const real *rinp, const real *gain, const real *rgain,
				 const real *rstd, const real *rrstd, int N, int C)
{
#pragma omp parallel PAR_IF((size_t)N * C)
	{
		int c0, c1;
		/* each thread owns a slice of the gain's entries for rdgain */
		model_rows_of(C, &c0, &c1);
		if (rdgain)
			for (int n = 0; n < N; n++) {
				const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
				const real *dy = dout ? dout + (size_t)n * C : NULL, *rdy = rdout + (size_t)n * C;
				real r = rstd[n], rr = rrstd[n];
				for (int i = c0; i < c1; i++)
					rdgain[i] += rdy[i] * x[i] * r + (dy ? dy[i] * (rx[i] * r + x[i] * rr) : 0);
			}
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
			const real *dy = dout ? dout + (size_t)n * C : NULL, *rdy = rdout + (size_t)n * C;
			real *rdx = rdinp + (size_t)n * C;
			double r = rstd[n], rr = rrstd[n], mu = 0, rmu = 0;
			for (int i = 0; i < C; i++) {
				double g = gain ? gain[i] : 1, xhat = x[i] * r;
				double rdxhat = rdy[i] * g + (dy && rgain ? (double)dy[i] * rgain[i] : 0);
				rmu += rdxhat * xhat;
				if (dy) {
					mu += dy[i] * g * xhat;
					rmu += dy[i] * g * (rx[i] * r + x[i] * rr);
				}
			}
			mu /= C;
			rmu /= C;
			for (int i = 0; i < C; i++) {
				double g = gain ? gain[i] : 1, xhat = x[i] * r;
				double rdxhat = rdy[i] * g + (dy && rgain ? (double)dy[i] * rgain[i] : 0);
				double v = r * (rdxhat - xhat * rmu);
				if (dy) {
					double dxhat = dy[i] * g, rxhat = rx[i] * r + x[i] * rr;
					v += rr * (dxhat - xhat * mu) - r * rxhat * mu;
				}
				rdx[i] += (real)v;
			}
		}
	}
}

/* R{y} of layernorm (GPT-2): with mu = mean(x), xhat = (x - mu) r,
 * r = (mean((x - mu)^2) + eps)^(-1/2), y = g xhat + b:
 * R{mu} = mean(R{x}), R{r} = -r^3 mean((x - mu) (R{x} - R{mu})),
 * R{xhat} = (R{x} - R{mu}) r + (x - mu) R{r},
 * R{y} = g R{xhat} + R{g} xhat + R{b} (gain NULL: 1; rgain, rbias NULL:
 * zero); R{mu}, R{r} saved. */
static void rop_layernorm_forward(real *ry, real *rmean, real *rrstd, const real *inp,
				  const real *rinp, const real *gain, const real *rgain,
				  const real *rbias, const real *mean, const real *rstd, int N, int C)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * C)
	for (int n = 0; n < N; n++) {
		const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
		real *y = ry + (size_t)n * C;
		double mu = mean[n], r = rstd[n], rmu = 0, dot = 0, rr;
		for (int i = 0; i < C; i++)
			rmu += rx[i];
		rmu /= C;
		for (int i = 0; i < C; i++)
			dot += (x[i] - mu) * (rx[i] - rmu);
		rr = -r * r * r * dot / C;
		rmean[n] = (real)rmu;
		rrstd[n] = (real)rr;
		for (int i = 0; i < C; i++) {
			double xhat = (x[i] - mu) * r, rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
			y[i] = (real)(rxhat * (gain ? gain[i] : 1) + (rgain ? rgain[i] * xhat : 0) +
				      (rbias ? rbias[i] : 0));
		}
	}
}

/*
 * R{} of layernorm's backward (dxhat = dy g, a = mean(dxhat),
 * b = mean(dxhat xhat), dx = r (dxhat - a - xhat b), dg = sum_n dy xhat,
 * db = sum_n dy): R{dxhat} = R{dy} g + dy R{g}, R{a} = mean(R{dxhat}),
 * R{b} = mean(R{dxhat} xhat + dxhat R{xhat}),
 * R{dx} = R{r} (dxhat - a - xhat b) + r (R{dxhat} - R{a} - R{xhat} b - xhat R{b}),
 * R{dg} = sum_n R{dy} xhat + dy R{xhat}, R{db} = sum_n R{dy}. Adds into
 * rdinp, rdgain, rdbias (NULL: not wanted); dout NULL: Gauss-Newton.
 */
static void rop_layernorm_backward(real *rdinp, real *rdgain, real *rdbias, const real *dout,
				   const real *rdout, const real *inp, const real *rinp,
				   const real *gain, const real *rgain, const real *mean,
				   const real *rstd, const real *rmean, const real *rrstd, int N, int C)
{
#pragma omp parallel PAR_IF((size_t)N * C)
	{
		int c0, c1;
		/* each thread owns a slice of the gain's and bias's entries */
		model_rows_of(C, &c0, &c1);
		for (int n = 0; (rdgain || rdbias) && n < N; n++) {
			const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
			const real *dy = dout ? dout + (size_t)n * C : NULL, *rdy = rdout + (size_t)n * C;
			double mu = mean[n], r = rstd[n], rmu = rmean[n], rr = rrstd[n];
			for (int i = c0; i < c1; i++) {
				double xhat = (x[i] - mu) * r, rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
				if (rdgain)
					rdgain[i] += (real)(rdy[i] * xhat + (dy ? dy[i] * rxhat : 0));
				if (rdbias)
					rdbias[i] += rdy[i];
			}
		}
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const real *x = inp + (size_t)n * C, *rx = rinp + (size_t)n * C;
			const real *dy = dout ? dout + (size_t)n * C : NULL, *rdy = rdout + (size_t)n * C;
			real *rdx = rdinp + (size_t)n * C;
			double mu = mean[n], r = rstd[n], rmu = rmean[n], rr = rrstd[n];
			double a = 0, b = 0, ra = 0, rb = 0;
			for (int i = 0; i < C; i++) {
				double g = gain ? gain[i] : 1, xhat = (x[i] - mu) * r;
				double rdxhat = rdy[i] * g + (dy && rgain ? (double)dy[i] * rgain[i] : 0);
				ra += rdxhat;
				rb += rdxhat * xhat;
				if (dy) {
					double dxhat = dy[i] * g, rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
					a += dxhat;
					b += dxhat * xhat;
					rb += dxhat * rxhat;
				}
			}
			a /= C;
			b /= C;
			ra /= C;
			rb /= C;
			for (int i = 0; i < C; i++) {
				double g = gain ? gain[i] : 1, xhat = (x[i] - mu) * r;
				double rdxhat = rdy[i] * g + (dy && rgain ? (double)dy[i] * rgain[i] : 0);
				double v = r * (rdxhat - ra - xhat * rb);
				if (dy) {
					double dxhat = dy[i] * g, rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
					v += rr * (dxhat - a - xhat * b) - r * rxhat * b;
				}
				rdx[i] += (real)v;
			}
		}
	}
}

/* R{} of the soft-cap on the logits (elemmath.h): forward R{y} = (1 -
 * t^2) R{x} over R{x} in place; backward over R{dy} in place, rx the
 * pre-cap tangent, dy NULL: Gauss-Newton */
ISA_VECTOR_CLONES
static void rop_softcap_forward(real *rx, const real *t, size_t n)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rx[i] = (1 - t[i] * t[i]) * rx[i];
}

ISA_VECTOR_CLONES
static void rop_softcap_backward(real *rdy, const real *dy, const real *t, const real *rx, size_t n,
				 real cap)
{
	int primal = dy != NULL;

#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rdy[i] = elem_softcap_backward_tangent(primal ? dy[i] : 0, primal, rdy[i], t[i], rx[i], cap);
}

/* R{} of GPT-2's MLP activation h = act(x), R{h} = act'(x) R{x}, and of
 * its backward (elemmath.h) */
ISA_VECTOR_CLONES
static void rop_act_forward(real *rh, const real *x, const real *rx, size_t n, int act)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rh[i] = elem_act_d1(act, x[i]) * rx[i];
}

ISA_VECTOR_CLONES
static void rop_act_backward(real *rdx, const real *dh, const real *rdh, const real *x,
			     const real *rx, size_t n, int act)
{
	int primal = dh != NULL;

#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rdx[i] += elem_act_backward_tangent(act, primal ? dh[i] : 0, primal, rdh[i], x[i], rx[i]);
}

/* R{y} = R{x} W^T + x R{W}^T (rw NULL: zero) */
static void rop_matmul_forward(real *ry, const real *inp, const real *rinp, const real *w,
			       const real *rw, int N, int din, int dout)
{
#pragma omp parallel PAR_IF_FLOPS((size_t)N * din * dout)
	{
		int r0, r1;
		model_rows_of(N, &r0, &r1);
		if (r1 > r0) {
			GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, dout, din, 1,
			     rinp + (size_t)r0 * din, din, w, din, 0, ry + (size_t)r0 * dout, dout);
			if (rw)
				GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, dout, din, 1,
				     inp + (size_t)r0 * din, din, rw, din, 1, ry + (size_t)r0 * dout, dout);
		}
	}
}

/* R{} of matmul_backward: R{dx} += R{dy} W + dy R{W} (split over tokens),
 * R{dW} += R{dy}^T x + dy^T R{x} (split over W's rows); rdinp, rdw NULL:
 * not wanted. */
static void rop_matmul_backward(real *rdinp, real *rdw, const real *dout, const real *rdout,
				const real *inp, const real *rinp, const real *w, const real *rw,
				int N, int din, int dout_)
{
#pragma omp parallel PAR_IF_FLOPS((size_t)N * din * dout_)
	{
		int r0, r1;
		if (rdinp) {
			model_rows_of(N, &r0, &r1);
			if (r1 > r0) {
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, din, dout_, 1,
				     rdout + (size_t)r0 * dout_, dout_, w, din, 1, rdinp + (size_t)r0 * din, din);
				if (dout && rw)
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, din, dout_, 1,
					     dout + (size_t)r0 * dout_, dout_, rw, din, 1,
					     rdinp + (size_t)r0 * din, din);
			}
		}
		if (rdw) {
			model_rows_of(dout_, &r0, &r1);
			if (r1 > r0) {
				GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, din, N, 1, rdout + r0,
				     dout_, inp, din, 1, rdw + (size_t)r0 * din, din);
				if (dout)
					GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, din, N, 1,
					     dout + r0, dout_, rinp, din, 1, rdw + (size_t)r0 * din, din);
			}
		}
	}
}

/*
 * R{} of attention_forward, per (b, h): R{S} = scale (R{Q} K^T + Q R{K}^T),
 * through a soft-cap (softcap > 0, S' = softcap t, t = tanh(S / softcap)
 * the primal's att_tanh) R{S'} = (1 - t^2) R{S} and R{t} = R{S'} /
 * softcap kept in rtanh (B, H, T, T) for the backward,
 * R{P} = P (R{S'} - rowsum(P R{S'})) (zero above the diagonal, as P),
 * R{O} = R{P} V + P R{V}. ratt (B, H, T, T) keeps R{P} for the backward.
 * The products in the CPU's causal blocks (cpukern.h): what lies above the
 * diagonal is zero and not computed.
 */
static void rop_attention_forward(real *rout, real *ratt, real *rtanh, const real *att,
				  const real *att_tanh, const real *q, const real *k,
				  const real *v, const real *rq, const real *rk, const real *rv,
				  int B, int T, int H, int KV, int hd, real scale, real softcap)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);

#pragma omp parallel for collapse(2) schedule(static) PAR_IF((size_t)B * H * T * T * hd)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int g = h / group;
			size_t qo = (size_t)b * T * Q + (size_t)h * hd, ko = (size_t)b * T * K + (size_t)g * hd;
			const real *pbh = att + ((size_t)b * H + h) * T * T;
			real *rpbh = ratt + ((size_t)b * H + h) * T * T;

			for (int i = 0; i < nb; i++) {    /* R{S}'s blocks on and below the diagonal */
				int r0, r1;
				model_causal_block(T, nb, i, &r0, &r1);
				GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, scale,
				     rq + qo + (size_t)r0 * Q, Q, k + ko, K, 0, rpbh + (size_t)r0 * T, T);
				GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, scale,
				     q + qo + (size_t)r0 * Q, Q, rk + ko, K, 1, rpbh + (size_t)r0 * T, T);
			}
			for (int t = 0; t < T; t++) {
				const real *p = pbh + (size_t)t * T;
				real *rp = rpbh + (size_t)t * T;
				double s = 0;
				if (softcap > 0) {
					size_t at = ((size_t)b * H + h) * T * T + (size_t)t * T;
					for (int u = 0; u <= t; u++) {
						rp[u] = (1 - att_tanh[at + u] * att_tanh[at + u]) * rp[u];
						rtanh[at + u] = rp[u] / softcap;
					}
				}
				for (int u = 0; u <= t; u++)
					s += (double)p[u] * rp[u];
				for (int u = 0; u <= t; u++)
					rp[u] = p[u] * (rp[u] - (real)s);
				for (int u = t + 1; u < T; u++)
					rp[u] = 0;
			}
			for (int i = 0; i < nb; i++) {    /* R{O}'s rows: the nonzero columns */
				int r0, r1;
				model_causal_block(T, nb, i, &r0, &r1);
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
				     rpbh + (size_t)r0 * T, T, v + ko, K, 0, rout + qo + (size_t)r0 * Q, Q);
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
				     pbh + (size_t)r0 * T, T, rv + ko, K, 1, rout + qo + (size_t)r0 * Q, Q);
			}
		}
}

/* One row's dS and R{dS} over n columns through the soft-cap (see
 * rop_attention_backward): d holds dP (primal) and rd R{dP} on entry;
 * primal 0: Gauss-Newton, d untouched */
static void softcap_dscores(real *d, real *rd, const real *p, const real *rp, const real *t,
			    const real *rt, double sig, double rsig, int n, real scale, int primal)
{
	for (int u = 0; u < n; u++) {
		real w = 1 - t[u] * t[u];
		if (primal) {
			real e = p[u] * (d[u] - (real)sig);
			real re = rp[u] * (d[u] - (real)sig) + p[u] * (rd[u] - (real)rsig);
			rd[u] = (w * re - 2 * t[u] * rt[u] * e) * scale;
			d[u] = w * e * scale;
		} else {
			rd[u] = w * p[u] * (rd[u] - (real)rsig) * scale;
		}
	}
}

/*
 * R{} of attention_backward, with the primal pass it needs, per (b, h):
 * dP = dO V^T, dV += P^T dO, sig = rowsum(P dP), dS = scale P (dP - sig),
 * dQ += dS K, dK += dS^T Q; and
 * R{dP} = R{dO} V^T + dO R{V}^T, R{dV} += R{P}^T dO + P^T R{dO},
 * R{sig} = rowsum(R{P} dP + P R{dP}),
 * R{dS} = scale (R{P} (dP - sig) + P (R{dP} - R{sig})),
 * R{dQ} += R{dS} K + dS R{K}, R{dK} += R{dS}^T Q + dS^T R{Q}.
 * Through a soft-cap (softcap > 0, att_tanh's t, rtanh's R{t}: the
 * forward's) E = P (dP - sig) is the capped scores' gradient and
 * dS = scale (1 - t^2) E, R{dS} = scale ((1 - t^2) R{E} - 2 t R{t} E).
 * dout NULL (Gauss-Newton): no primal pass, dq, dk, dv untouched; dq, dk,
 * dv NULL: the primal's dS for the tangents, not its gradients. Threads
 * split the (b, KV head) pairs as attention_backward does; dP/dS and
 * R{dP}/R{dS} live in that pair's T x T of pscratch and rscratch. The
 * products in causal blocks, as rop_attention_forward's.
 */
static void rop_attention_backward(real *dq, real *dk, real *dv, real *rdq, real *rdk, real *rdv,
				   real *pscratch, real *rscratch, const real *dout, const real *rdout,
				   const real *q, const real *k, const real *v, const real *rq,
				   const real *rk, const real *rv, const real *att, const real *ratt,
				   const real *att_tanh, const real *rtanh, int B, int T, int H, int KV,
				   int hd, real scale, real softcap)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);

#pragma omp parallel for collapse(2) schedule(static) PAR_IF((size_t)B * H * T * T * hd)
	for (int b = 0; b < B; b++)
		for (int g = 0; g < KV; g++) {
			real *ds = pscratch + ((size_t)b * KV + g) * T * T;
			real *rds = rscratch + ((size_t)b * KV + g) * T * T;
			size_t ko = (size_t)b * T * K + (size_t)g * hd;

			for (int h = g * group; h < (g + 1) * group; h++) {
				size_t qo = (size_t)b * T * Q + (size_t)h * hd;
				const real *pbh = att + ((size_t)b * H + h) * T * T;
				const real *rpbh = ratt + ((size_t)b * H + h) * T * T;

				for (int i = 0; i < nb; i++) {
					int r0, r1;
					size_t ro;
					model_causal_block(T, nb, i, &r0, &r1);
					ro = (size_t)r0 * T;
					if (dout) {
						GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, 1,
						     dout + qo + (size_t)r0 * Q, Q, v + ko, K, 0, ds + ro, T);
						if (dv)
							model_causal_add_tn(dv + ko, K, pbh, dout + qo, Q, T, r0,
									    r1, hd);
						model_causal_add_tn(rdv + ko, K, rpbh, dout + qo, Q, T, r0, r1, hd);
					}
					GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, 1,
					     rdout + qo + (size_t)r0 * Q, Q, v + ko, K, 0, rds + ro, T);
					if (dout)
						GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, 1,
						     dout + qo + (size_t)r0 * Q, Q, rv + ko, K, 1, rds + ro, T);
					model_causal_add_tn(rdv + ko, K, pbh, rdout + qo, Q, T, r0, r1, hd);
				}
				for (int t = 0; t < T; t++) {
					const real *p = pbh + (size_t)t * T, *rp = rpbh + (size_t)t * T;
					real *d = ds + (size_t)t * T, *rd = rds + (size_t)t * T;
					double sig = 0, rsig = 0;
					for (int u = 0; u <= t; u++) {
						rsig += (double)p[u] * rd[u];
						if (dout) {
							sig += (double)p[u] * d[u];
							rsig += (double)rp[u] * d[u];
						}
					}
					if (softcap > 0) {
						size_t at = (size_t)(pbh - att) + (size_t)t * T;
						softcap_dscores(d, rd, p, rp, att_tanh + at, rtanh + at, sig, rsig,
								t + 1, scale, dout != NULL);
					} else {
						for (int u = 0; u <= t; u++) {
							if (dout) {
								rd[u] = (rp[u] * (d[u] - (real)sig) +
									 p[u] * (rd[u] - (real)rsig)) * scale;
								d[u] = p[u] * (d[u] - (real)sig) * scale;
							} else {
								rd[u] = p[u] * (rd[u] - (real)rsig) * scale;
							}
						}
					}
					for (int u = t + 1; u < T; u++) {
						rd[u] = 0;
						if (dout)
							d[u] = 0;
					}
				}
				for (int i = 0; i < nb; i++) {
					int r0, r1;
					size_t ro, rq0;
					model_causal_block(T, nb, i, &r0, &r1);
					ro = (size_t)r0 * T;
					rq0 = qo + (size_t)r0 * Q;
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
					     rds + ro, T, k + ko, K, 1, rdq + rq0, Q);
					model_causal_add_tn(rdk + ko, K, rds, q + qo, Q, T, r0, r1, hd);
					if (!dout)
						continue;
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
					     ds + ro, T, rk + ko, K, 1, rdq + rq0, Q);
					model_causal_add_tn(rdk + ko, K, ds, rq + qo, Q, T, r0, r1, hd);
					if (!dq)
						continue;
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
					     ds + ro, T, k + ko, K, 1, dq + rq0, Q);
					model_causal_add_tn(dk + ko, K, ds, q + qo, Q, T, r0, r1, hd);
				}
			}
		}
}

/* R{h} of swiglu_forward, and R{} of swiglu_backward (elemmath.h); in
 * vectors, as cpukern.c's SwiGLU (element by element: the same bits).
 * GeGLU (act a GELU): elemmath.h's gated unit of the activation. */
ISA_VECTOR_CLONES
static void rop_swiglu_forward(real *rh, const real *gate, const real *up, const real *rgate,
			       const real *rup, size_t n)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rh[i] = elem_swiglu_tangent(gate[i], up[i], rgate[i], rup[i]);
}

ISA_VECTOR_CLONES
static void rop_swiglu_backward(real *rdgate, real *rdup, const real *dh, const real *rdh,
				const real *gate, const real *up, const real *rgate, const real *rup,
				size_t n)
{
	int primal = dh != NULL;

#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real dg, du;
		elem_swiglu_backward_tangent(primal ? dh[i] : 0, primal, rdh[i], gate[i], up[i],
					     rgate[i], rup[i], &dg, &du);
		rdgate[i] += dg;
		rdup[i] += du;
	}
}

ISA_VECTOR_CLONES
static void rop_glu_forward(real *rh, const real *gate, const real *up, const real *rgate,
			    const real *rup, size_t n, int act)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		rh[i] = elem_glu_tangent(act, gate[i], up[i], rgate[i], rup[i]);
}

ISA_VECTOR_CLONES
static void rop_glu_backward(real *rdgate, real *rdup, const real *dh, const real *rdh,
			     const real *gate, const real *up, const real *rgate, const real *rup,
			     size_t n, int act)
{
	int primal = dh != NULL;

#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real dg, du;
		elem_glu_backward_tangent(act, primal ? dh[i] : 0, primal, rdh[i], gate[i], up[i],
					  rgate[i], rup[i], &dg, &du);
		rdgate[i] += dg;
		rdup[i] += du;
	}
}

/* R{dlogits} = scale R{p} = scale p (R{z} - sum p R{z}), in place over
 * the tangent logits R{z}: the cross entropy's Hessian in the logits
 * applied to R{z}, the same for the Hessian and Gauss-Newton. */
static void rop_softmax_crossentropy_backward(real *rz, const real *probs, int N, int V, real scale)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * V)
	for (int n = 0; n < N; n++) {
		const real *p = probs + (size_t)n * V;
		real *r = rz + (size_t)n * V;
		double s = 0;
		for (int i = 0; i < V; i++)
			s += (double)p[i] * r[i];
		for (int i = 0; i < V; i++)
			r[i] = scale * p[i] * (r[i] - (real)s);
	}
}

/* R{W_eff} = R{W} row col + W (R{row} col + row R{col}); v the
 * multipliers' view over the primal, rv over the tangent (model.h) */
static void rop_mult_apply(real *rweff, const real *w, const real *rw, struct mult_view v,
			   struct mult_view rv, int64_t dout, int64_t din)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)(dout * din))
	for (int64_t i = 0; i < dout; i++) {
		real r = v.row ? v.row[i * v.row_step] : 1, rr = rv.row ? rv.row[i * rv.row_step] : 0;
		for (int64_t j = 0; j < din; j++) {
			real c = v.col ? v.col[j] : 1, rc = rv.col ? rv.col[j] : 0;
			rweff[i * din + j] = rw[i * din + j] * (r * c) + w[i * din + j] * (rr * c + r * rc);
		}
	}
}

/* R{} of mult_backward: R{dW} += R{dW_eff} row col + dW_eff R{row col},
 * R{drow} += sum of (R{dW_eff} W + dW_eff R{W}) col + dW_eff W R{col} over
 * its reach, R{dcol} the same with row for col; dweff NULL: Gauss-Newton;
 * rdw, rdrow, rdcol NULL: not wanted. */
static void rop_mult_backward(real *rdw, real *rdrow, real *rdcol, const real *rdweff,
			      const real *dweff, const real *w, const real *rw, struct mult_view v,
			      struct mult_view rv, int64_t dout, int64_t din)
{
	for (int64_t i = 0; i < dout; i++) {
		real r = v.row ? v.row[i * v.row_step] : 1, rr = rv.row ? rv.row[i * rv.row_step] : 0;
		for (int64_t j = 0; j < din; j++) {
			int64_t k = i * din + j;
			real c = v.col ? v.col[j] : 1, rc = rv.col ? rv.col[j] : 0;
			if (rdw)
				rdw[k] += rdweff[k] * (r * c) + (dweff ? dweff[k] * (rr * c + r * rc) : 0);
			if (rdrow)
				rdrow[i * v.row_step] += (rdweff[k] * w[k] + (dweff ? dweff[k] * rw[k] : 0)) * c +
							 (dweff ? dweff[k] * w[k] * rc : 0);
			if (rdcol)
				rdcol[j] += (rdweff[k] * w[k] + (dweff ? dweff[k] * rw[k] : 0)) * r +
					    (dweff ? dweff[k] * w[k] * rr : 0);
		}
	}
}

/* g, the gradient of weight w, when w is an effective weight (the linear
 * has multipliers or gains: their R{} needs the primal dL/dW_eff), else
 * NULL (no primal weight gradient is needed) */
static real *eff_grad(const struct model *m, const real *w, real *g)
{
	return m->eff && w >= m->w_eff && w < m->w_eff + m->eff_size ? g : NULL;
}

/* The head's tensor: the embedding when tied. */
static int rop_head_tensor(const struct model *m)
{
	return model_find(m, m->c.tie_embeddings ? "embed" : "lm_head", -1);
}

void model_rop_views(const struct model *m, const unsigned char *want, const struct model_ptrs *rp,
		     const struct model_ptrs *rg, int l, struct layer_ptrs *rw, struct layer_ptrs *rgl,
		     struct layer_ptrs *eg)
{
	const struct layer_ptrs *w = &m->p.layer[l], *g = &m->g.layer[l];

	rop_layer_views(m, want, &rp->layer[l], l, rw);
	rop_layer_views(m, want, &rg->layer[l], l, rgl);
	memset(eg, 0, sizeof *eg);
	eg->wq = eff_grad(m, w->wq, g->wq);
	eg->wk = eff_grad(m, w->wk, g->wk);
	eg->wv = eff_grad(m, w->wv, g->wv);
	eg->wo = eff_grad(m, w->wo, g->wo);
	eg->wgate = eff_grad(m, w->wgate, g->wgate);
	eg->wup = eff_grad(m, w->wup, g->wup);
	eg->wdown = eff_grad(m, w->wdown, g->wdown);
}

void model_rop_top_views(const struct model *m, const unsigned char *want,
			 const struct model_ptrs *rp, const struct model_ptrs *rg,
			 struct model_ptrs *rw, struct model_ptrs *rgo, struct model_ptrs *eg)
{
	int head = model_rop_wanted(m, want, rop_head_tensor(m)),
	    final = model_rop_wanted(m, want, model_find(m, "final_norm", -1)),
	    final_bias = model_rop_wanted(m, want, model_find(m, "final_norm_bias", -1)),
	    embed = model_rop_wanted(m, want, model_find(m, "embed", -1)),
	    pos = model_rop_wanted(m, want, model_find(m, "pos_embed", -1));

	memset(rw, 0, sizeof *rw);
	memset(rgo, 0, sizeof *rgo);
	memset(eg, 0, sizeof *eg);
	rw->embed = embed ? rp->embed : NULL;
	rgo->embed = embed ? rg->embed : NULL;
	rw->pos_embed = pos ? rp->pos_embed : NULL;
	rgo->pos_embed = pos ? rg->pos_embed : NULL;
	rw->final_norm = final ? rp->final_norm : NULL;
	rgo->final_norm = final ? rg->final_norm : NULL;
	rw->final_norm_bias = final_bias ? rp->final_norm_bias : NULL;
	rgo->final_norm_bias = final_bias ? rg->final_norm_bias : NULL;
	rw->lm_head = head ? rp->lm_head : NULL;
	rgo->lm_head = head ? rg->lm_head : NULL;
	eg->lm_head = eff_grad(m, m->p.lm_head, m->g.lm_head);
}

int model_rop_build(struct model *rm, const struct model *m, struct sw_err *err)
{
	int rc;

	/* the R-operator has no tangent of the experts' layer yet */
	if (m->c.n_experts)
		return sw_fail(err, SW_EUSAGE, "Hessian-vector products of a mixture of experts are "
			       "not built yet");
	if ((rc = model_build(rm, &m->c, err)))
		return rc;
	if ((rc = model_alloc_acts(rm, m->B, m->T, err)))
		model_free(rm);
	return rc;
}

/* ---- the CPU's table of the R-operator's operations (step.h) ---------------- */

struct cpu_rop {
	struct model *m, *rm;
	const unsigned char *want;
	int hv;
	struct model_rop_tape *tape;
	/* the layer the sequence is in (its layer_views call names it): the
	 * soft-capped attention keeps R{att_tanh} in the tangent model's
	 * att_tanh of that layer, for the backward */
	int layer;
};

static void cpu_rop_layer_views(void *ctx, int l, struct layer_ptrs *rw, struct layer_ptrs *rg,
				struct layer_ptrs *eg)
{
	struct cpu_rop *r = ctx;

	r->layer = l;
	model_rop_views(r->m, r->want, &r->rm->p, &r->rm->g, l, rw, rg, eg);
}

/* the tangents of the effective weights (none without multipliers) */
static void cpu_rop_effective(void *ctx)
{
	struct cpu_rop *r = ctx;
	const struct model *m = r->m;

	for (int i = 0; i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		size_t wo = m->tensors[l->tensor].offset;
		if (l->mode != MULT_NONE && model_rop_wanted(m, r->want, l->tensor))
			rop_mult_apply(r->rm->w_eff + m->eff_offset[i], m->params + wo,
				       r->rm->params + wo, model_linear_mult_view(m, l, m->params),
				       model_linear_mult_view(m, l, r->rm->params), l->dout, l->din);
	}
}

static void cpu_rop_rmsnorm(void *ctx, real *ry, real *rrstd, const real *inp, const real *rinp,
			    const real *gain, const real *rgain, const real *rstd, int64_t rows, int n)
{
	(void)ctx;
	rop_rmsnorm_forward(ry, rrstd, inp, rinp, gain, rgain, rstd, (int)rows, n);
}

static void cpu_rop_layernorm(void *ctx, real *ry, real *rmean, real *rrstd, const real *inp,
			      const real *rinp, const real *gain, const real *rgain, const real *rbias,
			      const real *mean, const real *rstd, int64_t rows, int n)
{
	(void)ctx;
	rop_layernorm_forward(ry, rmean, rrstd, inp, rinp, gain, rgain, rbias, mean, rstd, (int)rows,
			      n);
}

static void cpu_rop_softcap(void *ctx, real *rx, const real *t, size_t n, real cap)
{
	(void)ctx;
	(void)cap;
	rop_softcap_forward(rx, t, n);
}

static void cpu_rop_softcap_backward(void *ctx, real *rdx, const real *dcapped, const real *t,
				     const real *rx, size_t n, real cap)
{
	(void)ctx;
	rop_softcap_backward(rdx, dcapped, t, rx, n, cap);
}

static void cpu_rop_act(void *ctx, real *rh, const real *x, const real *rx, size_t n,
			enum model_act act)
{
	(void)ctx;
	rop_act_forward(rh, x, rx, n, (int)act);
}

static void cpu_rop_act_backward(void *ctx, real *rdx, const real *dh, const real *rdh,
				 const real *x, const real *rx, size_t n, enum model_act act)
{
	(void)ctx;
	rop_act_backward(rdx, dh, rdh, x, rx, n, (int)act);
}

static void cpu_rop_matmul(void *ctx, real *ry, const real *inp, const real *rinp, const real *w,
			   const real *rw, int N, int din, int dout)
{
	(void)ctx;
	rop_matmul_forward(ry, inp, rinp, w, rw, N, din, dout);
}

static void cpu_rop_attention(void *ctx, real *rout, real *ratt, const real *att,
			      const real *att_tanh, const real *q, const real *k, const real *v,
			      const real *rq, const real *rk, const real *rv, int B, int T, int H,
			      int KV, int hd, real scale, real softcap)
{
	struct cpu_rop *r = ctx;

	rop_attention_forward(rout, ratt, softcap > 0 ? r->rm->acts[r->layer].att_tanh : NULL, att,
			      att_tanh, q, k, v, rq, rk, rv, B, T, H, KV, hd, scale, softcap);
}

static void cpu_rop_swiglu(void *ctx, real *rh, const real *gate, const real *up,
			   const real *rgate, const real *rup, size_t n, enum model_act act)
{
	(void)ctx;
	if (act == MODEL_ACT_SILU)
		rop_swiglu_forward(rh, gate, up, rgate, rup, n);
	else
		rop_glu_forward(rh, gate, up, rgate, rup, n, (int)act);
}

static void cpu_rop_loss_backward(void *ctx, real *rz, const real *probs, int N, int V, real scale)
{
	(void)ctx;
	rop_softmax_crossentropy_backward(rz, probs, N, V, scale);
}

static void cpu_rop_matmul_backward(void *ctx, real *rdinp, real *rdw, const real *dout,
				    const real *rdout, const real *inp, const real *rinp,
				    const real *w, const real *rw, int N, int din, int dout_)
{
	(void)ctx;
	rop_matmul_backward(rdinp, rdw, dout, rdout, inp, rinp, w, rw, N, din, dout_);
}

static void cpu_rop_rmsnorm_backward(void *ctx, real *rdinp, real *rdgain, const real *dout,
				     const real *rdout, const real *inp, const real *rinp,
				     const real *gain, const real *rgain, const real *rstd,
				     const real *rrstd, int64_t rows, int n)
{
	(void)ctx;
	rop_rmsnorm_backward(rdinp, rdgain, dout, rdout, inp, rinp, gain, rgain, rstd, rrstd,
			     (int)rows, n);
}

static void cpu_rop_layernorm_backward(void *ctx, real *rdinp, real *rdgain, real *rdbias,
				       const real *dout, const real *rdout, const real *inp,
				       const real *rinp, const real *gain, const real *rgain,
				       const real *mean, const real *rstd, const real *rmean,
				       const real *rrstd, int64_t rows, int n)
{
	(void)ctx;
	rop_layernorm_backward(rdinp, rdgain, rdbias, dout, rdout, inp, rinp, gain, rgain, mean, rstd,
			       rmean, rrstd, (int)rows, n);
}

static void cpu_rop_attention_backward(void *ctx, real *dq, real *dk, real *dv, real *rdq,
				       real *rdk, real *rdv, const real *dout, const real *rdout,
				       const real *q, const real *k, const real *v, const real *rq,
				       const real *rk, const real *rv, const real *att,
				       const real *ratt, const real *att_tanh, int B, int T, int H,
				       int KV, int hd, real scale, real softcap)
{
	struct cpu_rop *r = ctx;

	rop_attention_backward(dq, dk, dv, rdq, rdk, rdv, model_att_scratch(r->m),
			       model_att_scratch(r->rm), dout, rdout, q, k, v, rq, rk, rv, att, ratt,
			       att_tanh, softcap > 0 ? r->rm->acts[r->layer].att_tanh : NULL, B, T, H,
			       KV, hd, scale, softcap);
}

static void cpu_rop_swiglu_backward(void *ctx, real *rdgate, real *rdup, const real *dh,
				    const real *rdh, const real *gate, const real *up,
				    const real *rgate, const real *rup, size_t n, enum model_act act)
{
	(void)ctx;
	if (act == MODEL_ACT_SILU)
		rop_swiglu_backward(rdgate, rdup, dh, rdh, gate, up, rgate, rup, n);
	else
		rop_glu_backward(rdgate, rdup, dh, rdh, gate, up, rgate, rup, n, (int)act);
}

/* from R{dL/dW_eff} to R{dL/dW} and R{dL/dmult} */
static void cpu_rop_mult_backward(void *ctx)
{
	struct cpu_rop *r = ctx;
	const struct model *m = r->m;
	const unsigned char *want = r->want;

	for (int i = 0; i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		const struct model_tensor *wt = &m->tensors[l->tensor];
		int ww, wm;
		real *rdrow, *rdcol;
		if (l->mode == MULT_NONE)
			continue;
		ww = !want || want[l->tensor];
		wm = !want || want[l->mult_tensor] || (l->col_tensor >= 0 && want[l->col_tensor]);
		model_linear_mult_grads(m, l, r->rm->grads, &rdrow, &rdcol);
		if (ww || wm)
			rop_mult_backward(ww ? r->rm->grads + wt->offset : NULL, wm ? rdrow : NULL,
					  wm ? rdcol : NULL, r->rm->dw_eff + m->eff_offset[i],
					  r->hv ? m->dw_eff + m->eff_offset[i] : NULL,
					  m->params + wt->offset, r->rm->params + wt->offset,
					  model_linear_mult_view(m, l, m->params),
					  model_linear_mult_view(m, l, r->rm->params), l->dout, l->din);
	}
}

static const struct model_rop_ops cpu_rop_ops = {
	.layer_views = cpu_rop_layer_views,
	.effective = cpu_rop_effective,
	.rmsnorm = cpu_rop_rmsnorm,
	.layernorm = cpu_rop_layernorm,
	.softcap = cpu_rop_softcap,
	.softcap_backward = cpu_rop_softcap_backward,
	.act = cpu_rop_act,
	.act_backward = cpu_rop_act_backward,
	.matmul = cpu_rop_matmul,
	.attention = cpu_rop_attention,
	.swiglu = cpu_rop_swiglu,
	.loss_backward = cpu_rop_loss_backward,
	.matmul_backward = cpu_rop_matmul_backward,
	.rmsnorm_backward = cpu_rop_rmsnorm_backward,
	.layernorm_backward = cpu_rop_layernorm_backward,
	.attention_backward = cpu_rop_attention_backward,
	.swiglu_backward = cpu_rop_swiglu_backward,
	.mult_backward = cpu_rop_mult_backward,
};

/* the tangent model rm as the R-operator step's back end */
static struct model_rop_step cpu_rop_step(struct cpu_rop *r)
{
	struct model_rop_step rt = {
		.ops = &cpu_rop_ops, .ctx = r,
		.acts = r->rm->acts, .x_final = r->rm->x_final, .nf = r->rm->nf,
		.nf_rstd = r->rm->nf_rstd, .logits = r->rm->logits, .nf_mean = r->rm->nf_mean,
		/* R{logits} before the final soft-cap: the tangent's logits_tanh */
		.logits_pre = r->rm->logits_tanh,
		.s = model_cpu_step(r->rm).s, .first = model_rop_first(r->m, r->want),
		.tape = r->tape,
	};

	model_rop_top_views(r->m, r->want, &r->rm->p, &r->rm->g, &rt.p, &rt.g, &rt.eff_grads);
	return rt;
}

void model_rop_forward(const struct model *m, struct model *rm, const int *tokens,
		       const unsigned char *want)
{
	/* the sequence reads m through the step's const pointers only */
	struct cpu_rop r = {.m = (struct model *)m, .rm = rm, .want = want};
	struct model_step st = model_cpu_step(r.m);
	struct model_rop_step rt = cpu_rop_step(&r);

	model_rop_step_forward(&st, &rt, tokens, m->B, m->T);
}

size_t model_rop_tape_reals(const struct sw_config *c, int B, int T)
{
	return (size_t)B * T * ((size_t)c->n_layers * MODEL_ROP_TAPE_WIDTH(c) + (size_t)c->d_model);
}

int model_rop_tape_alloc(struct model_rop_tape *tape, const struct model *m, struct sw_err *err)
{
	tape->buf = malloc(model_rop_tape_reals(&m->c, m->B, m->T) * sizeof(real));
	tape->kept = calloc((size_t)m->c.n_layers + 1, 1);
	if (!tape->buf || !tape->kept) {
		model_rop_tape_free(tape);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for the primal gradients kept (%.2f GB)",
			       model_rop_tape_reals(&m->c, m->B, m->T) * sizeof(real) / 1e9);
	}
	return SW_OK;
}

void model_rop_tape_free(struct model_rop_tape *tape)
{
	free(tape->buf);
	free(tape->kept);
	tape->buf = NULL;
	tape->kept = NULL;
}

void model_rop_backward(struct model *m, struct model *rm, const int *tokens, const int *targets,
			double loss_scale, int gauss_newton, const unsigned char *want,
			real *dlogits, struct model_rop_tape *tape)
{
	struct cpu_rop r = {.m = m, .rm = rm, .want = want, .hv = !gauss_newton,
			    .tape = m->eff ? NULL : tape};
	struct model_step st = model_cpu_step(m);
	struct model_rop_step rt = cpu_rop_step(&r);

	if (m->eff) {
		memset(rm->dw_eff, 0, m->eff_size * sizeof(real));
		if (!gauss_newton)
			memset(m->dw_eff, 0, m->eff_size * sizeof(real));
	}
	model_rop_step_backward(&st, &rt, tokens, targets, m->B, m->T, loss_scale, gauss_newton,
				dlogits);
}
