/*
 * fit.h - the least-squares fits of the diagnostics, one module: a
 * straight line with the standard errors of its coefficients and R^2, the
 * same line with one intercept per group, the power law
 * ln y = ln c + a1 ln x1 + a2 ln x2 across a sweep of runs, and the
 * parabola through three points. The lines and the power law share one
 * ordinary least-squares core (fit.c): regressors and y centred (within
 * groups), the small normal equations solved, sigma^2 = RSS/(n - p -
 * intercepts), standard errors sqrt(sigma^2 (X^T X)^-1), R^2.
 *
 * Uses: the Q/K drift slope of log2_ratio against steps (qkdrift), power
 * laws as lines in log-log with a shared exponent across model sizes (the
 * optimal-norm paper's eta*(D), B*(D): transfer), the spectra paper's
 * sigma_top ~ sqrt(lr/wd)^a1 d^a2 with exponents fitted, never assumed
 * (spectra), and a minimum found on a grid refined by a parabola
 * (transfer). Everything is in double; centring keeps a slope over steps
 * 10^6..10^6+100 as accurate as over 0..100.
 */
#ifndef SW_FIT_H
#define SW_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

struct fit_line {
	size_t n;               /* points */
	size_t groups;          /* intercepts: 1 for fit_line */
	double slope, slope_se;
	double intercept, intercept_se;  /* NaN for a grouped fit */
	double r2;              /* 1 - RSS/TSS (TSS within groups); NaN if TSS = 0 */
	double rss;             /* residual sum of squares */
};

/*
 * y = intercept + slope x by ordinary least squares. The standard errors
 * are the usual ones, sigma^2 = RSS/(n - 2): slope_se = sqrt(sigma^2/Sxx),
 * intercept_se = sqrt(sigma^2 (1/n + mean(x)^2/Sxx)); NaN when n = 2 (no
 * degree of freedom left). SW_EDATA if n < 2, all x are equal, or a value
 * is not finite.
 */
int fit_line(const double *x, const double *y, size_t n, struct fit_line *f,
	     struct sw_err *err);

/*
 * y = a_g + slope x with one intercept a_g per group (group[i] in
 * 0..ngroups-1; the fixed-effects estimator: the slope from the deviations
 * of x and y from their group means). sigma^2 = RSS/(n - groups - 1).
 * With one group it is fit_line's slope. SW_EDATA if no group has two
 * distinct x, n <= groups, or a value is not finite.
 */
int fit_line_grouped(const double *x, const double *y, const size_t *group,
		     size_t n, size_t ngroups, struct fit_line *f,
		     struct sw_err *err);

/*
 * Power laws: ln y = ln c + a1 ln x1 + a2 ln x2. A regressor that takes
 * one value across the points carries no information and is left out (its
 * exponent is reported unknown, NaN); two regressors that vary together
 * (ln x2 an affine function of ln x1, as in a sweep that scales lr/wd with
 * the width) cannot be told apart and the fit fails with a message saying
 * so.
 */
struct powerfit {
	int64_t n;              /* points used */
	double a1, se1;         /* exponent of x1 and its standard error (NaN: x1 constant) */
	double a2, se2;         /* exponent of x2 and its standard error (NaN: x2 constant) */
	double c;               /* prefactor exp(intercept) */
	double r2;              /* coefficient of determination (1 when y is constant and fitted) */
	double rmse;            /* root mean square residual of ln y */
};

/*
 * Fit ln y against ln x1 and ln x2 over n points (all values > 0; x2 may
 * be NULL). Standard errors are the usual OLS ones, s^2 (X^T X)^-1 with
 * s^2 = RSS / (n - p); NaN when n equals the number of parameters p.
 * SW_EDATA (with the reason) if a value is not positive or not finite,
 * fewer points than parameters, nothing varies, or the regressors are
 * collinear.
 */
int powerfit_fit(const double *y, const double *x1, const double *x2, int64_t n,
		 struct powerfit *out, struct sw_err *err);

/*
 * The parabola through (x[i], y[i]), i = 0..2 (distinct x): when it opens
 * upward, its vertex in *xv, *yv and 0; -1 otherwise (a line or a maximum:
 * no interior minimum).
 */
int fit_parabola_vertex(const double x[3], const double y[3], double *xv, double *yv);

/* The value at xv of the parabola through three points (Lagrange). */
double fit_interp3(const double x[3], const double y[3], double xv);

#endif
