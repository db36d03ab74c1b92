/*
 * norms.h - the operator norms of one weight matrix (DESIGN.md,
 * "Definitions"; the optimal-norm paper's layer norms).
 *
 * For the operator W in R^{d_out x d_in}, with ||v||_rms = ||v||_2/sqrt(dim):
 *   RMS->inf  = sqrt(d_in) * max_i ||W_{i,:}||_2       (output layer)
 *   RMS->RMS  = sqrt(d_in/d_out) * sigma_max(W)        (hidden layers)
 *   1->RMS    = max_j ||W_{:,j}||_2 / sqrt(d_out)      (input layer)
 *   spectral sigma_max, Frobenius, RMS = ||W||_F/sqrt(d_out d_in), max|w|.
 * A tensor stored [out, in] is its own operator; the token embedding,
 * stored [vocab, d_model], acts as its transpose (one-hot token -> vector),
 * so its d_out = d_model, d_in = vocab and its 1->RMS norm is the largest
 * token vector's RMS.
 */
#ifndef SW_NORMS_H
#define SW_NORMS_H

#include <stdint.h>

#include "status.h"

/* sigma_max's relative accuracy (Lanczos residual bound). */
#define NORMS_SIGMA_REL_TOL 1e-6

/* What one pass and one sigma_max give about a stored matrix. */
struct mat_summary {
	int64_t rows, cols;     /* as stored */
	double max_row_sq;      /* max_i ||W_{i,:}||^2 */
	double max_col_sq;      /* max_j ||W_{:,j}||^2 */
	double frob_sq;
	double max_abs;
	double sigma_max;
	int lanczos_steps;      /* 0 when LAPACK was used */
};

struct op_norms {
	int64_t d_out, d_in;
	double rms_to_inf, rms_to_rms, one_to_rms;
	double spectral, frobenius, rms, max_abs;
};

/*
 * Summarize W (rows x cols, stored) with its columns scaled by col_scale
 * when not NULL. SW_EDATA naming how many values are NaN/Inf if any.
 */
int norms_summarize(const float *W, int64_t rows, int64_t cols,
		    const float *col_scale, struct mat_summary *s,
		    struct sw_err *err);

/* The norms of the operator W (transposed = 0) or W^T (transposed = 1). */
void norms_of_operator(const struct mat_summary *s, int transposed,
		       struct op_norms *out);

#endif
