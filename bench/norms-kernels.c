/*
 * norms-kernels - time the two kernels behind sw-norms on one tensor of a
 * checkpoint, read in place from the page cache exactly as sw-norms reads
 * it (ckpt_load):
 *   - a plain read pass over the same mapped bytes (sum of the floats),
 *   - the one-pass row/column sums that give RMS->inf (and 1->RMS),
 *   - sigma_max by Lanczos (steps, time).
 *
 *   norms-kernels FILE ROLE [LAYER]
 *
 * Prints GB/s of the read pass and of the RMS->inf pass, and their ratio.
 * Each kernel is run 3 times after one warm-up pass; the best time counts.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/formats/ckpt.h"
#include "../lib/analysis/linalg.h"
#include "../lib/analysis/spectrum.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double plain_pass(const float *x, int64_t n)
{
	double s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
	for (int64_t i = 0; i < n; i++)
		s += x[i];
	return s;
}

int main(int argc, char **argv)
{
	struct ckpt *ck;
	struct ckpt_view v;
	struct sw_err err;
	struct mat_pass p;
	struct sigma_info si;
	struct spec_view sv;
	double best_read = 1e9, best_pass = 1e9, t, sink = 0, gb;
	long i;

	if (argc < 3) {
		fprintf(stderr, "usage: norms-kernels FILE ROLE [LAYER]\n");
		return 64;
	}
	if (ckpt_open(argv[1], &ck, &err)) {
		fprintf(stderr, "norms-kernels: %s: %s\n", argv[1], err.msg);
		return err.code;
	}
	i = ckpt_find_role(ck, argv[2], argc > 3 ? atoi(argv[3]) : -1);
	if (i < 0 || ckpt_load(ck, (size_t)i, &v, &err)) {
		fprintf(stderr, "norms-kernels: no such tensor, or %s\n", err.msg);
		return 65;
	}
	const struct sw_tensor_info *ti = ckpt_info(ck, (size_t)i);
	int64_t rows = ti->shape[0], cols = ti->shape[1];
	double *rs = malloc((size_t)rows * sizeof *rs), *cs = malloc((size_t)cols * sizeof *cs);
	gb = (double)v.numel * 4 / 1e9;
	sink += plain_pass(v.data, v.numel);            /* fault the pages in */
	for (int r = 0; r < 3; r++) {
		t = now();
		sink += plain_pass(v.data, v.numel);
		best_read = fmin(best_read, now() - t);
		t = now();
		linalg_row_col_sumsq(v.data, rows, cols, NULL, rs, cs, &p, &err);
		best_pass = fmin(best_pass, now() - t);
	}
	t = now();
	sv = spectrum_view(v.data, rows, cols);
	if (spectrum_sigma_max(&sv, 1e-6, NULL, -1, NULL, &si, &err)) {
		fprintf(stderr, "norms-kernels: %s\n", err.msg);
		return 70;
	}
	t = now() - t;
	printf("tensor\t%s\t%lldx%lld\t%.3f GB\tthreads %d\tmapped %d\n", ti->name, (long long)rows,
	       (long long)cols, gb, omp_get_max_threads(), v.mapped);
	printf("read pass (mmap, sum of floats)\t%.3f s\t%.2f GB/s\n", best_read, gb / best_read);
	printf("RMS->inf pass (row+col sums)\t%.3f s\t%.2f GB/s\t%.0f%% of the read pass\n",
	       best_pass, gb / best_pass, 100.0 * best_read / best_pass);
	printf("sigma_max (%s)\t%.3f s\t%d steps\t%.2f s/step\tsigma %.9g\trel bound %.2g\n",
	       si.method, t, si.iterations, t / (si.iterations ? si.iterations : 1), si.sigma, si.rel_bound);
	if (sink == 12345.678)
		puts("");
	free(rs);
	free(cs);
	ckpt_release(ck, &v);
	ckpt_close(ck);
	return 0;
}
