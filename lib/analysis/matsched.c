/* matsched.c - matrices in parallel inside one process (matsched.h). */
#include "matsched.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

double matsched_available_memory(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kib;

	if (f) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) {
				fclose(f);
				return kib * 1024.0;
			}
		fclose(f);
	}
	return (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* qsort context without globals: indices sorted by their items' work */
struct by_work {
	size_t i;
	double work;
};

static int more_work_first(const void *a, const void *b)
{
	const struct by_work *x = a, *y = b;

	if (x->work != y->work)
		return x->work < y->work ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int lower_index_first(const void *a, const void *b)
{
	const struct by_work *x = a, *y = b;

	return x->i < y->i ? -1 : x->i > y->i;
}

int matsched_run(const struct matsched_item *items, size_t n, int nth, double avail,
		 int (*job)(void *ctx, size_t i), void *ctx, struct sw_err *err)
{
	struct by_work *pool = malloc((n ? n : 1) * sizeof *pool);
	struct by_work *lone = malloc((n ? n : 1) * sizeof *lone);
	size_t npool = 0, nlone = 0, first = 0;
	double total = 0;

	if (!pool || !lone) {
		free(pool);
		free(lone);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	if (nth <= 0)
		nth = omp_get_max_threads();
	/* alone with every thread: too large to share the memory */
	for (size_t i = 0; i < n; i++) {
		if (items[i].after)
			continue;
		if (nth > 1 && items[i].mem * 2.0 * nth <= avail) {
			pool[npool++] = (struct by_work){i, items[i].work};
			total += items[i].work;
		} else {
			lone[nlone++] = (struct by_work){i, items[i].work};
		}
	}
	qsort(pool, npool, sizeof *pool, more_work_first);
	/* alone too: a job more than its share of what is left (one
	 * thread on it would still be busy when the others are done) */
	while (first < npool && pool[first].work * nth > total) {
		total -= pool[first].work;
		lone[nlone++] = pool[first++];
	}
	qsort(lone, nlone, sizeof *lone, lower_index_first);
	for (size_t k = 0; k < nlone; k++)
		job(ctx, lone[k].i);
	if (first < npool) {
		/* nested regions run on one thread: the BLAS and the kernels
		 * inside each job see a team of one */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth)
		for (size_t k = first; k < npool; k++)
			job(ctx, pool[k].i);
	}
	for (size_t i = 0; i < n; i++)
		if (items[i].after)
			job(ctx, i);
	free(pool);
	free(lone);
	return SW_OK;
}
