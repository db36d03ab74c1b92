/* esdfit.c - power-law and Marchenko-Pastur fits of eigenvalue spectra (see esdfit.h). */
#include "esdfit.h"
#include "../base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_asc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* D of the fit (xmin = x[i], alpha) over the tail, on the points
 * i, i + stride, ...: with stride 1 the distance itself, with a larger
 * one a lower bound of it (a max over fewer points). L holds ln x. */
static double ks_over(const double *L, int64_t n, int64_t i, double alpha, int64_t stride)
{
	double nt = (double)(n - i), D = 0;

	for (int64_t j = i; j < n; j += stride) {
		double d = fabs(1 - exp((1 - alpha) * (L[j] - L[i])) - (double)(j - i) / nt);
		D = d > D ? d : D;
	}
	return D;
}

double esdfit_ks(const double *x, int64_t n, int64_t i, double alpha)
{
	double nt = (double)(n - i), D = 0;

	for (int64_t j = i; j < n; j++) {
		double d = fabs(1 - pow(x[j] / x[i], 1 - alpha) - (double)(j - i) / nt);
		D = d > D ? d : D;
	}
	return D;
}

int esdfit_powerlaw(const double *x, int64_t n, struct esdfit_powerlaw *out,
		    struct sw_err *err)
{
	double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	double *L = malloc((size_t)(n > 0 ? n : 1) * sizeof *L);
	double *S = malloc((size_t)(n > 0 ? n : 1) * sizeof *S);
	double best = INFINITY;
	int64_t m = 0, bi = -1;

	memset(out, 0, sizeof *out);
	if (!v || !L || !S) {
		free(v);
		free(L);
		free(S);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	for (int64_t i = 0; i < n; i++)
		if (x[i] > 0 && isfinite(x[i]))
			v[m++] = x[i];
	qsort(v, (size_t)m, sizeof *v, cmp_asc);
	for (int64_t i = 0; i < m; i++)
		L[i] = log(v[i]);
	/* S[i] = sum_{j >= i} ln x_j */
	for (int64_t i = m - 1; i >= 0; i--)
		S[i] = L[i] + (i + 1 < m ? S[i + 1] : 0);
	for (int64_t i = 0; i < m && v[i] < v[m - 1]; i++) {
		double nt, alpha, D;
		int64_t stride;

		if (i > 0 && v[i] == v[i - 1])
			continue;       /* a candidate once, with all its copies in the tail */
		nt = (double)(m - i);
		alpha = 1 + nt / (S[i] - nt * L[i]);
		/* a lower bound from every stride-th point first: a candidate
		 * it already puts at or above the best cannot win (a tie keeps
		 * the smaller x_min), so the choice is the full scan's */
		stride = (m - i) / 64;
		if (stride > 1 && ks_over(L, m, i, alpha, stride) >= best)
			continue;
		D = ks_over(L, m, i, alpha, 1);
		if (D < best) {
			best = D;
			bi = i;
			out->alpha = alpha;
		}
	}
	if (bi >= 0) {
		out->xmin = v[bi];
		out->tail = m - bi;
		out->D = best;
		out->alpha_se = (out->alpha - 1) / sqrt((double)out->tail);
	}
	free(v);
	free(L);
	free(S);
	if (bi < 0)
		return sw_fail(err, SW_EDATA, "%lld positive eigenvalues, fewer than two distinct: no power law to fit",
			       (long long)m);
	return SW_OK;
}

double esdfit_mp_density(double x, double sigma2, double y)
{
	double a = sigma2 * (1 - sqrt(y)) * (1 - sqrt(y)), b = sigma2 * (1 + sqrt(y)) * (1 + sqrt(y));

	if (!(x > a && x < b))
		return 0;
	return sqrt((b - x) * (x - a)) / (2 * M_PI * sigma2 * y * x);
}

double esdfit_mp_median(double y)
{
	enum { K = 20000 };
	double a = (1 - sqrt(y)) * (1 - sqrt(y)), b = (1 + sqrt(y)) * (1 + sqrt(y));
	double total = 0, cum = 0, h = (M_PI / 2) / K;

	/* x = a + (b - a) sin^2 phi takes the square roots at the ends away:
	 * p(x) dx = (b - a)^2 sin^2 phi cos^2 phi / (pi y x) dphi, smooth */
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < K; k++) {
			double phi = (k + 0.5) * h, sn = sin(phi), cs = cos(phi);
			double x = a + (b - a) * sn * sn;
			double g = (b - a) * (b - a) * sn * sn * cs * cs / (M_PI * y * x) * h;
			if (!pass) {
				total += g;
			} else if (cum + g >= total / 2) {
				/* linear within the step */
				double f = (total / 2 - cum) / g, p = (k + f) * h, s2 = sin(p);
				return a + (b - a) * s2 * s2;
			} else {
				cum += g;
			}
		}
	return (a + b) / 2;
}

int esdfit_mp(const double *lam, int64_t m, double y, struct esdfit_mp *out, struct sw_err *err)
{
	double *v = malloc((size_t)(m > 0 ? m : 1) * sizeof *v), med0 = esdfit_mp_median(y);
	int64_t bulk = m, next;

	memset(out, 0, sizeof *out);
	if (!v)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	memcpy(v, lam, (size_t)m * sizeof *v);
	qsort(v, (size_t)m, sizeof *v, cmp_asc);
	if (m < 1 || !(v[m - 1] > 0)) {
		free(v);
		return sw_fail(err, SW_EDATA, "no positive eigenvalue: no Marchenko-Pastur bulk");
	}
	for (out->iterations = 1; out->iterations <= 100; out->iterations++) {
		/* the bulk is the lowest `bulk` values; its median */
		double med = bulk % 2 ? v[bulk / 2] : (v[bulk / 2 - 1] + v[bulk / 2]) / 2;
		out->sigma2 = med / med0;
		out->edge = out->sigma2 * (1 + sqrt(y)) * (1 + sqrt(y));
		out->lo = out->sigma2 * (1 - sqrt(y)) * (1 - sqrt(y));
		for (next = 0; next < m && v[next] <= out->edge; next++)
			;
		if (next == bulk || next == 0)
			break;
		bulk = next;
	}
	out->spikes = m - next;
	free(v);
	return SW_OK;
}

/* lambda_i = s_i^2 / N, malloc'ed (NULL when out of memory). */
static double *eigenvalues(const double *s, int64_t k, double N)
{
	double *lam = malloc((size_t)(k > 0 ? k : 1) * sizeof *lam);

	for (int64_t i = 0; lam && i < k; i++)
		lam[i] = s[i] * s[i] / N;
	return lam;
}

int esdfit_matrix(const double *s, int64_t k, int64_t rows, int64_t cols, double *lam_out,
		  struct esdfit_result *out, struct sw_err *err)
{
	double N = (double)(rows > cols ? rows : cols), M = (double)(rows < cols ? rows : cols);
	double *lam = eigenvalues(s, k, N), sum_sq = 0, max_sq = 0;
	int rc;

	memset(out, 0, sizeof *out);
	if (!lam)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int64_t i = 0; i < k; i++) {
		sum_sq += s[i] * s[i];
		max_sq = s[i] * s[i] > max_sq ? s[i] * s[i] : max_sq;
	}
	qsort(lam, (size_t)k, sizeof *lam, cmp_asc);
	out->count = k;
	out->lambda_max = k ? lam[k - 1] : NAN;
	if (!(rc = esdfit_powerlaw(lam, k, &out->pl, err)) && !(rc = esdfit_mp(lam, k, M / N, &out->mp, err))) {
		/*
		 * WeightWatcher's scale metrics, on its scale: the eigenvalues
		 * of W^T W, sigma^2, without our 1/N. Its source
		 * (CalculatedContent/WeightWatcher, weightwatcher/weightwatcher.py
		 * as of 0.7.x): combined_eigenvalues takes evals = sv * sv, its
		 * "if normalize: evals = evals / N" commented out (analyze's
		 * normalize option "removed 0.6.5"), and apply_norm_metrics sets
		 * log_norm = log10(sum(evals)), log_spectral_norm =
		 * log10(max(evals)), alpha_weighted = alpha * log_spectral_norm.
		 * alpha is the same on either scale (a power law's exponent does
		 * not see a factor); lambda_max, xmin and the Marchenko-Pastur
		 * columns keep lambda = sigma^2 / N, on which s^2 is the entries'
		 * variance.
		 */
		out->log_spectral_norm = log10(max_sq);
		out->log_norm = log10(sum_sq);
		out->alpha_weighted = out->pl.alpha * out->log_spectral_norm;
	}
	for (int64_t i = 0; lam_out && i < k; i++)
		lam_out[i] = lam[k - 1 - i];
	free(lam);
	return rc;
}

unsigned esdfit_warnings(const struct esdfit_powerlaw *pl)
{
	unsigned w = 0;

	if (pl->tail < ESDFIT_MIN_TAIL)
		w |= ESDFIT_SHORT_TAIL;
	if (pl->alpha < ESDFIT_ALPHA_LOW)
		w |= ESDFIT_OVER_TRAINED;
	else if (pl->alpha > ESDFIT_ALPHA_HIGH)
		w |= ESDFIT_UNDER_TRAINED;
	return w;
}

const char *esdfit_warn_text(unsigned warnings)
{
	/* every combination, indexed by the bits: constant strings, no buffer */
	static const char *const text[] = {
		"", "short-tail", "over-trained", "short-tail,over-trained", "under-trained",
		"short-tail,under-trained", "over-trained,under-trained",
		"short-tail,over-trained,under-trained"
	};

	return text[warnings & 7];
}

void esdfit_shuffle(float *w, int64_t n, uint64_t seed)
{
	struct sw_rng rng;

	rng_seed(&rng, seed);
	/* j uniform in [0, i] from 64 random bits: the modulo's bias is below
	 * (i + 1) / 2^64 */
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)(rng_next(&rng) % (uint64_t)(i + 1));
		float t = w[i];
		w[i] = w[j];
		w[j] = t;
	}
}

int esdfit_randomized(const double *s, int64_t k, int64_t rows, int64_t cols, double lambda_max,
		      struct esdfit_random *out, struct sw_err *err)
{
	double N = (double)(rows > cols ? rows : cols), M = (double)(rows < cols ? rows : cols);
	double *lam = eigenvalues(s, k, N), y = M / N, e, margin;
	struct esdfit_mp mp;
	int rc;

	memset(out, 0, sizeof *out);
	if (!lam)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int64_t i = 0; i < k; i++)
		out->lambda_max = lam[i] > out->lambda_max ? lam[i] : out->lambda_max;
	if (!(rc = esdfit_mp(lam, k, y, &mp, err))) {
		/* WeightWatcher's mp_fit: bulk_max + sqrt(TW), TW = Q^(-1/2)
		 * bulk_max^(2/3) M^(-2/3), Q = N/M, in units of s^2 */
		e = (1 + sqrt(y)) * (1 + sqrt(y));
		margin = sqrt(sqrt(y) * pow(e, 2.0 / 3) * pow(M, -2.0 / 3));
		out->mp_edge = mp.edge;
		out->trap_edge = mp.sigma2 * (e + margin);
		for (int64_t i = 0; i < k; i++)
			out->traps += lam[i] > out->trap_edge;
		out->softrank = out->lambda_max / lambda_max;
	}
	free(lam);
	return rc;
}
