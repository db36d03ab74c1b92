/*
 * The GNB estimator (lib/model/sharpness.c) against its exact expectation on a
 * tiny vocabulary, in double precision (this file compiles the CPU model,
 * lib/model/cpukern.c, layout.c, model.c, and lib/model/sharpness.c with
 * real = double).
 *
 * For vocab V = 3 and N = 2 x 3 = 6 tokens, every one of the 3^6 = 729
 * label sequences y is enumerated: E[h] = sum_y P(y) N (grad L(y))^2 with
 * P(y) the product of the model's own probabilities and L the mean loss.
 * The average of K estimates must agree with it within 5 standard errors
 * of the sample (sample variance / K), for every parameter.
 */
#define SW_REAL_DOUBLE
#include "../../lib/model/cpukern.c"
#include "../../lib/model/layout.c"
#include "../../lib/model/model.c"
#include "../../lib/model/moe.c"
#include "../../lib/model/step.c"
#include "../../lib/model/sharpness.c"

#include "tap.h"

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* numpy's default quantile from a sorted copy: the reference for the
 * selection by rank in gnb_stats (the same arithmetic, so equal to the bit) */
static double sorted_quantile(const float *sorted, int64_t n, double q)
{
	double pos = q * (double)(n - 1);
	int64_t i = (int64_t)floor(pos);
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + (pos - (double)i) * ((double)sorted[i + 1] - sorted[i]);
}

/* The three quantiles of log10 by rank against those of a sorted copy, on
 * n positive values of one pattern (0 log-normal, sd 4 decades, 1 five
 * distinct values, 2 ascending, 3 descending, 4 all equal, 5 organ pipe,
 * 6 neighbours in the bits: one high digit, ties in the low), a zero in
 * every seventh place, read as three runs; the values are left as they
 * were. */
static int quantiles_match(int64_t n, int pattern, struct sw_rng *r)
{
	float *v = malloc((size_t)n * sizeof *v), *ref = malloc((size_t)n * sizeof *ref);
	float *before = malloc((size_t)n * sizeof *before);
	int same = v && ref && before;
	int64_t nz = 0;

	for (int64_t i = 0; same && i < n; i++) {
		switch (pattern) {
		case 0: v[i] = (float)pow(10, 4 * rng_normal(r)); break;
		case 1: v[i] = (float)(rng_next(r) % 5 + 1) * 0.25f; break;
		case 2: v[i] = (float)(i + 1); break;
		case 3: v[i] = (float)(n - i); break;
		case 4: v[i] = 5.25f; break;
		case 5: v[i] = (float)(i < n / 2 ? i + 1 : n - i); break;
		default: v[i] = 1.0f + (float)(rng_next(r) % 7) * 0x1p-23f; break;
		}
		if (i % 7 == 3)
			v[i] = 0;
		if (v[i] > 0)
			ref[nz++] = (float)log10((double)v[i]);
	}
	if (same) {
		const float *seg[3] = {v, v + n / 3, v + n / 2};
		int64_t len[3] = {n / 3, n / 2 - n / 3, n - n / 2};
		struct gnb_stats s;
		struct sw_err err;
		memcpy(before, v, (size_t)n * sizeof *v);
		same = gnb_stats(seg, len, 3, &s, &err) == SW_OK && s.zeros == n - nz;
		qsort(ref, (size_t)nz, sizeof *ref, cmp_float);
		same = same && (nz ? s.q10 == sorted_quantile(ref, nz, 0.1) &&
				     s.median == sorted_quantile(ref, nz, 0.5) &&
				     s.q90 == sorted_quantile(ref, nz, 0.9)
				   : isnan(s.median));
		same = same && memcmp(v, before, (size_t)n * sizeof *v) == 0;
	}
	free(v);
	free(ref);
	free(before);
	return same;
}

/* gnb_estimate's progress: the passes in order, each told once */
struct passes_seen {
	int calls, in_order, total;
};

static void pass_seen(void *ctx, int done, int total)
{
	struct passes_seen *p = ctx;

	p->in_order &= done == ++p->calls;
	p->total = total;
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
		if (gnb_estimate(&m, tok, B, T, B, 1, &lr, h, NULL, pb, NULL, &err))
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

	/* progress: micro-batches of one sequence, two draws: four passes */
	struct passes_seen seen = {0, 1, 0};
	struct gnb_progress pr = {pass_seen, &seen};
	memset(h, 0, P * sizeof *h);
	int prc = gnb_estimate(&m, tok, B, T, 1, 2, &lr, h, NULL, NULL, &pr, &err);
	ok(prc == SW_OK && seen.calls == 4 && seen.in_order && seen.total == 4,
	   "progress: each of the 2 x 2 passes told once, in order (%d calls, of %d)", seen.calls,
	   seen.total);

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
	/* the quantiles by rank equal a sort's, to the bit, at every size and
	 * on patterns that put ranks in one digit, in ties, across decades */
	int all_match = 1;
	const int64_t sizes[] = {1, 2, 3, 4, 10, 11, 1000, 100003, (1 << 20) + 7};
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
		for (int pattern = 0; pattern < 7; pattern++)
			if (!quantiles_match(sizes[k], pattern, &r)) {
				all_match = 0;
				diag("quantiles differ: n %lld, pattern %d", (long long)sizes[k], pattern);
			}
	ok(all_match, "q10, median, q90 by rank equal a sorted copy's (9 sizes x 7 patterns, in 3 runs)");
	float bad_vals[3] = {1, NAN, 2};
	ok(gnb_stats_of(bad_vals, 3, &s, &err) == SW_EDATA, "a NaN estimate: %s", err.msg);

	/* many chunks (of 2^18) on every thread: the sums do not depend on the
	 * number of threads, and the first bad value in order is the one told */
	int64_t nbig = 5 << 18;
	float *big = malloc((size_t)nbig * sizeof *big);
	if (big) {
		struct gnb_stats s1, s2;
		long double sum = 0;
		int r1, r2;
		for (int64_t i = 0; i < nbig; i++)
			sum += big[i] = (float)pow(10, 3 * rng_normal(&r)) * (i % 5 != 0);
		omp_set_num_threads(1);
		r1 = gnb_stats_of(big, nbig, &s1, &err);
		omp_set_num_threads(2);
		r2 = gnb_stats_of(big, nbig, &s2, &err);
		ok(r1 == SW_OK && r2 == SW_OK && !memcmp(&s1, &s2, sizeof s1) &&
		   close_rel(s1.mean, (double)(sum / nbig), 1e-12) && s1.zeros == nbig / 5,
		   "over 5 chunks: one thread and two give the same bits; the mean %.12g within "
		   "1e-12 of a long double sum's", s1.mean);
		big[3 * (1 << 18) + 11] = -1;
		big[4 * (1 << 18) + 5] = NAN;
		r2 = gnb_stats_of(big, nbig, &s2, &err);
		ok(r2 == SW_EDATA && strstr(err.msg, "is -1"), "two bad values in later chunks: the "
		   "first told (%s)", r2 ? err.msg : "none");
		free(big);
	} else {
		ok(0, "out of memory");
		ok(0, "out of memory");
	}

	free(exact);
	free(mean);
	free(m2);
	free(h);
	free(pb);
	model_free(&m);
	return tap_done();
}
