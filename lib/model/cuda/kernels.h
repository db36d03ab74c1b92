/*
 * kernels.h - the CUDA trainer's kernels, each written as a body: a
 * function of its (block, thread) indices and a phase, compiled
 * __host__ __device__ by nvcc. lib/model/cuda/gpu.cu wraps each body in a thin
 * __global__ kernel that runs its phases with __syncthreads() between
 * them; lib/model/cuda/gpu_emu.c runs the same body in host loops, every block,
 * then every phase, then every thread of the block, which is what the
 * barriers guarantee a GPU does. So the unit tests (t-cuda-kernels,
 * t-cuda-model) run the kernels' indexing and arithmetic on the CPU,
 * against lib/model/cpukern.c, model.c and optim.c. The per-element math is
 * lib/base/elemmath.h's, which the CPU reference calls too.
 *
 * Two shapes. An element kernel (gk_elems) runs one thread per element i
 * = block * threads + thread of a flat range. A row kernel (gk_rows) runs
 * one block per row: in phase 0 every thread sums its strided share of the
 * row into shm[thread] (double), in phase 1 thread 0 adds those in order
 * and leaves the row's result at shm[threads], in the last phase every
 * thread writes its share of the outputs. Reductions are in a fixed order:
 * the GPU gives the same numbers run to run. The one exception is
 * encoder_backward, the embedding's scatter-add: two tokens of a batch may
 * share a row, so on the GPU it adds with atomicAdd (the order of the
 * additions, and so the last bits of the embedding's gradient, vary from
 * run to run); the host loop adds serially, in the CPU reference's order.
 *
 * Every kernel is float (the CUDA path has no SW_REAL_DOUBLE); letters
 * as in model.h. Arguments travel in one struct per kernel (passed by
 * value to the __global__ wrapper), its first member the launch grid.
 */
#ifndef SW_CUDA_KERNELS_H
#define SW_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/elemmath.h"

#ifdef SW_REAL_DOUBLE
#error "lib/model/cuda computes in float: build it without SW_REAL_DOUBLE"
#endif

#ifdef __CUDA_ARCH__
#define GK_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#else
#define GK_ATOMIC_ADD(p, v) (*(p) += (v))
#endif

/* The launch grid: blocks of `threads`, `shm` doubles of shared memory. */
struct gk_grid {
	int64_t blocks;
	int threads;
	int shm;
};

#define GK_THREADS 256          /* threads per block: a multiple of the warp */
#define GK_CHUNK 256            /* rows per partial column sum */
#define GK_SUM_CHUNK 65536      /* elements per block of a sum */

/* One thread per element of n. */
SW_HD static inline struct gk_grid gk_elems(int64_t n)
{
	struct gk_grid g;
	g.blocks = (n + GK_THREADS - 1) / GK_THREADS;
	g.threads = GK_THREADS;
	g.shm = 0;
	return g;
}

/* One block per row of `width` elements: as many threads as the row
 * needs, in whole warps, at most GK_THREADS; shared memory for a partial
 * per thread and two results. */
SW_HD static inline struct gk_grid gk_rows(int64_t rows, int64_t width)
{
	struct gk_grid g;
	int64_t t = (width + 31) / 32 * 32;
	g.blocks = rows;
	g.threads = (int)(t < 32 ? 32 : t > GK_THREADS ? GK_THREADS : t);
	g.shm = g.threads + 2;
	return g;
}

/* The body's parameters: phase, block, thread, threads per block, shared
 * memory (doubles), the arguments. */
#define GK_BODY(name, A) \
	SW_HD static inline void gk_##name(int phase, int64_t blk, int thr, int nthr, double *shm, \
					   const A *a)
#define GK_ELEM_INDEX(i, n) \
	int64_t i = blk * nthr + thr; \
	(void)phase; (void)shm; \
	if (i >= (n)) \
		return

/* Phase 1 of a row kernel: thread 0 adds the partials in order. */
SW_HD static inline double gk_row_total(const double *shm, int thr, int nthr)
{
	double s = 0;
	for (int k = 0; thr == 0 && k < nthr; k++)
		s += shm[k];
	return s;
}

/* Phase 0's share of a row's sum of squares: x[thr], x[thr + nthr], ... */
SW_HD static inline double gk_sumsq_share(const float *x, int64_t n, int thr, int nthr)
{
	double s = 0;
	for (int64_t i = thr; i < n; i += nthr)
		s += (double)x[i] * x[i];
	return s;
}

/* Multiplier modes, model.h's enum mult_mode (gpumodel.c checks they agree). */
enum { GK_MULT_SCALAR = 1, GK_MULT_ROW = 2, GK_MULT_COL = 3, GK_MULT_ROWCOL = 4 };

/* ---- the embedding ----------------------------------------------------- */

struct gk_encoder {
	struct gk_grid grid;            /* gk_elems(N * C) */
	float *out;                     /* (N, C) */
	float *dembed;                  /* backward: (V, C) */
	const float *embed, *dout;      /* (V, C), backward (N, C) */
	const int *tok;                 /* (N) */
	int64_t n;                      /* N * C */
	int C;
};

/* out[n] = embed[token[n]] */
GK_BODY(encoder_forward, struct gk_encoder)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = a->embed[(int64_t)a->tok[i / a->C] * a->C + i % a->C];
}

/* dembed[token[n]] += dout[n]: atomics on the GPU, in order on the host */
GK_BODY(encoder_backward, struct gk_encoder)
{
	GK_ELEM_INDEX(i, a->n);
	GK_ATOMIC_ADD(&a->dembed[(int64_t)a->tok[i / a->C] * a->C + i % a->C], a->dout[i]);
}

/* ---- RMSNorm, also per head (QK-norm) and before o and down ------------ */

struct gk_rmsnorm {
	struct gk_grid grid;            /* gk_rows(rows, C) */
	float *out;                     /* forward y (rows, C); backward dx (+=) */
	float *rstd;                    /* (rows): forward writes, backward reads */
	const float *inp, *dout;        /* x (rows, C); backward dy (rows, C) */
	const float *gain;              /* (C) or NULL */
	int64_t rows;
	int C;
	double eps;
};

/* y = g x r, r = (mean(x^2) + eps)^(-1/2); phases: sum x^2, r, y */
GK_BODY(rmsnorm_forward, struct gk_rmsnorm)
{
	const float *x = a->inp + blk * a->C;
	float *y = a->out + blk * a->C;

	if (phase == 0) {
		shm[thr] = gk_sumsq_share(x, a->C, thr, nthr);
	} else if (phase == 1) {
		if (thr == 0) {
			float r = elem_rmsnorm_rstd(gk_row_total(shm, thr, nthr), a->C, a->eps);
			a->rstd[blk] = r;
			shm[nthr] = r;
		}
	} else {
		float r = (float)shm[nthr];
		for (int i = thr; i < a->C; i += nthr)
			y[i] = elem_rmsnorm_out(x[i], r, a->gain ? a->gain[i] : 1);
	}
}

/* dx += r (dxhat - xhat mean(dxhat xhat)); phases: the dot, its mean, dx.
 * dgain is gk_colsum's. */
GK_BODY(rmsnorm_backward, struct gk_rmsnorm)
{
	const float *x = a->inp + blk * a->C, *dy = a->dout + blk * a->C;
	float *dx = a->out + blk * a->C, r = a->rstd[blk];

	if (phase == 0) {
		double dot = 0;
		for (int i = thr; i < a->C; i += nthr)
			dot += elem_rmsnorm_dot(dy[i], a->gain ? a->gain[i] : 1, x[i], r);
		shm[thr] = dot;
	} else if (phase == 1) {
		if (thr == 0)
			shm[nthr] = elem_rmsnorm_mean(gk_row_total(shm, thr, nthr), a->C);
	} else {
		float mean = (float)shm[nthr];
		for (int i = thr; i < a->C; i += nthr)
			dx[i] += elem_rmsnorm_dx(dy[i], a->gain ? a->gain[i] : 1, x[i], r, mean);
	}
}

/* ---- LayerNorm (GPT-2): y = g (x - mu) r + b, r = (var + eps)^(-1/2) ------ */

struct gk_layernorm {
	struct gk_grid grid;            /* gk_rows(rows, C) */
	float *out;                     /* forward y (rows, C); backward dx (+=) */
	float *mean, *rstd;             /* (rows): forward writes, backward reads */
	const float *inp, *dout;        /* x (rows, C); backward dy (rows, C) */
	const float *gain, *bias;       /* (C) or NULL */
	int64_t rows;
	int C;
	double eps;
};

/* phases: sum x, mu, sum (x - mu)^2, r, y (the biased variance, both
 * sums in double) */
GK_BODY(layernorm_forward, struct gk_layernorm)
{
	const float *x = a->inp + blk * a->C;
	float *y = a->out + blk * a->C;

	if (phase == 0 || phase == 2) {
		float mu = phase ? (float)shm[nthr] : 0;
		double s = 0;
		for (int i = thr; i < a->C; i += nthr)
			s += phase ? elem_layernorm_sq(x[i], mu) : (double)x[i];
		shm[thr] = s;
	} else if (phase == 1) {
		if (thr == 0) {
			float mu = elem_layernorm_mean(gk_row_total(shm, thr, nthr), a->C);
			a->mean[blk] = mu;
			shm[nthr] = mu;
		}
	} else if (phase == 3) {
		if (thr == 0) {
			float r = elem_layernorm_rstd(gk_row_total(shm, thr, nthr), a->C, a->eps);
			a->rstd[blk] = r;
			shm[nthr + 1] = r;
		}
	} else {
		float mu = (float)shm[nthr], r = (float)shm[nthr + 1];
		for (int i = thr; i < a->C; i += nthr)
			y[i] = elem_layernorm_out(x[i], mu, r, a->gain ? a->gain[i] : 1,
						  a->bias ? a->bias[i] : 0);
	}
}

/* dx += r (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g;
 * phases: sum dxhat, its mean, sum dxhat xhat, its mean, dx. dgain and
 * dbias are gk_colsum's. */
GK_BODY(layernorm_backward, struct gk_layernorm)
{
	const float *x = a->inp + blk * a->C, *dy = a->dout + blk * a->C;
	float *dx = a->out + blk * a->C, mu = a->mean[blk], r = a->rstd[blk];

	if (phase == 0 || phase == 2) {
		double s = 0;
		for (int i = thr; i < a->C; i += nthr)
			s += phase ? elem_layernorm_dot(dy[i], a->gain ? a->gain[i] : 1, x[i], mu, r)
			     : (double)(dy[i] * (a->gain ? a->gain[i] : 1));
		shm[thr] = s;
	} else if (phase == 1 || phase == 3) {
		if (thr == 0)
			shm[nthr + (phase == 3)] = elem_rmsnorm_mean(gk_row_total(shm, thr, nthr), a->C);
	} else {
		float m1 = (float)shm[nthr], m2 = (float)shm[nthr + 1];
		for (int i = thr; i < a->C; i += nthr)
			dx[i] += elem_layernorm_dx(dy[i], a->gain ? a->gain[i] : 1, x[i], mu, r, m1, m2);
	}
}

/*
 * Column sums over rows, in two kernels: colsum_partial sums chunks of
 * GK_CHUNK rows (float, as the CPU accumulates dgain), colsum_finish adds
 * the chunks in order into out. The term: an RMSNorm gain's gradient
 * dy x r (rstd given), a product a b (a column multiplier's gradient), or
 * a alone (b NULL: a bias's gradient, dy's column sums). The order is
 * fixed, so a rerun gives the same bits.
 */
struct gk_colsum {
	struct gk_grid grid;            /* partial: gk_elems(chunks * C); finish: gk_elems(C) */
	float *partial;                 /* (chunks, C) */
	float *out;                     /* (C), finish adds into it */
	const float *a, *b;             /* (rows, C) */
	const float *rstd;              /* (rows) or NULL */
	const float *mean;              /* (rows): LayerNorm's, xhat = (x - mean) rstd; or NULL */
	const float *c, *d, *rrstd;     /* rop_colsum_partial: dy (or NULL), R{x}, R{rstd} */
	const float *rmean;             /* rop_colsum_partial with mean: R{mean} */
	int64_t rows, chunks;
	int C;
};

GK_BODY(colsum_partial, struct gk_colsum)
{
	GK_ELEM_INDEX(i, a->chunks * a->C);
	int64_t k = i / a->C, c = i % a->C, end = (k + 1) * GK_CHUNK;
	float s = 0;

	for (int64_t n = k * GK_CHUNK; n < end && n < a->rows; n++)
		s += a->mean ? elem_layernorm_dgain(a->a[n * a->C + c], a->b[n * a->C + c], a->mean[n],
						    a->rstd[n])
		     : a->rstd ? elem_rmsnorm_dgain(a->a[n * a->C + c], a->b[n * a->C + c], a->rstd[n])
		     : a->b ? a->a[n * a->C + c] * a->b[n * a->C + c] : a->a[n * a->C + c];
	a->partial[i] = s;
}

/* R{dgain} of an RMSNorm, as colsum_partial: a R{dy}, b x, c dy (NULL:
 * Gauss-Newton), d R{x}: R{dy} x r + dy (R{x} r + x R{r}); of a
 * LayerNorm (mean, rmean given): R{dy} xhat + dy R{xhat}, xhat = (x - mu)
 * r, R{xhat} = (R{x} - R{mu}) r + (x - mu) R{r} */
GK_BODY(rop_colsum_partial, struct gk_colsum)
{
	GK_ELEM_INDEX(i, a->chunks * a->C);
	int64_t k = i / a->C, c = i % a->C, end = (k + 1) * GK_CHUNK;
	float s = 0;

	for (int64_t n = k * GK_CHUNK; n < end && n < a->rows; n++) {
		int64_t j = n * a->C + c;
		float r = a->rstd[n];
		if (a->mean) {
			float xc = a->b[j] - a->mean[n];
			s += a->a[j] * (xc * r) +
			     (a->c ? a->c[j] * ((a->d[j] - a->rmean[n]) * r + xc * a->rrstd[n]) : 0);
			continue;
		}
		s += a->a[j] * a->b[j] * r + (a->c ? a->c[j] * (a->d[j] * r + a->b[j] * a->rrstd[n]) : 0);
	}
	a->partial[i] = s;
}

GK_BODY(colsum_finish, struct gk_colsum)
{
	GK_ELEM_INDEX(c, a->C);
	float s = 0;

	for (int64_t k = 0; k < a->chunks; k++)
		s += a->partial[k * a->C + c];
	a->out[c] += s;
}

/* ---- a linear's bias (Qwen2's q, k, v) -------------------------------------- */

/* y (rows, n) += b in every row; the bias's gradient, dy's column sums,
 * is colsum_partial's (b NULL) */
struct gk_bias {
	struct gk_grid grid;            /* gk_elems(count) */
	float *y;                       /* (rows, n) */
	const float *b;                 /* (n) */
	int64_t count;                  /* rows * n */
	int n;
};

GK_BODY(bias_forward, struct gk_bias)
{
	GK_ELEM_INDEX(i, a->count);
	a->y[i] += a->b[i % a->n];
}

/* ---- RoPE ----------------------------------------------------------------- */

struct gk_rope {
	struct gk_grid grid;            /* gk_elems(N * nh * hd / 2) */
	float *x;                       /* (N, nh, hd), in place */
	const float *cos_, *sin_;       /* (T, hd/2) */
	int64_t n;                      /* N * nh * hd / 2 */
	int T, nh, hd;
	int backward;                   /* the transpose: the rotation back */
};

/* (x_i, x_{i+hd/2}) of head h at position t turns by t theta_i */
GK_BODY(rope, struct gk_rope)
{
	GK_ELEM_INDEX(i, a->n);
	int half = a->hd / 2;
	int64_t tok = i / ((int64_t)a->nh * half), j = i % half;
	int64_t head = i / half % a->nh, t = tok % a->T;
	float *v = a->x + (tok * a->nh + head) * a->hd;

	if (a->backward)
		elem_rope_backward(&v[j], &v[j + half], a->cos_[t * half + j], a->sin_[t * half + j]);
	else
		elem_rope_forward(&v[j], &v[j + half], a->cos_[t * half + j], a->sin_[t * half + j]);
}

/* ---- soft-capping (Gemma2): x -> cap tanh(x / cap) ------------------------ */

/*
 * Over n values x in place: forward x = cap tanh(x / cap), th saved;
 * backward x *= 1 - th^2 (x the capped values' gradient, or a tangent:
 * R{x_capped} = (1 - th^2) R{x}); rop_softcap_backward x = R{dx} from
 * R{dy} in place, dy (NULL: Gauss-Newton) and rx, R{x} before the cap.
 * With T > 0 the values are rows of T causal scores (attention's: row r
 * is position r % T), and only u <= r % T are touched.
 */
struct gk_softcap {
	struct gk_grid grid;            /* gk_elems(n) */
	float *x, *th;
	const float *dy, *rx;
	int64_t n;
	int T;
	float cap;
};

#define GK_SOFTCAP_INDEX(i) \
	GK_ELEM_INDEX(i, a->n); \
	if (a->T > 0 && i % a->T > i / a->T % a->T) \
		return

GK_BODY(softcap_forward, struct gk_softcap)
{
	GK_SOFTCAP_INDEX(i);
	a->x[i] = elem_softcap(a->x[i], a->cap, &a->th[i]);
}

GK_BODY(softcap_backward, struct gk_softcap)
{
	GK_SOFTCAP_INDEX(i);
	a->x[i] = elem_softcap_backward(a->x[i], a->th[i]);
}

GK_BODY(rop_softcap_backward, struct gk_softcap)
{
	GK_SOFTCAP_INDEX(i);
	a->x[i] = elem_softcap_backward_tangent(a->dy ? a->dy[i] : 0, a->dy != NULL, a->x[i],
						a->th[i], a->rx[i], a->cap);
}

/* ---- softmax: attention's causal rows, the head's cross-entropy ------------ */

/*
 * A softmax over each row of p in place, in 5 phases: partial maxima, the
 * maximum, exponentials and their partial sums, 1/sum, the scaling. With
 * causal, row r is position t = r % T and keeps only u <= t (the rest 0);
 * with targets, loss[r] = -log p[target[r]].
 */
struct gk_softmax {
	struct gk_grid grid;            /* gk_rows(rows, width) */
	float *p;                       /* (rows, width): scores in, probabilities out */
	float *losses;                  /* (rows), with targets */
	const int *targets;             /* (rows) or NULL */
	int64_t rows;
	int width;                      /* T (causal) or V */
	int causal;
};

GK_BODY(softmax_forward, struct gk_softmax)
{
	float *p = a->p + blk * a->width;
	int end = a->causal ? (int)(blk % a->width) + 1 : a->width;

	if (phase == 0) {
		float maxv = -INFINITY;
		for (int u = thr; u < end; u += nthr)
			maxv = p[u] > maxv ? p[u] : maxv;
		shm[thr] = maxv;
	} else if (phase == 1) {
		if (thr == 0) {
			float maxv = -INFINITY;
			for (int k = 0; k < nthr; k++)
				maxv = (float)shm[k] > maxv ? (float)shm[k] : maxv;
			shm[nthr] = maxv;
		}
	} else if (phase == 2) {
		float maxv = (float)shm[nthr];
		double sum = 0;
		for (int u = thr; u < end; u += nthr) {
			p[u] = elem_exp(p[u] - maxv);
			sum += p[u];
		}
		shm[thr] = sum;
	} else if (phase == 3) {
		if (thr == 0)
			shm[nthr + 1] = elem_softmax_inv(gk_row_total(shm, thr, nthr));
	} else {
		float inv = (float)shm[nthr + 1];
		for (int u = thr; u < a->width; u += nthr) {
			p[u] = u < end ? p[u] * inv : 0;
			if (a->targets && u == a->targets[blk])
				a->losses[blk] = elem_xent_loss(p[u]);
		}
	}
}

/*
 * Attention's softmax backward for one head, rows (b, t) of B*T:
 * d = P (dP - sum_u P dP) scale in place of dP, zero above the diagonal;
 * with soft-capped scores (th, tanh(S / cap) laid out as P), times the
 * cap's derivative 1 - th^2. Row (b, t) of P starts at p + b p_bstride +
 * t T, of dP at d + b d_bstride + t T.
 */
struct gk_softmax_back {
	struct gk_grid grid;            /* gk_rows(B * T, T) */
	float *d;
	const float *p;
	const float *th;                /* NULL: no soft-cap */
	int64_t rows, p_bstride, d_bstride;
	int T;
	float scale;
};

GK_BODY(softmax_backward, struct gk_softmax_back)
{
	int64_t b = blk / a->T, t = blk % a->T;
	const float *p = a->p + b * a->p_bstride + t * a->T;
	float *d = a->d + b * a->d_bstride + t * a->T;

	if (phase == 0) {
		double s = 0;
		for (int u = thr; u <= t; u += nthr)
			s += (double)p[u] * d[u];
		shm[thr] = s;
	} else if (phase == 1) {
		if (thr == 0)
			shm[nthr] = gk_row_total(shm, thr, nthr);
	} else {
		double s = shm[nthr];
		const float *th = a->th ? a->th + b * a->p_bstride + t * a->T : NULL;
		for (int u = thr; u < a->T; u += nthr)
			d[u] = u > t ? 0 : th ? elem_softmax_dscore_capped(p[u], d[u], s, th[u], a->scale)
			       : elem_softmax_dscore(p[u], d[u], s, a->scale);
	}
}

/* dlogits = (probs - onehot(target)) scale in place */
struct gk_xent_back {
	struct gk_grid grid;            /* gk_elems(N * V) */
	float *p;                       /* (N, V) */
	const int *targets;             /* (N) */
	int64_t n;
	int V;
	float scale;
};

GK_BODY(xent_backward, struct gk_xent_back)
{
	GK_ELEM_INDEX(i, a->n);
	a->p[i] = elem_xent_dlogit(a->p[i], i % a->V == a->targets[i / a->V], a->scale);
}

/* A label per row drawn from its probabilities by inverse CDF, u given
 * (one uniform per row, drawn on the host as gnb_sample_labels draws
 * them): one thread per row, serially over V, in sharpness.c's order. */
struct gk_sample {
	struct gk_grid grid;            /* gk_elems(N) */
	int *labels;                    /* (N) */
	const float *p;                 /* (N, V) */
	const double *u;                /* (N) */
	int64_t rows;
	int V;
};

GK_BODY(sample_labels, struct gk_sample)
{
	GK_ELEM_INDEX(r, a->rows);
	const float *p = a->p + r * a->V;
	double c = 0;
	int y = a->V - 1;

	for (int i = 0; i < a->V; i++) {
		c += p[i];
		if (a->u[r] < c) {
			y = i;
			break;
		}
	}
	a->labels[r] = y;
}

/* h += scale g^2: the GNB estimate's sum */
struct gk_square {
	struct gk_grid grid;            /* gk_elems(n) */
	float *h;
	const float *g;
	int64_t n;
	double scale;
};

GK_BODY(gnb_square, struct gk_square)
{
	GK_ELEM_INDEX(i, a->n);
	a->h[i] += (float)(a->scale * (double)a->g[i] * (double)a->g[i]);
}

/* ---- the MLP and the residual stream ------------------------------------ */

struct gk_pointwise {
	struct gk_grid grid;            /* gk_elems(n) */
	float *out, *out2;              /* forward: out; backward: dgate, dup (+=) */
	const float *a, *b, *c;         /* forward: a, b; backward: dh, gate, up */
	int64_t n;
	int act;                        /* the activation (elemmath.h's ELEM_ACT_*) */
};

GK_BODY(residual_forward, struct gk_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = a->a[i] + a->b[i];
}

/* the gated unit h = act(gate) up: SwiGLU with SiLU, GeGLU with a GELU */
GK_BODY(swiglu_forward, struct gk_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_glu(a->act, a->a[i], a->b[i]);
}

GK_BODY(swiglu_backward, struct gk_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	float dg, du;
	elem_glu_backward(a->act, a->a[i], a->b[i], a->c[i], &dg, &du);
	a->out[i] += dg;
	a->out2[i] += du;
}

/* GPT-2's MLP: h = act(x) (out, a); backward dx += act'(x) dh (out, a dh,
 * b x) */
GK_BODY(act_forward, struct gk_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_act(a->act, a->a[i]);
}

GK_BODY(act_backward, struct gk_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] += elem_act_backward(a->act, a->a[i], a->b[i]);
}

/* ---- learnable multipliers ------------------------------------------------ */

/*
 * W_eff = s W, diag(r) W, W diag(c) or diag(r) W diag(c) (rowcol: mult is
 * r, col is c); backward dW += dW_eff f, and the multipliers' gradients:
 * per row (a thread per row, serially in double, as the CPU; the scalar
 * adds the rows in order in mult_dscalar), per column (a thread per
 * column, serially over rows in float, as the CPU) into dmult (col) or
 * dcol (rowcol).
 */
struct gk_mult {
	struct gk_grid grid;            /* apply, dw: gk_elems(dout din); drow: gk_elems(dout);
					   dcol: gk_elems(din); dscalar: gk_elems(1) */
	float *weff, *dw, *dmult, *dcol;
	double *rowsum;                 /* (dout) scratch of the scalar mode */
	const float *w, *mult, *col, *dweff;
	const float *rw, *rmult, *rcol; /* rop_mult_apply: the tangents of w, mult, col */
	int64_t dout, din;
	int mode;                       /* GK_MULT_* */
};

/* The row side (1 for col) and the column side (1 for scalar and row). */
SW_HD static inline float gk_mult_rowf(const struct gk_mult *a, int64_t i)
{
	return a->mode == GK_MULT_SCALAR ? a->mult[0] : a->mode == GK_MULT_COL ? 1.0f : a->mult[i];
}

SW_HD static inline float gk_mult_colf(const struct gk_mult *a, int64_t j)
{
	return a->mode == GK_MULT_COL ? a->mult[j] : a->mode == GK_MULT_ROWCOL ? a->col[j] : 1.0f;
}

GK_BODY(mult_apply, struct gk_mult)
{
	GK_ELEM_INDEX(k, a->dout * a->din);
	a->weff[k] = elem_mult_weff(a->w[k], gk_mult_rowf(a, k / a->din), gk_mult_colf(a, k % a->din));
}

GK_BODY(mult_dw, struct gk_mult)
{
	GK_ELEM_INDEX(k, a->dout * a->din);
	a->dw[k] += a->dweff[k] * (gk_mult_rowf(a, k / a->din) * gk_mult_colf(a, k % a->din));
}

GK_BODY(mult_drow, struct gk_mult)
{
	GK_ELEM_INDEX(i, a->dout);
	double row = 0;

	for (int64_t j = 0; j < a->din; j++)
		row += (double)a->dweff[i * a->din + j] * a->w[i * a->din + j] * gk_mult_colf(a, j);
	if (a->mode == GK_MULT_SCALAR)
		a->rowsum[i] = row;
	else
		a->dmult[i] += (float)row;
}

GK_BODY(mult_dscalar, struct gk_mult)
{
	GK_ELEM_INDEX(k, 1);
	double total = 0;

	for (int64_t i = 0; i < a->dout; i++)
		total += a->rowsum[i];
	a->dmult[k] += (float)total;
}

GK_BODY(mult_dcol, struct gk_mult)
{
	GK_ELEM_INDEX(j, a->din);
	float *d = a->mode == GK_MULT_ROWCOL ? a->dcol : a->dmult;

	for (int64_t i = 0; i < a->dout; i++)
		d[j] += a->dweff[i * a->din + j] * a->w[i * a->din + j] * gk_mult_rowf(a, i);
}

/* ---- sums: the gradient norm, the trace's RMS, Newton-Schulz's norm ------ */

/*
 * The sum of x (or of x^2) over n elements in blocks of GK_SUM_CHUNK:
 * sum_partial leaves block k's in partial[k] (threads' strided shares,
 * then thread 0 adds them in order); sum_finish adds the partials in order
 * into out[0], for a result that stays on the device.
 */
struct gk_sum {
	struct gk_grid grid;            /* partial: gk_rows(chunks, GK_SUM_CHUNK); finish: gk_elems(1) */
	double *partial;                /* (chunks) */
	double *out;                    /* finish: (1) */
	const float *x;
	int64_t n, chunks;
	int squares;
};

GK_BODY(sum_partial, struct gk_sum)
{
	int64_t start = blk * GK_SUM_CHUNK, end = start + GK_SUM_CHUNK;

	if (end > a->n)
		end = a->n;
	if (phase == 0) {
		double s = 0;
		for (int64_t i = start + thr; i < end; i += nthr)
			s += a->squares ? (double)a->x[i] * a->x[i] : (double)a->x[i];
		shm[thr] = s;
	} else if (thr == 0) {
		a->partial[blk] = gk_row_total(shm, thr, nthr);
	}
}

GK_BODY(sum_finish, struct gk_sum)
{
	GK_ELEM_INDEX(k, 1);
	double s = 0;

	for (int64_t i = 0; i < a->chunks; i++)
		s += a->partial[i];
	a->out[k] = s;
}

/* ---- the optimizers --------------------------------------------------------- */

/* An element-wise optimizer (AdamW and its kin) over one tensor: its
 * rule's update of each element (elemmath.h's elem_rule_update), element
 * i's v at v[i / block_numel] (1 but for Adam-mini) */
struct gk_elem_rule {
	struct gk_grid grid;            /* gk_elems(n); elem_block_v: gk_rows(blocks, block_numel) */
	float *p, *m, *v;
	const float *g;
	int64_t n, block_numel;
	double clip, beta2;             /* beta2: elem_block_v's */
	struct elem_rule_coef c;
};

GK_BODY(elem_rule, struct gk_elem_rule)
{
	GK_ELEM_INDEX(i, a->n);
	elem_rule_update(&a->c, &a->p[i], &a->m[i], &a->v[i / a->block_numel], a->g[i], a->clip);
}

/* Adam-mini's second moments, one per block (a row of the grid): phases
 * the shares of the block's sum of clipped g^2, thread 0's v update */
GK_BODY(elem_block_v, struct gk_elem_rule)
{
	const float *g = a->g + blk * a->block_numel;

	if (phase == 0) {
		double s = 0;
		for (int64_t j = thr; j < a->block_numel; j += nthr)
			s += elem_clipped_sq(g[j], a->clip);
		shm[thr] = s;
	} else if (thr == 0) {
		elem_adam_mini_block_v(&a->v[blk], gk_row_total(shm, thr, nthr), a->block_numel,
				       a->beta2);
	}
}

/*
 * The elementwise parts of Muon and Scion over one tensor: the momentum
 * (out = the Nesterov gradient, or Scion's M), the sign LMO, a scale, the
 * update p decay - lr u, and Newton-Schulz's polynomial and normalization.
 */
struct gk_opt {
	struct gk_grid grid;            /* gk_elems(n); scion_rows: gk_rows(rows, cols) */
	float *out, *p;
	float *buf;                     /* the momentum (float, as /optim_state stores it) */
	const float *x, *x2;
	const double *sumsq;            /* ns_normalize: on the device */
	int64_t n;
	int rows, cols;
	double clip, mom, scale, decay, lr;
};

GK_BODY(muon_momentum, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_muon_momentum(&a->buf[i], a->x[i], a->clip, a->mom);
}

GK_BODY(scion_momentum, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_scion_momentum(&a->buf[i], a->x[i], a->clip, a->mom);
}

GK_BODY(scion_sign, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_scion_sign(a->x[i], a->scale);
}

/* Scion's embedding LMO: every row (token vector) of x to RMS 1 */
GK_BODY(scion_rows, struct gk_opt)
{
	const float *x = a->x + blk * a->cols;
	float *u = a->out + blk * a->cols;

	if (phase == 0) {
		shm[thr] = gk_sumsq_share(x, a->cols, thr, nthr);
	} else if (phase == 1) {
		if (thr == 0)
			shm[nthr] = elem_scion_row_factor(gk_row_total(shm, thr, nthr), a->cols);
	} else {
		for (int j = thr; j < a->cols; j += nthr)
			u[j] = (float)(x[j] * shm[nthr]);
	}
}

/* out *= (float)scale */
GK_BODY(scale, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] *= (float)a->scale;
}

GK_BODY(apply_update, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->p[i] = elem_apply_update(a->p[i], a->x[i], a->decay, a->lr);
}

/* B = b A + c A A */
GK_BODY(ns_poly, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_ns_poly(a->x[i], a->x2[i]);
}

/* X /= ||X||_F + 1e-7, the sum of squares on the device */
GK_BODY(ns_normalize, struct gk_opt)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = (float)(a->out[i] / elem_ns_norm(a->sumsq[0]));
}

/* out (cols x rows) = x^T, x (rows x cols) */
GK_BODY(transpose, struct gk_opt)
{
	GK_ELEM_INDEX(k, a->n);
	int64_t i = k / a->cols, j = k % a->cols;
	a->out[j * a->rows + i] = a->x[k];
}

/* ---- the R-operator's tangents (lib/model/modelhvp.c's, row for row) -------------- */

/*
 * RMSNorm: forward R{y} = g R{xhat} + R{g} xhat, R{r} = -r^3 mean(x R{x})
 * saved (phases: the dot, R{r}, R{y}); backward R{dx} += R{r} (dxhat -
 * xhat mu) + r (R{dxhat} - R{xhat} mu - xhat R{mu}) with mu = mean(dxhat
 * xhat), R{mu} = mean(R{dxhat} xhat + dxhat R{xhat}) (phases: mu's sum,
 * mu, R{mu}'s sum, R{mu}, R{dx}); dout NULL: Gauss-Newton, mu = 0 and
 * only R{dy}'s terms.
 */
struct gk_rop_rmsnorm {
	struct gk_grid grid;            /* gk_rows(rows, C) */
	float *out;                     /* forward R{y}; backward R{dx} (+=) */
	float *rrstd;                   /* (rows): forward writes, backward reads */
	const float *inp, *rinp;        /* x, R{x} (rows, C) */
	const float *dout, *rdout;      /* backward: dy (or NULL), R{dy} */
	const float *gain, *rgain;      /* (C) or NULL */
	const float *rstd;              /* (rows) */
	int64_t rows;
	int C;
};

GK_BODY(rop_rmsnorm_forward, struct gk_rop_rmsnorm)
{
	const float *x = a->inp + blk * a->C, *rx = a->rinp + blk * a->C;
	float *y = a->out + blk * a->C;
	double r = a->rstd[blk];

	if (phase == 0) {
		double dot = 0;
		for (int i = thr; i < a->C; i += nthr)
			dot += (double)x[i] * rx[i];
		shm[thr] = dot;
	} else if (phase == 1) {
		if (thr == 0) {
			double rr = -r * r * r * gk_row_total(shm, thr, nthr) / a->C;
			a->rrstd[blk] = (float)rr;
			shm[nthr] = rr;
		}
	} else {
		double rr = shm[nthr];
		for (int i = thr; i < a->C; i += nthr) {
			float xhat = (float)(x[i] * r), rxhat = (float)(rx[i] * r + x[i] * rr);
			y[i] = rxhat * (a->gain ? a->gain[i] : 1) + (a->rgain ? a->rgain[i] * xhat : 0);
		}
	}
}

GK_BODY(rop_rmsnorm_backward, struct gk_rop_rmsnorm)
{
	const float *x = a->inp + blk * a->C, *rx = a->rinp + blk * a->C;
	const float *dy = a->dout ? a->dout + blk * a->C : NULL, *rdy = a->rdout + blk * a->C;
	float *rdx = a->out + blk * a->C;
	double r = a->rstd[blk], rr = a->rrstd[blk];

	if (phase == 0) {
		double mu = 0;
		for (int i = thr; dy && i < a->C; i += nthr)
			mu += dy[i] * (double)(a->gain ? a->gain[i] : 1) * (x[i] * r);
		shm[thr] = mu;
	} else if (phase == 1 || phase == 3) {
		if (thr == 0)
			shm[nthr + (phase == 3)] = gk_row_total(shm, thr, nthr) / a->C;
	} else if (phase == 2) {
		double rmu = 0;
		for (int i = thr; i < a->C; i += nthr) {
			double g = a->gain ? a->gain[i] : 1, xhat = x[i] * r;
			double rdxhat = rdy[i] * g + (dy && a->rgain ? (double)dy[i] * a->rgain[i] : 0);
			rmu += rdxhat * xhat;
			if (dy)
				rmu += dy[i] * g * (rx[i] * r + x[i] * rr);
		}
		shm[thr] = rmu;
	} else {
		double mu = shm[nthr], rmu = shm[nthr + 1];
		for (int i = thr; i < a->C; i += nthr) {
			double g = a->gain ? a->gain[i] : 1, xhat = x[i] * r;
			double rdxhat = rdy[i] * g + (dy && a->rgain ? (double)dy[i] * a->rgain[i] : 0);
			double v = r * (rdxhat - xhat * rmu);
			if (dy) {
				double dxhat = dy[i] * g, rxhat = rx[i] * r + x[i] * rr;
				v += rr * (dxhat - xhat * mu) - r * rxhat * mu;
			}
			rdx[i] += (float)v;
		}
	}
}

/*
 * LayerNorm: forward R{y} = g R{xhat} + R{g} xhat + R{b}, xhat = (x - mu)
 * r, R{mu} = mean(R{x}), R{r} = -r^3 mean((x - mu)(R{x} - R{mu})),
 * R{xhat} = (R{x} - R{mu}) r + (x - mu) R{r}; R{mu}, R{r} saved (phases:
 * R{mu}'s sum, R{mu}, R{r}'s sum, R{r}, R{y}). Backward, of dx = r
 * (dxhat - m1 - xhat m2), m1 = mean(dxhat), m2 = mean(dxhat xhat), dxhat
 * = dy g: R{dx} += R{r} (dxhat - m1 - xhat m2) + r (R{dxhat} - R{m1} -
 * R{xhat} m2 - xhat R{m2}), R{dxhat} = R{dy} g + dy R{g}, R{m1} =
 * mean(R{dxhat}), R{m2} = mean(R{dxhat} xhat + dxhat R{xhat}) (phases:
 * m1's sum, m1, m2's, m2, R{m1}'s, R{m1}, R{m2}'s, R{m2}, R{dx}); dout
 * NULL: Gauss-Newton, dxhat = 0 and only R{dy}'s terms. R{dgain},
 * R{dbias} are rop_colsum_partial's and colsum_partial's.
 */
struct gk_rop_layernorm {
	struct gk_grid grid;            /* gk_rows(rows, C), shm + 2 */
	float *out;                     /* forward R{y}; backward R{dx} (+=) */
	float *rmean, *rrstd;           /* (rows): forward writes, backward reads */
	const float *inp, *rinp;        /* x, R{x} (rows, C) */
	const float *dout, *rdout;      /* backward: dy (or NULL), R{dy} */
	const float *gain, *rgain, *rbias;      /* (C) or NULL */
	const float *mean, *rstd;       /* (rows) */
	int64_t rows;
	int C;
};

GK_BODY(rop_layernorm_forward, struct gk_rop_layernorm)
{
	const float *x = a->inp + blk * a->C, *rx = a->rinp + blk * a->C;
	float *y = a->out + blk * a->C;
	double mu = a->mean[blk], r = a->rstd[blk];

	if (phase == 0 || phase == 2) {
		double s = 0, rmu = phase ? shm[nthr] : 0;
		for (int i = thr; i < a->C; i += nthr)
			s += phase ? (x[i] - mu) * (rx[i] - rmu) : (double)rx[i];
		shm[thr] = s;
	} else if (phase == 1) {
		if (thr == 0) {
			double rmu = gk_row_total(shm, thr, nthr) / a->C;
			a->rmean[blk] = (float)rmu;
			shm[nthr] = rmu;
		}
	} else if (phase == 3) {
		if (thr == 0) {
			double rr = -r * r * r * gk_row_total(shm, thr, nthr) / a->C;
			a->rrstd[blk] = (float)rr;
			shm[nthr + 1] = rr;
		}
	} else {
		double rmu = shm[nthr], rr = shm[nthr + 1];
		for (int i = thr; i < a->C; i += nthr) {
			double xhat = (x[i] - mu) * r, rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
			y[i] = (float)(rxhat * (a->gain ? a->gain[i] : 1) + (a->rgain ? a->rgain[i] * xhat : 0) +
				       (a->rbias ? a->rbias[i] : 0));
		}
	}
}

GK_BODY(rop_layernorm_backward, struct gk_rop_layernorm)
{
	const float *x = a->inp + blk * a->C, *rx = a->rinp + blk * a->C;
	const float *dy = a->dout ? a->dout + blk * a->C : NULL, *rdy = a->rdout + blk * a->C;
	float *rdx = a->out + blk * a->C;
	double mu = a->mean[blk], r = a->rstd[blk], rmu = a->rmean[blk], rr = a->rrstd[blk];
	int k = phase / 2;              /* the sum phase 2k forms, phase 2k + 1 leaves */

	if (phase < 8 && phase % 2 == 0) {
		double s = 0;
		for (int i = thr; i < a->C; i += nthr) {
			double g = a->gain ? a->gain[i] : 1, xhat = (x[i] - mu) * r;
			double dxhat = dy ? dy[i] * g : 0;
			double rdxhat = rdy[i] * g + (dy && a->rgain ? (double)dy[i] * a->rgain[i] : 0);
			double rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
			s += k == 0 ? dxhat : k == 1 ? dxhat * xhat : k == 2 ? rdxhat
			     : rdxhat * xhat + dxhat * rxhat;
		}
		shm[thr] = s;
	} else if (phase < 8) {
		if (thr == 0)
			shm[nthr + k] = gk_row_total(shm, thr, nthr) / a->C;
	} else {
		double m1 = shm[nthr], m2 = shm[nthr + 1], rm1 = shm[nthr + 2], rm2 = shm[nthr + 3];
		for (int i = thr; i < a->C; i += nthr) {
			double g = a->gain ? a->gain[i] : 1, xhat = (x[i] - mu) * r;
			double dxhat = dy ? dy[i] * g : 0;
			double rdxhat = rdy[i] * g + (dy && a->rgain ? (double)dy[i] * a->rgain[i] : 0);
			double rxhat = (rx[i] - rmu) * r + (x[i] - mu) * rr;
			double v = r * (rdxhat - rm1 - xhat * rm2);
			if (dy)
				v += rr * (dxhat - m1 - xhat * m2) - r * rxhat * m2;
			rdx[i] += (float)v;
		}
	}
}

/*
 * Attention's softmax backward and its tangent for one head, rows (b, t)
 * as softmax_backward: sig = rowsum(P dP), R{sig} = rowsum(R{P} dP + P
 * R{dP}), R{dS} = scale (R{P} (dP - sig) + P (R{dP} - R{sig})) in place of
 * R{dP}, dS = scale P (dP - sig) in place of dP (phases: sig's sum, sig,
 * R{sig}'s sum, R{sig}, the rows); with a soft-cap both on through it.
 * Gauss-Newton has no dP: softmax_backward on R{dP} is its R{dS}.
 */
struct gk_rop_softmax_back {
	struct gk_grid grid;            /* gk_rows(B * T, T) */
	float *d, *rd;                  /* dP, R{dP} */
	const float *p, *rp;            /* P, R{P} */
	/* soft-capped scores (NULL: none): th = tanh(S / cap) and R{S}, the
	 * pre-cap scores' tangent, laid out as P; then dS through the cap,
	 * and R{dS} by elem_softcap_backward_tangent */
	const float *th, *rs;
	int64_t rows, p_bstride, d_bstride;
	int T;
	float scale, cap;
};

GK_BODY(rop_softmax_backward, struct gk_rop_softmax_back)
{
	int64_t b = blk / a->T, t = blk % a->T;
	const float *p = a->p + b * a->p_bstride + t * a->T, *rp = a->rp + b * a->p_bstride + t * a->T;
	float *d = a->d + b * a->d_bstride + t * a->T, *rd = a->rd + b * a->d_bstride + t * a->T;

	if (phase == 0) {
		double s = 0;
		for (int u = thr; u <= t; u += nthr)
			s += (double)p[u] * d[u];
		shm[thr] = s;
	} else if (phase == 1 || phase == 3) {
		if (thr == 0)
			shm[nthr + (phase == 3)] = gk_row_total(shm, thr, nthr);
	} else if (phase == 2) {
		double s = 0;
		for (int u = thr; u <= t; u += nthr)
			s += (double)p[u] * rd[u] + (double)rp[u] * d[u];
		shm[thr] = s;
	} else {
		float sig = (float)shm[nthr], rsig = (float)shm[nthr + 1];
		int64_t o = b * a->p_bstride + t * a->T;
		for (int u = thr; u < a->T; u += nthr) {
			if (u <= t) {
				rd[u] = (rp[u] * (d[u] - sig) + p[u] * (rd[u] - rsig)) * a->scale;
				d[u] = p[u] * (d[u] - sig) * a->scale;
				if (a->th) {
					rd[u] = elem_softcap_backward_tangent(d[u], 1, rd[u], a->th[o + u],
									      a->rs[o + u], a->cap);
					d[u] = elem_softcap_backward(d[u], a->th[o + u]);
				}
			} else {
				rd[u] = d[u] = 0;
			}
		}
	}
}

/* The cross entropy's Hessian in the logits on R{z}, in place: R{dz} =
 * scale p (R{z} - sum p R{z}) (phases: the sum, its total, the row) */
struct gk_xent_rop {
	struct gk_grid grid;            /* gk_rows(N, V) */
	float *rz;
	const float *p;
	int64_t rows;
	int V;
	float scale;
};

GK_BODY(xent_rop, struct gk_xent_rop)
{
	const float *p = a->p + blk * a->V;
	float *r = a->rz + blk * a->V;

	if (phase == 0) {
		double s = 0;
		for (int i = thr; i < a->V; i += nthr)
			s += (double)p[i] * r[i];
		shm[thr] = s;
	} else if (phase == 1) {
		if (thr == 0)
			shm[nthr] = gk_row_total(shm, thr, nthr);
	} else {
		float s = (float)shm[nthr];
		for (int i = thr; i < a->V; i += nthr)
			r[i] = a->scale * p[i] * (r[i] - s);
	}
}

/* The gated unit's tangents (elemmath.h): forward R{h}; backward
 * R{dgate}, R{dup} += (dh NULL: Gauss-Newton). GPT-2's activation's:
 * rop_act_forward R{h} = act'(x) R{x} (x in gate, R{x} in rgate, out),
 * rop_act_backward R{dx} += act'(x) R{dh} + act''(x) R{x} dh (out). */
struct gk_rop_pointwise {
	struct gk_grid grid;            /* gk_elems(n) */
	float *out, *out2;
	const float *dh, *rdh, *gate, *up, *rgate, *rup;
	int64_t n;
	int act;                        /* elemmath.h's ELEM_ACT_* */
};

GK_BODY(rop_swiglu_forward, struct gk_rop_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_glu_tangent(a->act, a->gate[i], a->up[i], a->rgate[i], a->rup[i]);
}

GK_BODY(rop_swiglu_backward, struct gk_rop_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	float dg, du;
	elem_glu_backward_tangent(a->act, a->dh ? a->dh[i] : 0, a->dh != NULL, a->rdh[i], a->gate[i],
				  a->up[i], a->rgate[i], a->rup[i], &dg, &du);
	a->out[i] += dg;
	a->out2[i] += du;
}

GK_BODY(rop_act_forward, struct gk_rop_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] = elem_act_d1(a->act, a->gate[i]) * a->rgate[i];
}

GK_BODY(rop_act_backward, struct gk_rop_pointwise)
{
	GK_ELEM_INDEX(i, a->n);
	a->out[i] += elem_act_backward_tangent(a->act, a->dh ? a->dh[i] : 0, a->dh != NULL, a->rdh[i],
					       a->gate[i], a->rgate[i]);
}

/* R{W_eff} = R{W} row col + W (R{row} col + row R{col}); the tangent's
 * multipliers rmult, rcol as mult, col (R{row} is 0 for a column
 * multiplier, R{col} for a row or scalar one). R{} of the backward is
 * the backward kernels' sum over the terms (gpumodel.c). */
GK_BODY(rop_mult_apply, struct gk_mult)
{
	GK_ELEM_INDEX(k, a->dout * a->din);
	int64_t i = k / a->din, j = k % a->din;
	float rr = a->mode == GK_MULT_SCALAR ? a->rmult[0] : a->mode == GK_MULT_COL ? 0.0f : a->rmult[i];
	float rc = a->mode == GK_MULT_COL ? a->rmult[j] : a->mode == GK_MULT_ROWCOL ? a->rcol[j] : 0.0f;
	float r = gk_mult_rowf(a, i), c = gk_mult_colf(a, j);

	a->weff[k] = a->rw[k] * (r * c) + a->w[k] * (rr * c + r * rc);
}

/*
 * A reparameterized gain (arch.h's scale_reparam): gamma from its
 * direction alpha and magnitude beta, and the backward that hands
 * dL/dgamma on to them and clears it; elemmath.h's functions, which the
 * CPU calls, in one thread per gain (a gain has at most d_ff values).
 */
struct gk_sv {
	struct gk_grid grid;            /* gk_elems(1) */
	float *gamma, *dgamma, *dalpha, *dbeta;
	const float *alpha, *beta;
	int64_t n;
	int mode;                       /* 1 or, 2 er */
};

GK_BODY(sv_gamma, struct gk_sv)
{
	GK_ELEM_INDEX(k, 1);
	(void)k;
	elem_sv_gamma(a->mode, a->alpha, a->beta[0], a->n, a->gamma);
}

GK_BODY(sv_backward, struct gk_sv)
{
	GK_ELEM_INDEX(k, 1);
	(void)k;
	elem_sv_backward(a->mode, a->alpha, a->beta[0], a->gamma, a->dgamma, a->n, a->dalpha, a->dbeta);
}

/*
 * The list: X(name, argument struct, phases), for the wrappers of gpu.cu,
 * the host loops of gpu_emu.c and the typed launchers of gpu.h.
 */
#define GK_KERNELS(X) \
	X(encoder_forward, struct gk_encoder, 1) \
	X(encoder_backward, struct gk_encoder, 1) \
	X(rmsnorm_forward, struct gk_rmsnorm, 3) \
	X(rmsnorm_backward, struct gk_rmsnorm, 3) \
	X(colsum_partial, struct gk_colsum, 1) \
	X(colsum_finish, struct gk_colsum, 1) \
	X(bias_forward, struct gk_bias, 1) \
	X(rope, struct gk_rope, 1) \
	X(softmax_forward, struct gk_softmax, 5) \
	X(softmax_backward, struct gk_softmax_back, 3) \
	X(xent_backward, struct gk_xent_back, 1) \
	X(sample_labels, struct gk_sample, 1) \
	X(gnb_square, struct gk_square, 1) \
	X(residual_forward, struct gk_pointwise, 1) \
	X(swiglu_forward, struct gk_pointwise, 1) \
	X(swiglu_backward, struct gk_pointwise, 1) \
	X(act_forward, struct gk_pointwise, 1) \
	X(act_backward, struct gk_pointwise, 1) \
	X(layernorm_forward, struct gk_layernorm, 5) \
	X(layernorm_backward, struct gk_layernorm, 5) \
	X(softcap_forward, struct gk_softcap, 1) \
	X(softcap_backward, struct gk_softcap, 1) \
	X(mult_apply, struct gk_mult, 1) \
	X(mult_dw, struct gk_mult, 1) \
	X(mult_drow, struct gk_mult, 1) \
	X(mult_dscalar, struct gk_mult, 1) \
	X(mult_dcol, struct gk_mult, 1) \
	X(sv_gamma, struct gk_sv, 1) \
	X(sv_backward, struct gk_sv, 1) \
	X(sum_partial, struct gk_sum, 2) \
	X(sum_finish, struct gk_sum, 1) \
	X(elem_rule, struct gk_elem_rule, 1) \
	X(elem_block_v, struct gk_elem_rule, 2) \
	X(muon_momentum, struct gk_opt, 1) \
	X(scion_momentum, struct gk_opt, 1) \
	X(scion_sign, struct gk_opt, 1) \
	X(scion_rows, struct gk_opt, 3) \
	X(scale, struct gk_opt, 1) \
	X(apply_update, struct gk_opt, 1) \
	X(ns_poly, struct gk_opt, 1) \
	X(ns_normalize, struct gk_opt, 1) \
	X(transpose, struct gk_opt, 1) \
	X(rop_colsum_partial, struct gk_colsum, 1) \
	X(rop_rmsnorm_forward, struct gk_rop_rmsnorm, 3) \
	X(rop_rmsnorm_backward, struct gk_rop_rmsnorm, 5) \
	X(rop_softmax_backward, struct gk_rop_softmax_back, 5) \
	X(xent_rop, struct gk_xent_rop, 3) \
	X(rop_swiglu_forward, struct gk_rop_pointwise, 1) \
	X(rop_swiglu_backward, struct gk_rop_pointwise, 1) \
	X(rop_act_forward, struct gk_rop_pointwise, 1) \
	X(rop_act_backward, struct gk_rop_pointwise, 1) \
	X(rop_layernorm_forward, struct gk_rop_layernorm, 5) \
	X(rop_layernorm_backward, struct gk_rop_layernorm, 9) \
	X(rop_softcap_backward, struct gk_softcap, 1) \
	X(rop_mult_apply, struct gk_mult, 1)

#define GK_ID(name, A, phases) GK_ID_##name,
enum gk_id { GK_KERNELS(GK_ID) GK_COUNT };
#undef GK_ID

#endif
