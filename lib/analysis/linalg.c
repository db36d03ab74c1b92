/* linalg.c - row/column passes, sigma_max by Lanczos (see linalg.h). */
#include "linalg.h"
#include "../base/isa.h"
#include "../base/par.h"
#include "../base/rng.h"

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

/* hot loops in the widest vectors this CPU has (isa.h) */
#define HOT ISA_CLONES

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

