/*
 * ggufread.c - the GGUF checkpoint reader, a back end of ckpt.c (see
 * ggufread.h).
 */
#include "ggufread.h"
#include "../base/arch.h"
#include "../base/family.h"
#include "attrmap.h"
#include "gguf.h"
#include "ropeperm.h"
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ggufsrc_sniff(int fd, uint64_t size)
{
	char magic[4];

	return size >= 4 && pread(fd, magic, 4, 0) == 4 && !memcmp(magic, "GGUF", 4);
}

/* ARCH.what, the key of a model's metadata under its architecture */
static void arch_key(char *key, size_t n, const char *arch, const char *what)
{
	snprintf(key, n, "%s.%s", arch, what);
}

/* A size of the config, ARCH.what: a nonnegative integer below 2^31. */
static int cfg_size(const struct gguf_file *g, const char *arch, const char *what, int64_t *v,
		    int *present, struct sw_err *err)
{
	char key[96];
	uint64_t u;
	int rc;

	arch_key(key, sizeof key, arch, what);
	if ((rc = gguf_uint(g, key, &u, present, err)) || (present && !*present))
		return rc;
	if (u >= (1ULL << 31))
		return sw_fail(err, SW_EDATA, "metadata %s = %llu is out of range", key,
			       (unsigned long long)u);
	*v = (int64_t)u;
	return SW_OK;
}

static int cfg_real(const struct gguf_file *g, const char *arch, const char *what, double *v,
		    int *present, struct sw_err *err)
{
	char key[96];

	arch_key(key, sizeof key, arch, what);
	return gguf_real(g, key, v, present, err);
}

/* "blk.N." -> N (strict decimal, no leading zero), *rest after the dot; -1
 * if name does not start so */
static long layer_of(const char *name, const char **rest)
{
	const char *s = name + 4;
	long v = 0;

	if (strncmp(name, "blk.", 4) || *s < '0' || *s > '9' || (s[0] == '0' && s[1] != '.'))
		return -1;
	for (; *s >= '0' && *s <= '9'; s++)
		if ((v = v * 10 + (*s - '0')) > 1000000)
			return -1;
	if (*s != '.')
		return -1;
	*rest = s + 1;
	return v;
}

/* The vocabulary: ARCH.vocab_size, else the tokenizer's token list, else
 * the embedding's rows (ne[1]). */
static int vocab_size(const struct gguf_file *g, const char *arch, struct sw_config *c,
		      struct sw_err *err)
{
	const struct gguf_kv *tok = gguf_find(g, "tokenizer.ggml.tokens");
	int present, rc;

	if ((rc = cfg_size(g, arch, "vocab_size", &c->vocab_size, &present, err)) || present)
		return rc;
	if (tok) {
		if (tok->type != GGUF_ARRAY || tok->elem != GGUF_STRING)
			return sw_fail(err, SW_EDATA, "metadata tokenizer.ggml.tokens is no array of strings");
		if (tok->count >= (1ULL << 31))
			return sw_fail(err, SW_EDATA, "metadata tokenizer.ggml.tokens holds %llu tokens",
				       (unsigned long long)tok->count);
		c->vocab_size = (int64_t)tok->count;
		return SW_OK;
	}
	for (size_t i = 0; i < g->nt; i++)
		if (!strcmp(g->t[i].name, "token_embd.weight") && g->t[i].n_dims == 2 &&
		    g->t[i].ne[1] < (1LL << 31)) {
			c->vocab_size = g->t[i].ne[1];
			return SW_OK;
		}
	return sw_fail(err, SW_EDATA, "the vocabulary size is unknown (no %s.vocab_size, "
		       "tokenizer.ggml.tokens or token_embd.weight)", arch);
}

/* RoPE's scaling as llama.cpp reads it: ARCH.rope.scaling.type (none,
 * linear, yarn, ...) with ARCH.rope.scaling.factor, or the older
 * ARCH.rope.scale_linear; a factor of 0 (or none) is no scaling there.
 * A type other than linear is kept by name (a model refuses it,
 * arch_model_check). */
static int take_rope_scaling(const struct gguf_file *g, const char *arch, struct sw_config *c,
			     struct sw_err *err)
{
	const char *type = "none";
	double factor = 0, linear = 0;
	char key[96];
	int has_type, has_factor, has_linear, rc;

	arch_key(key, sizeof key, arch, "rope.scaling.type");
	if ((rc = gguf_string(g, key, &type, &has_type, err)) ||
	    (rc = cfg_real(g, arch, "rope.scaling.factor", &factor, &has_factor, err)) ||
	    (rc = cfg_real(g, arch, "rope.scale_linear", &linear, &has_linear, err)))
		return rc;
	if (!has_type && has_linear) {
		type = "linear";
		factor = linear;
	}
	if (!strcmp(type, "none") || (!strcmp(type, "linear") && factor == 0))
		return SW_OK;
	if (!type[0] || strlen(type) >= sizeof c->rope_type)
		return sw_fail(err, SW_EDATA, "metadata %s is not a name", key);
	snprintf(c->rope_type, sizeof c->rope_type, "%s", type);
	c->rope_factor = factor;
	return SW_OK;
}

/*
 * The config of an architecture no table knows, for its listing: its
 * name, and the sizes its ARCH.* keys give where they are there (else 0,
 * unknown); nothing is computed from them, so nothing else is asked (the
 * model's builders refuse it by name, as config.json's).
 */
static int unknown_config(const struct gguf_file *g, const char *arch, struct sw_config *c,
			  struct sw_err *err)
{
	int64_t *sizes[] = {&c->d_model, &c->n_layers, &c->n_heads, &c->n_kv_heads, &c->d_ff,
			    &c->head_dim, &c->vocab_size};
	static const char *const keys[] = {"embedding_length", "block_count",
		"attention.head_count", "attention.head_count_kv", "feed_forward_length",
		"attention.key_length", "vocab_size"};
	int present, rc;

	/* a name the messages can carry (letters, digits, _ . -), and not
	 * one of a family whose GGUF names no table has (its tensors would
	 * be taken for that family's) */
	if (!arch[0] || strlen(arch) >= sizeof c->arch || family_find(arch) ||
	    strspn(arch, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
	    strlen(arch))
		return sw_fail(err, SW_EDATA, "general.architecture '%.40s' is not supported ("
			       FAMILY_GGUF_LIST " are read)", arch);
	snprintf(c->arch, sizeof c->arch, "%s", arch);
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if ((rc = cfg_size(g, arch, keys[i], sizes[i], &present, err)))
			return rc;
	if (!c->n_kv_heads)
		c->n_kv_heads = c->n_heads;
	if (!c->head_dim && c->n_heads && c->d_model % c->n_heads == 0)
		c->head_dim = c->d_model / c->n_heads;
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	return SW_OK;
}

/* The model from the ARCH.* metadata (gguf.md; read as llama.cpp's
 * llama-model.cpp reads it), *gf the architecture's table. A family the
 * model computes needs the context and the norm's epsilon, and RoPE on
 * the whole of an even head; one read for its matrices (nothing is
 * computed from them) takes the context and epsilon where given, under
 * either name (GPT-2's layer_norm_epsilon). An architecture no table
 * knows (*gf NULL) is listed whole, every tensor of role other. */
static int take_config(const struct gguf_file *g, const struct family_gguf **gf,
		       struct sw_config *c, struct sw_err *err)
{
	const char *arch, *a;
	int64_t key_len = 0, value_len = 0, rot = 0, experts = 0;
	int has_kv, has_key, has_value, has_rot, has_theta, has_experts, has_ctx, has_eps, rc;
	int has_window, model, flags;

	memset(c, 0, sizeof *c);
	if ((rc = gguf_string(g, "general.architecture", &arch, NULL, err)))
		return rc;
	if (!(*gf = family_gguf_find(arch)))
		return unknown_config(g, arch, c, err);
	a = (*gf)->arch;
	flags = family_model_flags((*gf)->type);
	/* the families the model computes under Hugging Face's Llama names;
	 * GPT-2's and Gemma's GGUF are read for their matrices (the model's
	 * builders refuse them by name: c->unsupported) */
	model = flags != 0 && !family_find((*gf)->type)->names;
	snprintf(c->arch, sizeof c->arch, "%s", (*gf)->type);
	if ((rc = cfg_size(g, a, "embedding_length", &c->d_model, NULL, err)) ||
	    (rc = cfg_size(g, a, "block_count", &c->n_layers, NULL, err)) ||
	    (rc = cfg_size(g, a, "attention.head_count", &c->n_heads, NULL, err)) ||
	    (rc = cfg_size(g, a, "attention.head_count_kv", &c->n_kv_heads, &has_kv, err)) ||
	    (rc = cfg_size(g, a, "feed_forward_length", &c->d_ff, NULL, err)) ||
	    (rc = cfg_size(g, a, "context_length", &c->seq_len, model ? NULL : &has_ctx, err)) ||
	    (rc = cfg_real(g, a, "attention.layer_norm_rms_epsilon", &c->norm_eps,
			   model ? NULL : &has_eps, err)) ||
	    (!model && !has_eps &&
	     (rc = cfg_real(g, a, "attention.layer_norm_epsilon", &c->norm_eps, &has_eps, err))) ||
	    (rc = cfg_real(g, a, "rope.freq_base", &c->rope_theta, &has_theta, err)) ||
	    (rc = cfg_size(g, a, "attention.key_length", &key_len, &has_key, err)) ||
	    (rc = cfg_size(g, a, "attention.value_length", &value_len, &has_value, err)) ||
	    (rc = cfg_size(g, a, "rope.dimension_count", &rot, &has_rot, err)) ||
	    (rc = vocab_size(g, a, c, err)))
		return rc;
	if (!has_kv)
		c->n_kv_heads = c->n_heads;
	if (!has_theta)
		c->rope_theta = 10000.0;        /* llama.cpp's default */
	if (has_key) {
		c->head_dim = key_len;
	} else if ((rc = arch_default_head_dim(c, err))) {
		sw_err_prefix(err, "metadata %s.embedding_length and %s.attention.head_count", a, a);
		return rc;
	}
	if (model && has_value && value_len != c->head_dim)
		return sw_fail(err, SW_EDATA, "%s.attention.value_length %lld differs from the key "
			       "length %lld", a, (long long)value_len, (long long)c->head_dim);
	if (model && has_rot && rot != c->head_dim)
		return sw_fail(err, SW_EDATA, "%s.rope.dimension_count %lld: RoPE on part of a head "
			       "of %lld is not supported", a, (long long)rot, (long long)c->head_dim);
	if (model && c->head_dim % 2)
		return sw_fail(err, SW_EDATA, "head_dim %lld is odd: RoPE rotates pairs",
			       (long long)c->head_dim);
	if (model && (rc = take_rope_scaling(g, a, c, err)))
		return rc;
	/* a window beside Llama's (llama.cpp's converter writes none for
	 * Llama): every layer slides, for arch_window_check to honour or
	 * refuse (Qwen2's max_window_layers 0) */
	if (model && strcmp(a, "llama") &&
	    (rc = cfg_size(g, a, "attention.sliding_window", &c->sliding_window, &has_window, err)))
		return rc;
	/* llama.cpp writes Mixtral as llama with experts: read as the
	 * mixtral family, its matrices listed and the model refusing it by
	 * name (family.c) */
	if ((rc = cfg_size(g, a, "expert_count", &experts, &has_experts, err)))
		return rc;
	if (!strcmp(a, "llama") && has_experts && experts > 0)
		strcpy(c->arch, "mixtral");
	/* QK-norm: the model's flag (Qwen3), or, in a family read for its
	 * matrices, gains its table names (sw-qkdrift reads them) */
	c->qk_norm = (flags & FAMILY_QK_NORM) != 0;
	for (size_t i = 0; !model && i < (*gf)->n_names; i++)
		c->qk_norm |= !strcmp((*gf)->names[i].role, "q_norm");
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	if (flags && !model)
		snprintf(c->unsupported, sizeof c->unsupported, "%s from GGUF (read for its matrices "
			 "only: sw-ls, sw-norms, sw-spectrum)", c->arch);
	return arch_config_check(c, err);
}

/* A tensor its architecture's table does not name: role other, in its
 * layer when blk.N. says one. */
static int set_other(const struct sw_config *c, const char *name, struct sw_tensor_info *t,
		     struct sw_err *err)
{
	const char *rest;
	long layer = layer_of(name, &rest);
	int rc;

	if ((rc = st_name_check(name, err)))
		return rc;
	arch_info_other(name, layer >= 0 && layer < c->n_layers ? (int)layer : -1, t);
	return SW_OK;
}

/* The role, layer, expert and name of GGUF tensor gt by gf's table: a
 * family the model computes takes the Hugging Face names of its roles
 * (those Llama has), a family read for its matrices keeps llama.cpp's. */
static int name_tensor(const struct sw_config *c, const struct family_gguf *gf,
		       const struct gguf_tensor *gt, struct sw_tensor_info *t, struct sw_err *err)
{
	const struct arch_family *f = family_find(c->arch);
	const char *rest, *role;
	long layer, expert;

	/* blk.N. as layer_of reads it (no leading zero), or no role */
	if (!gf || !(role = family_gguf_role(gf, gt->name, &layer, &expert)) ||
	    (layer >= 0 && layer_of(gt->name, &rest) != layer))
		return set_other(c, gt->name, t, err);
	if (layer >= c->n_layers)
		return sw_fail(err, SW_EDATA, "%s: layer %ld is outside 0..%lld", gt->name, layer,
			       (long long)c->n_layers - 1);
	arch_info_for_role(c, role, (int)layer, t);
	t->expert = (int)expert;
	if ((f && f->names) || !t->name[0]) {
		snprintf(t->name, sizeof t->name, "%s", gt->name);
		return st_name_check(t->name, err);
	}
	return SW_OK;
}

static int take_tensor(const struct sw_config *c, const struct family_gguf *gf,
		       const struct gguf_tensor *gt, struct sw_tensor_info *t,
		       struct ropeperm_tensor *at, struct attr_map *seen, struct sw_err *err)
{
	int rc;

	memset(t, 0, sizeof *t);
	if ((rc = name_tensor(c, gf, gt, t, err)))
		return rc;
	/* GGUF lists dims fastest first: [in, out] is PyTorch's [out, in] */
	t->rank = gt->n_dims;
	for (int k = 0; k < gt->n_dims; k++)
		t->shape[k] = gt->ne[gt->n_dims - 1 - k];
	t->numel = gt->numel;
	t->kind = sw_kind_of_shape(t->rank, t->shape);
	t->dtype = gt->dtype;
	snprintf(t->dtype_name, sizeof t->dtype_name, "%s", gguf_type_name(gt->type));
	t->lr = t->wd = NAN;
	t->wd_mode = SW_WD_UNKNOWN;
	if ((rc = family_check_shape(c, FAMILY_FROM_GGUF, t, err))) {
		sw_err_prefix(err, "%s", gt->name);
		return rc;
	}
	/* a name given to two tensors (a stray "model.norm.weight" beside
	 * output_norm) would be two datasets of one name in an export */
	if (attrmap_get(seen, t->name))
		return sw_fail(err, SW_EDATA, "%s: a second tensor named %s", gt->name, t->name);
	if ((rc = attrmap_set(seen, t->name, "", err)))
		return rc;
	at->offset = gt->offset;
	at->nbytes = gt->nbytes;
	at->dtype = gt->dtype;
	/* q and k as LlamaModel permuted them; no other family's are */
	at->permute = gf && gf->rope_permuted && arch_role_heads(t->role) == ARCH_HEADS_ROWS_ROPE;
	return SW_OK;
}

/* Parse the whole file, mapped (a file that shrinks meanwhile reads as
 * zeros and is then an I/O error, never SIGBUS). */
static int parse_mapped(int fd, uint64_t size, struct gguf_file *g, struct sw_err *err)
{
	struct mapguard map = {0};
	int rc;

	if (size > SIZE_MAX)
		return sw_fail(err, SW_EDATA, "too large to map");
	if ((rc = mapguard_map(fd, 0, (size_t)size, &map, err)))
		return rc;
	rc = gguf_parse(map.base, size, g, err);
	if (mapguard_check(&map, err)) {
		if (!rc)
			gguf_free(g);
		rc = SW_EIO;
	}
	mapguard_unmap(&map);
	return rc;
}

static int gguf_open(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *m,
		     struct sw_tensor_info **info_out, size_t *n_out, struct sw_err *err)
{
	struct sw_tensor_info *info = NULL;
	const struct family_gguf *gf = NULL;
	struct ropeperm_src *s;
	struct gguf_file g;
	struct attr_map seen;
	char source[32];
	int rc, tied = 1;

	(void)path;
	*src = NULL;
	if ((rc = parse_mapped(fd, size, &g, err))) {
		close(fd);
		return rc;
	}
	if ((rc = ropeperm_src_new(fd, size, g.nt, &s, err))) {
		gguf_free(&g);
		return rc;
	}
	attrmap_init(&seen);
	m->format = CKPT_GGUF;
	m->source = FAMILY_FROM_GGUF;  /* its converter stored what it changed (Gemma: 1 + w) */
	rc = take_config(&g, &gf, &m->config, err);
	if (!rc && !(info = calloc(g.nt ? g.nt : 1, sizeof *info)))
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < g.nt && !rc; i++) {
		rc = take_tensor(&m->config, gf, &g.t[i], &info[i], &s->t[i], &seen, err);
		tied &= strcmp(info[i].role, "lm_head") != 0;
	}
	s->head_dim = m->config.head_dim;
	m->config.tie_embeddings = tied && gf;     /* an unknown architecture's head is its own */
	snprintf(source, sizeof source, "GGUF v%u", (unsigned)g.version);
	if (!rc)
		rc = ropeperm_record(s, source, err);
	gguf_free(&g);
	attrmap_free(&seen);
	if (rc) {
		free(info);
		ropeperm_close(s);
		return rc;
	}
	*info_out = info;
	*n_out = s->n;
	*src = s;
	return SW_OK;
}

const struct ckpt_format_ops ggufsrc_format = {
	.name = "a GGUF file",
	.sniff = ggufsrc_sniff,
	.open = gguf_open,
	.load = ropeperm_load,
	.attrs = ropeperm_attrs,
	.close = ropeperm_close,
};
