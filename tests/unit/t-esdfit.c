/*
 * lib/analysis/esdfit.c against what is known independently:
 *   - samples from Pareto laws p(x) = (a - 1) x^-a, x >= 1 (2000 each):
 *     alpha recovered within one standard error for at least 50% of 100
 *     seeds, within two for 85%, within four for all, for a = 1.5, 2.5, 4
 *     (measured: 56-67%, 90-94%; a normal law gives 68%, 95%: the
 *     standard error leaves out x_min's own uncertainty);
 *   - a uniform bulk below a Pareto tail from 1: x_min found near 1;
 *   - x_min's choice against a brute-force scan written here (every
 *     distinct candidate, its alpha and its KS distance with pow): the
 *     same x_min, or a tie in D; alpha to 1e-12;
 *   - Marchenko-Pastur: the median against a Monte Carlo of a 1200 x 600
 *     Gaussian matrix's eigenvalues (LAPACK), the bulk of a Gaussian matrix
 *     fitted (s^2 within 3%, no more than 2 spikes), 3 planted spikes
 *     found; the density integrating to 1;
 *   - esdfit_matrix: lambda = sigma^2 / N, the log norms, alpha weighted;
 *   - esdfit_warnings at their edges (a tail of 49 and 50, alpha 2 and 6
 *     in the range, a hair outside not) and every label's text.
 */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/esdfit.h"
#include "../../lib/base/rng.h"
#include "tap.h"

static int cmp_asc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the fit by brute force: every distinct value but the largest */
static void brute(const double *x0, int64_t n, double *xmin, double *alpha, double *D)
{
	double *x = malloc((size_t)n * sizeof *x);

	memcpy(x, x0, (size_t)n * sizeof *x);
	qsort(x, (size_t)n, sizeof *x, cmp_asc);
	*D = INFINITY;
	for (int64_t i = 0; i < n; i++) {
		double s = 0, a, d;
		if ((i > 0 && x[i] == x[i - 1]) || x[i] == x[n - 1])
			continue;
		for (int64_t j = i; j < n; j++)
			s += log(x[j] / x[i]);
		a = 1 + (double)(n - i) / s;
		d = esdfit_ks(x, n, i, a);
		if (d < *D) {
			*D = d;
			*xmin = x[i];
			*alpha = a;
		}
	}
	free(x);
}

static void test_pareto(void)
{
	const double alphas[] = {1.5, 2.5, 4};
	enum { SEEDS = 100, NS = 2000 };
	double *x = malloc(NS * sizeof *x);

	for (int a = 0; a < 3; a++) {
		int within1 = 0, within2 = 0, within4 = 0;
		for (int s = 0; s < SEEDS; s++) {
			struct sw_rng r;
			struct esdfit_powerlaw pl;
			struct sw_err err;
			rng_seed(&r, 100 * (uint64_t)a + (uint64_t)s);
			for (int i = 0; i < NS; i++)
				x[i] = pow(1 - rng_uniform(&r), -1 / (alphas[a] - 1));
			if (esdfit_powerlaw(x, NS, &pl, &err))
				continue;
			within1 += fabs(pl.alpha - alphas[a]) <= pl.alpha_se;
			within2 += fabs(pl.alpha - alphas[a]) <= 2 * pl.alpha_se;
			within4 += fabs(pl.alpha - alphas[a]) <= 4 * pl.alpha_se;
		}
		ok(within1 >= 0.5 * SEEDS && within2 >= 0.85 * SEEDS && within4 == SEEDS,
		   "Pareto alpha %.1f: within 1 s.e. for %d of %d seeds, 2 for %d, 4 for %d", alphas[a], within1,
		   SEEDS, within2, within4);
	}
	free(x);
}

static void test_mixture(void)
{
	enum { BULK = 3000, TAIL = 1000 };
	double *x = malloc((BULK + TAIL) * sizeof *x);
	struct esdfit_powerlaw pl;
	struct sw_rng r;
	struct sw_err err;

	rng_seed(&r, 7);
	for (int i = 0; i < BULK; i++)
		x[i] = 0.1 + 0.9 * rng_uniform(&r);
	for (int i = 0; i < TAIL; i++)
		x[BULK + i] = pow(1 - rng_uniform(&r), -1 / 2.0);     /* alpha 3 */
	int rc = esdfit_powerlaw(x, BULK + TAIL, &pl, &err);

	ok(!rc && pl.xmin > 0.8 && pl.xmin < 1.5 &&
	   fabs(pl.alpha - 3) <= 3 * pl.alpha_se,
	   "a uniform bulk below a tail from 1: x_min %.4g, alpha %.4g +- %.3g, %lld in the tail",
	   pl.xmin, pl.alpha, pl.alpha_se, (long long)pl.tail);
	free(x);
}

static void test_brute(void)
{
	int same = 1, cases = 0;

	for (int s = 0; s < 30; s++) {
		struct sw_rng r;
		struct esdfit_powerlaw pl;
		struct sw_err err;
		int n = 20 + s * 37;
		double *x = malloc((size_t)n * sizeof *x), bx = 0, ba = 0, bd = 0;
		rng_seed(&r, 1000 + (uint64_t)s);
		for (int i = 0; i < n; i++) {
			/* log-normal bulks and Pareto tails; ties in every third set */
			x[i] = rng_uniform(&r) < 0.7 ? exp(rng_normal(&r)) : 3 * pow(1 - rng_uniform(&r), -0.6);
			if (s % 3 == 0)
				x[i] = round(x[i] * 4) / 4 + 0.25;
		}
		brute(x, n, &bx, &ba, &bd);
		int rc = esdfit_powerlaw(x, n, &pl, &err);
		if (rc ||
		    !((pl.xmin == bx && fabs(pl.alpha - ba) <= 1e-12 * ba) || fabs(pl.D - bd) <= 1e-12)) {
			diag("set %d: ours x_min %.17g alpha %.17g D %.17g; brute force %.17g %.17g %.17g", s,
			     pl.xmin, pl.alpha, pl.D, bx, ba, bd);
			same = 0;
		}
		same &= pl.tail >= 2;
		cases++;
		free(x);
	}
	ok(same, "x_min, alpha and D as a brute-force scan finds them (%d sets of 20 to 1093, ties in a third)",
	   cases);
	{
		double one[3] = {2, 2, 2};
		struct esdfit_powerlaw pl;
		struct sw_err err;
		int rc = esdfit_powerlaw(one, 3, &pl, &err);
		ok(rc == SW_EDATA, "one distinct value: nothing to fit: %s", err.msg);
	}
}

/* eigenvalues of W^T W / N for W (N x M) Gaussian plus planted spikes */
static double *gauss_evals(int N, int M, double s2, int spikes, uint64_t seed)
{
	double *w = malloc((size_t)N * M * sizeof *w), *g = calloc((size_t)M * M, sizeof *g);
	double *ev = malloc((size_t)M * sizeof *ev);
	struct sw_rng r;

	rng_seed(&r, seed);
	for (size_t i = 0; i < (size_t)N * M; i++)
		w[i] = sqrt(s2) * rng_normal(&r);
	/* spikes: column k plus 4 s times the +-1 pattern of bit k of the
	 * row (orthogonal patterns: rank `spikes`), eigenvalues near 16 s^2,
	 * far above the edge */
	for (int k = 0; k < spikes; k++)
		for (int i = 0; i < N; i++)
			w[(size_t)i * M + k] += 4 * sqrt(s2) * ((i >> k) & 1 ? 1 : -1);
	for (int i = 0; i < N; i++)
		for (int a = 0; a < M; a++)
			for (int b = a; b < M; b++)
				g[(size_t)a * M + b] += w[(size_t)i * M + a] * w[(size_t)i * M + b] / N;
	LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', M, g, M, ev);
	free(w);
	free(g);
	return ev;
}

static void test_mp(void)
{
	struct esdfit_mp mp;
	struct sw_err err;
	double *ev = gauss_evals(1200, 600, 1, 0, 3), med = 0, area = 0, a, b;
	int rc;

	/* the median of 1000 eigenvalues against the quadrature (y = 1/2) */
	qsort(ev, 600, sizeof *ev, cmp_asc);
	med = (ev[299] + ev[300]) / 2;
	ok(fabs(esdfit_mp_median(0.5) - med) < 0.02 * med,
	   "MP median, y = 1/2: %.5f by quadrature, %.5f from a 1200 x 600 Gaussian matrix",
	   esdfit_mp_median(0.5), med);
	a = (1 - sqrt(0.5)) * (1 - sqrt(0.5));
	b = (1 + sqrt(0.5)) * (1 + sqrt(0.5));
	for (int i = 0; i < 100000; i++) {
		double x0 = a + (b - a) * i / 100000, x1 = a + (b - a) * (i + 1) / 100000;
		area += (x1 - x0) * esdfit_mp_density((x0 + x1) / 2, 1, 0.5);
	}
	ok(fabs(area - 1) < 1e-4, "MP density, y = 1/2, integrates to 1 (%.6f)", area);
	free(ev);

	ev = gauss_evals(600, 300, 2.5, 0, 5);
	rc = esdfit_mp(ev, 300, 0.5, &mp, &err);
	ok(!rc && fabs(mp.sigma2 - 2.5) < 0.03 * 2.5 && mp.spikes <= 2,
	   "a Gaussian matrix's bulk: s^2 %.4f (2.5), edge %.4f, %lld spikes", mp.sigma2, mp.edge,
	   (long long)mp.spikes);
	free(ev);
	ev = gauss_evals(600, 300, 2.5, 3, 5);
	rc = esdfit_mp(ev, 300, 0.5, &mp, &err);
	ok(!rc && fabs(mp.sigma2 - 2.5) < 0.03 * 2.5 && mp.spikes == 3,
	   "three planted spikes: %lld above the edge, s^2 %.4f", (long long)mp.spikes, mp.sigma2);
	free(ev);
}

static void test_matrix(void)
{
	/* singular values of a 10 x 40 matrix: N = 40 */
	double s[10], lam[10], sum = 0;
	struct esdfit_result r = {0};
	struct sw_err err;

	for (int i = 0; i < 10; i++) {
		s[i] = 3.0 / (i + 1);
		sum += s[i] * s[i];     /* ||W||_F^2: WeightWatcher's log_norm has no 1/N */
	}
	int rc = esdfit_matrix(s, 10, 10, 40, lam, &r, &err);

	ok(!rc && r.count == 10 && lam[0] == 9.0 / 40 &&
	   lam[9] == 0.09 / 40 && fabs(r.lambda_max - 9.0 / 40) < 1e-15 &&
	   fabs(r.log_spectral_norm - log10(9.0)) < 1e-12 && fabs(r.log_norm - log10(sum)) < 1e-12 &&
	   fabs(r.alpha_weighted - r.pl.alpha * log10(9.0)) < 1e-12,
	   "esdfit_matrix: lambda = sigma^2 / N; log norms and alpha weighted of sigma^2, WeightWatcher's scale (alpha %.4g)",
	   r.pl.alpha);
}

static void test_warnings(void)
{
	struct esdfit_powerlaw pl = {3.0, 0, 1, 0, 50};
	int good = 1;

	good &= esdfit_warnings(&pl) == 0 && !strcmp(esdfit_warn_text(0), "");
	pl.tail = 49;
	good &= esdfit_warnings(&pl) == ESDFIT_SHORT_TAIL;
	pl.tail = 50;
	pl.alpha = 2.0;
	good &= esdfit_warnings(&pl) == 0;
	pl.alpha = nextafter(2.0, 0);
	good &= esdfit_warnings(&pl) == ESDFIT_OVER_TRAINED;
	pl.alpha = 6.0;
	good &= esdfit_warnings(&pl) == 0;
	pl.alpha = nextafter(6.0, 7);
	good &= esdfit_warnings(&pl) == ESDFIT_UNDER_TRAINED;
	pl.tail = 8;
	good &= !strcmp(esdfit_warn_text(esdfit_warnings(&pl)), "short-tail,under-trained");
	pl.alpha = 1.5;
	good &= !strcmp(esdfit_warn_text(esdfit_warnings(&pl)), "short-tail,over-trained");
	pl.tail = 100;
	good &= !strcmp(esdfit_warn_text(esdfit_warnings(&pl)), "over-trained");
	ok(good, "esdfit_warnings: tail < 50 short-tail, alpha < 2 over-trained, alpha > 6 under-trained, "
	   "the edges in range; the labels' text");
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* esdfit_shuffle: a permutation (the sorted values equal, bit for bit),
 * the same for the same seed, another for another; and no position left
 * more often than chance: of 4096 distinct values, few stay in place (the
 * expected number of fixed points of a uniform permutation is 1) */
static void test_shuffle(void)
{
	enum { N = 4096 };
	float *w = malloc(N * sizeof *w), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
	int same = 1, fixed = 0, differ = 0;

	for (int i = 0; i < N; i++)
		w[i] = a[i] = b[i] = (float)i * 0.25f - 100;
	esdfit_shuffle(a, N, 42);
	esdfit_shuffle(b, N, 42);
	for (int i = 0; i < N; i++) {
		same &= a[i] == b[i];
		fixed += a[i] == w[i];
	}
	ok(same && fixed < 8, "shuffle: the seed reproduces it bit for bit; %d of %d in place", fixed, N);
	memcpy(b, w, N * sizeof *b);
	esdfit_shuffle(b, N, 43);
	for (int i = 0; i < N; i++)
		differ += a[i] != b[i];
	qsort(a, N, sizeof *a, cmp_float);
	ok(differ > N / 2 && !memcmp(a, w, N * sizeof *a),
	   "shuffle: another seed, another order (%d of %d differ); the multiset kept exactly", differ, N);
	free(w);
	free(a);
	free(b);
}

/* esdfit_randomized on a known spectrum: a Gaussian matrix's (no trap),
 * then the same with two eigenvalues far above the edge (two traps);
 * WeightWatcher's margin lies between the edge and the outliers */
static void test_randomized(void)
{
	double *ev = gauss_evals(600, 300, 2.5, 0, 7), *s = malloc(300 * sizeof *s);
	struct esdfit_random rf;
	struct sw_err err;
	int rc;

	for (int i = 0; i < 300; i++)
		s[i] = sqrt(ev[i] * 600);
	rc = esdfit_randomized(s, 300, 600, 300, 2 * ev[0], &rf, &err);
	ok(!rc && rf.traps == 0 && rf.trap_edge > rf.mp_edge && fabs(rf.mp_edge / (2.5 * 2.9142) - 1) < 0.03,
	   "randomized, Gaussian: no trap, edge %.4f (2.5 (1 + sqrt 1/2)^2 = %.4f), margin to %.4f",
	   rf.mp_edge, 2.5 * 2.9142, rf.trap_edge);
	s[0] = sqrt(40.0 * 600);
	s[1] = sqrt(30.0 * 600);
	rc = esdfit_randomized(s, 300, 600, 300, 80, &rf, &err);
	ok(!rc && rf.traps == 2 && rf.lambda_max == 40 && fabs(rf.softrank - 0.5) < 1e-15,
	   "randomized, two outliers: %lld traps, lambda_max %.4g, softrank %.4g", (long long)rf.traps,
	   rf.lambda_max, rf.softrank);
	free(ev);
	free(s);
}

int main(void)
{
	test_pareto();
	test_mixture();
	test_brute();
	test_mp();
	test_matrix();
	test_warnings();
	test_shuffle();
	test_randomized();
	return tap_done();
}
