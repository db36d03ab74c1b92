/*
 * The CUDA trainer's model (lib/model/cuda/gpumodel.c) on the host emulation of
 * the GPU (lib/model/cuda/gpu_emu.c) against the CPU reference (lib/model/model.c,
 * lib/model/optim.c, lib/model/sharpness.c), in every model variant t-gradcheck
 * checks: the loss, every parameter's gradient, three optimizer steps of
 * AdamW, Muon and Scion (clipping on), the moments, the gradient norm,
 * the GNB estimate with its sampled labels, the trace's sums, Hessian-
 * and Gauss-Newton-vector products (the R-operator), and bf16 products;
 * and in GPT-2's, Gemma's and Gemma2's steps (LayerNorm, learned
 * positions, GELU, biases; GeGLU, the embedding scale; post-norms,
 * soft-capped scores and logits) the loss, every gradient, H v and G v,
 * optimizer steps, the GNB estimate and bf16 products. This runs everything the GPU path does above the kernels:
 * the device layout, the row-major products through cuBLAS's column-major
 * interface, the attention's per-head batched products, the order of the
 * backward pass. What it cannot run is CUDA itself (tests/e2e/t0271-cuda.t
 * does, where there is a GPU).
 *
 * Tolerances: float sums in another order (cuBLAS's or the kernels'
 * per-thread shares) against the CPU's, relative to each tensor's norm:
 * loss 1e-6, gradients 1e-5, parameters after three steps 1e-5.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/model/cuda/gpumodel.h"
#include "../../lib/base/elemmath.h"
#include "../../lib/model/model.h"
#include "../../lib/model/modelhvp.h"
#include "../../lib/model/optim.h"
#include "../../lib/model/sharpness.h"
#include "tap.h"

enum { B = 3, T = 11 };

/* ||a - b|| / ||b|| over n values */
static double rel_norm(const real *a, const real *b, size_t n)
{
	double d = 0, s = 0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		s += (double)b[i] * b[i];
	}
	return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* the worst tensor's relative difference, and its name */
static double worst_tensor(const struct model *m, const real *a, const real *b, const char **name)
{
	double worst = 0;

	*name = "all equal";
	for (int i = 0; i < m->ntensors; i++) {
		double e = rel_norm(a + m->tensors[i].offset, b + m->tensors[i].offset, m->tensors[i].numel);
		if (e > worst) {
			worst = e;
			*name = m->tensors[i].info.name;
		}
	}
	return worst;
}

static struct sw_config base_config(void)
{
	struct sw_config c;

	memset(&c, 0, sizeof c);
	strcpy(c.arch, "llama");
	c.vocab_size = 23;
	c.d_model = 24;
	c.n_layers = 2;
	c.n_heads = 4;
	c.n_kv_heads = 2;
	c.head_dim = 6;
	c.d_ff = 40;
	c.seq_len = T;
	c.rope_theta = 10000;
	c.norm_eps = 1e-5;
	c.scale_vectors = 1;
	strcpy(c.multipliers, "none");
	return c;
}

/* the other families at base_config's sizes, as model_variants.h's:
 * GPT-2 (MHA), Gemma2 with soft-caps where tanh bends on these scores
 * and logits */
static struct sw_config family_config(const char *arch)
{
	struct sw_config c = base_config();

	strcpy(c.arch, arch);
	strcpy(c.hidden_act, strcmp(arch, "gpt2") ? "gelu_pytorch_tanh" : "gelu_new");
	if (!strcmp(arch, "gpt2"))
		c.n_kv_heads = c.n_heads;
	if (!strcmp(arch, "gemma2")) {
		c.attn_softcap = 0.5;
		c.final_softcap = 1.0;
		c.query_pre_attn_scalar = 10;
	}
	return c;
}

/* Two host models with the same parameters: one for the CPU, one the GPU
 * model mirrors; generic values (gains and multipliers 1 +- 0.3). */
static int build_pair(const struct sw_config *c, struct model *cpu, struct model *gpu, struct sw_err *err)
{
	struct sw_rng r;
	int rc;

	if ((rc = model_build(cpu, c, err)) || (rc = model_build(gpu, c, err)) ||
	    (rc = model_alloc_acts(cpu, B, T, err)))
		return rc;
	model_init(cpu, 3);
	rng_seed(&r, 9);
	for (int i = 0; i < cpu->ntensors; i++)
		if (cpu->tensors[i].info.kind != SW_KIND_MATRIX)
			for (size_t k = 0; k < cpu->tensors[i].numel; k++)
				cpu->params[cpu->tensors[i].offset + k] = (real)(1 + 0.3 * rng_normal(&r));
	memcpy(gpu->params, cpu->params, cpu->nparams * sizeof(real));
	return SW_OK;
}

static void batch(int *tok, int *tgt, int V, int seed)
{
	for (int i = 0; i < B * T; i++) {
		tok[i] = (i * 7 + seed * 5) % V;
		tgt[i] = (i * 11 + seed * 3 + 1) % V;
	}
}

/*
 * Hessian- and Gauss-Newton-vector products (gpumodel_hvp_*) against the
 * CPU's R-operator (lib/model/modelhvp.c) on the same batch: v over every
 * tensor, then over every third tensor only (the passes skip what v does
 * not reach) with the forward's probabilities kept for a second product.
 * The worst tensor's ||H v - H v_cpu|| / ||H v_cpu||, to 1e-5 as the
 * gradients: the same float32 arithmetic summed in another order. A
 * scalar multiplier's entry is one sum over its whole matrix (hundreds of
 * terms that cancel), which the CPU adds one by one in float and the
 * device by rows in double: 1e-4 relative for it (n eps sum|terms| over
 * |sum| at the cancellation these random v give).
 */
static void check_hvp(const char *what, struct model *cpu, struct gpu_model *gm, const int *tok,
		      const int *tgt)
{
	struct model rm;
	struct sw_err err;
	struct sw_rng r;
	size_t np = cpu->nparams;
	real *v = calloc(np, sizeof *v), *hv = calloc(np, sizeof *hv);
	unsigned char *want = calloc((size_t)cpu->ntensors, 1);
	double loss;

	if (!v || !hv || !want || model_rop_build(&rm, cpu, &err)) {
		ok(0, "%s: H v: setup", what);
		goto out;
	}
	rng_seed(&r, 5);
	for (int sub = 0; sub < 2; sub++) {
		for (int i = 0; i < cpu->ntensors; i++) {
			const struct model_tensor *t = &cpu->tensors[i];
			want[i] = !sub || i % 3 == 0;
			for (size_t k = 0; k < t->numel; k++)
				v[t->offset + k] = want[i] ? (real)rng_normal(&r) : 0;
		}
		for (int gn = 0; gn < 2; gn++) {
			const char *name = "all equal";
			double worst = 0;       /* relative to each tensor's tolerance: < 1 passes */
			int rc;

			memcpy(rm.params, v, np * sizeof *v);
			model_zero_grad(&rm);
			model_forward(cpu, tok, tgt, B, T);
			model_rop_forward(cpu, &rm, tok, sub ? want : NULL);
			model_rop_backward(cpu, &rm, tok, tgt, 0.5, gn, sub ? want : NULL, NULL, NULL);
			rc = gpumodel_forward(gm, tok, tgt, B, T, &loss, &err);
			/* twice on one forward: the kept probabilities serve both */
			for (int twice = 0; twice < 1 + sub && !rc; twice++)
				if (!(rc = gpumodel_hvp_begin(gm, v, sub ? want : NULL, &err)) &&
				    !(rc = gpumodel_hvp_add(gm, 0.5, gn, sub, &err)))
					rc = gpumodel_hvp_end(gm, hv, &err);
			if (rc) {
				ok(0, "%s: %s v: %s", what, gn ? "G" : "H", err.msg);
				continue;
			}
			double sq = 0;
			for (int i = 0; i < cpu->ntensors; i++) {
				const struct model_tensor *t = &cpu->tensors[i];
				double e;
				if (!want[i])
					continue;
				e = rel_norm(hv + t->offset, rm.grads + t->offset, t->numel) /
				    (t->numel == 1 ? 1e-4 : 1e-5);
				for (size_t k = 0; k < t->numel; k++)
					sq += (double)rm.grads[t->offset + k] * rm.grads[t->offset + k];
				if (e > worst) {
					worst = e;
					name = t->info.name;
				}
			}
			/* a product of zeros on both sides would agree: the CPU's is not */
			ok(worst < 1 && sq > 0, "%s: %s v, v over %s (worst %s, %.2g of its tolerance; ||.|| %.3g)",
			   what, gn ? "Gauss-Newton G" : "Hessian H", sub ? "every third tensor" : "every tensor",
			   name, worst, sqrt(sq));
		}
	}
	model_free(&rm);
out:
	free(v);
	free(hv);
	free(want);
}

static void check_variant(const char *what, struct sw_config c)
{
	struct model cpu, gpu;
	struct gpu_model *gm = NULL;
	struct sw_err err;
	int tok[B * T], tgt[B * T];
	const char *name;
	double gl;

	if (build_pair(&c, &cpu, &gpu, &err) ||
	    gpumodel_open(&gm, SW_DEVICE_EMU, SW_PRECISION_FP32, &gpu, NULL, B, T, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	batch(tok, tgt, (int)c.vocab_size, 1);
	model_forward(&cpu, tok, tgt, B, T);
	model_zero_grad(&cpu);
	model_backward(&cpu, tok, tgt, 0.5);
	if (gpumodel_forward(gm, tok, tgt, B, T, &gl, &err) || gpumodel_zero_grad(gm, &err) ||
	    gpumodel_backward(gm, tok, tgt, 0.5, &err) || gpumodel_download(gm, &gpu, NULL, 1, &err)) {
		ok(0, "%s: %s", what, err.msg);
		goto out;
	}
	ok(close_rel(gl, cpu.loss, 1e-6), "%s: loss %.9g, CPU %.9g", what, gl, cpu.loss);
	double e = worst_tensor(&cpu, gpu.grads, cpu.grads, &name);
	ok(e < 1e-5, "%s: every gradient (worst %s, %.2g)", what, name, e);
	ok(!memcmp(gpu.params, cpu.params, cpu.nparams * sizeof(real)),
	   "%s: the parameters came back as they went", what);

	/* the trace's sums over device activations: the residual stream into layer 1 */
	struct gpumodel_view v;
	double s, want = 0;
	size_t n = (size_t)B * T * (size_t)c.d_model;
	gpumodel_view(gm, &v);
	for (size_t i = 0; i < n; i++)
		want += (double)cpu.acts[1].x_in[i] * cpu.acts[1].x_in[i];
	int rc = gpumodel_sum(gm, v.acts[1].x_in, n, 1, &s, &err);
	ok(rc == SW_OK && close_rel(s, want, 1e-6),
	   "%s: a sum of squares over the device's activations (%.9g, CPU %.9g)", what, s, want);
	check_hvp(what, &cpu, gm, tok, tgt);
out:
	gpumodel_close(gm);
	model_free(&cpu);
	model_free(&gpu);
}

/* Three steps (batches 1, 2, 3) of optimizer kind on both, clipping at
 * 0.05 so that it acts; the parameters and moments after. */
static void check_optimizer(const char *what, enum opt_kind kind, struct sw_config c)
{
	struct model cpu, gpu;
	struct optim ocpu, ogpu;
	struct optim_config oc;
	struct gpu_model *gm = NULL;
	struct sw_err err;
	int tok[B * T], tgt[B * T], rc = 0;
	double worst_norm = 0;
	const char *name;

	optim_defaults(&oc);
	oc.kind = kind;
	oc.lr = 1e-2;
	oc.steps = 3;
	oc.grad_clip = 0.05;
	oc.blockwise = kind == OPT_ADAMW;
	if (build_pair(&c, &cpu, &gpu, &err) || optim_init(&ocpu, &oc, &cpu, &err) ||
	    optim_init(&ogpu, &oc, &gpu, &err) ||
	    gpumodel_open(&gm, SW_DEVICE_EMU, SW_PRECISION_FP32, &gpu, &ogpu, B, T, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	for (int step = 0; step < 3 && !rc; step++) {
		double ncpu, ngpu, loss;
		batch(tok, tgt, (int)c.vocab_size, step + 1);
		model_forward(&cpu, tok, tgt, B, T);
		model_zero_grad(&cpu);
		model_backward(&cpu, tok, tgt, 1);
		ncpu = optim_grad_norm(&cpu);
		optim_step(&ocpu, &cpu, step, elem_clip_scale(ncpu, oc.grad_clip));
		if ((rc = gpumodel_forward(gm, tok, tgt, B, T, &loss, &err)) ||
		    (rc = gpumodel_zero_grad(gm, &err)) || (rc = gpumodel_backward(gm, tok, tgt, 1, &err)) ||
		    (rc = gpumodel_grad_norm(gm, &ngpu, &err)) ||
		    (rc = gpumodel_step(gm, &ogpu, step, elem_clip_scale(ngpu, oc.grad_clip), &err)))
			break;
		worst_norm = fmax(worst_norm, fabs(ngpu - ncpu) / ncpu);
	}
	if (rc || gpumodel_download(gm, &gpu, &ogpu, 0, &err)) {
		ok(0, "%s: %s", what, err.msg);
		goto out;
	}
	ok(worst_norm < 1e-6 && ogpu.t == ocpu.t, "%s: the gradient norms (worst %.2g), %lld updates", what,
	   worst_norm, (long long)ogpu.t);
	double e = worst_tensor(&cpu, gpu.params, cpu.params, &name);
	ok(e < 1e-5, "%s: every parameter after 3 steps (worst %s, %.2g)", what, name, e);
	double em = rel_norm(ogpu.m, ocpu.m, cpu.nparams), ev = rel_norm(ogpu.v, ocpu.v, cpu.nparams);
	ok(em < 1e-5 && ev < 1e-5, "%s: the moments (m %.2g, v %.2g)", what, em, ev);
out:
	gpumodel_close(gm);
	optim_free(&ocpu);
	optim_free(&ogpu);
	model_free(&cpu);
	model_free(&gpu);
}

/* GNB: one micro-batch with the softmax kept and restored, and three
 * micro-batches; labels equal, h close. */
static void check_gnb(const char *what, struct sw_config c, int mb, int keep)
{
	struct model cpu, gpu;
	struct gpu_model *gm = NULL;
	struct sw_rng r1, r2;
	struct sw_err err;
	int tok[B * T], tgt[B * T], draws = 2, lab_cpu[2 * B * T], lab_gpu[2 * B * T];
	float *hc, *hg;
	real *probs = NULL;

	if (build_pair(&c, &cpu, &gpu, &err) ||
	    gpumodel_open(&gm, SW_DEVICE_EMU, SW_PRECISION_FP32, &gpu, NULL, B, T, &err)) {
		ok(0, "gnb (%s): build: %s", what, err.msg);
		return;
	}
	hc = calloc(cpu.nparams, sizeof *hc);
	hg = calloc(cpu.nparams, sizeof *hg);
	if (keep)
		probs = malloc((size_t)B * T * c.vocab_size * sizeof *probs);
	for (size_t i = 0; i < cpu.nparams; i++)
		hc[i] = hg[i] = (float)(i % 7) * 1e-3f;     /* the estimate adds into what is there */
	batch(tok, tgt, (int)c.vocab_size, 4);
	rng_seed(&r1, 77);
	rng_seed(&r2, 77);
	if (gnb_estimate(&cpu, tok, B, T, mb, draws, &r1, hc, lab_cpu, probs, NULL, &err) ||
	    gpumodel_gnb(gm, tok, B, T, mb, draws, &r2, hg, lab_gpu, keep, &err)) {
		ok(0, "gnb (%s): %s", what, err.msg);
	} else {
		double e = rel_norm(hg, hc, cpu.nparams);
		ok(!memcmp(lab_cpu, lab_gpu, sizeof lab_cpu) && e < 1e-5 && rng_uniform(&r1) == rng_uniform(&r2),
		   "gnb (%s, micro-batch %d%s, %d draws): the same labels, h to %.2g, the RNG left alike",
		   what, mb, keep ? ", softmax kept" : "", draws, e);
	}
	free(hc);
	free(hg);
	free(probs);
	gpumodel_close(gm);
	model_free(&cpu);
	model_free(&gpu);
}

/* bf16 products: the same model to bf16's precision, not bit for bit */
static void check_bf16(const char *what, struct sw_config c)
{
	struct model cpu, gpu;
	struct gpu_model *gm = NULL;
	struct sw_err err;
	int tok[B * T], tgt[B * T];
	double gl;

	if (build_pair(&c, &cpu, &gpu, &err) ||
	    gpumodel_open(&gm, SW_DEVICE_EMU, SW_PRECISION_BF16, &gpu, NULL, B, T, &err) ||
	    (batch(tok, tgt, (int)c.vocab_size, 1), gpumodel_forward(gm, tok, tgt, B, T, &gl, &err))) {
		ok(0, "bf16 (%s): %s", what, err.msg);
	} else {
		model_forward(&cpu, tok, tgt, B, T);
		ok(gl != cpu.loss && close_rel(gl, cpu.loss, 1e-2),
		   "bf16 products (%s): the loss %.7g within 1e-2 of fp32's %.7g, not equal", what, gl,
		   cpu.loss);
	}
	gpumodel_close(gm);
	model_free(&cpu);
	model_free(&gpu);
}

int main(void)
{
	struct sw_config c = base_config();

	check_variant("GQA, untied", c);
	c.tie_embeddings = 1;
	c.n_kv_heads = 1;
	check_variant("MQA, tied", c);
	c = base_config();
	c.qk_norm = 1;
	check_variant("QK-norm", c);
	c = base_config();
	strcpy(c.multipliers, "scalar");
	check_variant("scalar multipliers", c);
	strcpy(c.multipliers, "row");
	check_variant("row multipliers", c);
	strcpy(c.multipliers, "col");
	c.tie_embeddings = 1;
	check_variant("column multipliers, tied", c);
	strcpy(c.multipliers, "rowcol");
	check_variant("row and column multipliers, tied", c);
	c = base_config();
	c.norm_everywhere = 1;
	check_variant("norm-everywhere", c);
	c.scale_vectors = 0;
	check_variant("norm-everywhere, no scale vectors", c);
	c = base_config();
	strcpy(c.scale_design, "attn=hg,ffn=dp,head=hg+dp");
	check_variant("scale design: attn hg, ffn dp, head hg+dp", c);
	c = base_config();
	strcpy(c.scale_design, "attn=hg+dnp,ffn=dnp");
	c.qk_norm = 1;
	check_variant("scale design: attn hg+dnp, ffn dnp", c);
	/* the device's RoPE tables from the CPU's one frequency table
	 * (arch_rope_inv_freq): llama3 over an original context of 16 moves
	 * every frequency of a head of 8 but the first */
	c = base_config();
	strcpy(c.rope_type, "llama3");
	c.rope_factor = 8;
	c.rope_low_freq_factor = 1;
	c.rope_high_freq_factor = 4;
	c.rope_original_max = 16;
	check_variant("RoPE scaled (llama3)", c);
	/* Qwen2's q, k, v biases (build_pair's random values): the device's
	 * bias kernel forward, its column sums backward and under the
	 * R-operator */
	c = base_config();
	strcpy(c.arch, "qwen2");
	check_variant("Qwen2 q, k, v biases", c);
	c.qk_norm = 1;
	strcpy(c.multipliers, "row");
	check_variant("Qwen2 q, k, v biases, QK-norm, row multipliers", c);

	/* the other families' steps (model_variants.h's, at this file's
	 * sizes): GPT-2's LayerNorm with biases, learned positions (the bias
	 * kernel over B rows of T C), the plain MLP's GELUs and every linear's
	 * bias; Gemma's GeGLU and sqrt(C) embedding scale (the scale kernel);
	 * Gemma2's post-norms, soft-capped scores (att_tanh, the scale 10^-1/2
	 * a product's alpha) and logits; with QK-norm (unit-RMS q and k) the
	 * scores are of order 1, where the cap 0.5 bends tanh, without it
	 * model_init's small weights keep them near 0 */
	c = family_config("gpt2");
	c.tie_embeddings = 1;
	check_variant("GPT-2: LayerNorm, positions, tanh GELU, biases, tied", c);
	strcpy(c.hidden_act, "gelu");
	c.tie_embeddings = 0;
	strcpy(c.multipliers, "row");
	check_variant("GPT-2: exact GELU, untied, row multipliers", c);
	c = family_config("gemma");
	c.n_kv_heads = 1;
	c.tie_embeddings = 1;
	c.norm_eps = 1e-6;
	check_variant("Gemma: GeGLU, sqrt(C) embedding scale, MQA, tied", c);
	c = family_config("gemma2");
	c.tie_embeddings = 1;
	check_variant("Gemma2: post-norms, soft-caps 0.5 and 1, query_pre_attn_scalar 10", c);
	c.qk_norm = 1;
	strcpy(c.multipliers, "col");
	check_variant("Gemma2 with QK-norm and column multipliers", c);

	c = base_config();
	c.qk_norm = 1;
	check_optimizer("AdamW, blockwise, GQA, QK-norm", OPT_ADAMW, c);
	strcpy(c.multipliers, "row");
	check_optimizer("Muon, row multipliers", OPT_MUON, c);
	c = base_config();
	strcpy(c.scale_design, "ap");
	check_optimizer("Muon, scale design ap", OPT_MUON, c);
	/* no gain whose every reader is normalized after it (DNP, QK-norm):
	 * its magnitude leaves the loss as it is, its gradient is rounding
	 * noise, which AdamW scales up to the learning rate in a summation
	 * order's own way (OpenBLAS's Haswell kernels against the emulation's) */
	c = base_config();
	strcpy(c.scale_design, "attn=hg+dp,ffn=dp,head=hg");
	strcpy(c.scale_reparam, "or");
	check_optimizer("AdamW, gains reparameterized (OR), scale design hg+dp, dp, head hg", OPT_ADAMW, c);
	c = base_config();
	strcpy(c.scale_reparam, "er");
	check_optimizer("Muon, gains reparameterized (ER)", OPT_MUON, c);
	c = base_config();
	strcpy(c.arch, "qwen2");
	check_optimizer("AdamW, blockwise, Qwen2 q, k, v biases", OPT_ADAMW, c);
	c = base_config();
	c.d_ff = 16;            /* a tall and a wide hidden matrix */
	check_optimizer("Scion", OPT_SCION, c);
	check_optimizer("AdamW, blockwise, GPT-2", OPT_ADAMW, family_config("gpt2"));
	check_optimizer("Muon, Gemma2", OPT_MUON, family_config("gemma2"));
	check_gnb("Llama", base_config(), B, 1);
	check_gnb("Llama", base_config(), 1, 0);
	/* the final soft-cap's tanh kept with the softmax it restores */
	check_gnb("Gemma2", family_config("gemma2"), B, 1);
	check_gnb("GPT-2", family_config("gpt2"), 1, 0);
	check_bf16("Llama", base_config());
	check_bf16("GPT-2", family_config("gpt2"));
	check_bf16("Gemma2", family_config("gemma2"));
	return tap_done();
}
