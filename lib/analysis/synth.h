/*
 * synth.h - synthetic matrices whose singular values are known exactly,
 * for the fixtures, the unit tests and the benchmarks: W = U diag(s) V^T
 * with U, V random orthonormal factors (QR of Gaussian matrices, LAPACK,
 * double precision).
 */
#ifndef SW_SYNTH_H
#define SW_SYNTH_H

#include <stdint.h>

#include "../base/rng.h"
#include "../base/status.h"

/* Q (m x k, m >= k, row-major double) with orthonormal columns. */
int synth_orthonormal(struct sw_rng *r, int64_t m, int64_t k, double *Q,
		      struct sw_err *err);

/* W (rows x cols, row-major double) = U diag(s) V^T, s of length
 * min(rows, cols), in any order. */
int synth_known_spectrum(struct sw_rng *r, int64_t rows, int64_t cols,
			 const double *s, double *W, struct sw_err *err);

#endif
