/* norms.c - operator norms of a weight matrix (see norms.h). */
#include "norms.h"
#include "linalg.h"

#include <math.h>
#include <stdlib.h>

/* Count the NaN/Inf entries (only when the fast pass found some). */
static int64_t count_nonfinite(const float *W, int64_t n)
{
	int64_t bad = 0;

	for (int64_t i = 0; i < n; i++)
		bad += !isfinite(W[i]);
	return bad;
}

int norms_summarize(const float *W, int64_t rows, int64_t cols,
		    const float *col_scale, struct mat_summary *s,
		    struct sw_err *err)
{
	double *row_sq = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *row_sq);
	double *col_sq = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *col_sq);
	struct mat_pass pass;
	struct sigma_info sig;
	int rc;

	s->rows = rows;
	s->cols = cols;
	if (!row_sq || !col_sq) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	if ((rc = linalg_row_col_sumsq(W, rows, cols, col_scale, row_sq, col_sq, &pass, err)))
		goto out;
	if (pass.bad_rows) {
		rc = sw_fail(err, SW_EDATA, "%lld of %lld values are NaN or Inf",
			     (long long)count_nonfinite(W, rows * cols), (long long)(rows * cols));
		goto out;
	}
	s->max_row_sq = s->max_col_sq = 0;
	for (int64_t i = 0; i < rows; i++)
		s->max_row_sq = fmax(s->max_row_sq, row_sq[i]);
	for (int64_t j = 0; j < cols; j++)
		s->max_col_sq = fmax(s->max_col_sq, col_sq[j]);
	s->frob_sq = pass.frob_sq;
	s->max_abs = pass.max_abs;
	if ((rc = linalg_sigma_max(W, rows, cols, col_scale, NORMS_SIGMA_REL_TOL, &sig, err)))
		goto out;
	s->sigma_max = sig.sigma;
	s->lanczos_steps = sig.iterations;
out:
	free(row_sq);
	free(col_sq);
	return rc;
}

void norms_of_operator(const struct mat_summary *s, int transposed, struct op_norms *o)
{
	/* rows of the operator are columns of the stored matrix when transposed */
	double max_out_sq = transposed ? s->max_col_sq : s->max_row_sq;
	double max_in_sq = transposed ? s->max_row_sq : s->max_col_sq;

	o->d_out = transposed ? s->cols : s->rows;
	o->d_in = transposed ? s->rows : s->cols;
	o->rms_to_inf = sqrt((double)o->d_in) * sqrt(max_out_sq);
	o->rms_to_rms = sqrt((double)o->d_in / (double)o->d_out) * s->sigma_max;
	o->one_to_rms = sqrt(max_in_sq) / sqrt((double)o->d_out);
	o->spectral = s->sigma_max;
	o->frobenius = sqrt(s->frob_sq);
	o->rms = sqrt(s->frob_sq / ((double)o->d_out * (double)o->d_in));
	o->max_abs = s->max_abs;
}
