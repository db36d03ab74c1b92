/* fit.c - least squares: lines, grouped lines, power laws, three-point parabolas (see fit.h). */
#include "fit.h"

#include <math.h>
#include <stdlib.h>

enum { LS_MAXP = 2 };   /* regressors the core solves for */

/* An ordinary least-squares fit of y on p regressors, one intercept per group. */
struct ls {
	size_t groups;                      /* groups with points: the intercepts */
	double adj[LS_MAXP][LS_MAXP], det;  /* (X^T X)^-1 = adj / det, X the centred regressors */
	double beta[LS_MAXP], se[LS_MAXP];  /* coefficients and their standard errors */
	double icpt, icpt_se;               /* ungrouped: ym - beta . xm and its se; else NaN */
	double rss, tss, sigma2;            /* residual and total (centred) sums of squares */
};

/*
 * The core of every fit: x[a][i] (a < p) and y[i] centred on their group
 * means (group NULL: one group), the centred sums accumulated, the p x p
 * normal equations solved by the adjugate (p = 1: slope = Sxy/Sxx), then
 * the residuals, sigma^2 = RSS/(n - groups - p), the standard errors
 * sqrt(sigma^2 (X^T X)^-1_aa) and, ungrouped, the intercept with its
 * standard error sqrt(sigma^2 (1/n + xm^T (X^T X)^-1 xm)). Centring
 * first keeps the sums accurate far from the origin and the system well
 * conditioned. SW_EDATA for a value that is not finite, too few points,
 * a regressor with no spread (p = 1) or two that vary together (p = 2).
 */
static int ls_fit(const double *const *x, int p, const double *y, const size_t *group,
		  size_t n, size_t ngroups, struct ls *ls, struct sw_err *err)
{
	size_t ng = ngroups ? ngroups : 1, used = 0;
	double *m = calloc(ng * (size_t)(p + 1), sizeof *m);   /* group g: x means, then y's */
	size_t *cnt = calloc(ng, sizeof *cnt);
	double sxx[LS_MAXP][LS_MAXP] = {{0}}, sxy[LS_MAXP] = {0}, syy = 0, rss = 0;
	int rc = SW_OK;

	ls->groups = ngroups;
	ls->det = ls->icpt = ls->icpt_se = ls->rss = ls->tss = ls->sigma2 = NAN;
	for (int a = 0; a < LS_MAXP; a++)
		ls->beta[a] = ls->se[a] = NAN;
	if (!m || !cnt) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t g = group ? group[i] : 0;
		int finite = isfinite(y[i]);
		for (int a = 0; a < p; a++)
			finite = finite && isfinite(x[a][i]);
		if (!finite) {
			rc = sw_fail(err, SW_EDATA, "point %zu of the fit is not finite (%g, %g)",
				     i + 1, x[0][i], y[i]);
			goto out;
		}
		if (g >= ngroups) {
			rc = sw_fail(err, SW_ESOFTWARE, "point %zu: group %zu out of range", i + 1, g);
			goto out;
		}
		for (int a = 0; a < p; a++)
			m[g * (size_t)(p + 1) + (size_t)a] += x[a][i];
		m[g * (size_t)(p + 1) + (size_t)p] += y[i];
		cnt[g]++;
	}
	for (size_t g = 0; g < ngroups; g++) {
		if (cnt[g]) {
			for (int a = 0; a <= p; a++)
				m[g * (size_t)(p + 1) + (size_t)a] /= (double)cnt[g];
			used++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const double *mg = m + (group ? group[i] : 0) * (size_t)(p + 1);
		double d[LS_MAXP], dy = y[i] - mg[p];
		for (int a = 0; a < p; a++)
			d[a] = x[a][i] - mg[a];
		for (int a = 0; a < p; a++) {
			sxy[a] += d[a] * dy;
			for (int b = 0; b < p; b++)
				sxx[a][b] += d[a] * d[b];
		}
		syy += dy * dy;
	}
	if (n < used + (size_t)p || n < (size_t)p + 1) {
		size_t need = used + (size_t)p > (size_t)p + 1 ? used + (size_t)p : (size_t)p + 1;
		rc = sw_fail(err, SW_EDATA, "%zu point%s: a %s needs at least %zu", n,
			     n == 1 ? "" : "s", p == 1 ? "line" : "fit", need);
		goto out;
	}
	if (p == 1) {
		if (!(sxx[0][0] > 0)) {
			rc = sw_fail(err, SW_EDATA, "%s x: no slope can be fitted",
				     used > 1 ? "no group has two distinct values of" : "every point has the same");
			goto out;
		}
		ls->det = sxx[0][0];
		ls->adj[0][0] = 1;
	} else {
		ls->det = sxx[0][0] * sxx[1][1] - sxx[0][1] * sxx[1][0];
		/* |correlation| = 1 - 1e-10: one regressor is a function of the other */
		if (ls->det <= 1e-10 * sxx[0][0] * sxx[1][1]) {
			rc = sw_fail(err, SW_EDATA,
				     "the two regressors vary together across the %zu points: their exponents cannot be told apart",
				     n);
			goto out;
		}
		ls->adj[0][0] = sxx[1][1];
		ls->adj[1][1] = sxx[0][0];
		ls->adj[0][1] = -sxx[0][1];
		ls->adj[1][0] = -sxx[1][0];
	}
	for (int a = 0; a < p; a++) {
		double s = 0;
		for (int b = 0; b < p; b++)
			s += ls->adj[a][b] * sxy[b];
		ls->beta[a] = s / ls->det;
	}
	for (size_t i = 0; i < n; i++) {
		const double *mg = m + (group ? group[i] : 0) * (size_t)(p + 1);
		double r = y[i] - mg[p];
		for (int a = 0; a < p; a++)
			r -= ls->beta[a] * (x[a][i] - mg[a]);
		rss += r * r;
	}
	ls->rss = rss;
	ls->tss = syy;
	ls->sigma2 = n > used + (size_t)p ? rss / (double)(n - used - (size_t)p) : NAN;
	for (int a = 0; a < p; a++)
		ls->se[a] = sqrt(ls->sigma2 * ls->adj[a][a] / ls->det);
	if (!group) {
		double q = 0;
		ls->icpt = m[p];
		for (int a = 0; a < p; a++) {
			ls->icpt -= ls->beta[a] * m[a];
			for (int b = 0; b < p; b++)
				q += m[a] * ls->adj[a][b] * m[b];
		}
		ls->icpt_se = sqrt(ls->sigma2 * (1.0 / (double)n + q / ls->det));
	}
	ls->groups = used;
out:
	free(m);
	free(cnt);
	return rc;
}

static int line_fit(const double *x, const double *y, const size_t *group,
		    size_t n, size_t ngroups, struct fit_line *f, struct sw_err *err)
{
	struct ls ls;
	int rc = ls_fit(&x, 1, y, group, n, ngroups, &ls, err);

	f->n = n;
	f->groups = ls.groups;
	f->slope = ls.beta[0];
	f->slope_se = ls.se[0];
	f->intercept = ls.icpt;
	f->intercept_se = ls.icpt_se;
	f->rss = ls.rss;
	f->r2 = rc == SW_OK && ls.tss > 0 ? 1 - ls.rss / ls.tss : NAN;
	return rc;
}

int fit_line(const double *x, const double *y, size_t n, struct fit_line *f,
	     struct sw_err *err)
{
	return line_fit(x, y, NULL, n, 1, f, err);
}

int fit_line_grouped(const double *x, const double *y, const size_t *group,
		     size_t n, size_t ngroups, struct fit_line *f,
		     struct sw_err *err)
{
	return line_fit(x, y, group, n, ngroups, f, err);
}

/* ln v[i] into l[i], and whether ln v varies (relative to its size) */
static int log_varies(const double *v, int64_t n, double *l)
{
	double lo = INFINITY, hi = -INFINITY;

	for (int64_t i = 0; i < n; i++) {
		l[i] = log(v[i]);
		lo = fmin(lo, l[i]);
		hi = fmax(hi, l[i]);
	}
	/* equal up to rounding of the stored values: no information */
	return hi - lo > 1e-9 * (1 + fmax(fabs(lo), fabs(hi)));
}

int powerfit_fit(const double *y, const double *x1, const double *x2, int64_t n,
		 struct powerfit *o, struct sw_err *err)
{
	const double *x[2] = {x1, x2}, *used[2];
	double *ly = NULL, *lx[2] = {NULL, NULL};
	int idx[2], p = 0, yvar, rc;
	struct ls ls = {0};

	o->n = n;
	o->a1 = o->se1 = o->a2 = o->se2 = o->c = o->r2 = o->rmse = NAN;
	for (int64_t i = 0; i < n; i++)
		if (!(y[i] > 0) || !(x1[i] > 0) || (x2 && !(x2[i] > 0)))
			return sw_fail(err, SW_EDATA, "point %lld: values must be positive for a log-log fit",
				       (long long)i + 1);
	if (n < 2)
		return sw_fail(err, SW_EDATA, "%lld point%s: a fit needs at least 2",
			       (long long)n, n == 1 ? "" : "s");
	if (!(ly = malloc(3 * (size_t)n * sizeof *ly)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	yvar = log_varies(y, n, ly);
	for (int r = 0; r < 2; r++) {
		lx[r] = ly + (size_t)(r + 1) * (size_t)n;
		if (x[r] && log_varies(x[r], n, lx[r])) {
			idx[p] = r;
			used[p++] = lx[r];
		}
	}
	if (p == 0)
		rc = sw_fail(err, SW_EDATA, "no regressor varies across the %lld points", (long long)n);
	else if (n <= p)
		rc = sw_fail(err, SW_EDATA, "%lld points for %d exponents and a prefactor",
			     (long long)n, p);
	else
		rc = ls_fit(used, p, ly, NULL, (size_t)n, 1, &ls, err);
	free(ly);
	if (rc)
		return rc;
	for (int a = 0; a < p; a++) {
		if (idx[a] == 0) {
			o->a1 = ls.beta[a];
			o->se1 = ls.se[a];
		} else {
			o->a2 = ls.beta[a];
			o->se2 = ls.se[a];
		}
	}
	o->c = exp(ls.icpt);
	o->rmse = sqrt(ls.rss / (double)n);
	o->r2 = yvar && ls.tss > 0 ? 1 - ls.rss / ls.tss : (ls.rss <= 1e-24 ? 1 : 0);
	return SW_OK;
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
