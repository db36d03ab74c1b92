/*
 * model.c - the Llama model on the CPU (see model.h): one forward and one
 * backward function per layer kind, named after the math, in the order of
 * llm.c's train_gpt2.c: outputs, then saved values, then inputs, then
 * weights, then sizes. Backward functions add into their gradients.
 * They are the CPU's table of the step's operations (step.h); the order
 * the model runs them in is step.c's, for every back end.
 */
#include "model.h"
#include "../base/elemmath.h"
#include "../base/isa.h"
#include "modelint.h"
#include "step.h"
#include "../base/par.h"
#include "../base/rng.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static void rmsnorm_forward(real *out, real *rstd, const real *inp, const real *gain,
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
static void matmul_forward(real *out, const real *inp, const real *w, int N, int din, int dout)
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
static void matmul_backward_parts(real *dinp, real *dw, const real *dout, const real *inp,
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

/*
 * Causal attention with GQA: out[b,t,h] = sum_{u<=t} P[b,h,t,u] v[b,u,g(h)],
 * P = softmax_u(q[b,t,h] . k[b,u,g(h)] / sqrt(hd)), g(h) = h / (H/KV).
 * q (N, H, hd), k and v (N, KV, hd), att (B, H, T, T), out (N, H, hd).
 * Per (b, h) two matrix products: S = scale Q_h K_g^T (the blocks of T x T
 * on and below the diagonal, model_causal_block; what lies above t in a row is
 * then masked), and O_h = P V_g, P being zero above the diagonal. The
 * GEMMs run inside the parallel loop, each on one thread.
 */
ISA_VECTOR_CLONES
static void attention_forward(real *out, real *att, const real *q, const real *k, const real *v,
			      int B, int T, int H, int KV, int hd)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);
	real scale = (real)(1.0 / sqrt((double)hd));

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
 * the softmax backward dS[t,u] = P[t,u] (dP[t,u] - sum_j P[t,j] dP[t,j]);
 * dQ_h += scale dS K_g; dK_g += scale dS^T Q_h. Threads split the
 * (b, KV-head) pairs, so a KV head's gradients are written by one thread
 * only, whatever the group size; dP lives in that pair's T x T scratch.
 */
ISA_VECTOR_CLONES
static void attention_backward(real *dq, real *dk, real *dv, real *scratch,
			       const real *dout, const real *q, const real *k, const real *v,
			       const real *att, int B, int T, int H, int KV, int hd)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T);
	real scale = (real)(1.0 / sqrt((double)hd));

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
					for (int u = 0; u <= t; u++)
						d[u] = elem_softmax_dscore(p[u], d[u], sum, scale);
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

/* h = silu(gate) * up, silu(x) = x sigmoid(x) */
ISA_VECTOR_CLONES
static void swiglu_forward(real *h, const real *gate, const real *up, size_t n)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		h[i] = elem_swiglu(gate[i], up[i]);
}

/* d silu(x)/dx = s(x) (1 + x (1 - s(x))) */
ISA_VECTOR_CLONES
void model_swiglu_backward(real *dgate, real *dup, const real *dh, const real *gate,
			   const real *up, size_t n)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++) {
		real dg, du;
		elem_swiglu_backward(dh[i], gate[i], up[i], &dg, &du);
		dgate[i] += dg;
		dup[i] += du;
	}
}

/* The backward into the fused product's gradient dgu (N, 2F), written:
 * each element 0 + its term, the sum into zeros the unfused backward
 * forms (a -0 comes out +0 as there). */
ISA_VECTOR_CLONES
static void swiglu_backward_fused(real *dgu, const real *dh, const real *gate, const real *up,
				  int N, int F)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)N * F)
	for (int n = 0; n < N; n++) {
		real *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
		const real *dhn = dh + (size_t)n * F, *gn = gate + (size_t)n * F, *un = up + (size_t)n * F;
#pragma omp simd
		for (int i = 0; i < F; i++) {
			real tg, tu, zero = 0;
			elem_swiglu_backward(dhn[i], gn[i], un[i], &tg, &tu);
			dg[i] = zero + tg;
			du[i] = zero + tu;
		}
	}
}

/* The gradients dq, dk, dv (N, Q), (N, K), (N, K) side by side in
 * dqkv (N, Q + 2K), for the fused product's backward. */
static void qkv_join(real *dqkv, const real *dq, const real *dk, const real *dv, int N, int Q, int K)
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
static void softmax_crossentropy_forward(real *losses, real *probs, const int *targets,
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

/* ---- multipliers ----------------------------------------------------- */

/* W_eff = diag(row) W diag(col), the multipliers' view (model.h) */
static void mult_apply(real *weff, const real *w, struct mult_view v, int64_t dout, int64_t din)
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
static void mult_backward(real *dw, real *drow, real *dcol, const real *dweff, const real *w,
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

/* ---- building the model ---------------------------------------------- */

/* The next tensor; while model_build counts (no tensors yet), only counted. */
static int add_tensor(struct model *m, const char *role, int layer, int rank,
		      int64_t d0, int64_t d1, struct sw_err *err)
{
	struct model_tensor *t;

	if (!m->tensors) {
		m->ntensors++;
		return SW_OK;
	}
	if (m->ntensors >= m->tensors_cap)
		return sw_fail(err, SW_ESOFTWARE, "model: more tensors than counted (%d)", m->tensors_cap);
	t = &m->tensors[m->ntensors];
	memset(t, 0, sizeof *t);
	if (arch_info_for_role(&m->c, role, layer, &t->info) < 0)
		return sw_fail(err, SW_ESOFTWARE, "model: unknown role %s", role);
	t->info.rank = rank;
	t->info.shape[0] = d0;
	t->info.shape[1] = d1;
	sw_shape_numel(rank, t->info.shape, &t->info.numel);
	t->info.kind = sw_kind_of_shape(rank, t->info.shape);
	t->info.dtype = SW_DTYPE_F32;
	strcpy(t->info.dtype_name, "F32");
	t->info.lr = t->info.wd = NAN;
	t->numel = (size_t)t->info.numel;
	t->offset = m->nparams;
	t->linear = -1;
	m->nparams += t->numel;
	m->ntensors++;
	return SW_OK;
}

/* A gain of n values (a norm's, or a design's X_gain_in or X_gain_out)
 * and, under a reparameterization, its direction and magnitude after it
 * (arch.h); its index in *index. */
static int add_gain(struct model *m, const char *role, int layer, int64_t n, int *index,
		    struct sw_err *err)
{
	enum arch_reparam mode = arch_reparam_of(m->c.scale_reparam, role);
	char r[SW_ROLE_MAX];
	int rc;

	*index = m->ntensors;
	if ((rc = add_tensor(m, role, layer, 1, n, 0, err)) || !mode)
		return rc;
	snprintf(r, sizeof r, "%s_dir", role);
	if ((rc = add_tensor(m, r, layer, 1, n, 0, err)))
		return rc;
	snprintf(r, sizeof r, "%s_mag", role);
	if ((rc = add_tensor(m, r, layer, 1, 1, 0, err)))
		return rc;
	if (m->reparams) {
		struct model_reparam *p = &m->reparams[m->nreparams];
		p->gain = *index;
		p->dir = *index + 1;
		p->mag = *index + 2;
		p->mode = mode;
		m->tensors[p->gain].derived = 1;
	}
	m->nreparams++;
	return SW_OK;
}

/* The multiplier mode of linear `role`: the learnable multipliers' (every
 * linear but the embedding), or the scale design's gains of a Pre-Norm's
 * reader (in: a column gain, out: a row gain, both: rowcol). */
static enum mult_mode linear_mode(const struct model *m, const char *role)
{
	int k = arch_sv_kind_of(role);

	if (m->mult != MULT_NONE)
		return m->mult;
	if (k < 0 || (!m->design.in[k] && !m->design.out[k]))
		return MULT_NONE;
	return m->design.in[k] && m->design.out[k] ? MULT_ROWCOL : m->design.in[k] ? MULT_COL : MULT_ROW;
}

/* A linear layer and its multipliers or gains: the row side (or a
 * scalar, or col mode's column) in mult_tensor, rowcol's column in
 * col_tensor. The gains are added in their names' order, gain_in first. */
static int add_linear(struct model *m, const char *role, int layer, int64_t dout,
		      int64_t din, struct sw_err *err)
{
	enum mult_mode mode = linear_mode(m, role);
	int gains = m->mult == MULT_NONE;
	char mrole[SW_ROLE_MAX];
	/* while model_build counts, the layer's fields go nowhere */
	struct model_linear counting, *l = m->tensors ? &m->linears[m->nlinears] : &counting;
	int rc;

	if (m->tensors && m->nlinears >= m->linears_cap)
		return sw_fail(err, SW_ESOFTWARE, "model: more linear layers than counted (%d)",
			       m->linears_cap);
	if ((rc = add_tensor(m, role, layer, 2, dout, din, err)))
		return rc;
	l->tensor = m->ntensors - 1;
	l->mult_tensor = l->col_tensor = -1;
	l->mode = mode;
	l->dout = dout;
	l->din = din;
	if (m->tensors)
		m->tensors[l->tensor].linear = m->nlinears;
	if (gains && (mode == MULT_COL || mode == MULT_ROWCOL)) {
		snprintf(mrole, sizeof mrole, "%s_gain_in", role);
		if ((rc = add_gain(m, mrole, layer, din,
				   mode == MULT_COL ? &l->mult_tensor : &l->col_tensor, err)))
			return rc;
	}
	if (gains && (mode == MULT_ROW || mode == MULT_ROWCOL)) {
		snprintf(mrole, sizeof mrole, "%s_gain_out", role);
		if ((rc = add_gain(m, mrole, layer, dout, &l->mult_tensor, err)))
			return rc;
	}
	if (!gains) {
		int64_t n = mode == MULT_SCALAR ? 1 : mode == MULT_COL ? din : dout;
		snprintf(mrole, sizeof mrole, "%s_mult", role);
		if ((rc = add_tensor(m, mrole, layer, 1, n, 0, err)))
			return rc;
		l->mult_tensor = m->ntensors - 1;
	}
	if (!gains && mode == MULT_ROWCOL) {
		snprintf(mrole, sizeof mrole, "%s_mult_col", role);
		if ((rc = add_tensor(m, mrole, layer, 1, din, 0, err)))
			return rc;
		l->col_tensor = m->ntensors - 1;
	}
	m->nlinears++;
	return SW_OK;
}

/* A linear's bias of n values (zero at model_init). */
static int add_bias(struct model *m, const char *role, int layer, int64_t n, struct sw_err *err)
{
	int rc = add_tensor(m, role, layer, 1, n, 0, err);

	if (!rc && m->tensors)
		m->tensors[m->ntensors - 1].bias = 1;
	return rc;
}

static int enumerate(struct model *m, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	int64_t C = c->d_model, Q = c->n_heads * c->head_dim, K = c->n_kv_heads * c->head_dim;
	int gains = c->scale_vectors, rc = SW_OK, i;
	/* the Pre-Norms' shared gains, unless the scale design moved them to
	 * the readers */
	int attn_gain = gains && m->design.shared[ARCH_SV_ATTN],
	    ffn_gain = gains && m->design.shared[ARCH_SV_FFN],
	    final_gain = gains && m->design.shared[ARCH_SV_HEAD];
	int qkv_bias = !strcmp(c->arch, "qwen2");

	rc = add_tensor(m, "embed", -1, 2, c->vocab_size, C, err);
	for (int l = 0; l < c->n_layers && !rc; l++) {
		if (attn_gain && (rc = add_gain(m, "attn_norm", l, C, &i, err)))
			break;
		if ((rc = add_linear(m, "q", l, Q, C, err)) || (rc = add_linear(m, "k", l, K, C, err)) ||
		    (rc = add_linear(m, "v", l, K, C, err)))
			break;
		/* Qwen2's q, k, v biases, after the three (kept adjacent) */
		if (qkv_bias && ((rc = add_bias(m, "q_bias", l, Q, err)) ||
				 (rc = add_bias(m, "k_bias", l, K, err)) ||
				 (rc = add_bias(m, "v_bias", l, K, err))))
			break;
		if (c->qk_norm && gains &&
		    ((rc = add_gain(m, "q_norm", l, c->head_dim, &i, err)) ||
		     (rc = add_gain(m, "k_norm", l, c->head_dim, &i, err))))
			break;
		if (m->design.dnp[ARCH_SV_ATTN] && (rc = add_gain(m, "v_norm", l, c->head_dim, &i, err)))
			break;
		if (c->norm_everywhere && gains && (rc = add_gain(m, "o_in_norm", l, Q, &i, err)))
			break;
		if ((rc = add_linear(m, "o", l, C, Q, err)))
			break;
		if (ffn_gain && (rc = add_gain(m, "ffn_norm", l, C, &i, err)))
			break;
		if ((rc = add_linear(m, "gate", l, c->d_ff, C, err)) ||
		    (rc = add_linear(m, "up", l, c->d_ff, C, err)))
			break;
		if (m->design.dnp[ARCH_SV_FFN] &&
		    ((rc = add_gain(m, "gate_norm", l, c->d_ff, &i, err)) ||
		     (rc = add_gain(m, "up_norm", l, c->d_ff, &i, err))))
			break;
		if (c->norm_everywhere && gains &&
		    (rc = add_gain(m, "down_in_norm", l, c->d_ff, &i, err)))
			break;
		rc = add_linear(m, "down", l, C, c->d_ff, err);
	}
	if (!rc && final_gain)
		rc = add_gain(m, "final_norm", -1, C, &i, err);
	if (!rc && !c->tie_embeddings)
		rc = add_linear(m, "lm_head", -1, c->vocab_size, C, err);
	return rc;
}

int model_find(const struct model *m, const char *role, int layer)
{
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].info.layer == layer && !strcmp(m->tensors[i].info.role, role))
			return i;
	return -1;
}

/* where a tensor at offset `from` of the block is at block[0] */
static real *at(const struct model *m, real *block, size_t from, const char *role, int layer)
{
	int i = model_find(m, role, layer);
	return i < 0 ? NULL : block + (m->tensors[i].offset - from);
}

/* The effective weight of a linear tensor: w_eff with multipliers. */
static real *eff(const struct model *m, real *block, size_t from, real *eblock, const char *role,
		 int layer)
{
	int i = model_find(m, role, layer);

	if (i < 0)
		return NULL;
	if (m->linears[m->tensors[i].linear].mode == MULT_NONE)
		return block + (m->tensors[i].offset - from);
	return eblock + m->eff_offset[m->tensors[i].linear];
}

static void set_layer_ptrs(const struct model *m, struct layer_ptrs *lp, int l, real *block,
			   size_t from, real *eblock)
{
	lp->attn_norm = at(m, block, from, "attn_norm", l);
	lp->wq = eff(m, block, from, eblock, "q", l);
	lp->wk = eff(m, block, from, eblock, "k", l);
	lp->wv = eff(m, block, from, eblock, "v", l);
	lp->wo = eff(m, block, from, eblock, "o", l);
	lp->q_bias = at(m, block, from, "q_bias", l);
	lp->k_bias = at(m, block, from, "k_bias", l);
	lp->v_bias = at(m, block, from, "v_bias", l);
	lp->q_norm = at(m, block, from, "q_norm", l);
	lp->k_norm = at(m, block, from, "k_norm", l);
	lp->v_norm = at(m, block, from, "v_norm", l);
	lp->gate_norm = at(m, block, from, "gate_norm", l);
	lp->up_norm = at(m, block, from, "up_norm", l);
	lp->o_in_norm = at(m, block, from, "o_in_norm", l);
	lp->ffn_norm = at(m, block, from, "ffn_norm", l);
	lp->wgate = eff(m, block, from, eblock, "gate", l);
	lp->wup = eff(m, block, from, eblock, "up", l);
	lp->wdown = eff(m, block, from, eblock, "down", l);
	lp->down_in_norm = at(m, block, from, "down_in_norm", l);
}

/* Views for the forward/backward code: effective weights for the linear
 * layers, the gains as stored. */
static void set_ptrs(struct model *m, struct model_ptrs *p, real *block, real *eblock)
{
	p->embed = at(m, block, 0, "embed", -1);
	p->final_norm = at(m, block, 0, "final_norm", -1);
	p->lm_head = m->c.tie_embeddings ? p->embed : eff(m, block, 0, eblock, "lm_head", -1);
	for (int l = 0; l < m->c.n_layers; l++)
		set_layer_ptrs(m, &p->layer[l], l, block, 0, eblock);
}

void model_point_layer(struct model *m, int l, real *at_, size_t from)
{
	if (!at_) {
		memset(&m->p.layer[l], 0, sizeof m->p.layer[l]);
		return;
	}
	set_layer_ptrs(m, &m->p.layer[l], l, at_, from, m->w_eff);
}

int model_build(struct model *m, const struct sw_config *c, struct sw_err *err)
{
	int rc;

	memset(m, 0, sizeof *m);
	m->c = *c;
	/* a family read for its matrices, or none known: said by name
	 * before its config, which holds only what a listing needs */
	if (!arch_supported(c->arch))
		return sw_fail(err, SW_EDATA, "architecture '%s' is read for its matrices only "
			       "(sw-ls, sw-norms, sw-spectrum); the model computes %s",
			       c->arch[0] ? c->arch : "(none)", ARCH_SUPPORTED_LIST);
	if ((rc = arch_config_check(c, err)))
		return rc;
	/* what the model computes: a function it does not is refused by name */
	if ((rc = arch_model_check(c, err)))
		return rc;
	/* arch_multipliers_parse's order; the config was checked above */
	m->mult = (enum mult_mode)arch_multipliers_parse(c->multipliers);
	if (arch_scale_design_parse(c->scale_design, &m->design, NULL, 0, (char[64]){0}))
		return sw_fail(err, SW_ESOFTWARE, "model: scale_design '%s'", c->scale_design);
	/* count the tensors and linear layers, then lay them out */
	if ((rc = enumerate(m, err)))
		return rc;
	m->tensors_cap = m->ntensors;
	m->linears_cap = m->nlinears;
	m->ntensors = m->nlinears = 0;
	m->tensors = calloc((size_t)m->tensors_cap + 1, sizeof *m->tensors);
	m->linears = calloc((size_t)m->linears_cap + 1, sizeof *m->linears);
	m->reparams = calloc((size_t)m->nreparams + 1, sizeof *m->reparams);
	m->nreparams = 0;
	m->p.layer = calloc((size_t)c->n_layers, sizeof *m->p.layer);
	m->g.layer = calloc((size_t)c->n_layers, sizeof *m->g.layer);
	if (!m->tensors || !m->linears || !m->reparams || !m->p.layer || !m->g.layer) {
		model_free(m);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	if ((rc = enumerate(m, err))) {
		model_free(m);
		return rc;
	}
	m->params = calloc(m->nparams, sizeof(real));
	m->grads = calloc(m->nparams, sizeof(real));
	for (int i = 0; i < m->nlinears; i++)
		m->eff |= m->linears[i].mode != MULT_NONE;
	if (m->eff && m->nlinears > 0) {
		/* a slot for each linear with multipliers or gains, in order */
		m->eff_offset = calloc((size_t)m->nlinears, sizeof *m->eff_offset);
		for (int i = 0; m->eff_offset && i < m->nlinears; i++) {
			m->eff_offset[i] = m->eff_size;
			if (m->linears[i].mode != MULT_NONE)
				m->eff_size += (size_t)(m->linears[i].dout * m->linears[i].din);
		}
		m->w_eff = calloc(m->eff_size, sizeof(real));
		m->dw_eff = calloc(m->eff_size, sizeof(real));
	}
	if (!m->params || !m->grads ||
	    (m->eff && (!m->eff_offset || !m->w_eff || !m->dw_eff))) {
		/* said before model_free zeroes the counts */
		size_t nparams = m->nparams;
		double bytes = 2.0 * ((double)m->nparams + (double)m->eff_size) * sizeof(real);
		model_free(m);
		return sw_fail(err, SW_ESOFTWARE,
			       "out of memory for %zu parameters (%.3g GB for them and their gradients)",
			       nparams, bytes / 1e9);
	}
	set_ptrs(m, &m->p, m->params, m->w_eff);
	set_ptrs(m, &m->g, m->grads, m->dw_eff);
	/* the backward's joined products (matmul_backward_parts) take q, k, v
	 * as one (Q + 2K, C) matrix and gate, up as one (2F, C), in the
	 * weights and their gradients: enumerate lays them out so */
	for (int l = 0; l < c->n_layers; l++)
		for (int side = 0; side < 2; side++) {
			const struct layer_ptrs *lp = side ? &m->g.layer[l] : &m->p.layer[l];
			size_t qc = (size_t)(c->n_heads * c->head_dim * c->d_model),
			       kc = (size_t)(c->n_kv_heads * c->head_dim * c->d_model),
			       fc = (size_t)(c->d_ff * c->d_model);
			if (lp->wk != lp->wq + qc || lp->wv != lp->wk + kc || lp->wup != lp->wgate + fc) {
				model_free(m);
				return sw_fail(err, SW_ESOFTWARE, "model: layer %d's q, k, v or gate, up "
					       "are not adjacent", l);
			}
		}
	return SW_OK;
}

void model_free(struct model *m)
{
	free(m->tensors);
	free(m->linears);
	free(m->reparams);
	free(m->params);
	free(m->grads);
	free(m->w_eff);
	free(m->dw_eff);
	free(m->eff_offset);
	free(m->p.layer);
	free(m->g.layer);
	free(m->acts_block);
	free(m->acts);
	free(m->rope_cos);
	free(m->rope_sin);
	free(m->scratch);
	memset(m, 0, sizeof *m);
}

void model_init(struct model *m, uint64_t seed)
{
	struct sw_rng r;
	double std = 0.02, proj_std = 0.02 / sqrt(2.0 * (double)m->c.n_layers);

	rng_seed(&r, seed);
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		real *p = m->params + t->offset;
		if (t->info.kind == SW_KIND_MATRIX) {
			double s = !strcmp(t->info.role, "o") || !strcmp(t->info.role, "down") ? proj_std : std;
			for (size_t k = 0; k < t->numel; k++)
				p[k] = (real)(s * rng_normal(&r));
		} else {
			for (size_t k = 0; k < t->numel; k++)
				p[k] = t->bias ? 0 : 1;
		}
	}
	/* er's gamma = 1 is alpha = 0, beta = 0 (or's is alpha = 1, beta = 1) */
	for (int i = 0; i < m->nreparams; i++) {
		const struct model_tensor *d = &m->tensors[m->reparams[i].dir];
		if (m->reparams[i].mode != ARCH_REPARAM_ER)
			continue;
		memset(m->params + d->offset, 0, d->numel * sizeof(real));
		m->params[m->tensors[m->reparams[i].mag].offset] = 0;
	}
}

/* the scale design's DNP per kind (attn, ffn): what the activations
 * keep beside the usual (the outputs before their norms) */
static void dnp_of(const struct sw_config *c, int *attn, int *ffn)
{
	struct arch_scale_design d;

	*attn = *ffn = 0;
	if (c->scale_design[0] && !arch_scale_design_parse(c->scale_design, &d, NULL, 0, (char[64]){0})) {
		*attn = d.dnp[ARCH_SV_ATTN];
		*ffn = d.dnp[ARCH_SV_FFN];
	}
}

/* Activations (with the backward scratch) in reals, for model_alloc_acts
 * and for callers that check memory first. */
static void acts_sizes(const struct sw_config *c, int B, int T, int recompute, size_t *total,
		       size_t *scratch)
{
	size_t N = (size_t)B * T, C = (size_t)c->d_model, Q = (size_t)(c->n_heads * c->head_dim),
	       K = (size_t)(c->n_kv_heads * c->head_dim), F = (size_t)c->d_ff, V = (size_t)c->vocab_size,
	       H = (size_t)c->n_heads, KV = (size_t)c->n_kv_heads, L = (size_t)c->n_layers;
	size_t per_layer = N * C * 6 + N * Q * 5 + N * K * 3 + N * H + N * KV + N * 4 +
			   (size_t)B * H * T * T + N * F * 4;
	int dnp_attn, dnp_ffn;

	dnp_of(c, &dnp_attn, &dnp_ffn);
	per_layer += (dnp_attn ? N * K + N * KV : 0) + (dnp_ffn ? 2 * N * F + 2 * N : 0);
	/* recomputing, what each layer keeps (model_alloc_acts): x_in, x_mid,
	 * q_lin, k_lin, v (or v_lin), gate and up (or their _lin) */
	size_t kept = N * C * 2 + N * Q + N * K * 2 + N * F * 2;

	*total = (recompute ? per_layer + (L - 1) * kept : per_layer * L) + N * C * 2 + N + N * V + N;
	/* backward: dres, dn (N,C); dF x3 (N,F); dq, dq2 (N,Q); dk, dk2, dv (N,K);
	 * the attention's T x T dP per (b, kv head): (B, KV, T, T), a fraction
	 * 1/(L group) of the saved probabilities */
	*scratch = N * C * 2 + N * F * 3 + N * Q * 2 + N * K * 3 + (size_t)B * KV * T * T;
	/* dqkv (N, Q + 2K): q, k and v's gradients side by side */
	*scratch += N * (Q + 2 * K);
}

double model_acts_bytes(const struct sw_config *c, int B, int T, int recompute)
{
	size_t total, scratch;

	acts_sizes(c, B, T, recompute, &total, &scratch);
	return (double)(total + scratch) * sizeof(real);
}

int model_alloc_acts(struct model *m, int B, int T, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	size_t N = (size_t)B * T, C = (size_t)c->d_model, Q = (size_t)(c->n_heads * c->head_dim),
	       K = (size_t)(c->n_kv_heads * c->head_dim), F = (size_t)c->d_ff, V = (size_t)c->vocab_size,
	       H = (size_t)c->n_heads, KV = (size_t)c->n_kv_heads, L = (size_t)c->n_layers,
	       half = (size_t)c->head_dim / 2;
	size_t total;
	real *p;
	float *inv;
	int dnp_attn, dnp_ffn, rc;

	if (B == m->B && T == m->T && m->acts_block && m->acts_recompute == m->recompute)
		return SW_OK;
	dnp_of(c, &dnp_attn, &dnp_ffn);
	if (c->seq_len && T > c->seq_len)
		return sw_fail(err, SW_EUSAGE, "sequence of %d tokens is longer than seq_len %lld",
			       T, (long long)c->seq_len);
	if ((rc = arch_window_check(c, T, err)))
		return rc;
	free(m->acts_block);
	free(m->acts);
	free(m->rope_cos);
	free(m->rope_sin);
	free(m->scratch);
	acts_sizes(c, B, T, m->recompute, &total, &m->scratch_size);
	m->acts_block = malloc(total * sizeof(real));
	m->acts = calloc(L, sizeof *m->acts);
	m->rope_cos = malloc((size_t)T * half * sizeof(real));
	m->rope_sin = malloc((size_t)T * half * sizeof(real));
	m->scratch = malloc(m->scratch_size * sizeof(real));
	inv = malloc((half ? half : 1) * sizeof *inv);
	if (!m->acts_block || !m->acts || !m->rope_cos || !m->rope_sin || !m->scratch || !inv) {
		free(inv);
		m->B = m->T = 0;
		return sw_fail(err, SW_ESOFTWARE,
			       "out of memory for the activations of %d x %d tokens (%.1f GB)",
			       B, T, (double)(total + m->scratch_size) * sizeof(real) / 1e9);
	}
	m->B = B;
	m->T = T;
	m->acts_recompute = m->recompute;
	p = m->acts_block;
#define TAKE(field, n) do { field = p; p += (n); } while (0)
	for (size_t l = 0; l < L; l++) {
		struct layer_acts *a = &m->acts[l];
		if (m->recompute && l > 0) {
			/* layer 0's buffers but the input, x_mid and the products'
			 * outputs (acts_sizes' kept) */
			*a = m->acts[0];
			TAKE(a->x_in, N * C); TAKE(a->x_mid, N * C);
			TAKE(a->q_lin, N * Q); TAKE(a->k_lin, N * K);
			if (dnp_attn)
				TAKE(a->v_lin, N * K);
			else
				TAKE(a->v, N * K);
			if (dnp_ffn) {
				TAKE(a->gate_lin, N * F); TAKE(a->up_lin, N * F);
			} else {
				TAKE(a->gate, N * F); TAKE(a->up, N * F);
			}
			continue;
		}
		TAKE(a->x_in, N * C); TAKE(a->n1, N * C); TAKE(a->n1_rstd, N);
		TAKE(a->q_lin, N * Q); TAKE(a->k_lin, N * K); TAKE(a->q_rstd, N * H); TAKE(a->k_rstd, N * KV);
		TAKE(a->q, N * Q); TAKE(a->k, N * K); TAKE(a->v, N * K);
		TAKE(a->att, (size_t)B * H * T * T);
		TAKE(a->att_out, N * Q); TAKE(a->o_in, N * Q); TAKE(a->o_in_rstd, N);
		TAKE(a->attn_y, N * C); TAKE(a->x_mid, N * C); TAKE(a->n2, N * C); TAKE(a->n2_rstd, N);
		TAKE(a->gate, N * F); TAKE(a->up, N * F); TAKE(a->h, N * F); TAKE(a->d_in, N * F);
		TAKE(a->d_in_rstd, N); TAKE(a->mlp_y, N * C);
		if (dnp_attn) {
			TAKE(a->v_lin, N * K); TAKE(a->v_rstd, N * KV);
		}
		if (dnp_ffn) {
			TAKE(a->gate_lin, N * F); TAKE(a->up_lin, N * F);
			TAKE(a->gate_rstd, N); TAKE(a->up_rstd, N);
		}
	}
	TAKE(m->x_final, N * C); TAKE(m->nf, N * C); TAKE(m->nf_rstd, N);
	TAKE(m->logits, N * V); TAKE(m->losses, N);
#undef TAKE
	/* the frequencies from the one table (arch_rope_inv_freq, the CUDA
	 * model's too; model_build refused the types it does not compute);
	 * HF computes the angles in float32 */
	if (arch_rope_inv_freq(c, inv) < 0) {
		free(inv);
		m->B = m->T = 0;
		return sw_fail(err, SW_EDATA, "rope_scaling type '%s' is not supported", c->rope_type);
	}
	for (int t = 0; t < T; t++)
		for (size_t i = 0; i < half; i++) {
			float ang = (float)t * inv[i];
			m->rope_cos[(size_t)t * half + i] = (real)cosf(ang);
			m->rope_sin[(size_t)t * half + i] = (real)sinf(ang);
		}
	free(inv);
	return SW_OK;
}

/* ---- the whole model -------------------------------------------------- */

/* x = 0 over the threads (a memset on one would leave the others idle) */
static void zero(real *x, size_t n)
{
#pragma omp parallel PAR_IF(n)
	{
		size_t nth = (size_t)omp_get_num_threads(), tid = (size_t)omp_get_thread_num();
		size_t i0 = n * tid / nth, i1 = n * (tid + 1) / nth;
		memset(x + i0, 0, (i1 - i0) * sizeof(real));
	}
}

static double clock_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void model_timing_mark(struct model_timing *t)
{
	if (t->on)
		t->mark = clock_s();
}

void model_timing_lap(struct model_timing *t, enum model_phase phase)
{
	if (t->on) {
		double now = clock_s();
		t->s[phase] += now - t->mark;
		t->mark = now;
	}
}

/* the time since the last lap to a phase (model_timing_lap) */
#define LAP(phase) model_timing_lap(&m->timing, MODEL_PHASE_##phase)

void model_update_gains(struct model *m)
{
	for (int i = 0; i < m->nreparams; i++) {
		const struct model_reparam *r = &m->reparams[i];
		const struct model_tensor *g = &m->tensors[r->gain];
		elem_sv_gamma((int)r->mode, m->params + m->tensors[r->dir].offset,
			      m->params[m->tensors[r->mag].offset], (int64_t)g->numel, m->params + g->offset);
	}
}

void model_update_effective(struct model *m)
{
	model_update_gains(m);
	/* W_eff = the multipliers (or gains) applied to W */
	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		if (l->mode == MULT_NONE)
			continue;
		mult_apply(m->w_eff + m->eff_offset[i], m->params + m->tensors[l->tensor].offset,
			   model_linear_mult_view(m, l, m->params), l->dout, l->din);
	}
}

double model_mean_loss(const real *losses, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += losses[i];
	return sum / (double)n;
}

/* ---- the CPU's operations of the step (step.h) ---------------------- */

/* the backward's scratch, carved from m->scratch as acts_sizes counts it:
 * dres, dn, dF1, then dF2 and dF3 side by side (the fused gate/up
 * product's gradient (N, 2F)), dq, dq2, dk, dk2, dv, the attention's dP,
 * dqkv */
struct cpu_scratch {
	struct model_step_scratch s;
	real *dgu, *att, *dqkv;
};

static struct cpu_scratch cpu_scratch(const struct model *m)
{
	const struct sw_config *c = &m->c;
	size_t N = (size_t)m->B * m->T, C = (size_t)c->d_model, F = (size_t)c->d_ff,
	       Q = (size_t)(c->n_heads * c->head_dim), K = (size_t)(c->n_kv_heads * c->head_dim),
	       KV = (size_t)c->n_kv_heads;
	struct cpu_scratch cs;
	real *p = m->scratch;

	cs.s.dres = p; p += N * C;
	cs.s.dn = p; p += N * C;
	cs.s.dF1 = p; p += N * F;
	cs.s.dF2 = cs.dgu = p;
	cs.s.dF3 = p + N * F;
	p += 2 * N * F;
	cs.s.dq = p; p += N * Q;
	cs.s.dq2 = p; p += N * Q;
	cs.s.dk = p; p += N * K;
	cs.s.dk2 = p; p += N * K;
	cs.s.dv = p; p += N * K;
	cs.att = p; p += (size_t)m->B * KV * m->T * m->T;
	cs.dqkv = p;
	return cs;
}

static void cpu_lap(void *ctx, enum model_phase phase)
{
	model_timing_lap(&((struct model *)ctx)->timing, phase);
}

static void cpu_update_effective(void *ctx)
{
	model_update_effective(ctx);
}

static void cpu_embed(void *ctx, real *out, const int *tokens, const real *embed, int N, int C)
{
	(void)ctx;
	model_encoder_forward(out, tokens, embed, N, C);
}

/* y (rows, n) += b per row; backward: b += y's column sums, rows in order */
static void cpu_bias(void *ctx, real *y, real *b, int64_t rows, int n, int backward)
{
	(void)ctx;
	for (int64_t r = 0; r < rows; r++) {
		real *row = y + r * n;
		for (int i = 0; i < n; i++) {
			if (backward)
				b[i] += row[i];
			else
				row[i] += b[i];
		}
	}
}

static void cpu_rmsnorm(void *ctx, real *out, real *rstd, const real *inp, const real *gain,
			int64_t rows, int n, double eps)
{
	(void)ctx;
	rmsnorm_forward(out, rstd, inp, gain, (int)rows, n, eps);
}

static void cpu_matmul(void *ctx, real *out, const real *inp, const real *w, int N, int din, int dout)
{
	(void)ctx;
	matmul_forward(out, inp, w, N, din, dout);
}

static void cpu_copy(void *ctx, real *dst, const real *src, size_t n)
{
	(void)ctx;
	memcpy(dst, src, n * sizeof(real));
}

static void cpu_rope(void *ctx, real *x, int B, int T, int nh, int hd, int backward)
{
	const struct model *m = ctx;

	if (backward)
		model_rope_backward(x, m->rope_cos, m->rope_sin, B, T, nh, hd);
	else
		model_rope_forward(x, m->rope_cos, m->rope_sin, B, T, nh, hd);
}

static void cpu_attention(void *ctx, real *out, real *att, const real *q, const real *k,
			  const real *v, int B, int T, int H, int KV, int hd)
{
	(void)ctx;
	attention_forward(out, att, q, k, v, B, T, H, KV, hd);
}

static void cpu_residual(void *ctx, real *out, const real *a, const real *b, size_t n)
{
	(void)ctx;
	model_residual_forward(out, a, b, n);
}

static void cpu_swiglu(void *ctx, real *h, const real *gate, const real *up, size_t n)
{
	(void)ctx;
	swiglu_forward(h, gate, up, n);
}

static void cpu_swiglu_backward(void *ctx, real *dgate, real *dup, const real *dh,
				const real *gate, const real *up, size_t n)
{
	(void)ctx;
	model_swiglu_backward(dgate, dup, dh, gate, up, n);
}

static void cpu_loss(void *ctx, real *losses, real *probs, const int *targets, int N, int V)
{
	(void)ctx;
	softmax_crossentropy_forward(losses, probs, targets, N, V);
}

static void cpu_zero(void *ctx, real *x, size_t n)
{
	(void)ctx;
	zero(x, n);
}

static void cpu_loss_backward(void *ctx, real *probs, const int *targets, int N, int V, real scale)
{
	(void)ctx;
	model_softmax_crossentropy_backward(probs, targets, N, V, scale);
}

static void cpu_matmul_backward(void *ctx, real *dinp, real *dw, const real *dout, const real *inp,
				const real *w, int N, int din, int dout_)
{
	(void)ctx;
	model_matmul_backward(dinp, dw, dout, inp, w, N, din, dout_);
}

static void cpu_rmsnorm_backward(void *ctx, real *dinp, real *dgain, const real *dout,
				 const real *inp, const real *gain, const real *rstd, int64_t rows,
				 int n)
{
	(void)ctx;
	model_rmsnorm_backward(dinp, dgain, dout, inp, gain, rstd, (int)rows, n);
}

real *model_att_scratch(const struct model *m)
{
	return cpu_scratch(m).att;
}

static void cpu_attention_backward(void *ctx, real *dq, real *dk, real *dv, const real *dout,
				   const real *q, const real *k, const real *v, const real *att,
				   int B, int T, int H, int KV, int hd)
{
	attention_backward(dq, dk, dv, cpu_scratch(ctx).att, dout, q, k, v, att, B, T, H, KV, hd);
}

/* SwiGLU's backward into the fused (N, 2F) gradient, then one product for
 * both weights (gate and up adjacent in the grads block, as in params) */
static void cpu_gate_up_backward(void *ctx, real *dn, real *dgate, real *dup, const real *dh,
				 const real *gate, const real *up, const real *inp,
				 const real *wgate, const real *wup, int N, int C, int F)
{
	struct model *m = ctx;
	real *dgu = cpu_scratch(m).dgu;
	const int parts[2] = {F, F};

	(void)dup;
	(void)wup;
	swiglu_backward_fused(dgu, dh, gate, up, N, F);
	LAP(ELEMWISE);
	matmul_backward_parts(dn, dgate, dgu, inp, wgate, N, C, parts, 2);
	LAP(GEMM);
}

/* q, k, v's gradients side by side, then one product for the three
 * weights (adjacent in the blocks) */
static void cpu_qkv_backward(void *ctx, real *dn, real *dwq, real *dwk, real *dwv, const real *dq,
			     const real *dk, const real *dv, const real *inp, const real *wq,
			     const real *wk, const real *wv, int N, int C, int Q, int K)
{
	struct model *m = ctx;
	real *dqkv = cpu_scratch(m).dqkv;
	const int parts[3] = {Q, K, K};

	(void)dwk;
	(void)dwv;
	(void)wk;
	(void)wv;
	qkv_join(dqkv, dq, dk, dv, N, Q, K);
	LAP(ELEMWISE);
	matmul_backward_parts(dn, dwq, dqkv, inp, wq, N, C, parts, 3);
	LAP(GEMM);
}

static void cpu_embed_backward(void *ctx, real *dembed, const real *dout, const int *tokens, int N,
			       int C)
{
	(void)ctx;
	model_encoder_backward(dembed, dout, tokens, N, C);
}

/* m->grads_ready for layer l (see model.h); multipliers (and gains)
 * finish every layer's gradient at the end, so with them it is told then. The time it
 * takes (an exchange between processes) is no phase's: "other". */
static void grads_ready(struct model *m, int l, int at_end)
{
	if (m->grads_ready && (m->eff || m->nreparams) == at_end) {
		m->grads_ready(m->grads_ready_ctx, l);
		model_timing_mark(&m->timing);
	}
}

static void cpu_grads_ready(void *ctx, int layer)
{
	grads_ready(ctx, layer, 0);
}

/* multipliers: from dL/dW_eff to dL/dW and dL/dmult; then every layer's
 * gradients are final */
static void cpu_mult_backward(void *ctx)
{
	struct model *m = ctx;

	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		const struct model_tensor *wt = &m->tensors[l->tensor];
		real *drow, *dcol;
		if (l->mode == MULT_NONE)
			continue;
		model_linear_mult_grads(m, l, m->grads, &drow, &dcol);
		mult_backward(m->grads + wt->offset, drow, dcol, m->dw_eff + m->eff_offset[i],
			      m->params + wt->offset, model_linear_mult_view(m, l, m->params), l->dout, l->din);
	}
	/* the reparameterized gains' gradients on to their directions and
	 * magnitudes */
	for (int i = 0; !m->keep_gain_grads && i < m->nreparams; i++) {
		const struct model_reparam *r = &m->reparams[i];
		const struct model_tensor *g = &m->tensors[r->gain], *d = &m->tensors[r->dir];
		elem_sv_backward((int)r->mode, m->params + d->offset, m->params[m->tensors[r->mag].offset],
				 m->params + g->offset, m->grads + g->offset, (int64_t)g->numel,
				 m->grads + d->offset, m->grads + m->tensors[r->mag].offset);
	}
	for (int l = (int)m->c.n_layers; l >= -1; l--)
		grads_ready(m, l, 1);
}

static void cpu_layer_weights(void *ctx, int layer)
{
	struct model *m = ctx;

	if (m->layer_weights)
		m->layer_weights(m->layer_weights_ctx, layer);
}

static const struct model_ops cpu_ops = {
	.lap = cpu_lap,
	.update_effective = cpu_update_effective,
	.embed = cpu_embed,
	.rmsnorm = cpu_rmsnorm,
	.matmul = cpu_matmul,
	.copy = cpu_copy,
	.bias = cpu_bias,
	.rope = cpu_rope,
	.attention = cpu_attention,
	.residual = cpu_residual,
	.swiglu = cpu_swiglu,
	.swiglu_backward = cpu_swiglu_backward,
	.loss = cpu_loss,
	.zero = cpu_zero,
	.loss_backward = cpu_loss_backward,
	.matmul_backward = cpu_matmul_backward,
	.rmsnorm_backward = cpu_rmsnorm_backward,
	.attention_backward = cpu_attention_backward,
	.gate_up_backward = cpu_gate_up_backward,
	.qkv_backward = cpu_qkv_backward,
	.embed_backward = cpu_embed_backward,
	.grads_ready = cpu_grads_ready,
	.mult_backward = cpu_mult_backward,
	.layer_weights = cpu_layer_weights,
};

/* the CPU model as the step's back end */
struct model_step model_cpu_step(struct model *m)
{
	struct model_step st = {
		.ops = &cpu_ops, .ctx = m, .c = &m->c, .p = &m->p, .g = &m->g, .acts = m->acts,
		.x_final = m->x_final, .nf = m->nf, .nf_rstd = m->nf_rstd, .logits = m->logits,
		.losses = m->losses, .s = cpu_scratch(m).s,
		.dnp_attn = m->design.dnp[ARCH_SV_ATTN], .dnp_ffn = m->design.dnp[ARCH_SV_FFN],
		.recompute = m->acts_recompute,
	};
	return st;
}

void model_forward(struct model *m, const int *tokens, const int *targets, int B, int T)
{
	struct model_step st = model_cpu_step(m);

	model_timing_mark(&m->timing);
	model_step_forward(&st, tokens, targets, B, T);
	if (targets)
		m->loss = model_mean_loss(m->losses, (size_t)B * T);
}

void model_zero_grad(struct model *m)
{
	memset(m->grads, 0, m->nparams * sizeof(real));
}

void model_backward(struct model *m, const int *tokens, const int *targets, double loss_scale)
{
	struct model_step st = model_cpu_step(m);

	model_timing_mark(&m->timing);
	if (m->eff)
		zero(m->dw_eff, m->eff_size);
	model_step_backward(&st, tokens, targets, m->B, m->T, loss_scale);
}
