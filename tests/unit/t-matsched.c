/*
 * Unit tests of lib/analysis/matsched.c: every job runs once; jobs too large to
 * share the memory run alone, outside any parallel region; the others run
 * side by side on two threads, the largest started first; jobs marked
 * after start only when every other job has finished.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/matsched.h"
#include "tap.h"

#define N 12

struct record {
	int runs[N];
	int in_parallel[N];
	int start[N], finish[N];
	int clock;
};

static int job(void *ctx, size_t i)
{
	struct record *r = ctx;
	int t;

#pragma omp atomic capture
	t = r->clock++;
	r->start[i] = t;
	r->in_parallel[i] = omp_in_parallel();
#pragma omp atomic
	r->runs[i]++;
#pragma omp atomic capture
	t = r->clock++;
	r->finish[i] = t;
	return 0;
}

int main(void)
{
	struct matsched_item items[N];
	struct record rec;
	struct sw_err err;
	int once = 1, lone_ok = 1, pool_ok = 1, after_ok = 1;

	memset(items, 0, sizeof items);
	memset(&rec, 0, sizeof rec);
	for (int i = 0; i < N; i++) {
		items[i].mem = 1000;
		items[i].work = i;
	}
	items[3].mem = 1e6;             /* over avail / (2 x 2 threads) */
	items[7].mem = 1e6;
	items[10].after = items[11].after = 1;
	ok(matsched_run(items, N, 2, 1e6, job, &rec, &err) == 0, "run");
	for (int i = 0; i < N; i++) {
		once &= rec.runs[i] == 1;
		if (i == 3 || i == 7 || items[i].after)
			lone_ok &= !rec.in_parallel[i];
		else
			pool_ok &= rec.in_parallel[i];
	}
	for (int a = 10; a < 12; a++)
		for (int i = 0; i < 10; i++)
			after_ok &= rec.start[a] > rec.finish[i];
	ok(once, "every job ran once");
	ok(lone_ok, "the two large jobs and the after jobs ran outside the parallel region");
	ok(pool_ok, "the others ran inside it, side by side");
	ok(after_ok, "the after jobs started when every other job had finished");
	ok(rec.start[9] < rec.start[0] && rec.start[9] < rec.start[1],
	   "the largest work started before the smallest");

	/* one job with more work than a thread's share of the rest: alone */
	memset(&rec, 0, sizeof rec);
	items[3].mem = items[7].mem = 1000;
	items[5].work = 100;            /* the rest sum to 56: 2 x 100 > 156 */
	matsched_run(items, N, 2, 1e6, job, &rec, &err);
	ok(!rec.in_parallel[5] && rec.in_parallel[4] && rec.in_parallel[9] && rec.finish[5] < rec.start[9],
	   "a job over a thread's share of the work ran alone, before the others");

	/* one thread: every job in the caller, none in a parallel region */
	memset(&rec, 0, sizeof rec);
	matsched_run(items, N, 1, 1e9, job, &rec, &err);
	once = 1;
	for (int i = 0; i < N; i++)
		once &= rec.runs[i] == 1 && !rec.in_parallel[i];
	ok(once, "one thread: every job once, in the caller");
	ok(matsched_available_memory() > 0, "available memory is known (%.3g bytes)",
	   matsched_available_memory());
	return tap_done();
}
