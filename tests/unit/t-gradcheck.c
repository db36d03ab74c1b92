/*
 * Gradient check of the model's backward pass (lib/model/model.c) against
 * central finite differences, in double precision: this file compiles
 * the CPU model (lib/model/cpukern.c, layout.c, model.c) itself with
 * real = double. Criterion, stated per the issue:
 * |analytic - numeric| <= 1e-4 * max(|analytic|, |numeric|) + 1e-9 for
 * sampled entries of every parameter tensor, in every model variant:
 * GQA, untied and tied heads, QK-norm, scalar/row/column multipliers,
 * norm-everywhere, no scale vectors, and the other families' steps
 * (model_variants.h: GPT-2, Gemma, Gemma2). Where a variant soft-caps,
 * the caps are shown to bend: some |tanh(x / cap)| of the scores and of
 * the logits is above 0.5 (x / cap > 0.55, tanh 9% or more below
 * linear), so the check is not of a cap that is the identity.
 */
#define SW_REAL_DOUBLE
#include "../../lib/model/cpukern.c"
#include "../../lib/model/layout.c"
#include "../../lib/model/model.c"
#include "../../lib/model/moe.c"
#include "../../lib/model/step.c"

#include "model_variants.h"
#include "tap.h"

/* the objective the backward differentiates: the loss, and with a
 * mixture of experts its weighted load-balancing loss */
static double loss_at(struct model *m, const int *tok, const int *tgt, int B, int T)
{
	model_forward(m, tok, tgt, B, T);
	return m->loss + (m->c.n_experts ? m->c.moe_aux_coef * m->aux_loss : 0);
}

static void check_variant(const char *what, struct sw_config c)
{
	enum { B = 2, T = 5 };
	int tok[B * T], tgt[B * T];
	struct model m;
	struct sw_err err;
	struct sw_rng r;
	double worst = 0;
	const char *worst_name = "";
	int checked = 0;

	if (model_build(&m, &c, &err) || model_alloc_acts(&m, B, T, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	rng_seed(&r, 7);
	/* generic values: matrices N(0, 0.3^2), gains and multipliers 1 +- 0.3 */
	for (int i = 0; i < m.ntensors; i++) {
		struct model_tensor *t = &m.tensors[i];
		for (size_t k = 0; k < t->numel; k++)
			m.params[t->offset + k] = t->info.kind == SW_KIND_MATRIX ? 0.3 * rng_normal(&r)
										 : 1 + 0.3 * rng_normal(&r);
	}
	for (int i = 0; i < B * T; i++) {
		tok[i] = (int)(rng_next(&r) % (uint64_t)c.vocab_size);
		tgt[i] = (int)(rng_next(&r) % (uint64_t)c.vocab_size);
	}
	model_zero_grad(&m);
	model_forward(&m, tok, tgt, B, T);
	if (m.arch.attn_softcap || m.arch.final_softcap) {
		double ta = 0, tf = 0;
		for (size_t l = 0; m.arch.attn_softcap && l < (size_t)c.n_layers; l++)
			for (size_t k = 0; k < (size_t)B * c.n_heads * T * T; k++)
				ta = fmax(ta, fabs(m.acts[l].att_tanh[k]));
		for (size_t k = 0; m.arch.final_softcap && k < (size_t)B * T * c.vocab_size; k++)
			tf = fmax(tf, fabs(m.logits_tanh[k]));
		ok((!m.arch.attn_softcap || ta > 0.5) && (!m.arch.final_softcap || tf > 0.5),
		   "%s: the soft-caps bend: |tanh| up to %.2f (scores), %.2f (logits)", what, ta, tf);
	}
	model_backward(&m, tok, tgt, 1.0);
	for (int i = 0; i < m.ntensors; i++) {
		struct model_tensor *t = &m.tensors[i];
		size_t picks = t->numel < 5 ? t->numel : 5;
		for (size_t s = 0; s < picks; s++) {
			size_t k = t->offset + (s == 0 ? 0 : (size_t)(rng_next(&r) % t->numel));
			double keep = m.params[k], h = 1e-5, a = m.grads[k], num, d;
			m.params[k] = keep + h;
			num = loss_at(&m, tok, tgt, B, T);
			m.params[k] = keep - h;
			num = (num - loss_at(&m, tok, tgt, B, T)) / (2 * h);
			m.params[k] = keep;
			d = fabs(a - num) / (fmax(fabs(a), fabs(num)) + 1e-5);
			if (fabs(a - num) > 1e-4 * fmax(fabs(a), fabs(num)) + 1e-9 && d > worst) {
				worst = d;
				worst_name = t->info.name;
			}
			checked++;
		}
	}
	ok(worst == 0, "%s: %d entries of %d tensors agree with finite differences%s%s",
	   what, checked, m.ntensors, worst ? "; worst: " : "", worst_name);
	model_free(&m);
}

int main(void)
{
	const struct sw_config base = {
		.arch = "llama", .vocab_size = 11, .d_model = 8, .n_layers = 2, .n_heads = 4,
		.n_kv_heads = 2, .head_dim = 4, .d_ff = 12, .seq_len = 8, .rope_theta = 10000,
		.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
	};

	for_each_model_variant(check_variant);
	for_each_reparam_variant(check_variant);
	/* a mixture of experts (moe.h): the routing is held by the step of
	 * 1e-5, which moves no router probability across another at these
	 * generic values */
	{
		struct sw_config c = base;
		c.n_experts = 4, c.n_experts_active = 2, c.moe_d_ff = 6, c.moe_renorm = 1;
		c.moe_aux_coef = 0.1;
		check_variant("moe 4:2, renormalized, aux 0.1", c);
		c.n_shared_experts = 1, c.shared_d_ff = 5, c.moe_renorm = 0, c.moe_aux_coef = 0.3;
		check_variant("moe 4:2:1, not renormalized, aux 0.3", c);
		c.moe_dense_layers = 1, c.n_experts_active = 1, c.moe_renorm = 1;
		check_variant("moe 4:1:1 behind a dense layer", c);
		/* the attention's scale design and every gain reparameterized:
		 * the ffn_norm's gain (OR) before the router and the experts */
		c.moe_dense_layers = 0, c.n_experts_active = 2, c.qk_norm = 1;
		snprintf(c.scale_design, sizeof c.scale_design, "attn=hg");
		snprintf(c.scale_reparam, sizeof c.scale_reparam, "or");
		check_variant("moe 4:2:1, attn=hg, gains OR, QK-norm", c);
	}
	/* the check is not vacuous: a wrong gradient is caught */
	{
		struct model m;
		struct sw_err err;
		int tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, tgt[10] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0};
		model_build(&m, &base, &err);
		model_alloc_acts(&m, 2, 5, &err);
		model_init(&m, 3);
		model_zero_grad(&m);
		model_forward(&m, tok, tgt, 2, 5);
		model_backward(&m, tok, tgt, 1.0);
		double a = m.grads[m.tensors[3].offset], h = 1e-5, keep = m.params[m.tensors[3].offset], num;
		m.params[m.tensors[3].offset] = keep + h;
		num = loss_at(&m, tok, tgt, 2, 5);
		m.params[m.tensors[3].offset] = keep - h;
		num = (num - loss_at(&m, tok, tgt, 2, 5)) / (2 * h);
		ok(fabs(1.01 * a - num) > 1e-4 * fabs(num), "a gradient off by 1%% would fail the criterion");
		model_free(&m);
	}
	return tap_done();
}
