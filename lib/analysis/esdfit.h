/*
 * esdfit.h - heavy-tail statistics of a weight matrix's empirical
 * spectral density (ESD), the numbers WeightWatcher reports, from the
 * singular values sw-spectrum computes.
 *
 * The eigenvalues are those of the correlation matrix X = W^T W / N of a
 * rows x cols matrix W, N = max(rows, cols), M = min(rows, cols):
 * lambda_i = sigma_i^2 / N, M of them (WeightWatcher's normalization
 * before 0.6.5; since then it leaves out the 1/N, which changes x_min and
 * lambda_max by a factor N, not alpha or D). The log norms and
 * alpha_weighted are on WeightWatcher's scale, of sigma^2.
 *
 * Power law (Clauset, Shalizi and Newman 2009, "Power-law distributions
 * in empirical data", section 3): the tail lambda >= x_min is fitted by the
 * continuous maximum-likelihood estimator
 *     alpha = 1 + n_tail / sum_{lambda_i >= x_min} ln(lambda_i / x_min),
 * standard error (alpha - 1) / sqrt(n_tail), and x_min is the candidate
 * (every distinct positive eigenvalue but the largest: a discrete scan of
 * the continuous fit) whose fit has the smallest Kolmogorov-Smirnov
 * distance between the tail's empirical CDF and the fitted one,
 *     D = max_j |1 - (lambda_j / x_min)^(1 - alpha) - j / n_tail|
 * over the tail sorted ascending, j = 0 .. n_tail - 1 (their plfit's and
 * WeightWatcher's). The first (smallest) x_min wins a tie.
 *
 * Marchenko-Pastur: a random N x M matrix with i.i.d. entries of variance
 * s^2 has the eigenvalues of X on [s^2 (1 - sqrt(M/N))^2, s^2 (1 +
 * sqrt(M/N))^2]. s^2 is fitted to the bulk by its median (the MP law's
 * median, computed by quadrature, times s^2 equals the median of the
 * eigenvalues at or below the edge, iterated until that set no longer
 * changes), robust to the outliers a trained matrix has; the eigenvalues
 * above the edge lambda_+ are its spikes.
 */
#ifndef SW_ESDFIT_H
#define SW_ESDFIT_H

#include <stdint.h>

#include "../base/status.h"

struct esdfit_powerlaw {
	double alpha, alpha_se;
	double xmin;
	double D;               /* the Kolmogorov-Smirnov distance */
	int64_t tail;           /* eigenvalues >= xmin */
};

/*
 * The fit over the n values x (any order; values <= 0 are left out), as
 * above. SW_EDATA when fewer than two distinct positive values leave no
 * candidate (nothing to fit); SW_ESOFTWARE for memory.
 */
int esdfit_powerlaw(const double *x, int64_t n, struct esdfit_powerlaw *out,
		    struct sw_err *err);

/* The KS distance of the power law (xmin, alpha) to the tail of the
 * ascending values x[0..n) from index i (x[i] = xmin): the D above. */
double esdfit_ks(const double *x, int64_t n, int64_t i, double alpha);

struct esdfit_mp {
	double sigma2;          /* the entries' variance s^2 */
	double lo, edge;        /* the bulk: lambda_-, lambda_+ */
	int64_t spikes;         /* eigenvalues above edge */
	int iterations;
};

/* The median of the Marchenko-Pastur law with s^2 = 1 and ratio
 * y = M/N in (0, 1]. */
double esdfit_mp_median(double y);

/* The MP density at x for s^2 and y (0 outside the bulk). */
double esdfit_mp_density(double x, double sigma2, double y);

/* Fit the bulk of the m eigenvalues lam (any order) of X with ratio
 * y = M/N. SW_EDATA when there is no positive eigenvalue. */
int esdfit_mp(const double *lam, int64_t m, double y, struct esdfit_mp *out,
	      struct sw_err *err);

/* Every number of one matrix's row. */
struct esdfit_result {
	int64_t count;          /* eigenvalues, M */
	double lambda_max;
	struct esdfit_powerlaw pl;
	/* WeightWatcher's, on its scale (sigma^2, no 1/N; esdfit.c says where
	 * from): */
	double alpha_weighted;  /* alpha log10 sigma_max^2 = alpha log_spectral_norm */
	double log_spectral_norm;       /* log10 sigma_max^2 = log10 ||W||_2^2 */
	double log_norm;        /* log10 sum sigma^2 = log10 ||W||_F^2 */
	struct esdfit_mp mp;
};

/*
 * When a fit is not to be trusted, as WeightWatcher labels its layers
 * (its `warning` field): a bit each, esdfit_warnings.
 *   ESDFIT_SHORT_TAIL: fewer than ESDFIT_MIN_TAIL eigenvalues in the tail.
 *     The estimator's standard error is (alpha - 1) / sqrt(n) and its bias
 *     of order 1/n (Clauset, Shalizi and Newman 2009, section 3); below 50
 *     points the choice of x_min moves alpha by more than that error
 *     (WeightWatcher fits no matrix of fewer than 50 eigenvalues by
 *     default, its min_evals: "the power law fits need at least 50
 *     eigenvalues to make sense").
 *   ESDFIT_OVER_TRAINED: alpha < ESDFIT_ALPHA_LOW (2), and
 *   ESDFIT_UNDER_TRAINED: alpha > ESDFIT_ALPHA_HIGH (6): outside the range
 *     of well-trained layers of heavy-tailed self-regularization (Martin
 *     and Mahoney 2021, JMLR 22(165)), WeightWatcher's labels
 *     over-trained and under-trained.
 */
#define ESDFIT_MIN_TAIL 50
#define ESDFIT_ALPHA_LOW 2.0
#define ESDFIT_ALPHA_HIGH 6.0
enum {
	ESDFIT_SHORT_TAIL = 1,
	ESDFIT_OVER_TRAINED = 2,
	ESDFIT_UNDER_TRAINED = 4
};
unsigned esdfit_warnings(const struct esdfit_powerlaw *pl);
/* The warnings as the warn column prints them: their names joined by
 * commas, short-tail, over-trained, under-trained, in that order; "" for
 * none. */
const char *esdfit_warn_text(unsigned warnings);

/*
 * From the singular values s (k = min(rows, cols) of them, any order) of
 * a rows x cols matrix: lambda = s^2 / N, then the fits. lam (k entries,
 * may be NULL) receives the eigenvalues, descending. SW_EDATA as the fits
 * (a zero matrix).
 */
int esdfit_matrix(const double *s, int64_t k, int64_t rows, int64_t cols, double *lam,
		  struct esdfit_result *out, struct sw_err *err);

/*
 * WeightWatcher's randomized ESD (its analyze(randomize=True),
 * apply_random_esd and apply_mp_fit(random=True)): the matrix's elements
 * shuffled, so that the correlations between them are gone but their
 * distribution stays; the shuffled matrix's eigenvalues follow the
 * Marchenko-Pastur law unless a few elements are large enough to stand
 * out as eigenvalues of their own, its correlation traps (Martin and
 * Mahoney; WeightWatcher's rand_num_spikes). The Tracy-Widom margin is
 * WeightWatcher's: an eigenvalue of the shuffled matrix is a trap above
 *     s^2 (e + sqrt(sqrt(y) e^(2/3) M^(-2/3))),  e = (1 + sqrt(y))^2,
 * in the units where the fitted s^2 is 1 (WeightWatcher rescales to mean
 * eigenvalue 1 and fits s by a kernel density; s^2 here is esdfit_mp's
 * fit of the bulk's median).
 */
struct esdfit_random {
	double lambda_max;      /* the shuffled matrix's largest lambda */
	double mp_edge;         /* its bulk's edge s^2 (1 + sqrt(y))^2 */
	double trap_edge;       /* that plus the Tracy-Widom margin */
	int64_t traps;          /* its eigenvalues above trap_edge */
	double softrank;        /* lambda_max / the original's: WeightWatcher's ww_softrank */
};

/* The n elements of w in a uniformly random order, Fisher-Yates over the
 * generator seeded with seed: the same seed, the same order. */
void esdfit_shuffle(float *w, int64_t n, uint64_t seed);

/* From the singular values s (k of them) of the shuffled rows x cols
 * matrix and the original's lambda_max: the numbers above. SW_EDATA
 * as esdfit_mp. */
int esdfit_randomized(const double *s, int64_t k, int64_t rows, int64_t cols, double lambda_max,
		      struct esdfit_random *out, struct sw_err *err);

#endif
