/*
 * cpukern.c - the model's CPU kernels (cpukern.h): one forward and one
 * backward function per layer kind, named after the math, in the order
 * of llm.c's train_gpt2.c: outputs, then saved values, then inputs, then
 * weights, then sizes. Backward functions add into their gradients.
 * model.c's table of the step's operations runs them.
 */
#include "cpukern.h"
#include "../base/elemmath.h"
#include "../base/isa.h"
#include "../base/par.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

/* ---- row reductions ------------------------------------------------------ */

/*
 * A row's maximum and its sums in vectors (a serial sum in double waits
 * four cycles an element, and a serial "p > max ? p : max" compiles to
 * scalar code unless NaNs are ruled out). A maximum is the same
 * whatever the order, so the compiler picks it. A sum runs in ROW_LANES
 * lanes, lane j taking elements j, j + ROW_LANES, ..., then the lanes are
 * added in order, then the tail: the same order on every CPU. A sum is in
 * double, so only its last bits depend on the order, and the float made
 * from it (1/sum, r, a mean) is the same for any order but where the
 * double lies within those bits of a float's rounding boundary. The GPU's
 * kernels add in another order (lib/model/cuda/kernels.h), and t0064 holds the
 * two to the same checkpoints, bit for bit.
 */
#define ROW_LANES 16

static inline real row_max(const real *p, int n)
{
	real maxv = -INFINITY;

#pragma omp simd reduction(max : maxv)
	for (int i = 0; i < n; i++)
		maxv = p[i] > maxv ? p[i] : maxv;
	return maxv;
}

static inline double lanes_total(const double *lane)
{
	double sum = 0;
	for (int j = 0; j < ROW_LANES; j++)
		sum += lane[j];
	return sum;
}

/* p[i] = exp(p[i] - maxv); returns their sum */
static inline double row_exp_sum(real *p, int n, real maxv)
{
	double lane[ROW_LANES] = {0}, sum;
	int i = 0;

	for (; i + ROW_LANES <= n; i += ROW_LANES)
		for (int j = 0; j < ROW_LANES; j++) {
			p[i + j] = elem_exp(p[i + j] - maxv);
			lane[j] += p[i + j];
		}
	sum = lanes_total(lane);
	for (; i < n; i++) {
		p[i] = elem_exp(p[i] - maxv);
		sum += p[i];
	}
	return sum;
}

/* sum of a[i] b[i] in double (each product exact) */
static inline double row_dot(const real *a, const real *b, int n)
{
	double lane[ROW_LANES] = {0}, sum;
	int i = 0;

	for (; i + ROW_LANES <= n; i += ROW_LANES)
		for (int j = 0; j < ROW_LANES; j++)
			lane[j] += (double)a[i + j] * b[i + j];
	sum = lanes_total(lane);
	for (; i < n; i++)
		sum += (double)a[i] * b[i];
	return sum;
}

/* RMSNorm backward's dot(dxhat, xhat) over a row (elem_rmsnorm_dot's
 * terms; gain NULL: 1). Two loops: with the choice of gain inside one,
 * GCC leaves it scalar. */
static inline double rmsnorm_row_dot(const real *dy, const real *gain, const real *x, real r, int n)
{
	double lane[ROW_LANES] = {0}, sum;
	int i = 0;

	if (gain)
		for (; i + ROW_LANES <= n; i += ROW_LANES)
			for (int j = 0; j < ROW_LANES; j++)
				lane[j] += elem_rmsnorm_dot(dy[i + j], gain[i + j], x[i + j], r);
	else
		for (; i + ROW_LANES <= n; i += ROW_LANES)
			for (int j = 0; j < ROW_LANES; j++)
				lane[j] += elem_rmsnorm_dot(dy[i + j], 1, x[i + j], r);
	sum = lanes_total(lane);
	for (; i < n; i++)
		sum += elem_rmsnorm_dot(dy[i], gain ? gain[i] : 1, x[i], r);
	return sum;
}

/* sum of p[i] in double */
static inline double row_sum(const real *p, int n)
{
	double lane[ROW_LANES] = {0}, sum;
	int i = 0;

	for (; i + ROW_LANES <= n; i += ROW_LANES)
		for (int j = 0; j < ROW_LANES; j++)
			lane[j] += p[i + j];
	sum = lanes_total(lane);
	for (; i < n; i++)
		sum += p[i];
	return sum;
}

/* sum of (p[i] - mu)^2 in double (LayerNorm's variance) */
static inline double row_centered_sq(const real *p, real mu, int n)
{
	double lane[ROW_LANES] = {0}, sum;
	int i = 0;

	for (; i + ROW_LANES <= n; i += ROW_LANES)
		for (int j = 0; j < ROW_LANES; j++)
			lane[j] += elem_layernorm_sq(p[i + j], mu);
	sum = lanes_total(lane);
	for (; i < n; i++)
		sum += elem_layernorm_sq(p[i], mu);
	return sum;
}

/* LayerNorm backward's sums over a row: s1 of dxhat = dy g, s2 of dxhat
 * xhat (gain NULL: 1) */
static inline void layernorm_row_dots(const real *dy, const real *gain, const real *x, real mu,
				      real r, int n, double *s1, double *s2)
{
	double l1[ROW_LANES] = {0}, l2[ROW_LANES] = {0};
	int i = 0;

	for (; i + ROW_LANES <= n; i += ROW_LANES)
		for (int j = 0; j < ROW_LANES; j++) {
			real g = gain ? gain[i + j] : 1;
			l1[j] += (double)(dy[i + j] * g);
			l2[j] += elem_layernorm_dot(dy[i + j], g, x[i + j], mu, r);
		}
	*s1 = lanes_total(l1);
	*s2 = lanes_total(l2);
	for (; i < n; i++) {
		real g = gain ? gain[i] : 1;
		*s1 += (double)(dy[i] * g);
		*s2 += elem_layernorm_dot(dy[i], g, x[i], mu, r);
	}
}

/* ---- the layers, forward and backward ------------------------------- */

/* out[n] = embed[token[n]] */
void model_encoder_forward(real *out, const int *tokens, const real *embed, int N, int C)
{
	for (int n = 0; n < N; n++)
		memcpy(out + (size_t)n * C, embed + (size_t)tokens[n] * C, (size_t)C * sizeof(real));
}

void model_encoder_backward(real *dembed, const real *dout, const int *tokens, int N, int C)
{
	/* serial over tokens: two tokens may share a row */
	for (int n = 0; n < N; n++) {
		real *d = dembed + (size_t)tokens[n] * C;
		const real *g = dout + (size_t)n * C;
#pragma omp simd
		for (int i = 0; i < C; i++)
			d[i] += g[i];
	}
}

/* out = gain * x / sqrt(mean(x^2) + eps), per row of C; gain may be NULL */
ISA_VECTOR_CLONES
void model_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *gain,
			   int N, int C, double eps)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * C)
	for (int n = 0; n < N; n++) {
		const real *x = inp + (size_t)n * C;
		real *y = out + (size_t)n * C;
		real r = elem_rmsnorm_rstd(row_dot(x, x, C), C, eps);
		rstd[n] = r;
		for (int i = 0; i < C; i++)
			y[i] = elem_rmsnorm_out(x[i], r, gain ? gain[i] : 1);
	}
}

/*
 * Backward of y = g * xhat, xhat = x * r, r = (mean(x^2) + eps)^(-1/2):
 * dg += sum_n dy * xhat; dx = r * (dxhat - xhat * mean(dxhat * xhat)),
 * dxhat = dy * g.
 */
ISA_VECTOR_CLONES
void model_rmsnorm_backward(real *dinp, real *dgain, const real *dout, const real *inp,
			    const real *gain, const real *rstd, int N, int C)
{
#pragma omp parallel PAR_IF((size_t)N * C)
	{
		int nth = omp_get_num_threads(), tid = omp_get_thread_num();
		/* each thread owns a slice of the gain's entries for dgain */
		int c0 = (int)((long)C * tid / nth), c1 = (int)((long)C * (tid + 1) / nth);
		if (dgain)
			for (int n = 0; n < N; n++) {
				const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
				real r = rstd[n];
				for (int i = c0; i < c1; i++)
					dgain[i] += elem_rmsnorm_dgain(dy[i], x[i], r);
			}
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
			real *dx = dinp + (size_t)n * C, r = rstd[n];
			real mean = elem_rmsnorm_mean(rmsnorm_row_dot(dy, gain, x, r, C), C);
			for (int i = 0; i < C; i++)
				dx[i] += elem_rmsnorm_dx(dy[i], gain ? gain[i] : 1, x[i], r, mean);
		}
	}
}

/*
 * LayerNorm (GPT-2's): y = g * (x - mu) * r + b, mu the row's mean, r =
 * (var + eps)^(-1/2) with the biased variance, two passes over the row
 * (elemmath.h's elem_layernorm_*); mean and rstd saved. gain, bias NULL:
 * none.
 */
ISA_VECTOR_CLONES
void model_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *gain,
			     const real *bias, int N, int C, double eps)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * C)
	for (int n = 0; n < N; n++) {
		const real *x = inp + (size_t)n * C;
		real *y = out + (size_t)n * C;
		real mu = elem_layernorm_mean(row_sum(x, C), C);
		real r = elem_layernorm_rstd(row_centered_sq(x, mu, C), C, eps);
		mean[n] = mu;
		rstd[n] = r;
		for (int i = 0; i < C; i++)
			y[i] = elem_layernorm_out(x[i], mu, r, gain ? gain[i] : 1, bias ? bias[i] : 0);
	}
}

/*
 * Backward of y = g * xhat + b, xhat = (x - mu) r: dg += sum_n dy xhat,
 * db += sum_n dy (each thread a slice of the entries, rows in order, as
 * RMSNorm's); dx += r (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
 * dxhat = dy g. dgain, dbias NULL: not formed.
 */
ISA_VECTOR_CLONES
void model_layernorm_backward(real *dinp, real *dgain, real *dbias, const real *dout,
			      const real *inp, const real *gain, const real *mean,
			      const real *rstd, int N, int C)
{
#pragma omp parallel PAR_IF((size_t)N * C)
	{
		int nth = omp_get_num_threads(), tid = omp_get_thread_num();
		int c0 = (int)((long)C * tid / nth), c1 = (int)((long)C * (tid + 1) / nth);
		if (dgain || dbias)
			for (int n = 0; n < N; n++) {
				const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
				real mu = mean[n], r = rstd[n];
				if (dgain)
					for (int i = c0; i < c1; i++)
						dgain[i] += elem_layernorm_dgain(dy[i], x[i], mu, r);
				if (dbias)
					for (int i = c0; i < c1; i++)
						dbias[i] += dy[i];
			}
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
			real *dx = dinp + (size_t)n * C, mu = mean[n], r = rstd[n];
			double s1, s2;
			layernorm_row_dots(dy, gain, x, mu, r, C, &s1, &s2);
			real m1 = elem_rmsnorm_mean(s1, C), m2 = elem_rmsnorm_mean(s2, C);
			for (int i = 0; i < C; i++)
				dx[i] += elem_layernorm_dx(dy[i], gain ? gain[i] : 1, x[i], mu, r, m1, m2);
		}
	}
}

/*
 * The matrix products: each is split into row blocks across the OpenMP
 * threads, and OpenBLAS (its OpenMP build, see the Makefile) runs each
 * block single-threaded inside the parallel region. One pool of threads for
 * the whole model, and every output element is computed by one call with a
 * fixed split, so results are reproducible for a thread count.
 */
void model_rows_of(int n, int *r0, int *r1)
{
	int nth = omp_get_num_threads(), tid = omp_get_thread_num();
	*r0 = (int)((long)n * tid / nth);
	*r1 = (int)((long)n * (tid + 1) / nth);
}

/* out (N, dout) = inp (N, din) W^T, W (dout, din) */
void model_matmul_forward(real *out, const real *inp, const real *w, int N, int din, int dout)
{
#pragma omp parallel PAR_IF_FLOPS((size_t)N * din * dout)
	{
		int r0, r1;
		model_rows_of(N, &r0, &r1);
		if (r1 > r0)
			GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, dout, din, 1,
			     inp + (size_t)r0 * din, din, w, din, 0, out + (size_t)r0 * dout, dout);
	}
}

/* dinp += dout W (split over tokens); dW += dout^T inp (split over W's rows) */
void model_matmul_backward(real *dinp, real *dw, const real *dout, const real *inp,
			   const real *w, int N, int din, int dout_)
{
#pragma omp parallel PAR_IF_FLOPS((size_t)N * din * dout_)
	{
		int r0, r1;
		if (dinp) {
			model_rows_of(N, &r0, &r1);
			if (r1 > r0)
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, din, dout_, 1,
				     dout + (size_t)r0 * dout_, dout_, w, din, 1, dinp + (size_t)r0 * din, din);
		}
		model_rows_of(dout_, &r0, &r1);
		if (r1 > r0)
			GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, din, N, 1, dout + r0, dout_,
			     inp, din, 1, dw + (size_t)r0 * din, din);
	}
}

/*
 * The backward of products fused into one, out = inp [W_0; W_1; ...]^T
 * (the W_p adjacent rows of one block, out's columns the parts' side by
 * side, ld = the sum of the parts): dW += dout^T inp for all parts in one
 * product (each element the same sum over tokens as apart), and dinp +=
 * dout_0 W_0 + dout_1 W_1 + ... as separate products in that order, so
 * that dinp rounds as the unfused layers' did (one product over the
 * joined parts would add in another order).
 */
void model_matmul_backward_parts(real *dinp, real *dw, const real *dout, const real *inp,
				 const real *w, int N, int din, const int *part, int nparts)
{
	int ld = 0;

	for (int p = 0; p < nparts; p++)
		ld += part[p];
#pragma omp parallel PAR_IF_FLOPS((size_t)N * din * ld)
	{
		int r0, r1;
		model_rows_of(N, &r0, &r1);
		for (int p = 0, off = 0; p < nparts && r1 > r0; off += part[p++])
			GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, din, part[p], 1,
			     dout + (size_t)r0 * ld + off, ld, w + (size_t)off * din, din, 1,
			     dinp + (size_t)r0 * din, din);
		model_rows_of(ld, &r0, &r1);
		if (r1 > r0)
			GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, din, N, 1, dout + r0, ld,
			     inp, din, 1, dw + (size_t)r0 * din, din);
	}
}

/*
 * RoPE, rotate-half convention: for a head vector x and i < hd/2,
 * (x_i, x_{i+hd/2}) turns by t * theta_i. In place on (N, nh, hd).
 */
void model_rope_forward(real *x, const real *cos_, const real *sin_, int B, int T, int nh, int hd)
{
	int half = hd / 2;
#pragma omp parallel for schedule(static) PAR_IF((size_t)B * T * nh * hd)
	for (int n = 0; n < B * T; n++) {
		const real *c = cos_ + (size_t)(n % T) * half, *s = sin_ + (size_t)(n % T) * half;
		for (int h = 0; h < nh; h++) {
			real *v = x + ((size_t)n * nh + h) * hd;
			for (int i = 0; i < half; i++)
				elem_rope_forward(&v[i], &v[i + half], c[i], s[i]);
		}
	}
}

/* The transpose of a rotation is the rotation back. In place. */
void model_rope_backward(real *dx, const real *cos_, const real *sin_, int B, int T, int nh, int hd)
{
	int half = hd / 2;
#pragma omp parallel for schedule(static) PAR_IF((size_t)B * T * nh * hd)
	for (int n = 0; n < B * T; n++) {
		const real *c = cos_ + (size_t)(n % T) * half, *s = sin_ + (size_t)(n % T) * half;
		for (int h = 0; h < nh; h++) {
			real *v = dx + ((size_t)n * nh + h) * hd;
			for (int i = 0; i < half; i++)
				elem_rope_backward(&v[i], &v[i + half], c[i], s[i]);
		}
	}
}

/* the causal scores' soft-cap in place, s = cap tanh(s / cap) on and
 * below the diagonal, tt (T, T) their tanh (0 above) */
static void softcap_scores(real *s, real *tt, int T, real cap)
{
	for (int t = 0; t < T; t++) {
		real *row = s + (size_t)t * T, *trow = tt + (size_t)t * T;
		for (int u = 0; u <= t; u++)
			row[u] = elem_softcap(row[u], cap, &trow[u]);
		for (int u = t + 1; u < T; u++)
			trow[u] = 0;
	}
}

/*
 * Causal attention with GQA: out[b,t,h] = sum_{u<=t} P[b,h,t,u] v[b,u,g(h)],
 * P = softmax_u(cap(scale q[b,t,h] . k[b,u,g(h)])), g(h) = h / (H/KV),
 * scale 1/sqrt(hd) (Llama's) or the family's, cap the identity without a
 * soft-cap (softcap 0) and softcap tanh(s / softcap) with one (Gemma2's:
 * att_tanh keeps the tanh for the backward).
 * q (N, H, hd), k and v (N, KV, hd), att (B, H, T, T), out (N, H, hd).
 * Per (b, h) two matrix products: S = scale Q_h K_g^T (the blocks of T x T
 * on and below the diagonal, model_causal_block; what lies above t in a row is
 * then masked), and O_h = P V_g, P being zero above the diagonal. The
 * GEMMs run inside the parallel loop, each on one thread.
 */
ISA_VECTOR_CLONES
void model_attention_forward(real *out, real *att, real *att_tanh, const real *q, const real *k,
			     const real *v, int B, int T, int H, int KV, int hd, real scale,
			     real softcap)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);

#pragma omp parallel for collapse(2) schedule(static) PAR_IF((size_t)B * H * T * T * hd)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int g = h / group;
			const real *qh = q + (size_t)b * T * Q + (size_t)h * hd;
			const real *kg = k + (size_t)b * T * K + (size_t)g * hd;
			const real *vg = v + (size_t)b * T * K + (size_t)g * hd;
			real *pbh = att + ((size_t)b * H + h) * T * T;

			for (int i = 0; i < nb; i++) {    /* S's blocks on and below the diagonal */
				int r0, r1;
				model_causal_block(T, nb, i, &r0, &r1);
				GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, scale,
				     qh + (size_t)r0 * Q, Q, kg, K, 0, pbh + (size_t)r0 * T, T);
			}
			if (softcap > 0)
				softcap_scores(pbh, att_tanh + ((size_t)b * H + h) * T * T, T, softcap);
			for (int t = 0; t < T; t++) {
				real *p = pbh + (size_t)t * T;
				real inv = elem_softmax_inv(row_exp_sum(p, t + 1, row_max(p, t + 1)));
				for (int u = 0; u <= t; u++)
					p[u] *= inv;
				for (int u = t + 1; u < T; u++)
					p[u] = 0;
			}
			for (int i = 0; i < nb; i++) {    /* O's rows: P's nonzero columns */
				int r0, r1;
				model_causal_block(T, nb, i, &r0, &r1);
				GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
				     pbh + (size_t)r0 * T, T, vg, K, 0,
				     out + ((size_t)b * T + r0) * Q + (size_t)h * hd, Q);
			}
		}
}

/* dY's rows r0..r1 += M^T X over M's rows from r0 on (M (T, T) zero
 * above the diagonal, so the rows above r0 add nothing); Y, X (T, hd)
 * with rows ldy, ldx apart */
void model_causal_add_tn(real *dy, int ldy, const real *m, const real *x, int ldx, int T, int r0,
			  int r1, int hd)
{
	GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, hd, T - r0, 1, m + (size_t)r0 * T + r0,
	     T, x + (size_t)r0 * ldx, ldx, 1, dy + (size_t)r0 * ldy, ldy);
}

/*
 * Backward of the above, per (b, h): dP = dO_h V_g^T; dV_g += P^T dO_h;
 * the softmax backward dS[t,u] = P[t,u] (dP[t,u] - sum_j P[t,j] dP[t,j])
 * (times 1 - tanh^2 through a soft-cap); dQ_h += scale dS K_g; dK_g +=
 * scale dS^T Q_h. Threads split the
 * (b, KV-head) pairs, so a KV head's gradients are written by one thread
 * only, whatever the group size; dP lives in that pair's T x T scratch.
 */
ISA_VECTOR_CLONES
void model_attention_backward(real *dq, real *dk, real *dv, real *scratch,
			      const real *dout, const real *q, const real *k, const real *v,
			      const real *att, const real *att_tanh, int B, int T, int H, int KV,
			      int hd, real scale, real softcap)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);

#pragma omp parallel for collapse(2) schedule(static) PAR_IF((size_t)B * H * T * T * hd)
	for (int b = 0; b < B; b++)
		for (int g = 0; g < KV; g++) {
			real *ds = scratch + ((size_t)b * KV + g) * T * T;
			const real *kg = k + (size_t)b * T * K + (size_t)g * hd;
			const real *vg = v + (size_t)b * T * K + (size_t)g * hd;
			real *dkg = dk + (size_t)b * T * K + (size_t)g * hd;
			real *dvg = dv + (size_t)b * T * K + (size_t)g * hd;

			for (int h = g * group; h < (g + 1) * group; h++) {
				const real *pbh = att + ((size_t)b * H + h) * T * T;
				const real *doh = dout + (size_t)b * T * Q + (size_t)h * hd;
				const real *qh = q + (size_t)b * T * Q + (size_t)h * hd;
				real *dqh = dq + (size_t)b * T * Q + (size_t)h * hd;

				for (int i = 0; i < nb; i++) {
					int r0, r1;
					model_causal_block(T, nb, i, &r0, &r1);
					/* dP's blocks on and below the diagonal */
					GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hd, 1,
					     doh + (size_t)r0 * Q, Q, vg, K, 0, ds + (size_t)r0 * T, T);
					model_causal_add_tn(dvg, K, pbh, doh, Q, T, r0, r1, hd);
				}
				for (int t = 0; t < T; t++) {
					const real *p = pbh + (size_t)t * T;
					real *d = ds + (size_t)t * T;
					double sum = row_dot(p, d, t + 1);
					if (softcap > 0) {
						const real *tt = att_tanh + (((size_t)b * H + h) * T + t) * T;
						for (int u = 0; u <= t; u++)
							d[u] = elem_softmax_dscore_capped(p[u], d[u], sum, tt[u],
											  scale);
					} else {
						for (int u = 0; u <= t; u++)
							d[u] = elem_softmax_dscore(p[u], d[u], sum, scale);
					}
					for (int u = t + 1; u < T; u++)
						d[u] = 0;
				}
				for (int i = 0; i < nb; i++) {
					int r0, r1;
					model_causal_block(T, nb, i, &r0, &r1);
					GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hd, r1, 1,
					     ds + (size_t)r0 * T, T, kg, K, 1, dqh + (size_t)r0 * Q, Q);
					model_causal_add_tn(dkg, K, ds, qh, Q, T, r0, r1, hd);
				}
			}
		}
}

/*
 * The gated unit h = act(gate) * up (elemmath.h's elem_glu: SwiGLU with
 * SiLU, GeGLU with a GELU). SiLU keeps its own loops (SwiGLU's, in
 * vectors), the tanh GELU has its own (in vectors: elem_tanh); the exact
 * GELU's (a libm erf per element) carries the choice inside. The
 * activations' functions below likewise.
 */
ISA_VECTOR_CLONES
void model_swiglu_forward(real *h, const real *gate, const real *up, size_t n, int act)
{
	if (act == ELEM_ACT_SILU) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++)
			h[i] = elem_swiglu(gate[i], up[i]);
		return;
	}
	if (act == ELEM_ACT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++)
			h[i] = elem_glu(ELEM_ACT_GELU_TANH, gate[i], up[i]);
		return;
	}
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		h[i] = elem_glu(act, gate[i], up[i]);
}

/* dgate += dh up act'(gate), dup += dh act(gate); d silu(x)/dx = s(x) (1
 * + x (1 - s(x))) */
ISA_VECTOR_CLONES
void model_swiglu_backward(real *dgate, real *dup, const real *dh, const real *gate,
			   const real *up, size_t n, int act)
{
	if (act == ELEM_ACT_SILU) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++) {
			real dg, du;
			elem_swiglu_backward(dh[i], gate[i], up[i], &dg, &du);
			dgate[i] += dg;
			dup[i] += du;
		}
		return;
	}
	if (act == ELEM_ACT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++) {
			real dg, du;
			elem_glu_backward(ELEM_ACT_GELU_TANH, dh[i], gate[i], up[i], &dg, &du);
			dgate[i] += dg;
			dup[i] += du;
		}
		return;
	}
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real dg, du;
		elem_glu_backward(act, dh[i], gate[i], up[i], &dg, &du);
		dgate[i] += dg;
		dup[i] += du;
	}
}

/* GPT-2's MLP: h = act(x); backward dx += dh act'(x) */
ISA_VECTOR_CLONES
void model_act_forward(real *h, const real *x, size_t n, int act)
{
	if (act == ELEM_ACT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++)
			h[i] = elem_act(ELEM_ACT_GELU_TANH, x[i]);
		return;
	}
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		h[i] = elem_act(act, x[i]);
}

ISA_VECTOR_CLONES
void model_act_backward(real *dx, const real *dh, const real *x, size_t n, int act)
{
	if (act == ELEM_ACT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++)
			dx[i] += elem_act_backward(ELEM_ACT_GELU_TANH, dh[i], x[i]);
		return;
	}
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		dx[i] += elem_act_backward(act, dh[i], x[i]);
}

/* x *= s */
ISA_VECTOR_CLONES
void model_scale(real *x, size_t n, real s)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

/* x = cap tanh(x / cap) in place, t = tanh(x / cap); backward dx *= 1 - t^2 */
ISA_VECTOR_CLONES
void model_softcap_forward(real *x, real *t, size_t n, real cap)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		x[i] = elem_softcap(x[i], cap, &t[i]);
}

ISA_VECTOR_CLONES
void model_softcap_backward(real *dx, const real *t, size_t n)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		dx[i] = elem_softcap_backward(dx[i], t[i]);
}

/* The backward into the fused product's gradient dgu (N, 2F), written:
 * each element 0 + its term, the sum into zeros the unfused backward
 * forms (a -0 comes out +0 as there). */
ISA_VECTOR_CLONES
void model_swiglu_backward_fused(real *dgu, const real *dh, const real *gate, const real *up,
				 int N, int F, int act)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * F)
	for (int n = 0; n < N; n++) {
		real *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
		const real *dhn = dh + (size_t)n * F, *gn = gate + (size_t)n * F, *un = up + (size_t)n * F;
		if (act == ELEM_ACT_SILU) {
#pragma omp simd
			for (int i = 0; i < F; i++) {
				real tg, tu, zero = 0;
				elem_swiglu_backward(dhn[i], gn[i], un[i], &tg, &tu);
				dg[i] = zero + tg;
				du[i] = zero + tu;
			}
			continue;
		}
		if (act == ELEM_ACT_GELU_TANH) {
#pragma omp simd
			for (int i = 0; i < F; i++) {
				real tg, tu, zero = 0;
				elem_glu_backward(ELEM_ACT_GELU_TANH, dhn[i], gn[i], un[i], &tg, &tu);
				dg[i] = zero + tg;
				du[i] = zero + tu;
			}
			continue;
		}
#pragma omp simd
		for (int i = 0; i < F; i++) {
			real tg, tu, zero = 0;
			elem_glu_backward(act, dhn[i], gn[i], un[i], &tg, &tu);
			dg[i] = zero + tg;
			du[i] = zero + tu;
		}
	}
}

/* The gradients dq, dk, dv (N, Q), (N, K), (N, K) side by side in
 * dqkv (N, Q + 2K), for the fused product's backward. */
void model_qkv_join(real *dqkv, const real *dq, const real *dk, const real *dv, int N, int Q, int K)
{
	size_t ld = (size_t)Q + 2 * (size_t)K;

#pragma omp parallel for schedule(static) PAR_IF((size_t)N * ld)
	for (int n = 0; n < N; n++) {
		real *r = dqkv + (size_t)n * ld;
		memcpy(r, dq + (size_t)n * Q, (size_t)Q * sizeof(real));
		memcpy(r + Q, dk + (size_t)n * K, (size_t)K * sizeof(real));
		memcpy(r + Q + K, dv + (size_t)n * K, (size_t)K * sizeof(real));
	}
}

ISA_VECTOR_CLONES
void model_residual_forward(real *out, const real *a, const real *b, size_t n)
{
#pragma omp parallel for schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

/* probs = softmax(logits) in place, per row of V; losses = -log p[target] */
ISA_VECTOR_CLONES
void model_softmax_crossentropy_forward(real *losses, real *probs, const int *targets,
					int N, int V)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * V)
	for (int n = 0; n < N; n++) {
		real *p = probs + (size_t)n * V;
		real inv = elem_softmax_inv(row_exp_sum(p, V, row_max(p, V)));
		for (int i = 0; i < V; i++)
			p[i] *= inv;
		if (targets)
			losses[n] = elem_xent_loss(p[targets[n]]);
	}
}

/* dlogits = (probs - onehot(target)) * scale, in place over probs */
ISA_VECTOR_CLONES
void model_softmax_crossentropy_backward(real *probs, const int *targets, int N, int V, real scale)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * V)
	for (int n = 0; n < N; n++) {
		real *p = probs + (size_t)n * V;
		for (int i = 0; i < V; i++)
			p[i] = elem_xent_dlogit(p[i], i == targets[n], scale);
	}
}

/* x = 0 over the threads (a memset on one would leave the others idle) */
void model_zero(real *x, size_t n)
{
#pragma omp parallel PAR_IF(n)
	{
		size_t nth = (size_t)omp_get_num_threads(), tid = (size_t)omp_get_thread_num();
		size_t i0 = n * tid / nth, i1 = n * (tid + 1) / nth;
		memset(x + i0, 0, (i1 - i0) * sizeof(real));
	}
}

/* y (rows, n) += b per row, the rows over the threads; backward: b +=
 * y's column sums, each thread a slice of the columns summed over the
 * rows in order (every element the serial sum's bits) */
void model_bias(real *y, real *b, int64_t rows, int n, int backward)
{
	if (!backward) {
#pragma omp parallel for schedule(static) PAR_IF((size_t)rows * n)
		for (int64_t r = 0; r < rows; r++) {
			real *row = y + r * n;
			for (int i = 0; i < n; i++)
				row[i] += b[i];
		}
		return;
	}
#pragma omp parallel PAR_IF((size_t)rows * n)
	{
		int c0, c1;
		model_rows_of(n, &c0, &c1);
		for (int64_t r = 0; r < rows; r++) {
			const real *row = y + r * n;
			for (int i = c0; i < c1; i++)
				b[i] += row[i];
		}
	}
}

/* ---- multipliers ----------------------------------------------------- */

/* W_eff = diag(row) W diag(col), the multipliers' view (model.h) */
void model_mult_apply(real *weff, const real *w, struct mult_view v, int64_t dout, int64_t din)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)(dout * din))
	for (int64_t i = 0; i < dout; i++) {
		real r = v.row ? v.row[i * v.row_step] : 1;
		for (int64_t j = 0; j < din; j++)
			weff[i * din + j] = elem_mult_weff(w[i * din + j], r, v.col ? v.col[j] : 1);
	}
}

/* From dL/dW_eff: dW += dW_eff row col; drow[i] += sum_j dW_eff W col
 * (over the whole matrix for a scalar), dcol[j] += sum_i dW_eff W row;
 * drow, dcol NULL where the view has no such side. */
void model_mult_backward(real *dw, real *drow, real *dcol, const real *dweff, const real *w,
			 struct mult_view v, int64_t dout, int64_t din)
{
	double total = 0;

	for (int64_t i = 0; i < dout; i++) {
		double row = 0;
		real r = v.row ? v.row[i * v.row_step] : 1;
		for (int64_t j = 0; j < din; j++) {
			real c = v.col ? v.col[j] : 1, g = dweff[i * din + j];
			dw[i * din + j] += g * (r * c);
			if (dcol)
				dcol[j] += g * w[i * din + j] * r;
			row += (double)g * w[i * din + j] * c;
		}
		if (drow && v.row_step)
			drow[i] += (real)row;
		total += row;
	}
	if (drow && !v.row_step)
		drow[0] += (real)total;
}
