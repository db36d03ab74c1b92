/*
 * blas-shapes - the float32 products of sw-train's step on bench/train's
 * model (d_model 256, d_ff 1024, vocab 2048, 8 sequences of 256 tokens:
 * N = 2048 rows), timed as lib/model/model.c runs them: each OpenMP
 * thread one sgemm over its share of the rows (the weight gradients:
 * its share of the weight's rows), the library single-threaded inside.
 * Built once per BLAS library Debian packages (make bench-blas: OpenBLAS,
 * BLIS, the reference BLAS, ATLAS); bench/blas runs each and prints their ratio. Prints, per shape,
 * its name, M N K, the GFLOP/s (best of 7 after a warm-up), and a last
 * row "step": the rate over all the products of one training step
 * (4 layers), each counted as often as the step runs it.
 *
 *   blas-shapes          (threads: OMP_NUM_THREADS)
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* one product of the step: C (m x n) = op(A) op(B), rows split over
 * threads along `split` (m); `count` times per step */
struct shape {
	const char *name;
	int ta, tb, m, n, k, count;
};

enum { N = 2048, D = 256, F = 1024, V = 2048, L = 4 };

static const struct shape shapes[] = {
	/* forward: y = x W^T */
	{"qkvo.fwd", 0, 1, N, D, D, 4 * L},
	{"gate_up.fwd", 0, 1, N, F, D, 2 * L},
	{"down.fwd", 0, 1, N, D, F, L},
	{"head.fwd", 0, 1, N, V, D, 1},
	/* backward: dx = dy W */
	{"qkvo.dx", 0, 0, N, D, D, 4 * L},
	{"gate_up.dx", 0, 0, N, D, F, 2 * L},
	{"down.dx", 0, 0, N, F, D, L},
	{"head.dx", 0, 0, N, D, V, 1},
	/* backward: dW = dy^T x (split over W's rows) */
	{"qkvo.dw", 1, 0, D, D, N, 4 * L},
	{"gate_up.dw", 1, 0, F, D, N, 2 * L},
	{"down.dw", 1, 0, D, F, N, L},
	{"head.dw", 1, 0, V, D, N, 1},
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* seconds of one product, the rows split over the threads */
static double run(const struct shape *s, const float *a, const float *b, float *c)
{
	double t0 = now();
	int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;

#pragma omp parallel
	{
		int nt = omp_get_num_threads(), id = omp_get_thread_num();
		int r0 = (int)((long)s->m * id / nt), r1 = (int)((long)s->m * (id + 1) / nt);
		/* op(A)'s rows r0..r1: A's rows (no transpose) or columns */
		const float *ar = s->ta ? a + r0 : a + (size_t)r0 * lda;
		if (r1 > r0)
			cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
				    s->tb ? CblasTrans : CblasNoTrans, r1 - r0, s->n, s->k, 1, ar, lda, b,
				    ldb, 0, c + (size_t)r0 * s->n, s->n);
	}
	return now() - t0;
}

int main(void)
{
	size_t big = (size_t)V * N;     /* the largest operand */
	float *a = malloc(big * sizeof *a), *b = malloc(big * sizeof *b), *c = malloc(big * sizeof *c);
	double step = 0, flops = 0;
	int finite;

	if (!a || !b || !c)
		return 70;
	for (size_t i = 0; i < big; i++) {
		a[i] = (float)(i % 7) / 7 - 0.4f;
		b[i] = (float)(i % 5) / 5 - 0.4f;
	}
	printf("shape\tm\tn\tk\tgflops\n");
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const struct shape *s = &shapes[i];
		double best = 1e30;
		for (int r = 0; r < 8; r++) {
			double t = run(s, a, b, c);
			if (r > 0 && t < best)
				best = t;
		}
		printf("%s\t%d\t%d\t%d\t%.1f\n", s->name, s->m, s->n, s->k,
		       2.0 * s->m * s->n * s->k / best / 1e9);
		step += best * s->count;
		flops += 2.0 * s->m * s->n * s->k * s->count;
	}
	printf("step\t\t\t\t%.1f\n", flops / step / 1e9);
	finite = c[0] == c[0];         /* the products are not optimized away */
	free(a);
	free(b);
	free(c);
	return finite ? 0 : 70;
}
