/*
 * The Lanczos core of lib/analysis/lanczos.c (lanczos.h's last part), which the
 * single-vector solvers there and spectrum_top's block Lanczos share,
 * against what is known independently:
 *   - lanczos_project_f64 and _f32: Z loses every component along an
 *     orthonormal basis (double: to 1e-14; the basis rounded to float32:
 *     to 1e-10, the second pass at work), Z + V C is the Z given, C is V^T
 *     Z, over several chunks, b odd and even; the same bits on 1 and 2
 *     threads;
 *   - lanczos_ritz: the top `want` eigenpairs of a symmetric matrix
 *     against LAPACK dsyev (all of them), descending, A y = theta y;
 *   - lanczos_residuals: for an operator built with A V = V H + Q R E^T
 *     (b = 3 and b = 1: R = beta), the norms ||R y_last|| equal the
 *     residuals ||A V y - theta V y|| computed with A itself, their largest
 *     and their root sum of squares.
 */
#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/lanczos.h"
#include "../../lib/base/rng.h"
#include "tap.h"

static struct sw_rng rng;

/* n x k (column-major) with orthonormal columns: QR of a Gaussian matrix */
static double *orthonormal(int64_t n, int k)
{
	double *a = malloc((size_t)n * (size_t)k * sizeof *a), tau[64];

	for (int64_t i = 0; i < n * k; i++)
		a[i] = rng_normal(&rng);
	if (LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)n, k, a, (lapack_int)n, tau) ||
	    LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)n, k, k, a, (lapack_int)n, tau)) {
		ok(0, "LAPACK QR failed");
		exit(1);
	}
	return a;
}

/* max over r < j, q < b of |V_r . Z_q| (V float32 when vf) */
static double max_dot(const double *vd, const float *vf, int64_t n, int j, const double *Z, int b)
{
	double worst = 0;

	for (int r = 0; r < j; r++)
		for (int q = 0; q < b; q++) {
			double s = 0;
			for (int64_t i = 0; i < n; i++)
				s += (vf ? vf[(size_t)r * n + i] : vd[(size_t)r * n + i]) * Z[(size_t)q * n + i];
			worst = fmax(worst, fabs(s));
		}
	return worst;
}

/* max |Z + V C - Z0| over the b vectors (V float32 when vf) */
static double rebuilt_error(const double *vd, const float *vf, int64_t n, int j, const double *Z,
			    int b, const double *C, const double *Z0)
{
	double worst = 0;

	for (int q = 0; q < b; q++)
		for (int64_t i = 0; i < n; i++) {
			double x = Z[(size_t)q * n + i];
			for (int r = 0; r < j; r++)
				x += C[q * j + r] * (vf ? vf[(size_t)r * n + i] : vd[(size_t)r * n + i]);
			worst = fmax(worst, fabs(x - Z0[(size_t)q * n + i]));
		}
	return worst;
}

static void test_project(void)
{
	enum { J = 5, B = 3 };
	int64_t n = 70001;                    /* three chunks of 2^15 */
	double *V = orthonormal(n, J), *Z0 = malloc((size_t)n * B * sizeof *Z0);
	double *Z = malloc((size_t)n * B * sizeof *Z), *Z2 = malloc((size_t)n * B * sizeof *Z2);
	double *work = malloc(lanczos_project_work(n, J, B) * sizeof *work);
	double C[J * B], C2[J * B], want[J * B], norm0 = 0, rebuilt = 0, cerr = 0;
	float *Vf = malloc((size_t)n * J * sizeof *Vf);

	for (int64_t i = 0; i < n * B; i++) {
		Z0[i] = rng_normal(&rng);
		norm0 = fmax(norm0, fabs(Z0[i]));
	}
	norm0 *= sqrt((double)n);
	/* want = V^T Z0, by plain loops */
	for (int q = 0; q < B; q++)
		for (int r = 0; r < J; r++) {
			double s = 0;
			for (int64_t i = 0; i < n; i++)
				s += V[(size_t)r * n + i] * Z0[(size_t)q * n + i];
			want[q * J + r] = s;
		}

	for (int pass = 0; pass < 2; pass++) {
		int b = pass ? 1 : B;             /* pairs and the odd one; one vector */
		memcpy(Z, Z0, (size_t)n * B * sizeof *Z);
		memset(C, 0, sizeof C);
		omp_set_num_threads(2);
		lanczos_project_f64(V, n, J, Z, b, C, work);
		rebuilt = rebuilt_error(V, NULL, n, J, Z, b, C, Z0);
		cerr = 0;
		for (int q = 0; q < b; q++)
			for (int r = 0; r < J; r++)
				cerr = fmax(cerr, fabs(C[q * J + r] - want[q * J + r]));
		ok(max_dot(V, NULL, n, J, Z, b) < 1e-14 * norm0 && rebuilt < 1e-13 * norm0 / sqrt((double)n) &&
		   cerr < 1e-12 * norm0,
		   "project, double basis, b = %d over 3 chunks: V^T Z %.2g, Z + V C = Z0 to %.2g, C = V^T Z0 to %.2g",
		   b, max_dot(V, NULL, n, J, Z, b), rebuilt, cerr);
	}

	/* the same bits on one thread */
	memcpy(Z2, Z0, (size_t)n * B * sizeof *Z2);
	memcpy(Z, Z0, (size_t)n * B * sizeof *Z);
	memset(C, 0, sizeof C);
	memset(C2, 0, sizeof C2);
	omp_set_num_threads(2);
	lanczos_project_f64(V, n, J, Z, B, C, work);
	omp_set_num_threads(1);
	lanczos_project_f64(V, n, J, Z2, B, C2, work);
	omp_set_num_threads(2);
	ok(!memcmp(Z, Z2, (size_t)n * B * sizeof *Z) && !memcmp(C, C2, sizeof C),
	   "project: the same bits on 1 and 2 threads");

	/* float32 basis: orthonormal to 1e-7 only, the second pass makes up for it */
	for (int64_t i = 0; i < n * J; i++)
		Vf[i] = (float)V[i];
	memcpy(Z, Z0, (size_t)n * B * sizeof *Z);
	memset(C, 0, sizeof C);
	lanczos_project_f32(Vf, n, J, Z, B, C, work);
	rebuilt = rebuilt_error(NULL, Vf, n, J, Z, B, C, Z0);
	ok(max_dot(NULL, Vf, n, J, Z, B) < 1e-10 * norm0 && rebuilt < 1e-13 * norm0 / sqrt((double)n),
	   "project, float32 basis: V^T Z %.2g of %.3g, Z + V C = Z0 to %.2g",
	   max_dot(NULL, Vf, n, J, Z, B), norm0, rebuilt);

	/* no basis: nothing changes */
	memcpy(Z, Z0, (size_t)n * sizeof *Z);
	lanczos_project_f64(V, n, 0, Z, 1, NULL, work);
	ok(!memcmp(Z, Z0, (size_t)n * sizeof *Z), "project against no vectors leaves Z");
	free(V);
	free(Vf);
	free(Z0);
	free(Z);
	free(Z2);
	free(work);
}

/* a random symmetric m x m (column-major) */
static void symmetric(int m, double *a)
{
	for (int c = 0; c < m; c++)
		for (int r = 0; r <= c; r++)
			a[c * m + r] = a[r * m + c] = rng_normal(&rng);
}

static void test_ritz(void)
{
	enum { M = 9 };
	double a[M * M], a0[M * M], ref[M], theta[M], Y[M * M];
	struct sw_err err;

	for (int want = 3; want <= M; want += M - 3) {
		double verr = 0, res = 0;
		int desc = 1, rc;
		symmetric(M, a0);
		memcpy(a, a0, sizeof a);
		LAPACKE_dsyev(LAPACK_COL_MAJOR, 'N', 'U', M, a, M, ref);   /* ascending */
		memcpy(a, a0, sizeof a);
		rc = lanczos_ritz(M, want, a, theta, Y, &err);
		for (int i = 0; i < want; i++) {
			verr = fmax(verr, fabs(theta[i] - ref[M - 1 - i]));
			desc &= i == 0 || theta[i] <= theta[i - 1];
			for (int r = 0; r < M; r++) {
				double s = -theta[i] * Y[i * M + r];
				for (int c = 0; c < M; c++)
					s += a0[c * M + r] * Y[i * M + c];
				res = fmax(res, fabs(s));
			}
		}
		ok(!rc && desc && verr < 1e-13 * fabs(ref[M - 1]) + 1e-13 && res < 1e-12,
		   "ritz: top %d of %d against dsyev (%.2g), descending, A y = theta y (%.2g)", want, M,
		   verr, res);
	}
}

/*
 * A (n x n) = [V Q] [[H, E R^T], [R E^T, G]] [V Q]^T: A V = V H + Q R E^T,
 * the relation a Lanczos basis V (m vectors) and its next block Q (b)
 * satisfy. The residuals of H's Ritz pairs, computed with A, against
 * lanczos_residuals.
 */
static void test_residuals(int b)
{
	enum { N = 40, M = 9, K = 4 };
	double *W = orthonormal(N, M + b), Mx[(M + 3) * (M + 3)], A[N * N], R[9], H[M * M];
	double theta[M], Y[M * M], big = 0, sum = 0, max = -1, frob = -1;
	int s = M + b;
	struct sw_err err;

	memset(Mx, 0, sizeof Mx);
	memset(R, 0, sizeof R);
	for (int c = 0; c < b; c++)
		for (int r = 0; r <= c; r++)
			R[c * b + r] = rng_normal(&rng);
	symmetric(M, H);
	for (int c = 0; c < M; c++)
		for (int r = 0; r < M; r++)
			Mx[c * s + r] = H[c * M + r];
	/* the coupling: rows M.. of the last b columns are R, and its mirror */
	for (int c = 0; c < b; c++)
		for (int r = 0; r < b; r++) {
			Mx[(M - b + c) * s + M + r] = R[c * b + r];
			Mx[(M + r) * s + M - b + c] = R[c * b + r];
		}
	for (int c = 0; c < b; c++)
		for (int r = 0; r <= c; r++)
			Mx[(M + c) * s + M + r] = Mx[(M + r) * s + M + c] = rng_normal(&rng);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			double x = 0;
			for (int p = 0; p < s; p++)
				for (int q = 0; q < s; q++)
					x += W[p * N + i] * Mx[q * s + p] * W[q * N + j];
			A[j * N + i] = x;
		}
	if (lanczos_ritz(M, K, H, theta, Y, &err)) {
		ok(0, "ritz: %s", err.msg);
		return;
	}
	for (int k = 0; k < K; k++) {
		double x[N], r2 = 0;
		for (int i = 0; i < N; i++) {
			x[i] = 0;
			for (int p = 0; p < M; p++)
				x[i] += W[p * N + i] * Y[k * M + p];
		}
		for (int i = 0; i < N; i++) {
			double ax = -theta[k] * x[i];
			for (int j = 0; j < N; j++)
				ax += A[j * N + i] * x[j];
			r2 += ax * ax;
		}
		big = fmax(big, sqrt(r2));
		sum += r2;
	}
	lanczos_residuals(R, b, Y, M, K, &max, &frob);
	ok(fabs(max - big) < 1e-12 * big && fabs(frob - sqrt(sum)) < 1e-12 * sqrt(sum),
	   "residuals, b = %d: ||R y_last|| = ||A V y - theta V y||: largest %.6g vs %.6g, F %.6g vs %.6g",
	   b, max, big, frob, sqrt(sum));
	free(W);
}

int main(void)
{
	rng_seed(&rng, 7);
	test_project();
	test_ritz();
	test_residuals(3);
	test_residuals(1);
	return tap_done();
}
