/*
 * The GNB estimator (lib/model/sharpness.c) against its exact expectation on a
 * tiny vocabulary, in double precision (this file compiles lib/model/model.c and
 * lib/model/sharpness.c with real = double).
 *
 * For vocab V = 3 and N = 2 x 3 = 6 tokens, every one of the 3^6 = 729
 * label sequences y is enumerated: E[h] = sum_y P(y) N (grad L(y))^2 with
 * P(y) the product of the model's own probabilities and L the mean loss.
 * The average of K estimates must agree with it within 5 standard errors
 * of the sample (sample variance / K), for every parameter.
 */
#define SW_REAL_DOUBLE
#include "../../lib/model/model.c"
#include "../../lib/model/step.c"
#include "../../lib/model/sharpness.c"

#include "tap.h"

/* numpy's default quantile from a sorted copy: the reference for the
 * selection in gnb_stats_of (the same arithmetic, so equal to the bit) */
static double sorted_quantile(const float *sorted, int64_t n, double q)
{
	double pos = q * (double)(n - 1);
	int64_t i = (int64_t)floor(pos);
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + (pos - (double)i) * ((double)sorted[i + 1] - sorted[i]);
}

/* The three quantiles by selection against those of a sorted copy, on n
 * values of one pattern: 0 random, 1 five distinct values, 2 ascending,
 * 3 descending, 4 all equal, 5 organ pipe (up, then down). */
static int quantiles_match(int64_t n, int pattern, struct sw_rng *r)
{
	float *v = malloc((size_t)n * sizeof *v), *ref = malloc((size_t)n * sizeof *ref);
	int same = v && ref;

	for (int64_t i = 0; same && i < n; i++) {
		switch (pattern) {
		case 0: v[i] = (float)rng_normal(r); break;
		case 1: v[i] = (float)(rng_next(r) % 5) - 2.5f; break;
		case 2: v[i] = (float)i; break;
		case 3: v[i] = (float)(n - i); break;
		case 4: v[i] = -5.25f; break;
		default: v[i] = (float)(i < n / 2 ? i : n - i); break;
		}
		ref[i] = v[i];
	}
	if (same) {
		double got[3];
		int64_t at = quantile(v, n, 0.1, 0, &got[0]);
		at = quantile(v, n, 0.5, at, &got[1]);
		quantile(v, n, 0.9, at, &got[2]);
		qsort(ref, (size_t)n, sizeof *ref, cmp_float);
		same = got[0] == sorted_quantile(ref, n, 0.1) && got[1] == sorted_quantile(ref, n, 0.5) &&
		       got[2] == sorted_quantile(ref, n, 0.9);
		/* and the values were only moved: sorted, they are the copy */
		qsort(v, (size_t)n, sizeof *v, cmp_float);
		same = same && memcmp(v, ref, (size_t)n * sizeof *v) == 0;
	}
	free(v);
	free(ref);
	return same;
}

int main(void)
{
	const struct sw_config c = {
		.arch = "llama", .vocab_size = 3, .d_model = 4, .n_layers = 1, .n_heads = 2,
		.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 3, .rope_theta = 10000,
		.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
	};
	enum { B = 2, T = 3, N = 6, V = 3, K = 4000 };
	int tok[N] = {0, 2, 1, 1, 1, 2}, y[N];
	struct model m;
	struct sw_err err;
	struct sw_rng r;
	double probs[N * V];

	if (model_build(&m, &c, &err) || model_alloc_acts(&m, B, T, &err))
		return 1;
	rng_seed(&r, 3);
	for (size_t i = 0; i < m.nparams; i++)
		m.params[i] = 0.8 * rng_normal(&r);
	model_forward(&m, tok, NULL, B, T);
	memcpy(probs, m.logits, sizeof probs);

	/* the exact expectation by enumeration */
	size_t P = m.nparams;
	double *exact = calloc(P, sizeof *exact);
	double total_p = 0;
	for (int code = 0; code < 729; code++) {
		double p = 1;
		for (int b = 0, x = code; b < N; b++, x /= V) {
			y[b] = x % V;
			p *= probs[b * V + y[b]];
		}
		total_p += p;
		memcpy(m.logits, probs, sizeof probs);
		model_zero_grad(&m);
		model_backward(&m, tok, y, 1.0);
		for (size_t i = 0; i < P; i++)
			exact[i] += p * N * m.grads[i] * m.grads[i];
	}
	ok(fabs(total_p - 1) < 1e-12, "the 729 label sequences carry probability 1");

	/* the estimator: K draws, sample mean and variance per parameter */
	double *mean = calloc(P, sizeof *mean), *m2 = calloc(P, sizeof *m2), tmean = 0, tm2 = 0;
	float *h = calloc(P, sizeof *h);
	real *pb = malloc(sizeof probs);
	struct sw_rng lr;
	rng_seed(&lr, 11);
	for (int k = 0; k < K; k++) {
		memset(h, 0, P * sizeof *h);
		if (gnb_estimate(&m, tok, B, T, B, 1, &lr, h, NULL, pb, &err))
			return 1;
		double tr = 0, d;
		for (size_t i = 0; i < P; i++) {
			d = h[i] - mean[i];
			mean[i] += d / (k + 1);
			m2[i] += d * (h[i] - mean[i]);
			tr += h[i];
		}
		d = tr - tmean;
		tmean += d / (k + 1);
		tm2 += d * (tr - tmean);
	}
	int bad = 0, nz = 0;
	double worst = 0;
	for (size_t i = 0; i < P; i++) {
		double se = sqrt(m2[i] / (K - 1) / K), z = fabs(mean[i] - exact[i]) / (se + 1e-30);
		if (exact[i] > 0)
			nz++;
		if (fabs(mean[i] - exact[i]) > 5 * se + 1e-7 * exact[i]) {
			bad++;
		}
		worst = z > worst && se > 0 ? z : worst;
	}
	ok(bad == 0 && nz > (int)P / 2, "%d draws: all %zu parameters within 5 standard errors of the exact expectation (worst %.2f)",
	   K, P, worst);

	/* the trace, the numerator of eq. 4 over all parameters */
	double tr_exact = 0, tr_se = sqrt(tm2 / (K - 1) / K);
	for (size_t i = 0; i < P; i++)
		tr_exact += exact[i];
	ok(fabs(tmean - tr_exact) < 5 * tr_se, "Tr(H) estimated %.6g +- %.2g, exact %.6g", tmean, tr_se, tr_exact);

	/* the check is not vacuous: the exact expectation of a wrong
	 * estimator (h = g^2, without the factor N) is caught */
	int caught = 0;
	for (size_t i = 0; i < P; i++) {
		double se = sqrt(m2[i] / (K - 1) / K);
		if (fabs(mean[i] / N - exact[i]) > 5 * se + 1e-7 * exact[i])
			caught++;
	}
	ok(caught > (int)P / 2, "an estimator off by the factor N fails the same test (%d parameters)", caught);

	/* labels follow the probabilities: frequencies of token 0's label */
	int counts[V] = {0};
	rng_seed(&lr, 5);
	for (int k = 0; k < 30000; k++) {
		gnb_sample_labels(probs, 1, V, &lr, y);
		counts[y[0]]++;
	}
	int freq_ok = 1;
	for (int v = 0; v < V; v++) {
		double f = counts[v] / 30000.0, sd = sqrt(probs[v] * (1 - probs[v]) / 30000.0);
		freq_ok &= fabs(f - probs[v]) < 5 * sd;
	}
	ok(freq_ok, "sampled labels have the model's probabilities (%.3f %.3f %.3f)",
	   counts[0] / 30000.0, counts[1] / 30000.0, counts[2] / 30000.0);

	/* statistics: mean, zeros apart, numpy-style quantiles of log10 */
	float vals[6] = {0, 1e-3f, 1e-2f, 0, 1e-1f, 1};
	struct gnb_stats s = {0};
	int src = gnb_stats_of(vals, 6, &s, &err);
	ok(src == SW_OK && s.zeros == 2 && close_rel(s.mean, 1.111e-0 / 6, 1e-6) &&
	   close_rel(s.mean_log10, -1.5, 1e-6) && close_rel(s.median, -1.5, 1e-6) &&
	   close_rel(s.q10, -2.7, 1e-6) && close_rel(s.q90, -0.3, 1e-6),
	   "stats: mean %.6g, zeros apart, log10 quantiles %.3g %.3g %.3g", s.mean, s.q10, s.median, s.q90);
	/* the quantiles by selection equal a sort's, to the bit, at every
	 * size and on the patterns that slow a naive quickselect */
	int all_match = 1;
	const int64_t sizes[] = {1, 2, 3, 10, 11, 1000, 100003};
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
		for (int pattern = 0; pattern < 6; pattern++)
			if (!quantiles_match(sizes[k], pattern, &r)) {
				all_match = 0;
				diag("quantiles differ: n %lld, pattern %d", (long long)sizes[k], pattern);
			}
	ok(all_match, "q10, median, q90 by selection equal a sorted copy's (7 sizes x 6 patterns)");

	/* the selection's fallback: with no rounds left it sorts the range */
	float few[5] = {3, 1, 2, 5, 4};
	select_kth_rounds(few, 0, 5, 2, 0);
	ok(few[0] == 1 && few[1] == 2 && few[2] == 3 && few[3] == 4 && few[4] == 5,
	   "a selection out of rounds sorts the range");

	free(exact);
	free(mean);
	free(m2);
	free(h);
	free(pb);
	model_free(&m);
	return tap_done();
}
