/*
 * Unit tests of lib/analysis/linalg.c, lib/analysis/norms.c and spectrum_sigma_max against matrices whose
 * singular values and row/column norms are known by construction:
 * W = U diag(s) V^T (lib/analysis/synth.c), and diag(r) Q with orthonormal rows.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/linalg.h"
#include "../../lib/analysis/norms.h"
#include "../../lib/analysis/spectrum.h"
#include "../../lib/analysis/synth.h"
#include "tap.h"

static float *to_float(const double *w, int64_t n)
{
	float *f = malloc((size_t)n * sizeof *f);
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)w[i];
	return f;
}

/* sigma_max of W diag(g) through the block Lanczos sw-norms uses */
static int sigma_max(const float *W, int64_t rows, int64_t cols, const float *g, double rel_tol,
		     struct sigma_info *info, struct sw_err *err)
{
	struct spec_view v = spectrum_view(W, rows, cols);

	v.col_scale = g;
	return spectrum_sigma_max(&v, rel_tol, NULL, -1, NULL, info, err);
}

/* sigma_max of a rows x cols matrix with singular values s (k = min). */
static void check_sigma(struct sw_rng *r, int64_t rows, int64_t cols, const double *s,
			double want, const char *what)
{
	double *w = malloc((size_t)(rows * cols) * sizeof *w);
	struct sigma_info info;
	struct sw_err err;
	float *f;

	if (synth_known_spectrum(r, rows, cols, s, w, &err)) {
		ok(0, "%s: synth: %s", what, err.msg);
		free(w);
		return;
	}
	f = to_float(w, rows * cols);
	if (sigma_max(f, rows, cols, NULL, 1e-6, &info, &err)) {
		ok(0, "%s: %s", what, err.msg);
	} else {
		ok(close_rel(info.sigma, want, 1e-6), "%s (%lldx%lld, %s, %d steps): sigma %.12g want %.12g",
		   what, (long long)rows, (long long)cols, info.method, info.iterations, info.sigma, want);
	}
	free(w);
	free(f);
}

int main(void)
{
	struct sw_rng r;
	struct sw_err err;
	double s[2000];

	rng_seed(&r, 42);

	/* a geometric spectrum, square and tall and wide (the wide path) */
	for (int i = 0; i < 200; i++)
		s[i] = 5.0 * pow(0.97, i);
	check_sigma(&r, 200, 200, s, 5.0, "square, decaying");
	check_sigma(&r, 2000, 64, s, 5.0, "tall");
	check_sigma(&r, 64, 700, s, 5.0, "wide");
	check_sigma(&r, 20, 30, s, 5.0, "small (LAPACK)");

	/* a flat spectrum, the hard case for Krylov methods: top gap 1e-3 */
	for (int i = 0; i < 300; i++)
		s[i] = 1.0 + 1e-3 * (300 - i) / 300.0;
	check_sigma(&r, 300, 300, s, 1.001, "nearly flat spectrum");

	/* the top singular value repeated three times */
	for (int i = 0; i < 100; i++)
		s[i] = i < 3 ? 2.0 : 1.9 * pow(0.99, i);
	check_sigma(&r, 150, 100, s, 2.0, "triple top singular value");

	/* two top values 1e-7 apart: either is sigma_max within 1e-6 */
	for (int i = 0; i < 80; i++)
		s[i] = i == 0 ? 1.0 : i == 1 ? 1.0 - 1e-7 : 0.5 * pow(0.95, i);
	check_sigma(&r, 120, 80, s, 1.0, "top gap 1e-7");

	/* rank deficient: rank 5 */
	for (int i = 0; i < 80; i++)
		s[i] = i < 5 ? 3.0 - 0.4 * i : 0.0;
	check_sigma(&r, 100, 80, s, 3.0, "rank 5 of 80");

	/* vectors as matrices */
	{
		float row[500], col[500];
		double nrm = 0;
		struct sigma_info info;
		for (int i = 0; i < 500; i++) {
			row[i] = col[i] = (float)rng_normal(&r);
			nrm += (double)row[i] * row[i];
		}
		ok(sigma_max(row, 1, 500, NULL, 1e-6, &info, &err) == 0 &&
		   close_rel(info.sigma, sqrt(nrm), 1e-12), "1 x n: sigma = ||row||");
		ok(sigma_max(col, 500, 1, NULL, 1e-6, &info, &err) == 0 &&
		   close_rel(info.sigma, sqrt(nrm), 1e-12), "n x 1: sigma = ||col||");
	}

	/* zero matrix */
	{
		float *z = calloc(64 * 64, sizeof *z);
		struct sigma_info info;
		ok(sigma_max(z, 64, 64, NULL, 1e-6, &info, &err) == 0 && info.sigma == 0,
		   "zero matrix: sigma 0");
		free(z);
	}

	/* column scaling (the folded head) against LAPACK on the scaled copy */
	{
		int64_t rows = 300, cols = 160;
		double *w = malloc((size_t)(rows * cols) * sizeof *w), sd[160];
		float *f, *fs = malloc((size_t)(rows * cols) * sizeof *fs), g[160];
		struct sigma_info info;
		for (int i = 0; i < 160; i++) {
			s[i] = 1.0 + i * 0.01;
			g[i] = (float)(0.5 + rng_uniform(&r));
		}
		synth_known_spectrum(&r, rows, cols, s, w, &err);
		f = to_float(w, rows * cols);
		for (int64_t i = 0; i < rows * cols; i++)
			fs[i] = f[i] * g[i % cols];
		linalg_singular_values_dense(fs, rows, cols, NULL, sd, &err);
		int rc = sigma_max(f, rows, cols, g, 1e-6, &info, &err);
		ok(rc == 0 && close_rel(info.sigma, sd[0], 1e-6) && !strcmp(info.method, "lanczos"),
		   "W.diag(g) by Lanczos = LAPACK on the scaled copy (%.10g vs %.10g)", info.sigma, sd[0]);
		free(w);
		free(f);
		free(fs);
	}

	/* a warm start (sw-norms' folded head starts from the raw head's top
	 * right singular vector): the vector returned is W's, a start at it
	 * converges at once, any start gives sigma within the same bound, and
	 * a start near the answer saves steps */
	{
		int64_t rows = 400, cols = 300;
		double *w = malloc((size_t)(rows * cols) * sizeof *w), sd[300], v[300], v2[300], e1[300] = {1};
		float *f, *fs = malloc((size_t)(rows * cols) * sizeof *fs), g[300];
		struct spec_view view;
		struct sigma_info cold, warm, poor, fcold, fwarm;
		double wv = 0, vv = 0;
		int rc;
		for (int i = 0; i < 300; i++) {
			s[i] = 2.0 - 0.003 * i;
			g[i] = (float)(1.0 + 0.05 * (rng_uniform(&r) - 0.5));
		}
		synth_known_spectrum(&r, rows, cols, s, w, &err);
		f = to_float(w, rows * cols);
		for (int64_t i = 0; i < rows * cols; i++)
			fs[i] = f[i] * g[i % cols];
		linalg_singular_values_dense(fs, rows, cols, NULL, sd, &err);
		view = spectrum_view(f, rows, cols);
		rc = spectrum_sigma_max(&view, 1e-6, NULL, -1, v, &cold, &err) ||
		     spectrum_sigma_max(&view, 1e-6, v, -1, v2, &warm, &err) ||
		     spectrum_sigma_max(&view, 1e-6, e1, -1, NULL, &poor, &err);
		for (int64_t i = 0; i < rows; i++) {
			double d = 0;
			for (int64_t j = 0; j < cols; j++)
				d += (double)f[i * cols + j] * v[j];
			wv += d * d;
		}
		for (int j = 0; j < 300; j++)
			vv += v[j] * v[j];
		ok(!rc && close_rel(cold.sigma, 2.0, 1e-6) && close_rel(vv, 1.0, 1e-12) &&
		   close_rel(sqrt(wv), cold.sigma, 1e-9),
		   "the top right singular vector: unit, ||W v|| = sigma (%.12g, %d steps)", sqrt(wv),
		   cold.iterations);
		ok(!rc && close_rel(warm.sigma, 2.0, 1e-6) && warm.iterations <= 2,
		   "started at it: %d steps, sigma %.12g", warm.iterations, warm.sigma);
		ok(!rc && close_rel(poor.sigma, 2.0, 1e-6),
		   "started at e_1: sigma %.12g in %d steps", poor.sigma, poor.iterations);
		view.col_scale = g;
		rc = spectrum_sigma_max(&view, 1e-6, NULL, -1, NULL, &fcold, &err) ||
		     spectrum_sigma_max(&view, 1e-6, v, -1, NULL, &fwarm, &err);
		ok(!rc && close_rel(fcold.sigma, sd[0], 1e-6) && close_rel(fwarm.sigma, sd[0], 1e-6) &&
		   fwarm.iterations < fcold.iterations,
		   "W.diag(g), g within 2.5%% of 1, from W's vector: %d steps, not %d (%.10g, %.10g, LAPACK %.10g)",
		   fwarm.iterations, fcold.iterations, fwarm.sigma, fcold.sigma, sd[0]);
		free(w);
		free(f);
		free(fs);
	}

	/* W and W diag(g) together (sw-norms' output head): the two runs share
	 * their passes over W and give what each gives alone, bit for bit,
	 * each sigma within the bound of LAPACK's on the explicit product;
	 * the raw run needs more steps than the scaled one here, so the pair
	 * also runs one of them alone to its end */
	{
		int64_t rows = 500, cols = 260;
		double *w = malloc((size_t)(rows * cols) * sizeof *w), sd[260], sw[260];
		float *f, *fs = malloc((size_t)(rows * cols) * sizeof *fs), g[260];
		struct spec_view view;
		struct sigma_info a, b, pa, pb;
		int rc;
		for (int i = 0; i < 260; i++) {
			s[i] = 1.0 + 0.5 * pow(0.999, i) - 0.2 * i / 260.0;
			g[i] = (float)(0.5 + rng_uniform(&r));
		}
		synth_known_spectrum(&r, rows, cols, s, w, &err);
		f = to_float(w, rows * cols);
		for (int64_t i = 0; i < rows * cols; i++)
			fs[i] = f[i] * g[i % cols];
		linalg_singular_values_dense(f, rows, cols, NULL, sw, &err);
		linalg_singular_values_dense(fs, rows, cols, NULL, sd, &err);
		view = spectrum_view(f, rows, cols);
		rc = spectrum_sigma_max(&view, 1e-6, NULL, -1, NULL, &a, &err);
		view.col_scale = g;
		rc = rc || spectrum_sigma_max(&view, 1e-6, NULL, -1, NULL, &b, &err) ||
		     spectrum_sigma_max_pair(&view, 1e-6, -1, -1, &pa, &pb, &err);
		ok(!rc && pa.sigma == a.sigma && pb.sigma == b.sigma && pa.iterations == a.iterations &&
		   pb.iterations == b.iterations && a.iterations != b.iterations,
		   "pair = alone, bit for bit: %.15g (%d steps), %.15g (%d steps)", pa.sigma,
		   pa.iterations, pb.sigma, pb.iterations);
		ok(!rc && close_rel(pa.sigma, sw[0], 1e-6) && close_rel(pb.sigma, sd[0], 1e-6),
		   "pair: sigma(W) %.10g (LAPACK %.10g), sigma(W diag(g)) %.10g (LAPACK %.10g)",
		   pa.sigma, sw[0], pb.sigma, sd[0]);
		view = spectrum_view(f, 100, 100);
		view.ld = cols;
		view.col_scale = g;
		rc = spectrum_sigma_max_pair(&view, 1e-6, -1, -1, &pa, &pb, &err) ||
		     spectrum_sigma_max(&view, 1e-6, NULL, -1, NULL, &b, &err);
		ok(!rc && !strcmp(pa.method, "full") && pb.sigma == b.sigma,
		   "pair on a small matrix: the dense method, %.10g", pb.sigma);
		free(w);
		free(f);
		free(fs);
	}

	/* rows x cols with known row norms: W = diag(r) Q, Q orthonormal rows;
	 * its singular values are r too */
	{
		int64_t rows = 40, cols = 90;
		double *q = malloc((size_t)(rows * cols) * sizeof *q), *qt = malloc((size_t)(rows * cols) * sizeof *qt);
		double rn[40], max_r = 0, frob = 0;
		float *f = malloc((size_t)(rows * cols) * sizeof *f);
		struct mat_summary sm;
		struct op_norms n;
		synth_orthonormal(&r, cols, rows, qt, &err);   /* 90 x 40, columns orthonormal */
		for (int i = 0; i < rows; i++) {
			rn[i] = 0.2 + 0.05 * i;
			max_r = fmax(max_r, rn[i]);
			frob += rn[i] * rn[i];
			for (int j = 0; j < cols; j++)
				q[i * cols + j] = rn[i] * qt[j * rows + i];
		}
		for (int64_t i = 0; i < rows * cols; i++)
			f[i] = (float)q[i];
		ok(norms_summarize(f, rows, cols, NULL, NORMS_ALL, &sm, &err) == 0, "summarize diag(r) Q");
		norms_of_operator(&sm, 0, &n);
		ok(close_rel(n.rms_to_inf, sqrt(90.0) * max_r, 1e-6), "RMS->inf = sqrt(d_in) max_i r_i (%.9g)", n.rms_to_inf);
		ok(close_rel(n.spectral, max_r, 1e-6), "spectral = max r_i");
		ok(close_rel(n.rms_to_rms, sqrt(90.0 / 40.0) * max_r, 1e-6), "RMS->RMS = sqrt(d_in/d_out) sigma");
		ok(close_rel(n.frobenius, sqrt(frob), 1e-6), "Frobenius = ||r||");
		ok(close_rel(n.rms, sqrt(frob / (40.0 * 90.0)), 1e-6), "RMS = ||W||_F / sqrt(d_out d_in)");
		/* the transposed operator swaps the roles of rows and columns */
		norms_of_operator(&sm, 1, &n);
		ok(n.d_out == 90 && n.d_in == 40, "transposed: d_out 90, d_in 40");
		ok(close_rel(n.one_to_rms, max_r / sqrt(90.0), 1e-6), "transposed 1->RMS = max row norm / sqrt(d_out)");
		free(q);
		free(qt);
		free(f);
	}

	/* the one-pass sums against direct double sums, and NaN detection */
	{
		int64_t rows = 37, cols = 53;
		float *f = malloc((size_t)(rows * cols) * sizeof *f);
		double rs[37], cs[53], want_c[53] = {0}, err_r = 0, err_c = 0, frob = 0, amax = 0;
		struct mat_pass p;
		for (int64_t i = 0; i < rows * cols; i++)
			f[i] = (float)rng_normal(&r);
		for (int64_t i = 0; i < rows; i++) {
			double want = 0;
			for (int64_t j = 0; j < cols; j++) {
				double x = f[i * cols + j];
				want += x * x;
				want_c[j] += x * x;
				amax = fmax(amax, fabs(x));
			}
			frob += want;
			rs[i] = want;
		}
		ok(linalg_row_col_sumsq(f, rows, cols, NULL, rs, cs, &p, &err) == 0, "row/col pass");
		for (int64_t i = 0; i < rows; i++) {
			double want = 0;
			for (int64_t j = 0; j < cols; j++)
				want += (double)f[i * cols + j] * f[i * cols + j];
			err_r = fmax(err_r, fabs(rs[i] - want) / want);
		}
		for (int64_t j = 0; j < cols; j++)
			err_c = fmax(err_c, fabs(cs[j] - want_c[j]) / want_c[j]);
		ok(err_r < 1e-13 && err_c < 1e-13, "row and column sums of squares (rel err %.2g, %.2g)", err_r, err_c);
		ok(close_rel(p.frob_sq, frob, 1e-13) && p.max_abs == amax && p.bad_rows == 0, "Frobenius and max|w|");
		f[5 * cols + 7] = NAN;
		f[9 * cols + 1] = INFINITY;
		linalg_row_col_sumsq(f, rows, cols, NULL, rs, cs, &p, &err);
		ok(p.bad_rows == 2, "two rows with NaN/Inf found");
		ok(norms_summarize(f, rows, cols, NULL, NORMS_ALL, &(struct mat_summary){0}, &err) == SW_EDATA &&
		   strstr(err.msg, "2 of 1961 values are NaN or Inf"), "norms_summarize refuses NaN: %s", err.msg);
		free(f);
	}
	return tap_done();
}
