/* linalg.c - row/column passes, sigma_max by Lanczos (see linalg.h). */
#include "linalg.h"
#include "par.h"
#include "rng.h"

#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

void linalg_split(int64_t rows, int nth, int tid, int64_t *lo, int64_t *hi)
{
	int64_t q = rows / nth, r = rows % nth;

	*lo = tid * q + (tid < r ? tid : r);
	*hi = *lo + q + (tid < r ? 1 : 0);
}

/* Hot loops are compiled twice: for AVX2+FMA machines and for any x86-64;
 * the loader picks one at run time. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif

HOT static void rows_pass(const float *W, int64_t lo, int64_t hi, int64_t cols,
			  const float *scale, double *row_sq, double *col_acc,
			  double *frob, double *amax, int64_t *bad)
{
	double f = 0, m = 0;
	int64_t nbad = 0;

	for (int64_t i = lo; i < hi; i++) {
		const float *w = W + i * cols;
		double s = 0, rmd = 0;
		float rm = 0;

		if (scale) {
			/* the product in double: two floats near 3e38 overflow
			 * float, never double, so a finite norm stays finite */
#pragma omp simd reduction(+ : s) reduction(max : rmd)
			for (int64_t j = 0; j < cols; j++) {
				double d = (double)w[j] * (double)scale[j];
				s += d * d;
				col_acc[j] += d * d;
				rmd = fabs(d) > rmd ? fabs(d) : rmd;
			}
		} else {
#pragma omp simd reduction(+ : s) reduction(max : rm)
			for (int64_t j = 0; j < cols; j++) {
				double d = w[j];
				s += d * d;
				col_acc[j] += d * d;
				rm = fabsf(w[j]) > rm ? fabsf(w[j]) : rm;
			}
		}
		if (row_sq)
			row_sq[i] = s;
		if (!isfinite(s))
			nbad++;
		f += s;
		m = rm > m ? rm : m;
		m = rmd > m ? rmd : m;
	}
	*frob = f;
	*amax = m;
	*bad = nbad;
}

int linalg_row_col_sumsq(const float *W, int64_t rows, int64_t cols,
			 const float *col_scale, double *row_sq, double *col_sq,
			 struct mat_pass *out, struct sw_err *err)
{
	int nth = omp_get_max_threads();
	double *acc, *frob, *amax;
	int64_t *bad;

	if ((int64_t)nth > rows)
		nth = rows > 0 ? (int)rows : 1;
	acc = calloc((size_t)nth * (size_t)cols + 1, sizeof *acc);
	frob = calloc((size_t)nth * 2, sizeof *frob);
	bad = calloc((size_t)nth, sizeof *bad);
	if (!acc || !frob || !bad) {
		free(acc);
		free(frob);
		free(bad);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	amax = frob + nth;
#pragma omp parallel num_threads(nth) PAR_IF((size_t)rows * cols)
	{
		int tid = omp_get_thread_num();
		int64_t lo, hi;
		linalg_split(rows, omp_get_num_threads(), tid, &lo, &hi);
		rows_pass(W, lo, hi, cols, col_scale, row_sq, acc + (size_t)tid * (size_t)cols,
			  &frob[tid], &amax[tid], &bad[tid]);
	}
	out->frob_sq = 0;
	out->max_abs = 0;
	out->bad_rows = 0;
	for (int t = 0; t < nth; t++) {
		out->frob_sq += frob[t];
		out->max_abs = amax[t] > out->max_abs ? amax[t] : out->max_abs;
		out->bad_rows += bad[t];
	}
	if (col_sq)
		for (int64_t j = 0; j < cols; j++) {
			double s = 0;
			for (int t = 0; t < nth; t++)
				s += acc[(size_t)t * (size_t)cols + (size_t)j];
			col_sq[j] = s;
		}
	free(acc);
	free(frob);
	free(bad);
	return SW_OK;
}

int linalg_singular_values_dense(const float *W, int64_t rows, int64_t cols,
				 const float *col_scale, double *s, struct sw_err *err)
{
	double *a = malloc((size_t)rows * (size_t)cols * sizeof *a);
	lapack_int info;

	if (!a)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++)
			a[i * cols + j] = (double)W[i * cols + j] *
					  (col_scale ? (double)col_scale[j] : 1.0);
	/* row-major W is column-major W^T: the same singular values */
	info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)cols, (lapack_int)rows,
			      a, (lapack_int)cols, s, NULL, 1, NULL, 1);
	free(a);
	if (info != 0)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dgesdd failed (info %d)", (int)info);
	return SW_OK;
}

/* z_t += sum over rows i in [lo, hi) of (w_i . x) w_i: one pass, row i is
 * read from memory once and reused from cache. */
HOT static void gram_rows(const float *W, int64_t lo, int64_t hi, int64_t cols,
			  const double *x, double *z)
{
	for (int64_t i = lo; i < hi; i++) {
		const float *w = W + i * cols;
		double y = 0;
#pragma omp simd reduction(+ : y)
		for (int64_t j = 0; j < cols; j++)
			y += (double)w[j] * x[j];
#pragma omp simd
		for (int64_t j = 0; j < cols; j++)
			z[j] += y * (double)w[j];
	}
}

/* u_t += sum over rows i in [lo, hi) of v_i w_i (one pass, for W^T v) */
HOT static void gramt_rows(const float *W, int64_t lo, int64_t hi, int64_t cols,
			   const double *v, double *u)
{
	for (int64_t i = lo; i < hi; i++) {
		const float *w = W + i * cols;
		double vi = v[i];
#pragma omp simd
		for (int64_t j = 0; j < cols; j++)
			u[j] += vi * (double)w[j];
	}
}

/* z_i = w_i . u for rows i in [lo, hi) */
HOT static void dots_rows(const float *W, int64_t lo, int64_t hi, int64_t cols,
			  const double *u, double *z)
{
	for (int64_t i = lo; i < hi; i++) {
		const float *w = W + i * cols;
		double y = 0;
#pragma omp simd reduction(+ : y)
		for (int64_t j = 0; j < cols; j++)
			y += (double)w[j] * u[j];
		z[i] = y;
	}
}

/*
 * The Gram operator of A = W.diag(scale) on the smaller side: tall or
 * square (rows >= cols): A^T A, vectors of length cols, one fused pass per
 * product; wide: A A^T, vectors of length rows, two passes (W^T v, then
 * W u) so the Lanczos basis stays min(rows, cols) long.
 */
struct gram {
	const float *W;
	int64_t rows, cols, n;  /* n = length of the Lanczos vectors */
	const float *scale;
	int wide;
	int nth;
	double *zt;             /* (nth, cols) per-thread sums */
	double *x;              /* (cols) */
};

static void sum_threads(const struct gram *g, double *dst)
{
	for (int64_t j = 0; j < g->cols; j++) {
		double s = 0;
		for (int t = 0; t < g->nth; t++)
			s += g->zt[(size_t)t * (size_t)g->cols + (size_t)j];
		dst[j] = s;
	}
}

static void gram_apply(struct gram *g, const double *v, double *z)
{
	int64_t cols = g->cols;

	memset(g->zt, 0, (size_t)g->nth * (size_t)cols * sizeof *g->zt);
	if (!g->wide) {
		/* z = S W^T W S v */
		for (int64_t j = 0; j < cols; j++)
			g->x[j] = g->scale ? v[j] * g->scale[j] : v[j];
#pragma omp parallel num_threads(g->nth) PAR_IF((size_t)g->rows * g->cols)
		{
			int tid = omp_get_thread_num();
			int64_t lo, hi;
			linalg_split(g->rows, omp_get_num_threads(), tid, &lo, &hi);
			gram_rows(g->W, lo, hi, cols, g->x, g->zt + (size_t)tid * (size_t)cols);
		}
		sum_threads(g, z);
		if (g->scale)
			for (int64_t j = 0; j < cols; j++)
				z[j] *= g->scale[j];
		return;
	}
	/* z = W S^2 W^T v */
#pragma omp parallel num_threads(g->nth) PAR_IF((size_t)g->rows * g->cols)
	{
		int tid = omp_get_thread_num();
		int64_t lo, hi;
		linalg_split(g->rows, omp_get_num_threads(), tid, &lo, &hi);
		gramt_rows(g->W, lo, hi, cols, v, g->zt + (size_t)tid * (size_t)cols);
	}
	sum_threads(g, g->x);
	if (g->scale)
		for (int64_t j = 0; j < cols; j++)
			g->x[j] *= (double)g->scale[j] * g->scale[j];
#pragma omp parallel num_threads(g->nth) PAR_IF((size_t)g->rows * g->cols)
	{
		int tid = omp_get_thread_num();
		int64_t lo, hi;
		linalg_split(g->rows, omp_get_num_threads(), tid, &lo, &hi);
		dots_rows(g->W, lo, hi, cols, g->x, z);
	}
}

static double dot(const double *a, const double *b, int64_t n)
{
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static void axpy(double a, const double *x, double *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* Largest eigenpair of the k x k tridiagonal (alpha, beta): returns theta
 * and the last component of its unit eigenvector. */
static int top_ritz(const double *alpha, const double *beta, int k, double *work,
		    double *theta, double *last)
{
	double *d = work, *e = work + k, *zv = work + 2 * k, w[1];
	lapack_int m, ifail[1], info;

	memcpy(d, alpha, (size_t)k * sizeof *d);
	memcpy(e, beta, (size_t)(k > 1 ? k - 1 : 1) * sizeof *e);
	info = LAPACKE_dstevx(LAPACK_COL_MAJOR, 'V', 'I', k, d, e, 0, 0, k, k, 0.0,
			      &m, w, zv, k, ifail);
	if (info != 0 || m != 1)
		return -1;
	*theta = w[0];
	*last = zv[k - 1];
	return 0;
}

#define LANCZOS_MAX_STEPS 3000

int linalg_sigma_max(const float *W, int64_t rows, int64_t cols,
		     const float *col_scale, double rel_tol,
		     struct sigma_info *out, struct sw_err *err)
{
	struct gram g = {W, rows, cols, cols, col_scale, rows < cols, 1, NULL, NULL};
	int64_t n, kmax;
	double *Q = NULL, *alpha = NULL, *beta = NULL, *work = NULL, *z = NULL;
	double theta = 0, last = 0, res = 0;
	struct sw_rng rng;
	int rc = SW_OK, k;

	memset(out, 0, sizeof *out);
	if (rows <= 0 || cols <= 0) {
		out->method = "lapack";
		return SW_OK;
	}
	if ((rows < cols ? rows : cols) <= 32) {
		int64_t m = rows < cols ? rows : cols;
		double *s = malloc((size_t)m * sizeof *s);
		if (!s)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		rc = linalg_singular_values_dense(W, rows, cols, col_scale, s, err);
		out->sigma = rc ? 0 : s[0];
		out->method = "lapack";
		out->rel_bound = 1e-15;
		free(s);
		return rc;
	}
	/* the Gram operator is n x n, n = min(rows, cols): its Krylov spaces
	 * stop growing after n steps */
	n = g.n = g.wide ? rows : cols;
	kmax = n < LANCZOS_MAX_STEPS ? n : LANCZOS_MAX_STEPS;
	g.nth = omp_get_max_threads();
	if ((int64_t)g.nth > rows)
		g.nth = (int)rows;
	g.zt = malloc((size_t)g.nth * (size_t)cols * sizeof *g.zt);
	g.x = malloc((size_t)cols * sizeof *g.x);
	Q = malloc((size_t)(kmax + 1) * (size_t)n * sizeof *Q);
	alpha = malloc((size_t)kmax * sizeof *alpha);
	beta = malloc((size_t)kmax * sizeof *beta);
	work = malloc((size_t)kmax * (size_t)3 * sizeof *work + sizeof *work);
	z = malloc((size_t)n * sizeof *z);
	if (!g.zt || !g.x || !Q || !alpha || !beta || !work || !z) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos (%lld x %lld)",
			     (long long)kmax, (long long)n);
		goto out;
	}
	/* a fixed pseudo-random start: the answer is reproducible */
	rng_seed(&rng, 0x5ca1e0a7c4u);
	for (int64_t j = 0; j < n; j++)
		Q[j] = rng_uniform(&rng) - 0.5;
	{
		double nrm = sqrt(dot(Q, Q, n));
		for (int64_t j = 0; j < n; j++)
			Q[j] /= nrm;
	}
	for (k = 0; k < kmax; k++) {
		double *q = Q + (size_t)k * (size_t)n;

		gram_apply(&g, q, z);
		alpha[k] = dot(q, z, n);
		axpy(-alpha[k], q, z, n);
		if (k > 0)
			axpy(-beta[k - 1], q - n, z, n);
		/* full reorthogonalization, twice is enough (Kahan-Parlett) */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i <= k; i++)
				axpy(-dot(Q + (size_t)i * (size_t)n, z, n), Q + (size_t)i * (size_t)n, z, n);
		beta[k] = sqrt(dot(z, z, n));
		if (top_ritz(alpha, beta, k + 1, work, &theta, &last) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "LAPACK dstevx failed");
			goto out;
		}
		res = beta[k] * fabs(last);
		/* converged, or an invariant subspace (exact), or the whole space */
		if (res <= rel_tol * theta || beta[k] <= 1e-13 * theta || k + 1 == n)
			break;
		for (int64_t j = 0; j < n; j++)
			q[n + j] = z[j] / beta[k];
	}
	if (k == kmax) {
		rc = sw_fail(err, SW_ESOFTWARE,
			     "sigma_max did not converge in %d Lanczos steps", LANCZOS_MAX_STEPS);
		goto out;
	}
	out->sigma = sqrt(theta > 0 ? theta : 0);
	out->iterations = k + 1;
	out->rel_bound = theta > 0 ? 0.5 * res / theta : 0;
	out->method = "lanczos";
out:
	free(g.zt);
	free(g.x);
	free(Q);
	free(alpha);
	free(beta);
	free(work);
	free(z);
	return rc;
}
