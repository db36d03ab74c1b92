/* sharpness.c - the GNB estimate and its statistics (see sharpness.h). */
#include "sharpness.h"
#include "../base/par.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gnb_sample_labels(const real *probs, int N, int V, struct sw_rng *r, int *labels)
{
	for (int n = 0; n < N; n++) {
		const real *p = probs + (size_t)n * V;
		double u = rng_uniform(r), c = 0;
		int y = V - 1;
		/* inverse CDF; the last label takes what rounding leaves */
		for (int i = 0; i < V; i++) {
			c += p[i];
			if (u < c) {
				y = i;
				break;
			}
		}
		labels[n] = y;
	}
}

void gnb_square_into(float *h, const real *g, size_t n, double scale)
{
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		h[i] += (float)(scale * (double)g[i] * (double)g[i]);
}

int gnb_estimate(struct model *m, const int *tokens, int B, int T, int mb, int draws,
		 struct sw_rng *r, float *h, int *labels, real *probs_buf, struct sw_err *err)
{
	int V = (int)m->c.vocab_size, nmb = B / mb, Nmb = mb * T, N = B * T;
	int *y = malloc((size_t)Nmb * sizeof *y);
	int rc;

	if (!y)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (B % mb) {
		free(y);
		return sw_fail(err, SW_EUSAGE, "batch of %d sequences is not a multiple of %d", B, mb);
	}
	if ((rc = model_alloc_acts(m, mb, T, err))) {
		free(y);
		return rc;
	}
	/* one micro-batch: forward once and restore its softmax for each draw
	 * (the backward pass overwrites it, the activations stay) */
	if (nmb == 1 && probs_buf)
		model_forward(m, tokens, NULL, mb, T);
	for (int d = 0; d < draws; d++) {
		model_zero_grad(m);
		for (int k = 0; k < nmb; k++) {
			const int *tok = tokens + (size_t)k * Nmb;
			if (nmb == 1 && probs_buf) {
				if (d == 0)
					memcpy(probs_buf, m->logits, (size_t)Nmb * V * sizeof(real));
				else
					memcpy(m->logits, probs_buf, (size_t)Nmb * V * sizeof(real));
			} else {
				model_forward(m, tok, NULL, mb, T);
			}
			gnb_sample_labels(m->logits, Nmb, V, r, y);
			if (labels)
				memcpy(labels + (size_t)d * N + (size_t)k * Nmb, y, (size_t)Nmb * sizeof *y);
			/* this micro-batch's mean loss is Nmb/N of the batch's mean */
			model_backward(m, tok, y, (double)Nmb / N);
		}
		/* h += N g^2 / draws */
		gnb_square_into(h, m->grads, m->nparams, (double)N / draws);
	}
	free(y);
	return SW_OK;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static void swap_float(float *a, float *b)
{
	float t = *a;
	*a = *b;
	*b = t;
}

static float median_of_3(float a, float b, float c)
{
	return a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
}

/*
 * Reorders v[lo..hi) (no NaN) so that v[k] holds the value it would hold
 * were the range sorted, with nothing greater before it and nothing smaller
 * after: quickselect, three-way partitions around the median of three
 * entries drawn by a fixed pseudo-random sequence, so equal values (many
 * h share one) cost one pass. Expected linear time; should the rounds
 * exceed 2 log2(n) + 16, the rest of the range is sorted instead, which
 * bounds the worst case by a sort's n log n. A sort of a billion-parameter
 * block took a minute (the comparisons are calls); this takes seconds.
 */
static void select_kth_rounds(float *v, int64_t lo, int64_t hi, int64_t k, int rounds)
{
	uint64_t draw = 0x9e3779b97f4a7c15u;

	while (hi - lo > 1) {
		int64_t n = hi - lo, at[3];
		if (rounds-- == 0) {
			qsort(v + lo, (size_t)n, sizeof *v, cmp_float);
			return;
		}
		for (int j = 0; j < 3; j++) {
			draw = draw * 6364136223846793005u + 1442695040888963407u;
			at[j] = lo + (int64_t)((draw >> 33) % (uint64_t)n);
		}
		float pivot = median_of_3(v[at[0]], v[at[1]], v[at[2]]);
		/* [lo, lt) < pivot, [lt, gt) == pivot, [gt, hi) > pivot */
		int64_t lt = lo, i = lo, gt = hi;
		while (i < gt) {
			if (v[i] < pivot)
				swap_float(&v[lt++], &v[i++]);
			else if (v[i] > pivot)
				swap_float(&v[i], &v[--gt]);
			else
				i++;
		}
		if (k < lt)
			hi = lt;
		else if (k >= gt)
			lo = gt;
		else
			return;         /* v[k] is the pivot, in place */
	}
}

static void select_kth(float *v, int64_t lo, int64_t hi, int64_t k)
{
	int rounds = 16;

	for (int64_t n = hi - lo; n > 1; n >>= 1)
		rounds += 2;
	select_kth_rounds(v, lo, hi, k, rounds);
}

/*
 * numpy's default quantile of v[0..n): linear between the order statistics
 * i = floor(q (n - 1)) and i + 1. v[from..n) must hold the statistics
 * from `from` on (an earlier call's i, for an equal or larger q: its
 * selection left what lies above it above it); returns i.
 */
static int64_t quantile(float *v, int64_t n, double q, int64_t from, double *out)
{
	double pos = q * (double)(n - 1);
	int64_t i = (int64_t)floor(pos);
	double f = pos - (double)i;
	float next;

	select_kth(v, from, n, i);
	if (i + 1 >= n) {
		*out = v[n - 1];
		return i;
	}
	next = v[i + 1];        /* the next statistic: the least of what lies above i */
	for (int64_t j = i + 2; j < n; j++)
		next = v[j] < next ? v[j] : next;
	*out = v[i] + f * ((double)next - v[i]);
	return i;
}

int gnb_stats_of(float *vals, int64_t n, struct gnb_stats *s, struct sw_err *err)
{
	double sum = 0, lsum = 0;
	int64_t nz = 0;

	memset(s, 0, sizeof *s);
	s->n = n;
	for (int64_t i = 0; i < n; i++) {
		if (!(vals[i] >= 0) || isinf(vals[i]))
			return sw_fail(err, SW_EDATA, "a sharpness estimate is %g", (double)vals[i]);
		sum += vals[i];
	}
	s->mean = n ? sum / (double)n : NAN;
	/* log10 of the nonzero entries, packed to the front */
	for (int64_t i = 0; i < n; i++)
		if (vals[i] > 0) {
			vals[nz] = (float)log10((double)vals[i]);
			lsum += vals[nz];
			nz++;
		}
	s->zeros = n - nz;
	if (!nz) {
		s->mean_log10 = s->q10 = s->median = s->q90 = NAN;
		return SW_OK;
	}
	s->mean_log10 = lsum / (double)nz;
	int64_t at = quantile(vals, nz, 0.1, 0, &s->q10);
	at = quantile(vals, nz, 0.5, at, &s->median);
	quantile(vals, nz, 0.9, at, &s->q90);
	return SW_OK;
}

double gnb_paper_ratio(enum sw_block b)
{
	switch (b) {
	case SW_BLOCK_EMB: return 10;
	case SW_BLOCK_QK: return 8;
	case SW_BLOCK_FFN: return 6;
	case SW_BLOCK_VO: return 4;
	case SW_BLOCK_NORM: return 1;
	default: return 0;
	}
}
