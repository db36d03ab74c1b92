/*
 * Unit tests of lib/files/bpe.c and lib/files/bpe_train.c: the pre-tokenizer on
 * pieces worked out by hand, merges worked out by hand, the incremental
 * trainer against the rescan-per-merge reference (bpe_naive.h) on random
 * corpora, encoding against replaying the merges, exact round trips of any
 * bytes, the vocabulary limits, and malformed tokenizer files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/files/bpe.h"
#include "../../lib/base/rng.h"
#include "bpe_naive.h"
#include "tap.h"

/* Train on inputs (each one piece stream, final) to vocab. */
static struct bpe *train(enum bpe_pretok p, const char *const *in, const size_t *len, int nin,
			 int vocab, struct bpe_train_stats *st)
{
	struct bpe_trainer *t;
	struct bpe *b = NULL;
	struct sw_err err;

	if (bpe_trainer_new(p, &t, &err))
		return NULL;
	for (int i = 0; i < nin; i++) {
		size_t used;
		if (bpe_trainer_feed(t, in[i], len[i], 1, &used, &err) || used != len[i])
			goto out;
	}
	if (bpe_trainer_run(t, vocab, NULL, NULL, &b, st, &err))
		diag("train: %s", err.msg);
out:
	bpe_trainer_free(t);
	return b;
}

static struct bpe *train1(enum bpe_pretok p, const char *s, size_t n, int vocab,
			  struct bpe_train_stats *st)
{
	return train(p, &s, &n, 1, vocab, st);
}

/* Encode in one call. */
static int encode(const struct bpe *b, const void *s, size_t n, struct bpe_tokens *out)
{
	struct bpe_encoder *e;
	struct sw_err err;
	size_t used;
	int rc;

	out->n = 0;
	if (bpe_encoder_new(b, &e, &err))
		return -1;
	rc = bpe_encode(e, s, n, 1, &used, out, &err);
	bpe_encoder_free(e);
	return rc || used != n ? -1 : 0;
}

/* Encode, then decode: the bytes come back? */
static int round_trip(const struct bpe *b, const unsigned char *s, size_t n)
{
	struct bpe_tokens t = {0};
	struct bpe_bytes d = {0};
	struct sw_err err;
	int good = !encode(b, s, n, &t) && !bpe_decode(b, t.id, t.n, &d, &err) && d.n == n &&
		   (n == 0 || !memcmp(d.p, s, n));

	bpe_tokens_free(&t);
	bpe_bytes_free(&d);
	return good;
}

static int merges_are(const struct bpe *b, const struct bpe_merge *m, int n)
{
	if (!b || bpe_vocab(b) != 256 + n)
		return 0;
	for (int k = 0; k < n; k++)
		if (bpe_merge_at(b, k).left != m[k].left || bpe_merge_at(b, k).right != m[k].right)
			return 0;
	return 1;
}

static void test_pretok(void)
{
	static const char text[] = "Hello,  world!\n\n 42x\xff\xfe a\0b\tc  ";
	static const char *const want[] = {"Hello", ",", " ", " world", "!", "\n\n", " 42",
					   "x\xff\xfe", " a", "\0", "b", "\t", "c", "  "};
	size_t n = sizeof text - 1, i = 0, k = 0, ok_all = 1;
	char got[512] = "";

	while (i < n) {
		size_t j = bpe_pretok_next(BPE_PRETOK_WORDS, (const unsigned char *)text, n, i);
		size_t wl = k < 14 ? (k == 9 ? 1 : strlen(want[k])) : 0;
		if (k >= 14 || j - i != wl || memcmp(text + i, want[k], wl))
			ok_all = 0;
		strcat(got, "[");
		for (size_t q = i; q < j; q++) {
			unsigned char c = (unsigned char)text[q];
			snprintf(got + strlen(got), sizeof got - strlen(got), c >= 0x21 && c < 0x7f ? "%c" : c == ' ' ? "_" : "\\x%02x", c);
		}
		strcat(got, "]");
		k++;
		i = j;
	}
	ok(ok_all && k == 14, "words: pieces worked out by hand: %s", got);
	ok(bpe_pretok_next(BPE_PRETOK_NONE, (const unsigned char *)text, n, 3) == n,
	   "none: one piece to the end");

	/* a piece ending before the buffer's end stays a piece with more input */
	struct sw_rng r;
	unsigned char s[300];
	int stable = 1;
	rng_seed(&r, 7);
	for (int trial = 0; trial < 200; trial++) {
		static const char alphabet[] = "ab 1\n\t.,\xc3\xa9  ";
		for (size_t q = 0; q < sizeof s; q++)
			s[q] = (unsigned char)alphabet[rng_next(&r) % (sizeof alphabet - 1)];
		size_t cut = 1 + rng_next(&r) % (sizeof s - 1);
		for (size_t a = 0, b = 0; a < cut;) {
			size_t ja = bpe_pretok_next(BPE_PRETOK_WORDS, s, cut, a);
			if (ja == cut)
				break;
			while (b < a)
				b = bpe_pretok_next(BPE_PRETOK_WORDS, s, sizeof s, b);
			if (b != a || bpe_pretok_next(BPE_PRETOK_WORDS, s, sizeof s, b) != ja)
				stable = 0;
			a = ja;
		}
	}
	ok(stable, "words: pieces that end before the buffer does are final");
}

static void test_hand_merges(void)
{
	struct bpe_train_stats st;
	struct bpe *b;

	/*
	 * "aaabdaaabac": aa 4 (overlaps counted) -> 256; "256 a b d 256 a b a c":
	 * (256,a) 2 and (a,b) 2 tie, (97,98) is smaller -> 257; "256 257 d 256
	 * 257 a c": (256,257) 2 -> 258; "258 d 258 a c": every pair once, stop.
	 */
	static const struct bpe_merge m1[] = {{97, 97}, {97, 98}, {256, 257}};
	b = train1(BPE_PRETOK_NONE, "aaabdaaabac", 11, 300, &st);
	ok(merges_are(b, m1, 3), "aaabdaaabac: aa, ab, [aa][ab]");
	ok(st.vocab == 259 && st.stop == BPE_STOP_NO_PAIR && st.bytes == 11 && st.tokens == 5,
	   "stopped early at 259 (no pair twice), 11 bytes in 5 tokens");
	bpe_free(b);
	b = train1(BPE_PRETOK_WORDS, "aaabdaaabac", 11, 300, &st);
	ok(merges_are(b, m1, 3), "the same with words: it is one word");
	bpe_free(b);

	/*
	 * "the cat the hat the": pieces "the" x1, " the" x2, " cat", " hat".
	 * th 3, he 3 tie -> (104,101) "he"; (116,256) "the" 3; then (32,257)
	 * " the" 2 and (97,116) "at" 2 tie -> space first; then "at"; the rest
	 * occur once. No merge crosses a word: never "e " nor "t ".
	 */
	static const struct bpe_merge m2[] = {{104, 101}, {116, 256}, {32, 257}, {97, 116}};
	b = train1(BPE_PRETOK_WORDS, "the cat the hat the", 19, 1000, &st);
	ok(merges_are(b, m2, 4), "the cat the hat the: he, the, ' the', at");
	/* [the] [ ][c][at] [ the] [ ][h][at] [ the] */
	ok(st.tokens == 1 + 3 + 1 + 3 + 1, "the corpus in 9 tokens (%llu)", (unsigned long long)st.tokens);
	bpe_free(b);

	/* "aaaa" (none): aa 3 -> [aa][aa]; then (256,256) once: stop */
	static const struct bpe_merge m3[] = {{97, 97}};
	b = train1(BPE_PRETOK_NONE, "aaaa", 4, 300, &st);
	ok(merges_are(b, m3, 1) && st.tokens == 2, "aaaa: one merge, two tokens");
	struct bpe_tokens t = {0};
	ok(b && !encode(b, "aaaaa", 5, &t) && t.n == 3 && t.id[0] == 256 && t.id[1] == 256 && t.id[2] == 97,
	   "aaaaa encodes left to right: [aa][aa]a");
	bpe_tokens_free(&t);
	bpe_free(b);
}

/* Random corpora: the incremental trainer and the rescan agree exactly. */
static void test_against_naive(void)
{
	static const struct {
		const char *what;
		const char *alphabet;   /* NULL: any byte */
		enum bpe_pretok p;
		size_t n;
		int vocab;
	} cases[] = {
		{"words from 5 letters", "abcde  \n.,", BPE_PRETOK_WORDS, 6000, 420},
		{"two letters, long runs, no pre-tokenizer", "aaaab", BPE_PRETOK_NONE, 3000, 330},
		{"skewed bytes of every value", NULL, BPE_PRETOK_WORDS, 5000, 380},
		{"runs and spaces", "aaaaaaa  b", BPE_PRETOK_WORDS, 4000, 300},
	};
	struct sw_rng r;

	rng_seed(&r, 20260522);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		unsigned char *s = malloc(cases[c].n);
		struct bpe_merge *m = malloc((size_t)cases[c].vocab * sizeof *m);
		uint16_t *want = malloc(cases[c].n * sizeof *want);
		struct naive_corpus nc = {0};
		struct bpe_train_stats st;
		struct bpe_tokens t = {0};
		struct bpe *b;
		size_t total = 0;
		int nm;

		for (size_t i = 0; i < cases[c].n; i++) {
			if (cases[c].alphabet) {
				size_t a = strlen(cases[c].alphabet);
				s[i] = (unsigned char)cases[c].alphabet[rng_next(&r) % a];
			} else {        /* mostly a few values, now and then any */
				uint64_t x = rng_next(&r);
				s[i] = x % 4 ? (unsigned char)"xyz \0\xff"[x / 4 % 6] : (unsigned char)(x >> 8);
			}
		}
		naive_add(&nc, cases[c].p, s, cases[c].n);
		nm = naive_train(&nc, cases[c].vocab, m);
		for (size_t i = 0; i < nc.n; i++)
			total += nc.len[i];
		b = train1(cases[c].p, (const char *)s, cases[c].n, cases[c].vocab, &st);
		ok(merges_are(b, m, nm) && nm > 20, "%s: the same %d merges as the rescan", cases[c].what, nm);
		struct naive_corpus dd = {0};
		struct bpe_merge *m2 = malloc((size_t)cases[c].vocab * sizeof *m2);
		naive_add(&dd, cases[c].p, s, cases[c].n);
		naive_dedup(&dd);
		int nm2 = naive_train(&dd, cases[c].vocab, m2);
		ok(nm2 == nm && !memcmp(m, m2, (size_t)nm * sizeof *m) && (dd.n < nc.n || dd.n == 1),
		   "%s: the rescan over the %zu distinct pieces (of %zu) agrees", cases[c].what, dd.n, nc.n);
		naive_free(&dd);
		free(m2);
		ok(b && st.tokens == total, "%s: the same final token count (%zu)", cases[c].what, total);
		/* encoding the corpus gives the trainer's final segmentation */
		size_t nw = naive_encode(m, nm, cases[c].p, s, cases[c].n, want);
		int same = b && !encode(b, s, cases[c].n, &t) && t.n == nw && nw == total &&
			   !memcmp(t.id, want, nw * sizeof *want);
		for (size_t i = 0, q = 0; same && i < nc.n; i++)
			for (size_t k = 0; k < nc.len[i]; k++)
				same &= t.id[q++] == nc.sym[i][k];
		ok(same, "%s: encoding it gives the trained segmentation", cases[c].what);
		ok(b && round_trip(b, s, cases[c].n), "%s: round trip", cases[c].what);
		bpe_tokens_free(&t);
		bpe_free(b);
		naive_free(&nc);
		free(s);
		free(m);
		free(want);
	}
}

/* Encoding new text: the same as replaying the merges, short and long
 * pieces, in one call or fed in arbitrary blocks. */
static void test_encode(void)
{
	static const char corpus[] =
		"the quick brown fox jumps over the lazy dog; the dog sleeps. "
		"aaaaaaaaaaaaaaaa bbbbbbbb abababababab 12341234 the the the\n";
	struct sw_rng r;
	int same_short = 1, same_long = 1, same_stream = 1;

	rng_seed(&r, 5);
	for (int pi = 0; pi < 2; pi++) {
		enum bpe_pretok p = pi ? BPE_PRETOK_NONE : BPE_PRETOK_WORDS;
		struct bpe *b = train1(p, corpus, sizeof corpus - 1, 330, NULL);
		struct bpe_merge m[80];
		int nm = b ? bpe_vocab(b) - 256 : 0;

		for (int k = 0; k < nm; k++)
			m[k] = bpe_merge_at(b, k);
		for (int trial = 0; b && trial < 60; trial++) {
			size_t n = 1 + rng_next(&r) % 400;
			unsigned char *s = malloc(n);
			uint16_t *want = malloc(n * sizeof *want);
			struct bpe_tokens t = {0}, u = {0};
			struct bpe_encoder *e;
			struct sw_err err;
			size_t nw, at = 0, used;

			for (size_t i = 0; i < n; i++)      /* snippets of the corpus */
				s[i] = i % 17 == 0 ? (unsigned char)(rng_next(&r) % 256)
						   : (unsigned char)corpus[(rng_next(&r) % 8 + i * 3) % (sizeof corpus - 1)];
			if (trial % 3 == 0)
				for (size_t i = 0; i < n; i++)
					s[i] = (unsigned char)corpus[(trial + i) % (sizeof corpus - 1)];
			nw = naive_encode(m, nm, p, s, n, want);
			if (encode(b, s, n, &t) || t.n != nw || memcmp(t.id, want, nw * sizeof *want))
				*(pi ? &same_long : &same_short) = 0;
			/* the same fed in blocks of random sizes, as the tool reads */
			bpe_encoder_new(b, &e, &err);
			for (size_t end = 0; end < n || at < n;) {
				end = end + 1 + rng_next(&r) % 40;
				end = end > n ? n : end;
				if (bpe_encode(e, s + at, end - at, end == n, &used, &u, &err))
					break;
				at += used;
				if (end == n && at != n)
					break;
			}
			bpe_encoder_free(e);
			if (u.n != nw || memcmp(u.id, want, nw * sizeof *want))
				same_stream = 0;
			bpe_tokens_free(&t);
			bpe_tokens_free(&u);
			free(s);
			free(want);
		}
		bpe_free(b);
	}
	ok(same_short, "words: encoding equals replaying the merges (short pieces, cached)");
	ok(same_long, "none: encoding equals replaying the merges (pieces over 64 bytes: the heap)");
	ok(same_stream, "encoding in blocks equals encoding at once");
}

static void test_round_trip(void)
{
	static const char corpus[] = "\xff\xfe\xff\xfe \xc3\x28 \xc3\x28 \0\0\0 \0\0 abcabc abc\n";
	unsigned char every[512], rnd[5000];
	struct sw_rng r;
	int all_ok = 1;

	for (int i = 0; i < 512; i++)
		every[i] = (unsigned char)(i < 256 ? i : 511 - i);
	rng_seed(&r, 11);
	for (size_t i = 0; i < sizeof rnd; i++)
		rnd[i] = (unsigned char)rng_next(&r);
	for (int pi = 0; pi < 2; pi++) {
		enum bpe_pretok p = pi ? BPE_PRETOK_NONE : BPE_PRETOK_WORDS;
		struct bpe *b = train1(p, corpus, sizeof corpus - 1, 280, NULL);
		all_ok &= b && bpe_vocab(b) > 260;
		all_ok &= b && round_trip(b, every, sizeof every);
		all_ok &= b && round_trip(b, rnd, sizeof rnd);
		all_ok &= b && round_trip(b, (const unsigned char *)corpus, sizeof corpus - 1);
		all_ok &= b && round_trip(b, (const unsigned char *)"", 0);
		all_ok &= b && round_trip(b, (const unsigned char *)"\0", 1);
		all_ok &= b && round_trip(b, (const unsigned char *)"\xc3", 1);
		bpe_free(b);
	}
	ok(all_ok, "round trip: every byte value, random bytes, invalid UTF-8, NUL, empty input");

	struct bpe *b = train1(BPE_PRETOK_WORDS, corpus, sizeof corpus - 1, 280, NULL);
	struct bpe_tokens t = {0};
	ok(b && !encode(b, "", 0, &t) && t.n == 0, "empty input: no tokens");
	uint16_t bad[2] = {65, (uint16_t)bpe_vocab(b)};
	struct bpe_bytes d = {0};
	struct sw_err err;
	ok(bpe_decode(b, bad, 2, &d, &err) == SW_EDATA && strstr(err.msg, "token 1:"),
	   "decoding an id >= vocab: SW_EDATA (%s)", err.msg);
	bpe_bytes_free(&d);
	bpe_tokens_free(&t);
	bpe_free(b);
}

static void test_vocab_limits(void)
{
	struct bpe_trainer *t;
	struct bpe *b = NULL;
	struct sw_err err;
	struct bpe_train_stats st;

	bpe_trainer_new(BPE_PRETOK_WORDS, &t, &err);
	ok(bpe_trainer_run(t, 256, NULL, NULL, &b, &st, &err) == SW_EUSAGE && !b, "vocab 256 refused");
	ok(bpe_trainer_run(t, 65537, NULL, NULL, &b, &st, &err) == SW_EUSAGE, "vocab 65537 refused");
	bpe_trainer_free(t);
	b = train1(BPE_PRETOK_WORDS, "abab abab", 9, 257, &st);
	ok(b && bpe_vocab(b) == 257 && st.stop == BPE_STOP_VOCAB, "vocab 257: one merge");
	bpe_free(b);
	b = train1(BPE_PRETOK_WORDS, "", 0, 2048, &st);
	ok(b && bpe_vocab(b) == 256 && st.stop == BPE_STOP_NO_PAIR && st.tokens == 0,
	   "an empty corpus: no merges, stopped early");
	bpe_free(b);

	/*
	 * 65536 tokens: every byte pair, as its own input, twice. All counts
	 * are 2, so the merges go in pair order, (0,0), (0,1), ...: merge k is
	 * (k / 256, k % 256), up to k = 65279, token 65535 = bytes 254 255.
	 */
	char (*in)[2] = malloc(65536 * 2 * sizeof *in);
	const char **pin = malloc(65536 * 2 * sizeof *pin);
	size_t *len = malloc(65536 * 2 * sizeof *len);
	for (int k = 0; k < 2 * 65536; k++) {
		in[k][0] = (char)(k / 2 / 256);
		in[k][1] = (char)(k / 2 % 256);
		pin[k] = in[k];
		len[k] = 2;
	}
	b = train(BPE_PRETOK_NONE, pin, len, 2 * 65536, 65536, &st);
	int order = b && bpe_vocab(b) == 65536 && st.stop == BPE_STOP_VOCAB;
	for (int k = 0; order && k < 65280; k++)
		order = bpe_merge_at(b, k).left == k / 256 && bpe_merge_at(b, k).right == k % 256;
	ok(order, "vocab 65536: merge k is (k / 256, k %% 256)");
	struct bpe_tokens tk = {0};
	ok(b && !encode(b, "\xfe\xff\xff\xff", 4, &tk) && tk.n == 3 && tk.id[0] == 65535 &&
	   tk.id[1] == 255 && tk.id[2] == 255, "the last id, 65535, is bytes fe ff; ff ff never merged");
	char *text;
	size_t tlen;
	struct bpe *back = NULL;
	ok(b && !bpe_format(b, &text, &tlen, &err) && !bpe_load_from_memory(text, tlen, &back, &err) &&
	   bpe_vocab(back) == 65536 && bpe_merge_at(back, 65279).left == 254, "vocab 65536 reads back");
	if (b)
		free(text);
	bpe_free(back);
	bpe_tokens_free(&tk);
	bpe_free(b);
	free(in);
	free(pin);
	free(len);
}

static int load(const char *text, struct sw_err *err)
{
	struct bpe *b = NULL;
	int rc = bpe_load_from_memory(text, strlen(text), &b, err);

	bpe_free(b);
	return rc;
}

#define HEAD "scalewatch-bpe 1\npretokenizer words\n"

static void test_file(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{"", "empty file"},
		{"hello\n", "not a scalewatch BPE tokenizer"},
		{"scalewatch-bpe 2\npretokenizer words\nvocab 256\nmerges 0\n", "version 2"},
		{"scalewatch-bpe 12\n", "version 12"},
		{"scalewatch-bpe one\n", "line 1"},
		{"scalewatch-bpe 1", "line 1: no newline"},
		{"scalewatch-bpe 1\n", "ends before the 'pretokenizer' line"},
		{"scalewatch-bpe 1\npretokenizer gpt2\nvocab 256\nmerges 0\n", "line 2"},
		{HEAD, "ends before the 'vocab' line"},
		{HEAD "vocab 65537\nmerges 0\n", "line 3"},
		{HEAD "vocab 255\nmerges 0\n", "line 3"},
		{HEAD "vocab -1\nmerges 0\n", "line 3"},
		{HEAD "vocab 0256\nmerges 0\n", "line 3"},
		{HEAD "vocab 256\nmerges 0\nextra\n", "line 5: more than the 0 merges"},
		{HEAD "vocab 258\nmerges 1\n256 97 97\n", "line 4: 1 merges, but vocab 258 needs 2"},
		{HEAD "vocab 258\nmerges 2\n256 97 97\n", "ends after 1 of its 2 merges"},
		{HEAD "vocab 257\nmerges 1\n256 97 97\n257 97 98\n", "line 6: more than the 1 merges"},
		{HEAD "vocab 257\nmerges 1\n257 97 97\n", "line 5: token 257 where token 256 comes"},
		{HEAD "vocab 257\nmerges 1\n256 256 97\n", "line 5: token 256 merges 256 and 97: both must be earlier"},
		{HEAD "vocab 258\nmerges 2\n256 97 98\n257 300 98\n", "line 6: token 257 merges 300"},
		{HEAD "vocab 258\nmerges 2\n256 97 98\n257 97 98\n", "line 6: token 257 merges 97 and 98 again (token 256 does)"},
		{HEAD "vocab 257\nmerges 1\n256 097 98\n", "line 5: expected 'ID LEFT RIGHT'"},
		{HEAD "vocab 257\nmerges 1\n256  97 98\n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 97 98 \n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 97 98\r\n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 -1 98\n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 97 99999999999999999999\n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 97\n", "line 5: expected"},
		{HEAD "vocab 257\nmerges 1\n256 97 98", "line 5: no newline"},
	};
	struct sw_err err;
	int all = 1;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = load(bad[i].text, &err);
		if (rc != SW_EDATA || !strstr(err.msg, bad[i].msg)) {
			diag("case %zu: rc %d, '%s' (want '%s')", i, rc, rc ? err.msg : "", bad[i].msg);
			all = 0;
		}
	}
	ok(all, "%zu malformed files refused with SW_EDATA and the line at fault",
	   sizeof bad / sizeof bad[0]);
	ok(load(HEAD "vocab 256\nmerges 0\n", &err) == SW_OK, "no merges: the byte tokenizer");

	struct bpe *b = NULL;
	const char nul[] = HEAD "vocab 257\nmerges 1\n256 97\0 98\n";
	ok(bpe_load_from_memory(nul, sizeof nul - 1, &b, &err) == SW_EDATA && strstr(err.msg, "line 5"),
	   "a NUL inside a line refused");

	/* tokens doubling in length: the bytes add up past the limit at line 31 */
	char *big = malloc(64 * 40 + 200);
	int n = sprintf(big, HEAD "vocab %d\nmerges %d\n256 97 97\n", 256 + 30, 30);
	for (int k = 1; k < 30; k++)
		n += sprintf(big + n, "%d %d %d\n", 256 + k, 255 + k, 255 + k);
	ok(load(big, &err) == SW_EDATA && strstr(err.msg, "add up to more than"),
	   "tokens too long in all refused (%s)", err.msg);
	free(big);

	/* a trained tokenizer: format, read back, the same merges; every
	 * strict prefix refused; random corruption refused or read, never a crash */
	static const char corpus[] = "one two three two three three four four four four";
	struct bpe *t = train1(BPE_PRETOK_NONE, corpus, sizeof corpus - 1, 290, NULL), *back = NULL;
	char *text;
	size_t len;
	int same = t && !bpe_format(t, &text, &len, &err) &&
		   !bpe_load_from_memory(text, len, &back, &err) && bpe_vocab(back) == bpe_vocab(t) &&
		   bpe_pretokenizer(back) == BPE_PRETOK_NONE;
	for (int k = 0; same && k < bpe_vocab(t) - 256; k++)
		same = bpe_merge_at(t, k).left == bpe_merge_at(back, k).left &&
		       bpe_merge_at(t, k).right == bpe_merge_at(back, k).right;
	ok(same && bpe_vocab(t) > 266, "format then read back: the same %d merges", t ? bpe_vocab(t) - 256 : 0);
	bpe_free(back);
	back = NULL;
	char dir[] = "/tmp/sw-t-bpe.XXXXXX", path[64], *disk = NULL;
	size_t dlen = 0;
	if (mkdtemp(dir)) {
		FILE *f;
		snprintf(path, sizeof path, "%s/t.bpe", dir);
		if (t && !bpe_save(t, path, &err) && (f = fopen(path, "rb"))) {
			disk = malloc(len + 1);
			dlen = fread(disk, 1, len + 1, f);
			fclose(f);
		}
		ok(disk && dlen == len && !memcmp(disk, text, len) && !bpe_load(path, &back, &err) &&
		   bpe_vocab(back) == bpe_vocab(t), "bpe_save writes the text, bpe_load reads it");
		bpe_free(back);
		ok(bpe_load(dir, &back, &err) == SW_ENOINPUT, "bpe_load of a directory: SW_ENOINPUT");
		snprintf(path, sizeof path, "%s/none.bpe", dir);
		ok(bpe_load(path, &back, &err) == SW_ENOINPUT, "bpe_load of nothing: SW_ENOINPUT");
		snprintf(path, sizeof path, "rm -rf %s", dir);
		if (system(path))
			diag("cannot remove %s", dir);
	}
	free(disk);
	bpe_free(back);
	if (!t) {
		ok(0, "prefixes");
		ok(0, "mutations");
		return;
	}
	int prefixes = 1;
	for (size_t cut = 0; cut < len; cut++) {
		char *p = malloc(cut + 1);   /* exactly cut bytes readable, for ASan */
		memcpy(p, text, cut);
		prefixes &= bpe_load_from_memory(p, cut, &back, &err) == SW_EDATA && !back;
		free(p);
	}
	ok(prefixes, "each of the %zu strict prefixes refused", len);
	struct sw_rng r;
	int sane = 1, refused = 0;
	rng_seed(&r, 3);
	for (int trial = 0; trial < 3000; trial++) {
		char *p = malloc(len + 1);
		size_t m = len;
		memcpy(p, text, len);
		for (int e = 0; e < 1 + (int)(rng_next(&r) % 3); e++) {
			size_t at = rng_next(&r) % m;
			switch (rng_next(&r) % 3) {
			case 0: p[at] = (char)rng_next(&r); break;
			case 1: p[at] = "0123456789 \n"[rng_next(&r) % 12]; break;
			default: memmove(p + at, p + at + 1, m - at - 1); m--; break;
			}
		}
		int rc = bpe_load_from_memory(p, m, &back, &err);
		if (rc == SW_EDATA)
			refused++;
		else if (rc != SW_OK || bpe_vocab(back) < 256 || !round_trip(back, (const unsigned char *)corpus, 20))
			sane = 0;
		bpe_free(back);
		back = NULL;
		free(p);
	}
	ok(sane && refused > 2000, "3000 corrupted files: %d refused, the rest read and round-trip", refused);
	free(text);
	bpe_free(t);
}

/* What a streamed decode gave: length, largest piece, whether every byte
 * was the next of "abab..." (offset by start). */
struct stream_check {
	size_t n, largest, start;
	int pattern_ok;
};

static int check_piece(void *ctx, const void *bytes, size_t len, struct sw_err *err)
{
	struct stream_check *c = ctx;
	const unsigned char *p = bytes;

	(void)err;
	for (size_t i = 0; i < len; i++)
		c->pattern_ok &= p[i] == ((c->start + c->n + i) % 2 ? 'b' : 'a');
	c->n += len;
	c->largest = len > c->largest ? len : c->largest;
	return SW_OK;
}

/* 26 doubling merges: token 256 + k is "ab" repeated 2^k times */
static void test_long_tokens(void)
{
	struct bpe_merge m[26];
	struct stream_check c = {0, 0, 0, 1};
	struct sw_err err;
	struct bpe *b;
	uint16_t ids[3] = {281, 256, 270};

	m[0] = (struct bpe_merge){'a', 'b'};
	for (int k = 1; k < 26; k++)
		m[k] = (struct bpe_merge){(uint16_t)(255 + k), (uint16_t)(255 + k)};
	ok(bpe_from_merges(BPE_PRETOK_WORDS, m, 26, &b, &err) == SW_OK && bpe_token_len(b, 281) == 1u << 26 &&
	   bpe_token_len(b, 256) == 2, "doubling merges: token 281 is 2^26 bytes long");
	int rc = bpe_decode_stream(b, ids, 3, check_piece, &c, &err);
	ok(rc == SW_OK && c.n == (1u << 26) + 2 + (1u << 15) && c.pattern_ok,
	   "streamed decode: every byte of 2^26 + 2 + 2^15, in order (%zu)", c.n);
	ok(c.largest <= BPE_DECODE_CHUNK, "in pieces of at most %d bytes (largest %zu)",
	   BPE_DECODE_CHUNK, c.largest);
	ids[1] = 282;
	c = (struct stream_check){0, 0, 0, 1};
	ok(bpe_decode_stream(b, ids, 3, check_piece, &c, &err) == SW_EDATA && strstr(err.msg, "token 1:") &&
	   c.n <= (1u << 26), "an id >= vocab after a long token: SW_EDATA (%s)", err.msg);
	bpe_free(b);

	/* a merge tree as deep as it gets: each token one byte longer */
	struct bpe_merge chain[300];
	chain[0] = (struct bpe_merge){'x', 'y'};
	for (int k = 1; k < 300; k++)
		chain[k] = (struct bpe_merge){(uint16_t)(255 + k), (uint16_t)(k % 2 ? 'x' : 'y')};
	ok(bpe_from_merges(BPE_PRETOK_NONE, chain, 300, &b, &err) == SW_OK, "a chain of 300 merges");
	struct bpe_bytes d = {0};
	uint16_t last = 555;
	int same = b && bpe_decode(b, &last, 1, &d, &err) == SW_OK && d.n == 301 && d.p[0] == 'x' &&
		   d.p[1] == 'y';
	for (size_t i = 2; same && i < d.n; i++)
		same = d.p[i] == ((i - 1) % 2 ? 'x' : 'y');
	ok(same, "its longest token decodes byte for byte (%zu bytes)", d.n);
	bpe_bytes_free(&d);
	bpe_free(b);
}

int main(void)
{
	test_pretok();
	test_hand_merges();
	test_against_naive();
	test_encode();
	test_round_trip();
	test_vocab_limits();
	test_file();
	test_long_tokens();
	return tap_done();
}
