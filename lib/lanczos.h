/*
 * lanczos.h - eigenvalues of a symmetric operator known only through its
 * products y = A x (a Hessian through Hessian-vector products): the top k
 * by the Lanczos method, and the Gauss quadrature of stochastic Lanczos
 * quadrature (SLQ) for spectral densities and traces.
 *
 * Both run the Lanczos recurrence A q_j = beta_{j-1} q_{j-1} + alpha_j q_j
 * + beta_j q_{j+1} with full reorthogonalization (each new vector is
 * orthogonalized twice against every earlier one, classical Gram-Schmidt:
 * in floating point the plain recurrence loses orthogonality and repeats
 * converged eigenvalues as ghosts). The basis is kept in float32 (memory:
 * steps x n x 4 bytes), its products and the recurrence in double. The
 * tridiagonal T_j of alpha and beta is diagonalized by LAPACK dstev.
 */
#ifndef SW_LANCZOS_H
#define SW_LANCZOS_H

#include <stdint.h>

#include "status.h"

/* y = A x for x, y of n entries; a status (and err) when it fails. */
typedef int (*lanczos_op)(void *ctx, const double *x, double *y, struct sw_err *err);

struct lanczos_top {
	int k;                  /* values found: min(k, n, steps) */
	int steps;              /* products taken */
	double bound;           /* max over the k of |beta_j s_{j,i}|, plus the basis's rounding */
	double scale;           /* max |theta| over every Ritz value (the norm's estimate) */
	int converged;          /* bound <= tol * scale, or an invariant subspace */
};

/*
 * The k algebraically largest eigenvalues of A (dimension n), descending,
 * into eig (k entries), by Lanczos from start (n entries, any nonzero
 * vector). After each step the Ritz values theta_i of T_j and their
 * residual norms |beta_j s_{j,i}| (s the eigenvectors of T_j) are taken:
 * each theta_i is within its residual norm of an eigenvalue of A, plus
 * what the float32 basis may cost, 2^-24 sqrt(j) max|theta| (the bound
 * reported is the sum: honest, if loose by about 50x there). Stops
 * when the largest of the top k residual norms is at most tol times the
 * largest |theta|, at an invariant subspace (beta_j ~ 0: T_j's values are
 * A's on that subspace, exact up to the float32 basis), or after
 * max_steps products (converged 0:
 * bound says how far the values may be). SW_EUSAGE for a zero start or
 * k < 1; SW_ESOFTWARE for memory or LAPACK; the operator's status.
 */
int lanczos_top(int64_t n, lanczos_op op, void *ctx, const double *start, int k,
		int max_steps, double tol, double *eig, struct lanczos_top *info,
		struct sw_err *err);

/*
 * The Gauss quadrature of v^T f(A) v / v^T v for v = start: steps
 * Lanczos steps (fewer at an invariant subspace; *m says how many), the
 * nodes theta_k (ascending) and weights tau_k (the squared first entries
 * of T_m's eigenvectors; they sum to 1), so that sum_k tau_k theta_k^p =
 * v^T A^p v / v^T v for p <= 2m - 1. With v a Rademacher vector,
 * n sum_k tau_k theta_k^p is an unbiased estimate of tr(A^p), and the
 * nodes and weights averaged over vectors the spectral density (SLQ,
 * Ubaru, Chen and Saad 2017; Ghorbani, Krishnan and Xiao 2019).
 * nodes and weights hold steps entries.
 */
int lanczos_quadrature(int64_t n, lanczos_op op, void *ctx, const double *start, int steps,
		       double *nodes, double *weights, int *m, struct sw_err *err);

/*
 * A density on a grid from quadrature nodes and weights (count of them,
 * from nvec vectors: each vector's weights sum to 1): the Gaussian
 * smoothing y(x) = (1/nvec) sum_k tau_k exp(-(x - theta_k)^2 / 2 s^2) /
 * (s sqrt(2 pi)) at points equally spaced from lo to hi.
 */
void lanczos_density(const double *nodes, const double *weights, int count, int nvec, double s,
		     double lo, double hi, int points, double *x, double *y);

#endif
