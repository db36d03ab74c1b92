/* powerfit.c - log-log least squares with standard errors (see powerfit.h). */
#include "powerfit.h"

#include <math.h>
#include <stdlib.h>

/* Mean of ln x over n points, and whether ln x varies (relative to its size). */
static double mean_log(const double *x, int64_t n, int *varies)
{
	double m = 0, lo = INFINITY, hi = -INFINITY;

	for (int64_t i = 0; i < n; i++) {
		double l = log(x[i]);
		m += l;
		lo = fmin(lo, l);
		hi = fmax(hi, l);
	}
	/* equal up to rounding of the stored values: no information */
	*varies = hi - lo > 1e-9 * (1 + fmax(fabs(lo), fabs(hi)));
	return m / (double)n;
}

int powerfit_fit(const double *y, const double *x1, const double *x2, int64_t n,
		 struct powerfit *o, struct sw_err *err)
{
	const double *x[2] = {x1, x2};
	double mx[2] = {0, 0}, my, sxx[2][2] = {{0, 0}, {0, 0}}, sxy[2] = {0, 0}, syy = 0;
	double inv[2][2], beta[2] = {NAN, NAN}, rss = 0, s2, det;
	int use[2] = {0, 0}, idx[2], p = 0, yvar;

	o->n = n;
	o->a1 = o->se1 = o->a2 = o->se2 = o->c = o->r2 = o->rmse = NAN;
	for (int64_t i = 0; i < n; i++)
		if (!(y[i] > 0) || !(x1[i] > 0) || (x2 && !(x2[i] > 0)))
			return sw_fail(err, SW_EDATA, "point %lld: values must be positive for a log-log fit",
				       (long long)i + 1);
	if (n < 2)
		return sw_fail(err, SW_EDATA, "%lld point%s: a fit needs at least 2",
			       (long long)n, n == 1 ? "" : "s");
	my = mean_log(y, n, &yvar);
	for (int r = 0; r < 2; r++)
		if (x[r]) {
			mx[r] = mean_log(x[r], n, &use[r]);
			if (use[r])
				idx[p++] = r;
		}
	if (p == 0)
		return sw_fail(err, SW_EDATA, "no regressor varies across the %lld points", (long long)n);
	if (n <= p)
		return sw_fail(err, SW_EDATA, "%lld points for %d exponents and a prefactor",
			       (long long)n, p);
	/* centered sums: the intercept drops out and the 2x2 system stays
	 * well conditioned */
	for (int64_t i = 0; i < n; i++) {
		double dy = log(y[i]) - my, d[2];
		for (int a = 0; a < p; a++)
			d[a] = log(x[idx[a]][i]) - mx[idx[a]];
		for (int a = 0; a < p; a++) {
			sxy[a] += d[a] * dy;
			for (int b = 0; b < p; b++)
				sxx[a][b] += d[a] * d[b];
		}
		syy += dy * dy;
	}
	if (p == 1) {
		inv[0][0] = 1 / sxx[0][0];
	} else {
		det = sxx[0][0] * sxx[1][1] - sxx[0][1] * sxx[1][0];
		/* |correlation| = 1 - 1e-10: one regressor is a function of the other */
		if (det <= 1e-10 * sxx[0][0] * sxx[1][1])
			return sw_fail(err, SW_EDATA,
				       "the two regressors vary together across the %lld points: their exponents cannot be told apart",
				       (long long)n);
		inv[0][0] = sxx[1][1] / det;
		inv[1][1] = sxx[0][0] / det;
		inv[0][1] = inv[1][0] = -sxx[0][1] / det;
	}
	for (int a = 0; a < p; a++) {
		beta[a] = 0;
		for (int b = 0; b < p; b++)
			beta[a] += inv[a][b] * sxy[b];
	}
	for (int64_t i = 0; i < n; i++) {
		double r = log(y[i]) - my;
		for (int a = 0; a < p; a++)
			r -= beta[a] * (log(x[idx[a]][i]) - mx[idx[a]]);
		rss += r * r;
	}
	s2 = n > p + 1 ? rss / (double)(n - p - 1) : NAN;
	{
		double icpt = my, se[2];
		for (int a = 0; a < p; a++) {
			icpt -= beta[a] * mx[idx[a]];
			se[a] = sqrt(s2 * inv[a][a]);
		}
		for (int a = 0; a < p; a++) {
			if (idx[a] == 0) {
				o->a1 = beta[a];
				o->se1 = se[a];
			} else {
				o->a2 = beta[a];
				o->se2 = se[a];
			}
		}
		o->c = exp(icpt);
	}
	o->rmse = sqrt(rss / (double)n);
	o->r2 = yvar && syy > 0 ? 1 - rss / syy : (rss <= 1e-24 ? 1 : 0);
	return SW_OK;
}
