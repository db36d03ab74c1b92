/* synth.c - matrices with known singular values (see synth.h). */
#include "synth.h"

#include <cblas.h>
#include <lapacke.h>
#include <stdlib.h>

int synth_orthonormal(struct sw_rng *r, int64_t m, int64_t k, double *Q,
		      struct sw_err *err)
{
	double *tau = malloc((size_t)(k > 0 ? k : 1) * sizeof *tau);
	lapack_int info;

	if (!tau)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (m < k) {
		free(tau);
		return sw_fail(err, SW_ESOFTWARE, "synth_orthonormal: m < k");
	}
	for (int64_t i = 0; i < m * k; i++)
		Q[i] = rng_normal(r);
	info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k, Q,
			      (lapack_int)k, tau);
	if (info == 0)
		info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k,
				      (lapack_int)k, Q, (lapack_int)k, tau);
	free(tau);
	if (info != 0)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK QR failed (info %d)", (int)info);
	return SW_OK;
}

int synth_known_spectrum(struct sw_rng *r, int64_t rows, int64_t cols,
			 const double *s, double *W, struct sw_err *err)
{
	int64_t k = rows < cols ? rows : cols;
	double *U = malloc((size_t)(rows * k) * sizeof *U);
	double *V = malloc((size_t)(cols * k) * sizeof *V);
	int rc;

	if (!U || !V) {
		free(U);
		free(V);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	if (!(rc = synth_orthonormal(r, rows, k, U, err)) &&
	    !(rc = synth_orthonormal(r, cols, k, V, err))) {
		/* U diag(s): scale the columns, then W = (U diag(s)) V^T */
		for (int64_t i = 0; i < rows; i++)
			for (int64_t j = 0; j < k; j++)
				U[i * k + j] *= s[j];
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols,
			    (int)k, 1.0, U, (int)k, V, (int)k, 0.0, W, (int)cols);
	}
	free(U);
	free(V);
	return rc;
}
