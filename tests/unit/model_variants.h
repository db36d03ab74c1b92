/*
 * model_variants.h - the model variants the double-precision checks of
 * lib/model/model.c and lib/model/modelhvp.c run through (t-gradcheck.c: the
 * gradient, t-hvpcheck.c: the R-operator): GQA, untied and tied heads,
 * QK-norm, scalar/row/column/row-and-column multipliers, norm-everywhere, no scale
 * vectors, MQA with a head_dim that is not d_model/n_heads, the scale
 * designs (arch.h: hg, ap, dp, hg+dp over the three kinds, dnp and
 * hg+dnp over attn and ffn), RoPE scaled (llama3), Qwen2's q, k, v biases,
 * and the other families' steps: GPT-2 (LayerNorm with biases, learned
 * positions, the plain MLP with the tanh or the exact GELU, every
 * linear's bias), Gemma (GeGLU, the sqrt(C) embedding scale) and Gemma2
 * (post-norms, soft-capped scores and logits, query_pre_attn_scalar).
 * Include after lib/model/model.c.
 */
#ifndef SW_MODEL_VARIANTS_H
#define SW_MODEL_VARIANTS_H

#include <string.h>

/* the small GQA model every variant starts from */
static const struct sw_config variant_base = {
	.arch = "llama", .vocab_size = 11, .d_model = 8, .n_layers = 2, .n_heads = 4,
	.n_kv_heads = 2, .head_dim = 4, .d_ff = 12, .seq_len = 8, .rope_theta = 10000,
	.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
};

static void for_each_model_variant(void (*check)(const char *what, struct sw_config c))
{
	const struct sw_config base = variant_base;
	struct sw_config c;

	check("GQA, untied head", base);
	c = base; c.tie_embeddings = 1;
	check("tied head", c);
	c = base; c.qk_norm = 1;
	check("QK-norm", c);
	c = base; strcpy(c.multipliers, "scalar");
	check("scalar multipliers", c);
	c = base; strcpy(c.multipliers, "row");
	check("row multipliers", c);
	c = base; strcpy(c.multipliers, "col"); c.tie_embeddings = 1;
	check("column multipliers, tied", c);
	c = base; strcpy(c.multipliers, "rowcol"); c.qk_norm = 1;
	check("row and column multipliers, QK-norm", c);
	c = base; c.norm_everywhere = 1; c.qk_norm = 1;
	check("norm-everywhere with QK-norm", c);
	c = base; c.scale_vectors = 0; c.n_kv_heads = 4;
	check("no scale vectors, MHA", c);
	c = base; c.n_kv_heads = 1; c.head_dim = 6; c.d_ff = 5;
	check("MQA, head_dim != d_model/n_heads, d_ff < d_model", c);
	c = base; strcpy(c.scale_design, "attn=hg,ffn=dp,head=ap");
	check("scale design: attn hg, ffn dp, head ap", c);
	c = base; strcpy(c.scale_design, "attn=hg+dp,ffn=ap,head=hg+dp"); c.qk_norm = 1;
	check("scale design: attn hg+dp, ffn ap, head hg+dp, QK-norm", c);
	c = base; strcpy(c.scale_design, "attn=dp,ffn=hg"); c.tie_embeddings = 1;
	check("scale design: attn dp, ffn hg, tied head", c);
	c = base; strcpy(c.scale_design, "attn=dnp,ffn=dnp"); c.qk_norm = 1;
	check("scale design: dnp (v, gate and up normalized)", c);
	c = base; strcpy(c.scale_design, "attn=hg+dnp,ffn=hg+dnp,head=hg"); c.qk_norm = 1;
	c.n_kv_heads = 1;
	check("scale design: hg+dnp, MQA, head hg", c);
	/* RoPE's frequencies scaled (arch_rope_inv_freq): the forward, the
	 * backward and the R-operator's passes read one table */
	c = base; strcpy(c.rope_type, "llama3"); c.rope_factor = 8; c.rope_low_freq_factor = 1;
	c.rope_high_freq_factor = 4; c.rope_original_max = 16;
	check("RoPE scaled (llama3)", c);
	/* Qwen2: q, k, v biases (model_init's zeros; the checks' draws move them) */
	c = base; strcpy(c.arch, "qwen2"); c.qk_norm = 1; strcpy(c.multipliers, "row");
	check("Qwen2 q, k, v biases, QK-norm, row multipliers", c);
	c = base; strcpy(c.arch, "qwen2");
	check("Qwen2 q, k, v biases", c);
	/* GPT-2 (MHA, tied head as GPT2LMHeadModel's; nanoGPT's exact GELU
	 * untied, for the head's own gradient) */
	c = base; strcpy(c.arch, "gpt2"); strcpy(c.hidden_act, "gelu_new"); c.n_kv_heads = 4;
	c.tie_embeddings = 1;
	check("GPT-2: LayerNorm, positions, tanh-GELU MLP, biases, tied head", c);
	c = base; strcpy(c.arch, "gpt2"); strcpy(c.hidden_act, "gelu"); c.n_kv_heads = 4;
	check("GPT-2 with the exact GELU, untied head", c);
	/* Gemma: MQA as Gemma 2B; GeGLU */
	c = base; strcpy(c.arch, "gemma"); strcpy(c.hidden_act, "gelu_pytorch_tanh");
	c.n_kv_heads = 1; c.tie_embeddings = 1; c.norm_eps = 1e-6;
	check("Gemma: GeGLU, sqrt(C) embedding scale, MQA, tied head", c);
	/* Gemma2: caps small enough that tanh bends on these scores and
	 * logits (t-gradcheck shows it: |tanh(x / cap)| up to 0.99 and
	 * 0.98); the scores' scale 10^-1/2, not head_dim's 4^-1/2 */
	c = base; strcpy(c.arch, "gemma2"); strcpy(c.hidden_act, "gelu_pytorch_tanh");
	c.tie_embeddings = 1; c.attn_softcap = 0.5; c.final_softcap = 1.0;
	c.query_pre_attn_scalar = 10;
	check("Gemma2: post-norms, soft-caps 0.5 and 1, query_pre_attn_scalar 10", c);
}

/* The gains reparameterized (arch.h: scale_reparam), over every kind of
 * gain: the norms', QK-norm's, norm-everywhere's, DNP's and a design's
 * X_gain_in and X_gain_out, all kinds or some. */
static void for_each_reparam_variant(void (*check)(const char *what, struct sw_config c))
{
	const struct sw_config base = variant_base;
	struct sw_config c;

	c = base; strcpy(c.scale_reparam, "or"); c.qk_norm = 1; c.norm_everywhere = 1;
	check("OR, QK-norm, norm-everywhere", c);
	c = base; strcpy(c.scale_reparam, "er"); c.qk_norm = 1; c.tie_embeddings = 1;
	check("ER, QK-norm, tied head", c);
	c = base; strcpy(c.scale_reparam, "or"); c.qk_norm = 1;
	strcpy(c.scale_design, "attn=hg+dnp,ffn=dnp,head=hg+dp");
	check("OR, scale design hg+dnp, dnp, head hg+dp", c);
	c = base; strcpy(c.scale_reparam, "er");
	strcpy(c.scale_design, "attn=dp,ffn=hg+dp,head=ap");
	check("ER, scale design dp, hg+dp, head ap", c);
	c = base; strcpy(c.scale_reparam, "attn=er,ffn=or"); c.norm_everywhere = 1;
	strcpy(c.scale_design, "head=hg");
	check("attn ER, ffn OR, head's gains as they are, norm-everywhere", c);
}

#endif
