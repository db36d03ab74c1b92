/*
 * bench/allreduce - the time of lib/base/comm.c's all-reduce (in place, float
 * sums, blocking) over the ranks of an mpirun job, for buffers of 4 KiB to
 * 64 MiB, and the least-squares fit t = alpha + n beta (n bytes; relative errors) that
 * bench/mpi projects from. Rank 0 prints "bytes seconds" lines, then
 * "alpha A" and "beta B". Run: mpirun -np 2 build/bench/allreduce
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../lib/base/comm.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct comm *c;
	struct sw_err err;
	double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
	int rank;

	if (comm_init(&argc, &argv, &c, &err)) {
		fprintf(stderr, "allreduce: %s\n", err.msg);
		return 1;
	}
	rank = comm_rank(c);
	for (size_t n = 1024; n <= ((size_t)16 << 20); n *= 4) {
		float *buf = calloc(n, sizeof *buf);
		int reps = n < ((size_t)1 << 20) ? 50 : 10;
		double best = 1e30;
		if (!buf)
			return 1;
		/* the best of several rounds: the machine is shared */
		for (int round = 0; round < 3; round++) {
			double t0;
			if (comm_allreduce(c, buf, 1, COMM_F32, COMM_SUM, COMM_HOST, &err))
				return 1;
			t0 = now_s();
			for (int r = 0; r < reps; r++)
				if (comm_allreduce(c, buf, n, COMM_F32, COMM_SUM, COMM_HOST, &err)) {
					fprintf(stderr, "allreduce: %s\n", err.msg);
					return 1;
				}
			double t = (now_s() - t0) / reps;
			best = t < best ? t : best;
		}
		if (rank == 0)
			printf("%zu %.9g\n", n * sizeof(float), best);
		/* weights 1/t^2: the relative error of every size counts alike */
		double w = 1 / (best * best), x = (double)n * sizeof(float);
		sw += w;
		sx += w * x;
		sy += w * best;
		sxx += w * x * x;
		sxy += w * x * best;
		free(buf);
	}
	if (rank == 0) {
		double beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), alpha = (sy - beta * sx) / sw;
		printf("alpha %.9g\nbeta %.9g\n", alpha, beta);
	}
	comm_finalize(c);
	return 0;
}
