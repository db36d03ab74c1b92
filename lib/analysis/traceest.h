/*
 * traceest.h - the trace of a symmetric operator known only through its
 * products y = A x (a Hessian block), by random probes: Hutch++
 * (Meyer, Musco, Musco and Woodruff, 2021). Of m products, a third sketch
 * A's range (Q, an orthonormal basis of A S for k Rademacher vectors S),
 * a third give tr(Q^T A Q) exactly, and the rest are Hutchinson's probes
 * of what Q leaves, (I - QQ^T) A (I - QQ^T). Where a few eigenvalues carry
 * most of the trace (as in a trained network's Hessian) the probes see
 * only the rest, and the error falls as 1/m instead of 1/sqrt(m).
 * Plain Hutchinson (every product a probe) is hessian.c's, sharing its
 * probes with the SLQ density.
 */
#ifndef SW_TRACEEST_H
#define SW_TRACEEST_H

#include <stdint.h>

#include "lanczos.h"
#include "../base/rng.h"
#include "../base/status.h"

/* A Rademacher vector (+-1 each entry) from r: the probes of Hutchinson's
 * estimator and of Hutch++. */
void trace_rademacher(struct sw_rng *r, double *z, int64_t n);

/*
 * The trace of A (dimension n) by Hutch++ with m products (m >= 3): k =
 * m / 3 sketch vectors, and as many exact products (fewer when the sketch
 * has fewer independent directions), the rest probes. *trace the
 * estimate; *se its standard error: that of the probes' mean (the exact
 * part has none), NaN with one probe. The vectors are Rademacher, from r.
 * Memory: k + 2 vectors of n doubles. SW_EUSAGE for m < 3; SW_ESOFTWARE
 * for memory; the operator's status.
 */
int trace_hutchpp(int64_t n, lanczos_op op, void *ctx, int m, struct sw_rng *r, double *trace,
		  double *se, struct sw_err *err);

#endif
