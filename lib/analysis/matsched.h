/*
 * matsched.h - the matrices of a checkpoint computed in parallel inside one
 * process (sw-spectrum, sw-norms), results kept for printing in model order.
 *
 * Two threads on one matrix are slower than one thread on each of two
 * (LAPACK's eigensolver and the Lanczos bookkeeping scale poorly; measured
 * in bench/spectrum), so most matrices run side by side, one thread each,
 * largest first so the last ones finish together. A matrix whose memory
 * would not fit beside the others' (over a 2 x threads share of the free
 * memory), or whose work is more than a thread's share of all that is
 * left (a 32000 x 4096 head beside eight 4096 x 4096 matrices: one thread
 * on it would still be busy long after the others), runs alone with every
 * thread; one that needs another's result (a tied head, the embedding's)
 * runs after all of them.
 *
 * Checkpoint reads are not thread-safe (HDF5, the conversion buffer):
 * callers load and release tensors under MATSCHED_CRITICAL.
 */
#ifndef SW_MATSCHED_H
#define SW_MATSCHED_H

#include <stddef.h>

#include "../base/status.h"

/* around every ckpt_load / ckpt_release made inside a job */
#define MATSCHED_CRITICAL _Pragma("omp critical(matsched_ckpt)")

struct matsched_item {
	double mem;             /* bytes the job holds at once */
	double work;            /* relative cost, for the order */
	int after;              /* needs the other jobs' results: run last */
};

/* Free memory for the plan: MemAvailable, else free pages (bytes). */
double matsched_available_memory(void);

/*
 * Run job(ctx, i) for i in [0, n): the lone ones in order with every
 * thread (too large for the memory, or for a thread's share of the work), then the rest nth at a time on one thread each, largest work
 * first, then the ones marked after, in order. nth <= 0: OpenMP's
 * maximum. job returns nonzero to report a failure; the others still run
 * (each job keeps its own error for the caller to print in order).
 * SW_ESOFTWARE if out of memory for the plan.
 */
int matsched_run(const struct matsched_item *items, size_t n, int nth, double avail,
		 int (*job)(void *ctx, size_t i), void *ctx, struct sw_err *err);

#endif
