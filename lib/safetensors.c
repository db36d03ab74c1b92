/*
 * safetensors.c - Hugging Face safetensors: the parsers of the header,
 * model.safetensors.index.json and config.json (see safetensors.h).
 */
#include "safetensors.h"
#include "jsonstrict.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
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
 * through an array of pointers (the entries are large). */
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

static int parse_entry(const cJSON *item, struct st_entry *e, struct sw_err *err)
{
	const cJSON *dt, *shape, *offs, *x;
	uint64_t nbytes, begin, end;
	int size = 0, i, rc;

	if ((rc = st_name_check(item->string, err)))
		return rc;
	strcpy(e->name, item->string);
	if (!cJSON_IsObject(item))
		return sw_fail(err, SW_EDATA, "%s: entry is not an object", e->name);
	dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
	shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
	offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
	if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
		return sw_fail(err, SW_EDATA, "%s: needs dtype, shape and data_offsets", e->name);
	for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
		if (!strcmp(dt->valuestring, dtypes[k].name)) {
			size = dtypes[k].size;
			e->dtype = dtypes[k].dtype;
			snprintf(e->dtype_name, sizeof e->dtype_name, "%s", dtypes[k].name);
		}
	if (!size)
		return sw_fail(err, SW_EDATA, "%s: unknown dtype '%.32s'", e->name, dt->valuestring);
	e->rank = cJSON_GetArraySize(shape);
	if (e->rank > SW_MAX_RANK)
		return sw_fail(err, SW_EDATA, "%s: rank %d is not supported", e->name, e->rank);
	i = 0;
	cJSON_ArrayForEach(x, shape) {
		uint64_t d;
		if (json_uint(x, &d) < 0)
			return sw_fail(err, SW_EDATA, "%s: shape holds a non-integer", e->name);
		e->shape[i++] = (int64_t)d;
	}
	if (sw_shape_numel(e->rank, e->shape, &e->numel) < 0 ||
	    __builtin_mul_overflow((uint64_t)e->numel, (uint64_t)size, &nbytes))
		return sw_fail(err, SW_EDATA, "%s: element count overflows", e->name);
	if (cJSON_GetArraySize(offs) != 2 || json_uint(offs->child, &begin) < 0 ||
	    json_uint(offs->child->next, &end) < 0 || begin > end)
		return sw_fail(err, SW_EDATA, "%s: data_offsets is not [begin, end]", e->name);
	if (end - begin != nbytes)
		return sw_fail(err, SW_EDATA,
			       "%s: data_offsets span %llu bytes, shape and dtype need %llu",
			       e->name, (unsigned long long)(end - begin),
			       (unsigned long long)nbytes);
	e->begin = begin;
	e->end = end;
	return SW_OK;
}

/* The "__metadata__" object: strings only; added to meta when not NULL. */
static int take_metadata(const cJSON *md, struct attr_map *meta, struct sw_err *err)
{
	const cJSON *m;
	int rc;

	if (!cJSON_IsObject(md))
		return sw_fail(err, SW_EDATA, "__metadata__ is not an object");
	cJSON_ArrayForEach(m, md) {
		if (!cJSON_IsString(m))
			return sw_fail(err, SW_EDATA, "__metadata__ values must be strings");
		if (meta && (rc = attrmap_set(meta, m->string, m->valuestring, err)))
			return rc;
	}
	return SW_OK;
}

int st_parse_header_meta(const char *json, size_t len, uint64_t data_len,
			 struct attr_map *meta, struct st_entry **out, size_t *n,
			 struct sw_err *err)
{
	cJSON *root = NULL, *item;
	struct st_entry *e = NULL, **sorted = NULL;
	size_t count = 0, k = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (len == 0 || json[0] != '{')
		return sw_fail(err, SW_EDATA, "not a safetensors file (header does not start with '{')");
	/* strict: no bytes after the JSON but the spaces the writers pad
	 * with, valid UTF-8, every key once (jsonstrict.h) */
	if ((rc = jsonstrict_parse(json, len, "safetensors header", &root, err)))
		return rc;
	cJSON_ArrayForEach(item, root)
		if (strcmp(item->string, "__metadata__") != 0)
			count++;
	e = calloc(count ? count : 1, sizeof *e);
	sorted = calloc(count ? count : 1, sizeof *sorted);
	if (!e || !sorted) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		if (!strcmp(item->string, "__metadata__")) {
			if ((rc = take_metadata(item, meta, err)))
				goto out;
			continue;
		}
		if ((rc = parse_entry(item, &e[k], err)))
			goto out;
		sorted[k] = &e[k];
		k++;
	}
	/* the byte ranges tile the data part exactly, in offset order */
	if (count > 1)
		qsort(sorted, count, sizeof *sorted, entry_cmp_offset);
	for (size_t i = 0; i < count; i++) {
		uint64_t expect = i ? sorted[i - 1]->end : 0;
		if (sorted[i]->begin != expect) {
			rc = sw_fail(err, SW_EDATA,
				     sorted[i]->begin < expect ?
				     "%s: data_offsets overlap the previous tensor's" :
				     "%s: data_offsets leave a gap before it",
				     sorted[i]->name);
			goto out;
		}
	}
	if ((count ? sorted[count - 1]->end : 0) != data_len) {
		uint64_t end = count ? sorted[count - 1]->end : 0;
		rc = sw_fail(err, SW_EDATA,
			     end > data_len ? "data_offsets reach byte %llu, beyond the data (%llu bytes): truncated file?"
					    : "data_offsets end at byte %llu but the data has %llu bytes",
			     (unsigned long long)end, (unsigned long long)data_len);
		goto out;
	}
	*out = e;
	*n = count;
	e = NULL;
out:
	free(e);
	free(sorted);
	cJSON_Delete(root);
	return rc;
}

int st_parse_header(const char *json, size_t len, uint64_t data_len,
		    struct st_entry **out, size_t *n, struct sw_err *err)
{
	return st_parse_header_meta(json, len, data_len, NULL, out, n, err);
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

int st_parse_config(const char *json, size_t len, struct sw_config *c,
		    struct sw_err *err)
{
	static const struct { const char *hf, *type, *arch; } archs[] = {
		{"LlamaForCausalLM", "llama", "llama"},
		{"MistralForCausalLM", "mistral", "mistral"},
		{"Qwen2ForCausalLM", "qwen2", "qwen2"},
		{"Qwen3ForCausalLM", "qwen3", "qwen3"},
	};
	cJSON *root;
	const cJSON *a, *mt, *tie, *rp;
	const char *found = NULL, *named = NULL;
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
	for (size_t i = 0; named && i < sizeof archs / sizeof archs[0]; i++)
		if (!strcmp(named, archs[i].hf) || !strcmp(named, archs[i].type))
			found = archs[i].arch;
	if (!found) {
		rc = sw_fail(err, SW_EDATA,
			     "config.json: architecture '%.64s' is not supported (Llama family: %s)",
			     named ? named : "(none)", ARCH_SUPPORTED_LIST);
		goto out;
	}
	snprintf(c->arch, sizeof c->arch, "%s", found);
	if ((rc = cfg_int(root, "vocab_size", &c->vocab_size, 0, 1, err)) ||
	    (rc = cfg_int(root, "hidden_size", &c->d_model, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_hidden_layers", &c->n_layers, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_attention_heads", &c->n_heads, 0, 1, err)) ||
	    (rc = cfg_int(root, "num_key_value_heads", &c->n_kv_heads, c->n_heads, 0, err)) ||
	    (rc = cfg_int(root, "intermediate_size", &c->d_ff, 0, 1, err)) ||
	    (rc = cfg_int(root, "max_position_embeddings", &c->seq_len, 0, 0, err)) ||
	    (rc = cfg_num(root, "rms_norm_eps", &c->norm_eps, 1e-6, err)))
		goto out;
	if (c->n_heads == 0 || (rc = cfg_int(root, "head_dim", &c->head_dim,
					     c->d_model / c->n_heads, 0, err))) {
		if (!rc)
			rc = sw_fail(err, SW_EDATA, "config.json: num_attention_heads is 0");
		goto out;
	}
	/* newer configs keep rope_theta inside rope_parameters */
	rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
	if ((rc = cfg_num(cJSON_IsObject(rp) ? rp : root, "rope_theta", &c->rope_theta,
			  10000.0, err)))
		goto out;
	tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
	if (tie && !cJSON_IsBool(tie)) {
		rc = sw_fail(err, SW_EDATA, "config.json: tie_word_embeddings is not true or false");
		goto out;
	}
	c->tie_embeddings = cJSON_IsTrue(tie);
	c->qk_norm = !strcmp(found, "qwen3");
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
	const cJSON *map, *item;
	size_t bytes = 0, k = 0;
	cJSON *root;
	char *at;
	int rc;

	memset(idx, 0, sizeof *idx);
	if ((rc = jsonstrict_parse(json, len, "index", &root, err)))
		return rc;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sw_fail(err, SW_EDATA, "index is not a JSON object");
	}
	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map)) {
		rc = sw_fail(err, SW_EDATA, "index has no weight_map object");
		goto out;
	}
	cJSON_ArrayForEach(item, map) {
		const char *f = cJSON_IsString(item) ? item->valuestring : NULL;
		if ((rc = st_name_check(item->string, err))) {
			sw_err_prefix(err, "weight_map");
			goto out;
		}
		if (!f || !f[0] || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..") ||
		    strlen(f) >= ST_SHARD_NAME_MAX) {
			rc = sw_fail(err, SW_EDATA,
				     "weight_map entry '%.64s' is not a plain shard file name",
				     item->string);
			goto out;
		}
		idx->n++;
		bytes += strlen(item->string) + strlen(f) + 2;
	}
	idx->e = calloc(idx->n ? idx->n : 1, sizeof *idx->e);
	idx->pool = malloc(bytes ? bytes : 1);
	if (!idx->e || !idx->pool) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	at = idx->pool;
	cJSON_ArrayForEach(item, map) {
		idx->e[k].name = at;
		at = stpcpy(at, item->string) + 1;
		idx->e[k].shard = at;
		at = stpcpy(at, item->valuestring) + 1;
		k++;
	}
out:
	if (rc)
		st_index_free(idx);
	cJSON_Delete(root);
	return rc;
}

void st_index_free(struct st_index *idx)
{
	free(idx->e);
	free(idx->pool);
	memset(idx, 0, sizeof *idx);
}

/* ---- __metadata__ -------------------------------------------------- */

int st_parse_metadata(const char *json, size_t len, struct attr_map *m,
		      struct sw_err *err)
{
	const cJSON *md;
	cJSON *root;
	int rc;

	if ((rc = jsonstrict_parse(json, len, "safetensors header", &root, err)))
		return rc;
	if (!cJSON_IsObject(root))
		rc = sw_fail(err, SW_EDATA, "safetensors header is not a JSON object");
	else if ((md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__")))
		rc = take_metadata(md, m, err);
	cJSON_Delete(root);
	return rc;
}
