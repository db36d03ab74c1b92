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
 * tridiagonal T_j of alpha and beta is diagonalized by LAPACK (dsyevr,
 * lanczos_ritz).
 *
 * The numerics of a Lanczos step are one core, declared at the end: the
 * reorthogonalization against the basis, the Ritz pairs of the projected
 * matrix, their residual norms. The single-vector solvers here and
 * spectrum_top's block Lanczos on a weight matrix's Gram operator
 * (spectrum.c) both run on it; each keeps its own recurrence, stopping
 * rule and guarantee.
 */
#ifndef SW_LANCZOS_H
#define SW_LANCZOS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

/* y = A x for x, y of n entries; a status (and err) when it fails. */
typedef int (*lanczos_op)(void *ctx, const double *x, double *y, struct sw_err *err);

struct lanczos_top {
	int k;                  /* values found: min(k, n, steps) */
	int steps;              /* products taken */
	double bound;           /* max over the k of |beta_j s_{j,i}|, plus the basis's rounding */
	double scale;           /* max |theta| over every Ritz value (the norm's estimate) */
	int converged;          /* bound <= tol * scale, or an invariant subspace */
	double min, min_bound;  /* the smallest Ritz value and its bound (as bound's) */
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
/*
 * lanczos_top, and from the same Krylov space the smallest eigenvalue:
 * info->min, the smallest Ritz value, within info->min_bound (its
 * residual norm |beta_j s_{j,j}| plus the basis's rounding, as bound) of
 * an eigenvalue of A, and at least A's smallest (Cauchy's interlacing)
 * but for the float32 basis's rounding;
 * the stopping rule stays the top k's (a smallest eigenvalue inside a
 * dense cluster, as a Hessian's bulk near 0, would take every step).
 * vecs, when not NULL (k x n, vector i at i n), gets the top info->k Ritz
 * vectors V_j s_i (unit norm up to the float32 basis's rounding; each
 * within bound / gap of an eigenvector's direction, by Davis-Kahan).
 */
int lanczos_extremes(int64_t n, lanczos_op op, void *ctx, const double *start, int k,
		     int max_steps, double tol, double *eig, double *vecs,
		     struct lanczos_top *info, struct sw_err *err);

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

/* ---- the core under both Lanczos solvers --------------------------------
 *
 * One vector a step (lanczos_top, lanczos_quadrature: b = 1, the basis in
 * float32) or a block of b (spectrum_top: the basis in double, thick
 * restarts): the operator's products on the newest vectors lose their
 * components along the basis V (lanczos_project; the coefficients are
 * the projected matrix's new columns), what is left is factored Q R (the
 * next vectors; one vector: R = beta_m, its norm), so that A V_m = V_m
 * H_m + Q R E_m^T with H_m = V_m^T A V_m (T_m, tridiagonal, for one
 * vector a step; block-banded, or an arrowhead after a restart, for a
 * block) and E_m the last b columns of the identity. The Ritz pairs
 * (theta, V_m y) of H_m (lanczos_ritz) then have residual norms
 * ||A V_m y - theta V_m y|| = ||R y_last|| (lanczos_residuals), y_last
 * the last b entries of y.
 */

/*
 * Full reorthogonalization: Z (b vectors of n entries, n apart) -= V (V^T
 * Z) against the first j basis vectors (orthonormal, n apart; float32 or
 * double), twice: classical Gram-Schmidt twice is enough (Kahan-Parlett),
 * the second pass takes away what rounding left of the first. C (j x b,
 * entry (r, q) at C[q j + r]), when not NULL, gains the coefficients of
 * both passes: V^T Z of the Z given. Sums run over fixed chunks of the
 * vectors, added in chunk order: the same bits whatever the thread count.
 * Each basis vector is read once for two of Z. work:
 * lanczos_project_work(n, j, b) doubles.
 */
size_t lanczos_project_work(int64_t n, int j, int b);
void lanczos_project_f32(const float *V, int64_t n, int j, double *Z, int b, double *C,
			 double *work);
void lanczos_project_f64(const double *V, int64_t n, int j, double *Z, int b, double *C,
			 double *work);

/*
 * The Ritz pairs: the top `want` eigenpairs of the m x m symmetric
 * projected matrix A (column-major, upper triangle read, destroyed),
 * theta descending, their eigenvectors in Y's columns (ld m) in that
 * order. LAPACK dsyevr (relatively robust representations: a few wanted
 * vectors cost a third of all of them at m = 60), in the calling thread
 * alone: OpenBLAS sizes its team by omp_get_max_threads(), and the
 * solvers make dozens of small products a call: waking a sleeping team
 * for each cost more than the products (measured on 8192 x 2048 bf16,
 * --top 1: 6.7 ms a Ritz step with the tools' short spin, 0.26 ms alone).
 * The limit is this task's own (omp_set_num_threads sets the calling
 * task's ICV) and is put back. SW_ESOFTWARE if LAPACK fails or memory
 * runs out.
 */
int lanczos_ritz(int m, int want, double *A, double *theta, double *Y, struct sw_err *err);

/*
 * The residual norms ||R y_last|| of the Ritz pairs of the first k
 * columns of Y (ld m; lanczos_ritz's), R the b x b upper triangular
 * factor of the next vectors (column-major, ld b; one vector: &beta_m,
 * and the norm is |beta_m y_m|): the largest into *max (each theta_i is
 * within its own residual norm of an eigenvalue of A), and ||R Y_last||_F,
 * the root of the sum of their squares, into *frob (by Kahan's theorem
 * the k values are within it of k eigenvalues of A, multiplicity
 * counted). Either may be NULL.
 */
void lanczos_residuals(const double *R, int b, const double *Y, int m, int k, double *max,
		       double *frob);

#endif
