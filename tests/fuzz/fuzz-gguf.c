/*
 * fuzz-gguf - the GGUF parser (gguf_parse) and reader (ckpt_open on the
 * input written to a file, every tensor loaded). The input is the file.
 *
 * Beyond "no crash": a refusal is SW_EDATA with a message. A file the
 * parser accepts is version 2 or 3; its alignment a power of two up to
 * 1 MiB and the data start a multiple of it; its keys printable ASCII,
 * unique and sorted; each tensor of at most 4 dims, numel their product,
 * a type the reader converts with nbytes what that type needs, a name
 * without NUL and unique, its data inside the file and right after the
 * one before (padded), nothing after the last one's padding. A file the
 * reader accepts as a family the model computes (llama, qwen2, qwen3)
 * has a config arch_config_check takes and every tensor loads (an F64
 * value float32 cannot hold is a refusal) to numel float32 values equal
 * to the file's bytes decoded here again: rows in llama.cpp's dims
 * reversed, llama's q and k rows from interleaved pairs (row
 * h*hd + j*hd/2 + i is h*hd + 2i + j), Q8_0 as d * q, another
 * quantization as its block dequantized alone. One it reads for
 * its matrices (another family, Mixtral's experts, or an architecture no
 * table knows) has sizes in 0 .. 2^31 - 1 and tensors that partition the
 * file's (each the whole of one, or a part NAME:SUFFIX of one: the
 * numels add up to the file's), each loading to its numel values, a
 * whole one's equal to the file's bytes as above (no pairs: llama.cpp
 * permutes llama's q and k alone).
 */
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/base/arch.h"
#include "../../lib/formats/ckpt.h"
#include "../../lib/base/dtype.h"
#include "../../lib/base/family.h"
#include "../../lib/formats/gguf.h"
#include "fuzz.h"

static char path[64];

static void remove_file(void)
{
	if (path[0])
		unlink(path);
}

/* the file the reader opens, rewritten for each input */
static void write_input(const uint8_t *data, size_t size)
{
	int fd;

	if (!path[0]) {
		snprintf(path, sizeof path, "/tmp/fuzz-gguf.%d", (int)getpid());
		atexit(remove_file);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size);
	close(fd);
}

/* value e of a tensor of type t stored at p (row-major, row length ne0) */
static float decode(const uint8_t *p, const struct gguf_tensor *t, int64_t e)
{
	uint16_t h;
	float f;
	double d;

	switch (t->type) {
	case GGML_F32: memcpy(&f, p + 4 * e, 4); return f;
	case GGML_F16: memcpy(&h, p + 2 * e, 2); return sw_f16_to_f32(h);
	case GGML_BF16: memcpy(&h, p + 2 * e, 2); return sw_bf16_to_f32(h);
	case GGML_F64: memcpy(&d, p + 8 * e, 8); return (float)d;
	case GGML_Q8_0:
		memcpy(&h, p + 34 * (e / 32), 2);
		return sw_f16_to_f32(h) * (float)(int8_t)p[34 * (e / 32) + 2 + e % 32];
	}
	/* the other quantizations: e's value in its block dequantized alone
	 * (t-dtype and t0032 hold each block's values to gguf-py's; here the
	 * block a value is in, whatever the row order) */
	const struct sw_dtype_block *b = sw_dtype_block(t->dtype);
	float y[256];
	struct sw_err err = {0};
	FUZZ_ASSERT(b && b->values <= 256);
	FUZZ_ASSERT(sw_to_f32(t->dtype, p + (size_t)(e / b->values) * (size_t)b->bytes, y,
			      (size_t)b->values, &err) == SW_OK);
	return y[e % b->values];
}

/* the GGUF name the reader maps to HF name/role t (written out again) */
static void gguf_name(const struct sw_tensor_info *t, char *out, size_t len)
{
	static const char *const map[][3] = {
		{"embed", "token_embd", "weight"}, {"final_norm", "output_norm", "weight"},
		{"lm_head", "output", "weight"}, {"attn_norm", "attn_norm", "weight"},
		{"q", "attn_q", "weight"}, {"k", "attn_k", "weight"}, {"v", "attn_v", "weight"},
		{"q_bias", "attn_q", "bias"}, {"k_bias", "attn_k", "bias"}, {"v_bias", "attn_v", "bias"},
		{"q_norm", "attn_q_norm", "weight"}, {"k_norm", "attn_k_norm", "weight"},
		{"o", "attn_output", "weight"}, {"ffn_norm", "ffn_norm", "weight"},
		{"gate", "ffn_gate", "weight"}, {"up", "ffn_up", "weight"}, {"down", "ffn_down", "weight"},
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(t->role, map[i][0])) {
			if (t->layer < 0)
				snprintf(out, len, "%s.%s", map[i][1], map[i][2]);
			else
				snprintf(out, len, "blk.%d.%s.%s", t->layer, map[i][1], map[i][2]);
			return;
		}
	FUZZ_ASSERT(!strcmp(t->role, "other"));
	snprintf(out, len, "%s", t->name);
}

static void check_parse(size_t size, const struct gguf_file *f)
{
	uint64_t next = 0;

	FUZZ_ASSERT(f->version == 2 || f->version == 3);
	FUZZ_ASSERT(f->alignment && !(f->alignment & (f->alignment - 1)) && f->alignment <= 1u << 20);
	FUZZ_ASSERT(f->data_start % f->alignment == 0);
	for (size_t i = 0; i < f->nkv; i++) {
		for (const char *k = f->kv[i].key; *k; k++)
			FUZZ_ASSERT(*k >= 0x20 && *k <= 0x7e);
		FUZZ_ASSERT(f->kv[i].key[0] && (i == 0 || strcmp(f->kv[i - 1].key, f->kv[i].key) < 0));
		FUZZ_ASSERT(f->kv[i].type < GGUF_NVTYPES);
	}
	for (size_t i = 0; i < f->nt; i++) {
		const struct gguf_tensor *t = &f->t[i];
		int64_t numel = 1;
		uint64_t want;

		FUZZ_ASSERT(t->n_dims >= 0 && t->n_dims <= 4 && t->name[0]);
		FUZZ_ASSERT(memchr(t->name, '\0', sizeof t->name));
		for (int k = 0; k < t->n_dims; k++) {
			FUZZ_ASSERT(t->ne[k] >= 0);
			FUZZ_ASSERT(!__builtin_mul_overflow(numel, t->ne[k], &numel));
		}
		FUZZ_ASSERT(numel == t->numel);
		switch (t->type) {
		case GGML_F32: want = 4 * (uint64_t)numel; break;
		case GGML_F16: case GGML_BF16: want = 2 * (uint64_t)numel; break;
		case GGML_F64: want = 8 * (uint64_t)numel; break;
		default: {
			/* a quantization: rows of whole blocks (ggml's block sizes) */
			const struct sw_dtype_block *b = sw_dtype_block(t->dtype);
			FUZZ_ASSERT(b && !strcmp(b->name, gguf_type_name(t->type)));
			FUZZ_ASSERT(t->n_dims && t->ne[0] % b->values == 0);
			want = (uint64_t)numel / (uint64_t)b->values * (uint64_t)b->bytes;
			break;
		}
		}
		FUZZ_ASSERT(t->nbytes == want);
		FUZZ_ASSERT(t->offset == f->data_start + next);
		FUZZ_ASSERT(t->offset <= size && t->nbytes <= size - t->offset);
		next += (t->nbytes + f->alignment - 1) / f->alignment * f->alignment;
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(t->name, f->t[j].name));
	}
	FUZZ_ASSERT(size <= f->data_start + next);
}

/* Tensor i of ck, stored as g, loaded into v: 1, or 0 where it is
 * refused, which only an F64 value float32 cannot hold may be. */
static int load_or_f64(struct ckpt *ck, size_t i, const struct gguf_tensor *g, struct ckpt_view *v)
{
	struct sw_err err = {0};
	int rc = ckpt_load(ck, i, v, &err);

	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(g->type == GGML_F64);
		return 0;
	}
	FUZZ_ASSERT(v->numel == ckpt_info(ck, i)->numel);
	return 1;
}

/* The file's tensor a listed tensor is, or is a part of (NAME:SUFFIX). */
static const struct gguf_tensor *stored_of(const struct gguf_file *f, const char *name, int *whole)
{
	char base[SW_NAME_MAX];
	const char *colon = strrchr(name, ':');

	snprintf(base, sizeof base, "%.*s", colon ? (int)(colon - name) : (int)strlen(name), name);
	for (size_t j = 0; j < f->nt; j++)
		if (!strcmp(f->t[j].name, name)) {
			*whole = 1;
			return &f->t[j];
		}
	for (size_t j = 0; colon && j < f->nt; j++)
		if (!strcmp(f->t[j].name, base)) {
			*whole = 0;
			return &f->t[j];
		}
	return NULL;
}

/* A file read for its matrices: the sizes a listing keeps, the tensors
 * partitioning the file's, each loading (see the top). */
static void check_listing(const uint8_t *data, const struct gguf_file *f, struct ckpt *ck)
{
	const int64_t big = (int64_t)1 << 31;
	const struct sw_config *c = &ckpt_meta(ck)->config;
	const int64_t sizes[] = {c->vocab_size, c->d_model, c->n_layers, c->n_heads,
				 c->n_kv_heads, c->head_dim, c->d_ff};
	int64_t file_numel = 0, listed_numel = 0;

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		FUZZ_ASSERT(sizes[i] >= 0 && sizes[i] < big);
	for (size_t j = 0; j < f->nt; j++)
		file_numel += f->t[j].numel;
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		struct ckpt_view v;
		int whole = 0;
		const struct gguf_tensor *g = stored_of(f, t->name, &whole);

		FUZZ_ASSERT(g && (whole ? t->numel == g->numel : t->numel <= g->numel));
		listed_numel += t->numel;
		if (!load_or_f64(ck, i, g, &v))
			continue;
		for (int64_t e = 0; whole && e < v.numel; e++) {
			float want = decode(data + g->offset, g, e);
			FUZZ_ASSERT(memcmp(&want, &v.data[e], 4) == 0 || (isnan(want) && isnan(v.data[e])));
		}
		ckpt_release(ck, &v);
	}
	FUZZ_ASSERT(listed_numel == file_numel);
}

static void check_reader(const uint8_t *data, const struct gguf_file *f)
{
	struct sw_err err = {0};
	struct ckpt *ck;
	char name[SW_NAME_MAX];
	int rc = ckpt_open(path, &ck, &err);

	if (rc) {
		FUZZ_REFUSED(rc, err);
		return;
	}
	FUZZ_ASSERT(ckpt_meta(ck)->format == CKPT_GGUF);
	if (!family_computed(ckpt_meta(ck)->config.arch)) {
		check_listing(data, f, ck);
		ckpt_close(ck);
		return;
	}
	FUZZ_ASSERT(arch_config_check(&ckpt_meta(ck)->config, NULL) == SW_OK);
	FUZZ_ASSERT(ckpt_count(ck) == f->nt);
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		const struct gguf_tensor *g = NULL;
		struct ckpt_view v;
		int64_t hd = ckpt_meta(ck)->config.head_dim, cols;
		int qk = (!strcmp(t->role, "q") || !strcmp(t->role, "k")) &&
			 !strcmp(ckpt_meta(ck)->config.arch, "llama");

		gguf_name(t, name, sizeof name);
		for (size_t j = 0; j < f->nt; j++)
			if (!strcmp(f->t[j].name, name))
				g = &f->t[j];
		FUZZ_ASSERT(g && g->numel == t->numel && g->n_dims == t->rank);
		for (int k = 0; k < t->rank; k++)
			FUZZ_ASSERT(t->shape[k] == g->ne[t->rank - 1 - k]);
		if (!load_or_f64(ck, i, g, &v))
			continue;
		cols = g->n_dims ? g->ne[0] : 1;
		for (int64_t e = 0; e < v.numel; e++) {
			int64_t r = cols ? e / cols : 0, c = cols ? e % cols : 0, src = r;
			float want;
			if (qk) {
				int64_t p = r % hd;
				src = r / hd * hd + 2 * (p % (hd / 2)) + p / (hd / 2);
			}
			want = decode(data + g->offset, g, src * cols + c);
			FUZZ_ASSERT(memcmp(&want, &v.data[e], 4) == 0 || (isnan(want) && isnan(v.data[e])));
		}
		ckpt_release(ck, &v);
	}
	ckpt_close(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf_file f;
	struct sw_err err = {0};
	void *copy = fuzz_copy(data, size);
	int rc = gguf_parse(copy, size, &f, &err);

	if (rc) {
		FUZZ_REFUSED(rc, err);
		FUZZ_ASSERT(f.nkv == 0 && f.nt == 0 && !f.kv && !f.t);
		free(copy);
		return 0;
	}
	check_parse(size, &f);
	write_input(data, size);
	check_reader(copy, &f);
	gguf_free(&f);
	free(copy);
	return 0;
}
