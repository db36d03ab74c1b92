/*
 * spectrum-kernels - the measurement behind sw-spectrum's choice of method
 * for full spectra: on one tensor of a checkpoint (read in place, as
 * sw-spectrum reads it), time and accuracy of
 *   - LAPACK sgesdd on the float32 matrix, values only (numpy's svd),
 *   - the Gram matrix in double and dsyevd (spectrum_full),
 * both against dgesdd in double on the same float32 values (the reference,
 * also timed). Accuracy: the largest relative error over sigma_i >= 1e-4
 * sigma_max, the claim sw-spectrum makes.
 *
 *   spectrum-kernels FILE ROLE [LAYER]
 *
 * Each method runs twice; the better time counts.
 */
#include <lapacke.h>
#include <math.h>
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

static double worst(const double *s, const double *ref, int64_t k)
{
	double e = 0;

	for (int64_t i = 0; i < k; i++)
		if (ref[i] >= 1e-4 * ref[0])
			e = fmax(e, fabs(s[i] - ref[i]) / ref[i]);
	return e;
}

int main(int argc, char **argv)
{
	struct ckpt *ck;
	struct ckpt_view v;
	struct sw_err err;
	const struct sw_tensor_info *t;
	double t_s = 1e9, t_g = 1e9, t_d, t0;
	double *ref, *sg, *ss;
	float *a, *sf;
	int64_t rows, cols, k;
	long i;

	if (argc < 3) {
		fprintf(stderr, "usage: spectrum-kernels FILE ROLE [LAYER]\n");
		return 64;
	}
	if (ckpt_open(argv[1], &ck, &err)) {
		fprintf(stderr, "spectrum-kernels: %s: %s\n", argv[1], err.msg);
		return err.code;
	}
	i = ckpt_find_role(ck, argv[2], argc > 3 ? atoi(argv[3]) : -1);
	if (i < 0 || ckpt_load(ck, (size_t)i, &v, &err)) {
		fprintf(stderr, "spectrum-kernels: no such tensor, or %s\n", err.msg);
		return 66;
	}
	t = ckpt_info(ck, (size_t)i);
	rows = t->shape[0];
	cols = t->shape[1];
	k = rows < cols ? rows : cols;
	ref = malloc((size_t)k * sizeof *ref);
	sg = malloc((size_t)k * sizeof *sg);
	ss = malloc((size_t)k * sizeof *ss);
	sf = malloc((size_t)k * sizeof *sf);
	a = malloc((size_t)(rows * cols) * sizeof *a);
	if (!ref || !sg || !ss || !sf || !a)
		return 70;

	t0 = now();
	if (linalg_singular_values_dense(v.data, rows, cols, NULL, ref, &err))
		return 70;
	t_d = now() - t0;
	for (int rep = 0; rep < 2; rep++) {
		struct spec_view sv = spectrum_view(v.data, rows, cols);
		lapack_int info;

		/* sgesdd destroys its input: a fresh copy each time, not timed */
		memcpy(a, v.data, (size_t)(rows * cols) * sizeof *a);
		t0 = now();
		info = LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)cols, (lapack_int)rows, a,
				      (lapack_int)cols, sf, NULL, 1, NULL, 1);
		t_s = fmin(t_s, now() - t0);
		if (info)
			return 70;
		t0 = now();
		if (spectrum_full(&sv, sg, NULL, &err))
			return 70;
		t_g = fmin(t_g, now() - t0);
	}
	for (int64_t j = 0; j < k; j++)
		ss[j] = sf[j];
	printf("%-5s %6lldx%-6lld  sgesdd %6.2f s (error %.1e)   Gram+dsyevd %6.2f s (error %.1e)"
	       "   %.2fx faster   [dgesdd %.2f s]\n", t->role, (long long)rows, (long long)cols,
	       t_s, worst(ss, ref, k), t_g, worst(sg, ref, k), t_s / t_g, t_d);
	ckpt_release(ck, &v);
	ckpt_close(ck);
	free(ref);
	free(sg);
	free(ss);
	free(sf);
	free(a);
	return 0;
}
