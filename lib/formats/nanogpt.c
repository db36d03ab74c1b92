/* nanogpt.c - nanoGPT's ckpt.pt: its model_args and step (nanogpt.h). */
#include "nanogpt.h"

#include <stdio.h>
#include <string.h>

/* An integer of dict d under key: 1 (and *v), 0 when absent, -1 when
 * of another type. */
static int int_of(const struct pk_value *d, const char *key, int64_t *v)
{
	const struct pk_value *x = pk_dict_get(d, key);

	if (!x)
		return 0;
	if (x->type != PK_INT)
		return -1;
	*v = x->u.i;
	return 1;
}

/* model_args[key], a size: 1 .. 2^31 - 1 */
static int size_of(const struct pk_value *args, const char *key, int64_t *v, struct sw_err *err)
{
	int got = int_of(args, key, v);

	if (got == 0)
		return sw_fail(err, SW_EDATA, "nanoGPT's model_args has no %s", key);
	if (got < 0 || *v < 1 || *v >= (int64_t)1 << 31)
		return sw_fail(err, SW_EDATA, "nanoGPT's model_args: %s is not a size", key);
	return SW_OK;
}

/* The tokens of iter_num iterations, from train.py's config: 0 (and
 * *tokens), or -1 when the config does not say them (or they overflow). */
static int tokens_of(const struct pk_value *root, int64_t iters, int64_t *tokens)
{
	static const char *const keys[] = {"gradient_accumulation_steps", "batch_size",
					   "block_size"};
	const struct pk_value *config = pk_dict_get(root, "config");
	int64_t t = iters, v;

	if (!config || config->type != PK_DICT)
		return -1;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (int_of(config, keys[i], &v) != 1 || v < 1 || __builtin_mul_overflow(t, v, &t))
			return -1;
	*tokens = t;
	return 0;
}

/* The step under the keys training scripts save it as (nanoGPT's
 * iter_num, read with its tokens below for nanoGPT's own file): the
 * first that is an integer. */
static int torch_step(const struct pk_value *root, struct nanogpt *ng, struct sw_err *err)
{
	static const char *const keys[] = {"iter_num", "step", "global_step", "iteration"};
	int64_t v;

	if (root->type != PK_DICT)
		return SW_OK;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (int_of(root, keys[i], &v) == 1) {
			if (v < 0)
				return sw_fail(err, SW_EDATA, "the top dict's %s is negative", keys[i]);
			ng->has_step = 1;
			ng->step = v;
			ng->tokens = -1;
			return SW_OK;
		}
	return SW_OK;
}

int nanogpt_read(const struct pk_value *root, struct nanogpt *ng, struct sw_err *err)
{
	const struct pk_value *args = pk_dict_get(root, "model_args"), *bias;
	struct sw_config *c = &ng->config;
	int64_t iters;
	int rc;

	memset(ng, 0, sizeof *ng);
	if ((rc = torch_step(root, ng, err)))
		return rc;
	if (!args || args->type != PK_DICT)
		return SW_OK;
	ng->found = 1;
	snprintf(c->arch, sizeof c->arch, "gpt2");
	if ((rc = size_of(args, "n_layer", &c->n_layers, err)) ||
	    (rc = size_of(args, "n_head", &c->n_heads, err)) ||
	    (rc = size_of(args, "n_embd", &c->d_model, err)) ||
	    (rc = size_of(args, "vocab_size", &c->vocab_size, err)) ||
	    (rc = size_of(args, "block_size", &c->seq_len, err)))
		return rc;
	bias = pk_dict_get(args, "bias");
	if (bias && bias->type != PK_BOOL)
		return sw_fail(err, SW_EDATA, "nanoGPT's model_args: bias is not True or False");
	if ((rc = arch_default_head_dim(c, err))) {
		sw_err_prefix(err, "nanoGPT's model_args (n_embd is d_model, n_head n_heads)");
		return rc;
	}
	/* bias=False: LayerNorm and every linear without one, which GPT-2's
	 * step does not compute (refused by name for a model) */
	if (bias && !bias->u.i)
		snprintf(c->unsupported, sizeof c->unsupported,
			 "nanoGPT's bias=False (no biases in LayerNorm and the linears)");
	c->n_kv_heads = c->n_heads;
	c->rope_theta = 10000;          /* no RoPE; the config's checks want one */
	c->d_ff = 4 * c->d_model;       /* its MLP: c_fc is nn.Linear(n_embd, 4 n_embd) */
	c->norm_eps = 1e-5;             /* its LayerNorm's F.layer_norm(..., 1e-5) */
	snprintf(c->hidden_act, sizeof c->hidden_act, "gelu");  /* nn.GELU(), exact */
	c->tie_embeddings = 1;
	c->scale_vectors = 1;
	snprintf(c->multipliers, sizeof c->multipliers, "none");
	switch (int_of(root, "iter_num", &iters)) {
	case -1:
		return sw_fail(err, SW_EDATA, "nanoGPT's iter_num is not an integer");
	case 1:
		if (iters < 0)
			return sw_fail(err, SW_EDATA, "nanoGPT's iter_num is negative");
		ng->has_step = 1;
		ng->step = iters;
		if (tokens_of(root, iters, &ng->tokens) < 0)
			ng->tokens = -1;
	}
	return SW_OK;
}
