/*
 * safetensors.c - Hugging Face safetensors: the parsers of the header,
 * model.safetensors.index.json and config.json (see safetensors.h).
 */
#include "safetensors.h"
#include "../base/grow.h"
#include "../base/family.h"
#include "../base/jsonstrict.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsers -------------------------------------------------------- */

static const struct { const char *name; int size; enum sw_dtype dtype; } dtypes[] = {
	{"F32", 4, SW_DTYPE_F32}, {"F16", 2, SW_DTYPE_F16}, {"BF16", 2, SW_DTYPE_BF16},
	{"F64", 8, SW_DTYPE_F64},
	{"BOOL", 1, SW_DTYPE_UNSUPPORTED}, {"U8", 1, SW_DTYPE_UNSUPPORTED},
	{"I8", 1, SW_DTYPE_UNSUPPORTED}, {"F8_E5M2", 1, SW_DTYPE_UNSUPPORTED},
	{"F8_E4M3", 1, SW_DTYPE_UNSUPPORTED}, {"I16", 2, SW_DTYPE_UNSUPPORTED},
	{"U16", 2, SW_DTYPE_UNSUPPORTED}, {"I32", 4, SW_DTYPE_UNSUPPORTED},
	{"U32", 4, SW_DTYPE_UNSUPPORTED}, {"I64", 8, SW_DTYPE_UNSUPPORTED},
	{"U64", 8, SW_DTYPE_UNSUPPORTED},
};

/* A JSON number that is a nonnegative integer below 2^53 (exact in double). */
static int json_uint(const cJSON *j, uint64_t *v)
{
	double d;

	if (!cJSON_IsNumber(j))
		return -1;
	d = j->valuedouble;
	if (!(d >= 0 && d <= 9007199254740992.0 && d == floor(d)))
		return -1;
	*v = (uint64_t)d;
	return 0;
}

/* qsort context without globals: order entries by their byte ranges
 * through an array of pointers. */
static int entry_cmp_offset(const void *a, const void *b)
{
	const struct st_entry *x = *(const struct st_entry *const *)a;
	const struct st_entry *y = *(const struct st_entry *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

int st_name_check(const char *name, struct sw_err *err)
{
	if (!name[0])
		return sw_fail(err, SW_EDATA, "a tensor has an empty name");
	if (strlen(name) >= SW_NAME_MAX)
		return sw_fail(err, SW_EDATA, "tensor name '%.64s...' is longer than %d bytes",
			       name, SW_NAME_MAX - 1);
	/* HDF5 reads '/' as a path separator ("/x" would land at the root)
	 * and refuses "." as a link name */
	if (strchr(name, '/') || !strcmp(name, "."))
		return sw_fail(err, SW_EDATA,
			       "tensor name '%s' is not a valid name (it is '.' or holds '/')", name);
	return SW_OK;
}

/*
 * The header is walked in place (jsonstrict.h's cursor) once it is known
 * to be valid JSON with unique keys: no tree of it is built, so a header
 * of a million tensors takes its own size plus about 100 bytes a tensor.
 * Decoded strings go to the pool: the names stay there (the entries point
 * at them), scratch text goes past them. The pool has the header's length
 * plus one: decoded strings never take more than their quoted text.
 */
struct walk {
	const char *end;
	char *pool;
	size_t pool_len;        /* the names kept */
};

/* The value at p as a nonnegative integer below 2^53 (exact in double). */
static int walk_uint(const char *p, uint64_t *v)
{
	double d;

	if (*p != '-' && (*p < '0' || *p > '9'))
		return -1;
	d = strtod(p, NULL);    /* a valid JSON number, a delimiter after it */
	if (!(d >= 0 && d <= 9007199254740992.0 && d == floor(d)))
		return -1;
	*v = (uint64_t)d;
	return 0;
}

/* The number of values of the array at p ('['). */
static int walk_count(const struct walk *w, const char *p)
{
	int n = 0;

	p = jsonstrict_ws(p + 1, w->end);
	if (*p == ']')
		return 0;
	for (;;) {
		p = jsonstrict_ws(jsonstrict_skip(p, w->end), w->end);
		if (n < INT_MAX)
			n++;
		if (*p++ == ']')
			return n;
		p = jsonstrict_ws(p, w->end);
	}
}

/* The integers of the array at p ('['), n of them (walk_count). */
static int walk_uints(const struct walk *w, const char *p, uint64_t *v, int n)
{
	p = jsonstrict_ws(p + 1, w->end);
	for (int i = 0; i < n; i++) {
		if (walk_uint(p, &v[i]) < 0)
			return -1;
		p = jsonstrict_ws(jsonstrict_skip(p, w->end), w->end);
		p = jsonstrict_ws(p + 1, w->end);       /* ',' or ']' */
	}
	return 0;
}

/* One tensor's entry, its value at p; *next past it. */
static int walk_entry(struct walk *w, const char *p, const char **next, struct st_entry *e,
		      struct sw_err *err)
{
	const char *dt = NULL, *shape = NULL, *offs = NULL;
	char *scratch = w->pool + w->pool_len;
	uint64_t nbytes, begin_end[2], dims[SW_MAX_RANK];
	int size = 0, rc;

	*next = jsonstrict_skip(p, w->end);
	if ((rc = st_name_check(e->name, err)))
		return rc;
	if (*p != '{')
		return sw_fail(err, SW_EDATA, "%s: entry is not an object", e->name);
	p = jsonstrict_ws(p + 1, w->end);
	while (*p == '"') {
		const char *v;
		p = jsonstrict_string(p, w->end, scratch);
		p = jsonstrict_ws(p, w->end);
		v = jsonstrict_ws(p + 1, w->end);       /* past ':' */
		if (!strcmp(scratch, "dtype"))
			dt = v;
		else if (!strcmp(scratch, "shape"))
			shape = v;
		else if (!strcmp(scratch, "data_offsets"))
			offs = v;
		p = jsonstrict_ws(jsonstrict_skip(v, w->end), w->end);
		if (*p == ',')
			p = jsonstrict_ws(p + 1, w->end);
	}
	if (!dt || *dt != '"' || !shape || *shape != '[' || !offs || *offs != '[')
		return sw_fail(err, SW_EDATA, "%s: needs dtype, shape and data_offsets", e->name);
	jsonstrict_string(dt, w->end, scratch);
	for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
		if (!strcmp(scratch, dtypes[k].name)) {
			size = dtypes[k].size;
			e->dtype = dtypes[k].dtype;
			e->dtype_name = dtypes[k].name;
		}
	if (!size)
		return sw_fail(err, SW_EDATA, "%s: unknown dtype '%.32s'", e->name, scratch);
	e->rank = walk_count(w, shape);
	if (e->rank > SW_MAX_RANK)
		return sw_fail(err, SW_EDATA, "%s: rank %d is not supported", e->name, e->rank);
	if (walk_uints(w, shape, dims, e->rank) < 0)
		return sw_fail(err, SW_EDATA, "%s: shape holds a non-integer", e->name);
	for (int i = 0; i < e->rank; i++)
		e->shape[i] = (int64_t)dims[i];
	if (sw_shape_numel(e->rank, e->shape, &e->numel) < 0 ||
	    __builtin_mul_overflow((uint64_t)e->numel, (uint64_t)size, &nbytes))
		return sw_fail(err, SW_EDATA, "%s: element count overflows", e->name);
	if (walk_count(w, offs) != 2 || walk_uints(w, offs, begin_end, 2) < 0 ||
	    begin_end[0] > begin_end[1])
		return sw_fail(err, SW_EDATA, "%s: data_offsets is not [begin, end]", e->name);
	if (begin_end[1] - begin_end[0] != nbytes)
		return sw_fail(err, SW_EDATA,
			       "%s: data_offsets span %llu bytes, shape and dtype need %llu",
			       e->name, (unsigned long long)(begin_end[1] - begin_end[0]),
			       (unsigned long long)nbytes);
	e->begin = begin_end[0];
	e->end = begin_end[1];
	return SW_OK;
}

/* The "__metadata__" object at p: strings only; added to meta when not
 * NULL. */
static int walk_metadata(struct walk *w, const char *p, struct attr_map *meta,
			 struct sw_err *err)
{
	char *key = w->pool + w->pool_len;
	int rc;

	if (*p != '{')
		return sw_fail(err, SW_EDATA, "__metadata__ is not an object");
	p = jsonstrict_ws(p + 1, w->end);
	while (*p == '"') {
		char *value;
		p = jsonstrict_string(p, w->end, key);
		p = jsonstrict_ws(jsonstrict_ws(p, w->end) + 1, w->end);
		if (*p != '"')
			return sw_fail(err, SW_EDATA, "__metadata__ values must be strings");
		value = key + strlen(key) + 1;
		p = jsonstrict_ws(jsonstrict_string(p, w->end, value), w->end);
		if (meta && (rc = attrmap_set(meta, key, value, err)))
			return rc;
		if (*p == ',')
			p = jsonstrict_ws(p + 1, w->end);
	}
	return SW_OK;
}

/* The byte ranges tile the data part exactly, in offset order. */
static int check_tiling(const struct st_header *h, uint64_t data_len, struct sw_err *err)
{
	const struct st_entry **sorted;
	uint64_t end = 0;
	int rc = SW_OK;

	if (!(sorted = malloc((h->n ? h->n : 1) * sizeof *sorted)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < h->n; i++)
		sorted[i] = &h->e[i];
	if (h->n > 1)
		qsort(sorted, h->n, sizeof *sorted, entry_cmp_offset);
	for (size_t i = 0; i < h->n && !rc; i++) {
		if (sorted[i]->begin != end)
			rc = sw_fail(err, SW_EDATA,
				     sorted[i]->begin < end ?
				     "%s: data_offsets overlap the previous tensor's" :
				     "%s: data_offsets leave a gap before it",
				     sorted[i]->name);
		end = sorted[i]->end;
	}
	if (!rc && end != data_len)
		rc = sw_fail(err, SW_EDATA,
			     end > data_len ? "data_offsets reach byte %llu, beyond the data (%llu bytes): truncated file?"
					    : "data_offsets end at byte %llu but the data has %llu bytes",
			     (unsigned long long)end, (unsigned long long)data_len);
	free(sorted);
	return rc;
}

int st_parse_header(const char *json, size_t len, uint64_t data_len, struct attr_map *meta,
		    struct st_header *h, struct sw_err *err)
{
	struct walk w = {json + len, NULL, 0};
	size_t cap = 0;
	const char *p;
	int rc;

	memset(h, 0, sizeof *h);
	if (len == 0 || json[0] != '{')
		return sw_fail(err, SW_EDATA, "not a safetensors file (header does not start with '{')");
	/* strict: no bytes after the JSON but the spaces the writers pad
	 * with, valid UTF-8, every key once (jsonstrict.h) */
	if ((rc = jsonstrict_check(json, len, "safetensors header", err)))
		return rc;
	if (!(w.pool = malloc(len + 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	h->pool = w.pool;
	p = jsonstrict_ws(json + 1, w.end);
	while (*p == '"') {
		char *name = w.pool + w.pool_len;
		p = jsonstrict_string(p, w.end, name);
		p = jsonstrict_ws(jsonstrict_ws(p, w.end) + 1, w.end);  /* past ':' */
		if (!strcmp(name, "__metadata__")) {
			if ((rc = walk_metadata(&w, p, meta, err)))
				goto fail;
			p = jsonstrict_skip(p, w.end);
		} else {
			struct st_entry *e;
			if (SW_GROW(h->e, &cap, h->n + 1) < 0) {
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
				goto fail;
			}
			e = &h->e[h->n];
			memset(e, 0, sizeof *e);
			e->name = name;
			w.pool_len += strlen(name) + 1;
			if ((rc = walk_entry(&w, p, &p, e, err)))
				goto fail;
			h->n++;
		}
		p = jsonstrict_ws(p, w.end);
		if (*p == ',')
			p = jsonstrict_ws(p + 1, w.end);
	}
	if ((rc = check_tiling(h, data_len, err)))
		goto fail;
	return SW_OK;
fail:
	st_header_free(h);
	return rc;
}

void st_header_free(struct st_header *h)
{
	free(h->e);
	free(h->pool);
	memset(h, 0, sizeof *h);
}

static int cfg_int(const cJSON *root, const char *key, int64_t *v, int64_t dflt,
		   int required, struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
	uint64_t u;

	if (!j || cJSON_IsNull(j)) {
		if (required)
			return sw_fail(err, SW_EDATA, "config.json: missing %s", key);
		*v = dflt;
		return SW_OK;
	}
	if (json_uint(j, &u) < 0 || u >= (1ULL << 31))
		return sw_fail(err, SW_EDATA, "config.json: %s is not a valid size", key);
	*v = (int64_t)u;
	return SW_OK;
}

static int cfg_num(const cJSON *root, const char *key, double *v, double dflt,
		   struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	if (!j || cJSON_IsNull(j)) {
		*v = dflt;
		return SW_OK;
	}
	if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
		return sw_fail(err, SW_EDATA, "config.json: %s is not a number", key);
	*v = j->valuedouble;
	return SW_OK;
}

/* A name (rope_type, hidden_act) into buf: absent or null leaves "" */
static int cfg_name(const cJSON *obj, const char *key, const char *what, char *buf, size_t len,
		    struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!j || cJSON_IsNull(j))
		return SW_OK;
	if (!cJSON_IsString(j) || !j->valuestring[0] || strlen(j->valuestring) >= len)
		return sw_fail(err, SW_EDATA, "config.json: %s is not a name", what);
	snprintf(buf, len, "%s", j->valuestring);
	return SW_OK;
}

/*
 * RoPE's scaling, as transformers reads it: the object rope_scaling (4.x)
 * or rope_parameters (5.x), its type under rope_type or, in older
 * configs, type (which transformers copies over rope_type: two that
 * differ are refused); the parameters of linear and llama3 (the types
 * the model computes); another type kept by name (arch_model_check
 * refuses it for a model, a listing needs none). partial_rotary_factor
 * at the top or in rope_parameters.
 */
static int cfg_rope(const cJSON *root, struct sw_config *c, struct sw_err *err)
{
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"),
		    *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters"), *o = NULL;
	const char *key = "rope_scaling";
	char type[sizeof c->rope_type] = "", old[sizeof c->rope_type] = "";
	int rc;

	if ((rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs)) || (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp)))
		return sw_fail(err, SW_EDATA, "config.json: %s is not an object",
			       rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs) ? "rope_scaling" : "rope_parameters");
	if (cJSON_IsObject(rs) && cJSON_IsObject(rp))
		return sw_fail(err, SW_EDATA, "config.json: rope_scaling and rope_parameters both given "
			       "(which one holds is the reader's guess)");
	if ((rc = cfg_num(root, "partial_rotary_factor", &c->rope_partial, 0, err)))
		return rc;
	if (cJSON_IsObject(rs)) {
		o = rs;
	} else if (cJSON_IsObject(rp)) {
		o = rp;
		key = "rope_parameters";
		if (!cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor") &&
		    (rc = cfg_num(rp, "partial_rotary_factor", &c->rope_partial, 0, err)))
			return rc;
	}
	if (!o)
		return SW_OK;
	if ((rc = cfg_name(o, "rope_type", "rope_type", type, sizeof type, err)) ||
	    (rc = cfg_name(o, "type", "rope_scaling's type", old, sizeof old, err)))
		return rc;
	if (type[0] && old[0] && strcmp(type, old))
		return sw_fail(err, SW_EDATA, "config.json: %s: rope_type '%s' and type '%s' differ",
			       key, type, old);
	if (old[0])
		snprintf(type, sizeof type, "%s", old);
	if (!type[0])
		return sw_fail(err, SW_EDATA, "config.json: %s has no rope_type", key);
	if (!strcmp(type, "default"))
		return SW_OK;
	snprintf(c->rope_type, sizeof c->rope_type, "%s", type);
	if (strcmp(type, "linear") && strcmp(type, "llama3"))
		return SW_OK;
	if (!cJSON_GetObjectItemCaseSensitive(o, "factor"))
		return sw_fail(err, SW_EDATA, "config.json: %s %s has no factor", key, type);
	if ((rc = cfg_num(o, "factor", &c->rope_factor, 0, err)) || !strcmp(type, "linear"))
		return rc;
	if (!cJSON_GetObjectItemCaseSensitive(o, "low_freq_factor") ||
	    !cJSON_GetObjectItemCaseSensitive(o, "high_freq_factor"))
		return sw_fail(err, SW_EDATA, "config.json: %s llama3 needs low_freq_factor and "
			       "high_freq_factor", key);
	if ((rc = cfg_num(o, "low_freq_factor", &c->rope_low_freq_factor, 0, err)) ||
	    (rc = cfg_num(o, "high_freq_factor", &c->rope_high_freq_factor, 0, err)))
		return rc;
	return cfg_int(o, "original_max_position_embeddings", &c->rope_original_max, 0, 1, err);
}

/*
 * The sliding window in force, as transformers' classes read it: Mistral's
 * sliding_window (absent: MistralConfig's 4096; null: none); Qwen2's and
 * Qwen3's only under use_sliding_window, on the layers from
 * max_window_layers (default 28) on, or on those layer_types names
 * sliding_attention; LlamaConfig reads none.
 */
static int cfg_window(const cJSON *root, const char *arch, struct sw_config *c, struct sw_err *err)
{
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window"),
		    *use = cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window"),
		    *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
	int64_t w = 0, from = 0;
	int rc, qwen = !strncmp(arch, "qwen", 4), sliding = 0;

	/* LlamaForCausalLM and GemmaForCausalLM attend over every token */
	if (!strcmp(arch, "llama") || !strcmp(arch, "gemma"))
		return SW_OK;
	if (qwen) {
		if (use && !cJSON_IsNull(use) && !cJSON_IsBool(use))
			return sw_fail(err, SW_EDATA, "config.json: use_sliding_window is not true or false");
		if (!cJSON_IsTrue(use))
			return SW_OK;
		if ((rc = cfg_int(root, "max_window_layers", &from, 28, 0, err)))
			return rc;
		sliding = from < c->n_layers;
		if (cJSON_IsArray(types)) {
			/* the first layer layer_types slides (kept as max_window_layers:
			 * a round trip keeps the window in force) */
			const cJSON *t;
			int64_t l = 0;
			sliding = 0;
			cJSON_ArrayForEach(t, types) {
				if (!sliding && cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")) {
					sliding = 1;
					from = l;
				}
				l++;
			}
		}
		if (!sliding)
			return SW_OK;
	}
	if (sw && cJSON_IsNull(sw))
		return SW_OK;
	if ((rc = cfg_int(root, "sliding_window", &w, 4096, 0, err)))
		return rc;
	if (w == 0)
		return sw_fail(err, SW_EDATA, "config.json: sliding_window is 0");
	c->sliding_window = w;
	c->max_window_layers = from;
	return SW_OK;
}

/* A flag as transformers' class reads it: absent or null leaves *v 0 */
static int cfg_bool(const cJSON *root, const char *key, int *v, struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	if (j && !cJSON_IsNull(j) && !cJSON_IsBool(j))
		return sw_fail(err, SW_EDATA, "config.json: %s is not true or false", key);
	*v = cJSON_IsTrue(j);
	return SW_OK;
}

/*
 * The config of a family read for its matrices, or of an architecture no
 * table knows: what a listing uses, where config.json says it under one
 * of the names transformers' classes give it (GPT-2's n_layer, n_embd),
 * else 0 (unknown); nothing is computed from it, so nothing else is
 * asked of it (the model's builders refuse the family by name).
 */
static int listing_config(const cJSON *root, const struct arch_family *f, const char *named,
			  struct sw_config *c, struct sw_err *err)
{
	static const struct { const char *keys[3]; size_t off; } sizes[] = {
		{{"vocab_size"}, offsetof(struct sw_config, vocab_size)},
		{{"hidden_size", "n_embd", "d_model"}, offsetof(struct sw_config, d_model)},
		{{"num_hidden_layers", "n_layer", "num_layers"}, offsetof(struct sw_config, n_layers)},
		{{"num_attention_heads", "n_head"}, offsetof(struct sw_config, n_heads)},
		{{"num_key_value_heads"}, offsetof(struct sw_config, n_kv_heads)},
		{{"head_dim"}, offsetof(struct sw_config, head_dim)},
		{{"intermediate_size", "n_inner"}, offsetof(struct sw_config, d_ff)},
	};
	const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
	int rc;

	/* an unknown architecture is kept by its name (cut to fit: no
	 * family's name is as long), which names no family */
	snprintf(c->arch, sizeof c->arch, "%s", f ? f->type : named ? named : "");
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		int64_t *v = (int64_t *)((char *)c + sizes[i].off);
		for (size_t k = 0; k < 3 && sizes[i].keys[k] && !*v; k++)
			if ((rc = cfg_int(root, sizes[i].keys[k], v, 0, 0, err)))
				return rc;
	}
	if (!c->n_kv_heads)
		c->n_kv_heads = c->n_heads;
	if (!c->head_dim && c->n_heads && c->d_model % c->n_heads == 0)
		c->head_dim = c->d_model / c->n_heads;
	if (tie && !cJSON_IsBool(tie))
		return sw_fail(err, SW_EDATA, "config.json: tie_word_embeddings is not true or false");
	c->tie_embeddings = tie ? cJSON_IsTrue(tie) : f && f->tie_default;
	/* QK-norm where the family's table names its gains (OLMo2, OLMoE,
	 * Qwen3-MoE): sw-qkdrift reads the gains, not the matrices the norm
	 * undoes */
	for (size_t i = 0; f && i < f->n_names; i++)
		c->qk_norm |= !strcmp(f->names[i].role, "q_norm");
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	return SW_OK;
}

/*
 * GPT2Config's keys, with its defaults: n_embd, n_layer, n_head,
 * vocab_size; n_inner null or absent is 4 n_embd, n_positions the
 * learned positions' length (1024), layer_norm_epsilon (1e-5),
 * activation_function (gelu_new), tie_word_embeddings (true). The
 * attention options the step does not compute are kept by name for
 * arch_model_check: scale_attn_by_inverse_layer_idx true,
 * reorder_and_upcast_attn true, scale_attn_weights false.
 */
static int gpt2_config(const cJSON *root, struct sw_config *c, struct sw_err *err)
{
	static const struct { const char *key; int bad; } opts[] = {
		{"scale_attn_by_inverse_layer_idx", 1}, {"reorder_and_upcast_attn", 1},
		{"scale_attn_weights", 0},
	};
	const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
	int rc;

	if ((rc = cfg_int(root, "vocab_size", &c->vocab_size, 0, 1, err)) ||
	    (rc = cfg_int(root, "n_embd", &c->d_model, 0, 1, err)) ||
	    (rc = cfg_int(root, "n_layer", &c->n_layers, 0, 1, err)) ||
	    (rc = cfg_int(root, "n_head", &c->n_heads, 0, 1, err)) ||
	    (rc = cfg_int(root, "n_inner", &c->d_ff, 4 * c->d_model, 0, err)) ||
	    (rc = cfg_int(root, "n_positions", &c->seq_len, 1024, 0, err)) ||
	    (rc = cfg_num(root, "layer_norm_epsilon", &c->norm_eps, 1e-5, err)) ||
	    (rc = cfg_name(root, "activation_function", "activation_function", c->hidden_act,
			   sizeof c->hidden_act, err)))
		return rc;
	if (!c->hidden_act[0])
		snprintf(c->hidden_act, sizeof c->hidden_act, "gelu_new");
	c->n_kv_heads = c->n_heads;
	if ((rc = arch_default_head_dim(c, err))) {
		sw_err_prefix(err, "config.json (n_embd is d_model, n_head n_heads)");
		return rc;
	}
	c->rope_theta = 10000;          /* no RoPE; the config's checks want one */
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, opts[i].key);
		if (j && !cJSON_IsNull(j) && !cJSON_IsBool(j))
			return sw_fail(err, SW_EDATA, "config.json: %s is not true or false", opts[i].key);
		if (j && cJSON_IsBool(j) && cJSON_IsTrue(j) == opts[i].bad && !c->unsupported[0])
			snprintf(c->unsupported, sizeof c->unsupported, "%s %s", opts[i].key,
				 opts[i].bad ? "true" : "false");
	}
	if (tie && !cJSON_IsNull(tie) && !cJSON_IsBool(tie))
		return sw_fail(err, SW_EDATA, "config.json: tie_word_embeddings is not true or false");
	c->tie_embeddings = tie && cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : 1;
	return SW_OK;
}

/* a Gemma2 soft-cap or scalar: absent, transformers' default; null, none
 * (0) */
static int cfg_default_or_null(const cJSON *root, const char *key, double *v, double dflt,
			       struct sw_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	if (!j) {
		*v = dflt;
		return SW_OK;
	}
	return cfg_num(root, key, v, 0, err);
}

/*
 * Gemma's and Gemma2's keys beside Llama's: the activation is
 * hidden_activation (GemmaMLP and Gemma2MLP take ACT2FN of it, not of
 * hidden_act; absent or null gelu_pytorch_tanh, GemmaConfig's default);
 * Gemma2Config's attn_logit_softcapping (50), final_logit_softcapping
 * (30) and query_pre_attn_scalar (256), their defaults where absent, a
 * null soft-cap none.
 */
static int gemma_config(const cJSON *root, const char *found, struct sw_config *c,
			struct sw_err *err)
{
	int rc;

	c->hidden_act[0] = '\0';
	if ((rc = cfg_name(root, "hidden_activation", "hidden_activation", c->hidden_act,
			   sizeof c->hidden_act, err)))
		return rc;
	if (!c->hidden_act[0])
		snprintf(c->hidden_act, sizeof c->hidden_act, "gelu_pytorch_tanh");
	if (strcmp(found, "gemma2"))
		return SW_OK;
	if ((rc = cfg_default_or_null(root, "attn_logit_softcapping", &c->attn_softcap, 50, err)) ||
	    (rc = cfg_default_or_null(root, "final_logit_softcapping", &c->final_softcap, 30, err)) ||
	    (rc = cfg_default_or_null(root, "query_pre_attn_scalar", &c->query_pre_attn_scalar, 256,
				      err)))
		return rc;
	return SW_OK;
}

int st_parse_config(const char *json, size_t len, struct sw_config *c,
		    struct sw_err *err)
{
	cJSON *root;
	const cJSON *a, *mt, *tie, *rp, *hd;
	const struct arch_family *fam = NULL;
	const char *found, *named = NULL;
	int rc;

	memset(c, 0, sizeof *c);
	if ((rc = jsonstrict_parse(json, len, "config.json", &root, err)))
		return rc;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sw_fail(err, SW_EDATA, "config.json is not a JSON object");
	}
	a = cJSON_GetObjectItemCaseSensitive(root, "architectures");
	mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
	if (cJSON_IsArray(a) && cJSON_IsString(a->child))
		named = a->child->valuestring;
	else if (cJSON_IsString(mt))
		named = mt->valuestring;
	fam = family_find(named);
	if (!fam || !fam->model) {
		rc = listing_config(root, fam, named, c, err);
		goto out;
	}
	found = fam->type;
	snprintf(c->arch, sizeof c->arch, "%s", found);
	if (!strcmp(found, "gpt2")) {
		if ((rc = gpt2_config(root, c, err)))
			goto out;
		goto common;
	}
	if ((rc = cfg_int(root, "vocab_size", &c->vocab_size, 0, 1, err)) ||
	    (rc = cfg_int(root, "hidden_size", &c->d_model, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_hidden_layers", &c->n_layers, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_attention_heads", &c->n_heads, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_key_value_heads", &c->n_kv_heads, c->n_heads, 0, err)) ||
	    (rc = cfg_int(root, "intermediate_size", &c->d_ff, 0, 1, err)) ||
	    (rc = cfg_int(root, "max_position_embeddings", &c->seq_len, 0, 0, err)) ||
	    (rc = cfg_num(root, "rms_norm_eps", &c->norm_eps, 1e-6, err)))
		goto out;
	if (c->n_heads == 0) {
		rc = sw_fail(err, SW_EDATA, "config.json: num_attention_heads is 0");
		goto out;
	}
	/* no head_dim: d_model / n_heads, as transformers takes it, and
	 * refused where that does not divide (transformers would floor) */
	hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
	if (hd && !cJSON_IsNull(hd))
		rc = cfg_int(root, "head_dim", &c->head_dim, 0, 1, err);
	else if ((rc = arch_default_head_dim(c, err)))
		sw_err_prefix(err, "config.json (hidden_size is d_model, num_attention_heads n_heads)");
	if (rc)
		goto out;
	/* newer configs keep rope_theta inside rope_parameters */
	rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
	if ((rc = cfg_num(cJSON_IsObject(rp) ? rp : root, "rope_theta", &c->rope_theta,
			  10000.0, err)))
		goto out;
	/* what else changes the function: honoured or, for a model, refused
	 * by name (arch_model_check) */
	if ((rc = cfg_rope(root, c, err)) ||
	    (rc = cfg_name(root, "hidden_act", "hidden_act", c->hidden_act, sizeof c->hidden_act, err)) ||
	    (rc = cfg_window(root, found, c, err)))
		goto out;
	if (!strncmp(found, "gemma", 5) && (rc = gemma_config(root, found, c, err)))
		goto out;
	if (!strcmp(c->hidden_act, "silu"))
		c->hidden_act[0] = '\0';       /* the default: files without it stay so */
	tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
	if (tie && !cJSON_IsBool(tie)) {
		rc = sw_fail(err, SW_EDATA, "config.json: tie_word_embeddings is not true or false");
		goto out;
	}
	/* Gemma's classes tie unless told (tie_default) */
	c->tie_embeddings = tie ? cJSON_IsTrue(tie) : fam->tie_default;
	/* biases the model does not compute, for arch_model_check to refuse:
	 * LlamaConfig reads attention_bias and mlp_bias, Qwen3Config
	 * attention_bias; Mistral's and Qwen2's classes read neither */
	if ((!strcmp(found, "llama") || !strcmp(found, "qwen3")) &&
	    (rc = cfg_bool(root, "attention_bias", &c->attention_bias, err)))
		goto out;
	if (!strcmp(found, "llama") && (rc = cfg_bool(root, "mlp_bias", &c->mlp_bias, err)))
		goto out;
common:
	c->qk_norm = (family_model_flags(found) & FAMILY_QK_NORM) != 0;
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	rc = arch_config_check(c, err);
	if (rc)
		sw_err_prefix(err, "config.json");
out:
	cJSON_Delete(root);
	return rc;
}

int st_parse_index(const char *json, size_t len, struct st_index *idx, struct sw_err *err)
{
	const char *end = json + len, *p, *map = NULL;
	size_t cap = 0, used = 0;
	int rc;

	memset(idx, 0, sizeof *idx);
	/* walked in place like the header (an index of a million entries
	 * is no tree of a million nodes); the pool as there */
	if ((rc = jsonstrict_check(json, len, "index", err)))
		return rc;
	p = jsonstrict_ws(json, end);
	if (*p != '{')
		return sw_fail(err, SW_EDATA, "index is not a JSON object");
	if (!(idx->pool = malloc(len + 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	p = jsonstrict_ws(p + 1, end);
	while (*p == '"') {
		p = jsonstrict_string(p, end, idx->pool);
		p = jsonstrict_ws(jsonstrict_ws(p, end) + 1, end);
		if (!strcmp(idx->pool, "weight_map"))
			map = p;
		p = jsonstrict_ws(jsonstrict_skip(p, end), end);
		if (*p == ',')
			p = jsonstrict_ws(p + 1, end);
	}
	if (!map || *map != '{') {
		rc = sw_fail(err, SW_EDATA, "index has no weight_map object");
		goto out;
	}
	p = jsonstrict_ws(map + 1, end);
	while (*p == '"') {
		char *name = idx->pool + used, *f;
		p = jsonstrict_string(p, end, name);
		p = jsonstrict_ws(jsonstrict_ws(p, end) + 1, end);
		if ((rc = st_name_check(name, err))) {
			sw_err_prefix(err, "weight_map");
			goto out;
		}
		f = name + strlen(name) + 1;
		if (*p == '"')
			p = jsonstrict_string(p, end, f);
		else
			f = NULL;       /* not a string: refused below */
		if (!f || !f[0] || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..") ||
		    strlen(f) >= ST_SHARD_NAME_MAX) {
			rc = sw_fail(err, SW_EDATA,
				     "weight_map entry '%.64s' is not a plain shard file name", name);
			goto out;
		}
		if (SW_GROW(idx->e, &cap, idx->n + 1) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		idx->e[idx->n].name = name;
		idx->e[idx->n].shard = f;
		idx->n++;
		used += strlen(name) + strlen(f) + 2;
		p = jsonstrict_ws(p, end);
		if (*p == ',')
			p = jsonstrict_ws(p + 1, end);
	}
out:
	if (rc)
		st_index_free(idx);
	return rc;
}

void st_index_free(struct st_index *idx)
{
	free(idx->e);
	free(idx->pool);
	memset(idx, 0, sizeof *idx);
}
