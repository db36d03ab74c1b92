/* fit.c - least-squares lines and three-point parabolas (see fit.h). */
#include "fit.h"

#include <math.h>
#include <stdlib.h>

/*
 * The common slope of lines with one intercept per group: sums of the
 * deviations from the group means (centring first keeps the sums accurate
 * far from the origin). Fills everything but the intercept.
 */
static int line_core(const double *x, const double *y, const size_t *group,
		     size_t n, size_t ngroups, struct fit_line *f, struct sw_err *err)
{
	double *sx = calloc(ngroups ? ngroups : 1, sizeof *sx);
	double *sy = calloc(ngroups ? ngroups : 1, sizeof *sy);
	size_t *cnt = calloc(ngroups ? ngroups : 1, sizeof *cnt);
	double sxx = 0, sxy = 0, syy = 0, rss = 0, sigma2;
	size_t used = 0;
	int rc = SW_OK;

	f->n = n;
	f->groups = ngroups;
	f->slope = f->slope_se = f->intercept = f->intercept_se = f->r2 = f->rss = NAN;
	if (!sx || !sy || !cnt) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t g = group ? group[i] : 0;
		if (!isfinite(x[i]) || !isfinite(y[i])) {
			rc = sw_fail(err, SW_EDATA, "point %zu of the fit is not finite (%g, %g)",
				     i + 1, x[i], y[i]);
			goto out;
		}
		if (g >= ngroups) {
			rc = sw_fail(err, SW_ESOFTWARE, "point %zu: group %zu out of range", i + 1, g);
			goto out;
		}
		sx[g] += x[i];
		sy[g] += y[i];
		cnt[g]++;
	}
	for (size_t g = 0; g < ngroups; g++) {
		if (cnt[g]) {
			sx[g] /= (double)cnt[g];
			sy[g] /= (double)cnt[g];
			used++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t g = group ? group[i] : 0;
		double dx = x[i] - sx[g], dy = y[i] - sy[g];
		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
	}
	if (n < used + 1 || n < 2) {
		rc = sw_fail(err, SW_EDATA, "%zu point%s: a line needs at least %zu", n,
			     n == 1 ? "" : "s", used + 1 > 2 ? used + 1 : 2);
		goto out;
	}
	if (!(sxx > 0)) {
		rc = sw_fail(err, SW_EDATA, "%s x: no slope can be fitted",
			     used > 1 ? "no group has two distinct values of" : "every point has the same");
		goto out;
	}
	f->slope = sxy / sxx;
	for (size_t i = 0; i < n; i++) {
		size_t g = group ? group[i] : 0;
		double r = (y[i] - sy[g]) - f->slope * (x[i] - sx[g]);
		rss += r * r;
	}
	f->rss = rss;
	f->r2 = syy > 0 ? 1 - rss / syy : NAN;
	sigma2 = n > used + 1 ? rss / (double)(n - used - 1) : NAN;
	f->slope_se = sqrt(sigma2 / sxx);
	if (!group) {
		f->intercept = sy[0] - f->slope * sx[0];
		f->intercept_se = sqrt(sigma2 * (1.0 / (double)n + sx[0] * sx[0] / sxx));
	}
	f->groups = used;
out:
	free(sx);
	free(sy);
	free(cnt);
	return rc;
}

int fit_line(const double *x, const double *y, size_t n, struct fit_line *f,
	     struct sw_err *err)
{
	return line_core(x, y, NULL, n, 1, f, err);
}

int fit_line_grouped(const double *x, const double *y, const size_t *group,
		     size_t n, size_t ngroups, struct fit_line *f,
		     struct sw_err *err)
{
	return line_core(x, y, group, n, ngroups, f, err);
}

/*
 * Newton form with divided differences: p(x) = y0 + d01 (x - x0)
 * + c (x - x0)(x - x1), c = [x0, x1, x2]; p'(x) = d01 + c (2x - x0 - x1)
 * vanishes at the vertex.
 */
int fit_parabola_vertex(const double x[3], const double y[3], double *xv, double *yv)
{
	double d01 = (y[1] - y[0]) / (x[1] - x[0]);
	double d12 = (y[2] - y[1]) / (x[2] - x[1]);
	double c = (d12 - d01) / (x[2] - x[0]);

	if (!(c > 0) || !isfinite(c))
		return -1;
	*xv = (x[0] + x[1]) / 2 - d01 / (2 * c);
	*yv = fit_interp3(x, y, *xv);
	return 0;
}

double fit_interp3(const double x[3], const double y[3], double xv)
{
	double s = 0;

	for (int i = 0; i < 3; i++) {
		double l = 1;
		for (int j = 0; j < 3; j++)
			if (j != i)
				l *= (xv - x[j]) / (x[i] - x[j]);
		s += y[i] * l;
	}
	return s;
}
