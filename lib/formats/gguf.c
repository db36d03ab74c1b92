/* gguf.c - the GGUF parser (see gguf.h). */
#include "gguf.h"
#include "../base/dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's type names (ggml.h), by number; NULL: removed or unknown */
static const char *const type_names[] = {
	"F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
	"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
	"IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
	"IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4",
};
#define NTYPES (sizeof type_names / sizeof type_names[0])

static const char *const vtype_names[GGUF_NVTYPES] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64",
};
static const int vtype_size[GGUF_NVTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_type_name(uint32_t type)
{
	return type < NTYPES ? type_names[type] : NULL;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
	return (unsigned)t < GGUF_NVTYPES ? vtype_names[t] : "?";
}

/* A read position in the file's bytes. */
struct cur {
	const unsigned char *p;
	uint64_t pos, size;
};

static uint64_t left(const struct cur *c)
{
	return c->size - c->pos;
}

/* n bytes as a little-endian unsigned integer; -1 if the file ends first */
static int get(struct cur *c, int n, uint64_t *v)
{
	if (left(c) < (uint64_t)n)
		return -1;
	*v = sw_le_uint(c->p + c->pos, n);
	c->pos += (uint64_t)n;
	return 0;
}

static int truncated(const struct cur *c, const char *what, struct sw_err *err)
{
	return sw_fail(err, SW_EDATA, "truncated file: %s at byte %llu runs past the end (%llu bytes)",
		       what, (unsigned long long)c->pos, (unsigned long long)c->size);
}

/* A GGUF string: a uint64 length and that many bytes, which must be in the
 * file; *at is where they start. */
static int get_string(struct cur *c, const char *what, uint64_t *at, uint64_t *len,
		      struct sw_err *err)
{
	uint64_t n;

	if (get(c, 8, &n))
		return truncated(c, what, err);
	if (n > left(c))
		return sw_fail(err, SW_EDATA, "%s: string length %llu at byte %llu runs past the end "
			       "of the file (%llu bytes)", what, (unsigned long long)n,
			       (unsigned long long)(c->pos - 8), (unsigned long long)c->size);
	*at = c->pos;
	*len = n;
	c->pos += n;
	return SW_OK;
}

/* One value of type t (any type; arrays nested depth deep so far); the
 * scalars' values and a STRING's copy into kv when kv is not NULL. Every
 * element is at least one byte of the file, an array of arrays or strings
 * at least 8 per element: the work is linear in the file's size. */
static int get_value(struct cur *c, const char *key, enum gguf_vtype t, int depth,
		     struct gguf_kv *kv, struct sw_err *err)
{
	uint64_t v, at, len, et, count;
	int rc;

	if (t == GGUF_STRING) {
		if ((rc = get_string(c, key, &at, &len, err)))
			return rc;
		if (kv) {
			if (!(kv->s = malloc(len + 1)))
				return sw_fail(err, SW_ESOFTWARE, "out of memory");
			memcpy(kv->s, c->p + at, len);
			kv->s[len] = '\0';
			kv->slen = len;
		}
		return SW_OK;
	}
	if (t == GGUF_ARRAY) {
		if (get(c, 4, &et) || get(c, 8, &count))
			return truncated(c, key, err);
		if (et >= GGUF_NVTYPES)
			return sw_fail(err, SW_EDATA, "metadata '%.100s': array of value type %llu, "
				       "not a GGUF type", key, (unsigned long long)et);
		if (kv) {
			kv->elem = (enum gguf_vtype)et;
			kv->count = count;
		}
		if (et == GGUF_ARRAY && depth + 1 >= GGUF_MAX_NESTING)
			return sw_fail(err, SW_EDATA, "metadata '%.100s': arrays nested deeper than %d",
				       key, GGUF_MAX_NESTING);
		if (et == GGUF_STRING || et == GGUF_ARRAY) {
			/* at least 8 (a length) or 12 (type, count) bytes each */
			if (count > left(c) / (et == GGUF_STRING ? 8 : 12))
				return sw_fail(err, SW_EDATA, "metadata '%.100s': %llu array elements "
					       "cannot fit in the %llu bytes left in the file", key,
					       (unsigned long long)count, (unsigned long long)left(c));
			for (uint64_t i = 0; i < count; i++)
				if ((rc = get_value(c, key, (enum gguf_vtype)et, depth + 1, NULL, err)))
					return rc;
			return SW_OK;
		}
		if (count > left(c) / (uint64_t)vtype_size[et])
			return sw_fail(err, SW_EDATA, "metadata '%.100s': an array of %llu %s runs past "
				       "the end of the file (%llu bytes)", key, (unsigned long long)count,
				       vtype_names[et], (unsigned long long)c->size);
		if (et == GGUF_BOOL)
			for (uint64_t i = 0; i < count; i++)
				if (c->p[c->pos + i] > 1)
					return sw_fail(err, SW_EDATA, "metadata '%.100s': bool %u is "
						       "neither 0 nor 1", key, c->p[c->pos + i]);
		c->pos += count * (uint64_t)vtype_size[et];
		return SW_OK;
	}
	if (get(c, vtype_size[t], &v))
		return truncated(c, key, err);
	if (t == GGUF_BOOL && v > 1)
		return sw_fail(err, SW_EDATA, "metadata '%.100s': bool %u is neither 0 nor 1", key,
			       (unsigned)v);
	if (!kv)
		return SW_OK;
	switch (t) {
	case GGUF_INT8: kv->i = (int8_t)v; break;
	case GGUF_INT16: kv->i = (int16_t)v; break;
	case GGUF_INT32: kv->i = (int32_t)v; break;
	case GGUF_INT64: kv->i = (int64_t)v; break;
	case GGUF_FLOAT32: {
		uint32_t b = (uint32_t)v;
		float f;
		memcpy(&f, &b, 4);
		kv->d = f;
		break;
	}
	case GGUF_FLOAT64: memcpy(&kv->d, &v, 8); break;
	default: kv->u = v; break;
	}
	return SW_OK;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct gguf_kv *)a)->key, ((const struct gguf_kv *)b)->key);
}

static int get_kv(struct cur *c, struct gguf_kv *kv, struct sw_err *err)
{
	uint64_t at, len, t;
	int rc;

	if ((rc = get_string(c, "a metadata key", &at, &len, err)))
		return rc;
	if (len == 0 || len > GGUF_KEY_MAX)
		return sw_fail(err, SW_EDATA, "a metadata key at byte %llu is %s", (unsigned long long)at,
			       len ? "longer than 65535 bytes" : "empty");
	for (uint64_t i = 0; i < len; i++)
		if (c->p[at + i] < 0x20 || c->p[at + i] > 0x7e)
			return sw_fail(err, SW_EDATA, "a metadata key at byte %llu holds byte 0x%02x "
				       "(keys are printable ASCII)", (unsigned long long)at, c->p[at + i]);
	if (!(kv->key = malloc(len + 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	memcpy(kv->key, c->p + at, len);
	kv->key[len] = '\0';
	kv->count = 1;
	if (get(c, 4, &t))
		return truncated(c, kv->key, err);
	if (t >= GGUF_NVTYPES)
		return sw_fail(err, SW_EDATA, "metadata '%.100s': value type %llu is not a GGUF type",
			       kv->key, (unsigned long long)t);
	kv->type = (enum gguf_vtype)t;
	return get_value(c, kv->key, kv->type, 0, kv, err);
}

/* general.alignment: a uint32 power of two (ggml reads it as one) */
static int take_alignment(struct gguf_file *f, struct sw_err *err)
{
	const struct gguf_kv *a = gguf_find(f, "general.alignment");

	f->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (!a)
		return SW_OK;
	if (a->type != GGUF_UINT32)
		return sw_fail(err, SW_EDATA, "metadata general.alignment has type %s, not uint32",
			       gguf_vtype_name(a->type));
	if (a->u == 0 || (a->u & (a->u - 1)) || a->u > GGUF_MAX_ALIGNMENT)
		return sw_fail(err, SW_EDATA, "general.alignment %llu is not a power of two up to %u",
			       (unsigned long long)a->u, GGUF_MAX_ALIGNMENT);
	f->alignment = a->u;
	return SW_OK;
}

/* The types read, as the refusals list them */
#define TYPES_READ "F32, F16, BF16, F64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K are read"

/* ggml's quantized types the reader dequantizes (dtype.c) */
static const struct {
	uint32_t type;
	enum sw_dtype dtype;
} quantized[] = {
	{GGML_Q4_0, SW_DTYPE_Q4_0}, {GGML_Q4_1, SW_DTYPE_Q4_1}, {GGML_Q5_0, SW_DTYPE_Q5_0},
	{GGML_Q5_1, SW_DTYPE_Q5_1}, {GGML_Q8_0, SW_DTYPE_Q8_0}, {GGML_Q2_K, SW_DTYPE_Q2_K},
	{GGML_Q3_K, SW_DTYPE_Q3_K}, {GGML_Q4_K, SW_DTYPE_Q4_K}, {GGML_Q5_K, SW_DTYPE_Q5_K},
	{GGML_Q6_K, SW_DTYPE_Q6_K},
};

/* A quantized tensor: rows of whole blocks (ggml's rule), its bytes. */
static int quantized_size(struct gguf_tensor *t, struct sw_err *err)
{
	const struct sw_dtype_block *b = sw_dtype_block(t->dtype);
	uint64_t nblocks;

	if (t->n_dims == 0 || t->ne[0] % b->values)
		return sw_fail(err, SW_EDATA, "%s: %s rows of %lld values are no whole number of "
			       "blocks of %d", t->name, b->name, t->n_dims ? (long long)t->ne[0] : 1LL,
			       b->values);
	nblocks = (uint64_t)t->numel / (uint64_t)b->values;
	if (nblocks > UINT64_MAX / (uint64_t)b->bytes)
		return sw_fail(err, SW_EDATA, "%s: %lld elements: too large", t->name,
			       (long long)t->numel);
	t->nbytes = nblocks * (uint64_t)b->bytes;
	return SW_OK;
}

/* A tensor type the reader converts, its dtype and bytes; or why not. */
static int tensor_type(struct gguf_tensor *t, struct sw_err *err)
{
	const char *name = gguf_type_name(t->type);
	uint64_t per = 0;

	for (size_t k = 0; k < sizeof quantized / sizeof quantized[0]; k++)
		if (quantized[k].type == t->type) {
			t->dtype = quantized[k].dtype;
			return quantized_size(t, err);
		}
	switch (t->type) {
	case GGML_F32: t->dtype = SW_DTYPE_F32; per = 4; break;
	case GGML_F16: t->dtype = SW_DTYPE_F16; per = 2; break;
	case GGML_BF16: t->dtype = SW_DTYPE_BF16; per = 2; break;
	case GGML_F64: t->dtype = SW_DTYPE_F64; per = 8; break;
	default:
		if (!name)
			return sw_fail(err, SW_EDATA, "%s: tensor type %u is not a ggml type", t->name,
				       (unsigned)t->type);
		if (name[0] == 'I' && name[1] >= '0' && name[1] <= '9')
			return sw_fail(err, SW_EDATA, "%s: %s: an integer tensor, not a weight (%s)",
				       t->name, name, TYPES_READ);
		return sw_fail(err, SW_EDATA, "%s: %s: a quantization not read (%s; read the "
			       "model's safetensors instead, or requantize the file: llama-quantize "
			       "--allow-requantize IN OUT Q8_0)", t->name, name, TYPES_READ);
	}
	if ((uint64_t)t->numel > UINT64_MAX / per)
		return sw_fail(err, SW_EDATA, "%s: %lld elements: too large", t->name,
			       (long long)t->numel);
	t->nbytes = (uint64_t)t->numel * per;
	return SW_OK;
}

static int get_tensor(struct cur *c, struct gguf_tensor *t, struct sw_err *err)
{
	uint64_t at, len, v;
	int rc;

	if ((rc = get_string(c, "a tensor name", &at, &len, err)))
		return rc;
	if (len == 0 || len >= GGUF_NAME_MAX)
		return sw_fail(err, SW_EDATA, "a tensor name at byte %llu is %s",
			       (unsigned long long)at, len ? "64 bytes or longer" : "empty");
	if (memchr(c->p + at, '\0', len))
		return sw_fail(err, SW_EDATA, "a tensor name at byte %llu holds a NUL byte",
			       (unsigned long long)at);
	memcpy(t->name, c->p + at, len);
	t->name[len] = '\0';
	if (get(c, 4, &v))
		return truncated(c, t->name, err);
	if (v > GGUF_MAX_DIMS)
		return sw_fail(err, SW_EDATA, "%s: %llu dimensions (at most %d)", t->name,
			       (unsigned long long)v, GGUF_MAX_DIMS);
	t->n_dims = (int)v;
	t->numel = 1;
	for (int k = 0; k < t->n_dims; k++) {
		if (get(c, 8, &v))
			return truncated(c, t->name, err);
		if (v > INT64_MAX || __builtin_mul_overflow(t->numel, (int64_t)v, &t->numel))
			return sw_fail(err, SW_EDATA, "%s: the element count overflows 64 bits", t->name);
		t->ne[k] = (int64_t)v;
	}
	if (get(c, 4, &v) || get(c, 8, &t->offset))
		return truncated(c, t->name, err);
	t->type = (uint32_t)v;
	return tensor_type(t, err);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct gguf_tensor *const *)a)->name,
		      (*(const struct gguf_tensor *const *)b)->name);
}

/* No name twice (ggml refuses it), in O(n log n). */
static int names_unique(const struct gguf_file *f, struct sw_err *err)
{
	const struct gguf_tensor **by = malloc((f->nt ? f->nt : 1) * sizeof *by);
	int rc = SW_OK;

	if (!by)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < f->nt; i++)
		by[i] = &f->t[i];
	if (f->nt > 1)
		qsort(by, f->nt, sizeof *by, name_cmp);
	for (size_t i = 1; i < f->nt && !rc; i++)
		if (!strcmp(by[i - 1]->name, by[i]->name))
			rc = sw_fail(err, SW_EDATA, "tensor %s appears twice", by[i]->name);
	free(by);
	return rc;
}

/* The data: tensor after tensor in file order from data_start, each
 * padded to the alignment (ggml's rule), inside the file, and nothing
 * after the last one's padding. */
static int place_tensors(struct gguf_file *f, uint64_t size, struct sw_err *err)
{
	uint64_t a = f->alignment, next = 0, padded;

	for (size_t i = 0; i < f->nt; i++) {
		struct gguf_tensor *t = &f->t[i];
		if (t->offset != next)
			return sw_fail(err, SW_EDATA, "%s: data offset %llu, expected %llu (each tensor's "
				       "data follows the one before, padded to the alignment %llu)",
				       t->name, (unsigned long long)t->offset, (unsigned long long)next,
				       (unsigned long long)a);
		if (f->data_start > size || t->offset > size - f->data_start ||
		    t->nbytes > size - f->data_start - t->offset)
			return sw_fail(err, SW_EDATA, "%s: data at offset %llu, %llu bytes, lies past the "
				       "end of the file (%llu bytes)", t->name,
				       (unsigned long long)(f->data_start + t->offset),
				       (unsigned long long)t->nbytes, (unsigned long long)size);
		t->offset += f->data_start;
		padded = (t->nbytes + a - 1) / a * a;   /* nbytes <= size: no overflow */
		next += padded;
	}
	if (f->data_start < size && size - f->data_start > next)
		return sw_fail(err, SW_EDATA, "%llu bytes after the tensor data (it ends at byte %llu)",
			       (unsigned long long)(size - f->data_start - next),
			       (unsigned long long)(f->data_start + next));
	return SW_OK;
}

int gguf_parse(const unsigned char *p, uint64_t size, struct gguf_file *f, struct sw_err *err)
{
	struct cur c = {p, 0, size};
	uint64_t version, nt, nkv;
	int rc = SW_OK;

	memset(f, 0, sizeof *f);
	if (size < 4 || memcmp(p, "GGUF", 4))
		return sw_fail(err, SW_EDATA, "not a GGUF file (no GGUF magic)");
	c.pos = 4;
	if (get(&c, 4, &version) || get(&c, 8, &nt) || get(&c, 8, &nkv))
		return truncated(&c, "the header", err);
	if ((version & 0xffff) == 0 && version)
		return sw_fail(err, SW_EDATA, "GGUF version %llu: a big-endian file (not supported)",
			       (unsigned long long)version);
	if (version != 2 && version != 3)
		return sw_fail(err, SW_EDATA, "GGUF version %llu is not supported (2 and 3 are read)",
			       (unsigned long long)version);
	f->version = (uint32_t)version;
	/* a pair takes 14 bytes at least, a tensor info 25: no larger arrays */
	if (nkv > left(&c) / 14 || nt > left(&c) / 25)
		return sw_fail(err, SW_EDATA, "%llu metadata pairs and %llu tensors cannot fit in the "
			       "file (%llu bytes)", (unsigned long long)nkv, (unsigned long long)nt,
			       (unsigned long long)size);
	f->kv = calloc(nkv ? nkv : 1, sizeof *f->kv);
	f->t = calloc(nt ? nt : 1, sizeof *f->t);
	if (!f->kv || !f->t) {
		gguf_free(f);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (; f->nkv < nkv && !rc; f->nkv++)
		rc = get_kv(&c, &f->kv[f->nkv], err);
	if (!rc) {
		if (f->nkv > 1)
			qsort(f->kv, f->nkv, sizeof *f->kv, key_cmp);
		for (size_t i = 1; i < f->nkv && !rc; i++)
			if (!strcmp(f->kv[i - 1].key, f->kv[i].key))
				rc = sw_fail(err, SW_EDATA, "metadata key '%.100s' appears twice",
					     f->kv[i].key);
	}
	if (!rc)
		rc = take_alignment(f, err);
	for (; f->nt < nt && !rc; f->nt++)
		rc = get_tensor(&c, &f->t[f->nt], err);
	if (!rc)
		rc = names_unique(f, err);
	if (!rc) {
		f->data_start = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
		rc = place_tensors(f, size, err);
	}
	if (rc)
		gguf_free(f);
	return rc;
}

void gguf_free(struct gguf_file *f)
{
	for (size_t i = 0; f->kv && i < f->nkv; i++) {
		free(f->kv[i].key);
		free(f->kv[i].s);
	}
	free(f->kv);
	free(f->t);
	memset(f, 0, sizeof *f);
}

const struct gguf_kv *gguf_find(const struct gguf_file *f, const char *key)
{
	struct gguf_kv want = {.key = (char *)key};

	return f->nkv ? bsearch(&want, f->kv, f->nkv, sizeof *f->kv, key_cmp) : NULL;
}

/* The entry of key for a getter: NULL with *present 0, or a refusal. */
static int lookup(const struct gguf_file *f, const char *key, const struct gguf_kv **kv,
		  int *present, struct sw_err *err)
{
	*kv = gguf_find(f, key);
	if (present)
		*present = *kv != NULL;
	if (!*kv && !present)
		return sw_fail(err, SW_EDATA, "missing metadata %s", key);
	return SW_OK;
}

int gguf_uint(const struct gguf_file *f, const char *key, uint64_t *v, int *present,
	      struct sw_err *err)
{
	const struct gguf_kv *kv;
	int rc = lookup(f, key, &kv, present, err);

	if (rc || !kv)
		return rc;
	switch (kv->type) {
	case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT32: case GGUF_UINT64:
		*v = kv->u;
		return SW_OK;
	case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
		if (kv->i >= 0) {
			*v = (uint64_t)kv->i;
			return SW_OK;
		}
		return sw_fail(err, SW_EDATA, "metadata %s = %lld is negative", key, (long long)kv->i);
	default:
		return sw_fail(err, SW_EDATA, "metadata %s has type %s, not an integer", key,
			       gguf_vtype_name(kv->type));
	}
}

int gguf_real(const struct gguf_file *f, const char *key, double *v, int *present,
	      struct sw_err *err)
{
	const struct gguf_kv *kv;
	int rc = lookup(f, key, &kv, present, err);

	if (rc || !kv)
		return rc;
	if (kv->type != GGUF_FLOAT32 && kv->type != GGUF_FLOAT64)
		return sw_fail(err, SW_EDATA, "metadata %s has type %s, not float32", key,
			       gguf_vtype_name(kv->type));
	if (!isfinite(kv->d))
		return sw_fail(err, SW_EDATA, "metadata %s = %g is not finite", key, kv->d);
	*v = kv->d;
	return SW_OK;
}

int gguf_string(const struct gguf_file *f, const char *key, const char **v, int *present,
		struct sw_err *err)
{
	const struct gguf_kv *kv;
	int rc = lookup(f, key, &kv, present, err);

	if (rc || !kv)
		return rc;
	if (kv->type != GGUF_STRING)
		return sw_fail(err, SW_EDATA, "metadata %s has type %s, not string", key,
			       gguf_vtype_name(kv->type));
	if (strlen(kv->s) != kv->slen)
		return sw_fail(err, SW_EDATA, "metadata %s holds a NUL byte", key);
	*v = kv->s;
	return SW_OK;
}
