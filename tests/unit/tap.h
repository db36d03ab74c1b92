/*
 * tap.h - a minimal Test Anything Protocol producer for the C unit tests:
 * ok(cond, "title") prints "ok N - title" or "not ok N - title", and
 * tap_done() prints the plan and returns the exit status (1 if any test
 * failed), so `prove` and the exit code both see a failure.
 */
#ifndef SW_TAP_H
#define SW_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failed;

__attribute__((format(printf, 2, 3)))
static inline int ok(int pass, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", pass ? "" : "not ", ++tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!pass)
		tap_failed++;
	return pass;
}

__attribute__((format(printf, 1, 2)))
static inline void diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* |got - want| <= tol * |want| (tol relative; want == 0: absolute) */
static inline int close_rel(double got, double want, double tol)
{
	double d = fabs(got - want);
	return want == 0 ? d <= tol : d <= tol * fabs(want);
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
