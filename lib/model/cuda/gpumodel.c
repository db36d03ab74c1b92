/*
 * gpumodel.c - the model on the device (see gpumodel.h). The layer
 * functions mirror lib/model/cpukern.c's, name for name and in the same order of
 * operations, with device pointers: outputs, then saved values, then
 * inputs, then weights, then sizes; backward adds into its gradients.
 * The matrix products go to cuBLAS through gpu.h's column-major gemm; mm
 * below turns the CPU's row-major products into it (a row-major X is the
 * column-major X^T, so C = op(A) op(B) is C^T = op(B)^T op(A)^T).
 *
 * They are the device's table of the step's operations (step.h): the
 * forward and backward passes are step.c's sequence, the CPU's too.
 *
 * Errors are sticky: the first one stops every later operation and is
 * what each entry point returns, so the sequence needs no checks.
 */
#include "gpumodel.h"
#include "gpu.h"
#include "../modelhvp.h"
#include "../step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)GK_MULT_SCALAR == (int)MULT_SCALAR && (int)GK_MULT_ROW == (int)MULT_ROW &&
	       (int)GK_MULT_COL == (int)MULT_COL && (int)GK_MULT_ROWCOL == (int)MULT_ROWCOL,
	       "kernels.h's multiplier modes are model.h's");
_Static_assert(sizeof(real) == sizeof(float), "the CUDA path computes in float");

struct gpu_model {
	struct gpu *g;
	const struct model *m;          /* the host model: its tensors, layout, config */
	struct gpu_info info;
	int bf16;                       /* the model's products in bf16 */
	int rc;                         /* the first error, sticky */
	struct sw_err err;
	/* the host model's blocks, on the device */
	real *params, *grads, *w_eff, *dw_eff;  /* (nparams) (nparams) (eff_size) (eff_size) */
	float *mom_m, *mom_v;           /* the optimizer's moments: (nparams), optim_v_count */
	struct model_ptrs p, d;         /* views as m->p, m->g; layer tables below */
	struct layer_ptrs *pl, *dl;     /* (L) */
	/* activations of up to B x T tokens */
	int B, T;                       /* as allocated */
	int cur_B, cur_T;               /* of the last forward */
	real *acts_block;
	struct layer_acts *acts;        /* (L) */
	real *x_final, *nf, *nf_rstd, *logits, *losses;  /* (N,C) (N,C) (N) (N,V) (N) */
	real *nf_mean;                  /* (N) with LayerNorm */
	real *logits_tanh;              /* (N, V) with a final soft-cap; the tangent's: R{logits}
					   before it */
	real *rope_cos, *rope_sin;      /* (T, hd/2) */
	real *dres, *dn, *dF1, *dF2, *dF3, *dq, *dq2, *dk, *dk2, *dv;  /* backward scratch */
	real *ds;                       /* (B, T, T) one head's dP */
	real *colsum;                   /* (chunks, width) partial column sums */
	int *tok, *tgt;                 /* (N) on the device */
	real *host_losses;              /* (N) */
	/* sums */
	double *partials;               /* (npartials) */
	size_t npartials;
	double *host_partials;
	double *ns_sumsq;               /* (1) */
	size_t *norm_chunk;             /* (ntensors) first partial of each tensor (grad norm) */
	size_t norm_chunks;
	/* the optimizer's work: Newton-Schulz 3 r^2 + 2 n, the update's 2 n */
	real *work;
	size_t work_size;
	/* GNB */
	real *probs;                    /* (N, V) a kept softmax, or NULL */
	double *u;                      /* (N) uniforms */
	int *labels;                    /* (N) */
	float *h;                       /* (nparams) the estimate */
	/* Hessian-vector products: the tangent model on the same device (its
	 * params v, its grads H v, its activations the tangents), what v
	 * reaches, the primal dL/dlogits beside kept probabilities */
	struct gpu_model *tangent;
	int owns_g;                     /* 0: the tangent's device is its primal's */
	const unsigned char *want;
	int hv;
	real *dlogits;                  /* (N, V) */
};

/* ---- plumbing ---------------------------------------------------------------- */

static int failed(struct gpu_model *gm)
{
	return gm->rc != SW_OK;
}

/* Record rc (the first failure sticks). */
static void note(struct gpu_model *gm, int rc, const struct sw_err *err)
{
	if (rc && !gm->rc) {
		gm->rc = rc;
		gm->err = *err;
	}
}

/* The entry points' return: the sticky error, copied out. */
static int result(const struct gpu_model *gm, struct sw_err *err)
{
	if (gm->rc && err)
		*err = gm->err;
	return gm->rc;
}

static void *dalloc(struct gpu_model *gm, size_t bytes)
{
	void *p = NULL;
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->alloc(gm->g, &p, bytes, &e), &e);
	return p;
}

static void dfree(struct gpu_model *gm, void *p)
{
	if (p)
		gm->g->ops->free(gm->g, p);
}

static void zero(struct gpu_model *gm, void *p, size_t bytes)
{
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->zero(gm->g, p, bytes, &e), &e);
}

static void upload(struct gpu_model *gm, void *dst, const void *src, size_t bytes)
{
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->upload(gm->g, dst, src, bytes, &e), &e);
}

static void download(struct gpu_model *gm, void *dst, const void *src, size_t bytes)
{
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->download(gm->g, dst, src, bytes, &e), &e);
}

static void dcopy(struct gpu_model *gm, void *dst, const void *src, size_t bytes)
{
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->copy(gm->g, dst, src, bytes, &e), &e);
}

/* Launch kernel `name` with the argument struct `args` (a compound literal) */
#define LAUNCH(gm, name, ...)                                                            \
	do {                                                                             \
		struct sw_err e_;                                                        \
		if (!failed(gm))                                                         \
			note(gm, gk_launch_##name((gm)->g, &(__VA_ARGS__), &e_), &e_);  \
	} while (0)

/*
 * Row-major C (M x N) = alpha op(A) op(B) + beta C, `batch` times with
 * strides sa, sb, sc (elements): cuBLAS's column-major product of the
 * transposes, C^T = op(B)^T op(A)^T.
 */
static void mm(struct gpu_model *gm, int ta, int tb, int M, int N, int K, float alpha,
	       const real *A, int lda, int64_t sa, const real *B, int ldb, int64_t sb, float beta,
	       real *C, int ldc, int64_t sc, int batch, int bf16)
{
	struct gpu_gemm g = {
		.transa = tb, .transb = ta, .m = N, .n = M, .k = K, .alpha = alpha, .beta = beta,
		.A = B, .B = A, .C = C, .lda = ldb, .ldb = lda, .ldc = ldc,
		.stride_a = sb, .stride_b = sa, .stride_c = sc, .batch = batch, .bf16 = bf16,
	};
	struct sw_err e;

	if (!failed(gm))
		note(gm, gm->g->ops->gemm(gm->g, &g, &e), &e);
}

/* The device address of what host_ptr points to in one of m's blocks. */
static real *dev_of(const struct gpu_model *gm, const real *host_ptr)
{
	const struct model *m = gm->m;

	if (!host_ptr)
		return NULL;
	if (host_ptr >= m->params && host_ptr < m->params + m->nparams)
		return gm->params + (host_ptr - m->params);
	if (host_ptr >= m->grads && host_ptr < m->grads + m->nparams)
		return gm->grads + (host_ptr - m->grads);
	if (m->w_eff && host_ptr >= m->w_eff && host_ptr < m->w_eff + m->eff_size)
		return gm->w_eff + (host_ptr - m->w_eff);
	if (m->dw_eff && host_ptr >= m->dw_eff && host_ptr < m->dw_eff + m->eff_size)
		return gm->dw_eff + (host_ptr - m->dw_eff);
	return NULL;
}

/* The device's view of one of m's layer tables. */
static void map_layer(const struct gpu_model *gm, struct layer_ptrs *d, const struct layer_ptrs *s)
{
	d->attn_norm = dev_of(gm, s->attn_norm);
	d->attn_norm_bias = dev_of(gm, s->attn_norm_bias);
	d->wq = dev_of(gm, s->wq);
	d->wk = dev_of(gm, s->wk);
	d->wv = dev_of(gm, s->wv);
	d->wo = dev_of(gm, s->wo);
	d->o_bias = dev_of(gm, s->o_bias);
	d->attn_post_norm = dev_of(gm, s->attn_post_norm);
	d->q_norm = dev_of(gm, s->q_norm);
	d->k_norm = dev_of(gm, s->k_norm);
	d->o_in_norm = dev_of(gm, s->o_in_norm);
	d->ffn_norm = dev_of(gm, s->ffn_norm);
	d->ffn_norm_bias = dev_of(gm, s->ffn_norm_bias);
	d->ffn_post_norm = dev_of(gm, s->ffn_post_norm);
	d->wgate = dev_of(gm, s->wgate);
	d->wup = dev_of(gm, s->wup);
	d->wdown = dev_of(gm, s->wdown);
	d->up_bias = dev_of(gm, s->up_bias);
	d->down_bias = dev_of(gm, s->down_bias);
	d->down_in_norm = dev_of(gm, s->down_in_norm);
	d->v_norm = dev_of(gm, s->v_norm);
	d->gate_norm = dev_of(gm, s->gate_norm);
	d->up_norm = dev_of(gm, s->up_norm);
	d->q_bias = dev_of(gm, s->q_bias);
	d->k_bias = dev_of(gm, s->k_bias);
	d->v_bias = dev_of(gm, s->v_bias);
}

/* The device's view of the embedding's, final norm's and head's. */
static void map_top(const struct gpu_model *gm, struct model_ptrs *dst, const struct model_ptrs *src)
{
	dst->embed = dev_of(gm, src->embed);
	dst->pos_embed = dev_of(gm, src->pos_embed);
	dst->final_norm = dev_of(gm, src->final_norm);
	dst->final_norm_bias = dev_of(gm, src->final_norm_bias);
	dst->lm_head = dev_of(gm, src->lm_head);
}

/* The device's view of one of m's pointer tables. */
static void map_ptrs(const struct gpu_model *gm, struct model_ptrs *dst, struct layer_ptrs *layers,
		     const struct model_ptrs *src)
{
	map_top(gm, dst, src);
	dst->layer = layers;
	for (int l = 0; l < gm->m->c.n_layers; l++)
		map_layer(gm, &layers[l], &src->layer[l]);
}

/* ---- the layers, forward and backward ------------------------------------------ */

static void encoder_forward(struct gpu_model *gm, real *out, const int *tokens, const real *embed,
			    int N, int C)
{
	LAUNCH(gm, encoder_forward, (struct gk_encoder){
		.grid = gk_elems((int64_t)N * C), .out = out, .embed = embed, .tok = tokens,
		.n = (int64_t)N * C, .C = C});
}

static void encoder_backward(struct gpu_model *gm, real *dembed, const real *dout, const int *tokens,
			     int N, int C)
{
	LAUNCH(gm, encoder_backward, (struct gk_encoder){
		.grid = gk_elems((int64_t)N * C), .dembed = dembed, .dout = dout, .tok = tokens,
		.n = (int64_t)N * C, .C = C});
}

/* out += the column sums over rows of a's terms (gk_colsum's: a alone, or
 * with b, rstd and mean a norm's gain gradient; rop: its tangent,
 * rop_colsum_partial's), chunks of rows in order: a rerun gives the same
 * bits */
static void colsum(struct gpu_model *gm, struct gk_colsum a, int rop)
{
	a.chunks = (a.rows + GK_CHUNK - 1) / GK_CHUNK;
	a.partial = gm->colsum;
	a.grid = gk_elems(a.chunks * a.C);
	if (rop)
		LAUNCH(gm, rop_colsum_partial, a);
	else
		LAUNCH(gm, colsum_partial, a);
	a.grid = gk_elems(a.C);
	LAUNCH(gm, colsum_finish, a);
}

static void rmsnorm_forward(struct gpu_model *gm, real *out, real *rstd, const real *inp,
			    const real *gain, int64_t N, int C, double eps)
{
	LAUNCH(gm, rmsnorm_forward, (struct gk_rmsnorm){
		.grid = gk_rows(N, C), .out = out, .rstd = rstd, .inp = inp, .gain = gain,
		.rows = N, .C = C, .eps = eps});
}

/* dgain += sum_n dy xhat (column sums in chunks of rows); dx += ... */
static void rmsnorm_backward(struct gpu_model *gm, real *dinp, real *dgain, const real *dout,
			     const real *inp, const real *gain, const real *rstd, int64_t N, int C)
{
	if (dgain)
		colsum(gm, (struct gk_colsum){.out = dgain, .a = dout, .b = inp, .rstd = rstd, .rows = N,
					      .C = C}, 0);
	LAUNCH(gm, rmsnorm_backward, (struct gk_rmsnorm){
		.grid = gk_rows(N, C), .out = dinp, .rstd = (real *)rstd, .inp = inp, .dout = dout,
		.gain = gain, .rows = N, .C = C});
}

static void layernorm_forward(struct gpu_model *gm, real *out, real *mean, real *rstd,
			      const real *inp, const real *gain, const real *nbias, int64_t N, int C,
			      double eps)
{
	LAUNCH(gm, layernorm_forward, (struct gk_layernorm){
		.grid = gk_rows(N, C), .out = out, .mean = mean, .rstd = rstd, .inp = inp,
		.gain = gain, .bias = nbias, .rows = N, .C = C, .eps = eps});
}

/* dgain += sum_n dy xhat, dbias += sum_n dy (column sums); dx += ... */
static void layernorm_backward(struct gpu_model *gm, real *dinp, real *dgain, real *dbias,
			       const real *dout, const real *inp, const real *gain, const real *mean,
			       const real *rstd, int64_t N, int C)
{
	if (dgain)
		colsum(gm, (struct gk_colsum){.out = dgain, .a = dout, .b = inp, .rstd = rstd,
					      .mean = mean, .rows = N, .C = C}, 0);
	if (dbias)
		colsum(gm, (struct gk_colsum){.out = dbias, .a = dout, .rows = N, .C = C}, 0);
	if (dinp)
		LAUNCH(gm, layernorm_backward, (struct gk_layernorm){
			.grid = gk_rows(N, C), .out = dinp, .mean = (real *)mean, .rstd = (real *)rstd,
			.inp = inp, .dout = dout, .gain = gain, .rows = N, .C = C});
}

/* soft-capping in place over n values (attention's causal scores with T >
 * 0): forward x = cap tanh(x / cap), th saved; backward x *= 1 - th^2 */
static void cap_values(struct gpu_model *gm, real *x, real *th, size_t n, int T, real cap, int backward)
{
	struct gk_softcap a = {.grid = gk_elems((int64_t)n), .x = x, .th = th, .n = (int64_t)n, .T = T,
			       .cap = cap};

	if (backward)
		LAUNCH(gm, softcap_backward, a);
	else
		LAUNCH(gm, softcap_forward, a);
}

/* y (N, n) += b per row; backward: b += y's column sums (chunks of rows,
 * the chunks in order: a rerun gives the same bits) */
static void bias(struct gpu_model *gm, real *y, real *b, int64_t N, int n, int backward)
{
	if (backward) {
		colsum(gm, (struct gk_colsum){.out = b, .a = y, .rows = N, .C = n}, 0);
		return;
	}
	LAUNCH(gm, bias_forward, (struct gk_bias){
		.grid = gk_elems(N * n), .y = y, .b = b, .count = N * n, .n = n});
}

/* out (N, dout) = inp (N, din) W^T */
static void matmul_forward(struct gpu_model *gm, real *out, const real *inp, const real *w, int N,
			   int din, int dout)
{
	mm(gm, 0, 1, N, dout, din, 1, inp, din, 0, w, din, 0, 0, out, dout, 0, 1, gm->bf16);
}

/* dinp += dout W; dW += dout^T inp */
static void matmul_backward(struct gpu_model *gm, real *dinp, real *dw, const real *dout,
			    const real *inp, const real *w, int N, int din, int dout_)
{
	if (dinp)
		mm(gm, 0, 0, N, din, dout_, 1, dout, dout_, 0, w, din, 0, 1, dinp, din, 0, 1, gm->bf16);
	mm(gm, 1, 0, dout_, din, N, 1, dout, dout_, 0, inp, din, 0, 1, dw, din, 0, 1, gm->bf16);
}

static void rope(struct gpu_model *gm, int backward, real *x, int B, int T, int nh, int hd)
{
	LAUNCH(gm, rope, (struct gk_rope){
		.grid = gk_elems((int64_t)B * T * nh * (hd / 2)), .x = x, .cos_ = gm->rope_cos,
		.sin_ = gm->rope_sin, .n = (int64_t)B * T * nh * (hd / 2), .T = T, .nh = nh, .hd = hd,
		.backward = backward});
}

/*
 * Causal attention with GQA, as cpukern.c's: per head h (batched over the B
 * sequences), S = scale Q_h K_g^T on the blocks of T x T on and below the
 * diagonal (model_causal_block; the scale is the product's alpha), with
 * softcap > 0 S = softcap tanh(S / softcap) (tanh kept in att_tanh), the
 * causal softmax (every row of every head in one kernel), O_h = P V_g; g
 * = h / (H/KV).
 */
static void attention_forward(struct gpu_model *gm, real *out, real *att, real *att_tanh,
			      const real *q, const real *k, const real *v, int B, int T, int H,
			      int KV, int hd, float scale, float cap)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T), r0, r1;
	int64_t TT = (int64_t)T * T;

	for (int h = 0; h < H; h++)
		for (int i = 0; i < nb; i++) {
			int g = h / group;
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 1, r1 - r0, r1, hd, scale, q + (size_t)r0 * Q + (size_t)h * hd, Q,
			   (int64_t)T * Q, k + (size_t)g * hd, K, (int64_t)T * K, 0,
			   att + h * TT + (int64_t)r0 * T, T, H * TT, B, gm->bf16);
		}
	if (cap > 0)
		cap_values(gm, att, att_tanh, (size_t)B * H * TT, T, cap, 0);
	LAUNCH(gm, softmax_forward, (struct gk_softmax){
		.grid = gk_rows((int64_t)B * H * T, T), .p = att, .rows = (int64_t)B * H * T, .width = T,
		.causal = 1});
	for (int h = 0; h < H; h++)
		for (int i = 0; i < nb; i++) {
			int g = h / group;
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, att + h * TT + (int64_t)r0 * T, T, H * TT,
			   v + (size_t)g * hd, K, (int64_t)T * K, 0, out + (size_t)r0 * Q + (size_t)h * hd, Q,
			   (int64_t)T * Q, B, gm->bf16);
		}
}

/*
 * Backward, per head h in order (batched over b), as cpukern.c per (b, g):
 * dP = dO_h V_g^T; dV_g += P^T dO_h; dS = P (dP - rowsum(P dP)) scale,
 * through a soft-cap times 1 - tanh^2 (att_tanh, NULL without); dQ_h +=
 * dS K_g; dK_g += dS^T Q_h. dP lives in the (B, T, T) scratch; what its
 * blocks above the diagonal hold is never read.
 */
static void attention_backward(struct gpu_model *gm, real *dq, real *dk, real *dv, real *ds,
			       const real *dout, const real *q, const real *k, const real *v,
			       const real *att, const real *att_tanh, int B, int T, int H, int KV,
			       int hd, float scale)
{
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T), r0, r1;
	int64_t TT = (int64_t)T * T, sq = (int64_t)T * Q, sk = (int64_t)T * K;

	for (int h = 0; h < H; h++) {
		int g = h / group;
		const real *doh = dout + (size_t)h * hd, *qh = q + (size_t)h * hd, *ph = att + h * TT;
		const real *kg = k + (size_t)g * hd, *vg = v + (size_t)g * hd;

		/* in cpukern.c's blocks: dP's on and below the diagonal, dV's rows
		 * from P's rows below them */
		for (int i = 0; i < nb; i++) {
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 1, r1 - r0, r1, hd, 1, doh + (size_t)r0 * Q, Q, sq, vg, K, sk, 0,
			   ds + (size_t)r0 * T, T, TT, B, gm->bf16);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ph + (size_t)r0 * T + r0, T, H * TT,
			   doh + (size_t)r0 * Q, Q, sq, 1, dv + (size_t)g * hd + (size_t)r0 * K, K, sk, B,
			   gm->bf16);
		}
		LAUNCH(gm, softmax_backward, (struct gk_softmax_back){
			.grid = gk_rows((int64_t)B * T, T), .d = ds, .p = ph,
			.th = att_tanh ? att_tanh + h * TT : NULL, .rows = (int64_t)B * T,
			.p_bstride = H * TT, .d_bstride = TT, .T = T, .scale = scale});
		for (int i = 0; i < nb; i++) {
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, ds + (size_t)r0 * T, T, TT, kg, K, sk, 1,
			   dq + (size_t)h * hd + (size_t)r0 * Q, Q, sq, B, gm->bf16);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ds + (size_t)r0 * T + r0, T, TT,
			   qh + (size_t)r0 * Q, Q, sq, 1, dk + (size_t)g * hd + (size_t)r0 * K, K, sk, B,
			   gm->bf16);
		}
	}
}

static void residual_forward(struct gpu_model *gm, real *out, const real *a, const real *b, size_t n)
{
	LAUNCH(gm, residual_forward, (struct gk_pointwise){
		.grid = gk_elems((int64_t)n), .out = out, .a = a, .b = b, .n = (int64_t)n});
}

/* the gated unit act(gate) up (SwiGLU, GeGLU) */
static void swiglu_forward(struct gpu_model *gm, real *h, const real *gate, const real *up, size_t n,
			   enum model_act act)
{
	LAUNCH(gm, swiglu_forward, (struct gk_pointwise){
		.grid = gk_elems((int64_t)n), .out = h, .a = gate, .b = up, .n = (int64_t)n,
		.act = (int)act});
}

static void swiglu_backward(struct gpu_model *gm, real *dgate, real *dup, const real *dh,
			    const real *gate, const real *up, size_t n, enum model_act act)
{
	LAUNCH(gm, swiglu_backward, (struct gk_pointwise){
		.grid = gk_elems((int64_t)n), .out = dgate, .out2 = dup, .a = dh, .b = gate, .c = up,
		.n = (int64_t)n, .act = (int)act});
}

/* GPT-2's MLP: h = act(x); backward dx += act'(x) dh */
static void act_forward(struct gpu_model *gm, real *h, const real *x, size_t n, enum model_act act)
{
	LAUNCH(gm, act_forward, (struct gk_pointwise){
		.grid = gk_elems((int64_t)n), .out = h, .a = x, .n = (int64_t)n, .act = (int)act});
}

static void act_backward(struct gpu_model *gm, real *dx, const real *dh, const real *x, size_t n,
			 enum model_act act)
{
	LAUNCH(gm, act_backward, (struct gk_pointwise){
		.grid = gk_elems((int64_t)n), .out = dx, .a = dh, .b = x, .n = (int64_t)n,
		.act = (int)act});
}

/* probs = softmax(logits) per row of V; losses = -log p[target] */
static void softmax_crossentropy_forward(struct gpu_model *gm, real *losses, real *probs,
					 const int *targets, int N, int V)
{
	LAUNCH(gm, softmax_forward, (struct gk_softmax){
		.grid = gk_rows(N, V), .p = probs, .losses = losses, .targets = targets, .rows = N,
		.width = V});
}

static void softmax_crossentropy_backward(struct gpu_model *gm, real *probs, const int *targets,
					  int N, int V, real scale)
{
	LAUNCH(gm, xent_backward, (struct gk_xent_back){
		.grid = gk_elems((int64_t)N * V), .p = probs, .targets = targets,
		.n = (int64_t)N * V, .V = V, .scale = scale});
}

/* ---- multipliers ------------------------------------------------------------------ */

static struct gk_mult mult_args(const struct gpu_model *gm, int i)
{
	const struct model *m = gm->m;
	const struct model_linear *l = &m->linears[i];
	const struct model_tensor *wt = &m->tensors[l->tensor], *mt = &m->tensors[l->mult_tensor];
	struct gk_mult a;

	memset(&a, 0, sizeof a);
	a.weff = gm->w_eff + m->eff_offset[i];
	a.dweff = gm->dw_eff + m->eff_offset[i];
	a.w = gm->params + wt->offset;
	a.dw = gm->grads + wt->offset;
	a.mult = gm->params + mt->offset;
	a.dmult = gm->grads + mt->offset;
	if (l->col_tensor >= 0) {
		a.col = gm->params + m->tensors[l->col_tensor].offset;
		a.dcol = gm->grads + m->tensors[l->col_tensor].offset;
	}
	a.rowsum = gm->partials;
	a.dout = l->dout;
	a.din = l->din;
	a.mode = (int)l->mode;
	return a;
}

/* A reparameterized gain's arguments (model.c's model_update_gains). */
static struct gk_sv sv_args(struct gpu_model *gm, int i)
{
	const struct model *m = gm->m;
	const struct model_reparam *r = &m->reparams[i];
	const struct model_tensor *g = &m->tensors[r->gain], *d = &m->tensors[r->dir],
				  *b = &m->tensors[r->mag];
	struct gk_sv a;

	a.grid = gk_elems(1);
	a.gamma = gm->params + g->offset;
	a.dgamma = gm->grads + g->offset;
	a.dalpha = gm->grads + d->offset;
	a.dbeta = gm->grads + b->offset;
	a.alpha = gm->params + d->offset;
	a.beta = gm->params + b->offset;
	a.n = (int64_t)g->numel;
	a.mode = (int)r->mode;
	return a;
}

static void update_effective(struct gpu_model *gm)
{
	for (int i = 0; i < gm->m->nreparams; i++) {
		struct gk_sv a = sv_args(gm, i);
		LAUNCH(gm, sv_gamma, a);
	}
	for (int i = 0; gm->m->eff && i < gm->m->nlinears; i++) {
		struct gk_mult a;
		if (gm->m->linears[i].mode == MULT_NONE)
			continue;
		a = mult_args(gm, i);
		a.grid = gk_elems(a.dout * a.din);
		LAUNCH(gm, mult_apply, a);
	}
}

/* From dL/dW_eff to dL/dW and dL/dmult, as cpukern.c's model_mult_backward. */
static void mult_backward(struct gpu_model *gm, int i)
{
	struct gk_mult a = mult_args(gm, i);

	a.grid = gk_elems(a.dout * a.din);
	LAUNCH(gm, mult_dw, a);
	if (a.mode == GK_MULT_COL || a.mode == GK_MULT_ROWCOL) {
		a.grid = gk_elems(a.din);
		LAUNCH(gm, mult_dcol, a);
		if (a.mode == GK_MULT_COL)
			return;
	}
	a.grid = gk_elems(a.dout);
	LAUNCH(gm, mult_drow, a);
	if (a.mode == GK_MULT_SCALAR) {
		a.grid = gk_elems(1);
		LAUNCH(gm, mult_dscalar, a);
	}
}

/* ---- sums --------------------------------------------------------------------------- */

/* Room for n partial sums. */
static void need_partials(struct gpu_model *gm, size_t n)
{
	if (n <= gm->npartials || failed(gm))
		return;
	dfree(gm, gm->partials);
	free(gm->host_partials);
	gm->npartials = 0;
	gm->partials = dalloc(gm, n * sizeof(double));
	gm->host_partials = malloc(n * sizeof(double));
	if (!gm->host_partials) {
		struct sw_err e;
		note(gm, sw_fail(&e, SW_ESOFTWARE, "out of memory"), &e);
	}
	if (!failed(gm))
		gm->npartials = n;
}

static int64_t chunks_of(size_t n)
{
	return (int64_t)((n + GK_SUM_CHUNK - 1) / GK_SUM_CHUNK);
}

/* partial[0 .. chunks_of(n)) = the sums of x's chunks */
static void sum_partial(struct gpu_model *gm, double *partial, const real *x, size_t n, int squares)
{
	LAUNCH(gm, sum_partial, (struct gk_sum){
		.grid = gk_rows(chunks_of(n), GK_SUM_CHUNK), .partial = partial, .x = x,
		.n = (int64_t)n, .chunks = chunks_of(n), .squares = squares});
}

int gpumodel_sum(struct gpu_model *gm, const real *x, size_t n, int squares, double *out,
		 struct sw_err *err)
{
	int64_t k = chunks_of(n);

	*out = 0;
	need_partials(gm, (size_t)k);
	sum_partial(gm, gm->partials, x, n, squares);
	download(gm, gm->host_partials, gm->partials, (size_t)k * sizeof(double));
	for (int64_t i = 0; !failed(gm) && i < k; i++)
		*out += gm->host_partials[i];
	return result(gm, err);
}

/* ---- activations ------------------------------------------------------------------- */

/* Lay the activations of B x T out from base (NULL: only count); the
 * reals needed. The same arrays as model.h's struct layer_acts. */
static size_t layout_acts(struct gpu_model *gm, real *base, int B, int T)
{
	const struct sw_config *c = &gm->m->c;
	const struct model_arch *ar = &gm->m->arch;
	size_t N = (size_t)B * T, C = (size_t)c->d_model, H = (size_t)c->n_heads, KV = (size_t)c->n_kv_heads,
	       hd = (size_t)c->head_dim, Q = H * hd, K = KV * hd, F = (size_t)c->d_ff,
	       V = (size_t)c->vocab_size, at = 0;
	size_t chunks = (N * H + GK_CHUNK - 1) / GK_CHUNK, widest = C > Q ? C : Q, ncol;

	widest = widest > F ? widest : F;
	/* column sums: N rows of at most the widest, or N H rows of hd; the
	 * position embeddings' gradient B rows of T C */
	ncol = ((N + GK_CHUNK - 1) / GK_CHUNK) * widest + chunks * hd;
	if (ar->pos_embed && ((size_t)B + GK_CHUNK - 1) / GK_CHUNK * T * C > ncol)
		ncol = ((size_t)B + GK_CHUNK - 1) / GK_CHUNK * T * C;
#define PLACE(field, n) do { if (base) (field) = base + at; at += (n); } while (0)
	for (int l = 0; l < c->n_layers; l++) {
		struct layer_acts *a = &gm->acts[l];
		PLACE(a->x_in, N * C);
		PLACE(a->n1, N * C);
		PLACE(a->n1_rstd, N);
		PLACE(a->q_lin, N * Q);
		PLACE(a->k_lin, N * K);
		PLACE(a->q_rstd, N * H);
		PLACE(a->k_rstd, N * KV);
		PLACE(a->q, N * Q);
		PLACE(a->k, N * K);
		PLACE(a->v, N * K);
		PLACE(a->att, N * H * T);
		PLACE(a->att_out, N * Q);
		PLACE(a->o_in, N * Q);
		PLACE(a->o_in_rstd, N);
		PLACE(a->attn_y, N * C);
		PLACE(a->x_mid, N * C);
		PLACE(a->n2, N * C);
		PLACE(a->n2_rstd, N);
		if (ar->gated)          /* GPT-2's MLP has up alone */
			PLACE(a->gate, N * F);
		PLACE(a->up, N * F);
		PLACE(a->h, N * F);
		PLACE(a->d_in, N * F);
		PLACE(a->d_in_rstd, N);
		PLACE(a->mlp_y, N * C);
		if (gm->m->design.dnp[ARCH_SV_ATTN]) {
			PLACE(a->v_lin, N * K);
			PLACE(a->v_rstd, N * KV);
		}
		if (gm->m->design.dnp[ARCH_SV_FFN]) {
			PLACE(a->gate_lin, N * F);
			PLACE(a->up_lin, N * F);
			PLACE(a->gate_rstd, N);
			PLACE(a->up_rstd, N);
		}
		/* the other families' (model_alloc_acts's) */
		if (ar->layernorm) {
			PLACE(a->n1_mean, N);
			PLACE(a->n2_mean, N);
		}
		if (ar->attn_softcap > 0)
			PLACE(a->att_tanh, N * H * T);
		if (ar->post_norms) {
			PLACE(a->attn_post, N * C);
			PLACE(a->attn_post_rstd, N);
			PLACE(a->mlp_post, N * C);
			PLACE(a->mlp_post_rstd, N);
		}
	}
	PLACE(gm->x_final, N * C);
	PLACE(gm->nf, N * C);
	PLACE(gm->nf_rstd, N);
	PLACE(gm->logits, N * V);
	PLACE(gm->losses, N);
	if (ar->layernorm)
		PLACE(gm->nf_mean, N);
	if (ar->final_softcap > 0)
		PLACE(gm->logits_tanh, N * V);
	PLACE(gm->rope_cos, (size_t)T * (hd / 2));
	PLACE(gm->rope_sin, (size_t)T * (hd / 2));
	/* the backward pass's scratch, as model.c's */
	PLACE(gm->dres, N * C);
	PLACE(gm->dn, N * C);
	PLACE(gm->dF1, N * F);
	PLACE(gm->dF2, N * F);
	PLACE(gm->dF3, N * F);
	PLACE(gm->dq, N * Q);
	PLACE(gm->dq2, N * Q);
	PLACE(gm->dk, N * K);
	PLACE(gm->dk2, N * K);
	PLACE(gm->dv, N * K);
	PLACE(gm->ds, N * T);
	PLACE(gm->colsum, ncol);
#undef PLACE
	return at;
}

/* The frequencies from the one table (arch_rope_inv_freq), the angles
 * in float32 as HF computes them, as model_alloc_acts does for the CPU. */
static void upload_rope(struct gpu_model *gm, int T)
{
	const struct sw_config *c = &gm->m->c;
	size_t half = (size_t)c->head_dim / 2;
	float *cs = malloc(2 * (size_t)T * half * sizeof *cs), *inv = malloc((half ? half : 1) * sizeof *inv);
	struct sw_err e;

	if (!cs || !inv) {
		free(cs);
		free(inv);
		note(gm, sw_fail(&e, SW_ESOFTWARE, "out of memory"), &e);
		return;
	}
	if (arch_rope_inv_freq(c, inv) < 0) {
		free(cs);
		free(inv);
		note(gm, sw_fail(&e, SW_EDATA, "rope_scaling type '%s' is not supported", c->rope_type), &e);
		return;
	}
	for (int t = 0; t < T; t++)
		for (size_t i = 0; i < half; i++) {
			cs[(size_t)t * half + i] = cosf((float)t * inv[i]);
			cs[((size_t)T + t) * half + i] = sinf((float)t * inv[i]);
		}
	upload(gm, gm->rope_cos, cs, (size_t)T * half * sizeof *cs);
	upload(gm, gm->rope_sin, cs + (size_t)T * half, (size_t)T * half * sizeof *cs);
	free(cs);
	free(inv);
}

/* Room for B x T (T <= seq_len), as model_alloc_acts. */
static void alloc_acts(struct gpu_model *gm, int B, int T)
{
	const struct sw_config *c = &gm->m->c;
	size_t N = (size_t)B * T, total;
	struct sw_err e;

	if (failed(gm) || (B == gm->B && T == gm->T && gm->acts_block))
		return;
	if (c->seq_len && T > c->seq_len) {
		note(gm, sw_fail(&e, SW_EUSAGE, "sequence of %d tokens is longer than seq_len %lld", T,
				 (long long)c->seq_len), &e);
		return;
	}
	if (arch_window_check(c, T, &e)) {
		note(gm, e.code, &e);
		return;
	}
	dfree(gm, gm->acts_block);
	dfree(gm, gm->tok);
	dfree(gm, gm->tgt);
	free(gm->host_losses);
	gm->acts_block = NULL;
	gm->tok = gm->tgt = NULL;
	gm->B = gm->T = 0;
	total = layout_acts(gm, NULL, B, T);
	gm->acts_block = dalloc(gm, total * sizeof(real));
	gm->tok = dalloc(gm, N * sizeof(int));
	gm->tgt = dalloc(gm, N * sizeof(int));
	gm->host_losses = malloc(N * sizeof(real));
	if (!failed(gm) && !gm->host_losses)
		note(gm, sw_fail(&e, SW_ESOFTWARE, "out of memory"), &e);
	if (failed(gm))
		return;
	layout_acts(gm, gm->acts_block, B, T);
	upload_rope(gm, T);
	gm->B = B;
	gm->T = T;
}

/* ---- the whole model: step.c's sequence over the device's operations ------------------- */

/* the device's operations of the step (step.h): the layers above; the
 * device is never timed per phase and tells no one of finished layers */
static void op_update_effective(void *ctx)
{
	update_effective(ctx);
}

static void op_embed(void *ctx, real *out, const int *tokens, const real *embed, int N, int C)
{
	encoder_forward(ctx, out, tokens, embed, N, C);
}

static void op_bias(void *ctx, real *y, real *b, int64_t rows, int n, int backward)
{
	bias(ctx, y, b, rows, n, backward);
}

static void op_rmsnorm(void *ctx, real *out, real *rstd, const real *inp, const real *gain,
		       int64_t rows, int n, double eps)
{
	rmsnorm_forward(ctx, out, rstd, inp, gain, rows, n, eps);
}

static void op_layernorm(void *ctx, real *out, real *mean, real *rstd, const real *inp,
			 const real *gain, const real *nbias, int64_t rows, int n, double eps)
{
	layernorm_forward(ctx, out, mean, rstd, inp, gain, nbias, rows, n, eps);
}

/* x *= s: the optimizers' scale kernel, one float product per value as
 * the CPU's */
static void op_scale(void *ctx, real *x, size_t n, real s)
{
	LAUNCH((struct gpu_model *)ctx, scale, (struct gk_opt){
		.grid = gk_elems((int64_t)n), .out = x, .n = (int64_t)n, .scale = s});
}

static void op_softcap(void *ctx, real *x, real *t, size_t n, real cap, int backward)
{
	cap_values(ctx, x, t, n, 0, cap, backward);
}

static void op_matmul(void *ctx, real *out, const real *inp, const real *w, int N, int din, int dout)
{
	matmul_forward(ctx, out, inp, w, N, din, dout);
}

static void op_copy(void *ctx, real *dst, const real *src, size_t n)
{
	dcopy(ctx, dst, src, n * sizeof(real));
}

static void op_rope(void *ctx, real *x, int B, int T, int nh, int hd, int backward)
{
	rope(ctx, backward, x, B, T, nh, hd);
}

static void op_attention(void *ctx, real *out, real *att, real *att_tanh, const real *q,
			 const real *k, const real *v, int B, int T, int H, int KV, int hd,
			 real scale, real softcap)
{
	attention_forward(ctx, out, att, att_tanh, q, k, v, B, T, H, KV, hd, scale, softcap);
}

static void op_residual(void *ctx, real *out, const real *a, const real *b, size_t n)
{
	residual_forward(ctx, out, a, b, n);
}

static void op_swiglu(void *ctx, real *h, const real *gate, const real *up, size_t n,
		      enum model_act act)
{
	swiglu_forward(ctx, h, gate, up, n, act);
}

static void op_swiglu_backward(void *ctx, real *dgate, real *dup, const real *dh, const real *gate,
			       const real *up, size_t n, enum model_act act)
{
	swiglu_backward(ctx, dgate, dup, dh, gate, up, n, act);
}

static void op_act(void *ctx, real *h, const real *x, size_t n, enum model_act act)
{
	act_forward(ctx, h, x, n, act);
}

static void op_act_backward(void *ctx, real *dx, const real *dh, const real *x, size_t n,
			    enum model_act act)
{
	act_backward(ctx, dx, dh, x, n, act);
}

static void op_loss(void *ctx, real *losses, real *probs, const int *targets, int N, int V)
{
	softmax_crossentropy_forward(ctx, losses, probs, targets, N, V);
}

static void op_zero(void *ctx, real *x, size_t n)
{
	zero(ctx, x, n * sizeof(real));
}

static void op_loss_backward(void *ctx, real *probs, const int *targets, int N, int V, real scale)
{
	softmax_crossentropy_backward(ctx, probs, targets, N, V, scale);
}

static void op_matmul_backward(void *ctx, real *dinp, real *dw, const real *dout, const real *inp,
			       const real *w, int N, int din, int dout_)
{
	matmul_backward(ctx, dinp, dw, dout, inp, w, N, din, dout_);
}

static void op_rmsnorm_backward(void *ctx, real *dinp, real *dgain, const real *dout,
				const real *inp, const real *gain, const real *rstd, int64_t rows,
				int n)
{
	rmsnorm_backward(ctx, dinp, dgain, dout, inp, gain, rstd, rows, n);
}

static void op_layernorm_backward(void *ctx, real *dinp, real *dgain, real *dbias,
				  const real *dout, const real *inp, const real *gain,
				  const real *mean, const real *rstd, int64_t rows, int n)
{
	layernorm_backward(ctx, dinp, dgain, dbias, dout, inp, gain, mean, rstd, rows, n);
}

static void op_attention_backward(void *ctx, real *dq, real *dk, real *dv, const real *dout,
				  const real *q, const real *k, const real *v, const real *att,
				  const real *att_tanh, int B, int T, int H, int KV, int hd,
				  real scale, real softcap)
{
	struct gpu_model *gm = ctx;

	attention_backward(gm, dq, dk, dv, gm->ds, dout, q, k, v, att, softcap > 0 ? att_tanh : NULL,
			   B, T, H, KV, hd, scale);
}

/* SwiGLU's backward into dF2 (gate) and dF3 (up), then a product each */
static void op_gate_up_backward(void *ctx, real *dn, real *dgate, real *dup, const real *dh,
				const real *gate, const real *up, const real *inp,
				const real *wgate, const real *wup, int N, int C, int F,
				enum model_act act)
{
	struct gpu_model *gm = ctx;
	size_t nF = (size_t)N * F * sizeof(real);

	zero(gm, gm->dF2, nF);
	zero(gm, gm->dF3, nF);
	swiglu_backward(gm, gm->dF2, gm->dF3, dh, gate, up, (size_t)N * F, act);
	matmul_backward(gm, dn, dgate, gm->dF2, inp, wgate, N, C, F);
	matmul_backward(gm, dn, dup, gm->dF3, inp, wup, N, C, F);
}

static void op_qkv_backward(void *ctx, real *dn, real *dwq, real *dwk, real *dwv, const real *dq,
			    const real *dk, const real *dv, const real *inp, const real *wq,
			    const real *wk, const real *wv, int N, int C, int Q, int K)
{
	matmul_backward(ctx, dn, dwq, dq, inp, wq, N, C, Q);
	matmul_backward(ctx, dn, dwk, dk, inp, wk, N, C, K);
	matmul_backward(ctx, dn, dwv, dv, inp, wv, N, C, K);
}

static void op_embed_backward(void *ctx, real *dembed, const real *dout, const int *tokens, int N,
			      int C)
{
	encoder_backward(ctx, dembed, dout, tokens, N, C);
}

static void op_mult_backward(void *ctx)
{
	struct gpu_model *gm = ctx;

	for (int i = 0; gm->m->eff && i < gm->m->nlinears; i++)
		if (gm->m->linears[i].mode != MULT_NONE)
			mult_backward(gm, i);
	for (int i = 0; !gm->m->keep_gain_grads && i < gm->m->nreparams; i++) {
		struct gk_sv a = sv_args(gm, i);
		LAUNCH(gm, sv_backward, a);
	}
}

static const struct model_ops gpu_ops = {
	.update_effective = op_update_effective,
	.embed = op_embed,
	.rmsnorm = op_rmsnorm,
	.layernorm = op_layernorm,
	.scale = op_scale,
	.softcap = op_softcap,
	.matmul = op_matmul,
	.copy = op_copy,
	.bias = op_bias,
	.rope = op_rope,
	.attention = op_attention,
	.residual = op_residual,
	.swiglu = op_swiglu,
	.swiglu_backward = op_swiglu_backward,
	.act = op_act,
	.act_backward = op_act_backward,
	.loss = op_loss,
	.zero = op_zero,
	.loss_backward = op_loss_backward,
	.matmul_backward = op_matmul_backward,
	.rmsnorm_backward = op_rmsnorm_backward,
	.layernorm_backward = op_layernorm_backward,
	.attention_backward = op_attention_backward,
	.gate_up_backward = op_gate_up_backward,
	.qkv_backward = op_qkv_backward,
	.embed_backward = op_embed_backward,
	.mult_backward = op_mult_backward,
};

/* the device's model as the step's back end */
static struct model_step gpu_step(struct gpu_model *gm)
{
	struct model_step st = {
		.ops = &gpu_ops, .ctx = gm, .c = &gm->m->c, .a = &gm->m->arch, .p = &gm->p, .g = &gm->d,
		.acts = gm->acts, .x_final = gm->x_final, .nf = gm->nf, .nf_rstd = gm->nf_rstd,
		.nf_mean = gm->nf_mean, .logits = gm->logits, .logits_tanh = gm->logits_tanh,
		.losses = gm->losses,
		.dnp_attn = gm->m->design.dnp[ARCH_SV_ATTN], .dnp_ffn = gm->m->design.dnp[ARCH_SV_FFN],
		.s = {.dres = gm->dres, .dn = gm->dn, .dF1 = gm->dF1, .dF2 = gm->dF2, .dF3 = gm->dF3,
		      .dq = gm->dq,
		      .dq2 = gm->dq2, .dk = gm->dk, .dk2 = gm->dk2, .dv = gm->dv},
	};
	return st;
}

static void forward(struct gpu_model *gm, const int *tokens, const int *targets, int B, int T)
{
	struct model_step st = gpu_step(gm);

	gm->cur_B = B;
	gm->cur_T = T;
	model_step_forward(&st, tokens, targets, B, T);
}

/* targets and tokens on the device */
static void backward(struct gpu_model *gm, const int *tokens, const int *targets, double loss_scale)
{
	struct model_step st = gpu_step(gm);

	if (gm->m->eff)
		zero(gm, gm->dw_eff, gm->m->eff_size * sizeof(real));
	model_step_backward(&st, tokens, targets, gm->cur_B, gm->cur_T, loss_scale);
}

/* ---- the optimizers, as optim.c's ---------------------------------------------------- */

static struct gk_opt opt_args(int64_t n)
{
	struct gk_opt a;

	memset(&a, 0, sizeof a);
	a.grid = gk_elems(n);
	a.n = n;
	return a;
}

/* X = NS5(G), G rows x cols, as optim_newton_schulz: on the transpose when
 * tall; work holds 3 r^2 + 2 rows cols reals. */
static void newton_schulz(struct gpu_model *gm, real *X, const real *G, int rows, int cols, real *work)
{
	int tr = rows > cols, r = tr ? cols : rows, n = tr ? rows : cols;
	real *A = work, *AA = A + (size_t)r * r, *Bm = AA + (size_t)r * r, *Y = Bm + (size_t)r * r,
	     *Xr = Y + (size_t)r * n;
	struct gk_opt a = opt_args((int64_t)r * n);
	struct gk_sum s = {
		.grid = gk_elems(1), .partial = gm->partials, .out = gm->ns_sumsq,
		.chunks = chunks_of((size_t)r * n)};

	if (tr) {
		a.out = Xr, a.x = G, a.rows = rows, a.cols = cols;
		LAUNCH(gm, transpose, a);
	} else {
		dcopy(gm, Xr, G, (size_t)r * n * sizeof(real));
	}
	need_partials(gm, (size_t)s.chunks);
	s.partial = gm->partials;
	sum_partial(gm, gm->partials, Xr, (size_t)r * n, 1);
	LAUNCH(gm, sum_finish, s);
	a = opt_args((int64_t)r * n);
	a.out = Xr, a.sumsq = gm->ns_sumsq;
	LAUNCH(gm, ns_normalize, a);
	for (int step = 0; step < 5; step++) {
		/* A = X X^T; B = b A + c A A; X = a X + B X */
		mm(gm, 0, 1, r, r, n, 1, Xr, n, 0, Xr, n, 0, 0, A, r, 0, 1, 0);
		mm(gm, 0, 0, r, r, r, 1, A, r, 0, A, r, 0, 0, AA, r, 0, 1, 0);
		a = opt_args((int64_t)r * r);
		a.out = Bm, a.x = A, a.x2 = AA;
		LAUNCH(gm, ns_poly, a);
		dcopy(gm, Y, Xr, (size_t)r * n * sizeof(real));
		mm(gm, 0, 0, r, n, r, 1, Bm, r, 0, Y, n, 0, ELEM_NS_A, Xr, n, 0, 1, 0);
	}
	if (tr) {
		a = opt_args((int64_t)r * n);
		a.out = X, a.x = Xr, a.rows = r, a.cols = n;
		LAUNCH(gm, transpose, a);
	} else {
		dcopy(gm, X, Xr, (size_t)r * n * sizeof(real));
	}
}

static void apply_update(struct gpu_model *gm, real *p, const real *u, size_t n,
			 const struct optim_plan *pl)
{
	struct gk_opt a = opt_args((int64_t)n);

	a.p = p, a.x = u, a.decay = elem_wd_decay(pl->mode, pl->lr, pl->wd), a.lr = pl->lr;
	LAUNCH(gm, apply_update, a);
}

/* an element-wise optimizer's rule (AdamW and its kin); Adam-mini's
 * blocks' v first (optim.c's elem_tensor) */
static void elem_tensor(struct gpu_model *gm, const struct optim *o, real *p, const real *g,
			float *m, float *v, const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	int64_t n = t->numel, bn = pl->rule == ELEM_RULE_ADAM_MINI ? optim_block_numel(t) : 1;
	struct gk_elem_rule a = {
		.grid = gk_elems(n), .p = p, .m = m, .v = v, .g = g, .n = n, .block_numel = bn,
		.clip = pl->clip, .beta2 = o->cfg.beta2,
		.c = elem_rule_coef(pl->rule, o->cfg.beta1, o->cfg.beta2, o->cfg.eps, o->t, pl->lr,
				    elem_wd_decay(pl->mode, pl->lr, pl->wd))};

	if (pl->rule == ELEM_RULE_ADAM_MINI) {
		struct gk_elem_rule b = a;
		b.grid = gk_rows(n / bn, bn);
		LAUNCH(gm, elem_block_v, b);
	}
	LAUNCH(gm, elem_rule, a);
}

/* Muon: momentum, Nesterov, NS5, sqrt(max(1, rows/cols)), the update */
static void muon_tensor(struct gpu_model *gm, const struct optim *o, real *p, const real *g,
			float *buf, const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	int rows = (int)t->shape[0], cols = (int)t->shape[1];
	size_t n = (size_t)t->numel;
	real *geff = gm->work + gm->work_size - 2 * n, *u = geff + n;
	struct gk_opt a = opt_args((int64_t)n);

	a.out = geff, a.buf = buf, a.x = g, a.clip = pl->clip, a.mom = o->cfg.momentum;
	LAUNCH(gm, muon_momentum, a);
	newton_schulz(gm, u, geff, rows, cols, gm->work);
	a = opt_args((int64_t)n);
	a.out = u, a.scale = pl->scale;
	LAUNCH(gm, scale, a);
	apply_update(gm, p, u, n, pl);
}

/* Scion: momentum, then each layer's LMO (optim.c's scion_tensor), the update */
static void scion_tensor(struct gpu_model *gm, const struct optim *o, real *p, const real *g,
			 float *mbuf, const struct sw_tensor_info *t, const struct optim_plan *pl)
{
	size_t n = (size_t)t->numel;
	real *mr = gm->work + gm->work_size - 2 * n, *u = mr + n;
	struct gk_opt a = opt_args((int64_t)n);

	a.out = mr, a.buf = mbuf, a.x = g, a.clip = pl->clip, a.mom = o->cfg.momentum;
	LAUNCH(gm, scion_momentum, a);
	a = opt_args((int64_t)n);
	if (pl->lmo == OPTIM_LMO_ORTHO) {
		int rows = (int)t->shape[0], cols = (int)t->shape[1];
		newton_schulz(gm, u, mr, rows, cols, gm->work);
		a.out = u, a.scale = pl->scale;
		LAUNCH(gm, scale, a);
	} else if (pl->lmo == OPTIM_LMO_ROWS) {
		a.grid = gk_rows(t->shape[0], t->shape[1]);
		a.out = u, a.x = mr, a.rows = (int)t->shape[0], a.cols = (int)t->shape[1];
		LAUNCH(gm, scion_rows, a);
	} else {
		a.out = u, a.x = mr, a.scale = pl->scale;
		LAUNCH(gm, scion_sign, a);
	}
	apply_update(gm, p, u, n, pl);
}

/* ---- the entry points --------------------------------------------------------------- */

/* The optimizer's work and the gradient norm's partial sums, from the
 * tensors' shapes (as optim_init sizes its work). */
static void alloc_optim(struct gpu_model *gm)
{
	const struct model *m = gm->m;
	int64_t maxr = 1, maxn = 1;

	gm->norm_chunk = calloc((size_t)m->ntensors + 1, sizeof *gm->norm_chunk);
	if (!gm->norm_chunk) {
		struct sw_err e;
		note(gm, sw_fail(&e, SW_ESOFTWARE, "out of memory"), &e);
		return;
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct sw_tensor_info *t = &m->tensors[i].info;
		gm->norm_chunk[i] = gm->norm_chunks;
		gm->norm_chunks += (size_t)chunks_of(m->tensors[i].numel);
		if (t->kind == SW_KIND_MATRIX) {
			int64_t r = t->shape[0] < t->shape[1] ? t->shape[0] : t->shape[1];
			maxr = r > maxr ? r : maxr;
			maxn = t->numel > maxn ? t->numel : maxn;
		}
	}
	gm->work_size = (size_t)(3 * maxr * maxr + 4 * maxn);
	gm->work = dalloc(gm, gm->work_size * sizeof(real));
	gm->ns_sumsq = dalloc(gm, sizeof(double));
	/* the partials also hold a scalar multiplier's row sums */
	for (int i = 0; i < m->nlinears; i++)
		maxr = m->linears[i].dout > maxr ? m->linears[i].dout : maxr;
	need_partials(gm, gm->norm_chunks > (size_t)maxr ? gm->norm_chunks : (size_t)maxr);
}

/* gpumodel_open on device g (NULL: open dev's, and close it at the end) */
static int open_on(struct gpu_model **gmp, struct gpu *g, enum sw_device dev,
		   enum sw_precision prec, const struct model *m, const struct optim *o, int B,
		   int T, struct sw_err *err)
{
	struct gpu_model *gm = calloc(1, sizeof *gm);
	size_t np = m->nparams * sizeof(real), ne = m->eff_size * sizeof(real);
	int L = (int)m->c.n_layers, rc;

	/* the device has no experts' kernels yet (step.h's moe operations) */
	if (m->c.n_experts) {
		free(gm);
		return sw_fail(err, SW_EUSAGE, "a mixture of experts on the device is not built yet");
	}

	*gmp = NULL;
	if (!gm)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	gm->g = g;
	gm->owns_g = !g;
	rc = g ? SW_OK : dev == SW_DEVICE_EMU ? gpu_emu_open(&gm->g, err) : gpu_cuda_open(&gm->g, err);
	if (rc) {
		free(gm);
		return rc;
	}
	gm->m = m;
	gm->bf16 = prec == SW_PRECISION_BF16;
	note(gm, gm->g->ops->info(gm->g, &gm->info, &gm->err), &gm->err);
	gm->pl = calloc((size_t)L, sizeof *gm->pl);
	gm->dl = calloc((size_t)L, sizeof *gm->dl);
	gm->acts = calloc((size_t)L, sizeof *gm->acts);
	if (!gm->pl || !gm->dl || !gm->acts) {
		gpumodel_close(gm);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	gm->params = dalloc(gm, np);
	gm->grads = dalloc(gm, np);
	if (o) {                        /* a GNB estimate needs no moments */
		gm->mom_m = dalloc(gm, np);
		gm->mom_v = dalloc(gm, (optim_v_count(o) ? optim_v_count(o) : 1) * sizeof(float));
	}
	if (m->eff) {
		gm->w_eff = dalloc(gm, ne);
		gm->dw_eff = dalloc(gm, ne);
	}
	alloc_optim(gm);
	upload(gm, gm->params, m->params, np);
	if (o) {
		upload(gm, gm->mom_m, o->m, np);
		upload(gm, gm->mom_v, o->v, optim_v_count(o) * sizeof(float));
	}
	zero(gm, gm->grads, np);
	alloc_acts(gm, B, T);
	map_ptrs(gm, &gm->p, gm->pl, &m->p);
	map_ptrs(gm, &gm->d, gm->dl, &m->g);
	if ((rc = result(gm, err))) {
		gpumodel_close(gm);
		return rc;
	}
	*gmp = gm;
	return SW_OK;
}

int gpumodel_open(struct gpu_model **gmp, enum sw_device dev, enum sw_precision prec,
		  const struct model *m, const struct optim *o, int B, int T, struct sw_err *err)
{
	return open_on(gmp, NULL, dev, prec, m, o, B, T, err);
}

void gpumodel_close(struct gpu_model *gm)
{
	if (!gm)
		return;
	gpumodel_close(gm->tangent);
	if (gm->g) {
		void *blocks[] = {
			gm->params, gm->grads, gm->w_eff, gm->dw_eff, gm->mom_m, gm->mom_v, gm->acts_block,
			gm->tok, gm->tgt, gm->partials, gm->ns_sumsq, gm->work, gm->probs, gm->u,
			gm->labels, gm->h, gm->dlogits
		};
		for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
			dfree(gm, blocks[i]);
		if (gm->owns_g)
			gpu_close(gm->g);
	}
	free(gm->pl);
	free(gm->dl);
	free(gm->acts);
	free(gm->host_losses);
	free(gm->host_partials);
	free(gm->norm_chunk);
	free(gm);
}

const char *gpumodel_device_name(const struct gpu_model *gm)
{
	return gm->info.name;
}

int gpumodel_forward(struct gpu_model *gm, const int *tokens, const int *targets, int B, int T,
		     double *loss, struct sw_err *err)
{
	size_t N = (size_t)B * T;

	alloc_acts(gm, B, T);
	upload(gm, gm->tok, tokens, N * sizeof(int));
	if (targets)
		upload(gm, gm->tgt, targets, N * sizeof(int));
	forward(gm, gm->tok, targets ? gm->tgt : NULL, B, T);
	if (targets) {
		download(gm, gm->host_losses, gm->losses, N * sizeof(real));
		if (!failed(gm))
			*loss = model_mean_loss(gm->host_losses, N);
	}
	return result(gm, err);
}

int gpumodel_zero_grad(struct gpu_model *gm, struct sw_err *err)
{
	zero(gm, gm->grads, gm->m->nparams * sizeof(real));
	return result(gm, err);
}

int gpumodel_backward(struct gpu_model *gm, const int *tokens, const int *targets, double loss_scale,
		      struct sw_err *err)
{
	size_t N = (size_t)gm->cur_B * gm->cur_T;

	upload(gm, gm->tok, tokens, N * sizeof(int));
	upload(gm, gm->tgt, targets, N * sizeof(int));
	backward(gm, gm->tok, gm->tgt, loss_scale);
	return result(gm, err);
}

/* Per tensor but the multipliers, the sum of squares in chunks; the
 * chunks added on the host, per tensor, then the tensors. */
int gpumodel_grad_norm(struct gpu_model *gm, double *norm, struct sw_err *err)
{
	const struct model *m = gm->m;
	double s = 0;

	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].info.block != SW_BLOCK_MULT)
			sum_partial(gm, gm->partials + gm->norm_chunk[i], gm->grads + m->tensors[i].offset,
				    m->tensors[i].numel, 1);
	download(gm, gm->host_partials, gm->partials, gm->norm_chunks * sizeof(double));
	for (int i = 0; !failed(gm) && i < m->ntensors; i++) {
		double ts = 0;
		if (m->tensors[i].info.block == SW_BLOCK_MULT)
			continue;
		for (int64_t k = 0; k < chunks_of(m->tensors[i].numel); k++)
			ts += gm->host_partials[gm->norm_chunk[i] + (size_t)k];
		s += ts;
	}
	*norm = sqrt(s);
	return result(gm, err);
}

int gpumodel_step(struct gpu_model *gm, struct optim *o, int64_t step, double clip_scale,
		  struct sw_err *err)
{
	const struct model *m = gm->m;
	struct sw_err e;

	if (!gm->mom_m && !failed(gm))
		note(gm, sw_fail(&e, SW_ESOFTWARE, "cuda: an optimizer step on a model opened without one"), &e);
	if (failed(gm))
		return result(gm, err);
	o->t++;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		const struct sw_tensor_info *t = &mt->info;
		real *p = gm->params + mt->offset;
		const real *g = gm->grads + mt->offset;
		struct optim_plan pl = optim_tensor_plan(&o->cfg, t, step, clip_scale);

		if (mt->derived)        /* a gain its direction and magnitude give */
			continue;
		switch (pl.update) {
		case OPTIM_UPDATE_SCION:
			scion_tensor(gm, o, p, g, gm->mom_m + mt->offset, t, &pl);
			break;
		case OPTIM_UPDATE_MUON:
			muon_tensor(gm, o, p, g, gm->mom_m + mt->offset, t, &pl);
			break;
		case OPTIM_UPDATE_ELEM:
			elem_tensor(gm, o, p, g, gm->mom_m + mt->offset, gm->mom_v + o->voff[i], t,
				    &pl);
			break;
		}
	}
	return result(gm, err);
}

int gpumodel_update_effective(struct gpu_model *gm, struct sw_err *err)
{
	update_effective(gm);
	return result(gm, err);
}

int gpumodel_download(struct gpu_model *gm, struct model *m, struct optim *o, int grads,
		      struct sw_err *err)
{
	size_t np = m->nparams * sizeof(real);

	download(gm, m->params, gm->params, np);
	if (grads)
		download(gm, m->grads, gm->grads, np);
	if (o && gm->mom_m) {
		download(gm, o->m, gm->mom_m, np);
		download(gm, o->v, gm->mom_v, optim_v_count(o) * sizeof(float));
	}
	return result(gm, err);
}

int gpumodel_download_at(struct gpu_model *gm, real *host_ptr, size_t n, struct sw_err *err)
{
	real *d = dev_of(gm, host_ptr);
	struct sw_err e;

	if (!d || !dev_of(gm, host_ptr + n - 1))
		note(gm, sw_fail(&e, SW_ESOFTWARE, "cuda: a download outside the model's blocks"), &e);
	else
		download(gm, host_ptr, d, n * sizeof(real));
	return result(gm, err);
}

int gpumodel_gnb(struct gpu_model *gm, const int *tokens, int B, int T, int mb, int draws,
		 struct sw_rng *r, float *h, int *labels, int keep_probs, struct sw_err *err)
{
	const struct model *m = gm->m;
	int V = (int)m->c.vocab_size, nmb = B / mb, Nmb = mb * T, N = B * T;
	int keep = nmb == 1 && keep_probs;
	double *u = malloc((size_t)Nmb * sizeof *u);
	struct sw_err e;

	if (!u)
		note(gm, sw_fail(&e, SW_ESOFTWARE, "out of memory"), &e);
	if (B % mb)
		note(gm, sw_fail(&e, SW_EUSAGE, "batch of %d sequences is not a multiple of %d", B, mb), &e);
	alloc_acts(gm, mb, T);
	if (!gm->h)
		gm->h = dalloc(gm, m->nparams * sizeof(float));
	dfree(gm, gm->u);
	dfree(gm, gm->labels);
	gm->u = dalloc(gm, (size_t)Nmb * sizeof(double));
	gm->labels = dalloc(gm, (size_t)Nmb * sizeof(int));
	if (keep && !gm->probs)
		gm->probs = dalloc(gm, (size_t)Nmb * V * sizeof(real));
	upload(gm, gm->h, h, m->nparams * sizeof(float));
	/* one micro-batch: forward once and restore its softmax for each draw
	 * (the backward pass overwrites it, the activations stay) */
	if (keep) {
		upload(gm, gm->tok, tokens, (size_t)Nmb * sizeof(int));
		forward(gm, gm->tok, NULL, mb, T);
	}
	for (int d = 0; d < draws && !failed(gm); d++) {
		zero(gm, gm->grads, m->nparams * sizeof(real));
		for (int k = 0; k < nmb && !failed(gm); k++) {
			if (keep) {
				if (d == 0)
					dcopy(gm, gm->probs, gm->logits, (size_t)Nmb * V * sizeof(real));
				else
					dcopy(gm, gm->logits, gm->probs, (size_t)Nmb * V * sizeof(real));
			} else {
				upload(gm, gm->tok, tokens + (size_t)k * Nmb, (size_t)Nmb * sizeof(int));
				forward(gm, gm->tok, NULL, mb, T);
			}
			/* a uniform per position, drawn as gnb_sample_labels draws them */
			for (int n = 0; n < Nmb; n++)
				u[n] = rng_uniform(r);
			upload(gm, gm->u, u, (size_t)Nmb * sizeof(double));
			LAUNCH(gm, sample_labels, (struct gk_sample){
				.grid = gk_elems(Nmb), .labels = gm->labels, .p = gm->logits, .u = gm->u,
				.rows = Nmb, .V = V});
			if (labels)
				download(gm, labels + (size_t)d * N + (size_t)k * Nmb, gm->labels,
					 (size_t)Nmb * sizeof(int));
			/* this micro-batch's mean loss is Nmb/N of the batch's mean */
			backward(gm, gm->tok, gm->labels, (double)Nmb / N);
		}
		/* h += N g^2 / draws */
		LAUNCH(gm, gnb_square, (struct gk_square){
			.grid = gk_elems((int64_t)m->nparams), .h = gm->h, .g = gm->grads,
			.n = (int64_t)m->nparams, .scale = (double)N / draws});
	}
	download(gm, h, gm->h, m->nparams * sizeof(float));
	free(u);
	return result(gm, err);
}

void gpumodel_view(const struct gpu_model *gm, struct gpumodel_view *v)
{
	v->acts = gm->acts;
	v->x_final = gm->x_final;
	v->w = gm->pl;
	v->params = gm->params;
}

int gpumodel_error(const struct gpu_model *gm, struct sw_err *err)
{
	return result(gm, err);
}

/* ---- the R-operator: step.c's tangent sequence over the device's operations ------------ */

/* the tangents' operations (step.h's struct model_rop_ops), each as
 * modelhvp.c's of the same name; ctx is the primal model, its tangent
 * model gm->tangent holds v, H v and the tangents */
static void rop_op_layer_views(void *ctx, int l, struct layer_ptrs *rw, struct layer_ptrs *rg,
			       struct layer_ptrs *eg)
{
	struct gpu_model *gm = ctx;
	const struct model *m = gm->m;
	struct layer_ptrs hw, hg, he;

	/* the host model's views, then the device's: v's in the tangent's
	 * blocks, dL/dW_eff in the primal's */
	model_rop_views(m, gm->want, &m->p, &m->g, l, &hw, &hg, &he);
	map_layer(gm->tangent, rw, &hw);
	map_layer(gm->tangent, rg, &hg);
	map_layer(gm, eg, &he);
}

static void rop_op_effective(void *ctx)
{
	struct gpu_model *gm = ctx;
	const struct model *m = gm->m;

	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		struct gk_mult a, r;
		if (l->mode == MULT_NONE || !model_rop_wanted(m, gm->want, l->tensor))
			continue;
		a = mult_args(gm, i);
		r = mult_args(gm->tangent, i);
		a.weff = r.weff;
		a.rw = r.w;
		a.rmult = r.mult;
		a.rcol = r.col;
		a.grid = gk_elems(a.dout * a.din);
		LAUNCH(gm, rop_mult_apply, a);
	}
}

static void rop_op_rmsnorm(void *ctx, real *ry, real *rrstd, const real *inp, const real *rinp,
			   const real *gain, const real *rgain, const real *rstd, int64_t rows, int n)
{
	LAUNCH((struct gpu_model *)ctx, rop_rmsnorm_forward, (struct gk_rop_rmsnorm){
		.grid = gk_rows(rows, n), .out = ry, .rrstd = rrstd, .inp = inp, .rinp = rinp,
		.gain = gain, .rgain = rgain, .rstd = rstd, .rows = rows, .C = n});
}

/* R{y} = R{x} W^T + x R{W}^T */
static void rop_op_matmul(void *ctx, real *ry, const real *inp, const real *rinp, const real *w,
			  const real *rw, int N, int din, int dout)
{
	struct gpu_model *gm = ctx;

	mm(gm, 0, 1, N, dout, din, 1, rinp, din, 0, w, din, 0, 0, ry, dout, 0, 1, gm->bf16);
	if (rw)
		mm(gm, 0, 1, N, dout, din, 1, inp, din, 0, rw, din, 0, 1, ry, dout, 0, 1, gm->bf16);
}

/* Where the tangent keeps R{S}, the pre-cap scores' tangent, for the
 * layer whose R{P} is ratt: its own att_tanh (the tangent's tanh is the
 * primal's) */
static real *rop_scores(const struct gpu_model *gm, const real *ratt)
{
	for (int l = 0; l < gm->m->c.n_layers; l++)
		if (gm->tangent->acts[l].att == ratt)
			return gm->tangent->acts[l].att_tanh;
	return NULL;
}

/* per head, in attention_forward's blocks: R{S} = scale (R{Q} K^T + Q
 * R{K}^T); through a soft-cap R{S} kept (rop_scores) and times 1 -
 * tanh^2; R{P} = P (R{S} - rowsum(P R{S})), softmax_backward's form;
 * R{O} = R{P} V + P R{V} */
static void rop_op_attention(void *ctx, real *rout, real *ratt, const real *att,
			     const real *att_tanh, const real *q, const real *k, const real *v,
			     const real *rq, const real *rk, const real *rv, int B, int T, int H,
			     int KV, int hd, real scale, real cap)
{
	struct gpu_model *gm = ctx;
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T), r0, r1;
	int64_t TT = (int64_t)T * T, sq = (int64_t)T * Q, sk = (int64_t)T * K;

	for (int h = 0; h < H; h++)
		for (int i = 0; i < nb; i++) {
			size_t qo = (size_t)h * hd, ko = (size_t)(h / group) * hd;
			real *s = ratt + h * TT;
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 1, r1 - r0, r1, hd, scale, rq + (size_t)r0 * Q + qo, Q, sq, k + ko, K, sk, 0,
			   s + (int64_t)r0 * T, T, H * TT, B, gm->bf16);
			mm(gm, 0, 1, r1 - r0, r1, hd, scale, q + (size_t)r0 * Q + qo, Q, sq, rk + ko, K, sk, 1,
			   s + (int64_t)r0 * T, T, H * TT, B, gm->bf16);
		}
	if (cap > 0) {
		dcopy(gm, rop_scores(gm, ratt), ratt, (size_t)B * H * TT * sizeof(real));
		cap_values(gm, ratt, (real *)att_tanh, (size_t)B * H * TT, T, cap, 1);
	}
	LAUNCH(gm, softmax_backward, (struct gk_softmax_back){
		.grid = gk_rows((int64_t)B * H * T, T), .d = ratt, .p = att, .rows = (int64_t)B * H * T,
		.p_bstride = TT, .d_bstride = TT, .T = T, .scale = 1});
	for (int h = 0; h < H; h++)
		for (int i = 0; i < nb; i++) {
			size_t qo = (size_t)h * hd, ko = (size_t)(h / group) * hd;
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, ratt + h * TT + (int64_t)r0 * T, T, H * TT, v + ko, K,
			   sk, 0, rout + (size_t)r0 * Q + qo, Q, sq, B, gm->bf16);
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, att + h * TT + (int64_t)r0 * T, T, H * TT, rv + ko, K,
			   sk, 1, rout + (size_t)r0 * Q + qo, Q, sq, B, gm->bf16);
		}
}

static void rop_op_swiglu(void *ctx, real *rh, const real *gate, const real *up, const real *rgate,
			  const real *rup, size_t n, enum model_act act)
{
	LAUNCH((struct gpu_model *)ctx, rop_swiglu_forward, (struct gk_rop_pointwise){
		.grid = gk_elems((int64_t)n), .out = rh, .gate = gate, .up = up, .rgate = rgate,
		.rup = rup, .n = (int64_t)n, .act = (int)act});
}

/* GPT-2's MLP: R{h} = act'(x) R{x} */
static void rop_op_act(void *ctx, real *rh, const real *x, const real *rx, size_t n,
		       enum model_act act)
{
	LAUNCH((struct gpu_model *)ctx, rop_act_forward, (struct gk_rop_pointwise){
		.grid = gk_elems((int64_t)n), .out = rh, .gate = x, .rgate = rx, .n = (int64_t)n,
		.act = (int)act});
}

static void rop_op_layernorm(void *ctx, real *ry, real *rmean, real *rrstd, const real *inp,
			     const real *rinp, const real *gain, const real *rgain, const real *rbias,
			     const real *mean, const real *rstd, int64_t rows, int n)
{
	LAUNCH((struct gpu_model *)ctx, rop_layernorm_forward, (struct gk_rop_layernorm){
		.grid = gk_rows(rows, n), .out = ry, .rmean = rmean, .rrstd = rrstd, .inp = inp,
		.rinp = rinp, .gain = gain, .rgain = rgain, .rbias = rbias, .mean = mean, .rstd = rstd,
		.rows = rows, .C = n});
}

/* the final logits' cap: R{x_capped} = (1 - t^2) R{x} in place */
static void rop_op_softcap(void *ctx, real *rx, const real *t, size_t n, real cap)
{
	cap_values(ctx, rx, (real *)t, n, 0, cap, 1);
}

static void rop_op_softcap_backward(void *ctx, real *rdx, const real *dcapped, const real *t,
				    const real *rx, size_t n, real cap)
{
	LAUNCH((struct gpu_model *)ctx, rop_softcap_backward, (struct gk_softcap){
		.grid = gk_elems((int64_t)n), .x = rdx, .th = (real *)t, .dy = dcapped, .rx = rx,
		.n = (int64_t)n, .cap = cap});
}

static void rop_op_loss_backward(void *ctx, real *rz, const real *probs, int N, int V, real scale)
{
	LAUNCH((struct gpu_model *)ctx, xent_rop, (struct gk_xent_rop){
		.grid = gk_rows(N, V), .rz = rz, .p = probs, .rows = N, .V = V, .scale = scale});
}

/* R{dx} += R{dy} W + dy R{W}; R{dW} += R{dy}^T x + dy^T R{x} */
static void rop_op_matmul_backward(void *ctx, real *rdinp, real *rdw, const real *dout,
				   const real *rdout, const real *inp, const real *rinp,
				   const real *w, const real *rw, int N, int din, int dout_)
{
	struct gpu_model *gm = ctx;

	if (rdinp) {
		mm(gm, 0, 0, N, din, dout_, 1, rdout, dout_, 0, w, din, 0, 1, rdinp, din, 0, 1, gm->bf16);
		if (dout && rw)
			mm(gm, 0, 0, N, din, dout_, 1, dout, dout_, 0, rw, din, 0, 1, rdinp, din, 0, 1,
			   gm->bf16);
	}
	if (rdw) {
		mm(gm, 1, 0, dout_, din, N, 1, rdout, dout_, 0, inp, din, 0, 1, rdw, din, 0, 1, gm->bf16);
		if (dout)
			mm(gm, 1, 0, dout_, din, N, 1, dout, dout_, 0, rinp, din, 0, 1, rdw, din, 0, 1,
			   gm->bf16);
	}
}

/* R{dgain} += sum_n R{dy} xhat + dy R{xhat}, R{dbias} += sum_n R{dy}
 * (column sums); R{dx} += ... */
static void rop_op_layernorm_backward(void *ctx, real *rdinp, real *rdgain, real *rdbias,
				      const real *dout, const real *rdout, const real *inp,
				      const real *rinp, const real *gain, const real *rgain,
				      const real *mean, const real *rstd, const real *rmean,
				      const real *rrstd, int64_t rows, int n)
{
	struct gpu_model *gm = ctx;
	struct gk_rop_layernorm a = {
		.grid = gk_rows(rows, n), .out = rdinp, .rmean = (real *)rmean, .rrstd = (real *)rrstd,
		.inp = inp, .rinp = rinp, .dout = dout, .rdout = rdout, .gain = gain, .rgain = rgain,
		.mean = mean, .rstd = rstd, .rows = rows, .C = n};

	if (rdgain)
		colsum(gm, (struct gk_colsum){.out = rdgain, .a = rdout, .b = inp, .rstd = rstd,
					      .mean = mean, .c = dout, .d = rinp, .rrstd = rrstd,
					      .rmean = rmean, .rows = rows, .C = n}, 1);
	if (rdbias)
		colsum(gm, (struct gk_colsum){.out = rdbias, .a = rdout, .rows = rows, .C = n}, 0);
	if (!rdinp)
		return;
	a.grid.shm += 2;        /* four row results */
	LAUNCH(gm, rop_layernorm_backward, a);
}

static void rop_op_rmsnorm_backward(void *ctx, real *rdinp, real *rdgain, const real *dout,
				    const real *rdout, const real *inp, const real *rinp,
				    const real *gain, const real *rgain, const real *rstd,
				    const real *rrstd, int64_t rows, int n)
{
	struct gpu_model *gm = ctx;

	if (rdgain)
		colsum(gm, (struct gk_colsum){.out = rdgain, .a = rdout, .b = inp, .rstd = rstd, .c = dout,
					      .d = rinp, .rrstd = rrstd, .rows = rows, .C = n}, 1);
	LAUNCH(gm, rop_rmsnorm_backward, (struct gk_rop_rmsnorm){
		.grid = gk_rows(rows, n), .out = rdinp, .rrstd = (real *)rrstd, .inp = inp,
		.rinp = rinp, .dout = dout, .rdout = rdout, .gain = gain, .rgain = rgain, .rstd = rstd,
		.rows = rows, .C = n});
}

/*
 * Per head h (batched over b), in attention_backward's blocks, with dP in
 * the primal's (B, T, T) scratch and R{dP} in the tangent's:
 * dP = dO V^T, dV += P^T dO, R{dV} += R{P}^T dO + P^T R{dO},
 * R{dP} = R{dO} V^T + dO R{V}^T; then dS and R{dS} (rop_softmax_backward);
 * R{dQ} += R{dS} K + dS R{K}, R{dK} += R{dS}^T Q + dS^T R{Q}, dQ += dS K,
 * dK += dS^T Q (dq, dk, dv NULL: not those three). Gauss-Newton (dout
 * NULL): the R{dO} terms only.
 */
static void rop_op_attention_backward(void *ctx, real *dq, real *dk, real *dv, real *rdq,
				      real *rdk, real *rdv, const real *dout, const real *rdout,
				      const real *q, const real *k, const real *v, const real *rq,
				      const real *rk, const real *rv, const real *att,
				      const real *ratt, const real *att_tanh, int B, int T, int H,
				      int KV, int hd, real scale, real cap)
{
	struct gpu_model *gm = ctx;
	real *ds = gm->ds, *rds = gm->tangent->ds;
	const real *th = cap > 0 ? att_tanh : NULL, *rs = cap > 0 ? rop_scores(gm, ratt) : NULL;
	int Q = H * hd, K = KV * hd, group = H / KV, nb = model_causal_nblocks(T), r0, r1;
	int64_t TT = (int64_t)T * T, sq = (int64_t)T * Q, sk = (int64_t)T * K;
	int bf = gm->bf16;

	for (int h = 0; h < H; h++) {
		size_t qo = (size_t)h * hd, ko = (size_t)(h / group) * hd;
		const real *ph = att + h * TT, *rph = ratt + h * TT;

		for (int i = 0; i < nb; i++) {
			size_t dvo;
			model_causal_block(T, nb, i, &r0, &r1);
			dvo = ko + (size_t)r0 * K;   /* dV's rows r0.. of kv head g */
			if (dout) {
				mm(gm, 0, 1, r1 - r0, r1, hd, 1, dout + qo + (size_t)r0 * Q, Q, sq, v + ko, K,
				   sk, 0, ds + (size_t)r0 * T, T, TT, B, bf);
				if (dv)
					mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ph + (size_t)r0 * T + r0, T,
					   H * TT, dout + qo + (size_t)r0 * Q, Q, sq, 1, dv + dvo, K, sk, B, bf);
				mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, rph + (size_t)r0 * T + r0, T, H * TT,
				   dout + qo + (size_t)r0 * Q, Q, sq, 1, rdv + dvo, K, sk, B, bf);
			}
			mm(gm, 0, 1, r1 - r0, r1, hd, 1, rdout + qo + (size_t)r0 * Q, Q, sq, v + ko, K, sk,
			   0, rds + (size_t)r0 * T, T, TT, B, bf);
			if (dout)
				mm(gm, 0, 1, r1 - r0, r1, hd, 1, dout + qo + (size_t)r0 * Q, Q, sq, rv + ko, K,
				   sk, 1, rds + (size_t)r0 * T, T, TT, B, bf);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ph + (size_t)r0 * T + r0, T, H * TT,
			   rdout + qo + (size_t)r0 * Q, Q, sq, 1, rdv + dvo, K, sk, B, bf);
		}
		if (dout)
			LAUNCH(gm, rop_softmax_backward, (struct gk_rop_softmax_back){
				.grid = gk_rows((int64_t)B * T, T), .d = ds, .rd = rds, .p = ph, .rp = rph,
				.th = th ? th + h * TT : NULL, .rs = rs ? rs + h * TT : NULL,
				.rows = (int64_t)B * T, .p_bstride = H * TT, .d_bstride = TT, .T = T,
				.scale = scale, .cap = cap});
		else
			LAUNCH(gm, softmax_backward, (struct gk_softmax_back){
				.grid = gk_rows((int64_t)B * T, T), .d = rds, .p = ph,
				.th = th ? th + h * TT : NULL, .rows = (int64_t)B * T,
				.p_bstride = H * TT, .d_bstride = TT, .T = T, .scale = scale});
		for (int i = 0; i < nb; i++) {
			model_causal_block(T, nb, i, &r0, &r1);
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, rds + (size_t)r0 * T, T, TT, k + ko, K, sk, 1,
			   rdq + qo + (size_t)r0 * Q, Q, sq, B, bf);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, rds + (size_t)r0 * T + r0, T, TT,
			   q + qo + (size_t)r0 * Q, Q, sq, 1, rdk + ko + (size_t)r0 * K, K, sk, B, bf);
			if (!dout)
				continue;
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, ds + (size_t)r0 * T, T, TT, rk + ko, K, sk, 1,
			   rdq + qo + (size_t)r0 * Q, Q, sq, B, bf);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ds + (size_t)r0 * T + r0, T, TT,
			   rq + qo + (size_t)r0 * Q, Q, sq, 1, rdk + ko + (size_t)r0 * K, K, sk, B, bf);
			if (!dq)
				continue;
			mm(gm, 0, 0, r1 - r0, hd, r1, 1, ds + (size_t)r0 * T, T, TT, k + ko, K, sk, 1,
			   dq + qo + (size_t)r0 * Q, Q, sq, B, bf);
			mm(gm, 1, 0, r1 - r0, hd, T - r0, 1, ds + (size_t)r0 * T + r0, T, TT,
			   q + qo + (size_t)r0 * Q, Q, sq, 1, dk + ko + (size_t)r0 * K, K, sk, B, bf);
		}
	}
}

static void rop_op_swiglu_backward(void *ctx, real *rdgate, real *rdup, const real *dh,
				   const real *rdh, const real *gate, const real *up,
				   const real *rgate, const real *rup, size_t n, enum model_act act)
{
	LAUNCH((struct gpu_model *)ctx, rop_swiglu_backward, (struct gk_rop_pointwise){
		.grid = gk_elems((int64_t)n), .out = rdgate, .out2 = rdup, .dh = dh, .rdh = rdh,
		.gate = gate, .up = up, .rgate = rgate, .rup = rup, .n = (int64_t)n, .act = (int)act});
}

/* R{dx} += act'(x) R{dh} + act''(x) R{x} dh (dh NULL: Gauss-Newton) */
static void rop_op_act_backward(void *ctx, real *rdx, const real *dh, const real *rdh,
				const real *x, const real *rx, size_t n, enum model_act act)
{
	LAUNCH((struct gpu_model *)ctx, rop_act_backward, (struct gk_rop_pointwise){
		.grid = gk_elems((int64_t)n), .out = rdx, .dh = dh, .rdh = rdh, .gate = x, .rgate = rx,
		.n = (int64_t)n, .act = (int)act});
}

/* one term of R{} of the multipliers' backward: the primal kernel k on
 * a, whose outputs are the tangent's (r's) */
static void rop_mult_term(struct gpu_model *gm, enum gk_id k, struct gk_mult a,
			  const struct gk_mult *r)
{
	struct sw_err e;

	a.dw = r->dw;
	a.dmult = r->dmult;
	a.dcol = r->dcol;
	a.grid = gk_elems(k == GK_ID_mult_dw ? a.dout * a.din : k == GK_ID_mult_dcol ? a.din : a.dout);
	if (!failed(gm))
		note(gm, gm->g->ops->launch(gm->g, k, &a, &e), &e);
	if (k == GK_ID_mult_drow && a.mode == GK_MULT_SCALAR) {
		a.grid = gk_elems(1);
		LAUNCH(gm, mult_dscalar, a);
	}
}

/*
 * R{} of mult_backward as the primal kernels' sum over its terms (each
 * linear in what it multiplies): R{dW} = R{dW_eff} row col + dW_eff
 * (R{row} col + row R{col}); R{drow} = sum_j (R{dW_eff} W + dW_eff R{W})
 * col + dW_eff W R{col}; R{dcol} the same with row for col.
 */
static void rop_op_mult_backward(void *ctx)
{
	struct gpu_model *gm = ctx;
	const struct model *m = gm->m;
	const unsigned char *want = gm->want;

	for (int i = 0; m->eff && i < m->nlinears; i++) {
		const struct model_linear *l = &m->linears[i];
		struct gk_mult p, r, a;
		int ww, wm, rowcol, col, hv = gm->hv;
		if (l->mode == MULT_NONE)
			continue;
		ww = !want || want[l->tensor];
		wm = !want || want[l->mult_tensor] || (l->col_tensor >= 0 && want[l->col_tensor]);
		p = mult_args(gm, i);
		r = mult_args(gm->tangent, i);
		rowcol = p.mode == GK_MULT_ROWCOL;
		col = p.mode == GK_MULT_COL;
		for (int k = 0; k < 3; k++) {
			/* k = 0: R{dW_eff}'s term; 1: R{W}'s (for dW: R{row}'s, or a
			 * column multiplier's R{col}); 2: R{col}'s (dW, drow) or
			 * R{row}'s (dcol), rowcol only */
			if (k > 0 && !hv)
				break;
			a = p;
			if (k == 0)
				a.dweff = r.dweff;
			if (ww && (k < 2 || rowcol)) {
				struct gk_mult d = a;
				if (k == 1)
					d.mult = r.mult;
				if (k == 2)
					d.col = r.col;
				rop_mult_term(gm, GK_ID_mult_dw, d, &r);
			}
			if (!wm)
				continue;
			if (k == 1)
				a.w = r.w;
			if ((col || rowcol) && (k < 2 || rowcol)) {
				struct gk_mult d = a;
				if (k == 2)
					d.mult = r.mult;
				rop_mult_term(gm, GK_ID_mult_dcol, d, &r);
			}
			if (!col && (k < 2 || rowcol)) {
				struct gk_mult d = a;
				if (k == 2)
					d.col = r.col;
				rop_mult_term(gm, GK_ID_mult_drow, d, &r);
			}
		}
	}
}

static const struct model_rop_ops gpu_rop_ops = {
	.layer_views = rop_op_layer_views,
	.effective = rop_op_effective,
	.rmsnorm = rop_op_rmsnorm,
	.layernorm = rop_op_layernorm,
	.softcap = rop_op_softcap,
	.softcap_backward = rop_op_softcap_backward,
	.matmul = rop_op_matmul,
	.attention = rop_op_attention,
	.swiglu = rop_op_swiglu,
	.act = rop_op_act,
	.loss_backward = rop_op_loss_backward,
	.matmul_backward = rop_op_matmul_backward,
	.rmsnorm_backward = rop_op_rmsnorm_backward,
	.layernorm_backward = rop_op_layernorm_backward,
	.attention_backward = rop_op_attention_backward,
	.swiglu_backward = rop_op_swiglu_backward,
	.act_backward = rop_op_act_backward,
	.mult_backward = rop_op_mult_backward,
};

/* the tangent model as the R-operator step's back end */
static struct model_rop_step gpu_rop_step(struct gpu_model *gm)
{
	struct gpu_model *t = gm->tangent;
	const struct model *m = gm->m;
	struct model_ptrs hw, hg, he;
	struct model_rop_step rt = {
		.ops = &gpu_rop_ops, .ctx = gm, .acts = t->acts, .x_final = t->x_final, .nf = t->nf,
		.nf_rstd = t->nf_rstd, .nf_mean = t->nf_mean, .logits = t->logits,
		.logits_pre = t->logits_tanh, .s = gpu_step(t).s,
		.first = model_rop_first(m, gm->want),
	};

	model_rop_top_views(m, gm->want, &m->p, &m->g, &hw, &hg, &he);
	map_top(t, &rt.p, &hw);
	map_top(t, &rt.g, &hg);
	map_top(gm, &rt.eff_grads, &he);
	return rt;
}

/* the tangent's first error, if any, is the primal's */
static void note_tangent(struct gpu_model *gm)
{
	struct sw_err e;

	if (gm->tangent && gm->tangent->rc)
		note(gm, gpumodel_error(gm->tangent, &e), &e);
}

int gpumodel_hvp_begin(struct gpu_model *gm, const real *v, const unsigned char *want,
		       struct sw_err *err)
{
	size_t np = gm->m->nparams * sizeof(real);
	struct sw_err e;

	if (!gm->tangent && !failed(gm))
		note(gm, open_on(&gm->tangent, gm->g, SW_DEVICE_EMU,
				 gm->bf16 ? SW_PRECISION_BF16 : SW_PRECISION_FP32, gm->m, NULL, gm->B,
				 gm->T, &e), &e);
	if (failed(gm))
		return result(gm, err);
	upload(gm, gm->tangent->params, v, np);
	zero(gm, gm->tangent->grads, np);
	gm->want = want;
	return result(gm, err);
}

int gpumodel_hvp_add(struct gpu_model *gm, double loss_scale, int gauss_newton, int keep_probs,
		     struct sw_err *err)
{
	const struct model *m = gm->m;
	int B = gm->cur_B, T = gm->cur_T;
	size_t nv = (size_t)gm->B * gm->T * (size_t)m->c.vocab_size;
	struct model_step st;
	struct model_rop_step rt;

	if (failed(gm) || !gm->tangent)
		return result(gm, err);
	alloc_acts(gm->tangent, gm->B, gm->T);
	note_tangent(gm);
	if (keep_probs && !gauss_newton && !gm->dlogits)
		gm->dlogits = dalloc(gm, nv * sizeof(real));
	if (failed(gm))
		return result(gm, err);
	gm->hv = !gauss_newton;
	st = gpu_step(gm);
	rt = gpu_rop_step(gm);
	model_rop_step_forward(&st, &rt, gm->tok, B, T);
	if (m->eff) {
		zero(gm, gm->tangent->dw_eff, m->eff_size * sizeof(real));
		if (!gauss_newton)
			zero(gm, gm->dw_eff, m->eff_size * sizeof(real));
	}
	model_rop_step_backward(&st, &rt, gm->tok, gm->tgt, B, T, loss_scale, gauss_newton,
				keep_probs ? gm->dlogits : NULL);
	return result(gm, err);
}

int gpumodel_hvp_end(struct gpu_model *gm, real *hv, struct sw_err *err)
{
	if (gm->tangent)
		download(gm, hv, gm->tangent->grads, gm->m->nparams * sizeof(real));
	return result(gm, err);
}
