/*
 * Unit tests of lib/formats/llama2c.c: llama2.c files of a small model written
 * here (every float its own index in the file, so each tensor shows where
 * it was read from), legacy with and without the RoPE tables, tied and
 * untied, and version 1, read through the tensor source (ckpt_open): each
 * tensor from the offset export.py writes it at, q and k rows in
 * rotate-half order; headers that disagree with the file refused with
 * what they need.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/formats/ckpt.h"
#include "../../lib/formats/llama2c.h"
#include "tap.h"

/* dim 8, hidden 12, 2 layers, 2 heads (of 4), 1 KV head, vocab 5, seq_len 4 */
enum { D = 8, F = 12, L = 2, H = 2, KV = 1, V = 5, T = 4, HD = D / H, KVD = KV * HD };

static char dir[] = "/tmp/sw-t-llama2c.XXXXXX", path[64];

/* write the header (v 0 or 1), then nfloats floats 0, 1, 2, ... */
static void write_file(int version, int32_t vocab, int shared, long nfloats, long extra_bytes)
{
	FILE *f = fopen(path, "wb");
	int32_t p[7] = {D, F, L, H, KV, vocab, T};

	if (version) {
		uint32_t magic = L2C_MAGIC;
		int32_t one = version;
		unsigned char flag = (unsigned char)shared, zero[256] = {0};
		fwrite(&magic, 4, 1, f);
		fwrite(&one, 4, 1, f);
		fwrite(p, 4, 7, f);
		fwrite(&flag, 1, 1, f);
		fwrite(zero, 1, 256 - 37, f);
	} else {
		fwrite(p, 4, 7, f);
	}
	for (long i = 0; i < nfloats; i++) {
		float x = (float)i;
		fwrite(&x, 4, 1, f);
	}
	for (long i = 0; i < extra_bytes; i++)
		fputc(0, f);
	fclose(f);
}

/* the float index of each tensor in the two orders of export.py */
struct where {
	const char *role;
	int layer;
	long base;
};

static long v0(struct where *w, int untied, int tables)
{
	long at = 0;
	int n = 0;

	w[n++] = (struct where){"embed", -1, at}, at += V * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"attn_norm", l, at}, at += D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"q", l, at}, at += D * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"k", l, at}, at += KVD * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"v", l, at}, at += KVD * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"o", l, at}, at += D * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"ffn_norm", l, at}, at += D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"gate", l, at}, at += F * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"down", l, at}, at += D * F;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"up", l, at}, at += F * D;
	w[n++] = (struct where){"final_norm", -1, at}, at += D;
	if (tables)
		at += 2 * T * HD / 2;
	if (untied)
		w[n++] = (struct where){"lm_head", -1, at}, at += V * D;
	w[n] = (struct where){NULL, 0, 0};
	return at;
}

static long v1(struct where *w, int untied)
{
	long at = 0;
	int n = 0;

	for (int l = 0; l < L; l++) w[n++] = (struct where){"attn_norm", l, at}, at += D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"ffn_norm", l, at}, at += D;
	w[n++] = (struct where){"final_norm", -1, at}, at += D;
	w[n++] = (struct where){"embed", -1, at}, at += V * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"q", l, at}, at += D * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"k", l, at}, at += KVD * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"v", l, at}, at += KVD * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"o", l, at}, at += D * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"gate", l, at}, at += F * D;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"down", l, at}, at += D * F;
	for (int l = 0; l < L; l++) w[n++] = (struct where){"up", l, at}, at += F * D;
	if (untied)
		w[n++] = (struct where){"lm_head", -1, at}, at += V * D;
	w[n] = (struct where){NULL, 0, 0};
	return at;
}

/* Every tensor of w read from its place: value = base + index, q and k by
 * rows h*hd + 2i + j (the pair i's component j) into row h*hd + j*hd/2 + i. */
static void check_layout(const char *title, const struct where *w, size_t want_n, int tied)
{
	struct sw_err err = {0};
	struct ckpt *ck;
	int all = 1, n = 0;

	if (!ok(ckpt_open(path, &ck, &err) == SW_OK, "%s: read: %s", title, err.msg))
		return;
	ok(ckpt_count(ck) == want_n && ckpt_meta(ck)->config.tie_embeddings == tied &&
	   ckpt_meta(ck)->head_tied == tied && ckpt_meta(ck)->format == CKPT_LLAMA2C &&
	   ckpt_meta(ck)->config.d_model == D && ckpt_meta(ck)->config.vocab_size == V &&
	   ckpt_meta(ck)->config.n_kv_heads == KV && ckpt_meta(ck)->config.head_dim == HD &&
	   ckpt_meta(ck)->config.seq_len == T && ckpt_meta(ck)->config.rope_theta == 10000 &&
	   ckpt_meta(ck)->config.norm_eps == 1e-5,
	   "%s: %zu tensors, the config of the header, %s head", title, want_n, tied ? "tied" : "untied");
	for (; w[n].role; n++) {
		long k = ckpt_find_role(ck, w[n].role, w[n].layer);
		struct ckpt_view v;
		const struct sw_tensor_info *t;
		int qk = !strcmp(w[n].role, "q") || !strcmp(w[n].role, "k");

		if (k < 0 || ckpt_load(ck, (size_t)k, &v, &err)) {
			all = ok(0, "%s: %s layer %d: %s", title, w[n].role, w[n].layer, err.msg);
			break;
		}
		t = ckpt_info(ck, (size_t)k);
		for (int64_t e = 0; e < v.numel; e++) {
			int64_t r = e / (t->rank == 2 ? t->shape[1] : v.numel), c = e % (t->rank == 2 ? t->shape[1] : v.numel);
			int64_t h = r / HD, p = r % HD, src = qk ? h * HD + 2 * (p % (HD / 2)) + p / (HD / 2) : r;
			all &= v.data[e] == (float)(w[n].base + src * (t->rank == 2 ? t->shape[1] : v.numel) + c);
		}
		ckpt_release(ck, &v);
	}
	ok(all, "%s: each of %d tensors read from its offset, q and k rows in rotate-half order", title, n);
	ckpt_close(ck);
}

static void refused(const char *title, const char *want)
{
	struct sw_err err = {0};
	struct ckpt *ck;
	int rc = ckpt_open(path, &ck, &err);

	ok(rc == SW_EDATA && strstr(err.msg, want), "%s: refused, '%s'", title, err.msg);
	if (!rc)
		ckpt_close(ck);
}

int main(void)
{
	struct where w[64];
	long n;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof path, "%s/model.bin", dir);
	n = v0(w, 0, 1);
	write_file(0, V, 1, n, 0);
	check_layout("legacy, tied, RoPE tables", w, 2 + 9 * L, 1);
	n = v0(w, 1, 1);
	write_file(0, -V, 0, n, 0);
	check_layout("legacy, untied (negative vocab)", w, 3 + 9 * L, 0);
	n = v0(w, 1, 0);
	write_file(0, -V, 0, n, 0);
	check_layout("legacy, untied, no RoPE tables", w, 3 + 9 * L, 0);
	n = v1(w, 0);
	write_file(1, V, 1, n, 0);
	check_layout("version 1, shared classifier", w, 2 + 9 * L, 1);
	n = v1(w, 1);
	write_file(1, V, 0, n, 0);
	check_layout("version 1, untied", w, 3 + 9 * L, 0);

	n = v0(w, 0, 1);
	write_file(0, V, 1, n - 1, 0);
	refused("legacy, one float short", "the llama2.c header's sizes need 4252 bytes (4188 without the "
		"RoPE tables), the file has 4248");
	write_file(0, V, 1, n, 4);
	refused("legacy, one float too many", "the file has 4256");
	n = v1(w, 0);
	write_file(1, V, 1, n + 1, 0);
	refused("version 1, one float too many", "need 4416 bytes, the file has 4420");
	write_file(2, V, 1, n, 0);
	refused("version 2", "llama2.c version 2 is not supported");
	write_file(1, -V, 1, n, 0);
	refused("version 1, negative vocab", "implausible sizes");
	{
		/* a shared_classifier byte 2, then a nonzero padding byte */
		FILE *f;
		write_file(1, V, 2, n, 0);
		refused("version 1, shared_classifier 2", "shared_classifier byte 2 is neither 0 nor 1");
		write_file(1, V, 1, n, 0);
		f = fopen(path, "r+b");
		fseek(f, 200, SEEK_SET);
		fputc(7, f);
		fclose(f);
		refused("version 1, padding not zero", "byte 200 of the padding is not 0");
	}
	{
		struct l2c_header h;
		unsigned char hd[28];
		int32_t p[7] = {D, F, L, H, KV, V, T};
		int plausible = -1;

		memcpy(hd, p, 28);
		ok(l2c_parse_header(hd, 28, 4252, &h, &plausible, NULL) == SW_OK && plausible == 1 &&
		   h.freq_cis && h.shared && h.bytes == 4252, "legacy header of the exact size");
		ok(l2c_parse_header(hd, 28, 4188, &h, &plausible, NULL) == SW_OK && !h.freq_cis,
		   "legacy header, size without the tables");
		ok(l2c_parse_header(hd, 28, 4251, &h, &plausible, NULL) == SW_EDATA && plausible == 1,
		   "one byte off: refused, still a plausible header");
		/* implausible headers are not llama2.c: no claim, no ambiguity */
		static const struct { int field; int32_t v; } bad[] = {
			{0, 0}, {0, 7}, {0, 1 << 17}, {1, -12}, {2, 0}, {3, 3}, {4, 0}, {4, 3}, {5, 0},
			{5, 1 << 25}, {6, 0}, {6, -4}, {3, 8},
		};
		int all = 1;
		for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
			int32_t q[7];
			memcpy(q, p, sizeof q);
			q[bad[i].field] = bad[i].v;
			memcpy(hd, q, 28);
			all &= l2c_parse_header(hd, 28, 4252, &h, &plausible, NULL) == SW_EDATA && plausible == 0;
		}
		ok(all, "dim 0, 7 (not a multiple of 2 heads), 2^17, negative sizes, 3 heads of 1 KV head "
		   "and odd heads, vocab 0 or 2^25, seq_len 0: implausible");
		memcpy(hd, "GGUF\3\0\0\0", 8);
		ok(l2c_parse_header(hd, 28, 4252, &h, &plausible, NULL) == SW_EDATA && plausible == 0,
		   "a GGUF file's first bytes are no llama2.c header");
		memcpy(hd, "\x89HDF\r\n\x1a\n", 8);
		ok(l2c_parse_header(hd, 28, 4252, &h, &plausible, NULL) == SW_EDATA && plausible == 0,
		   "nor are HDF5's");
	}
	{
		/* a file whose first bytes are implausible: not claimed by llama2.c */
		FILE *f = fopen(path, "wb");
		int32_t p[7] = {7, F, L, H, KV, V, T};
		fwrite(p, 4, 7, f);
		fclose(f);
		struct sw_err err = {0};
		struct ckpt *ck;
		/* no format claims it: refused, its first bytes shown */
		ok(ckpt_open(path, &ck, &err) == SW_EDATA &&
		   strstr(err.msg, "not a checkpoint scalewatch reads") &&
		   strstr(err.msg, "its first bytes are 07 00 00 00 "),
		   "an implausible header is not taken for llama2.c: %s", err.msg);
	}
	unlink(path);
	rmdir(dir);
	return tap_done();
}
