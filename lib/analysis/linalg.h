/*
 * linalg.h - the numerical kernels behind the norms and spectra.
 *
 * Matrices are float32, row-major, rows x cols (PyTorch's [out, in]); sums
 * are accumulated in double. An optional col_scale (length cols) makes the
 * operator W.diag(col_scale), e.g. the output head with the final RMSNorm
 * gain folded in. OpenMP splits rows across threads; each thread sums into
 * its own buffer and the buffers are added in thread order, so a result is
 * reproducible for a given thread count.
 */
#ifndef SW_LINALG_H
#define SW_LINALG_H

#include <stdint.h>

#include "../base/status.h"

/* Rows [lo, hi) of thread tid when rows are split into nth nearly equal
 * parts: the partition of every OpenMP row pass. */
void linalg_split(int64_t rows, int nth, int tid, int64_t *lo, int64_t *hi);

struct mat_pass {
	double frob_sq;         /* sum of w^2 */
	double max_abs;         /* max |w| */
	int64_t bad_rows;       /* rows holding a NaN or an Inf */
};

/*
 * One pass over W: the squared 2-norm of every row (row_sq, length rows)
 * and column (col_sq, length cols; either may be NULL), the Frobenius norm
 * squared, max |w|, and how many rows hold a NaN or an Inf (their sums are
 * then not finite). SW_ESOFTWARE only if out of memory.
 */
int linalg_row_col_sumsq(const float *W, int64_t rows, int64_t cols,
			 const float *col_scale, double *row_sq, double *col_sq,
			 struct mat_pass *out, struct sw_err *err);

/* Every singular value of a small matrix, in double, descending (LAPACK
 * dgesdd, values only); s has min(rows, cols) entries. */
int linalg_singular_values_dense(const float *W, int64_t rows, int64_t cols,
				 const float *col_scale, double *s,
				 struct sw_err *err);

#endif
