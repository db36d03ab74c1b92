/*
 * Unit tests of lib/analysis/fit.c against values worked out by hand (and checked
 * with numpy's lstsq and the covariance sigma^2 (X^T X)^-1): a line with
 * known coefficients, standard errors and R^2, the same far from the
 * origin, the grouped (fixed-effects) slope, and the three-point parabola.
 */
#include <math.h>
#include <string.h>

#include "../../lib/analysis/fit.h"
#include "tap.h"

static void line_by_hand(void)
{
	/* x = 1..5, y = 1 3 2 5 4: Sxx = 10, Sxy = 8, RSS = 3.6, TSS = 10 */
	const double x[] = {1, 2, 3, 4, 5}, y[] = {1, 3, 2, 5, 4};
	double xs[5];
	struct fit_line f;
	struct sw_err err;
	int rc;

	ok(fit_line(x, y, 5, &f, &err) == SW_OK, "fit_line: 5 points");
	ok(close_rel(f.slope, 0.8, 1e-14) && close_rel(f.intercept, 0.6, 1e-13),
	   "slope 0.8, intercept 0.6: %.17g %.17g", f.slope, f.intercept);
	ok(close_rel(f.slope_se, sqrt(0.12), 1e-13), "slope se sqrt(1.2/10): %.17g", f.slope_se);
	ok(close_rel(f.intercept_se, sqrt(1.32), 1e-13), "intercept se sqrt(1.2 (1/5 + 9/10)): %.17g",
	   f.intercept_se);
	ok(close_rel(f.r2, 0.64, 1e-13) && close_rel(f.rss, 3.6, 1e-13), "R^2 0.64, RSS 3.6");

	/* the same points at x + 10^9: the slope and its se do not change */
	for (int i = 0; i < 5; i++)
		xs[i] = x[i] + 1e9;
	rc = fit_line(xs, y, 5, &f, &err);
	ok(rc == SW_OK && close_rel(f.slope, 0.8, 1e-12) && close_rel(f.slope_se, sqrt(0.12), 1e-12),
	   "far from the origin: slope %.17g se %.17g", f.slope, f.slope_se);
}

static void line_edges(void)
{
	const double x2[] = {0, 2}, y2[] = {1, 5}, same[] = {3, 3, 3}, y3[] = {1, 2, 3};
	const double bad[] = {0, 1, NAN};
	struct fit_line f;
	struct sw_err err;

	ok(fit_line(x2, y2, 2, &f, &err) == SW_OK && f.slope == 2 && f.intercept == 1 &&
	   isnan(f.slope_se) && isnan(f.intercept_se),
	   "two points: the line through them, no standard error (0 degrees of freedom)");
	ok(fit_line(x2, y2, 1, &f, &err) == SW_EDATA && strstr(err.msg, "1 point"),
	   "one point: SW_EDATA: %s", err.msg);
	ok(fit_line(same, y3, 3, &f, &err) == SW_EDATA && strstr(err.msg, "same x"),
	   "every x equal: SW_EDATA: %s", err.msg);
	ok(fit_line(y3, bad, 3, &f, &err) == SW_EDATA && strstr(err.msg, "not finite"),
	   "NaN: SW_EDATA: %s", err.msg);
	ok(fit_line(y3, y3, 3, &f, &err) == SW_OK && f.r2 == 1 && f.slope_se == 0,
	   "a perfect line: R^2 1, se 0");
	ok(fit_line(y3, same, 3, &f, &err) == SW_OK && f.slope == 0 && isnan(f.r2),
	   "constant y: slope 0, R^2 undefined (NaN)");
}

static void grouped(void)
{
	/* group 0: (0,0) (1,1) (2,3); group 1: (0,10) (2,12) (4,13):
	 * within Sxx = 2 + 8, Sxy = 3 + 6: slope 0.9; RSS = 37/30,
	 * sigma^2 = RSS/(6 - 2 - 1), se = sqrt(sigma^2/10), TSS 28/3 */
	const double x[] = {0, 1, 2, 0, 2, 4}, y[] = {0, 1, 3, 10, 12, 13};
	const size_t g[] = {0, 0, 0, 1, 1, 1}, one[] = {0, 0, 0, 0, 0, 0};
	struct fit_line f, l;
	struct sw_err err;

	ok(fit_line_grouped(x, y, g, 6, 2, &f, &err) == SW_OK, "grouped: two groups");
	ok(close_rel(f.slope, 0.9, 1e-14), "common slope 0.9: %.17g", f.slope);
	ok(close_rel(f.rss, 37.0 / 30, 1e-13) &&
	   close_rel(f.slope_se, sqrt(37.0 / 30 / 3 / 10), 1e-13),
	   "se sqrt(RSS/3/10) = 0.202758751: %.17g", f.slope_se);
	ok(close_rel(f.r2, 1 - (37.0 / 30) / (28.0 / 3), 1e-13), "within R^2 0.867857: %.17g", f.r2);
	ok(isnan(f.intercept) && f.groups == 2, "no single intercept");
	ok(fit_line_grouped(x, y, one, 6, 1, &f, &err) == SW_OK && fit_line(x, y, 6, &l, &err) == SW_OK &&
	   close_rel(f.slope, l.slope, 1e-14) && close_rel(f.slope_se, l.slope_se, 1e-13),
	   "one group: fit_line's slope and se");
	{
		/* each group a single point: no slope within groups */
		const size_t each[] = {0, 1};
		ok(fit_line_grouped(x, y, each, 2, 2, &f, &err) == SW_EDATA,
		   "one point per group: SW_EDATA: %s", err.msg);
	}
}

static void parabola(void)
{
	/* y = 3 (x - 0.3)^2 + 2 at unevenly spaced x */
	const double x[] = {-1, 0.5, 2};
	double y[3], xv = NAN, yv = NAN;
	int rc;
	const double lin[] = {1, 2, 3}, maxy[] = {0, 1, 0};

	for (int i = 0; i < 3; i++)
		y[i] = 3 * (x[i] - 0.3) * (x[i] - 0.3) + 2;
	rc = fit_parabola_vertex(x, y, &xv, &yv);
	ok(rc == 0 && close_rel(xv, 0.3, 1e-14) && close_rel(yv, 2, 1e-14),
	   "vertex (0.3, 2): %.17g %.17g", xv, yv);
	ok(close_rel(fit_interp3(x, y, 1.7), 3 * 1.4 * 1.4 + 2, 1e-14),
	   "interpolation reproduces the parabola at 1.7");
	ok(close_rel(fit_interp3(x, lin, 0.25), 1 + (0.25 + 1) / 1.5, 1e-14),
	   "and a line (y = 1 + (x + 1)/1.5)");
	ok(fit_parabola_vertex(x, lin, &xv, &yv) == -1, "a line has no vertex");
	ok(fit_parabola_vertex(x, maxy, &xv, &yv) == -1, "a maximum is not a minimum");
}

int main(void)
{
	line_by_hand();
	line_edges();
	grouped();
	parabola();
	return tap_done();
}
