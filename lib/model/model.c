/*
 * model.c - the Llama model on the CPU (see model.h): the model built
 * from its config (the layout: layout.c), its activations, and the CPU
 * as the step's back end: the table of the step's operations (step.h),
 * each running the CPU's kernels (cpukern.c). The order the model runs
 * them in is step.c's, for every back end.
 */
#include "model.h"
#include "../base/elemmath.h"
#include "../base/family.h"
#include "cpukern.h"
#include "layout.h"
#include "modelint.h"
#include "step.h"
#include "../base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* elemmath.h's activations take model.h's enum by value */
_Static_assert((int)MODEL_ACT_SILU == ELEM_ACT_SILU && (int)MODEL_ACT_GELU_TANH == ELEM_ACT_GELU_TANH &&
	       (int)MODEL_ACT_GELU == ELEM_ACT_GELU, "enum model_act is elemmath.h's ELEM_ACT_");

int model_build(struct model *m, const struct sw_config *c, struct sw_err *err)
{
	int rc;

	memset(m, 0, sizeof *m);
	m->c = *c;
	/* a family read for its matrices, or none known: said by name
	 * before its config, which holds only what a listing needs */
	if (!family_computed(c->arch))
		return sw_fail(err, SW_EDATA, "architecture '%s' is read for its matrices only "
			       "(sw-ls, sw-norms, sw-spectrum); the model computes %s",
			       c->arch[0] ? c->arch : "(none)", FAMILY_COMPUTED_LIST);
	if ((rc = arch_config_check(c, err)))
		return rc;
	/* what the model computes: a function it does not is refused by name */
	if ((rc = arch_model_check(c, err)))
		return rc;
	/* arch_multipliers_parse's order; the config was checked above */
	m->mult = (enum mult_mode)arch_multipliers_parse(c->multipliers);
	m->arch = model_arch_of(c);
	if (arch_scale_design_parse(c->scale_design, &m->design, NULL, 0, (char[64]){0}))
		return sw_fail(err, SW_ESOFTWARE, "model: scale_design '%s'", c->scale_design);
	if ((rc = model_layout(m, err))) {
		model_free(m);
		return rc;
	}
	if (c->n_experts && (!(m->moe_fbar = calloc((size_t)c->n_experts, sizeof *m->moe_fbar)) ||
			     !(m->moe_list = calloc((size_t)c->n_layers, sizeof *m->moe_list)))) {
		model_free(m);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	return SW_OK;
}

/* the mixture of experts' activations of every layer (NULL where dense) */
static void free_moe_acts(struct model *m)
{
	for (int l = 0; m->acts && l < m->c.n_layers; l++) {
		moe_acts_free(m->acts[l].moe);
		m->acts[l].moe = NULL;
	}
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
	free_moe_acts(m);
	free(m->moe_fbar);
	free(m->moe_list);
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
		/* a linear of one row (the shared expert's gate, (1, C)) is a
		 * matrix to initialize too */
		if (t->info.kind == SW_KIND_MATRIX || t->linear >= 0) {
			double s = arch_role_writes_residual(t->info.role) ? proj_std : std;
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
	struct model_arch a = model_arch_of(c);
	size_t gates = a.gated ? 1 : 0;
	size_t per_layer = N * C * 6 + N * Q * 5 + N * K * 3 + N * H + N * KV + N * 4 +
			   (size_t)B * H * T * T + N * F * (3 + gates);
	int dnp_attn, dnp_ffn;

	dnp_of(c, &dnp_attn, &dnp_ffn);
	per_layer += (dnp_attn ? N * K + N * KV : 0) + (dnp_ffn ? 2 * N * F + 2 * N : 0);
	/* the families' (model_alloc_acts): LayerNorm's means, the scores'
	 * tanh, the post-norms' outputs and rstd */
	per_layer += (a.layernorm ? 2 * N : 0) + (a.attn_softcap ? (size_t)B * H * T * T : 0) +
		     (a.post_norms ? 2 * N * C + 2 * N : 0);
	/* recomputing, what each layer keeps (model_alloc_acts): x_in, x_mid,
	 * q_lin, k_lin, v (or v_lin), gate and up (or their _lin; up alone
	 * without a gate); with post-norms the sublayers' outputs and the
	 * norms' rstd, computed with the products */
	size_t kept = N * C * 2 + N * Q + N * K * 2 + N * F * (1 + gates) +
		      (a.post_norms ? 2 * N * C + 2 * N : 0);

	*total = (recompute ? per_layer + (L - 1) * kept : per_layer * L) + N * C * 2 + N + N * V + N +
		 (a.layernorm ? N : 0) + (a.final_softcap ? N * V : 0);
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
	return (double)(total + scratch) * sizeof(real) +
	       (double)c->n_layers * (c->n_experts ? moe_acts_bytes(c, B * T) : 0);
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
	const struct model_arch *ar = &m->arch;

	if (B == m->B && T == m->T && m->acts_block && m->acts_recompute == m->recompute)
		return SW_OK;
	dnp_of(c, &dnp_attn, &dnp_ffn);
	if (c->seq_len && T > c->seq_len)
		return sw_fail(err, SW_EUSAGE, "sequence of %d tokens is longer than seq_len %lld",
			       T, (long long)c->seq_len);
	if ((rc = arch_window_check(c, T, err)))
		return rc;
	free_moe_acts(m);
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
				if (ar->gated)
					TAKE(a->gate, N * F);
				TAKE(a->up, N * F);
			}
			if (ar->post_norms) {
				TAKE(a->attn_y, N * C); TAKE(a->mlp_y, N * C);
				TAKE(a->attn_post_rstd, N); TAKE(a->mlp_post_rstd, N);
			}
			continue;
		}
		TAKE(a->x_in, N * C); TAKE(a->n1, N * C); TAKE(a->n1_rstd, N);
		TAKE(a->q_lin, N * Q); TAKE(a->k_lin, N * K); TAKE(a->q_rstd, N * H); TAKE(a->k_rstd, N * KV);
		TAKE(a->q, N * Q); TAKE(a->k, N * K); TAKE(a->v, N * K);
		TAKE(a->att, (size_t)B * H * T * T);
		TAKE(a->att_out, N * Q); TAKE(a->o_in, N * Q); TAKE(a->o_in_rstd, N);
		TAKE(a->attn_y, N * C); TAKE(a->x_mid, N * C); TAKE(a->n2, N * C); TAKE(a->n2_rstd, N);
		if (ar->gated)
			TAKE(a->gate, N * F);
		TAKE(a->up, N * F); TAKE(a->h, N * F); TAKE(a->d_in, N * F);
		TAKE(a->d_in_rstd, N); TAKE(a->mlp_y, N * C);
		/* the families' (acts_sizes) */
		if (ar->layernorm) {
			TAKE(a->n1_mean, N); TAKE(a->n2_mean, N);
		}
		if (ar->attn_softcap)
			TAKE(a->att_tanh, (size_t)B * H * T * T);
		if (ar->post_norms) {
			TAKE(a->attn_post, N * C); TAKE(a->attn_post_rstd, N);
			TAKE(a->mlp_post, N * C); TAKE(a->mlp_post_rstd, N);
		}
		if (dnp_attn) {
			TAKE(a->v_lin, N * K); TAKE(a->v_rstd, N * KV);
		}
		if (dnp_ffn) {
			TAKE(a->gate_lin, N * F); TAKE(a->up_lin, N * F);
			TAKE(a->gate_rstd, N); TAKE(a->up_rstd, N);
		}
	}
	/* a mixture of experts' layers keep their own (moe.h), recomputing or not */
	m->moe_count = 0;
	for (size_t l = 0; l < L; l++) {
		m->acts[l].moe = NULL;
		if (!arch_layer_is_moe(c, (int64_t)l))
			continue;
		if (!(m->acts[l].moe = moe_acts_alloc(c, (int)N))) {
			m->B = m->T = 0;
			return sw_fail(err, SW_ESOFTWARE, "out of memory for the experts' activations "
				       "of %d x %d tokens", B, T);
		}
		m->moe_list[m->moe_count++] = m->acts[l].moe;
	}
	TAKE(m->x_final, N * C); TAKE(m->nf, N * C); TAKE(m->nf_rstd, N);
	TAKE(m->logits, N * V); TAKE(m->losses, N);
	if (ar->layernorm)
		TAKE(m->nf_mean, N);
	if (ar->final_softcap)
		TAKE(m->logits_tanh, N * V);
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
		model_mult_apply(m->w_eff + m->eff_offset[i], m->params + m->tensors[l->tensor].offset,
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

static void cpu_bias(void *ctx, real *y, real *b, int64_t rows, int n, int backward)
{
	(void)ctx;
	model_bias(y, b, rows, n, backward);
}

static void cpu_rmsnorm(void *ctx, real *out, real *rstd, const real *inp, const real *gain,
			int64_t rows, int n, double eps)
{
	(void)ctx;
	model_rmsnorm_forward(out, rstd, inp, gain, (int)rows, n, eps);
}

static void cpu_layernorm(void *ctx, real *out, real *mean, real *rstd, const real *inp,
			  const real *gain, const real *bias, int64_t rows, int n, double eps)
{
	(void)ctx;
	model_layernorm_forward(out, mean, rstd, inp, gain, bias, (int)rows, n, eps);
}

static void cpu_matmul(void *ctx, real *out, const real *inp, const real *w, int N, int din, int dout)
{
	(void)ctx;
	model_matmul_forward(out, inp, w, N, din, dout);
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

static void cpu_attention(void *ctx, real *out, real *att, real *att_tanh, const real *q,
			  const real *k, const real *v, int B, int T, int H, int KV, int hd,
			  real scale, real softcap)
{
	(void)ctx;
	model_attention_forward(out, att, att_tanh, q, k, v, B, T, H, KV, hd, scale, softcap);
}

static void cpu_residual(void *ctx, real *out, const real *a, const real *b, size_t n)
{
	(void)ctx;
	model_residual_forward(out, a, b, n);
}

static void cpu_swiglu(void *ctx, real *h, const real *gate, const real *up, size_t n,
		       enum model_act act)
{
	(void)ctx;
	model_swiglu_forward(h, gate, up, n, (int)act);
}

static void cpu_swiglu_backward(void *ctx, real *dgate, real *dup, const real *dh,
				const real *gate, const real *up, size_t n, enum model_act act)
{
	(void)ctx;
	model_swiglu_backward(dgate, dup, dh, gate, up, n, (int)act);
}

static void cpu_act(void *ctx, real *h, const real *x, size_t n, enum model_act act)
{
	(void)ctx;
	model_act_forward(h, x, n, (int)act);
}

static void cpu_act_backward(void *ctx, real *dx, const real *dh, const real *x, size_t n,
			     enum model_act act)
{
	(void)ctx;
	model_act_backward(dx, dh, x, n, (int)act);
}

static void cpu_scale(void *ctx, real *x, size_t n, real s)
{
	(void)ctx;
	model_scale(x, n, s);
}

static void cpu_softcap(void *ctx, real *x, real *t, size_t n, real cap, int backward)
{
	(void)ctx;
	if (backward)
		model_softcap_backward(x, t, n);
	else
		model_softcap_forward(x, t, n, cap);
}

static void cpu_loss(void *ctx, real *losses, real *probs, const int *targets, int N, int V)
{
	(void)ctx;
	model_softmax_crossentropy_forward(losses, probs, targets, N, V);
}

static void cpu_zero(void *ctx, real *x, size_t n)
{
	(void)ctx;
	model_zero(x, n);
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

static void cpu_layernorm_backward(void *ctx, real *dinp, real *dgain, real *dbias,
				   const real *dout, const real *inp, const real *gain,
				   const real *mean, const real *rstd, int64_t rows, int n)
{
	(void)ctx;
	model_layernorm_backward(dinp, dgain, dbias, dout, inp, gain, mean, rstd, (int)rows, n);
}

real *model_att_scratch(const struct model *m)
{
	return cpu_scratch(m).att;
}

static void cpu_attention_backward(void *ctx, real *dq, real *dk, real *dv, const real *dout,
				   const real *q, const real *k, const real *v, const real *att,
				   const real *att_tanh, int B, int T, int H, int KV, int hd,
				   real scale, real softcap)
{
	model_attention_backward(dq, dk, dv, cpu_scratch(ctx).att, dout, q, k, v, att, att_tanh, B, T,
				 H, KV, hd, scale, softcap);
}

/* SwiGLU's backward into the fused (N, 2F) gradient, then one product for
 * both weights (gate and up adjacent in the grads block, as in params) */
static void cpu_gate_up_backward(void *ctx, real *dn, real *dgate, real *dup, const real *dh,
				 const real *gate, const real *up, const real *inp,
				 const real *wgate, const real *wup, int N, int C, int F,
				 enum model_act act)
{
	struct model *m = ctx;
	real *dgu = cpu_scratch(m).dgu;
	const int parts[2] = {F, F};

	(void)dup;
	(void)wup;
	model_swiglu_backward_fused(dgu, dh, gate, up, N, F, (int)act);
	LAP(ELEMWISE);
	model_matmul_backward_parts(dn, dgate, dgu, inp, wgate, N, C, parts, 2);
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
	model_qkv_join(dqkv, dq, dk, dv, N, Q, K);
	LAP(ELEMWISE);
	model_matmul_backward_parts(dn, dwq, dqkv, inp, wq, N, C, parts, 3);
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
		model_mult_backward(m->grads + wt->offset, drow, dcol, m->dw_eff + m->eff_offset[i],
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

static void cpu_moe(void *ctx, int l, real *y, const real *x, int N)
{
	struct model *m = ctx;

	moe_forward(&m->c, &m->p.layer[l], m->acts[l].moe, y, x, N, (int)m->arch.act,
		    m->c.moe_renorm);
}

/* the number of MoE layers, whose routers the load-balancing loss pools */
static int moe_layers(const struct model *m)
{
	return m->c.n_experts ? (int)(m->c.n_layers - m->c.moe_dense_layers) : 0;
}

static void cpu_moe_backward(void *ctx, int l, real *dx, const real *dy, const real *x, int N,
			     double loss_scale)
{
	struct model *m = ctx;
	/* d(coef aux)/dp_{t,e} = coef E F_e / (layers N), times the loss scale */
	double aux_scale = loss_scale * m->c.moe_aux_coef * (double)m->c.n_experts /
			   ((double)moe_layers(m) * N);

	moe_backward(&m->c, &m->p.layer[l], &m->g.layer[l], m->acts[l].moe, dx, dy, x, N,
		     (int)m->arch.act, m->c.moe_renorm, m->moe_fbar, aux_scale);
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
	.layernorm = cpu_layernorm,
	.scale = cpu_scale,
	.softcap = cpu_softcap,
	.matmul = cpu_matmul,
	.copy = cpu_copy,
	.bias = cpu_bias,
	.rope = cpu_rope,
	.attention = cpu_attention,
	.residual = cpu_residual,
	.swiglu = cpu_swiglu,
	.swiglu_backward = cpu_swiglu_backward,
	.act = cpu_act,
	.act_backward = cpu_act_backward,
	.loss = cpu_loss,
	.zero = cpu_zero,
	.loss_backward = cpu_loss_backward,
	.matmul_backward = cpu_matmul_backward,
	.rmsnorm_backward = cpu_rmsnorm_backward,
	.layernorm_backward = cpu_layernorm_backward,
	.attention_backward = cpu_attention_backward,
	.gate_up_backward = cpu_gate_up_backward,
	.qkv_backward = cpu_qkv_backward,
	.embed_backward = cpu_embed_backward,
	.grads_ready = cpu_grads_ready,
	.mult_backward = cpu_mult_backward,
	.layer_weights = cpu_layer_weights,
	.moe = cpu_moe,
	.moe_backward = cpu_moe_backward,
};

/* the CPU model as the step's back end */
struct model_step model_cpu_step(struct model *m)
{
	struct model_step st = {
		.ops = &cpu_ops, .ctx = m, .c = &m->c, .a = &m->arch, .p = &m->p, .g = &m->g,
		.acts = m->acts, .x_final = m->x_final, .nf = m->nf, .nf_rstd = m->nf_rstd,
		.nf_mean = m->nf_mean, .logits = m->logits, .logits_tanh = m->logits_tanh,
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
	if (m->c.n_experts)
		m->aux_loss = m->moe_count ? moe_aux_loss(m->moe_list, m->moe_count, m->moe_fbar) : 0;
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
		model_zero(m->dw_eff, m->eff_size);
	model_step_backward(&st, tokens, targets, m->B, m->T, loss_scale);
}
