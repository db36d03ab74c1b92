/* llama2c.c - llama2.c's checkpoint files (see llama2c.h). */
#include "llama2c.h"
#include "../base/arch.h"
#include "attrmap.h"
#include "../base/dtype.h"
#include "ropeperm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One kind of weight in the file: every layer's (per_layer) or one; role
 * NULL: the two RoPE tables (seq_len x head_dim/2 each, not weights). */
struct seg {
	const char *role;
	int per_layer;
};

/* The orders of legacy_export and version1_export (export.py); the RoPE
 * tables only when the file has them, lm_head (which may be tied) only
 * when untied. */
static const struct seg order_v0[] = {
	{"embed", 0}, {"attn_norm", 1}, {"q", 1}, {"k", 1}, {"v", 1}, {"o", 1}, {"ffn_norm", 1},
	{"gate", 1}, {"down", 1}, {"up", 1}, {"final_norm", 0}, {NULL, 0}, {"lm_head", 0},
};
static const struct seg order_v1[] = {
	{"attn_norm", 1}, {"ffn_norm", 1}, {"final_norm", 0}, {"embed", 0}, {"q", 1}, {"k", 1},
	{"v", 1}, {"o", 1}, {"gate", 1}, {"down", 1}, {"up", 1}, {"lm_head", 0},
};

static const struct seg *order_of(const struct l2c_header *h, size_t *n)
{
	*n = h->version ? sizeof order_v1 / sizeof order_v1[0]
			: sizeof order_v0 / sizeof order_v0[0];
	return h->version ? order_v1 : order_v0;
}

static int32_t le32(const unsigned char *p)
{
	return (int32_t)(uint32_t)sw_le_uint(p, 4);
}

/* A segment's shape as llama2.c stores it (the role's, PyTorch's [out,
 * in]), in floats; rank 0 for the RoPE tables. The header's sizes,
 * checked by plausible(), fit the config's: head_dim is dim / n_heads. */
static uint64_t seg_floats(const struct l2c_header *h, const struct seg *s, int64_t shape[2],
			   int *rank)
{
	struct sw_config c = {.vocab_size = h->vocab_size, .d_model = h->dim,
			      .n_heads = h->n_heads, .n_kv_heads = h->n_kv_heads,
			      .head_dim = h->dim / h->n_heads, .d_ff = h->hidden_dim};

	if (!s->role) {
		*rank = 0;
		return (uint64_t)h->seq_len * (uint64_t)c.head_dim;
	}
	*rank = arch_role_shape(&c, s->role, shape);
	return *rank == 2 ? (uint64_t)shape[0] * (uint64_t)shape[1] : (uint64_t)shape[0];
}

/* Does segment s lie in the file described by h? */
static int seg_present(const struct l2c_header *h, const struct seg *s)
{
	const struct arch_role *r = s->role ? arch_role_find(s->role) : NULL;

	if (!s->role)
		return h->freq_cis;
	return r && r->tied ? !h->shared : 1;
}

/* The bytes the file needs: header, weights, tables. The sizes are
 * bounded (plausible()), so nothing overflows. */
static uint64_t file_bytes(const struct l2c_header *h)
{
	size_t n;
	const struct seg *order = order_of(h, &n);
	uint64_t floats = 0;
	int64_t shape[2];
	int rank;

	for (const struct seg *s = order; s < order + n; s++)
		if (seg_present(h, s))
			floats += seg_floats(h, s, shape, &rank) *
				  (uint64_t)(s->per_layer ? h->n_layers : 1);
	return h->header_bytes + 4 * floats;
}

/* Every size positive and plausible, and the shapes consistent. */
static int plausible(const struct l2c_header *h)
{
	return h->dim > 0 && h->dim <= 65536 && h->hidden_dim > 0 && h->hidden_dim <= (1 << 20) &&
	       h->n_layers > 0 && h->n_layers <= 4096 && h->n_heads > 0 && h->n_heads <= 4096 &&
	       h->n_kv_heads > 0 && h->n_kv_heads <= h->n_heads && h->vocab_size > 0 &&
	       h->vocab_size <= (1 << 24) && h->seq_len > 0 && h->seq_len <= (1 << 24) &&
	       h->dim % h->n_heads == 0 && (h->dim / h->n_heads) % 2 == 0 &&
	       h->n_heads % h->n_kv_heads == 0;
}

static void take_params(struct l2c_header *h, const unsigned char *p)
{
	h->dim = le32(p);
	h->hidden_dim = le32(p + 4);
	h->n_layers = le32(p + 8);
	h->n_heads = le32(p + 12);
	h->n_kv_heads = le32(p + 16);
	h->vocab_size = le32(p + 20);
	h->seq_len = le32(p + 24);
}

static int sizes_message(const struct l2c_header *h, const char *what, struct sw_err *err)
{
	return sw_fail(err, SW_EDATA, "%s (dim %lld, hidden_dim %lld, %lld layers, %lld heads, "
		       "%lld KV heads, vocab %lld, seq_len %lld)", what, (long long)h->dim,
		       (long long)h->hidden_dim, (long long)h->n_layers, (long long)h->n_heads,
		       (long long)h->n_kv_heads, (long long)h->vocab_size, (long long)h->seq_len);
}

static int parse_v1(const unsigned char *buf, size_t len, uint64_t size, struct l2c_header *h,
		    struct sw_err *err)
{
	int32_t version;

	if (size < 8 || len < 8)
		return sw_fail(err, SW_EDATA, "truncated llama2.c header (%llu bytes)",
			       (unsigned long long)size);
	version = le32(buf + 4);
	if (version != 1)
		return sw_fail(err, SW_EDATA, "llama2.c version %d is not supported (0 and 1, float32, "
			       "are read)", (int)version);
	if (size < L2C_V1_HEADER || len < L2C_V1_HEADER)
		return sw_fail(err, SW_EDATA, "truncated llama2.c header (%llu of 256 bytes)",
			       (unsigned long long)size);
	h->version = 1;
	h->header_bytes = L2C_V1_HEADER;
	take_params(h, buf + 8);
	if (buf[36] > 1)
		return sw_fail(err, SW_EDATA, "llama2.c header: shared_classifier byte %u is neither 0 "
			       "nor 1", buf[36]);
	h->shared = buf[36];
	for (int i = 37; i < L2C_V1_HEADER; i++)
		if (buf[i])
			return sw_fail(err, SW_EDATA, "llama2.c header: byte %d of the padding is not 0", i);
	if (!plausible(h))
		return sizes_message(h, "llama2.c header: implausible sizes", err);
	h->bytes = file_bytes(h);
	if (h->bytes != size)
		return sw_fail(err, SW_EDATA, "the llama2.c header's sizes need %llu bytes, the file has "
			       "%llu", (unsigned long long)h->bytes, (unsigned long long)size);
	return SW_OK;
}

int l2c_parse_header(const unsigned char *buf, size_t len, uint64_t size, struct l2c_header *h,
		     int *plausible_out, struct sw_err *err)
{
	uint64_t with, without;

	memset(h, 0, sizeof *h);
	if (plausible_out)
		*plausible_out = 0;
	if (len >= 4 && (uint32_t)le32(buf) == L2C_MAGIC)
		return parse_v1(buf, len, size, h, err);
	if (size < L2C_V0_HEADER || len < L2C_V0_HEADER)
		return sw_fail(err, SW_EDATA, "not a llama2.c file (shorter than its 28-byte header)");
	h->header_bytes = L2C_V0_HEADER;
	take_params(h, buf);
	h->shared = h->vocab_size > 0;
	h->vocab_size = llabs(h->vocab_size);   /* from an int32: no overflow */
	if (!plausible(h))
		return sizes_message(h, "not a llama2.c file: implausible sizes", err);
	if (plausible_out)
		*plausible_out = 1;
	h->freq_cis = 1;
	with = file_bytes(h);
	h->freq_cis = 0;
	without = file_bytes(h);
	h->freq_cis = size == with;
	h->bytes = h->freq_cis ? with : without;
	if (size != with && size != without)
		return sw_fail(err, SW_EDATA, "the llama2.c header's sizes need %llu bytes (%llu without "
			       "the RoPE tables), the file has %llu", (unsigned long long)with,
			       (unsigned long long)without, (unsigned long long)size);
	return SW_OK;
}

/* ---- the reader ------------------------------------------------------ */

static int read_header(int fd, uint64_t size, struct l2c_header *h, int *plausible,
		       struct sw_err *err)
{
	unsigned char buf[L2C_V1_HEADER];
	size_t want = size < sizeof buf ? (size_t)size : sizeof buf;

	if (pread(fd, buf, want, 0) != (ssize_t)want)
		return sw_fail(err, SW_EIO, "short read of the header");
	return l2c_parse_header(buf, want, size, h, plausible, err);
}

static int l2c_sniff(int fd, uint64_t size)
{
	unsigned char magic[4];
	struct l2c_header h;

	if (size >= 4 && pread(fd, magic, 4, 0) == 4 && (uint32_t)le32(magic) == L2C_MAGIC)
		return 1;       /* the version and sizes are checked by open, with a message */
	return read_header(fd, size, &h, NULL, NULL) == SW_OK;
}

static int l2c_misfit_sniff(int fd, uint64_t size)
{
	unsigned char magic[4];
	struct l2c_header h;
	int plausible_header;

	if (size >= 4 && pread(fd, magic, 4, 0) == 4 && (uint32_t)le32(magic) == L2C_MAGIC)
		return 0;
	return read_header(fd, size, &h, &plausible_header, NULL) != SW_OK && plausible_header;
}

/* The model's sizes; the header's checks made head_dim an even divisor. */
static int take_config(const struct l2c_header *h, struct sw_config *c, struct sw_err *err)
{
	memset(c, 0, sizeof *c);
	strcpy(c->arch, "llama");
	c->vocab_size = h->vocab_size;
	c->d_model = h->dim;
	c->n_layers = h->n_layers;
	c->n_heads = h->n_heads;
	c->n_kv_heads = h->n_kv_heads;
	c->d_ff = h->hidden_dim;
	c->seq_len = h->seq_len;
	c->rope_theta = 10000.0;        /* run.c's RoPE */
	c->norm_eps = 1e-5;             /* run.c's rmsnorm */
	c->tie_embeddings = h->shared;
	c->scale_vectors = 1;
	strcpy(c->multipliers, "none");
	return arch_default_head_dim(c, err);
}

/* The tensors in file order, with their offsets. */
static int list_tensors(struct ropeperm_src *s, const struct l2c_header *h,
			const struct sw_config *c, struct sw_tensor_info **out, struct sw_err *err)
{
	size_t k = 0, nseg;
	const struct seg *order = order_of(h, &nseg);
	struct sw_tensor_info *info = calloc(s->n, sizeof *info);
	uint64_t at = h->header_bytes;
	int rc = SW_OK;

	if (!info)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (const struct seg *g = order; g < order + nseg && !rc; g++) {
		int64_t shape[2];
		int rank;
		uint64_t floats = seg_floats(h, g, shape, &rank);

		if (!seg_present(h, g))
			continue;
		for (int64_t l = 0; l < (g->per_layer ? h->n_layers : 1) && !rc; l++, at += 4 * floats) {
			struct sw_tensor_info *t;
			if (rank == 0)
				continue;       /* the RoPE tables: not weights */
			t = &info[k];
			arch_info_for_role(c, g->role, g->per_layer ? (int)l : -1, t);
			t->rank = rank;
			memcpy(t->shape, shape, sizeof shape);
			t->numel = (int64_t)floats;
			t->kind = sw_kind_of_shape(t->rank, t->shape);
			t->dtype = SW_DTYPE_F32;
			strcpy(t->dtype_name, "F32");
			t->lr = t->wd = NAN;
			t->wd_mode = SW_WD_UNKNOWN;
			rc = arch_check_shape(c, t, err);
			s->t[k].offset = at;
			s->t[k].nbytes = 4 * floats;
			s->t[k].dtype = SW_DTYPE_F32;
			s->t[k++].permute = arch_role_heads(g->role) == ARCH_HEADS_ROWS_ROPE;
		}
	}
	if (!rc && (k != s->n || at != h->bytes))
		rc = sw_fail(err, SW_ESOFTWARE, "llama2.c layout: %zu tensors ending at %llu", k,
			     (unsigned long long)at);
	if (rc) {
		free(info);
		return rc;
	}
	*out = info;
	return SW_OK;
}

static int l2c_open(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *m,
		    struct sw_tensor_info **info, size_t *n, struct sw_err *err)
{
	struct ropeperm_src *s;
	struct l2c_header h;
	int rc;

	(void)path;
	*src = NULL;
	if ((rc = read_header(fd, size, &h, NULL, err))) {
		close(fd);
		return rc;
	}
	if ((rc = ropeperm_src_new(fd, size, (size_t)(2 + 9 * h.n_layers + !h.shared), &s, err)))
		return rc;
	m->format = CKPT_LLAMA2C;
	rc = take_config(&h, &m->config, err);
	s->head_dim = m->config.head_dim;
	if (!rc && !(rc = arch_config_check(&m->config, err)) &&
	    !(rc = list_tensors(s, &h, &m->config, info, err)))
		rc = ropeperm_record(s, h.version ? "llama2.c v1" : "llama2.c v0 (legacy)", err);
	if (rc) {
		free(*info);
		*info = NULL;
		ropeperm_close(s);
		return rc;
	}
	*n = s->n;
	*src = s;
	return SW_OK;
}

/* A plausible legacy header the file's size disagrees with: said so. */
static int l2c_misfit_open(const char *path, int fd, uint64_t size, void **src,
			   struct ckpt_meta *m, struct sw_tensor_info **info, size_t *n,
			   struct sw_err *err)
{
	struct l2c_header h;
	int rc = read_header(fd, size, &h, NULL, err);

	(void)path, (void)src, (void)m, (void)info, (void)n;
	close(fd);
	return rc ? rc : sw_fail(err, SW_ESOFTWARE, "a llama2.c file taken for a misfit");
}

const struct ckpt_format_ops l2c_format = {
	.name = "a llama2.c file",
	.sniff = l2c_sniff,
	.open = l2c_open,
	.load = ropeperm_load,
	.attrs = ropeperm_attrs,
	.close = ropeperm_close,
};

const struct ckpt_format_ops l2c_misfit_format = {
	.name = "a llama2.c header that disagrees with its file",
	.sniff = l2c_misfit_sniff,
	.open = l2c_misfit_open,
	.load = ropeperm_load,
	.attrs = ropeperm_attrs,
	.close = ropeperm_close,
};
