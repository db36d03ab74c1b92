/* sharpness.c - the GNB estimate and its statistics (see sharpness.h). */
#include "sharpness.h"
#include "../base/par.h"

#include <math.h>
#include <omp.h>
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
	if ((const void *)h == (const void *)g) {
#pragma omp parallel for simd schedule(static) PAR_IF(n)
		for (size_t i = 0; i < n; i++)
			h[i] = (float)(scale * (double)h[i] * (double)h[i]);
		return;
	}
#pragma omp parallel for simd schedule(static) PAR_IF(n)
	for (size_t i = 0; i < n; i++)
		h[i] += (float)(scale * (double)g[i] * (double)g[i]);
}

int gnb_estimate(struct model *m, const int *tokens, int B, int T, int mb, int draws,
		 struct sw_rng *r, float *h, int *labels, real *probs_buf,
		 const struct gnb_progress *progress, struct sw_err *err)
{
	int V = (int)m->c.vocab_size, nmb = B / mb, Nmb = mb * T, N = B * T;
	int *y = malloc((size_t)Nmb * sizeof *y);
	int rc;

	/* the backward adds the load-balancing loss's gradient, which is no
	 * Gauss-Newton term: not built yet */
	if (m->c.n_experts) {
		free(y);
		return sw_fail(err, SW_EUSAGE, "the GNB estimate of a mixture of experts is not built "
			       "yet");
	}
	if (!y)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((const void *)h == (const void *)m->grads && draws != 1) {
		free(y);
		return sw_fail(err, SW_ESOFTWARE, "an estimate in place of the gradient takes one draw");
	}
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
			if (progress && progress->fn)
				progress->fn(progress->ctx, d * nmb + k + 1, draws * nmb);
		}
		/* h += N g^2 / draws */
		gnb_square_into(h, m->grads, m->nparams, (double)N / draws);
	}
	free(y);
	return SW_OK;
}

/* A nonnegative float's bits order as the float does. */
static uint32_t float_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	return u;
}

#define RADIX 65536     /* a 16-bit digit: two passes find a float by its rank */

/*
 * The passes over the values go by chunks of a fixed size, on every
 * thread: the sums are each chunk's in order, added in the chunks'
 * order, so that they do not depend on the number of threads; the
 * counts of digits are integers, in any order the same.
 */
#define CHUNK ((int64_t)1 << 18)

struct chunk {
	const float *v;
	int64_t n;
	double sum, lsum;       /* the values'; log10 of the positive ones */
	int64_t nz;             /* the positive ones */
	int bad;                /* a value negative, NaN or Inf: the first in bad_value */
	float bad_value;
};

/* each thread's counts (nthreads arrays, stride apart) added into the
 * first's n */
static void add_counts(int64_t *counts, int nthreads, size_t stride, size_t n)
{
	for (int t = 1; t < nthreads; t++)
		for (size_t d = 0; d < n; d++)
			counts[d] += counts[(size_t)t * stride + d];
}

/* the segments cut into chunks (*out, *nchunks), NULL if out of memory */
static struct chunk *chunks_of(const float *const *seg, const int64_t *len, int nseg,
			       int64_t *nchunks)
{
	struct chunk *c;
	int64_t n = 0, k = 0;

	for (int j = 0; j < nseg; j++)
		n += (len[j] + CHUNK - 1) / CHUNK;
	*nchunks = n;
	if (!(c = calloc((size_t)n + 1, sizeof *c)))
		return NULL;
	for (int j = 0; j < nseg; j++)
		for (int64_t i = 0; i < len[j]; i += CHUNK, k++) {
			c[k].v = seg[j] + i;
			c[k].n = len[j] - i < CHUNK ? len[j] - i : CHUNK;
		}
	return c;
}

/*
 * The order statistics rank[0..nr) (nr <= 8, each < the count) of the
 * positive values in the chunks, into out. hist (RADIX) holds how many
 * have each high 16-bit digit (the caller's pass); one more pass counts
 * the low digits of those whose high digit a rank falls in. Nothing is
 * copied or reordered: a billion-parameter block needs no second copy.
 */
static int select_ranks(const struct chunk *ch, int64_t nch, int nthreads, const int64_t *hist,
			const int64_t *rank, int nr, float *out, struct sw_err *err)
{
	int8_t *slot_of = malloc(RADIX);
	int64_t *low = calloc((size_t)nthreads * nr * RADIX, sizeof *low), before[8];
	uint32_t digit[8];
	int slot[8], nslots = 0;

	if (!slot_of || !low) {
		free(slot_of);
		free(low);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	memset(slot_of, -1, RADIX);
	for (int k = 0; k < nr; k++) {
		uint32_t d = 0;
		int64_t cum = 0;
		while (cum + hist[d] <= rank[k])
			cum += hist[d++];
		digit[k] = d;
		before[k] = cum;
		if (slot_of[d] < 0)
			slot_of[d] = (int8_t)nslots++;
		slot[k] = slot_of[d];
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t *mine = low + (size_t)omp_get_thread_num() * nr * RADIX;
#pragma omp for schedule(dynamic, 1)
		for (int64_t c = 0; c < nch; c++)
			for (int64_t i = 0; i < ch[c].n; i++) {
				uint32_t u = float_bits(ch[c].v[i]);
				if (ch[c].v[i] > 0 && slot_of[u >> 16] >= 0)
					mine[(size_t)slot_of[u >> 16] * RADIX + (u & 0xffff)]++;
			}
	}
	add_counts(low, nthreads, (size_t)nr * RADIX, (size_t)nslots * RADIX);
	for (int k = 0; k < nr; k++) {
		const int64_t *c = low + (size_t)slot[k] * RADIX;
		int64_t cum = before[k];
		uint32_t d = 0, u;
		while (cum + c[d] <= rank[k])
			cum += c[d++];
		u = digit[k] << 16 | d;
		memcpy(&out[k], &u, sizeof u);
	}
	free(slot_of);
	free(low);
	return SW_OK;
}

/* log10 as the statistics take it: in double, rounded to a float. The
 * rounding is a store to memory: GCC at -O3 with -fno-math-errno kept
 * the double for two of the quantiles when the cast alone said float,
 * moving them off numpy's by up to half a float ulp. */
static float log10f_of(float x)
{
	volatile float l = (float)log10((double)x);

	return l;
}

/* one chunk's sums and checks, its high digits counted into hist */
static void chunk_pass(struct chunk *c, int64_t *hist)
{
	for (int64_t i = 0; i < c->n; i++) {
		float v = c->v[i];
		if (!(v >= 0) || isinf(v)) {
			c->bad = 1;
			c->bad_value = v;
			return;
		}
		c->sum += v;
		if (v > 0) {
			c->lsum += log10f_of(v);
			c->nz++;
			hist[float_bits(v) >> 16]++;
		}
	}
}

int gnb_stats(const float *const *seg, const int64_t *len, int nseg, struct gnb_stats *s,
	      struct sw_err *err)
{
	static const double qs[3] = {0.1, 0.5, 0.9};
	double sum = 0, lsum = 0, *qout[3] = {&s->q10, &s->median, &s->q90};
	int64_t nz = 0, n = 0, rank[6], *hist, nch;
	float at[6], lg[6];
	int nr = 0, rc, nthreads;
	struct chunk *ch;

	memset(s, 0, sizeof *s);
	for (int j = 0; j < nseg; j++)
		n += len[j];
	nthreads = n >= (int64_t)PAR_MIN_ELEMS ? omp_get_max_threads() : 1;
	ch = chunks_of(seg, len, nseg, &nch);
	hist = calloc((size_t)nthreads * RADIX, sizeof *hist);
	if (!ch || !hist) {
		free(ch);
		free(hist);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	/* one pass: the checks, the mean, the mean of log10 over the nonzero
	 * entries and the high digits of their bits */
#pragma omp parallel num_threads(nthreads)
	{
		int64_t *mine = hist + (size_t)omp_get_thread_num() * RADIX;
#pragma omp for schedule(dynamic, 1)
		for (int64_t c = 0; c < nch; c++)
			chunk_pass(&ch[c], mine);
	}
	for (int64_t c = 0; c < nch; c++) {
		if (ch[c].bad) {
			double v = ch[c].bad_value;
			free(ch);
			free(hist);
			return sw_fail(err, SW_EDATA, "a sharpness estimate is %g", v);
		}
		sum += ch[c].sum;
		lsum += ch[c].lsum;
		nz += ch[c].nz;
	}
	add_counts(hist, nthreads, RADIX, RADIX);
	s->n = n;
	s->mean = n ? sum / (double)n : NAN;
	s->zeros = n - nz;
	if (!nz) {
		free(ch);
		free(hist);
		s->mean_log10 = s->q10 = s->median = s->q90 = NAN;
		return SW_OK;
	}
	s->mean_log10 = lsum / (double)nz;
	/* numpy's default quantile: linear between the order statistics
	 * i = floor(q (nz - 1)) and i + 1 of log10 h; log10 keeps the order, so
	 * they are the logs of h's */
	for (int q = 0; q < 3; q++) {
		int64_t i = (int64_t)floor(qs[q] * (double)(nz - 1));
		rank[nr++] = i;
		rank[nr++] = i + 1 < nz ? i + 1 : i;
	}
	rc = select_ranks(ch, nch, nthreads, hist, rank, nr, at, err);
	free(ch);
	free(hist);
	if (rc)
		return rc;
	for (int k = 0; k < nr; k++)
		lg[k] = log10f_of(at[k]);
	for (int q = 0; q < 3; q++) {
		double pos = qs[q] * (double)(nz - 1), f = pos - floor(pos);
		*qout[q] = lg[2 * q] + f * ((double)lg[2 * q + 1] - lg[2 * q]);
	}
	return SW_OK;
}

int gnb_stats_of(const float *vals, int64_t n, struct gnb_stats *s, struct sw_err *err)
{
	return gnb_stats(&vals, &n, 1, s, err);
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
