/*
 * powerfit.h - power laws fitted across a sweep of runs: ordinary least
 * squares of ln y = ln c + a1 ln x1 + a2 ln x2, with standard errors and
 * R^2. For the spectra paper's claims (sigma_top proportional to
 * sqrt(lr/wd) and to d^0.75 at fixed sqrt(lr/wd)) the exponents are fitted
 * from the data, never assumed.
 *
 * A regressor that takes one value across the points carries no
 * information and is left out (its exponent is reported unknown, NaN);
 * two regressors that vary together (ln x2 an affine function of ln x1,
 * as in a sweep that scales lr/wd with the width) cannot be told apart and
 * the fit fails with a message saying so.
 */
#ifndef SW_POWERFIT_H
#define SW_POWERFIT_H

#include <stdint.h>

#include "status.h"

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
 * SW_EDATA (with the reason) if a value is not positive, fewer points than
 * parameters, nothing varies, or the regressors are collinear.
 */
int powerfit_fit(const double *y, const double *x1, const double *x2, int64_t n,
		 struct powerfit *out, struct sw_err *err);

#endif
