/*
 * Unit tests of lib/analysis/spectrum.c and lib/analysis/fit.c (powerfit_fit). Spectra are checked
 * against matrices whose singular values are known by construction,
 * W = U diag(s) V^T with random orthogonal factors (lib/analysis/synth.c), and
 * against LAPACK's dgesdd in double on the same float32 values (the
 * "double-precision reference" of the accuracy claim); --top against the
 * full spectrum; the summary, histogram, equilibrium scale and fit against
 * values computed by hand or by an independent LAPACK solve.
 */
#include <cblas.h>
#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/fit.h"
#include "../../lib/analysis/linalg.h"
#include "../../lib/analysis/spectrum.h"
#include "../../lib/analysis/synth.h"
#include "tap.h"

static struct sw_rng rng;

/* A float32 rows x cols matrix with singular values s (min(rows, cols)). */
static float *known(int64_t rows, int64_t cols, const double *s)
{
	double *w = malloc((size_t)(rows * cols) * sizeof *w);
	float *f = malloc((size_t)(rows * cols) * sizeof *f);
	struct sw_err err = {0, ""};

	if (synth_known_spectrum(&rng, rows, cols, s, w, &err)) {
		ok(0, "synth: %s", err.msg);
		exit(1);
	}
	for (int64_t i = 0; i < rows * cols; i++)
		f[i] = (float)w[i];
	free(w);
	return f;
}

/* Largest |got_i - want_i| / max(|want_i|, floor) over n values. */
static double max_rel(const double *got, const double *want, int64_t n, double floor)
{
	double e = 0;

	for (int64_t i = 0; i < n; i++)
		e = fmax(e, fabs(got[i] - want[i]) / fmax(fabs(want[i]), floor));
	return e;
}

/*
 * The full spectrum of a matrix built with singular values s: against the
 * construction (float32 rounding moves each sigma by at most ~1e-7
 * sigma_max: tolerance 1e-6 sigma_max) and, for every sigma_i >= 1e-4
 * sigma_max, within 1e-5 relative of dgesdd in double on the same floats.
 */
static void check_full(int64_t rows, int64_t cols, const double *s, const char *what)
{
	int64_t k = rows < cols ? rows : cols;
	float *f = known(rows, cols, s);
	double *got = malloc((size_t)k * sizeof *got), *ref = malloc((size_t)k * sizeof *ref);
	double *want = malloc((size_t)k * sizeof *want), frob, want_frob = 0, e_ref = 0;
	struct spec_view v = spectrum_view(f, rows, cols);
	struct sw_err err = {0, ""};

	memcpy(want, s, (size_t)k * sizeof *want);
	for (int64_t i = 0; i < k; i++)        /* descending: s is given so */
		want_frob += want[i] * want[i];
	if (spectrum_full(&v, got, &frob, &err) || linalg_singular_values_dense(f, rows, cols, NULL, ref, &err)) {
		ok(0, "%s: %s", what, err.msg);
		goto out;
	}
	for (int64_t i = 0; i < k; i++)
		if (ref[i] >= 1e-4 * ref[0])
			e_ref = fmax(e_ref, fabs(got[i] - ref[i]) / ref[i]);
	ok(max_rel(got, want, k, want[0]) <= 1e-6 && close_rel(frob, want_frob, 1e-6),
	   "%s (%lldx%lld): the construction's spectrum within 1e-6 sigma_max (%.2g)", what,
	   (long long)rows, (long long)cols, max_rel(got, want, k, want[0]));
	ok(e_ref <= 1e-5, "%s: sigma_i >= 1e-4 sigma_max within 1e-5 of dgesdd in double (%.2g)",
	   what, e_ref);
out:
	free(f);
	free(got);
	free(ref);
	free(want);
}

/* --top k against the full spectrum of the same matrix. */
static void check_top(int64_t rows, int64_t cols, const double *s, int64_t k, const char *what)
{
	int64_t n = rows < cols ? rows : cols;
	float *f = known(rows, cols, s);
	double *full = malloc((size_t)n * sizeof *full), *top = malloc((size_t)k * sizeof *top);
	struct spec_view v = spectrum_view(f, rows, cols);
	struct spectrum_top_info info;
	struct sw_err err = {0, ""};
	double frob, frob_full;

	if (spectrum_full(&v, full, &frob_full, &err) ||
	    spectrum_top(&v, k, SPECTRUM_TOP_REL_TOL, top, &frob, &info, &err)) {
		ok(0, "%s: %s", what, err.msg);
	} else {
		double e = max_rel(top, full, k, 0);
		ok(e <= 1e-5 && info.rel_bound <= 5e-6 && !strcmp(info.method, "lanczos") &&
		   close_rel(frob, frob_full, 1e-12),
		   "%s: top %lld of %lldx%lld by %s within 1e-5 of the full spectrum (%.2g, bound %.2g, %d steps of %d)",
		   what, (long long)k, (long long)rows, (long long)cols, info.method, e,
		   info.rel_bound, info.steps, info.block);
	}
	free(f);
	free(full);
	free(top);
}

static void test_full(void)
{
	double s[1000];
	struct sw_err err = {0, ""};

	for (int i = 0; i < 300; i++)
		s[i] = 5.0 * pow(0.97, i);
	check_full(200, 200, s, "square, decaying");
	check_full(500, 60, s, "tall");
	check_full(60, 500, s, "wide");
	/* log-spaced from 1 down to 1e-6: the accuracy claim's hard case,
	 * the Gram matrix squares the condition number */
	for (int i = 0; i < 400; i++)
		s[i] = pow(10.0, -6.0 * i / 399.0);
	check_full(400, 400, s, "sigma from 1 to 1e-6, square");
	check_full(900, 300, s, "sigma from 1 to 1e-6, tall");
	/* the top value three times */
	for (int i = 0; i < 100; i++)
		s[i] = i < 3 ? 2.0 : 1.9 * pow(0.98, i);
	check_full(150, 100, s, "triple top singular value");

	/* rank 5 of 80: the zero values sit at the rounding floor */
	{
		double got[80];
		float *f;
		struct spec_view v;
		int rc;
		for (int i = 0; i < 80; i++)
			s[i] = i < 5 ? 3.0 - 0.4 * i : 0.0;
		f = known(100, 80, s);
		v = spectrum_view(f, 100, 80);
		rc = spectrum_full(&v, got, NULL, &err);
		ok(rc == 0 && max_rel(got, s, 5, 0) <= 1e-6,
		   "rank 5 of 80: the five values (%.10g ... %.10g)", got[0], got[4]);
		ok(got[5] <= 1e-6 * got[0], "rank 5 of 80: the rest below 1e-6 sigma_max (%.2g)", got[5]);
		free(f);
	}

	/* vectors as matrices: sigma = ||w|| */
	{
		float w[700];
		double nrm = 0, got;
		struct spec_view row = spectrum_view(w, 1, 700), col = spectrum_view(w, 700, 1);
		for (int i = 0; i < 700; i++) {
			w[i] = (float)rng_normal(&rng);
			nrm += (double)w[i] * w[i];
		}
		ok(spectrum_full(&row, &got, NULL, &err) == 0 && close_rel(got, sqrt(nrm), 1e-14),
		   "1 x n: sigma = ||row||");
		ok(spectrum_full(&col, &got, NULL, &err) == 0 && close_rel(got, sqrt(nrm), 1e-14),
		   "n x 1: sigma = ||col||");
	}

	/* zero and empty matrices */
	{
		float *z = calloc(30 * 20, sizeof *z);
		double got[20], frob = 1;
		struct spec_view v = spectrum_view(z, 30, 20), e = spectrum_view(z, 0, 20);
		int zero = spectrum_full(&v, got, &frob, &err) == 0 && frob == 0;
		for (int i = 0; i < 20; i++)
			zero = zero && got[i] == 0;
		ok(zero, "zero matrix: every sigma 0");
		ok(spectrum_full(&e, got, &frob, &err) == 0 && frob == 0, "0 x 20: no values, no error");
		free(z);
	}

	/* NaN and Inf: refused with a count, by both methods */
	{
		float *f;
		double got[200];
		struct spec_view v;
		struct spectrum_top_info info;
		int rc;
		for (int i = 0; i < 200; i++)
			s[i] = 1.0 / (1 + i);
		f = known(300, 200, s);
		f[7 * 200 + 3] = NAN;
		f[250 * 200 + 199] = -INFINITY;
		v = spectrum_view(f, 300, 200);
		rc = spectrum_full(&v, got, NULL, &err);
		ok(rc == SW_EDATA &&
		   !strcmp(err.msg, "2 of 60000 values are NaN or Inf"), "full: NaN and -Inf refused: %s", err.msg);
		rc = spectrum_top(&v, 3, 1e-5, got, NULL, &info, &err);
		ok(rc == SW_EDATA &&
		   !strcmp(err.msg, "2 of 60000 values are NaN or Inf"), "top: NaN and -Inf refused: %s", err.msg);
		free(f);
	}
}

/* The float32 search and its check in double: accepted at the check when
 * the tolerance is above float32's floor; below it, Lanczos goes on in
 * double and still meets the tolerance. */
static void test_two_phases(void)
{
	double s[400], full[400], got[2];
	float *f;
	struct spec_view v;
	struct spectrum_top_info info;
	struct sw_err err = {0, ""};
	int rc;

	for (int i = 0; i < 400; i++)
		s[i] = 1.0 + 1.0 / (1 + i);
	f = known(600, 400, s);
	v = spectrum_view(f, 600, 400);
	rc = spectrum_full(&v, full, NULL, &err) || spectrum_top(&v, 2, 1e-5, got, NULL, &info, &err);
	ok(!rc && info.single_steps > 0 && info.steps == info.single_steps + 1 &&
	   max_rel(got, full, 2, 0) <= 5e-6,
	   "to 1e-5: %d steps in float32, then the check in double (error %.2g, bound %.2g)",
	   info.single_steps, max_rel(got, full, 2, 0), info.rel_bound);
	rc = spectrum_top(&v, 2, 1e-8, got, NULL, &info, &err);
	ok(!rc && info.single_steps > 0 && info.steps > info.single_steps + 1 &&
	   max_rel(got, full, 2, 0) <= 5e-9 && info.rel_bound <= 5e-9,
	   "to 1e-8, below float32's floor: %d steps in float32, %d in double (error %.2g, bound %.2g)",
	   info.single_steps, info.steps - info.single_steps, max_rel(got, full, 2, 0), info.rel_bound);
	free(f);
}

/* Heads as strided views: the same values as a contiguous copy. */
static void test_heads(void)
{
	int64_t nh = 4, hd = 8, d = 24;
	double s[32], a[24], b[24];
	float *q, *o, *copy = malloc(32 * 24 * sizeof *copy);
	struct sw_err err = {0, ""};
	double e = 0;

	for (int i = 0; i < 32; i++)
		s[i] = 1.0 + 0.1 * i;
	q = known(nh * hd, d, s);          /* q: [heads*hd, d], heads by rows */
	o = known(d, nh * hd, s);          /* o: [d, heads*hd], heads by columns */
	for (int64_t h = 0; h < nh; h++) {
		struct spec_view v = spectrum_head_view(q, nh * hd, d, 0, h, hd), c;
		memcpy(copy, q + h * hd * d, (size_t)(hd * d) * sizeof *copy);
		c = spectrum_view(copy, hd, d);
		spectrum_full(&v, a, NULL, &err);
		spectrum_full(&c, b, NULL, &err);
		e = fmax(e, max_rel(a, b, hd, 0));
		v = spectrum_head_view(o, d, nh * hd, 1, h, hd);
		for (int64_t i = 0; i < d; i++)
			memcpy(copy + i * hd, o + i * nh * hd + h * hd, (size_t)hd * sizeof *copy);
		c = spectrum_view(copy, d, hd);
		spectrum_full(&v, a, NULL, &err);
		spectrum_full(&c, b, NULL, &err);
		e = fmax(e, max_rel(a, b, hd, 0));
	}
	ok(e <= 1e-12, "head slices (rows of q, columns of o) = contiguous copies (%.2g)", e);
	free(q);
	free(o);
	free(copy);
}

static void test_top(void)
{
	double s[1000];
	struct sw_err err = {0, ""};

	for (int i = 0; i < 600; i++)
		s[i] = 3.0 * pow(0.99, i);
	check_top(600, 300, s, 1, "tall, decaying");
	check_top(300, 900, s, 1, "wide, decaying");
	check_top(600, 300, s, 10, "tall, decaying");
	check_top(300, 900, s, 16, "wide, decaying");
	check_top(400, 400, s, 20, "square, block 16 and restarts");
	/* the top value three times: the block of 5 finds all three copies */
	for (int i = 0; i < 400; i++)
		s[i] = i < 3 ? 2.0 : 1.8 * pow(0.995, i);
	check_top(500, 400, s, 5, "triple top value");
	/* the fifth and sixth equal, the rest distinct */
	for (int i = 0; i < 400; i++)
		s[i] = i == 5 ? 1.5 * pow(0.98, 4) : 1.5 * pow(0.98, i);
	check_top(500, 400, s, 6, "a double value at positions 5 and 6");
	/* nearly flat: the hard case for Krylov methods */
	for (int i = 0; i < 400; i++)
		s[i] = 1.0 + 1e-2 * (400 - i) / 400.0;
	check_top(400, 400, s, 2, "nearly flat spectrum");

	/* rank 3, asked for 6: the zeros come out at the rounding floor */
	{
		double got[6];
		struct spectrum_top_info info;
		float *f;
		struct spec_view v;
		for (int i = 0; i < 300; i++)
			s[i] = i < 3 ? 2.0 - 0.5 * i : 0.0;
		f = known(300, 300, s);
		v = spectrum_view(f, 300, 300);
		int rc = spectrum_top(&v, 6, 1e-5, got, NULL, &info, &err);
		ok(rc == 0 && max_rel(got, s, 3, 0) <= 1e-5 &&
		   got[3] <= 1e-6 * got[0] && got[5] <= 1e-6 * got[0],
		   "rank 3, top 6: three values and three zeros (%.9g %.9g %.9g %.2g)", got[0], got[1], got[2], got[3]);
		free(f);
	}

	/* the zero matrix: every Krylov vector is null, the random refills
	 * keep the basis growing, and the answer is exact */
	{
		float *z = calloc(300 * 200, sizeof *z);
		double got[3] = {1, 1, 1};
		struct spectrum_top_info info;
		struct spec_view v = spectrum_view(z, 300, 200);
		int rc = spectrum_top(&v, 3, 1e-5, got, NULL, &info, &err);
		ok(rc == 0 && got[0] == 0 && got[2] == 0 && !strcmp(info.method, "lanczos") && info.steps == 2,
		   "zero 300 x 200, top 3: zeros after one step and its check in double (%d)",
		   info.steps);
		free(z);
	}

	/* small problems and k near n go to the full method */
	{
		double got[40], full[40];
		struct spectrum_top_info info;
		float *f;
		struct spec_view v;
		for (int i = 0; i < 40; i++)
			s[i] = 1.0 / (1 + i);
		f = known(50, 40, s);
		v = spectrum_view(f, 50, 40);
		spectrum_full(&v, full, NULL, &err);
		ok(spectrum_top(&v, 3, 1e-5, got, NULL, &info, &err) == 0 && !strcmp(info.method, "full") &&
		   max_rel(got, full, 3, 0) == 0, "50 x 40: top 3 by the full method");
		ok(spectrum_top(&v, 99, 1e-5, got, NULL, &info, &err) == 0 && max_rel(got, full, 40, 0) == 0,
		   "k above min(rows, cols): cut to 40");
		free(f);
	}
}

/*
 * Matrices far from 1 in size (issue 53, H): float32 holds 2^-126 to
 * 2^128, and the search's float32 products of W^T W p take |W|^2 (one
 * entry of 1e20: 1e40 overflowed into NaN in the Lanczos matrix; entries
 * of 1e-30: 1e-60 underflowed to zero). W times 2^k is exact in float32
 * (no value leaves the normal range; checked), so its sigma is exactly
 * 2^k times W's; the scaling by powers of two is exact too, and the run
 * is the same run: the same steps in float32 and in double, the values
 * within 1e-12 relative of 2^k times the unscaled ones (LAPACK's
 * tridiagonal solver may round a scaled problem differently: 1e-12 is
 * four orders above double's rounding, far below the 1e-5 claimed).
 */
static void check_scaled(const float *f, int64_t rows, int64_t cols, int e, const float *gain,
			 const char *what)
{
	int64_t n = rows * cols;
	float *g = calloc((size_t)n, sizeof *g);
	double top[3], ref[3], f2 = ldexp(1.0, e);
	struct spectrum_top_info info, rinfo;
	struct sigma_info a, b, ra, rb;
	struct spec_view v = spectrum_view(g, rows, cols), u = spectrum_view(f, rows, cols);
	struct sw_err err = {0, ""};
	int exact = 1, rc;

	for (int64_t i = 0; i < n; i++) {
		g[i] = (float)(f[i] * f2);
		exact &= (double)g[i] / f2 == f[i] && (g[i] == 0 || fabsf(g[i]) >= 0x1p-126f);
	}
	rc = spectrum_top(&v, 3, SPECTRUM_TOP_REL_TOL, top, NULL, &info, &err) ||
	     spectrum_top(&u, 3, SPECTRUM_TOP_REL_TOL, ref, NULL, &rinfo, &err);
	ok(!rc && exact && max_rel(top, (double[]){ref[0] * f2, ref[1] * f2, ref[2] * f2}, 3, 0) <= 1e-12 &&
	   info.steps == rinfo.steps && info.single_steps == rinfo.single_steps && info.single_steps > 0,
	   "%s, 2^%d: top 3 = 2^%d x the unscaled (%.3g), %d steps, %d in float32 (unscaled %d, %d)",
	   what, e, e, rc ? NAN : max_rel(top, (double[]){ref[0] * f2, ref[1] * f2, ref[2] * f2}, 3, 0),
	   info.steps, info.single_steps, rinfo.steps, rinfo.single_steps);
	/* sw-norms' pair, the output head and the head with a gain folded in */
	v.col_scale = u.col_scale = gain;
	rc = spectrum_sigma_max_pair(&v, 1e-6, -1, -1, &a, &b, &err) ||
	     spectrum_sigma_max_pair(&u, 1e-6, -1, -1, &ra, &rb, &err);
	ok(!rc && close_rel(a.sigma, ra.sigma * f2, 1e-12) && close_rel(b.sigma, rb.sigma * f2, 1e-12) &&
	   a.iterations == ra.iterations && b.iterations == rb.iterations,
	   "%s, 2^%d: sigma_max of W and of W diag(g) (the pair) = 2^%d x the unscaled (%.9g, %.9g)",
	   what, e, e, a.sigma / f2, b.sigma / f2);
	free(g);
}

static void test_far_scales(void)
{
	int64_t m = 256, c = 256, n = m * c;
	double s[256], full[256], top[1];
	float *f, *g = calloc((size_t)n, sizeof *g), gain[256];
	struct spectrum_top_info info;
	struct sigma_info sig;
	struct spec_view v = spectrum_view(g, m, c);
	struct sw_err err = {0, ""};
	int rc;

	for (int i = 0; i < 256; i++) {
		s[i] = 2.0 * pow(0.98, i);
		gain[i] = (float)(0.5 + rng_uniform(&rng));
	}
	f = known(m, c, s);
	/* 2^67 ~ 1.5e20 (entries to ~1e19, the top one past 1e19); 2^-83 ~
	 * 1e-25 (sigma^2 ~ 1e-50: zero in float32); 2^-100 ~ 8e-31, entries
	 * near 1e-31 */
	check_scaled(f, m, c, 67, gain, "256 x 256");
	check_scaled(f, m, c, -83, gain, "256 x 256");
	check_scaled(f, m, c, -100, gain, "256 x 256");
	check_scaled(f, m, c, 120, gain, "256 x 256");

	/* one entry of 1e20 among values of about 0.1, and the same among
	 * values of about 1e-21 (1e20 beside 1e-20): sigma_max against the
	 * dense spectrum in double of the same floats */
	for (int mix = 0; mix < 2; mix++) {
		for (int64_t i = 0; i < n; i++)
			g[i] = mix ? (float)(f[i] * 1e-20) : f[i];
		g[3 * c + 5] = 1e20f;
		rc = spectrum_full(&v, full, NULL, &err) ||
		     spectrum_top(&v, 1, SPECTRUM_TOP_REL_TOL, top, NULL, &info, &err) ||
		     spectrum_sigma_max(&v, 1e-6, NULL, -1, NULL, &sig, &err);
		ok(!rc && !strcmp(info.method, "lanczos") && close_rel(top[0], full[0], 1e-5) &&
		   close_rel(sig.sigma, full[0], 1e-6) && info.single_steps > 0,
		   "one entry of 1e20 among %s: sigma_max %.9g = the dense %.9g (top 1 and sigma_max)",
		   mix ? "1e-21s" : "0.1s", rc ? NAN : top[0], full[0]);
	}
	/* NaN and Inf are still refused */
	memcpy(g, f, (size_t)n * sizeof *g);
	g[7] = INFINITY;
	ok(spectrum_top(&v, 1, SPECTRUM_TOP_REL_TOL, top, NULL, &info, &err) == SW_EDATA &&
	   strstr(err.msg, "1 of 65536 values are NaN or Inf"), "an Inf: refused (%s)", err.msg);
	g[7] = NAN;
	ok(spectrum_sigma_max(&v, 1e-6, NULL, -1, NULL, &sig, &err) == SW_EDATA,
	   "a NaN: refused (%s)", err.msg);
	free(f);
	free(g);
}

static void test_summary_hist(void)
{
	double s[] = {3, 2, 1}, frob_sq = 14;
	struct spectrum_summary sm;
	struct spectrum_bin b[3];
	double h4[] = {1000, 100, 10, 1, 0}, one[] = {2, 2};
	double ent = -(0.5 * log(0.5) + log(1 / 3.0) / 3 + log(1 / 6.0) / 6);

	spectrum_summarize(s, 3, frob_sq, &sm);
	ok(sm.sigma_max == 3 && sm.sigma_min == 1 && sm.count == 3 && close_rel(sm.condition, 3, 1e-15),
	   "summary: sigma_max, sigma_min, condition, count");
	ok(close_rel(sm.stable_rank, 14 / 9.0, 1e-15) && close_rel(sm.frobenius, sqrt(14), 1e-15),
	   "summary: stable rank ||W||_F^2 / sigma_max^2 = 14/9");
	ok(close_rel(sm.effective_rank, exp(ent), 1e-14),
	   "summary: effective rank exp(H(1/2, 1/3, 1/6)) = %.9g", sm.effective_rank);
	s[2] = 0;
	spectrum_summarize(s, 3, 13, &sm);
	ok(isinf(sm.condition) && close_rel(sm.effective_rank, exp(-(0.6 * log(0.6) + 0.4 * log(0.4))), 1e-14),
	   "summary: sigma_min 0 gives condition inf; zero values add no entropy");

	ok(spectrum_hist(h4, 5, 3, b) == 1, "hist: one zero value, in no bin");
	ok(close_rel(b[0].lo, 1, 1e-12) && close_rel(b[0].hi, 10, 1e-12) && close_rel(b[1].hi, 100, 1e-12) &&
	   b[2].hi == 1000, "hist: log-spaced edges 1, 10, 100, 1000");
	ok(b[0].count == 1 && b[1].count == 1 && b[2].count == 2,
	   "hist: a value on an edge goes up, the largest into the last bin (%lld %lld %lld)",
	   (long long)b[0].count, (long long)b[1].count, (long long)b[2].count);
	ok(close_rel(b[0].density, 1 / (5.0 * 9), 1e-12) && close_rel(b[2].density, 2 / (5.0 * 900), 1e-12),
	   "hist: density = count / (n (hi - lo))");
	ok(spectrum_hist(one, 2, 2, b) == 0 && close_rel(b[0].lo, 2 / 1.01, 1e-12) &&
	   close_rel(b[1].hi, 2 * 1.01, 1e-12) && b[0].count + b[1].count == 2,
	   "hist: one distinct value, the range sigma/1.01 .. sigma*1.01");
}

static void test_scale(void)
{
	struct sw_tensor_info t;
	struct sw_err err = {0, ""};
	double sc = 0;
	int rc;

	memset(&t, 0, sizeof t);
	strcpy(t.name, "model.layers.0.mlp.up_proj.weight");
	t.lr = 3e-3;
	t.wd = 0.1;
	t.wd_mode = SW_WD_COUPLED;
	rc = spectrum_equilibrium_scale(&t, &sc, &err);
	ok(rc == 0 && close_rel(sc, 0.17320508075688773, 1e-15),
	   "coupled: sqrt(3e-3 / 0.1) = 0.173205081 (%.12g)", sc);
	t.lr = 1e-3;
	t.wd = 1e-4;
	t.wd_mode = SW_WD_INDEPENDENT;
	ok(spectrum_equilibrium_scale(&t, &sc, &err) == 0 && close_rel(sc, 0.1, 1e-15),
	   "independent: 1e-3 / sqrt(1e-4) = 0.1");
	t.wd = 0;
	rc = spectrum_equilibrium_scale(&t, &sc, &err);
	ok(rc == SW_EDATA && strstr(err.msg, "wd = 0") &&
	   strstr(err.msg, t.name), "wd = 0: refused, the tensor named: %s", err.msg);
	t.wd = 0.1;
	t.wd_mode = SW_WD_NONE;
	rc = spectrum_equilibrium_scale(&t, &sc, &err);
	ok(rc == SW_EDATA && strstr(err.msg, "wd_mode is none"),
	   "wd_mode none: refused: %s", err.msg);
	t.wd_mode = SW_WD_COUPLED;
	t.lr = NAN;
	rc = spectrum_equilibrium_scale(&t, &sc, &err);
	ok(rc == SW_EDATA && strstr(err.msg, "no per-tensor lr") &&
	   isnan(sc), "lr unknown: refused: %s", err.msg);
}

/* The OLS fit against LAPACK's least squares (dgels) on the design matrix
 * [1, ln x1, ln x2], and standard errors from (X^T X)^-1 by dpotrf/dpotri. */
static void test_fit(void)
{
	enum { N = 45 };
	double y[N], x1[N], x2[N], X[N * 3], b[N], XtX[9], rss = 0, s2;
	struct powerfit pf;
	struct sw_err err = {0, ""};
	int n = 0, rc;

	/* an exact power law, exponents not the paper's: recovered exactly */
	for (int d = 0; d < 3; d++)
		for (int e = 0; e < 15; e++) {
			x1[n] = 0.01 * pow(1.5, e);
			x2[n] = 256 << d;
			y[n] = 0.7 * pow(x1[n], 0.9) * pow(x2[n], 0.6);
			n++;
		}
	ok(powerfit_fit(y, x1, x2, n, &pf, &err) == 0 && fabs(pf.a1 - 0.9) < 1e-12 &&
	   fabs(pf.a2 - 0.6) < 1e-12 && close_rel(pf.c, 0.7, 1e-12) && close_rel(pf.r2, 1, 1e-12),
	   "exact power law: exponents 0.9, 0.6, prefactor 0.7, R^2 1");
	/* with noise: the same numbers as an independent solve */
	for (int i = 0; i < n; i++)
		y[i] *= exp(0.05 * rng_normal(&rng));
	for (int i = 0; i < n; i++) {
		X[i * 3] = 1;
		X[i * 3 + 1] = log(x1[i]);
		X[i * 3 + 2] = log(x2[i]);
		b[i] = log(y[i]);
	}
	cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 3, 3, n, 1.0, X, 3, X, 3, 0.0, XtX, 3);
	if (LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', n, 3, 1, X, 3, b, 1) ||
	    LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', 3, XtX, 3) || LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', 3, XtX, 3)) {
		ok(0, "LAPACK reference failed");
		return;
	}
	for (int i = 3; i < n; i++)
		rss += b[i] * b[i];
	s2 = rss / (n - 3);
	rc = powerfit_fit(y, x1, x2, n, &pf, &err);
	ok(rc == 0 && close_rel(pf.a1, b[1], 1e-10) &&
	   close_rel(pf.a2, b[2], 1e-10) && close_rel(log(pf.c), b[0], 1e-10),
	   "noisy: exponents = dgels (%.6f, %.6f)", pf.a1, pf.a2);
	ok(close_rel(pf.se1, sqrt(s2 * XtX[4]), 1e-8) && close_rel(pf.se2, sqrt(s2 * XtX[8]), 1e-8),
	   "noisy: standard errors = sqrt(s^2 diag (X^T X)^-1) (%.4g, %.4g)", pf.se1, pf.se2);
	ok(pf.r2 > 0.9 && pf.r2 < 1 && fabs(pf.a1 - 0.9) < 4 * pf.se1 && fabs(pf.a2 - 0.6) < 4 * pf.se2,
	   "noisy: R^2 %.4f, exponents within 4 standard errors of the truth", pf.r2);

	/* one width: its exponent unknown, the other fitted */
	for (int i = 0; i < 15; i++)
		y[i] = 2 * pow(x1[i], 1.1) * pow(x2[i], 0.6);
	ok(powerfit_fit(y, x1, x2, 15, &pf, &err) == 0 && isnan(pf.a2) && isnan(pf.se2) &&
	   fabs(pf.a1 - 1.1) < 1e-12, "one width: exponent of the width NaN, the other 1.1");
	/* the scale moved with the width: collinear */
	for (int i = 0; i < 3; i++) {
		x2[i] = 256 << i;
		x1[i] = 0.1 * pow(x2[i], -0.75);
	}
	rc = powerfit_fit(y, x1, x2, 3, &pf, &err);
	ok(rc == SW_EDATA && strstr(err.msg, "vary together"),
	   "collinear regressors refused: %s", err.msg);
	ok(powerfit_fit(y, x1, NULL, 1, &pf, &err) == SW_EDATA, "one point refused");
	y[0] = -1;
	ok(powerfit_fit(y, x1, NULL, 3, &pf, &err) == SW_EDATA && strstr(err.msg, "positive"),
	   "a non-positive value refused");
}

int main(void)
{
	rng_seed(&rng, 20251017);
	test_full();
	test_heads();
	test_two_phases();
	test_top();
	test_far_scales();
	test_summary_hist();
	test_scale();
	test_fit();
	return tap_done();
}
