/*
 * step.c - the model's forward and backward passes, once, for every back
 * end (see step.h). The order of the operations here is the model's: a
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

void model_step_forward(const struct model_step *st, const int *tokens, const int *targets,
			int B, int T)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	const struct model_ptrs *p = st->p;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, F = (int)c->d_ff, V = (int)c->vocab_size;
	double eps = c->norm_eps;
	real *x;

	if (ops->update_effective)
		ops->update_effective(ctx);
	ops->embed(ctx, st->acts[0].x_in, tokens, p->embed, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	for (int l = 0; l < c->n_layers; l++) {
		struct layer_acts *a = &st->acts[l];
		const struct layer_ptrs *w = &p->layer[l];

		/* attention: x_mid = x_in + o(attn(rope(q(n1)), rope(k(n1)), v(n1))) */
		ops->rmsnorm(ctx, a->n1, a->n1_rstd, a->x_in, w->attn_norm, N, C, eps);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		/* q, k, v as three products: OpenBLAS's one product of the joined
		 * (Q + 2K, C) matrix rounds some elements otherwise than the
		 * three the GPU computes (the emulation is compared bit for bit
		 * with the CPU, t0064); the backward joins them where it can */
		ops->matmul(ctx, a->q_lin, a->n1, w->wq, N, C, Q);
		ops->matmul(ctx, a->k_lin, a->n1, w->wk, N, C, K);
		ops->matmul(ctx, a->v, a->n1, w->wv, N, C, K);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		if (c->qk_norm) {
			ops->rmsnorm(ctx, a->q, a->q_rstd, a->q_lin, w->q_norm, (int64_t)N * H, hd, eps);
			ops->rmsnorm(ctx, a->k, a->k_rstd, a->k_lin, w->k_norm, (int64_t)N * KV, hd, eps);
		} else {
			ops->copy(ctx, a->q, a->q_lin, (size_t)N * Q);
			ops->copy(ctx, a->k, a->k_lin, (size_t)N * K);
		}
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->rope(ctx, a->q, B, T, H, hd, 0);
		ops->rope(ctx, a->k, B, T, KV, hd, 0);
		ops->attention(ctx, a->att_out, a->att, a->q, a->k, a->v, B, T, H, KV, hd);
		lap(ops, ctx, MODEL_PHASE_ATTENTION);
		if (c->norm_everywhere) {
			ops->rmsnorm(ctx, a->o_in, a->o_in_rstd, a->att_out, w->o_in_norm, N, Q, eps);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul(ctx, a->attn_y, a->o_in, w->wo, N, Q, C);
		} else {
			ops->matmul(ctx, a->attn_y, a->att_out, w->wo, N, Q, C);
		}
		lap(ops, ctx, MODEL_PHASE_GEMM);
		ops->residual(ctx, a->x_mid, a->x_in, a->attn_y, (size_t)N * C);

		/* MLP: x_out = x_mid + down(silu(gate(n2)) * up(n2)) */
		ops->rmsnorm(ctx, a->n2, a->n2_rstd, a->x_mid, w->ffn_norm, N, C, eps);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul(ctx, a->gate, a->n2, w->wgate, N, C, F);
		ops->matmul(ctx, a->up, a->n2, w->wup, N, C, F);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		ops->swiglu(ctx, a->h, a->gate, a->up, (size_t)N * F);
		if (c->norm_everywhere)
			ops->rmsnorm(ctx, a->d_in, a->d_in_rstd, a->h, w->down_in_norm, N, F, eps);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->matmul(ctx, a->mlp_y, c->norm_everywhere ? a->d_in : a->h, w->wdown, N, F, C);
		lap(ops, ctx, MODEL_PHASE_GEMM);
		x = l + 1 < c->n_layers ? st->acts[l + 1].x_in : st->x_final;
		ops->residual(ctx, x, a->x_mid, a->mlp_y, (size_t)N * C);
	}
	ops->rmsnorm(ctx, st->nf, st->nf_rstd, st->x_final, p->final_norm, N, C, eps);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	ops->matmul(ctx, st->logits, st->nf, p->lm_head, N, C, V);
	lap(ops, ctx, MODEL_PHASE_GEMM);
	ops->loss(ctx, st->losses, st->logits, targets, N, V);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
}

void model_step_backward(const struct model_step *st, const int *tokens, const int *targets,
			 int B, int T, double loss_scale)
{
	const struct model_ops *ops = st->ops;
	void *ctx = st->ctx;
	const struct sw_config *c = st->c;
	const struct model_ptrs *p = st->p, *g = st->g;
	int N = B * T, C = (int)c->d_model, H = (int)c->n_heads, KV = (int)c->n_kv_heads,
	    hd = (int)c->head_dim, Q = H * hd, K = KV * hd, F = (int)c->d_ff, V = (int)c->vocab_size;
	const struct model_step_scratch *s = &st->s;
	real *dres = s->dres, *dn = s->dn, *dF1 = s->dF1, *dF2 = s->dF2, *dq = s->dq,
	     *dq2 = s->dq2, *dk = s->dk, *dk2 = s->dk2, *dv = s->dv;
	size_t nC = (size_t)N * C, nF = (size_t)N * F, nQ = (size_t)N * Q, nK = (size_t)N * K;

	/* the loss is the mean over N tokens */
	ops->loss_backward(ctx, st->logits, targets, N, V, (real)(loss_scale / N));
	ops->zero(ctx, dn, nC);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	ops->matmul_backward(ctx, dn, g->lm_head, st->logits, st->nf, p->lm_head, N, C, V);
	lap(ops, ctx, MODEL_PHASE_GEMM);
	ops->zero(ctx, dres, nC);
	ops->rmsnorm_backward(ctx, dres, g->final_norm, dn, st->x_final, p->final_norm, st->nf_rstd,
			      N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (ops->grads_ready)
		ops->grads_ready(ctx, (int)c->n_layers);

	for (int l = (int)c->n_layers - 1; l >= 0; l--) {
		struct layer_acts *a = &st->acts[l];
		const struct layer_ptrs *w = &p->layer[l], *gl = &g->layer[l];

		/* x_out = x_mid + down(h): dres flows to x_mid unchanged */
		ops->zero(ctx, dF1, nF);
		if (c->norm_everywhere) {
			ops->zero(ctx, dF2, nF);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dF2, gl->wdown, dres, a->d_in, w->wdown, N, F, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
			ops->rmsnorm_backward(ctx, dF1, gl->down_in_norm, dF2, a->h, w->down_in_norm,
					      a->d_in_rstd, N, F);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		} else {
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dF1, gl->wdown, dres, a->h, w->wdown, N, F, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
		}
		ops->zero(ctx, dn, nC);
		ops->gate_up_backward(ctx, dn, gl->wgate, gl->wup, dF1, a->gate, a->up, a->n2,
				      w->wgate, w->wup, N, C, F);
		ops->rmsnorm_backward(ctx, dres, gl->ffn_norm, dn, a->x_mid, w->ffn_norm, a->n2_rstd,
				      N, C);

		/* x_mid = x_in + o(attn): dres flows to x_in unchanged */
		ops->zero(ctx, dq2, nQ);
		if (c->norm_everywhere) {
			ops->zero(ctx, dq, nQ);
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dq, gl->wo, dres, a->o_in, w->wo, N, Q, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
			ops->rmsnorm_backward(ctx, dq2, gl->o_in_norm, dq, a->att_out, w->o_in_norm,
					      a->o_in_rstd, N, Q);
		} else {
			lap(ops, ctx, MODEL_PHASE_ELEMWISE);
			ops->matmul_backward(ctx, dq2, gl->wo, dres, a->att_out, w->wo, N, Q, C);
			lap(ops, ctx, MODEL_PHASE_GEMM);
		}
		ops->zero(ctx, dq, nQ);
		ops->zero(ctx, dk, nK);
		ops->zero(ctx, dv, nK);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		ops->attention_backward(ctx, dq, dk, dv, dq2, a->q, a->k, a->v, a->att, B, T, H, KV, hd);
		ops->rope(ctx, dq, B, T, H, hd, 1);
		ops->rope(ctx, dk, B, T, KV, hd, 1);
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
		ops->zero(ctx, dn, nC);
		ops->qkv_backward(ctx, dn, gl->wq, gl->wk, gl->wv, dq, dk, dv, a->n1, w->wq, w->wk,
				  w->wv, N, C, Q, K);
		ops->rmsnorm_backward(ctx, dres, gl->attn_norm, dn, a->x_in, w->attn_norm, a->n1_rstd,
				      N, C);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
		if (ops->grads_ready)
			ops->grads_ready(ctx, l);
	}
	ops->embed_backward(ctx, g->embed, dres, tokens, N, C);
	lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	if (ops->grads_ready)
		ops->grads_ready(ctx, -1);
	if (ops->mult_backward) {
		ops->mult_backward(ctx);
		lap(ops, ctx, MODEL_PHASE_ELEMWISE);
	}
}
