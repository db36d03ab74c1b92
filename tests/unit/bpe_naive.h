/*
 * bpe_naive.h - the textbook BPE, as the reference the tests (t-bpe.c) and
 * the benchmark (bench/tokenize-naive.c) hold lib/bpe against: every merge
 * recounts every pair of the whole corpus and rewrites every piece; encoding
 * replays every merge, in order, over the piece. Slow and obviously right.
 * Only the pre-tokenizer comes from the library (tested on its own).
 */
#ifndef SW_BPE_NAIVE_H
#define SW_BPE_NAIVE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/bpe.h"

struct naive_corpus {
	size_t n;               /* pieces */
	int32_t **sym;          /* (n) the tokens of each piece */
	size_t *len;            /* (n) */
};

/* Split one input into pieces (appended). */
static void naive_add(struct naive_corpus *c, enum bpe_pretok p, const unsigned char *s,
		      size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = bpe_pretok_next(p, s, n, i);
		c->sym = realloc(c->sym, (c->n + 1) * sizeof *c->sym);
		c->len = realloc(c->len, (c->n + 1) * sizeof *c->len);
		c->sym[c->n] = malloc((j - i) * sizeof **c->sym);
		for (size_t k = i; k < j; k++)
			c->sym[c->n][k - i] = s[k];
		c->len[c->n++] = j - i;
		i = j;
	}
}

static void naive_free(struct naive_corpus *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->sym[i]);
	free(c->sym);
	free(c->len);
	memset(c, 0, sizeof *c);
}

/* Replace (a, b) by x in a piece, left to right; the new length. */
static size_t naive_merge(int32_t *s, size_t n, int32_t a, int32_t b, int32_t x)
{
	size_t out = 0;

	for (size_t k = 0; k < n; k++) {
		if (k + 1 < n && s[k] == a && s[k + 1] == b) {
			s[out++] = x;
			k++;
		} else {
			s[out++] = s[k];
		}
	}
	return out;
}

/*
 * Learn merges up to vocab: the pair with the largest count (overlaps
 * counted), the smallest (left, right) among equals, until the count is
 * below 2. Rewrites the corpus; returns the number of merges.
 */
static int naive_train(struct naive_corpus *c, int vocab, struct bpe_merge *m)
{
	int64_t *count = malloc((size_t)vocab * (size_t)vocab * sizeof *count);
	int nm = 0;

	while (256 + nm < vocab) {
		int v = 256 + nm;
		int64_t best = 0;
		int32_t a = 0, b = 0;

		memset(count, 0, (size_t)v * (size_t)v * sizeof *count);
		for (size_t i = 0; i < c->n; i++)
			for (size_t k = 0; k + 1 < c->len[i]; k++)
				count[(size_t)c->sym[i][k] * (size_t)v + (size_t)c->sym[i][k + 1]]++;
		for (int32_t x = 0; x < v; x++)
			for (int32_t y = 0; y < v; y++)
				if (count[(size_t)x * (size_t)v + (size_t)y] > best) {
					best = count[(size_t)x * (size_t)v + (size_t)y];
					a = x;
					b = y;
				}
		if (best < 2)
			break;
		for (size_t i = 0; i < c->n; i++)
			c->len[i] = naive_merge(c->sym[i], c->len[i], a, b, v);
		m[nm].left = (uint16_t)a;
		m[nm].right = (uint16_t)b;
		nm++;
	}
	free(count);
	return nm;
}

/* Encode s[0, n) by replaying the merges over each piece; the token count. */
static size_t naive_encode(const struct bpe_merge *m, int nm, enum bpe_pretok p,
			   const unsigned char *s, size_t n, uint16_t *out)
{
	size_t total = 0;
	int32_t *sym = malloc((n ? n : 1) * sizeof *sym);

	for (size_t i = 0; i < n;) {
		size_t j = bpe_pretok_next(p, s, n, i), len = j - i;
		for (size_t k = 0; k < len; k++)
			sym[k] = s[i + k];
		for (int r = 0; r < nm && len > 1; r++)
			len = naive_merge(sym, len, m[r].left, m[r].right, 256 + r);
		for (size_t k = 0; k < len; k++)
			out[total++] = (uint16_t)sym[k];
		i = j;
	}
	free(sym);
	return total;
}

#endif
