/*
 * modelhvp.c - the R-operator of the model (see modelhvp.h): the tangent
 * of each layer's forward and backward, named rop_ after the layer of
 * model.c it differentiates, and the two passes that run them,
 * model_rop_forward and model_rop_backward. The layers it runs unchanged
 * (on tangents, or as the primal backward beside them) are model.c's,
 * through modelint.h.
 */
#include "modelhvp.h"
#include "../base/elemmath.h"
#include "model.h"
#include "modelint.h"
#include "../base/par.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/*
 * The tangents R{f} of each layer's forward and backward (modelhvp.h). A
 * NULL tangent weight is zero; a NULL primal derivative dy means the
 * Gauss-Newton product, where every term pairing a primal derivative with
 * a tangent drops and what stays is the backward pass applied to R{dy}.
 */

/* Does v move tensor i (a linear weight's effective weight also moves
 * with its multiplier)? Its tangent gradient is then wanted too. */
static int rop_wanted(const struct model *m, const unsigned char *want, int i)
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

/* The lowest layer holding a wanted tensor: -1 for the embedding (the
 * whole model), n_layers when only the final norm and head are wanted. */
static int rop_first_layer(const struct model *m, const unsigned char *want)
{
	int first = (int)m->c.n_layers;

	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		if (!rop_wanted(m, want, i))
			continue;
		if (!strcmp(t->role, "embed"))
			return -1;
		if (t->layer >= 0 && t->layer < first)
			first = t->layer;
	}
	return first;
}

/* Layer l's pointers of all (rm's weights or gradients), NULL where v
 * does not reach. */
static void rop_layer_views(const struct model *m, const unsigned char *want,
			    const struct layer_ptrs *all, int l, struct layer_ptrs *out)
{
#define VIEW(field, role) out->field = rop_wanted(m, want, model_find(m, role, l)) ? all->field : NULL
	VIEW(attn_norm, "attn_norm"); VIEW(wq, "q"); VIEW(wk, "k"); VIEW(wv, "v"); VIEW(wo, "o");
	VIEW(q_norm, "q_norm"); VIEW(k_norm, "k_norm"); VIEW(o_in_norm, "o_in_norm");
	VIEW(ffn_norm, "ffn_norm"); VIEW(wgate, "gate"); VIEW(wup, "up"); VIEW(wdown, "down");
	VIEW(down_in_norm, "down_in_norm");
#undef VIEW
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

/* The primal dinp += dout W, and dW += dout^T inp only when dw is given
 * (the multipliers' R{} needs it). */
static void rop_primal_matmul_backward(real *dinp, real *dw, const real *dout, const real *inp,
				       const real *w, int N, int din, int dout_)
{
	if (dw)
		model_matmul_backward(dinp, dw, dout, inp, w, N, din, dout_);
	else    /* dinp += dout W: the tangent product's first term */
		rop_matmul_backward(dinp, NULL, NULL, dout, inp, NULL, w, NULL, N, din, dout_);
}

/*
 * R{} of attention_forward, per (b, h): R{S} = scale (R{Q} K^T + Q R{K}^T),
 * R{P} = P (R{S} - rowsum(P R{S})) (zero above the diagonal, as P),
 * R{O} = R{P} V + P R{V}. ratt (B, H, T, T) keeps R{P} for the backward.
 */
static void rop_attention_forward(real *rout, real *ratt, const real *att, const real *q,
				  const real *k, const real *v, const real *rq, const real *rk,
				  const real *rv, int B, int T, int H, int KV, int hd)
{
	int Q = H * hd, K = KV * hd, group = H / KV;
	real scale = (real)(1.0 / sqrt((double)hd));

#pragma omp parallel for collapse(2) schedule(static) PAR_IF((size_t)B * H * T * T * hd)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int g = h / group;
			size_t qo = (size_t)b * T * Q + (size_t)h * hd, ko = (size_t)b * T * K + (size_t)g * hd;
			const real *pbh = att + ((size_t)b * H + h) * T * T;
			real *rpbh = ratt + ((size_t)b * H + h) * T * T;

			GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, rq + qo, Q, k + ko, K,
			     0, rpbh, T);
			GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, q + qo, Q, rk + ko, K,
			     1, rpbh, T);
			for (int t = 0; t < T; t++) {
				const real *p = pbh + (size_t)t * T;
				real *rp = rpbh + (size_t)t * T;
				double s = 0;
				for (int u = 0; u <= t; u++)
					s += (double)p[u] * rp[u];
				for (int u = 0; u <= t; u++)
					rp[u] = p[u] * (rp[u] - (real)s);
				for (int u = t + 1; u < T; u++)
					rp[u] = 0;
			}
			GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1, rpbh, T, v + ko, K,
			     0, rout + qo, Q);
			GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1, pbh, T, rv + ko, K,
			     1, rout + qo, Q);
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
 * dout NULL (Gauss-Newton): no primal pass, dq, dk, dv untouched. Threads
 * split the (b, KV head) pairs as attention_backward does; dP/dS and
 * R{dP}/R{dS} live in that pair's T x T of pscratch and rscratch.
 */
static void rop_attention_backward(real *dq, real *dk, real *dv, real *rdq, real *rdk, real *rdv,
				   real *pscratch, real *rscratch, const real *dout, const real *rdout,
				   const real *q, const real *k, const real *v, const real *rq,
				   const real *rk, const real *rv, const real *att, const real *ratt,
				   int B, int T, int H, int KV, int hd)
{
	int Q = H * hd, K = KV * hd, group = H / KV;
	real scale = (real)(1.0 / sqrt((double)hd));

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

				if (dout) {
					GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1, dout + qo, Q,
					     v + ko, K, 0, ds, T);
					GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, pbh, T,
					     dout + qo, Q, 1, dv + ko, K);
					GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, rpbh, T,
					     dout + qo, Q, 1, rdv + ko, K);
				}
				GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1, rdout + qo, Q,
				     v + ko, K, 0, rds, T);
				if (dout)
					GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1, dout + qo, Q,
					     rv + ko, K, 1, rds, T);
				GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, pbh, T,
				     rdout + qo, Q, 1, rdv + ko, K);
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
					for (int u = 0; u <= t; u++) {
						if (dout) {
							rd[u] = (rp[u] * (d[u] - (real)sig) +
								 p[u] * (rd[u] - (real)rsig)) * scale;
							d[u] = p[u] * (d[u] - (real)sig) * scale;
						} else {
							rd[u] = p[u] * (rd[u] - (real)rsig) * scale;
						}
					}
					for (int u = t + 1; u < T; u++) {
						rd[u] = 0;
						if (dout)
							d[u] = 0;
					}
				}
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1, rds, T, k + ko, K,
				     1, rdq + qo, Q);
				GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, rds, T, q + qo, Q,
				     1, rdk + ko, K);
				if (dout) {
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1, ds, T,
					     rk + ko, K, 1, rdq + qo, Q);
					GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, ds, T,
					     rq + qo, Q, 1, rdk + ko, K);
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1, ds, T,
					     k + ko, K, 1, dq + qo, Q);
					GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1, ds, T,
					     q + qo, Q, 1, dk + ko, K);
				}
			}
		}
}

/* R{h} of swiglu_forward: silu'(a) R{a} u + silu(a) R{u} */
static void rop_swiglu_forward(real *rh, const real *gate, const real *up, const real *rgate,
			       const real *rup, size_t n)
{
#pragma omp parallel for schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real s = elem_sigmoid(gate[i]), a = gate[i];
		rh[i] = s * (1 + a * (1 - s)) * rgate[i] * up[i] + a * s * rup[i];
	}
}

/* R{} of swiglu_backward (da = dh u silu'(a), du = dh silu(a)), with
 * silu''(a) = s (1 - s) (2 + a (1 - 2 s)):
 * R{da} += R{dh} u silu' + dh (R{u} silu' + u silu'' R{a}),
 * R{du} += R{dh} silu + dh silu' R{a}. */
static void rop_swiglu_backward(real *rdgate, real *rdup, const real *dh, const real *rdh,
				const real *gate, const real *up, const real *rgate, const real *rup,
				size_t n)
{
#pragma omp parallel for schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real s = elem_sigmoid(gate[i]), a = gate[i], d1 = s * (1 + a * (1 - s));
		real d2 = s * (1 - s) * (2 + a * (1 - 2 * s));
		rdgate[i] += rdh[i] * up[i] * d1 + (dh ? dh[i] * (rup[i] * d1 + up[i] * d2 * rgate[i]) : 0);
		rdup[i] += rdh[i] * a * s + (dh ? dh[i] * d1 * rgate[i] : 0);
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

/*
 * A linear layer's backward, tangent then primal (it reads the primal
 * dout): rdinp += R{dy} W + dy R{W}, R{dW} into rdw; with hv, dinp +=
 * dout W (and dW into dw when given). clear: rdinp and dinp zeroed first.
 */
static void rop_linear_pair(int hv, int clear, real *dinp, real *rdinp, real *dw, real *rdw,
			    const real *dout, const real *rdout, const real *inp, const real *rinp,
			    const real *w, const real *rw, int N, int din, int dout_)
{
	if (clear)
		memset(rdinp, 0, (size_t)N * din * sizeof(real));
	rop_matmul_backward(rdinp, rdw, hv ? dout : NULL, rdout, inp, rinp, w, rw, N, din, dout_);
	if (!hv)
		return;
	if (clear)
		memset(dinp, 0, (size_t)N * din * sizeof(real));
	rop_primal_matmul_backward(dinp, dw, dout, inp, w, N, din, dout_);
}

/* An RMSNorm's backward, tangent then primal (without the gain's primal
 * gradient): as rop_linear_pair. */
static void rop_rmsnorm_pair(int hv, int clear, real *dinp, real *rdinp, real *rdgain,
			     const real *dout, const real *rdout, const real *inp, const real *rinp,
			     const real *gain, const real *rgain, const real *rstd, const real *rrstd,
			     int N, int C)
{
	if (clear)
		memset(rdinp, 0, (size_t)N * C * sizeof(real));
	rop_rmsnorm_backward(rdinp, rdgain, hv ? dout : NULL, rdout, inp, rinp, gain, rgain, rstd,
			     rrstd, N, C);
	if (!hv)
		return;
	if (clear)
		memset(dinp, 0, (size_t)N * C * sizeof(real));
	model_rmsnorm_backward(dinp, NULL, dout, inp, gain, rstd, N, C);
}

/* g, the gradient of weight w, when w is an effective weight (the linear
 * has multipliers or gains: their R{} needs the primal dL/dW_eff), else
 * NULL (no primal weight gradient is needed) */
static real *eff_grad(const struct model *m, const real *w, real *g)
{
	return m->eff && w >= m->w_eff && w < m->w_eff + m->eff_size ? g : NULL;
}

int model_rop_build(struct model *rm, const struct model *m, struct sw_err *err)
{
	int rc;

	if ((rc = model_build(rm, &m->c, err)))
		return rc;
	if ((rc = model_alloc_acts(rm, m->B, m->T, err)))
		model_free(rm);
	return rc;
}

/* The head's tensor: the embedding when tied. */
static int rop_head_tensor(const struct model *m)
{
	return model_find(m, m->c.tie_embeddings ? "embed" : "lm_head", -1);
}

void model_rop_forward(const struct model *m, struct model *rm, const int *tokens,
		       const unsigned char *want)
{
	const struct sw_config *c = &m->c;
	int B = m->B, T = m->T, N = B * T, C = (int)c->d_model, H = (int)c->n_heads,
	    KV = (int)c->n_kv_heads, hd = (int)c->head_dim, Q = H * hd, K = KV * hd,
	    F = (int)c->d_ff, V = (int)c->vocab_size, L = (int)c->n_layers;
	int first = rop_first_layer(m, want), head = rop_head_tensor(m);

	/* the tangents of the effective weights */
	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		size_t wo = m->tensors[l->tensor].offset;
		if (l->mode != MULT_NONE && rop_wanted(m, want, l->tensor))
			rop_mult_apply(rm->w_eff + m->eff_offset[i], m->params + wo, rm->params + wo,
				       model_linear_mult_view(m, l, m->params),
				       model_linear_mult_view(m, l, rm->params), l->dout, l->din);
	}
	if (first < 0) {
		model_encoder_forward(rm->acts[0].x_in, tokens, rm->p.embed, N, C);
		first = 0;
	} else {
		memset(first < L ? rm->acts[first].x_in : rm->x_final, 0, (size_t)N * C * sizeof(real));
	}
	for (int l = first; l < L; l++) {
		const struct layer_acts *a = &m->acts[l];
		struct layer_acts *ra = &rm->acts[l];
		const struct layer_ptrs *w = &m->p.layer[l];
		struct layer_ptrs rw;

		rop_layer_views(m, want, &rm->p.layer[l], l, &rw);
		rop_rmsnorm_forward(ra->n1, ra->n1_rstd, a->x_in, ra->x_in, w->attn_norm, rw.attn_norm,
				    a->n1_rstd, N, C);
		rop_matmul_forward(ra->q_lin, a->n1, ra->n1, w->wq, rw.wq, N, C, Q);
		rop_matmul_forward(ra->k_lin, a->n1, ra->n1, w->wk, rw.wk, N, C, K);
		rop_matmul_forward(ra->v, a->n1, ra->n1, w->wv, rw.wv, N, C, K);
		if (c->qk_norm) {
			rop_rmsnorm_forward(ra->q, ra->q_rstd, a->q_lin, ra->q_lin, w->q_norm, rw.q_norm,
					    a->q_rstd, N * H, hd);
			rop_rmsnorm_forward(ra->k, ra->k_rstd, a->k_lin, ra->k_lin, w->k_norm, rw.k_norm,
					    a->k_rstd, N * KV, hd);
		} else {
			memcpy(ra->q, ra->q_lin, (size_t)N * Q * sizeof(real));
			memcpy(ra->k, ra->k_lin, (size_t)N * K * sizeof(real));
		}
		model_rope_forward(ra->q, m->rope_cos, m->rope_sin, B, T, H, hd);
		model_rope_forward(ra->k, m->rope_cos, m->rope_sin, B, T, KV, hd);
		rop_attention_forward(ra->att_out, ra->att, a->att, a->q, a->k, a->v, ra->q, ra->k, ra->v,
				      B, T, H, KV, hd);
		if (c->norm_everywhere) {
			rop_rmsnorm_forward(ra->o_in, ra->o_in_rstd, a->att_out, ra->att_out, w->o_in_norm,
					    rw.o_in_norm, a->o_in_rstd, N, Q);
			rop_matmul_forward(ra->attn_y, a->o_in, ra->o_in, w->wo, rw.wo, N, Q, C);
		} else {
			rop_matmul_forward(ra->attn_y, a->att_out, ra->att_out, w->wo, rw.wo, N, Q, C);
		}
		model_residual_forward(ra->x_mid, ra->x_in, ra->attn_y, (size_t)N * C);

		rop_rmsnorm_forward(ra->n2, ra->n2_rstd, a->x_mid, ra->x_mid, w->ffn_norm, rw.ffn_norm,
				    a->n2_rstd, N, C);
		rop_matmul_forward(ra->gate, a->n2, ra->n2, w->wgate, rw.wgate, N, C, F);
		rop_matmul_forward(ra->up, a->n2, ra->n2, w->wup, rw.wup, N, C, F);
		rop_swiglu_forward(ra->h, a->gate, a->up, ra->gate, ra->up, (size_t)N * F);
		if (c->norm_everywhere) {
			rop_rmsnorm_forward(ra->d_in, ra->d_in_rstd, a->h, ra->h, w->down_in_norm,
					    rw.down_in_norm, a->d_in_rstd, N, F);
			rop_matmul_forward(ra->mlp_y, a->d_in, ra->d_in, w->wdown, rw.wdown, N, F, C);
		} else {
			rop_matmul_forward(ra->mlp_y, a->h, ra->h, w->wdown, rw.wdown, N, F, C);
		}
		model_residual_forward(l + 1 < L ? rm->acts[l + 1].x_in : rm->x_final, ra->x_mid, ra->mlp_y,
				       (size_t)N * C);
	}
	rop_rmsnorm_forward(rm->nf, rm->nf_rstd, m->x_final, rm->x_final, m->p.final_norm,
			    rop_wanted(m, want, model_find(m, "final_norm", -1)) ? rm->p.final_norm : NULL,
			    m->nf_rstd, N, C);
	rop_matmul_forward(rm->logits, m->nf, rm->nf, m->p.lm_head,
			   rop_wanted(m, want, head) ? rm->p.lm_head : NULL, N, C, V);
}

void model_rop_backward(struct model *m, struct model *rm, const int *tokens, const int *targets,
			double loss_scale, int gauss_newton, const unsigned char *want,
			real *dlogits)
{
	const struct sw_config *c = &m->c;
	int B = m->B, T = m->T, N = B * T, C = (int)c->d_model, H = (int)c->n_heads,
	    KV = (int)c->n_kv_heads, hd = (int)c->head_dim, Q = H * hd, K = KV * hd,
	    F = (int)c->d_ff, V = (int)c->vocab_size, L = (int)c->n_layers;
	int first = rop_first_layer(m, want), head = rop_head_tensor(m), hv = !gauss_newton;
	int final = model_find(m, "final_norm", -1);
	/* the scratch as model_backward lays it out, primal in m's, tangent in rm's */
	real *s[2][11];
	real *dz = NULL, *dn, *dres, *dF1, *dF2, *dF3, *dq, *dq2, *dk, *dk2, *dv;
	real *rdres, *rdn, *rdF1, *rdF2, *rdF3, *rdq, *rdq2, *rdk, *rdk2, *rdv;
	size_t sizes[11] = {(size_t)N * C, (size_t)N * C, (size_t)N * F, (size_t)N * F, (size_t)N * F,
			    (size_t)N * Q, (size_t)N * Q, (size_t)N * K, (size_t)N * K, (size_t)N * K, 0};
	real *gw[2] = {m->scratch, rm->scratch};
#define ZERO(p, n) memset((p), 0, (size_t)(n) * sizeof(real))
#define PRIMAL(p) (hv ? (p) : NULL)

	for (int j = 0; j < 2; j++)
		for (int i = 0; i < 11; i++) {
			s[j][i] = gw[j];
			gw[j] += sizes[i];
		}
	dres = s[0][0]; dn = s[0][1]; dF1 = s[0][2]; dF2 = s[0][3]; dF3 = s[0][4];
	dq = s[0][5]; dq2 = s[0][6]; dk = s[0][7]; dk2 = s[0][8]; dv = s[0][9];
	rdres = s[1][0]; rdn = s[1][1]; rdF1 = s[1][2]; rdF2 = s[1][3]; rdF3 = s[1][4];
	rdq = s[1][5]; rdq2 = s[1][6]; rdk = s[1][7]; rdk2 = s[1][8]; rdv = s[1][9];
	if (first < 0)
		first = 0;
	else if (first > L)
		first = L;
	if (m->eff) {
		ZERO(rm->dw_eff, m->eff_size);
		if (hv)
			ZERO(m->dw_eff, m->eff_size);
	}

	/* the logits: R{dz} over R{z}, then the primal dz */
	rop_softmax_crossentropy_backward(rm->logits, m->logits, N, V, (real)(loss_scale / N));
	if (hv) {
		dz = dlogits ? dlogits : m->logits;
		if (dlogits)
			memcpy(dlogits, m->logits, (size_t)N * V * sizeof(real));
		model_softmax_crossentropy_backward(dz, targets, N, V, (real)(loss_scale / N));
	}
	rop_linear_pair(hv, 1, dn, rdn, eff_grad(m, m->p.lm_head, m->g.lm_head),
			rop_wanted(m, want, head) ? rm->g.lm_head : NULL, dz, rm->logits, m->nf, rm->nf,
			m->p.lm_head, rop_wanted(m, want, head) ? rm->p.lm_head : NULL, N, C, V);
	rop_rmsnorm_pair(hv, 1, dres, rdres, rop_wanted(m, want, final) ? rm->g.final_norm : NULL, dn, rdn,
			 m->x_final, rm->x_final, m->p.final_norm,
			 rop_wanted(m, want, final) ? rm->p.final_norm : NULL, m->nf_rstd, rm->nf_rstd, N, C);

	for (int l = L - 1; l >= first; l--) {
		const struct layer_acts *a = &m->acts[l];
		const struct layer_acts *ra = &rm->acts[l];
		const struct layer_ptrs *w = &m->p.layer[l];
		struct layer_ptrs rw, rg, *g = &m->g.layer[l], gm = {0};
		int nev = c->norm_everywhere;

		rop_layer_views(m, want, &rm->p.layer[l], l, &rw);
		rop_layer_views(m, want, &rm->g.layer[l], l, &rg);
		/* the multipliers' R{} needs dL/dW_eff, where a linear has them */
		gm.wq = eff_grad(m, w->wq, g->wq);
		gm.wk = eff_grad(m, w->wk, g->wk);
		gm.wv = eff_grad(m, w->wv, g->wv);
		gm.wo = eff_grad(m, w->wo, g->wo);
		gm.wgate = eff_grad(m, w->wgate, g->wgate);
		gm.wup = eff_grad(m, w->wup, g->wup);
		gm.wdown = eff_grad(m, w->wdown, g->wdown);

		/* x_out = x_mid + down(h): dres and R{dres} flow to x_mid */
		rop_linear_pair(hv, 1, nev ? dF2 : dF1, nev ? rdF2 : rdF1, gm.wdown, rg.wdown, dres, rdres,
				nev ? a->d_in : a->h, nev ? ra->d_in : ra->h, w->wdown, rw.wdown, N, F, C);
		if (nev)
			rop_rmsnorm_pair(hv, 1, dF1, rdF1, rg.down_in_norm, dF2, rdF2, a->h, ra->h,
					 w->down_in_norm, rw.down_in_norm, a->d_in_rstd, ra->d_in_rstd, N, F);
		ZERO(rdF2, (size_t)N * F);
		ZERO(rdF3, (size_t)N * F);
		rop_swiglu_backward(rdF2, rdF3, PRIMAL(dF1), rdF1, a->gate, a->up, ra->gate, ra->up,
				    (size_t)N * F);
		if (hv) {
			ZERO(dF2, (size_t)N * F);
			ZERO(dF3, (size_t)N * F);
			model_swiglu_backward(dF2, dF3, dF1, a->gate, a->up, (size_t)N * F);
		}
		rop_linear_pair(hv, 1, dn, rdn, gm.wgate, rg.wgate, dF2, rdF2, a->n2, ra->n2, w->wgate,
				rw.wgate, N, C, F);
		rop_linear_pair(hv, 0, dn, rdn, gm.wup, rg.wup, dF3, rdF3, a->n2, ra->n2, w->wup, rw.wup,
				N, C, F);
		rop_rmsnorm_pair(hv, 0, dres, rdres, rg.ffn_norm, dn, rdn, a->x_mid, ra->x_mid, w->ffn_norm,
				 rw.ffn_norm, a->n2_rstd, ra->n2_rstd, N, C);

		/* x_mid = x_in + o(attn): dres and R{dres} flow to x_in */
		rop_linear_pair(hv, 1, nev ? dq : dq2, nev ? rdq : rdq2, gm.wo, rg.wo, dres, rdres,
				nev ? a->o_in : a->att_out, nev ? ra->o_in : ra->att_out, w->wo, rw.wo, N, Q, C);
		if (nev)
			rop_rmsnorm_pair(hv, 1, dq2, rdq2, rg.o_in_norm, dq, rdq, a->att_out, ra->att_out,
					 w->o_in_norm, rw.o_in_norm, a->o_in_rstd, ra->o_in_rstd, N, Q);
		ZERO(rdq, (size_t)N * Q);
		ZERO(rdk, (size_t)N * K);
		ZERO(rdv, (size_t)N * K);
		if (hv) {
			ZERO(dq, (size_t)N * Q);
			ZERO(dk, (size_t)N * K);
			ZERO(dv, (size_t)N * K);
		}
		rop_attention_backward(dq, dk, dv, rdq, rdk, rdv, s[0][10], s[1][10], PRIMAL(dq2), rdq2,
				       a->q, a->k, a->v, ra->q, ra->k, ra->v, a->att, ra->att, B, T, H, KV, hd);
		model_rope_backward(rdq, m->rope_cos, m->rope_sin, B, T, H, hd);
		model_rope_backward(rdk, m->rope_cos, m->rope_sin, B, T, KV, hd);
		if (hv) {
			model_rope_backward(dq, m->rope_cos, m->rope_sin, B, T, H, hd);
			model_rope_backward(dk, m->rope_cos, m->rope_sin, B, T, KV, hd);
		}
		if (c->qk_norm) {
			/* through the per-head norms to d(q_lin), d(k_lin) */
			rop_rmsnorm_pair(hv, 1, dq2, rdq2, rg.q_norm, dq, rdq, a->q_lin, ra->q_lin, w->q_norm,
					 rw.q_norm, a->q_rstd, ra->q_rstd, N * H, hd);
			rop_rmsnorm_pair(hv, 1, dk2, rdk2, rg.k_norm, dk, rdk, a->k_lin, ra->k_lin, w->k_norm,
					 rw.k_norm, a->k_rstd, ra->k_rstd, N * KV, hd);
			memcpy(rdq, rdq2, (size_t)N * Q * sizeof(real));
			memcpy(rdk, rdk2, (size_t)N * K * sizeof(real));
			if (hv) {
				memcpy(dq, dq2, (size_t)N * Q * sizeof(real));
				memcpy(dk, dk2, (size_t)N * K * sizeof(real));
			}
		}
		rop_linear_pair(hv, 1, dn, rdn, gm.wq, rg.wq, dq, rdq, a->n1, ra->n1, w->wq, rw.wq, N, C, Q);
		rop_linear_pair(hv, 0, dn, rdn, gm.wk, rg.wk, dk, rdk, a->n1, ra->n1, w->wk, rw.wk, N, C, K);
		rop_linear_pair(hv, 0, dn, rdn, gm.wv, rg.wv, dv, rdv, a->n1, ra->n1, w->wv, rw.wv, N, C, K);
		rop_rmsnorm_pair(hv, 0, dres, rdres, rg.attn_norm, dn, rdn, a->x_in, ra->x_in, w->attn_norm,
				 rw.attn_norm, a->n1_rstd, ra->n1_rstd, N, C);
	}
	if (rop_first_layer(m, want) < 0)
		model_encoder_backward(rm->g.embed, rdres, tokens, N, C);

	/* multipliers: from R{dL/dW_eff} to R{dL/dW} and R{dL/dmult} */
	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		const struct model_tensor *wt = &m->tensors[l->tensor];
		int ww, wm;
		real *rdrow, *rdcol;
		if (l->mode == MULT_NONE)
			continue;
		ww = !want || want[l->tensor];
		wm = !want || want[l->mult_tensor] || (l->col_tensor >= 0 && want[l->col_tensor]);
		model_linear_mult_grads(m, l, rm->grads, &rdrow, &rdcol);
		if (ww || wm)
			rop_mult_backward(ww ? rm->grads + wt->offset : NULL, wm ? rdrow : NULL,
					  wm ? rdcol : NULL, rm->dw_eff + m->eff_offset[i],
					  hv ? m->dw_eff + m->eff_offset[i] : NULL, m->params + wt->offset,
					  rm->params + wt->offset, model_linear_mult_view(m, l, m->params),
					  model_linear_mult_view(m, l, rm->params), l->dout, l->din);
	}
#undef ZERO
#undef PRIMAL
}
