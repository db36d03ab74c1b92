/*
 * safetensors.c - Hugging Face safetensors: parsers, the ckpt back end and
 * the streaming writer (see safetensors.h).
 */
#include "safetensors.h"
#include "atomicfile.h"
#include "ckpt_impl.h"
#include "dtype.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int entry_cmp_offset(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

static int entry_cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct st_entry *)a)->name, ((const struct st_entry *)b)->name);
}

static int parse_entry(const cJSON *item, struct st_entry *e, struct sw_err *err)
{
	const cJSON *dt, *shape, *offs, *x;
	uint64_t nbytes, begin, end;
	int size = 0, i;

	if (strlen(item->string) >= sizeof e->name)
		return sw_fail(err, SW_EDATA, "tensor name too long");
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

int st_parse_header(const char *json, size_t len, uint64_t data_len,
		    struct st_entry **out, size_t *n, struct sw_err *err)
{
	cJSON *root, *item;
	struct st_entry *e = NULL, *sorted = NULL;
	size_t count = 0, k = 0;
	int rc = SW_OK;

	*out = NULL;
	*n = 0;
	if (len == 0 || json[0] != '{')
		return sw_fail(err, SW_EDATA, "not a safetensors file (header does not start with '{')");
	root = cJSON_ParseWithLength(json, len);
	if (!root)
		return sw_fail(err, SW_EDATA, "safetensors header is not valid JSON");
	if (!cJSON_IsObject(root)) {
		rc = sw_fail(err, SW_EDATA, "safetensors header is not a JSON object");
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		if (!item->string) {
			rc = sw_fail(err, SW_EDATA, "safetensors header has an unnamed entry");
			goto out;
		}
		if (strcmp(item->string, "__metadata__") != 0)
			count++;
	}
	e = calloc(count ? count : 1, sizeof *e);
	sorted = calloc(count ? count : 1, sizeof *sorted);
	if (!e || !sorted) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		if (!strcmp(item->string, "__metadata__")) {
			const cJSON *m;
			if (!cJSON_IsObject(item)) {
				rc = sw_fail(err, SW_EDATA, "__metadata__ is not an object");
				goto out;
			}
			cJSON_ArrayForEach(m, item)
				if (!cJSON_IsString(m)) {
					rc = sw_fail(err, SW_EDATA, "__metadata__ values must be strings");
					goto out;
				}
			continue;
		}
		if ((rc = parse_entry(item, &e[k], err)))
			goto out;
		k++;
	}
	memcpy(sorted, e, count * sizeof *e);
	qsort(sorted, count, sizeof *sorted, entry_cmp_name);
	for (size_t i = 1; i < count; i++)
		if (!strcmp(sorted[i - 1].name, sorted[i].name)) {
			rc = sw_fail(err, SW_EDATA, "tensor %s appears twice in the header", sorted[i].name);
			goto out;
		}
	/* the byte ranges tile the data part exactly, in offset order */
	qsort(sorted, count, sizeof *sorted, entry_cmp_offset);
	for (size_t i = 0; i < count; i++) {
		uint64_t expect = i ? sorted[i - 1].end : 0;
		if (sorted[i].begin != expect) {
			rc = sw_fail(err, SW_EDATA,
				     sorted[i].begin < expect ?
				     "%s: data_offsets overlap the previous tensor's" :
				     "%s: data_offsets leave a gap before it",
				     sorted[i].name);
			goto out;
		}
	}
	if ((count ? sorted[count - 1].end : 0) != data_len) {
		uint64_t end = count ? sorted[count - 1].end : 0;
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
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *a, *mt, *tie, *rp;
	const char *found = NULL, *named = NULL;
	int rc;

	memset(c, 0, sizeof *c);
	if (!root || !cJSON_IsObject(root)) {
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

int st_parse_index(const char *json, size_t len, struct st_index_entry **out,
		   size_t *n, struct sw_err *err)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *map, *item;
	struct st_index_entry *e = NULL;
	size_t count = 0, k = 0;
	int rc = SW_OK;

	*out = NULL;
	*n = 0;
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sw_fail(err, SW_EDATA, "index is not a JSON object");
	}
	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map)) {
		rc = sw_fail(err, SW_EDATA, "index has no weight_map object");
		goto out;
	}
	cJSON_ArrayForEach(item, map)
		count++;
	e = calloc(count ? count : 1, sizeof *e);
	if (!e) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(item, map) {
		const char *f = cJSON_IsString(item) ? item->valuestring : NULL;
		if (!f || !f[0] || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..") ||
		    strlen(f) >= sizeof e[k].shard || strlen(item->string) >= sizeof e[k].name) {
			rc = sw_fail(err, SW_EDATA,
				     "weight_map entry '%.64s' is not a plain shard file name",
				     item->string ? item->string : "");
			goto out;
		}
		strcpy(e[k].name, item->string);
		strcpy(e[k].shard, f);
		k++;
	}
	*out = e;
	*n = count;
	e = NULL;
out:
	free(e);
	cJSON_Delete(root);
	return rc;
}

/* ---- __metadata__ -------------------------------------------------- */

void st_meta_init(struct st_meta *m)
{
	memset(m, 0, sizeof *m);
}

void st_meta_free(struct st_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	free(m->kv);
	st_meta_init(m);
}

static long meta_find(const struct st_meta *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->kv[i].key, key))
			return (long)i;
	return -1;
}

const char *st_meta_get(const struct st_meta *m, const char *key)
{
	long i = meta_find(m, key);
	return i < 0 ? NULL : m->kv[i].value;
}

int st_meta_set(struct st_meta *m, const char *key, const char *value,
		struct sw_err *err)
{
	long i = meta_find(m, key);
	char *v = strdup(value), *k = i < 0 ? strdup(key) : NULL;

	if (!v || (i < 0 && !k)) {
		free(v);
		free(k);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	if (i >= 0) {
		free(m->kv[i].value);
		m->kv[i].value = v;
		return SW_OK;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 32;
		struct st_kv *p = realloc(m->kv, cap * sizeof *p);
		if (!p) {
			free(v);
			free(k);
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		}
		m->kv = p;
		m->cap = cap;
	}
	m->kv[m->n].key = k;
	m->kv[m->n].value = v;
	m->n++;
	return SW_OK;
}

int st_parse_metadata(const char *json, size_t len, struct st_meta *m,
		      struct sw_err *err)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *md, *item;
	int rc = SW_OK;

	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sw_fail(err, SW_EDATA, "safetensors header is not a JSON object");
	}
	md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
	if (md && !cJSON_IsObject(md))
		rc = sw_fail(err, SW_EDATA, "__metadata__ is not an object");
	else if (md)
		cJSON_ArrayForEach(item, md) {
			if (!item->string || !cJSON_IsString(item)) {
				rc = sw_fail(err, SW_EDATA, "__metadata__ values must be strings");
				break;
			}
			if ((rc = st_meta_set(m, item->string, item->valuestring, err)))
				break;
		}
	cJSON_Delete(root);
	return rc;
}

/* text is a whole decimal integer that fits int64 */
static int parse_int_text(const char *text, int64_t *v)
{
	char *end;
	long long x;

	if (!(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
		return -1;
	errno = 0;
	x = strtoll(text, &end, 10);
	if (errno || *end || end == text || (text[0] == '-' && !text[1]))
		return -1;
	*v = x;
	return 0;
}

/* text is a whole real number (strtod's syntax, no leading space) */
static int parse_real_text(const char *text, double *v)
{
	char *end;

	if (!text[0] || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r'))
		return -1;
	*v = strtod(text, &end);
	return *end ? -1 : 0;
}

void st_value_decode(const char *text, struct st_value *v)
{
	memset(v, 0, sizeof *v);
	if (text[0] == '\'') {
		v->type = ST_VSTR;
		v->s = text + 1;
	} else if (parse_int_text(text, &v->i) == 0) {
		v->type = ST_VINT;
	} else if (parse_real_text(text, &v->d) == 0) {
		v->type = ST_VREAL;
	} else {
		v->type = ST_VSTR;
		v->s = text;
	}
}

int st_value_encode(const struct st_value *v, char *buf, size_t len)
{
	int n;

	if (v->type == ST_VINT) {
		n = snprintf(buf, len, "%lld", (long long)v->i);
	} else if (v->type == ST_VREAL) {
		/* 17 significant digits round-trip every double */
		if (isnan(v->d))
			n = snprintf(buf, len, "nan");
		else if (isinf(v->d))
			n = snprintf(buf, len, v->d > 0 ? "inf" : "-inf");
		else
			n = snprintf(buf, len, "%.17g", v->d);
		if (n > 0 && (size_t)n < len && strspn(buf, "-0123456789") == (size_t)n)
			n = snprintf(buf + n, len - (size_t)n, ".0") + n;
	} else {
		struct st_value back;
		st_value_decode(v->s, &back);
		n = snprintf(buf, len, "%s%s", back.type == ST_VSTR && back.s == v->s ? "" : "'", v->s);
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* ---- the ckpt back end ---------------------------------------------- */

/* Read a whole small file (config.json, index) into a malloc'ed buffer. */
static int slurp(const char *path, size_t max, char **buf, size_t *len, struct sw_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	*buf = NULL;
	if (fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return sw_fail(err, SW_EDATA, "%s: not a regular file of at most %zu bytes", path, max);
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		close(fd);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	got = pread(fd, *buf, (size_t)st.st_size, 0);
	close(fd);
	if (got != st.st_size) {
		free(*buf);
		*buf = NULL;
		return sw_fail(err, SW_EIO, "%s: short read", path);
	}
	(*buf)[got] = '\0';
	*len = (size_t)got;
	return SW_OK;
}

static void dir_of(const char *path, char *dir, size_t len)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof tmp, "%s", path);
	snprintf(dir, len, "%s", dirname(tmp));
}

static int open_shard_(struct ckpt_shard *sh, struct st_entry **e, size_t *n,
		       uint64_t *data_start, struct st_meta *meta, struct sw_err *err);

/* Open one shard: check the header, return its entries, add its
 * __metadata__ to meta. */
static int open_shard(struct ckpt_shard *sh, struct st_entry **e, size_t *n,
		      uint64_t *data_start, struct st_meta *meta, int sharded,
		      struct sw_err *err)
{
	int rc = open_shard_(sh, e, n, data_start, meta, err);

	/* name the shard only when the user named another file */
	if (rc && sharded && !strstr(err->msg, sh->path))
		sw_err_prefix(err, "%s", sh->path);
	return rc;
}

static int open_shard_(struct ckpt_shard *sh, struct st_entry **e, size_t *n,
		       uint64_t *data_start, struct st_meta *meta, struct sw_err *err)
{
	unsigned char lenbuf[8];
	uint64_t hlen = 0;
	struct stat st;
	char *json;
	int rc;

	sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC);
	if (sh->fd < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (fstat(sh->fd, &st) < 0 || !S_ISREG(st.st_mode))
		return sw_fail(err, SW_ENOINPUT, "not a regular file");
	sh->size = (uint64_t)st.st_size;
	if (sh->size < 8 || pread(sh->fd, lenbuf, 8, 0) != 8)
		return sw_fail(err, SW_EDATA, "not a safetensors file (shorter than its 8-byte header length)");
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenbuf[i];
	if (hlen > ST_MAX_HEADER)
		return sw_fail(err, SW_EDATA,
			       "not a safetensors file (header length %llu exceeds 100 MB)",
			       (unsigned long long)hlen);
	if (hlen > sh->size - 8)
		return sw_fail(err, SW_EDATA,
			       "header length %llu runs past the end of the file (%llu bytes)",
			       (unsigned long long)hlen, (unsigned long long)sh->size);
	json = malloc(hlen ? hlen : 1);
	if (!json)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (pread(sh->fd, json, hlen, 8) != (ssize_t)hlen) {
		free(json);
		return sw_fail(err, SW_EIO, "short read of the header");
	}
	*data_start = 8 + hlen;
	rc = st_parse_header(json, hlen, sh->size - 8 - hlen, e, n, err);
	if (!rc)
		rc = st_parse_metadata(json, hlen, meta, err);
	free(json);
	return rc;
}

static int add_tensor(struct ckpt *ck, size_t k, const struct st_entry *e, int shard,
		      uint64_t data_start, struct sw_err *err)
{
	struct sw_tensor_info *t = &ck->info[k];
	int rc;

	memset(t, 0, sizeof *t);
	if (arch_info_from_hf_name(&ck->meta.config, e->name, t) < 0)
		return sw_fail(err, SW_EDATA, "%s: layer number outside 0..%lld",
			       e->name, (long long)ck->meta.config.n_layers - 1);
	t->dtype = e->dtype;
	memcpy(t->dtype_name, e->dtype_name, sizeof t->dtype_name);
	t->rank = e->rank;
	memcpy(t->shape, e->shape, sizeof t->shape);
	t->numel = e->numel;
	t->kind = sw_kind_of_shape(t->rank, t->shape);
	t->lr = t->wd = NAN;
	t->wd_mode = SW_WD_UNKNOWN;
	ck->loc[k].shard = shard;
	ck->loc[k].offset = data_start + e->begin;
	ck->loc[k].nbytes = e->end - e->begin;
	rc = arch_check_shape(&ck->meta.config, t, err);
	return rc;
}

/* The file name part of a path (no copy, unlike POSIX basename). */
static const char *base_name(const char *p)
{
	const char *slash = strrchr(p, '/');
	return slash ? slash + 1 : p;
}

/* Number key of the scalewatch metadata into *v (unchanged when absent). */
static int meta_number(const struct st_meta *m, const char *key, int integer,
		       double *v, int *present, struct sw_err *err)
{
	const char *text = st_meta_get(m, key);
	struct st_value x;

	if (present)
		*present = text != NULL;
	if (!text)
		return SW_OK;
	st_value_decode(text, &x);
	if (x.type == ST_VSTR || (integer && x.type != ST_VINT))
		return sw_fail(err, SW_EDATA, "__metadata__: %s = '%.40s' is not %s", key,
			       text, integer ? "an integer" : "a number");
	*v = x.type == ST_VINT ? (double)x.i : x.d;
	return SW_OK;
}

/*
 * A checkpoint sw-convert exported carries its scalewatch attributes in
 * the metadata (scalewatch-format(5)): take step, tokens, the losses and
 * each tensor's lr, wd and wd_mode from there, as the HDF5 reader would.
 */
static int apply_scalewatch_meta(struct ckpt *ck, struct sw_err *err)
{
	const struct st_meta *m = &ck->st_meta;
	char key[SW_NAME_MAX + 64];
	double step = 0, tokens = 0;
	int rc, has_step, has_tokens;

	if ((rc = meta_number(m, "scalewatch.step", 1, &step, &has_step, err)) ||
	    (rc = meta_number(m, "scalewatch.tokens", 1, &tokens, &has_tokens, err)) ||
	    (rc = meta_number(m, "scalewatch.metrics.train_loss", 0, &ck->meta.train_loss, NULL, err)) ||
	    (rc = meta_number(m, "scalewatch.metrics.val_loss", 0, &ck->meta.val_loss, NULL, err)))
		return rc;
	ck->meta.has_step = has_step && has_tokens;
	ck->meta.step = (int64_t)step;
	ck->meta.tokens = (int64_t)tokens;
	for (size_t i = 0; i < ck->n; i++) {
		struct sw_tensor_info *t = &ck->info[i];
		const char *mode;

		snprintf(key, sizeof key, "scalewatch.params.%s.lr", t->name);
		if ((rc = meta_number(m, key, 0, &t->lr, NULL, err)))
			return rc;
		snprintf(key, sizeof key, "scalewatch.params.%s.wd", t->name);
		if ((rc = meta_number(m, key, 0, &t->wd, NULL, err)))
			return rc;
		snprintf(key, sizeof key, "scalewatch.params.%s.wd_mode", t->name);
		if ((mode = st_meta_get(m, key)) && sw_wd_mode_parse(mode, &t->wd_mode) < 0)
			return sw_fail(err, SW_EDATA, "__metadata__: %s = '%.40s' is not a wd_mode",
				       key, mode);
	}
	return SW_OK;
}

static int find_index(const struct st_index_entry *idx, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(idx[i].name, name))
			return (int)i;
	return -1;
}

int stckpt_open(struct ckpt *ck, struct sw_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	struct st_index_entry *idx = NULL;
	size_t nidx = 0, total = 0;
	char *json = NULL;
	size_t len;
	int rc, is_index;

	dir_of(ck->path, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (access(path, F_OK) < 0)
		return sw_fail(err, SW_ENOINPUT,
			       "no config.json beside it (needed for the architecture)");
	if ((rc = slurp(path, 16u << 20, &json, &len, err)))
		return rc;
	rc = st_parse_config(json, len, &ck->meta.config, err);
	free(json);
	if (rc)
		return rc;

	is_index = strlen(ck->path) >= 5 && !strcmp(ck->path + strlen(ck->path) - 5, ".json");
	if (is_index) {
		if ((rc = slurp(ck->path, 64u << 20, &json, &len, err)))
			return rc;
		rc = st_parse_index(json, len, &idx, &nidx, err);
		free(json);
		if (rc)
			return rc;
		/* the distinct shards, in order of first appearance */
		ck->shards = calloc(nidx ? nidx : 1, sizeof *ck->shards);
		if (!ck->shards) {
			free(idx);
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		}
		for (size_t i = 0; i < nidx; i++) {
			int seen = 0;
			for (int s = 0; s < ck->nshards && !seen; s++)
				seen = !strcmp(base_name(ck->shards[s].path), idx[i].shard);
			if (!seen) {
				struct ckpt_shard *sh = &ck->shards[ck->nshards++];
				sh->fd = -1;
				if (snprintf(sh->path, sizeof sh->path, "%s/%s", dir,
					     idx[i].shard) >= (int)sizeof sh->path) {
					free(idx);
					return sw_fail(err, SW_ENOINPUT, "shard path too long");
				}
			}
		}
	} else {
		ck->shards = calloc(1, sizeof *ck->shards);
		if (!ck->shards)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		snprintf(ck->shards[0].path, sizeof ck->shards[0].path, "%s", ck->path);
		ck->shards[0].fd = -1;
		ck->nshards = 1;
	}
	for (int s = 0; s < ck->nshards; s++) {
		struct st_entry *e = NULL;
		size_t n = 0;
		uint64_t data_start = 0;
		void *p;

		if ((rc = open_shard(&ck->shards[s], &e, &n, &data_start, &ck->st_meta,
				     is_index, err)))
			goto out;
		p = realloc(ck->info, (total + n + 1) * sizeof *ck->info);
		if (p)
			ck->info = p;
		p = p ? realloc(ck->loc, (total + n + 1) * sizeof *ck->loc) : NULL;
		if (p)
			ck->loc = p;
		if (!p) {
			free(e);
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < n && !rc; i++) {
			if (is_index) {
				int j = find_index(idx, nidx, e[i].name);
				if (j < 0 || strcmp(idx[j].shard, base_name(ck->shards[s].path)))
					rc = sw_fail(err, SW_EDATA,
						     "%s holds %s, which the index does not list there",
						     ck->shards[s].path, e[i].name);
			}
			if (!rc)
				rc = add_tensor(ck, total + i, &e[i], s, data_start, err);
		}
		free(e);
		total += n;
		ck->n = total;
		if (rc)
			goto out;
	}
	if (is_index && total != nidx) {
		/* every listed tensor must be in its shard */
		for (size_t i = 0; i < nidx; i++) {
			int found = 0;
			for (size_t k = 0; k < total && !found; k++)
				found = !strcmp(ck->info[k].name, idx[i].name);
			if (!found) {
				rc = sw_fail(err, SW_EDATA, "the index lists %s in %s, which does not hold it",
					     idx[i].name, idx[i].shard);
				goto out;
			}
		}
	}
	if ((rc = apply_scalewatch_meta(ck, err)))
		goto out;
	ck->meta.head_tied = ckpt_find_role(ck, "lm_head", -1) < 0 &&
			     ckpt_find_role(ck, "embed", -1) >= 0 &&
			     ck->meta.config.tie_embeddings;
	rc = ckpt_sort_and_check(ck, err);
out:
	free(idx);
	return rc;
}

int stckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err)
{
	const struct sw_tensor_info *t = &ck->info[i];
	const struct ckpt_loc *l = &ck->loc[i];
	const struct ckpt_shard *sh = &ck->shards[l->shard];
	const void *bytes;
	float *buf;
	int rc;

	rc = ckpt_map(sh->fd, sh->size, l->offset, l->nbytes, v, &bytes, err);
	if (rc) {
		sw_err_prefix(err, "%s", t->name);
		return rc;
	}
	/* float32 at a 4-byte aligned address is used in place */
	if (t->dtype == SW_DTYPE_F32 && ((uintptr_t)bytes & 3) == 0) {
		v->data = bytes;
		v->mapped = 1;
		return SW_OK;
	}
	if ((rc = ckpt_buffer(ck, t->numel, v, &buf, err)))
		return rc;
	if (sw_to_f32(t->dtype, bytes, buf, (size_t)t->numel) < 0)
		return sw_fail(err, SW_EDATA, "%s: dtype %s cannot be read as float32",
			       t->name, t->dtype_name);
	if (v->map_base) {
		munmap(v->map_base, v->map_len);
		v->map_base = NULL;
	}
	v->data = buf;
	return SW_OK;
}

void stckpt_close(struct ckpt *ck)
{
	for (int s = 0; s < ck->nshards; s++)
		if (ck->shards[s].fd >= 0)
			close(ck->shards[s].fd);
	free(ck->shards);
	ck->shards = NULL;
	ck->nshards = 0;
}

/* ---- writer --------------------------------------------------------- */

struct stw {
	int fd;
	char tmp[PATH_MAX];
	char final[PATH_MAX];
	enum sw_dtype dtype;
	size_t next, n;
	int64_t *numel;         /* (n) expected element counts, in order */
	void *chunk;            /* conversion buffer */
};

#define STW_CHUNK 65536

int stw_create(const char *final_path, const struct sw_tensor_info *t, size_t n,
	       enum sw_dtype dtype, struct stw **out, struct sw_err *err)
{
	return stw_create_meta(final_path, t, n, dtype, NULL, out, err);
}

int stw_create_meta(const char *final_path, const struct sw_tensor_info *t, size_t n,
		    enum sw_dtype dtype, const struct st_meta *meta, struct stw **out,
		    struct sw_err *err)
{
	struct stw *w;
	cJSON *root = NULL;
	char *json = NULL;
	size_t hlen, pad;
	uint64_t offset = 0;
	unsigned char lenbuf[8];
	int rc, size = sw_dtype_size(dtype);

	*out = NULL;
	if (dtype != SW_DTYPE_F32 && dtype != SW_DTYPE_BF16)
		return sw_fail(err, SW_ESOFTWARE, "safetensors writer: F32 or BF16 only");
	w = calloc(1, sizeof *w);
	if (!w)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	w->fd = -1;
	w->dtype = dtype;
	w->n = n;
	w->numel = calloc(n ? n : 1, sizeof *w->numel);
	w->chunk = malloc(STW_CHUNK * 4);
	root = cJSON_CreateObject();
	if (!w->numel || !w->chunk || !root) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	if (meta && meta->n) {
		cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
		for (size_t i = 0; md && i < meta->n; i++)
			if (!cJSON_AddStringToObject(md, meta->kv[i].key, meta->kv[i].value))
				md = NULL;
		if (!md) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto fail;
		}
	}
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_AddObjectToObject(root, t[i].name), *shape, *offs;
		uint64_t nbytes = (uint64_t)t[i].numel * (uint64_t)size;
		if (!e || !cJSON_AddStringToObject(e, "dtype", dtype == SW_DTYPE_F32 ? "F32" : "BF16") ||
		    !(shape = cJSON_AddArrayToObject(e, "shape")) ||
		    !(offs = cJSON_AddArrayToObject(e, "data_offsets"))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto fail;
		}
		for (int d = 0; d < t[i].rank; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + nbytes)));
		offset += nbytes;
		w->numel[i] = t[i].numel;
	}
	json = cJSON_PrintUnformatted(root);
	if (!json) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	/* pad the header with spaces so the data starts 8-byte aligned */
	hlen = strlen(json);
	pad = (8 - (8 + hlen) % 8) % 8;
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
	if (strlen(final_path) >= sizeof w->final) {
		rc = sw_fail(err, SW_ECANTCREAT, "path too long");
		goto fail;
	}
	strcpy(w->final, final_path);
	if ((rc = atomic_create(final_path, w->tmp, sizeof w->tmp, &w->fd, err)))
		goto fail;
	if ((rc = atomic_write_all(w->fd, lenbuf, 8, final_path, err)) ||
	    (rc = atomic_write_all(w->fd, json, hlen, final_path, err)) ||
	    (rc = atomic_write_all(w->fd, "        ", pad, final_path, err)))
		goto fail;
	free(json);
	cJSON_Delete(root);
	*out = w;
	return SW_OK;
fail:
	free(json);
	cJSON_Delete(root);
	stw_abort(w);
	return rc;
}

int stw_write(struct stw *w, const float *data, int64_t numel, struct sw_err *err)
{
	if (w->next >= w->n || w->numel[w->next] != numel)
		return sw_fail(err, SW_ESOFTWARE, "safetensors writer: tensor %zu out of order", w->next);
	w->next++;
	if (w->dtype == SW_DTYPE_F32)
		return atomic_write_all(w->fd, data, (size_t)numel * 4, w->final, err);
	for (int64_t i = 0; i < numel; i += STW_CHUNK) {
		int64_t m = numel - i < STW_CHUNK ? numel - i : STW_CHUNK;
		uint16_t *h = w->chunk;
		int rc;
		for (int64_t k = 0; k < m; k++)
			h[k] = sw_f32_to_bf16(data[i + k]);
		if ((rc = atomic_write_all(w->fd, h, (size_t)m * 2, w->final, err)))
			return rc;
	}
	return SW_OK;
}

int stw_commit(struct stw *w, struct sw_err *err)
{
	int rc;

	if (w->next != w->n) {
		rc = sw_fail(err, SW_ESOFTWARE, "safetensors writer: %zu of %zu tensors written",
			     w->next, w->n);
		stw_abort(w);
		return rc;
	}
	if (close(w->fd) < 0) {
		w->fd = -1;
		rc = sw_fail(err, SW_EIO, "%s: close: %s", w->final, strerror(errno));
		stw_abort(w);
		return rc;
	}
	w->fd = -1;
	rc = atomic_commit(w->tmp, w->final, err);
	free(w->numel);
	free(w->chunk);
	free(w);
	return rc;
}

void stw_abort(struct stw *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
	} else if (w->tmp[0]) {
		unlink(w->tmp);
	}
	free(w->numel);
	free(w->chunk);
	free(w);
}

/* Write root as pretty JSON to final_path, atomically; frees root. */
static int write_json(const char *final_path, cJSON *root, struct sw_err *err)
{
	char tmp[PATH_MAX], *json = cJSON_Print(root);
	int rc, fd = -1;

	cJSON_Delete(root);
	if (!json)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	rc = atomic_create(final_path, tmp, sizeof tmp, &fd, err);
	if (!rc) {
		rc = atomic_write_all(fd, json, strlen(json), final_path, err);
		if (!rc)
			rc = atomic_write_all(fd, "\n", 1, final_path, err);
		rc = atomic_finish(fd, tmp, final_path, rc, err);
	}
	free(json);
	return rc;
}

int st_write_index(const char *final_path, uint64_t total_size,
		   const char *const *name, const char *const *shard, size_t n,
		   struct sw_err *err)
{
	cJSON *root = cJSON_CreateObject(), *md, *map;

	if (!root || !(md = cJSON_AddObjectToObject(root, "metadata")) ||
	    !cJSON_AddNumberToObject(md, "total_size", (double)total_size) ||
	    !(map = cJSON_AddObjectToObject(root, "weight_map"))) {
		cJSON_Delete(root);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		if (!cJSON_AddStringToObject(map, name[i], shard[i])) {
			cJSON_Delete(root);
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		}
	return write_json(final_path, root, err);
}

int st_write_config(const char *final_path, const struct sw_config *c,
		    const char *torch_dtype, struct sw_err *err)
{
	static const struct { const char *arch, *hf; } names[] = {
		{"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"},
		{"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
	};
	const char *hf = "LlamaForCausalLM";
	cJSON *root = cJSON_CreateObject(), *arr;

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(c->arch, names[i].arch))
			hf = names[i].hf;
	if (!root || !(arr = cJSON_AddArrayToObject(root, "architectures"))) {
		cJSON_Delete(root);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	cJSON_AddItemToArray(arr, cJSON_CreateString(hf));
	cJSON_AddStringToObject(root, "model_type", c->arch);
	cJSON_AddNumberToObject(root, "vocab_size", (double)c->vocab_size);
	cJSON_AddNumberToObject(root, "hidden_size", (double)c->d_model);
	cJSON_AddNumberToObject(root, "intermediate_size", (double)c->d_ff);
	cJSON_AddNumberToObject(root, "num_hidden_layers", (double)c->n_layers);
	cJSON_AddNumberToObject(root, "num_attention_heads", (double)c->n_heads);
	cJSON_AddNumberToObject(root, "num_key_value_heads", (double)c->n_kv_heads);
	cJSON_AddNumberToObject(root, "head_dim", (double)c->head_dim);
	cJSON_AddNumberToObject(root, "max_position_embeddings", (double)(c->seq_len ? c->seq_len : 2048));
	cJSON_AddNumberToObject(root, "rope_theta", c->rope_theta);
	cJSON_AddNumberToObject(root, "rms_norm_eps", c->norm_eps);
	cJSON_AddBoolToObject(root, "tie_word_embeddings", c->tie_embeddings);
	cJSON_AddBoolToObject(root, "attention_bias", 0);
	cJSON_AddBoolToObject(root, "mlp_bias", 0);
	cJSON_AddStringToObject(root, "hidden_act", "silu");
	cJSON_AddStringToObject(root, "torch_dtype", torch_dtype);
	return write_json(final_path, root, err);
}
