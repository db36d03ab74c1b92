/* llmcgpt2.c - llm.c's GPT-2 checkpoints (see llmcgpt2.h). */
#include "llmcgpt2.h"
#include "../base/arch.h"
#include "../base/dtype.h"
#include "../base/family.h"
#include "attrmap.h"
#include "ropeperm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * One kind of weight in the file, in write order: its name (%d the
 * layer, for a per-layer one), and its rows and columns in units of C
 * (d_model); rows_vocab / rows_pos: the padded vocabulary's or
 * block_size's rows instead.
 */
struct seg {
	const char *name;
	int per_layer;
	int rows_c, cols_c;             /* cols_c 0: a vector of rows_c * C */
	int rows_vocab, rows_pos;
};

#define G2 "transformer.h.%d."
static const struct seg order[] = {
	{"transformer.wte.weight", 0, 0, 1, 1, 0},
	{"transformer.wpe.weight", 0, 0, 1, 0, 1},
	{G2 "ln_1.weight", 1, 1, 0, 0, 0},
	{G2 "ln_1.bias", 1, 1, 0, 0, 0},
	{G2 "attn.c_attn.weight", 1, 3, 1, 0, 0},
	{G2 "attn.c_attn.bias", 1, 3, 0, 0, 0},
	{G2 "attn.c_proj.weight", 1, 1, 1, 0, 0},
	{G2 "attn.c_proj.bias", 1, 1, 0, 0, 0},
	{G2 "ln_2.weight", 1, 1, 0, 0, 0},
	{G2 "ln_2.bias", 1, 1, 0, 0, 0},
	{G2 "mlp.c_fc.weight", 1, 4, 1, 0, 0},
	{G2 "mlp.c_fc.bias", 1, 4, 0, 0, 0},
	{G2 "mlp.c_proj.weight", 1, 1, 4, 0, 0},
	{G2 "mlp.c_proj.bias", 1, 1, 0, 0, 0},
	{"transformer.ln_f.weight", 0, 1, 0, 0, 0},
	{"transformer.ln_f.bias", 0, 1, 0, 0, 0},
};
#undef G2
#define NSEG (sizeof order / sizeof order[0])
#define NPER_LAYER 12                   /* the per-layer segments */

static int64_t le32(const unsigned char *p)
{
	return (int32_t)(uint32_t)sw_le_uint(p, 4);
}

/* A segment's stored rows and columns (cols 0: a vector). */
static void seg_shape(const struct llmc_gpt2_header *h, const struct seg *s, int64_t *rows,
		      int64_t *cols)
{
	*rows = s->rows_vocab ? h->padded_vocab : s->rows_pos ? h->block_size
							      : s->rows_c * h->d_model;
	*cols = s->cols_c * h->d_model;
}

/* The bytes of the weights at elem bytes each; the sizes are bounded
 * (llmc_gpt2_parse_header), so nothing overflows. */
static uint64_t weight_bytes(const struct llmc_gpt2_header *h, int elem)
{
	uint64_t n = 0;

	for (const struct seg *s = order; s < order + NSEG; s++) {
		int64_t rows, cols;
		seg_shape(h, s, &rows, &cols);
		n += (uint64_t)rows * (uint64_t)(cols ? cols : 1) *
		     (uint64_t)(s->per_layer ? h->n_layers : 1);
	}
	return n * (uint64_t)elem;
}

int llmc_gpt2_parse_header(const unsigned char *buf, size_t len, uint64_t size,
			   struct llmc_gpt2_header *h, struct sw_err *err)
{
	memset(h, 0, sizeof *h);
	if (size < LLMC_GPT2_HEADER || len < LLMC_GPT2_HEADER)
		return sw_fail(err, SW_EDATA, "truncated llm.c GPT-2 header (%llu of 1024 bytes)",
			       (unsigned long long)size);
	if (le32(buf) != LLMC_GPT2_MAGIC)
		return sw_fail(err, SW_EDATA, "not an llm.c GPT-2 checkpoint (magic %lld)",
			       (long long)le32(buf));
	h->version = (int)le32(buf + 4);
	if (h->version != 3 && h->version != 5)
		return sw_fail(err, SW_EDATA, "llm.c GPT-2 checkpoint version %d is not read (3, "
			       "float32, and 5, bfloat16, are: export it again with llm.c's "
			       "train_gpt2.py)", h->version);
	h->block_size = le32(buf + 8);
	h->vocab_size = le32(buf + 12);
	h->n_layers = le32(buf + 16);
	h->n_heads = le32(buf + 20);
	h->d_model = le32(buf + 24);
	h->padded_vocab = le32(buf + 28);
	/* bounds that keep every product below 2^62 */
	if (h->d_model < 1 || h->d_model > 65536 || h->n_layers < 1 || h->n_layers > 4096 ||
	    h->n_heads < 1 || h->n_heads > 4096 || h->d_model % h->n_heads ||
	    h->vocab_size < 1 || h->vocab_size > 1 << 24 || h->padded_vocab < h->vocab_size ||
	    h->padded_vocab > 1 << 24 || h->block_size < 1 || h->block_size > 1 << 24)
		return sw_fail(err, SW_EDATA, "llm.c GPT-2 header: implausible sizes (block_size %lld, "
			       "vocab_size %lld, padded %lld, n_layer %lld, n_head %lld, n_embd %lld)",
			       (long long)h->block_size, (long long)h->vocab_size,
			       (long long)h->padded_vocab, (long long)h->n_layers,
			       (long long)h->n_heads, (long long)h->d_model);
	for (int i = 8; i < 256; i++)
		if (le32(buf + 4 * i))
			return sw_fail(err, SW_EDATA, "llm.c GPT-2 header: int %d of the padding is not 0",
				       i);
	h->bytes = LLMC_GPT2_HEADER + weight_bytes(h, h->version == 5 ? 2 : 4);
	if (h->bytes != size)
		return sw_fail(err, SW_EDATA, "the llm.c GPT-2 header's sizes need %llu bytes, the file "
			       "has %llu", (unsigned long long)h->bytes, (unsigned long long)size);
	return SW_OK;
}

static int read_header(int fd, uint64_t size, struct llmc_gpt2_header *h, struct sw_err *err)
{
	unsigned char buf[LLMC_GPT2_HEADER];
	size_t want = size < sizeof buf ? (size_t)size : sizeof buf;

	if (pread(fd, buf, want, 0) != (ssize_t)want)
		return sw_fail(err, SW_EIO, "short read of the header");
	return llmc_gpt2_parse_header(buf, want, size, h, err);
}

static int llmc_gpt2_sniff(int fd, uint64_t size)
{
	unsigned char magic[4];

	return size >= 4 && pread(fd, magic, 4, 0) == 4 && le32(magic) == LLMC_GPT2_MAGIC;
}

/* The model's config: nanoGPT's GPT, as llm.c computes it. */
static int take_config(const struct llmc_gpt2_header *h, struct sw_config *c, struct sw_err *err)
{
	memset(c, 0, sizeof *c);
	snprintf(c->arch, sizeof c->arch, "gpt2");
	c->vocab_size = h->vocab_size;
	c->d_model = h->d_model;
	c->n_layers = h->n_layers;
	c->n_heads = c->n_kv_heads = h->n_heads;
	c->d_ff = 4 * h->d_model;
	c->seq_len = h->block_size;
	c->rope_theta = 10000;          /* no RoPE; the config's checks want one */
	c->norm_eps = 1e-5;             /* llm.c's layernorm_forward */
	snprintf(c->hidden_act, sizeof c->hidden_act, "gelu_new");     /* its tanh GELU */
	c->tie_embeddings = 1;
	c->scale_vectors = 1;
	snprintf(c->multipliers, sizeof c->multipliers, "none");
	return arch_default_head_dim(c, err);
}

/* The tensors in file order, with their offsets. */
static int list_tensors(struct ropeperm_src *s, const struct llmc_gpt2_header *h,
			const struct sw_config *c, struct sw_tensor_info **out, struct sw_err *err)
{
	int elem = h->version == 5 ? 2 : 4;
	enum sw_dtype dtype = h->version == 5 ? SW_DTYPE_BF16 : SW_DTYPE_F32;
	struct sw_tensor_info *info = calloc(s->n, sizeof *info);
	uint64_t at = LLMC_GPT2_HEADER;
	size_t k = 0;
	int rc = SW_OK;

	if (!info)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (const struct seg *g = order; g < order + NSEG && !rc; g++) {
		int64_t rows, cols;
		seg_shape(h, g, &rows, &cols);
		for (int64_t l = 0; l < (g->per_layer ? h->n_layers : 1) && !rc; l++) {
			struct sw_tensor_info *t = &info[k];
			uint64_t numel = (uint64_t)rows * (uint64_t)(cols ? cols : 1);
			char name[SW_NAME_MAX];

			snprintf(name, sizeof name, g->name, (int)l);
			if (family_tensor_info(c, name, t) < 0) {
				rc = sw_fail(err, SW_ESOFTWARE, "%s: not a GPT-2 name", name);
				break;
			}
			t->rank = cols ? 2 : 1;
			/* the embedding: its vocab_size rows, the padding's skipped */
			t->shape[0] = g->rows_vocab ? h->vocab_size : rows;
			t->shape[1] = cols;
			t->numel = t->shape[0] * (cols ? cols : 1);
			t->kind = sw_kind_of_shape(t->rank, t->shape);
			t->dtype = dtype;
			snprintf(t->dtype_name, sizeof t->dtype_name, "%s", elem == 2 ? "BF16" : "F32");
			t->lr = t->wd = NAN;
			t->wd_mode = SW_WD_UNKNOWN;
			rc = family_check_shape(c, FAMILY_FROM_NANOGPT, t, err);
			s->t[k].offset = at;
			s->t[k].nbytes = (uint64_t)t->numel * (uint64_t)elem;
			s->t[k++].dtype = dtype;
			at += numel * (uint64_t)elem;
		}
	}
	if (!rc && (k != s->n || at != h->bytes))
		rc = sw_fail(err, SW_ESOFTWARE, "llm.c GPT-2 layout: %zu tensors ending at %llu", k,
			     (unsigned long long)at);
	if (rc) {
		free(info);
		return rc;
	}
	*out = info;
	return SW_OK;
}

static int llmc_gpt2_open(const char *path, int fd, uint64_t size, void **src,
			  struct ckpt_meta *m, struct sw_tensor_info **info, size_t *n,
			  struct sw_err *err)
{
	struct ropeperm_src *s;
	struct llmc_gpt2_header h;
	int rc;

	(void)path;
	*src = NULL;
	if ((rc = read_header(fd, size, &h, err))) {
		close(fd);
		return rc;
	}
	if ((rc = ropeperm_src_new(fd, size, NSEG - NPER_LAYER + NPER_LAYER * (size_t)h.n_layers,
				   &s, err)))
		return rc;
	m->format = CKPT_LLMC_GPT2;
	m->source = FAMILY_FROM_NANOGPT;        /* nanoGPT's names and nn.Linear's layout */
	rc = take_config(&h, &m->config, err);
	if (!rc && !(rc = arch_config_check(&m->config, err)) &&
	    !(rc = list_tensors(s, &h, &m->config, info, err)))
		rc = attrmap_set(&s->attrs, ATTRMAP_PREFIX "source_format",
				 h.version == 5 ? "llm.c GPT-2 v5 (bfloat16)" : "llm.c GPT-2 v3", err);
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

const struct ckpt_format_ops llmc_gpt2_format = {
	.name = "an llm.c GPT-2 checkpoint",
	.sniff = llmc_gpt2_sniff,
	.open = llmc_gpt2_open,
	.load = ropeperm_load,
	.attrs = ropeperm_attrs,
	.close = ropeperm_close,
};
