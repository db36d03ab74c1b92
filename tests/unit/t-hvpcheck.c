/*
 * The R-operator of lib/model/modelhvp.c (model_rop_forward, model_rop_backward)
 * against central finite differences of the gradient, in double precision:
 * this file compiles the CPU model (lib/model/cpukern.c, layout.c,
 * model.c) itself with real = double, as
 * t-gradcheck.c does. In every model variant:
 *   - H v for a random v over every parameter, per tensor:
 *     ||H v - D|| <= 1e-6 ||D|| + 1e-9 with D central differences of the
 *     gradient along v, Richardson-extrapolated (error of order h^4);
 *   - H v restricted to each tensor (want = that tensor, v zero elsewhere):
 *     the tensor's rows of H v, the same bound;
 *   - the Gauss-Newton product: w^T G v against
 *     (1/N) sum_n sum_i p_i (J w)_i (J v)_i with J the Jacobian of log p by
 *     central differences (G = J_z^T (diag p - p p^T) J_z / N, and
 *     (diag p - p p^T) J_z = diag(p) J_logp), to 1e-8; and v^T G v >= 0;
 *   - a second product on the same batch with the primal dlogits kept
 *     apart (no new forward pass) equal to the first; and products with
 *     the primal's gradients taped (kept between products) the same bits
 *     as without.
 * The variants are model_variants.h's (GPT-2, Gemma and Gemma2 among
 * them), and beside them the other families' where their tangents meet
 * the rest: GPT-2's LayerNorm without its gain and bias, with
 * multipliers on its biased linears, its head untied; Gemma2 untied, with
 * GQA, each soft-cap alone.
 */
#define SW_REAL_DOUBLE
#include "../../lib/model/cpukern.c"
#include "../../lib/model/layout.c"
#include "../../lib/model/model.c"
#include "../../lib/model/moe.c"
#include "../../lib/model/step.c"
#include "../../lib/model/modelhvp.c"

#include "model_variants.h"
#include "tap.h"

enum { B = 2, T = 5, N = B * T };

/* what a function of theta + h v gives: the gradient (targets given) or
 * log p (N x V, targets NULL) */
static size_t value_at(struct model *m, const double *theta, const double *v, double h,
		       const int *tok, const int *tgt, double *out)
{
	size_t NV = (size_t)N * m->c.vocab_size;

	for (size_t k = 0; k < m->nparams; k++)
		m->params[k] = theta[k] + h * v[k];
	if (!tgt) {
		model_forward(m, tok, NULL, B, T);
		for (size_t k = 0; k < NV; k++)
			out[k] = log(m->logits[k]);
		return NV;
	}
	model_zero_grad(m);
	model_forward(m, tok, tgt, B, T);
	model_backward(m, tok, tgt, 1.0);
	memcpy(out, m->grads, m->nparams * sizeof *out);
	return m->nparams;
}

/* Its derivative along v by central differences, Richardson-extrapolated:
 * (4 D(h/2) - D(h)) / 3 with D(h) = (f(theta + h v) - f(theta - h v)) / 2h
 * leaves an error of order h^4 (h = 1e-4): H v from the gradient, J v
 * from log p. */
static void derivative(struct model *m, const double *theta, const double *v, const int *tok,
		       const int *tgt, double *fp, double *fm, double *out)
{
	double h = 1e-4;
	size_t n = value_at(m, theta, v, h, tok, tgt, fp);

	value_at(m, theta, v, -h, tok, tgt, fm);
	for (size_t k = 0; k < n; k++)
		out[k] = -(fp[k] - fm[k]) / (2 * h) / 3;
	value_at(m, theta, v, h / 2, tok, tgt, fp);
	value_at(m, theta, v, -h / 2, tok, tgt, fm);
	for (size_t k = 0; k < n; k++)
		out[k] += 4 * (fp[k] - fm[k]) / h / 3;
}

/* H v (or G v) by the R-operator at theta, want as given; with
 * reparameterized gains, as sw-hessian runs it: dL/dgamma first (the
 * Hessian's), the gains' tangents, the products, H v's entries of their
 * directions and magnitudes */
static void rop_at(struct model *m, struct model *rm, const double *theta, const double *v,
		   const int *tok, const int *tgt, int gn, const unsigned char *want, double *hv)
{
	unsigned char *rw = malloc((size_t)m->ntensors + 1);
	real *gg = m->nreparams && !gn ? malloc(m->nparams * sizeof *gg) : NULL;

	memcpy(m->params, theta, m->nparams * sizeof *theta);
	memcpy(rm->params, v, m->nparams * sizeof *v);
	model_forward(m, tok, tgt, B, T);       /* the gains of theta */
	if (gg) {
		model_zero_grad(m);
		m->keep_gain_grads = 1;
		model_backward(m, tok, tgt, 1.0);
		m->keep_gain_grads = 0;
		memcpy(gg, m->grads, m->nparams * sizeof *gg);
		model_forward(m, tok, tgt, B, T);
	}
	model_rop_gains_tangent(m, rm->params, want, rw);
	model_zero_grad(rm);
	model_rop_forward(m, rm, tok, m->nreparams ? rw : want);
	model_rop_backward(m, rm, tok, tgt, 1.0, gn, m->nreparams ? rw : want, NULL, NULL);
	model_rop_gains_backward(m, rm->params, rm->grads, gg, want);
	memcpy(hv, rm->grads, m->nparams * sizeof *hv);
	free(gg);
	free(rw);
}

/* H v on the forward pass already run at theta, dl its primal
 * dL/dlogits (model_rop_backward's), with the tape given or none */
static void kept_product(struct model *m, struct model *rm, const double *v, const int *tok,
			 const int *tgt, const unsigned char *want, real *dl,
			 struct model_rop_tape *tape, double *hv)
{
	memcpy(rm->params, v, m->nparams * sizeof *v);
	model_zero_grad(rm);
	model_rop_forward(m, rm, tok, want);
	model_rop_backward(m, rm, tok, tgt, 1.0, 0, want, dl, tape);
	memcpy(hv, rm->grads, m->nparams * sizeof *hv);
}

/* worst relative error over tensors (only want's, if given) */
static double worst_error(const struct model *m, const double *got, const double *ref,
			  const unsigned char *want, const char **name)
{
	double worst = 0;

	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		double d = 0, r = 0, e;
		/* a reparameterized gain is no parameter: its direction and
		 * magnitude are (the gradient leaves its entries 0) */
		if ((want && !want[i]) || t->derived)
			continue;
		for (size_t k = t->offset; k < t->offset + t->numel; k++) {
			d += (got[k] - ref[k]) * (got[k] - ref[k]);
			r += ref[k] * ref[k];
		}
		e = sqrt(d) / (sqrt(r) + 1e-3);
		if (sqrt(d) > 1e-6 * sqrt(r) + 1e-9 && e > worst) {
			worst = e;
			*name = t->info.name;
		}
	}
	return worst;
}

static void check_variant(const char *what, struct sw_config c)
{
	int tok[N], tgt[N];
	struct model m, rm;
	struct sw_err err;
	struct sw_rng r;
	size_t P, NV;
	double *theta, *v, *w, *hv, *fd, *gp, *gm, *vt, *lpp, *lpm, *jv, *jw;
	unsigned char *want;
	const char *name = "";
	double worst;
	int bad = 0;

	if (model_build(&m, &c, &err) || model_alloc_acts(&m, B, T, &err) ||
	    model_rop_build(&rm, &m, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	P = m.nparams;
	NV = (size_t)N * c.vocab_size;
	/* one block: 8 vectors of parameters, 4 of log-probabilities */
	theta = calloc(8 * P + 4 * NV, sizeof *theta);
	v = theta + P; w = v + P; vt = w + P; hv = vt + P; fd = hv + P; gp = fd + P; gm = gp + P;
	lpp = gm + P; lpm = lpp + NV; jv = lpm + NV; jw = jv + NV;
	want = calloc((size_t)m.ntensors, 1);
	rng_seed(&r, 11);
	/* generic values: matrices N(0, 0.3^2), gains and multipliers 1 +- 0.3 */
	for (int i = 0; i < m.ntensors; i++) {
		struct model_tensor *t = &m.tensors[i];
		for (size_t k = 0; k < t->numel; k++)
			theta[t->offset + k] = t->info.kind == SW_KIND_MATRIX ? 0.3 * rng_normal(&r)
									 : 1 + 0.3 * rng_normal(&r);
	}
	/* ER's gains are e^(beta + alpha - mean alpha): alpha, beta 0 +- 0.3
	 * make them 1 +- 0.3ish like the others (at 1 +- 0.3 they are near
	 * e, and the products of several of them, HG+DP's, leave the
	 * differences' h^4 error above the bound) */
	for (int i = 0; i < m.nreparams; i++)
		for (int j = 0; j < 2 && m.reparams[i].mode == ARCH_REPARAM_ER; j++) {
			const struct model_tensor *t = &m.tensors[j ? m.reparams[i].mag : m.reparams[i].dir];
			for (size_t k = 0; k < t->numel; k++)
				theta[t->offset + k] = 0.3 * rng_normal(&r);
		}
	for (size_t k = 0; k < P; k++) {
		v[k] = rng_normal(&r);
		w[k] = rng_normal(&r);
	}
	for (int i = 0; i < m.ntensors; i++)   /* directions over the parameters */
		if (m.tensors[i].derived)
			for (size_t k = 0; k < m.tensors[i].numel; k++)
				v[m.tensors[i].offset + k] = w[m.tensors[i].offset + k] = 0;
	for (int i = 0; i < N; i++) {
		tok[i] = (int)(rng_next(&r) % (uint64_t)c.vocab_size);
		tgt[i] = (int)(rng_next(&r) % (uint64_t)c.vocab_size);
	}

	/* the whole Hessian */
	rop_at(&m, &rm, theta, v, tok, tgt, 0, NULL, hv);
	derivative(&m, theta, v, tok, tgt, gp, gm, fd);
	worst = worst_error(&m, hv, fd, NULL, &name);
	if (worst)
		diag("worst relative error %g", worst);
	ok(worst == 0, "%s: H v of every tensor agrees with differences of gradients%s%s", what,
	   worst ? "; worst: " : "", name);

	/* restricted to each tensor */
	for (int i = 0; i < m.ntensors && !bad; i++) {
		const struct model_tensor *t = &m.tensors[i];
		if (t->derived)
			continue;
		memset(want, 0, (size_t)m.ntensors);
		want[i] = 1;
		memset(vt, 0, P * sizeof *vt);
		memcpy(vt + t->offset, v + t->offset, t->numel * sizeof *vt);
		rop_at(&m, &rm, theta, vt, tok, tgt, 0, want, hv);
		derivative(&m, theta, vt, tok, tgt, gp, gm, fd);
		if (worst_error(&m, hv, fd, want, &name) > 0) {
			bad = 1;
			name = t->info.name;
		}
	}
	ok(!bad, "%s: H v restricted to each tensor, its rows%s%s", what, bad ? "; wrong: " : "",
	   bad ? name : "");

	/* Gauss-Newton: w^T G v */
	{
		double got = 0, ref = 0, vgv = 0;
		derivative(&m, theta, v, tok, NULL, lpp, lpm, jv);
		derivative(&m, theta, w, tok, NULL, lpp, lpm, jw);
		memcpy(m.params, theta, P * sizeof *theta);
		model_forward(&m, tok, NULL, B, T);
		for (size_t k = 0; k < NV; k++)
			ref += m.logits[k] * jw[k] * jv[k] / N;
		rop_at(&m, &rm, theta, v, tok, NULL, 1, NULL, hv);
		for (int i = 0; i < m.ntensors; i++)
			for (size_t k = m.tensors[i].offset; !m.tensors[i].derived &&
			     k < m.tensors[i].offset + m.tensors[i].numel; k++) {
				got += w[k] * hv[k];
				vgv += v[k] * hv[k];
			}
		ok(fabs(got - ref) <= 1e-8 * fabs(ref) && vgv >= 0,
		   "%s: Gauss-Newton w^T G v %.12g, by differences %.12g; v^T G v %.6g >= 0", what,
		   got, ref, vgv);
	}

	/* a second product on the same batch, the forward pass kept */
	{
		real *dl = malloc(NV * sizeof *dl);
		double diff = 0;
		memcpy(m.params, theta, P * sizeof *theta);
		model_forward(&m, tok, tgt, B, T);
		kept_product(&m, &rm, v, tok, tgt, NULL, dl, NULL, fd);
		kept_product(&m, &rm, v, tok, tgt, NULL, dl, NULL, hv);
		for (size_t k = 0; k < P; k++)
			diff = fmax(diff, fabs(hv[k] - fd[k]));
		ok(diff == 0, "%s: a second product without a new forward pass is the same (%g)", what, diff);

		/* the tape: a product on the top layer's down (the head and layer
		 * L-1 taped), one over every tensor (the rest taped), one of w
		 * (all of them copied back): each the same bits as without it
		 * (the same operations in the same order, the primal's input
		 * gradients copied rather than formed again); not used under
		 * multipliers */
		{
			struct model_rop_tape tape;
			int L = (int)c.n_layers, top = model_find(&m, "down", L - 1), same = 1, kept;
			if (model_rop_tape_alloc(&tape, &m, &err)) {
				ok(0, "%s: tape: %s", what, err.msg);
			} else {
				memset(want, 0, (size_t)m.ntensors);
				want[top] = 1;
				memset(vt, 0, P * sizeof *vt);
				memcpy(vt + m.tensors[top].offset, v + m.tensors[top].offset,
				       m.tensors[top].numel * sizeof *vt);
				kept_product(&m, &rm, vt, tok, tgt, want, dl, NULL, fd);
				kept_product(&m, &rm, vt, tok, tgt, want, dl, &tape, hv);
				same &= !memcmp(hv, fd, P * sizeof *hv);
				kept = tape.kept[L] && tape.kept[L - 1] && (L < 2 || !tape.kept[0]);
				kept_product(&m, &rm, v, tok, tgt, NULL, dl, NULL, fd);
				kept_product(&m, &rm, v, tok, tgt, NULL, dl, &tape, hv);
				same &= !memcmp(hv, fd, P * sizeof *hv);
				kept = kept && tape.kept[0];
				kept_product(&m, &rm, w, tok, tgt, NULL, dl, NULL, fd);
				kept_product(&m, &rm, w, tok, tgt, NULL, dl, &tape, hv);
				same &= !memcmp(hv, fd, P * sizeof *hv);
				ok(same && (m.eff ? !tape.kept[L] : kept),
				   "%s: products with the primal's gradients taped: the same bits (%s), %s", what,
				   same ? "yes" : "no", m.eff ? "the tape unused (multipliers)" :
				   kept ? "the layers reached taped" : "the tape's layers wrong");
				model_rop_tape_free(&tape);
			}
		}
		free(dl);
	}
	free(theta);
	free(want);
	model_free(&rm);
	model_free(&m);
}

/* the other families where their tangents meet the rest (the header) */
static void family_variants(void)
{
	const struct sw_config base = variant_base;
	struct sw_config c;

	c = base; strcpy(c.arch, "gpt2"); strcpy(c.hidden_act, "gelu_new"); c.n_kv_heads = 4;
	c.scale_vectors = 0;
	check_variant("GPT-2 without LayerNorm's gain and bias", c);
	c = base; strcpy(c.arch, "gpt2"); strcpy(c.hidden_act, "gelu_new"); c.n_kv_heads = 4;
	strcpy(c.multipliers, "row");
	check_variant("GPT-2 with row multipliers, untied head", c);
	c = base; strcpy(c.arch, "gemma2"); strcpy(c.hidden_act, "gelu_pytorch_tanh");
	c.attn_softcap = 0.5; c.query_pre_attn_scalar = 10;
	check_variant("Gemma2 untied, GQA, the scores' soft-cap alone", c);
	c = base; strcpy(c.arch, "gemma2"); strcpy(c.hidden_act, "gelu_pytorch_tanh");
	c.tie_embeddings = 1; c.final_softcap = 2.0; c.n_kv_heads = 4;
	check_variant("Gemma2 tied, MHA, the logits' soft-cap alone", c);
}

int main(void)
{
	for_each_model_variant(check_variant);
	for_each_reparam_variant(check_variant);
	family_variants();

	/* the check is not vacuous: an H v off by 1e-5 in one entry fails it */
	{
		struct model_tensor t = {.offset = 0, .numel = 4};
		struct model m = {.ntensors = 1, .tensors = &t};
		const char *name = "";
		double ref[4] = {1, 2, 3, 4}, got[4] = {1, 2, 3, 4 + 4e-5};
		ok(worst_error(&m, got, ref, NULL, &name) > 0, "an error of 1e-5 relative fails the criterion");
	}
	return tap_done();
}
