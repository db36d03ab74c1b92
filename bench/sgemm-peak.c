/*
 * sgemm-peak - the float32 matrix-multiply rate of this machine's OpenBLAS
 * (the build sw-train links), with every thread, for the GFLOP/s ratio
 * bench/train prints. Square products of size N (default 2048), best of 10
 * after one to warm up.
 *
 *   sgemm-peak [N]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tools/common.h"

char *openblas_get_corename(void);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2048;
	float *a, *b, *c;
	double best = 1e30;

	tool_runtime(argv);
	if (n < 16 || n > 16384)
		return 64;
	a = malloc(sizeof *a * (size_t)n * n);
	b = malloc(sizeof *b * (size_t)n * n);
	c = malloc(sizeof *c * (size_t)n * n);
	if (!a || !b || !c)
		return 70;
	for (long i = 0; i < (long)n * n; i++) {
		a[i] = (float)(i % 7) / 7;
		b[i] = (float)(i % 5) / 5;
	}
	for (int r = 0; r < 11; r++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		if (r > 0 && s < best)
			best = s;
	}
	printf("%.1f\t%s\n", 2.0 * n * n * (double)n / best / 1e9, openblas_get_corename());
	free(a);
	free(b);
	free(c);
	return 0;
}
