/*
 * fit.h - least-squares fits for the diagnostics: a straight line with the
 * standard errors of its coefficients and R^2 (the Q/K drift slope of
 * log2_ratio against steps; power laws as lines in log-log, e.g. the
 * optimal-norm paper's eta*(D) and B*(D)), the same line with one
 * intercept per group (one exponent shared by several model sizes), and the
 * parabola through three points (refining a minimum found on a grid).
 *
 * Everything is in double. x is centred before the sums, so a slope over
 * steps 10^6..10^6+100 is as accurate as over 0..100.
 */
#ifndef SW_FIT_H
#define SW_FIT_H

#include <stddef.h>

#include "status.h"

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
 * The parabola through (x[i], y[i]), i = 0..2 (distinct x): when it opens
 * upward, its vertex in *xv, *yv and 0; -1 otherwise (a line or a maximum:
 * no interior minimum).
 */
int fit_parabola_vertex(const double x[3], const double y[3], double *xv, double *yv);

/* The value at xv of the parabola through three points (Lagrange). */
double fit_interp3(const double x[3], const double y[3], double xv);

#endif
