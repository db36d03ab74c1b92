/* traceest.c - Hutch++ (see traceest.h). */
#include "traceest.h"

#include <math.h>
#include <stdlib.h>

static double dot(const double *a, const double *b, int64_t n)
{
	double s = 0;

	for (int64_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* z -= Q (Q^T z), for the k orthonormal columns of Q (n each). */
static void project_out(const double *Q, int k, double *z, int64_t n)
{
	for (int j = 0; j < k; j++) {
		double c = dot(Q + (size_t)j * n, z, n);
		for (int64_t i = 0; i < n; i++)
			z[i] -= c * Q[(size_t)j * n + i];
	}
}

void trace_rademacher(struct sw_rng *r, double *z, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		z[i] = (rng_next(r) >> 63) ? 1.0 : -1.0;
}

int trace_hutchpp(int64_t n, lanczos_op op, void *ctx, int m, struct sw_rng *r, double *trace,
		  double *se, struct sw_err *err)
{
	int k = m / 3, kept = 0, probes, rc = SW_OK;
	double *Q, *z, *y, exact = 0, sum = 0, ss = 0, *q;

	if (m < 3 || n < 1)
		return sw_fail(err, SW_EUSAGE, "Hutch++ takes 3 products at least (%d given)", m);
	Q = malloc((size_t)k * (size_t)n * sizeof *Q);
	z = malloc((size_t)n * sizeof *z);
	y = malloc((size_t)n * sizeof *y);
	q = malloc((size_t)m * sizeof *q);
	if (!Q || !z || !y || !q) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	/* the sketch A S, orthonormalized (Gram-Schmidt twice, in double); a
	 * column that vanishes against the earlier ones adds no direction */
	for (int j = 0; j < k; j++) {
		double *c = Q + (size_t)kept * n, before, after;
		trace_rademacher(r, z, n);
		if ((rc = op(ctx, z, c, err)))
			goto out;
		before = sqrt(dot(c, c, n));
		project_out(Q, kept, c, n);
		project_out(Q, kept, c, n);
		after = sqrt(dot(c, c, n));
		if (!(after > 1e-10 * before))
			continue;
		for (int64_t i = 0; i < n; i++)
			c[i] /= after;
		kept++;
	}
	/* tr(Q^T A Q), exactly */
	for (int j = 0; j < kept; j++) {
		if ((rc = op(ctx, Q + (size_t)j * n, y, err)))
			goto out;
		exact += dot(Q + (size_t)j * n, y, n);
	}
	/* Hutchinson on what Q leaves: every product not spent above */
	probes = m - k - kept;
	for (int s = 0; s < probes; s++) {
		trace_rademacher(r, z, n);
		project_out(Q, kept, z, n);
		if ((rc = op(ctx, z, y, err)))
			goto out;
		q[s] = dot(z, y, n);
		sum += q[s];
	}
	for (int s = 0; s < probes; s++)
		ss += (q[s] - sum / probes) * (q[s] - sum / probes);
	*trace = exact + sum / probes;
	*se = probes > 1 ? sqrt(ss / (probes - 1) / probes) : NAN;
out:
	free(Q);
	free(z);
	free(y);
	free(q);
	return rc;
}
