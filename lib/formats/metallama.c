/* metallama.c - Meta's Llama layout as Hugging Face roles (metallama.h). */
#include "metallama.h"
#include "../base/jsonstrict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *meta, *role;        /* in a layer: after "layers.N." */
	int in_layer;
} names[] = {
	{"tok_embeddings.weight", "embed", 0},
	{"norm.weight", "final_norm", 0},
	{"output.weight", "lm_head", 0},
	{"attention.wq.weight", "q", 1},
	{"attention.wk.weight", "k", 1},
	{"attention.wv.weight", "v", 1},
	{"attention.wo.weight", "o", 1},
	{"feed_forward.w1.weight", "gate", 1},
	{"feed_forward.w2.weight", "down", 1},
	{"feed_forward.w3.weight", "up", 1},
	{"attention_norm.weight", "attn_norm", 1},
	{"ffn_norm.weight", "ffn_norm", 1},
};
#define NNAMES (sizeof names / sizeof names[0])

/* "layers.N." -> N and the rest, or -1 */
static int layer_of(const char *name, const char **rest)
{
	long v = 0;
	const char *p = name + 7;

	if (strncmp(name, "layers.", 7) || *p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p++ - '0');
		if (v > 1000000)
			return -1;
	}
	if (*p != '.')
		return -1;
	*rest = p + 1;
	return (int)v;
}

int meta_role(const char *name, char *role, size_t len, int *layer)
{
	const char *rest = NULL;
	int l = layer_of(name, &rest);

	if (!strcmp(name, "rope.freqs"))
		return 0;
	for (size_t i = 0; i < NNAMES; i++)
		if (names[i].in_layer ? l >= 0 && !strcmp(rest, names[i].meta)
				      : !strcmp(name, names[i].meta)) {
			snprintf(role, len, "%s", names[i].role);
			*layer = names[i].in_layer ? l : -1;
			return 1;
		}
	*layer = l;
	return -1;
}

int meta_is_meta_name(const char *name)
{
	char role[32];
	int layer;

	return meta_role(name, role, sizeof role, &layer) == 1 || !strcmp(name, "rope.freqs");
}

int meta_split_dim(const char *role, int rank, const int64_t *shape, int64_t d_model)
{
	const struct arch_role *r = arch_role_find(role);

	switch (r ? r->split : ARCH_SPLIT_NONE) {
	case ARCH_SPLIT_ROWS:
		return 0;
	case ARCH_SPLIT_COLS:
		return 1;
	case ARCH_SPLIT_EMBED:
		/* Llama 3 splits the embedding's rows (VocabParallelEmbedding) */
		return rank == 2 && shape[1] == d_model ? 0 : 1;
	default:
		return -1;
	}
}

/* A size of params.json: a nonnegative integer below 2^31 (-1 or positive
 * where dflt is -1), or absent (dflt). */
static int params_int(const cJSON *root, const char *key, int64_t *v, int64_t dflt,
		      int required, struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	if (!j || cJSON_IsNull(j)) {
		if (required)
			return sw_fail(err, SW_EDATA, "params.json: missing %s", key);
		*v = dflt;
		return SW_OK;
	}
	/* a size whose default is -1 (vocab_size: the tokenizer's) is -1 or
	 * positive */
	if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
	    j->valuedouble < (dflt < 0 ? -1 : 0) || (dflt < 0 && j->valuedouble == 0) ||
	    j->valuedouble >= 2147483648.0)
		return sw_fail(err, SW_EDATA, "params.json: %s = %g is not a valid size%s", key,
			       j->valuedouble, dflt < 0 ? " (-1 or positive)" : "");
	*v = (int64_t)j->valuedouble;
	return SW_OK;
}

static int params_num(const cJSON *root, const char *key, double *v, double dflt,
		      struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	if (!j || cJSON_IsNull(j)) {
		*v = dflt;
		return SW_OK;
	}
	if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble < 0)
		return sw_fail(err, SW_EDATA, "params.json: %s is not a nonnegative number", key);
	*v = j->valuedouble;
	return SW_OK;
}

/*
 * use_scaled_rope: Llama 3.1's scaled RoPE, Hugging Face's llama3 type
 * with Meta's apply_scaling constants (low_freq_factor 1,
 * original_max_position_embeddings 8192) and the factor of params.json's
 * rope_scaling_factor (high_freq_factor: rope_high_freq_factor, 4 when
 * not given). Without a factor (Meta's 3.1 and 3.2 releases name none,
 * and theirs differ: 8 and 32) the type is kept as "use_scaled_rope",
 * which a model refuses (arch_model_check) and a listing ignores.
 */
static int scaled_rope(const cJSON *root, struct sw_config *c, struct sw_err *err)
{
	const cJSON *use = cJSON_GetObjectItemCaseSensitive(root, "use_scaled_rope"),
		    *factor = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling_factor");
	int rc;

	if (use && !cJSON_IsNull(use) && !cJSON_IsBool(use))
		return sw_fail(err, SW_EDATA, "params.json: use_scaled_rope is not true or false");
	if (!cJSON_IsTrue(use))
		return SW_OK;
	if (!factor || cJSON_IsNull(factor)) {
		snprintf(c->rope_type, sizeof c->rope_type, "use_scaled_rope");
		return SW_OK;
	}
	snprintf(c->rope_type, sizeof c->rope_type, "llama3");
	c->rope_low_freq_factor = 1;
	c->rope_original_max = 8192;
	if ((rc = params_num(root, "rope_scaling_factor", &c->rope_factor, 0, err)) ||
	    (rc = params_num(root, "rope_high_freq_factor", &c->rope_high_freq_factor, 4, err)))
		return rc;
	return SW_OK;
}

int meta_parse_params(const char *json, size_t len, struct sw_config *c, int64_t *vocab,
		      struct sw_err *err)
{
	cJSON *root;
	int rc;

	memset(c, 0, sizeof *c);
	if ((rc = jsonstrict_parse(json, len, "params.json", &root, err)))
		return rc;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sw_fail(err, SW_EDATA, "params.json is not a JSON object");
	}
	if ((rc = params_int(root, "dim", &c->d_model, 0, 1, err)) ||
	    (rc = params_int(root, "n_layers", &c->n_layers, 0, 1, err)) ||
	    (rc = params_int(root, "n_heads", &c->n_heads, 0, 1, err)) ||
	    (rc = params_int(root, "n_kv_heads", &c->n_kv_heads, c->n_heads, 0, err)) ||
	    (rc = params_int(root, "vocab_size", vocab, -1, 0, err)) ||
	    (rc = params_int(root, "max_seq_len", &c->seq_len, 0, 0, err)) ||
	    (rc = params_num(root, "norm_eps", &c->norm_eps, 1e-5, err)) ||
	    (rc = params_num(root, "rope_theta", &c->rope_theta, 10000.0, err)))
		goto out;
	if ((rc = arch_default_head_dim(c, err))) {
		sw_err_prefix(err, "params.json (dim is d_model)");
		goto out;
	}
	if ((rc = scaled_rope(root, c, err)))
		goto out;
	snprintf(c->arch, sizeof c->arch, "llama");
	snprintf(c->multipliers, sizeof c->multipliers, "none");
	c->scale_vectors = 1;
out:
	cJSON_Delete(root);
	return rc;
}
