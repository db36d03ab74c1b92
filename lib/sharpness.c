/* sharpness.c - the GNB estimate and its statistics (see sharpness.h). */
#include "sharpness.h"
#include "par.h"

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

/* numpy's default quantile: linear between the order statistics */
static double quantile(const float *sorted, int64_t n, double q)
{
	double pos = q * (double)(n - 1);
	int64_t i = (int64_t)floor(pos);
	double f = pos - (double)i;
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + f * ((double)sorted[i + 1] - sorted[i]);
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
	qsort(vals, (size_t)nz, sizeof *vals, cmp_float);
	s->q10 = quantile(vals, nz, 0.1);
	s->median = quantile(vals, nz, 0.5);
	s->q90 = quantile(vals, nz, 0.9);
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
