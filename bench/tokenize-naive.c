/*
 * tokenize-naive - the textbook BPE of tests/unit/bpe_naive.h on real
 * files, for bench/tokenize: training that recounts every pair of the
 * (deduplicated) corpus per merge, and encoding that replays every merge
 * over each piece. Writes the tokenizer and the tokens of the first
 * --encode-bytes bytes, so that the script can compare them with
 * sw-tokenize's byte for byte, and prints its times.
 *
 * usage: tokenize-naive --vocab N --encode-bytes N -o OUT.bpe -e OUT.llmc FILE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/files/tokfile.h"
#include "../tests/unit/bpe_naive.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t cap = 0;

	*n = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (*n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 1 << 20)))
			exit(70);
		size_t r = fread(buf + *n, 1, cap - *n, f);
		if (r == 0)
			break;
		*n += r;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	const char *out = NULL, *enc = NULL;
	int vocab = 2048, nm;
	size_t encode_bytes = 1 << 20, first_len = 0, total = 0;
	unsigned char *first = NULL;
	struct naive_corpus c = {0};
	struct bpe_merge *m;
	struct bpe *b;
	struct sw_err err;
	double t0, t_train, t_enc;
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i += 2) {
		if (i + 1 >= argc)
			return 64;
		if (!strcmp(argv[i], "--vocab"))
			vocab = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--encode-bytes"))
			encode_bytes = (size_t)atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "-o"))
			out = argv[i + 1];
		else if (!strcmp(argv[i], "-e"))
			enc = argv[i + 1];
		else
			return 64;
	}
	if (!out || !enc || i >= argc || vocab < 257 || vocab > 65536) {
		fprintf(stderr, "usage: tokenize-naive --vocab N --encode-bytes N -o OUT.bpe -e OUT.llmc FILE...\n");
		return 64;
	}
	t0 = now();
	for (; i < argc; i++) {
		size_t n;
		unsigned char *s = slurp(argv[i], &n);
		if (!s && n == 0) {
			fprintf(stderr, "tokenize-naive: %s: cannot read\n", argv[i]);
			return 66;
		}
		naive_add(&c, BPE_PRETOK_WORDS, s, n);
		total += n;
		if (!first) {
			first = s;
			first_len = n;
		} else {
			free(s);
		}
	}
	naive_dedup(&c);
	m = malloc((size_t)vocab * sizeof *m);
	nm = naive_train(&c, vocab, m);
	t_train = now() - t0;
	if (bpe_from_merges(BPE_PRETOK_WORDS, m, (size_t)nm, &b, &err) || bpe_save(b, out, &err)) {
		fprintf(stderr, "tokenize-naive: %s: %s\n", out, err.msg);
		return err.code;
	}

	/* encode the first bytes of the first file */
	size_t n = first_len < encode_bytes ? first_len : encode_bytes;
	uint16_t *tok = malloc((n ? n : 1) * sizeof *tok);
	struct tokfile_writer w;
	t0 = now();
	size_t ntok = naive_encode(m, nm, BPE_PRETOK_WORDS, first, n, tok);
	t_enc = now() - t0;
	if (tokfile_create(&w, enc, &err) || tokfile_append(&w, tok, ntok, &err) ||
	    tokfile_commit(&w, &err)) {
		fprintf(stderr, "tokenize-naive: %s: %s\n", enc, err.msg);
		return err.code;
	}
	printf("naive_train_s\t%.3f\nnaive_distinct_pieces\t%zu\nnaive_merges\t%d\n"
	       "naive_encode_bytes\t%zu\nnaive_encode_s\t%.3f\nnaive_encode_MBps\t%.3f\n",
	       t_train, c.n, nm, n, t_enc, (double)n / 1e6 / t_enc);
	naive_free(&c);
	bpe_free(b);
	free(m);
	free(tok);
	free(first);
	return 0;
}
