/*
 * step.c - the model's forward and backward passes, and their tangents
 * (the R-operator), once, for every back end (see step.h). The order of the operations here is the model's: a
 * change to the model is made here, and each back end's table gains at
 * most an operation.
 */
#include "step.h"

/* the time since the last lap to a phase, where the back end times */
static void lap(const struct model_ops *ops, void *ctx, enum model_phase phase)
{
	if (ops->lap)
		ops->lap(ctx, phase);
}

/* layer l's weights are about to be read */
static void weights(const struct model_step *st, int l)
{
	if (st->ops->layer_weights)
		st->ops->layer_weights(st->ctx, l);
}

/* y (rows, n) += b, or backward b += y's column sums; b NULL: none */
static void bias(const struct model_ops *ops, void *ctx, real *y, real *b, int64_t rows, int n,
		 int backward)
{
	if (b)
		ops->bias(ctx, y, b, rows, n, backward);
}

/* a block norm (attn_norm, ffn_norm, final_norm): the family's RMSNorm,
 * or LayerNorm with its bias */
static void block_norm(const struct model_step *st, real *out, real *mean, real *rstd,
		       const real *inp, const real *gain, const real *nbias, int64_t rows, int n)
{
	if (st->a->layernorm)
		st->ops->layernorm(st->ctx, out, mean, rstd, inp, gain, nbias, rows, n, st->c->norm_eps);
	else
		st->ops->rmsnorm(st->ctx, out, rstd, inp, gain, rows, n, st->c->norm_eps);
}

static void block_norm_backward(const struct model_step *st, real *dinp, real *dgain, real *dbias,
				const real *dout, const real *inp, const real *gain,
				const real *mean, const real *rstd, int64_t rows, int n)
{
	if (st->a->layernorm)
		st->ops->layernorm_backward(st->ctx, dinp, dgain, dbias, dout, inp, gain, mean, rstd,
					    rows, n);
	else
		st->ops->rmsnorm_backward(st->ctx, dinp, dgain, dout, inp, gain, rstd, rows, n);
}

/* the attention's scale and soft-cap as the back ends take them */
#define ATTN_ARGS(st) (real)(st)->a->attn_scale, (real)(st)->a->attn_softcap

/* Qwen2's q, k, v biases (w's NULL: none) over the products' outputs
 * (N, Q), (N, K), (N, K): added (the forward, and the tangents with w the
 * tangent biases), or backward their gradients w += the outputs'
 * gradients' column sums */
static void qkv_bias(const struct model_ops *ops, void *ctx, const struct layer_ptrs *w,
		     real *q, real *k, real *v, int N, int Q, int K, int backward)
{
	bias(ops, ctx, q, w->q_bias, N, Q, backward);
	bias(ops, ctx, k, w->k_bias, N, K, backward);
	bias(ops, ctx, v, w->v_bias, N, K, backward);
}

/*
 * Layer l's forward from acts[l].x_in; its output, x_in plus both
 * sublayers', into x_out. x_out NULL: the backward recomputing the
 * layer's activations (struct model_step's recompute) from what the
 * forward kept, the matrix products' outputs, so that only the norms,
 * RoPE, the attention and SwiGLU run again; the o and down products,
 * whose outputs only made x_mid and x_out, not at all.
 */
static void layer_forward(const struct model_step *st, int l, int B, int T, real *x_out)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, F = (int)c->d_ff;
	double eps = c->norm_eps;
	struct layer_acts *a = &st->acts[l];
	const struct layer_ptrs *w = &st->p->layer[l];
	const struct model_arch *ar = st->a;
	int products = x_out != NULL;

	/* attention: x_mid = x_in + post(o(attn(rope(q(n1)), rope(k(n1)), v(n1)))),
	 * post the identity without post-norms, rope without learned
	 * positions */
	block_norm(st, a->n1, a->n1_mean, a->n1_rstd, a->x_in, w->attn_norm, w->attn_norm_bias, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	/* q, k, v as three products: OpenBLAS's one product of the joined
	 * (Q + 2K, C) matrix rounds some elements otherwise than the
	 * three the GPU computes (the emulation is compared bit for bit
	 * with the CPU, t0064); the backward joins them where it can */
	if (products) {
		ops->matmul(ctx, a->q_lin, a->n1, w->wq, N, C, Q);
		ops->matmul(ctx, a->k_lin, a->n1, w->wk, N, C, K);
		ops->matmul(ctx, st->dnp_attn ? a->v_lin : a->v, a->n1, w->wv, N, C, K);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		qkv_bias(ops, ctx, w, a->q_lin, a->k_lin, st->dnp_attn ? a->v_lin : a->v, N, Q, K, 0);
	}
	if (c->qk_norm) {
		ops->rmsnorm(ctx, a->q, a->q_rstd, a->q_lin, w->q_norm, (int64_t)N * H, hd, eps);
		ops->rmsnorm(ctx, a->k, a->k_rstd, a->k_lin, w->k_norm, (int64_t)N * KV, hd, eps);
	} else {
		ops->copy(ctx, a->q, a->q_lin, (size_t)N * Q);
		ops->copy(ctx, a->k, a->k_lin, (size_t)N * K);
	}
	if (st->dnp_attn)
		ops->rmsnorm(ctx, a->v, a->v_rstd, a->v_lin, w->v_norm, (int64_t)N * KV, hd, eps);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (!ar->pos_embed) {
		ops->rope(ctx, a->q, B, T, H, hd, 0);
		ops->rope(ctx, a->k, B, T, KV, hd, 0);
	}
	ops->attention(ctx, a->att_out, a->att, a->att_tanh, a->q, a->k, a->v, B, T, H, KV, hd,
		       ATTN_ARGS(st));
	lap(ops, ctx, MODEL_PHASE_ATTENTION);
	if (c->norm_everywhere) {
		ops->rmsnorm(ctx, a->o_in, a->o_in_rstd, a->att_out, w->o_in_norm, N, Q, eps);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	}
	if (products) {
		ops->matmul(ctx, a->attn_y, c->norm_everywhere ? a->o_in : a->att_out, w->wo, N, Q, C);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		bias(ops, ctx, a->attn_y, w->o_bias, N, C, 0);
		/* the post-norm's rstd is kept with the products' outputs */
		if (ar->post_norms)
			ops->rmsnorm(ctx, a->attn_post, a->attn_post_rstd, a->attn_y, w->attn_post_norm,
				     N, C, eps);
		ops->residual(ctx, a->x_mid, a->x_in, ar->post_norms ? a->attn_post : a->attn_y,
			      (size_t)N * C);
	}

	/* MLP: x_out = x_mid + post(down(act(gate(n2)) * up(n2))), or
	 * GPT-2's x_mid + down(act(up(n2))), or a mixture of experts'
	 * x_mid + moe(n2) (moe.h; the layer keeps its own activations,
	 * recomputed or not) */
	block_norm(st, a->n2, a->n2_mean, a->n2_rstd, a->x_mid, w->ffn_norm, w->ffn_norm_bias, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (w->router) {
		if (products) {
			ops->moe(ctx, l, a->mlp_y, a->n2, N);
			lap(ops, ctx, MODEL_PHASE_GEMM);
			ops->residual(ctx, x_out, a->x_mid, a->mlp_y, (size_t)N * C);
		}
		return;
	}
	if (products) {
		if (ar->gated)
			ops->matmul(ctx, st->dnp_ffn ? a->gate_lin : a->gate, a->n2, w->wgate, N, C, F);
		ops->matmul(ctx, st->dnp_ffn ? a->up_lin : a->up, a->n2, w->wup, N, C, F);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		bias(ops, ctx, a->up, w->up_bias, N, F, 0);
	}
	if (st->dnp_ffn) {
		ops->rmsnorm(ctx, a->gate, a->gate_rstd, a->gate_lin, w->gate_norm, N, F, eps);
		ops->rmsnorm(ctx, a->up, a->up_rstd, a->up_lin, w->up_norm, N, F, eps);
	}
	if (ar->gated)
		ops->swiglu(ctx, a->h, a->gate, a->up, (size_t)N * F, ar->act);
	else
		ops->act(ctx, a->h, a->up, (size_t)N * F, ar->act);
	if (c->norm_everywhere)
		ops->rmsnorm(ctx, a->d_in, a->d_in_rstd, a->h, w->down_in_norm, N, F, eps);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (products) {
		ops->matmul(ctx, a->mlp_y, c->norm_everywhere ? a->d_in : a->h, w->wdown, N, F, C);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		bias(ops, ctx, a->mlp_y, w->down_bias, N, C, 0);
		if (ar->post_norms)
			ops->rmsnorm(ctx, a->mlp_post, a->mlp_post_rstd, a->mlp_y, w->ffn_post_norm, N, C,
				     eps);
		ops->residual(ctx, x_out, a->x_mid, ar->post_norms ? a->mlp_post : a->mlp_y,
			      (size_t)N * C);
	}
}

void model_step_forward(const struct model_step *st, const int *tokens, const int *targets,
			int B, int T)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	const struct model_ptrs *p = st->p;
	int N = B * T, C = (int)c->d_model, V = (int)c->vocab_size;

	if (ops->update_effective)
		ops->update_effective(ctx);
	ops->embed(ctx, st->acts[0].x_in, tokens, p->embed, N, C);
	if (st->a->embed_scale)
		ops->scale(ctx, st->acts[0].x_in, (size_t)N * C, (real)st->a->embed_scale);
	/* the positions' embeddings, (T, C), as a bias over the B sequences */
	bias(ops, ctx, st->acts[0].x_in, p->pos_embed, B, T * C, 0);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	for (int l = 0; l < c->n_layers; l++) {
		weights(st, l);
		layer_forward(st, l, B, T, l + 1 < c->n_layers ? st->acts[l + 1].x_in : st->x_final);
	}
	block_norm(st, st->nf, st->nf_mean, st->nf_rstd, st->x_final, p->final_norm, p->final_norm_bias,
		   N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	ops->matmul(ctx, st->logits, st->nf, p->lm_head, N, C, V);
	lap(ops, ctx, MODEL_PHASE_GEMM);
	if (st->a->final_softcap)
		ops->softcap(ctx, st->logits, st->logits_tanh, (size_t)N * V, (real)st->a->final_softcap,
			     0);
	ops->loss(ctx, st->losses, st->logits, targets, N, V);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
}

/* The dense MLP's backward from dres (the layer's output gradient) to
 * dn (N, C), its input's: x_out = x_mid + post(down(h)), through the
 * post-norm (into dn, free until the MLP's input) to down's output */
static void mlp_backward(const struct model_step *st, const struct layer_acts *a,
			 const struct layer_ptrs *w, const struct layer_ptrs *gl, int N)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	const struct model_arch *ar = st->a;
	const struct model_step_scratch *s = &st->s;
	int C = (int)c->d_model, F = (int)c->d_ff;
	real *dres = s->dres, *dn = s->dn, *dF1 = s->dF1, *dF2 = s->dF2, *dF3 = s->dF3;
	size_t nC = (size_t)N * C, nF = (size_t)N * F;
	const real *dy;

	dy = dres;
	if (ar->post_norms) {
		ops->zero(ctx, dn, nC);
		ops->rmsnorm_backward(ctx, dn, gl->ffn_post_norm, dres, a->mlp_y, w->ffn_post_norm,
				      a->mlp_post_rstd, N, C);
		dy = dn;
	}
	bias(ops, ctx, (real *)dy, gl->down_bias, N, C, 1);
	ops->zero(ctx, dF1, nF);
	if (c->norm_everywhere) {
		ops->zero(ctx, dF2, nF);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul_backward(ctx, dF2, gl->wdown, dy, a->d_in, w->wdown, N, F, C);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		ops->rmsnorm_backward(ctx, dF1, gl->down_in_norm, dF2, a->h, w->down_in_norm,
				      a->d_in_rstd, N, F);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	} else {
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul_backward(ctx, dF1, gl->wdown, dy, a->h, w->wdown, N, F, C);
		lap(ops, ctx, MODEL_PHASE_GEMM);
	}
	ops->zero(ctx, dn, nC);
	if (!ar->gated) {
		/* GPT-2's MLP: through the activation to up's output (dF2) */
		ops->zero(ctx, dF2, nF);
		ops->act_backward(ctx, dF2, dF1, a->up, nF, ar->act);
		bias(ops, ctx, dF2, gl->up_bias, N, F, 1);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul_backward(ctx, dn, gl->wup, dF2, a->n2, w->wup, N, C, F);
		lap(ops, ctx, MODEL_PHASE_GEMM);
	} else if (st->dnp_ffn) {
		/* through SwiGLU to the normalized gate and up (dF2, dF3),
		 * through their norms to the products' outputs (dF1, dF2) */
		ops->zero(ctx, dF2, nF);
		ops->zero(ctx, dF3, nF);
		ops->swiglu_backward(ctx, dF2, dF3, dF1, a->gate, a->up, nF, ar->act);
		ops->zero(ctx, dF1, nF);
		ops->rmsnorm_backward(ctx, dF1, gl->gate_norm, dF2, a->gate_lin, w->gate_norm,
				      a->gate_rstd, N, F);
		ops->zero(ctx, dF2, nF);
		ops->rmsnorm_backward(ctx, dF2, gl->up_norm, dF3, a->up_lin, w->up_norm,
				      a->up_rstd, N, F);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul_backward(ctx, dn, gl->wgate, dF1, a->n2, w->wgate, N, C, F);
		ops->matmul_backward(ctx, dn, gl->wup, dF2, a->n2, w->wup, N, C, F);
		lap(ops, ctx, MODEL_PHASE_GEMM);
	} else {
		ops->gate_up_backward(ctx, dn, gl->wgate, gl->wup, dF1, a->gate, a->up, a->n2,
				      w->wgate, w->wup, N, C, F, ar->act);
	}
}

void model_step_backward(const struct model_step *st, const int *tokens, const int *targets,
			 int B, int T, double loss_scale)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	const struct model_ptrs *p = st->p, *g = st->g;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, V = (int)c->vocab_size;
	const struct model_step_scratch *s = &st->s;
	const struct model_arch *ar = st->a;
	real *dres = s->dres, *dn = s->dn, *dq = s->dq, *dq2 = s->dq2, *dk = s->dk, *dk2 = s->dk2,
	     *dv = s->dv;
	size_t nC = (size_t)N * C, nQ = (size_t)N * Q, nK = (size_t)N * K;

	/* the loss is the mean over N tokens */
	ops->loss_backward(ctx, st->logits, targets, N, V, (real)(loss_scale / N));
	if (ar->final_softcap)
		ops->softcap(ctx, st->logits, st->logits_tanh, (size_t)N * V, (real)ar->final_softcap, 1);
	ops->zero(ctx, dn, nC);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	ops->matmul_backward(ctx, dn, g->lm_head, st->logits, st->nf, p->lm_head, N, C, V);
	lap(ops, ctx, MODEL_PHASE_GEMM);
	ops->zero(ctx, dres, nC);
	block_norm_backward(st, dres, g->final_norm, g->final_norm_bias, dn, st->x_final, p->final_norm,
			    st->nf_mean, st->nf_rstd, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (ops->grads_ready)
		ops->grads_ready(ctx, (int)c->n_layers);

	for (int l = (int)c->n_layers - 1; l >= 0; l--) {
		struct layer_acts *a = &st->acts[l];
		const struct layer_ptrs *w = &p->layer[l], *gl = &g->layer[l];
		const real *dy;         /* a sublayer's output gradient */

		weights(st, l);
		/* the forward kept the layer's input and its products' outputs:
		 * the rest of its activations again */
		if (st->recompute)
			layer_forward(st, l, B, T, NULL);
		/* x_out = x_mid + post(mlp(n2)): dres flows to x_mid unchanged,
		 * and through the MLP into dn */
		if (w->router) {
			ops->zero(ctx, dn, nC);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->moe_backward(ctx, l, dn, dres, a->n2, N, loss_scale);
			lap(ops, ctx, MODEL_PHASE_GEMM);
		} else {
			mlp_backward(st, a, w, gl, N);
		}
		block_norm_backward(st, dres, gl->ffn_norm, gl->ffn_norm_bias, dn, a->x_mid, w->ffn_norm,
				    a->n2_mean, a->n2_rstd, N, C);

		/* x_mid = x_in + post(o(attn)): dres flows to x_in unchanged,
		 * through the post-norm (into dn) to o's output */
		dy = dres;
		if (ar->post_norms) {
			ops->zero(ctx, dn, nC);
			ops->rmsnorm_backward(ctx, dn, gl->attn_post_norm, dres, a->attn_y,
					      w->attn_post_norm, a->attn_post_rstd, N, C);
			dy = dn;
		}
		bias(ops, ctx, (real *)dy, gl->o_bias, N, C, 1);
		ops->zero(ctx, dq2, nQ);
		if (c->norm_everywhere) {
			ops->zero(ctx, dq, nQ);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dq, gl->wo, dy, a->o_in, w->wo, N, Q, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
			ops->rmsnorm_backward(ctx, dq2, gl->o_in_norm, dq, a->att_out, w->o_in_norm,
					      a->o_in_rstd, N, Q);
		} else {
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dq2, gl->wo, dy, a->att_out, w->wo, N, Q, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
		}
		ops->zero(ctx, dq, nQ);
		ops->zero(ctx, dk, nK);
		ops->zero(ctx, dv, nK);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->attention_backward(ctx, dq, dk, dv, dq2, a->q, a->k, a->v, a->att, a->att_tanh, B, T,
					H, KV, hd, ATTN_ARGS(st));
		if (!ar->pos_embed) {
			ops->rope(ctx, dq, B, T, H, hd, 1);
			ops->rope(ctx, dk, B, T, KV, hd, 1);
		}
		lap(ops, ctx, MODEL_PHASE_ATTENTION);
		if (c->qk_norm) {
			/* through the per-head norms to d(q_lin), d(k_lin) */
			ops->zero(ctx, dq2, nQ);
			ops->rmsnorm_backward(ctx, dq2, gl->q_norm, dq, a->q_lin, w->q_norm, a->q_rstd,
					      (int64_t)N * H, hd);
			ops->copy(ctx, dq, dq2, nQ);
			ops->zero(ctx, dk2, nK);
			ops->rmsnorm_backward(ctx, dk2, gl->k_norm, dk, a->k_lin, w->k_norm, a->k_rstd,
					      (int64_t)N * KV, hd);
			ops->copy(ctx, dk, dk2, nK);
		}
		if (st->dnp_attn) {
			/* through v's per-head norm to d(v_lin) */
			ops->zero(ctx, dk2, nK);
			ops->rmsnorm_backward(ctx, dk2, gl->v_norm, dv, a->v_lin, w->v_norm, a->v_rstd,
					      (int64_t)N * KV, hd);
			ops->copy(ctx, dv, dk2, nK);
		}
		qkv_bias(ops, ctx, gl, dq, dk, dv, N, Q, K, 1);
		ops->zero(ctx, dn, nC);
		ops->qkv_backward(ctx, dn, gl->wq, gl->wk, gl->wv, dq, dk, dv, a->n1, w->wq, w->wk,
				  w->wv, N, C, Q, K);
		block_norm_backward(st, dres, gl->attn_norm, gl->attn_norm_bias, dn, a->x_in, w->attn_norm,
				    a->n1_mean, a->n1_rstd, N, C);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		if (ops->grads_ready)
			ops->grads_ready(ctx, l);
	}
	bias(ops, ctx, dres, g->pos_embed, B, T * C, 1);
	if (ar->embed_scale)
		ops->scale(ctx, dres, nC, (real)ar->embed_scale);
	ops->embed_backward(ctx, g->embed, dres, tokens, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (ops->grads_ready)
		ops->grads_ready(ctx, -1);
	if (ops->mult_backward) {
		ops->mult_backward(ctx);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	}
}

/* ---- the R-operator ---------------------------------------------------------- */

/* R{y} of a block norm (rbias the tangent bias, NULL: zero) */
static void rop_block_norm(const struct model_step *st, const struct model_rop_step *rt, real *ry,
			   real *rmean, real *rrstd, const real *inp, const real *rinp,
			   const real *gain, const real *rgain, const real *rbias, const real *mean,
			   const real *rstd, int64_t rows, int n)
{
	if (st->a->layernorm)
		rt->ops->layernorm(rt->ctx, ry, rmean, rrstd, inp, rinp, gain, rgain, rbias, mean, rstd,
				   rows, n);
	else
		rt->ops->rmsnorm(rt->ctx, ry, rrstd, inp, rinp, gain, rgain, rstd, rows, n);
}

void model_rop_step_forward(const struct model_step *st, const struct model_rop_step *rt,
			    const int *tokens, int B, int T)
{
	const struct model_ops *ops = st->ops;
	const struct model_rop_ops *rop = rt->ops;
	void *ctx = st->ctx, *rctx = rt->ctx;
	const struct sw_config *c = st->c;
	const struct model_arch *ar = st->a;
	const struct model_ptrs *p = st->p, *rp = &rt->p;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, F = (int)c->d_ff, V = (int)c->vocab_size,
	    L = (int)c->n_layers, first = rt->first;

	if (rop->effective)
		rop->effective(rctx);
	/* below the lowest layer v reaches, every tangent is zero */
	if (first < 0) {
		if (rp->embed)
			ops->embed(ctx, rt->acts[0].x_in, tokens, rp->embed, N, C);
		else
			ops->zero(ctx, rt->acts[0].x_in, (size_t)N * C);
		if (ar->embed_scale)
			ops->scale(ctx, rt->acts[0].x_in, (size_t)N * C, (real)ar->embed_scale);
		bias(ops, ctx, rt->acts[0].x_in, rp->pos_embed, B, T * C, 0);
		first = 0;
	} else {
		ops->zero(ctx, first < L ? rt->acts[first].x_in : rt->x_final, (size_t)N * C);
	}
	for (int l = first; l < L; l++) {
		const struct layer_acts *a = &st->acts[l];
		struct layer_acts *ra = &rt->acts[l];
		const struct layer_ptrs *w = &p->layer[l];
		struct layer_ptrs rw_ = {0}, rg_ = {0}, eg_ = {0}, *rw = &rw_;

		rop->layer_views(rctx, l, &rw_, &rg_, &eg_);
		weights(st, l);
		rop_block_norm(st, rt, ra->n1, ra->n1_mean, ra->n1_rstd, a->x_in, ra->x_in, w->attn_norm,
			       rw->attn_norm, rw->attn_norm_bias, a->n1_mean, a->n1_rstd, N, C);
		rop->matmul(rctx, ra->q_lin, a->n1, ra->n1, w->wq, rw->wq, N, C, Q);
		rop->matmul(rctx, ra->k_lin, a->n1, ra->n1, w->wk, rw->wk, N, C, K);
		rop->matmul(rctx, st->dnp_attn ? ra->v_lin : ra->v, a->n1, ra->n1, w->wv, rw->wv, N, C, K);
		qkv_bias(ops, ctx, rw, ra->q_lin, ra->k_lin, st->dnp_attn ? ra->v_lin : ra->v, N, Q, K, 0);
		if (c->qk_norm) {
			rop->rmsnorm(rctx, ra->q, ra->q_rstd, a->q_lin, ra->q_lin, w->q_norm, rw->q_norm,
				     a->q_rstd, (int64_t)N * H, hd);
			rop->rmsnorm(rctx, ra->k, ra->k_rstd, a->k_lin, ra->k_lin, w->k_norm, rw->k_norm,
				     a->k_rstd, (int64_t)N * KV, hd);
		} else {
			ops->copy(ctx, ra->q, ra->q_lin, (size_t)N * Q);
			ops->copy(ctx, ra->k, ra->k_lin, (size_t)N * K);
		}
		if (st->dnp_attn)
			rop->rmsnorm(rctx, ra->v, ra->v_rstd, a->v_lin, ra->v_lin, w->v_norm, rw->v_norm,
				     a->v_rstd, (int64_t)N * KV, hd);
		/* RoPE is linear: the tangents turn as the values */
		if (!ar->pos_embed) {
			ops->rope(ctx, ra->q, B, T, H, hd, 0);
			ops->rope(ctx, ra->k, B, T, KV, hd, 0);
		}
		rop->attention(rctx, ra->att_out, ra->att, a->att, a->att_tanh, a->q, a->k, a->v, ra->q,
			       ra->k, ra->v, B, T, H, KV, hd, ATTN_ARGS(st));
		if (c->norm_everywhere) {
			rop->rmsnorm(rctx, ra->o_in, ra->o_in_rstd, a->att_out, ra->att_out, w->o_in_norm,
				     rw->o_in_norm, a->o_in_rstd, N, Q);
			rop->matmul(rctx, ra->attn_y, a->o_in, ra->o_in, w->wo, rw->wo, N, Q, C);
		} else {
			rop->matmul(rctx, ra->attn_y, a->att_out, ra->att_out, w->wo, rw->wo, N, Q, C);
		}
		bias(ops, ctx, ra->attn_y, rw->o_bias, N, C, 0);
		if (ar->post_norms)
			rop->rmsnorm(rctx, ra->attn_post, ra->attn_post_rstd, a->attn_y, ra->attn_y,
				     w->attn_post_norm, rw->attn_post_norm, a->attn_post_rstd, N, C);
		ops->residual(ctx, ra->x_mid, ra->x_in, ar->post_norms ? ra->attn_post : ra->attn_y,
			      (size_t)N * C);

		rop_block_norm(st, rt, ra->n2, ra->n2_mean, ra->n2_rstd, a->x_mid, ra->x_mid, w->ffn_norm,
			       rw->ffn_norm, rw->ffn_norm_bias, a->n2_mean, a->n2_rstd, N, C);
		if (ar->gated)
			rop->matmul(rctx, st->dnp_ffn ? ra->gate_lin : ra->gate, a->n2, ra->n2, w->wgate,
				    rw->wgate, N, C, F);
		rop->matmul(rctx, st->dnp_ffn ? ra->up_lin : ra->up, a->n2, ra->n2, w->wup, rw->wup, N, C,
			    F);
		bias(ops, ctx, ra->up, rw->up_bias, N, F, 0);
		if (st->dnp_ffn) {
			rop->rmsnorm(rctx, ra->gate, ra->gate_rstd, a->gate_lin, ra->gate_lin, w->gate_norm,
				     rw->gate_norm, a->gate_rstd, N, F);
			rop->rmsnorm(rctx, ra->up, ra->up_rstd, a->up_lin, ra->up_lin, w->up_norm,
				     rw->up_norm, a->up_rstd, N, F);
		}
		if (ar->gated)
			rop->swiglu(rctx, ra->h, a->gate, a->up, ra->gate, ra->up, (size_t)N * F, ar->act);
		else
			rop->act(rctx, ra->h, a->up, ra->up, (size_t)N * F, ar->act);
		if (c->norm_everywhere) {
			rop->rmsnorm(rctx, ra->d_in, ra->d_in_rstd, a->h, ra->h, w->down_in_norm,
				     rw->down_in_norm, a->d_in_rstd, N, F);
			rop->matmul(rctx, ra->mlp_y, a->d_in, ra->d_in, w->wdown, rw->wdown, N, F, C);
		} else {
			rop->matmul(rctx, ra->mlp_y, a->h, ra->h, w->wdown, rw->wdown, N, F, C);
		}
		bias(ops, ctx, ra->mlp_y, rw->down_bias, N, C, 0);
		if (ar->post_norms)
			rop->rmsnorm(rctx, ra->mlp_post, ra->mlp_post_rstd, a->mlp_y, ra->mlp_y,
				     w->ffn_post_norm, rw->ffn_post_norm, a->mlp_post_rstd, N, C);
		ops->residual(ctx, l + 1 < L ? rt->acts[l + 1].x_in : rt->x_final, ra->x_mid,
			      ar->post_norms ? ra->mlp_post : ra->mlp_y, (size_t)N * C);
	}
	rop_block_norm(st, rt, rt->nf, rt->nf_mean, rt->nf_rstd, st->x_final, rt->x_final, p->final_norm,
		       rp->final_norm, rp->final_norm_bias, st->nf_mean, st->nf_rstd, N, C);
	rop->matmul(rctx, rt->logits, st->nf, rt->nf, p->lm_head, rp->lm_head, N, C, V);
	/* the soft-cap's tangent: R{z} kept for the backward's second term */
	if (ar->final_softcap) {
		ops->copy(ctx, rt->logits_pre, rt->logits, (size_t)N * V);
		rop->softcap(rctx, rt->logits, st->logits_tanh, (size_t)N * V, (real)ar->final_softcap);
	}
}

/*
 * A linear layer's backward, tangent then primal (it reads the primal
 * dout): R{dx} += R{dy} W + dy R{W}, R{dW} into rdw; with hv, dx += dy W
 * (and dW into dw when the multipliers need it) unless the tape has dx
 * (taped). clear: rdinp and dinp zeroed first.
 */
static void rop_linear_pair(const struct model_step *st, const struct model_rop_step *rt, int hv,
			    int taped, int clear, real *dinp, real *rdinp, real *dw, real *rdw,
			    const real *dout, const real *rdout, const real *inp, const real *rinp,
			    const real *w, const real *rw, int N, int din, int dout_)
{
	if (clear)
		st->ops->zero(st->ctx, rdinp, (size_t)N * din);
	rt->ops->matmul_backward(rt->ctx, rdinp, rdw, hv ? dout : NULL, rdout, inp, rinp, w, rw, N,
				 din, dout_);
	if (!hv || taped)
		return;
	if (clear)
		st->ops->zero(st->ctx, dinp, (size_t)N * din);
	if (dw)
		st->ops->matmul_backward(st->ctx, dinp, dw, dout, inp, w, N, din, dout_);
	else    /* dx += dy W: the tangent product's first term */
		rt->ops->matmul_backward(rt->ctx, dinp, NULL, NULL, dout, inp, NULL, w, NULL, N, din,
					 dout_);
}

/* An RMSNorm's backward, tangent then primal (without the gain's primal
 * gradient): as rop_linear_pair. */
static void rop_rmsnorm_pair(const struct model_step *st, const struct model_rop_step *rt, int hv,
			     int clear, real *dinp, real *rdinp, real *rdgain, const real *dout,
			     const real *rdout, const real *inp, const real *rinp, const real *gain,
			     const real *rgain, const real *rstd, const real *rrstd, int64_t N, int C)
{
	if (clear)
		st->ops->zero(st->ctx, rdinp, (size_t)N * C);
	rt->ops->rmsnorm_backward(rt->ctx, rdinp, rdgain, hv ? dout : NULL, rdout, inp, rinp, gain,
				  rgain, rstd, rrstd, N, C);
	if (!hv)
		return;
	if (clear)
		st->ops->zero(st->ctx, dinp, (size_t)N * C);
	st->ops->rmsnorm_backward(st->ctx, dinp, NULL, dout, inp, gain, rstd, N, C);
}

/* The primal input gradient in buf (n reals) at off in the tape (step.h):
 * copied back when the tape keeps its layer (taped), else put there. */
static void tape_io(const struct model_step *st, const struct model_rop_tape *tape, int taped,
		    size_t off, real *buf, size_t n)
{
	if (!tape)
		return;
	if (taped)
		st->ops->copy(st->ctx, buf, tape->buf + off, n);
	else
		st->ops->copy(st->ctx, tape->buf + off, buf, n);
}

/* A block norm's backward, tangent then primal: rop_rmsnorm_pair's, or
 * LayerNorm's with its bias's R{db} into rdbias */
static void rop_block_norm_pair(const struct model_step *st, const struct model_rop_step *rt,
				int hv, int clear, real *dinp, real *rdinp, real *rdgain, real *rdbias,
				const real *dout, const real *rdout, const real *inp,
				const real *rinp, const real *gain, const real *rgain,
				const real *mean, const real *rstd, const real *rmean,
				const real *rrstd, int64_t N, int C)
{
	if (!st->a->layernorm) {
		rop_rmsnorm_pair(st, rt, hv, clear, dinp, rdinp, rdgain, dout, rdout, inp, rinp, gain,
				 rgain, rstd, rrstd, N, C);
		return;
	}
	if (clear)
		st->ops->zero(st->ctx, rdinp, (size_t)N * C);
	rt->ops->layernorm_backward(rt->ctx, rdinp, rdgain, rdbias, hv ? dout : NULL, rdout, inp,
				    rinp, gain, rgain, mean, rstd, rmean, rrstd, N, C);
	if (!hv)
		return;
	if (clear)
		st->ops->zero(st->ctx, dinp, (size_t)N * C);
	st->ops->layernorm_backward(st->ctx, dinp, NULL, NULL, dout, inp, gain, mean, rstd, N, C);
}

/* A sublayer's output through its post-norm (Gemma2), tangent then
 * primal, into *dy, *rdy (dn's, free until the sublayer's input); without
 * post-norms they stay dres's */
static void rop_post_norm(const struct model_step *st, const struct model_rop_step *rt, int hv,
			  const real **dy, const real **rdy, real *rdgain, const real *inp,
			  const real *rinp, const real *gain, const real *rgain, const real *rstd,
			  const real *rrstd, int N, int C)
{
	*dy = st->s.dres;
	*rdy = rt->s.dres;
	if (!st->a->post_norms)
		return;
	rop_rmsnorm_pair(st, rt, hv, 1, st->s.dn, rt->s.dn, rdgain, st->s.dres, rt->s.dres, inp, rinp,
			 gain, rgain, rstd, rrstd, N, C);
	*dy = st->s.dn;
	*rdy = rt->s.dn;
}

/* where the gate (which 0) or up (1) product's output gradient is after
 * the gated unit's backward: dF2, dF3; under ffn DNP, past the norms,
 * dF1, dF2 */
static real *ffn_product_grad(const struct model_step *st, const struct model_step_scratch *s,
			      int which)
{
	if (!st->a->gated)      /* GPT-2's MLP: up's, past the activation */
		return s->dF2;
	if (st->dnp_ffn)
		return which ? s->dF2 : s->dF1;
	return which ? s->dF3 : s->dF2;
}

void model_rop_step_backward(const struct model_step *st, const struct model_rop_step *rt,
			     const int *tokens, const int *targets, int B, int T,
			     double loss_scale, int gauss_newton, real *dlogits)
{
	const struct model_ops *ops = st->ops;
	const struct model_rop_ops *rop = rt->ops;
	void *ctx = st->ctx, *rctx = rt->ctx;
	const struct sw_config *c = st->c;
	const struct model_arch *ar = st->a;
	const struct model_ptrs *p = st->p, *rp = &rt->p, *rg = &rt->g, *ge = &rt->eff_grads;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, F = (int)c->d_ff, V = (int)c->vocab_size,
	    L = (int)c->n_layers, hv = !gauss_newton, nev = (int)c->norm_everywhere;
	int first = rt->first < 0 ? 0 : rt->first > L ? L : rt->first;
	const struct model_step_scratch *s = &st->s, *rs = &rt->s;
	real scale = (real)(loss_scale / N), *dz = NULL;
	size_t nQ = (size_t)N * Q, nK = (size_t)N * K, nF = (size_t)N * F, nC = (size_t)N * C;
	/* the primal's input gradients do not depend on v: kept (step.h) */
	struct model_rop_tape *tape = hv ? rt->tape : NULL;
	size_t width = (size_t)N * MODEL_ROP_TAPE_WIDTH(c);
	int taped = tape && tape->kept[L];
#define PRIMAL(x) (hv ? (x) : NULL)

	/* the logits: R{dz} over R{z}, then the primal dz; through a
	 * soft-cap, the tangent's second term reads the capped logits'
	 * primal gradient before the primal goes through */
	rop->loss_backward(rctx, rt->logits, st->logits, N, V, scale);
	if (hv) {
		dz = dlogits ? dlogits : st->logits;
		if (dlogits)
			ops->copy(ctx, dlogits, st->logits, (size_t)N * V);
		ops->loss_backward(ctx, dz, targets, N, V, scale);
	}
	if (ar->final_softcap) {
		rop->softcap_backward(rctx, rt->logits, dz, st->logits_tanh, rt->logits_pre,
				      (size_t)N * V, (real)ar->final_softcap);
		if (hv)
			ops->softcap(ctx, dz, st->logits_tanh, (size_t)N * V, (real)ar->final_softcap, 1);
	}
	rop_linear_pair(st, rt, hv, taped, 1, s->dn, rs->dn, ge->lm_head, rg->lm_head, dz, rt->logits,
			st->nf, rt->nf, p->lm_head, rp->lm_head, N, C, V);
	tape_io(st, tape, taped, L * width, s->dn, nC);
	if (tape)
		tape->kept[L] = 1;
	rop_block_norm_pair(st, rt, hv, 1, s->dres, rs->dres, rg->final_norm, rg->final_norm_bias, s->dn,
			    rs->dn, st->x_final, rt->x_final, p->final_norm, rp->final_norm,
			    st->nf_mean, st->nf_rstd, rt->nf_mean, rt->nf_rstd, N, C);

	for (int l = L - 1; l >= first; l--) {
		const struct layer_acts *a = &st->acts[l], *ra = &rt->acts[l];
		const struct layer_ptrs *w = &p->layer[l];
		struct layer_ptrs rw_ = {0}, rg_ = {0}, eg_ = {0}, *rw = &rw_, *rgl = &rg_, *gm = &eg_;
		size_t at = (size_t)l * width;  /* the layer's place in the tape */
		const real *dy, *rdy;   /* a sublayer's output gradient and its tangent */

		taped = tape && tape->kept[l];
		rop->layer_views(rctx, l, &rw_, &rg_, &eg_);
		weights(st, l);

		/* x_out = x_mid + post(down(h)): dres and R{dres} flow to x_mid,
		 * and through the post-norm to down's output; R{db} = R{dy}'s
		 * column sums (the primal's are not wanted) */
		rop_post_norm(st, rt, hv, &dy, &rdy, rgl->ffn_post_norm, a->mlp_y, ra->mlp_y,
			      w->ffn_post_norm, rw->ffn_post_norm, a->mlp_post_rstd, ra->mlp_post_rstd,
			      N, C);
		bias(ops, ctx, (real *)rdy, rgl->down_bias, N, C, 1);
		rop_linear_pair(st, rt, hv, taped, 1, nev ? s->dF2 : s->dF1, nev ? rs->dF2 : rs->dF1,
				gm->wdown, rgl->wdown, dy, rdy, nev ? a->d_in : a->h,
				nev ? ra->d_in : ra->h, w->wdown, rw->wdown, N, F, C);
		tape_io(st, tape, taped, at, nev ? s->dF2 : s->dF1, nF);
		if (nev)
			rop_rmsnorm_pair(st, rt, hv, 1, s->dF1, rs->dF1, rgl->down_in_norm, s->dF2,
					 rs->dF2, a->h, ra->h, w->down_in_norm, rw->down_in_norm,
					 a->d_in_rstd, ra->d_in_rstd, N, F);
		ops->zero(ctx, rs->dF2, nF);
		ops->zero(ctx, rs->dF3, nF);
		if (hv)
			ops->zero(ctx, s->dF2, nF);
		if (!ar->gated) {
			/* GPT-2's MLP: through the activation to up's output, dF2 */
			rop->act_backward(rctx, rs->dF2, PRIMAL(s->dF1), rs->dF1, a->up, ra->up, nF,
					  ar->act);
			if (hv)
				ops->act_backward(ctx, s->dF2, s->dF1, a->up, nF, ar->act);
			bias(ops, ctx, rs->dF2, rgl->up_bias, N, F, 1);
		} else {
			rop->swiglu_backward(rctx, rs->dF2, rs->dF3, PRIMAL(s->dF1), rs->dF1, a->gate,
					     a->up, ra->gate, ra->up, nF, ar->act);
			if (hv) {
				ops->zero(ctx, s->dF3, nF);
				ops->swiglu_backward(ctx, s->dF2, s->dF3, s->dF1, a->gate, a->up, nF, ar->act);
			}
		}
		/* the products' output gradients: dF2 and dF3, or under DNP
		 * through the norms into dF1 and dF2 */
		if (st->dnp_ffn) {
			rop_rmsnorm_pair(st, rt, hv, 1, s->dF1, rs->dF1, rgl->gate_norm, s->dF2, rs->dF2,
					 a->gate_lin, ra->gate_lin, w->gate_norm, rw->gate_norm,
					 a->gate_rstd, ra->gate_rstd, N, F);
			rop_rmsnorm_pair(st, rt, hv, 1, s->dF2, rs->dF2, rgl->up_norm, s->dF3, rs->dF3,
					 a->up_lin, ra->up_lin, w->up_norm, rw->up_norm, a->up_rstd,
					 ra->up_rstd, N, F);
		}
		if (ar->gated)
			rop_linear_pair(st, rt, hv, taped, 1, s->dn, rs->dn, gm->wgate, rgl->wgate,
					ffn_product_grad(st, s, 0), ffn_product_grad(st, rs, 0), a->n2,
					ra->n2, w->wgate, rw->wgate, N, C, F);
		rop_linear_pair(st, rt, hv, taped, !ar->gated, s->dn, rs->dn, gm->wup, rgl->wup,
				ffn_product_grad(st, s, 1), ffn_product_grad(st, rs, 1), a->n2, ra->n2,
				w->wup, rw->wup, N, C, F);
		tape_io(st, tape, taped, at + nF, s->dn, nC);
		rop_block_norm_pair(st, rt, hv, 0, s->dres, rs->dres, rgl->ffn_norm, rgl->ffn_norm_bias,
				    s->dn, rs->dn, a->x_mid, ra->x_mid, w->ffn_norm, rw->ffn_norm,
				    a->n2_mean, a->n2_rstd, ra->n2_mean, ra->n2_rstd, N, C);

		/* x_mid = x_in + post(o(attn)): dres and R{dres} flow to x_in */
		rop_post_norm(st, rt, hv, &dy, &rdy, rgl->attn_post_norm, a->attn_y, ra->attn_y,
			      w->attn_post_norm, rw->attn_post_norm, a->attn_post_rstd,
			      ra->attn_post_rstd, N, C);
		bias(ops, ctx, (real *)rdy, rgl->o_bias, N, C, 1);
		rop_linear_pair(st, rt, hv, taped, 1, nev ? s->dq : s->dq2, nev ? rs->dq : rs->dq2, gm->wo,
				rgl->wo, dy, rdy, nev ? a->o_in : a->att_out,
				nev ? ra->o_in : ra->att_out, w->wo, rw->wo, N, Q, C);
		tape_io(st, tape, taped, at + nF + nC, nev ? s->dq : s->dq2, nQ);
		if (nev)
			rop_rmsnorm_pair(st, rt, hv, 1, s->dq2, rs->dq2, rgl->o_in_norm, s->dq, rs->dq,
					 a->att_out, ra->att_out, w->o_in_norm, rw->o_in_norm,
					 a->o_in_rstd, ra->o_in_rstd, N, Q);
		ops->zero(ctx, rs->dq, nQ);
		ops->zero(ctx, rs->dk, nK);
		ops->zero(ctx, rs->dv, nK);
		if (hv && !taped) {
			ops->zero(ctx, s->dq, nQ);
			ops->zero(ctx, s->dk, nK);
			ops->zero(ctx, s->dv, nK);
		}
		rop->attention_backward(rctx, taped ? NULL : s->dq, taped ? NULL : s->dk,
					taped ? NULL : s->dv, rs->dq, rs->dk, rs->dv, PRIMAL(s->dq2),
					rs->dq2, a->q, a->k, a->v, ra->q, ra->k, ra->v, a->att, ra->att,
					a->att_tanh, B, T, H, KV, hd, ATTN_ARGS(st));
		tape_io(st, tape, taped, at + nF + nC + nQ, s->dq, nQ);
		tape_io(st, tape, taped, at + nF + nC + 2 * nQ, s->dk, nK);
		tape_io(st, tape, taped, at + nF + nC + 2 * nQ + nK, s->dv, nK);
		if (!ar->pos_embed) {
			ops->rope(ctx, rs->dq, B, T, H, hd, 1);
			ops->rope(ctx, rs->dk, B, T, KV, hd, 1);
		}
		if (hv && !ar->pos_embed) {
			ops->rope(ctx, s->dq, B, T, H, hd, 1);
			ops->rope(ctx, s->dk, B, T, KV, hd, 1);
		}
		if (c->qk_norm) {
			/* through the per-head norms to d(q_lin), d(k_lin) */
			rop_rmsnorm_pair(st, rt, hv, 1, s->dq2, rs->dq2, rgl->q_norm, s->dq, rs->dq,
					 a->q_lin, ra->q_lin, w->q_norm, rw->q_norm, a->q_rstd,
					 ra->q_rstd, (int64_t)N * H, hd);
			rop_rmsnorm_pair(st, rt, hv, 1, s->dk2, rs->dk2, rgl->k_norm, s->dk, rs->dk,
					 a->k_lin, ra->k_lin, w->k_norm, rw->k_norm, a->k_rstd,
					 ra->k_rstd, (int64_t)N * KV, hd);
			ops->copy(ctx, rs->dq, rs->dq2, nQ);
			ops->copy(ctx, rs->dk, rs->dk2, nK);
			if (hv) {
				ops->copy(ctx, s->dq, s->dq2, nQ);
				ops->copy(ctx, s->dk, s->dk2, nK);
			}
		}
		if (st->dnp_attn) {
			/* through v's per-head norm to d(v_lin) */
			rop_rmsnorm_pair(st, rt, hv, 1, s->dk2, rs->dk2, rgl->v_norm, s->dv, rs->dv,
					 a->v_lin, ra->v_lin, w->v_norm, rw->v_norm, a->v_rstd,
					 ra->v_rstd, (int64_t)N * KV, hd);
			ops->copy(ctx, rs->dv, rs->dk2, nK);
			if (hv)
				ops->copy(ctx, s->dv, s->dk2, nK);
		}
		/* R{db} = R{dy}'s column sums (the primal's are not wanted) */
		qkv_bias(ops, ctx, rgl, rs->dq, rs->dk, rs->dv, N, Q, K, 1);
		rop_linear_pair(st, rt, hv, taped, 1, s->dn, rs->dn, gm->wq, rgl->wq, s->dq, rs->dq, a->n1,
				ra->n1, w->wq, rw->wq, N, C, Q);
		rop_linear_pair(st, rt, hv, taped, 0, s->dn, rs->dn, gm->wk, rgl->wk, s->dk, rs->dk, a->n1,
				ra->n1, w->wk, rw->wk, N, C, K);
		rop_linear_pair(st, rt, hv, taped, 0, s->dn, rs->dn, gm->wv, rgl->wv, s->dv, rs->dv, a->n1,
				ra->n1, w->wv, rw->wv, N, C, K);
		tape_io(st, tape, taped, at + nF + nC + 2 * nQ + 2 * nK, s->dn, nC);
		if (tape)
			tape->kept[l] = 1;
		rop_block_norm_pair(st, rt, hv, 0, s->dres, rs->dres, rgl->attn_norm, rgl->attn_norm_bias,
				    s->dn, rs->dn, a->x_in, ra->x_in, w->attn_norm, rw->attn_norm,
				    a->n1_mean, a->n1_rstd, ra->n1_mean, ra->n1_rstd, N, C);
	}
	if (rt->first < 0) {
		bias(ops, ctx, rs->dres, rg->pos_embed, B, T * C, 1);
		if (ar->embed_scale)
			ops->scale(ctx, rs->dres, nC, (real)ar->embed_scale);
		if (rg->embed)
			ops->embed_backward(ctx, rg->embed, rs->dres, tokens, N, C);
	}
	/* multipliers: from R{dL/dW_eff} to R{dL/dW} and R{dL/dmult} */
	if (rop->mult_backward)
		rop->mult_backward(rctx);
#undef PRIMAL
}
