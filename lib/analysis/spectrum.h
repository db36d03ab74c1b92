/*
 * spectrum.h - singular-value spectra of weight matrices, for the spectra
 * paper's checks (weight-decay-scaling-spectra, section 4: under AdamW in
 * steady state every sigma_i(W) scales as sqrt(lr/wd), its shape unchanged).
 *
 * Full spectra come from the Gram matrix of the smaller side, formed in
 * double precision from the float32 data (dsyrk on panels converted to
 * double) and diagonalized by LAPACK dsyevd (values only): measured faster
 * than sgesdd on the float32 matrix, and more accurate - sgesdd's float32
 * bidiagonalization leaves sigma_i >= 1e-4 sigma_max with relative errors
 * up to 1e-4, the Gram matrix in double leaves them below 1e-7 (the
 * squared condition number costs 1e-8 of double's 1e-16).
 *
 * The top K values come from block Lanczos on the same Gram operator with
 * full reorthogonalization and thick restarts, one fused pass over W per
 * block step, stopped by a residual bound (see spectrum_top). Its
 * reorthogonalization, Ritz pairs and residual norms are lanczos.h's core,
 * which the single-vector Lanczos of sw-hessian runs on too.
 *
 * Views (gram.h) address a row slice (one head of q, k, v) or a column
 * slice (one head of o) in place, float32, bf16 or f16, and may scale the
 * columns.
 */
#ifndef SW_SPECTRUM_H
#define SW_SPECTRUM_H

#include <stdint.h>

#include "gram.h"
#include "../base/status.h"
#include "../base/tensor.h"

/* --top's guaranteed relative accuracy of each sigma_i */
#define SPECTRUM_TOP_REL_TOL 1e-5

/* One pass over the view: sum of squares in double and the number of NaN
 * or Inf entries. SW_ESOFTWARE if out of memory. */
struct spec_scan {
	double frob_sq;
	int64_t nonfinite;
};
int spectrum_scan(const struct spec_view *v, struct spec_scan *out, struct sw_err *err);

/*
 * Every singular value, descending, into s (min(rows, cols) entries), and
 * the view's squared Frobenius norm into *frob_sq (may be NULL). sigma_i
 * >= 1e-4 sigma_max are within 1e-5 relative of a double-precision SVD of
 * the float32 matrix (measured: below 1e-7); smaller ones carry an
 * absolute error of about 1e-7 sigma_max. SW_EDATA naming how many values
 * are NaN or Inf; SW_ESOFTWARE if memory runs out or LAPACK fails.
 */
int spectrum_full(const struct spec_view *v, double *s, double *frob_sq,
		  struct sw_err *err);

/*
 * spectrum_full, and besides the top nvec (cut to min(rows, cols))
 * eigenvectors of the Gram matrix it diagonalizes, the largest first, one
 * after another in vec: right singular vectors (cols entries each) when
 * rows >= cols, left ones (rows entries) when rows < cols. The values are
 * spectrum_full's bit for bit (the same dsyevd on the same Gram matrix);
 * the vectors come from dsyevr on a copy. A vector's sign is arbitrary,
 * and vectors of equal values are any basis of their span.
 */
int spectrum_full_vectors(const struct spec_view *v, double *s, double *frob_sq, int64_t nvec,
			  double *vec, struct sw_err *err);

struct spectrum_top_info {
	const char *method;     /* "lanczos", or "full" for small matrices */
	int block;              /* block size of the Lanczos steps */
	int steps;              /* block steps = passes over W */
	int single_steps;       /* of them, in float32 (the search) */
	int restarts;
	double rel_bound;       /* proven bound on each sigma_i's relative error */
};

/*
 * The k largest singular values, descending, into s (k entries; k is cut
 * to min(rows, cols)). Block Lanczos on the Gram operator W^T W (gram.h),
 * block size p = max(2, min(k, 16)) (a value repeated up to p times comes
 * out with its multiplicity), full reorthogonalization, thick restart
 * keeping the best Ritz vectors. The search applies the operator in
 * float32 (gram_apply_single; k <= 16), then checks its top Ritz vectors
 * with one application in double, and goes on in double only if the check
 * fails. Stops when the top-k residual block R, computed in double,
 * satisfies ||R||_F <= rel_tol * theta_k: by Kahan's theorem each Ritz value
 * theta_i is then within ||R||_2 of its own eigenvalue of W^T W (with
 * multiplicity), so each sigma_i = sqrt(theta_i) has relative error at most
 * rel_tol / 2. Small matrices, or k near min(rows, cols), use
 * spectrum_full. SW_EDATA for NaN/Inf, SW_ESOFTWARE if not converged
 * after 5000 steps or out of memory.
 */
int spectrum_top(const struct spec_view *v, int64_t k, double rel_tol, double *s,
		 double *frob_sq, struct spectrum_top_info *info,
		 struct sw_err *err);

/*
 * The largest singular value alone: spectrum_top with k = 1 (a block of
 * two vectors: it needs fewer passes over W where the top of the spectrum
 * has no gap), stopped when sigma's relative error is at most rel_tol / 2
 * by the residual bound. start (NULL, or cols entries, not all zero) is
 * the block's first vector: a warm start, such as the top right singular
 * vector of a matrix near this one; the bound is the same either way.
 * frob_sq: the view's squared Frobenius norm when the caller has it, with
 * every value checked finite (sw-norms' own pass), so the view is not
 * scanned again; negative when not known.
 * When Lanczos ran (out->method "lanczos"), and top_vec is not NULL, the
 * top right singular vector found (cols entries, unit length) is written
 * there.
 */
struct sigma_info {
	double sigma;           /* sigma_max of the view (its columns scaled) */
	int iterations;         /* block Lanczos steps (0: the dense method) */
	double rel_bound;       /* bound on the relative error of sigma */
	const char *method;     /* "full" or "lanczos" */
};
int spectrum_sigma_max(const struct spec_view *v, double rel_tol, const double *start,
		       double frob_sq, double *top_vec, struct sigma_info *out,
		       struct sw_err *err);

/*
 * sigma_max of W (raw) and of W diag(col_scale) (scaled) for a view with
 * col_scale set, as two spectrum_sigma_max runs from the same start that
 * share their passes over W while both search in the same arithmetic: a
 * block of four vectors where each run has two, for about the cost of one
 * run where reading W is the bound (the output head in float32). Each
 * result is the one its own run gives, with its own bound. frob_sq and
 * scaled_frob_sq as spectrum_sigma_max's frob_sq.
 */
int spectrum_sigma_max_pair(const struct spec_view *v, double rel_tol, double frob_sq,
			    double scaled_frob_sq, struct sigma_info *raw,
			    struct sigma_info *scaled, struct sw_err *err);

/* One row of --summary. stable rank ||W||_F^2 / sigma_max^2, effective
 * rank exp(-sum p_i ln p_i) with p_i = sigma_i / sum sigma: extras from
 * none of the papers (docs/numerics.md). condition is inf when sigma_min = 0. */
struct spectrum_summary {
	double sigma_max, sigma_min;
	double stable_rank, effective_rank, condition;
	double frobenius;
	int64_t count;
};
void spectrum_summarize(const double *s, int64_t n, double frob_sq,
			struct spectrum_summary *out);

/*
 * The empirical spectral density of the positive sigma_i over bins
 * log-spaced from the smallest positive to the largest sigma (a spectrum
 * with one distinct value gets [sigma/1.01, sigma*1.01]). count is how many
 * fall in [lo, hi) (the last bin is closed), density = count / (n (hi -
 * lo)) with n all the values, so the bins integrate to the fraction of
 * positive values. Returns the number of zero values (in no bin).
 */
struct spectrum_bin {
	double lo, hi;
	int64_t count;
	double density;
};
int64_t spectrum_hist(const double *s, int64_t n, int bins, struct spectrum_bin *out);

/*
 * The tensor's equilibrium scale under AdamW from its own lr and wd (eta,
 * lambda): sqrt(eta/lambda) for coupled weight decay (W <- W - eta(G +
 * lambda W)), eta/sqrt(lambda) for independent (W <- W - lambda W), where
 * the update and the decay balance. SW_EDATA naming what is missing: lr or
 * wd unknown, wd_mode unknown or none, wd <= 0, lr <= 0.
 */
int spectrum_equilibrium_scale(const struct sw_tensor_info *t, double *scale,
			       struct sw_err *err);

#endif
