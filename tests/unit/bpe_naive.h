/*
 * bpe_naive.h - the textbook BPE, as the reference the tests (t-bpe.c) and
 * the benchmark (bench/tokenize-naive.c) hold lib/files/bpe against: every merge
 * recounts every pair of the whole corpus and rewrites every piece; encoding
 * replays every merge, in order, over the piece. Slow and obviously right.
 * Only the pre-tokenizer comes from the library (tested on its own).
 */
#ifndef SW_BPE_NAIVE_H
#define SW_BPE_NAIVE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/files/bpe.h"

struct naive_corpus {
	size_t n;               /* pieces */
	int32_t **sym;          /* (n) the tokens of each piece */
	size_t *len;            /* (n) */
	uint64_t *w;            /* (n) how many times it occurs */
};

/* Split one input into pieces (appended). */
static void naive_add(struct naive_corpus *c, enum bpe_pretok p, const unsigned char *s,
		      size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = bpe_pretok_next(p, s, n, i);
		c->sym = realloc(c->sym, (c->n + 1) * sizeof *c->sym);
		c->len = realloc(c->len, (c->n + 1) * sizeof *c->len);
		c->w = realloc(c->w, (c->n + 1) * sizeof *c->w);
		c->sym[c->n] = malloc((j - i) * sizeof **c->sym);
		for (size_t k = i; k < j; k++)
			c->sym[c->n][k - i] = s[k];
		c->w[c->n] = 1;
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
	free(c->w);
	memset(c, 0, sizeof *c);
}

static const struct naive_corpus *naive_sorting;

static int naive_cmp(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	const struct naive_corpus *c = naive_sorting;

	if (c->len[a] != c->len[b])
		return c->len[a] < c->len[b] ? -1 : 1;
	return memcmp(c->sym[a], c->sym[b], c->len[a] * sizeof **c->sym);
}

/* Equal pieces into one, their weights added (what a real trainer does
 * first; the merges do not change). */
static void naive_dedup(struct naive_corpus *c)
{
	size_t *order = malloc((c->n ? c->n : 1) * sizeof *order), m = 0;
	struct naive_corpus d = {0};

	for (size_t i = 0; i < c->n; i++)
		order[i] = i;
	naive_sorting = c;
	qsort(order, c->n, sizeof *order, naive_cmp);
	d.sym = malloc((c->n ? c->n : 1) * sizeof *d.sym);
	d.len = malloc((c->n ? c->n : 1) * sizeof *d.len);
	d.w = malloc((c->n ? c->n : 1) * sizeof *d.w);
	for (size_t k = 0; k < c->n; k++) {
		size_t i = order[k];
		if (m > 0 && d.len[m - 1] == c->len[i] &&
		    !memcmp(d.sym[m - 1], c->sym[i], c->len[i] * sizeof **c->sym)) {
			d.w[m - 1] += c->w[i];
			free(c->sym[i]);
			continue;
		}
		d.sym[m] = c->sym[i];
		d.len[m] = c->len[i];
		d.w[m++] = c->w[i];
	}
	d.n = m;
	free(order);
	free(c->sym);
	free(c->len);
	free(c->w);
	*c = d;
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
 * counted, each piece weighted by its occurrences), the smallest (left,
 * right) among equals, until the count is below 2. Every merge counts
 * every pair afresh. Rewrites the corpus; returns the number of merges.
 */
static int naive_train(struct naive_corpus *c, int vocab, struct bpe_merge *m)
{
	int64_t *count = calloc((size_t)vocab * (size_t)vocab, sizeof *count);
	int nm = 0;

	while (256 + nm < vocab) {
		int64_t best = 0;
		size_t best_at = 0;
		int32_t a, b;

		for (size_t i = 0; i < c->n; i++)
			for (size_t k = 0; k + 1 < c->len[i]; k++) {
				size_t at = (size_t)c->sym[i][k] * (size_t)vocab + (size_t)c->sym[i][k + 1];
				int64_t x = count[at] += (int64_t)c->w[i];
				/* a pair's running count reaches its total last: the
				 * largest total wins, the smallest (left, right) on a tie */
				if (x > best || (x == best && at < best_at)) {
					best = x;
					best_at = at;
				}
			}
		for (size_t i = 0; i < c->n; i++)
			for (size_t k = 0; k + 1 < c->len[i]; k++)
				count[(size_t)c->sym[i][k] * (size_t)vocab + (size_t)c->sym[i][k + 1]] = 0;
		if (best < 2)
			break;
		a = (int32_t)(best_at / (size_t)vocab);
		b = (int32_t)(best_at % (size_t)vocab);
		for (size_t i = 0; i < c->n; i++)
			c->len[i] = naive_merge(c->sym[i], c->len[i], a, b, 256 + nm);
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
