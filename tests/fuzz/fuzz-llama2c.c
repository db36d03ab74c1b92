/*
 * fuzz-llama2c - llama2.c's header parser (l2c_parse_header) and reader
 * (ckpt_open of a file, every tensor loaded). The input is a mode byte,
 * then the file's first bytes. Random bytes almost never give a header
 * whose sizes are exactly the file's, so the file is also grown, when the
 * header reads as llama2.c's and needs at most 256 KiB, to the size it
 * needs (mode 0), 4 bytes less (1) or more (2), or the tables' bytes more
 * (3: legacy with the RoPE tables), the input repeated after the header.
 *
 * Beyond "no crash": a refusal is SW_EDATA with a message. An accepted
 * header is plausible (every size positive, within its bounds, dim a
 * multiple of n_heads with an even head_dim, n_heads a multiple of
 * n_kv_heads) and needs exactly the file's bytes. An accepted file has
 * the header's config, 2 + 9 layers tensors (3 when untied) whose floats
 * and the RoPE tables' account for every byte after the header, and every
 * tensor loads to numel float32 values; ckpt_open accepts exactly the
 * files whose headers the parser accepts.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/formats/ckpt.h"
#include "../../lib/formats/llama2c.h"
#include "fuzz.h"

static char path[64];

static void remove_file(void)
{
	if (path[0])
		unlink(path);
}

static int plausible(const struct l2c_header *h)
{
	return h->dim > 0 && h->dim <= 65536 && h->hidden_dim > 0 && h->hidden_dim <= 1 << 20 &&
	       h->n_layers > 0 && h->n_layers <= 4096 && h->n_heads > 0 && h->n_heads <= 4096 &&
	       h->n_kv_heads > 0 && h->vocab_size > 0 && h->vocab_size <= 1 << 24 && h->seq_len > 0 &&
	       h->seq_len <= 1 << 24 && h->dim % h->n_heads == 0 && (h->dim / h->n_heads) % 2 == 0 &&
	       h->n_heads % h->n_kv_heads == 0;
}

/* check the file written, of size bytes */
static void check(uint64_t size)
{
	uint8_t head[L2C_V1_HEADER];
	struct l2c_header h;
	struct sw_err err = {0};
	struct ckpt *ck;
	int fd = open(path, O_RDONLY), pl, rc, orc;
	ssize_t got;
	int64_t hd;
	uint64_t floats = 0;

	FUZZ_ASSERT(fd >= 0);
	got = pread(fd, head, sizeof head, 0);
	close(fd);
	FUZZ_ASSERT(got >= 0);
	rc = l2c_parse_header(head, (size_t)got, size, &h, &pl, &err);

	if (rc)
		FUZZ_REFUSED(rc, err);
	else
		FUZZ_ASSERT(plausible(&h) && h.bytes == size && (h.version == 0 || h.version == 1));
	orc = ckpt_open(path, &ck, &err);
	if (orc) {
		/* another format's refusal when llama2.c's sniffs claim nothing;
		 * or a valid header in a file another format's signature claims
		 * too (HDF5's at 512, 1024, ...), refused as ambiguous */
		FUZZ_ASSERT(rc || strstr(err.msg, "refused as ambiguous"));
		return;
	}
	if (ckpt_meta(ck)->format != CKPT_LLAMA2C) {
		ckpt_close(ck);
		FUZZ_ASSERT(rc);
		return;
	}
	FUZZ_ASSERT(!rc);
	hd = h.dim / h.n_heads;
	FUZZ_ASSERT(ckpt_meta(ck)->config.d_model == h.dim && ckpt_meta(ck)->config.d_ff == h.hidden_dim &&
		    ckpt_meta(ck)->config.n_layers == h.n_layers && ckpt_meta(ck)->config.n_heads == h.n_heads &&
		    ckpt_meta(ck)->config.n_kv_heads == h.n_kv_heads &&
		    ckpt_meta(ck)->config.vocab_size == h.vocab_size && ckpt_meta(ck)->config.head_dim == hd &&
		    ckpt_meta(ck)->config.tie_embeddings == h.shared);
	FUZZ_ASSERT(ckpt_count(ck) == (size_t)(2 + 9 * h.n_layers + !h.shared));
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		struct ckpt_view v;
		double sum = 0;
		FUZZ_ASSERT(ckpt_load(ck, i, &v, &err) == SW_OK);
		FUZZ_ASSERT(v.numel == ckpt_info(ck, i)->numel);
		for (int64_t e = 0; e < v.numel; e++)
			sum += v.data[e];      /* every value readable (ASan) */
		(void)sum;
		floats += (uint64_t)v.numel;
		ckpt_release(ck, &v);
	}
	FUZZ_ASSERT(h.header_bytes + 4 * (floats + (h.freq_cis ? (uint64_t)h.seq_len * (uint64_t)hd : 0)) ==
		    size);
	ckpt_close(ck);
}

static void write_file(const uint8_t *p, size_t len, uint64_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	uint8_t buf[4096];

	FUZZ_ASSERT(fd >= 0);
	for (uint64_t at = 0; at < size;) {
		size_t n = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = at + i < len ? p[at + i] : p[(at + i) % len];
		FUZZ_ASSERT(write(fd, buf, n) == (ssize_t)n);
		at += n;
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct l2c_header h;
	uint8_t *copy;
	size_t len;
	int mode;
	uint64_t want;

	if (size < 2)
		return 0;
	if (!path[0]) {
		snprintf(path, sizeof path, "/tmp/fuzz-llama2c.%d", (int)getpid());
		atexit(remove_file);
	}
	mode = data[0] % 4;
	len = size - 1;
	copy = fuzz_copy(data + 1, len);
	/* the input as it is */
	write_file(copy, len, len);
	check(len);
	/* grown to what the header says it needs */
	l2c_parse_header(copy, len, len, &h, NULL, NULL);
	want = h.bytes;
	if (mode == 3 && h.version == 0)
		want += 4 * (uint64_t)h.seq_len * (uint64_t)(h.n_heads ? h.dim / h.n_heads : 0);
	else if (mode == 1 && want >= 4)
		want -= 4;
	else if (mode == 2)
		want += 4;
	if (h.bytes && want >= len && want <= (256u << 10)) {
		write_file(copy, len, want);
		check(want);
	}
	free(copy);
	return 0;
}
