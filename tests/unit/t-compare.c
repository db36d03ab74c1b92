/*
 * lib/analysis/compare.c and spectrum_full_vectors against matrices
 * built with known factors, W = U diag(s) V^T (U, V orthonormal from
 * synth_orthonormal, s_i = 0.8^i: every gap 20%), stored in float32:
 *   - spectrum_full_vectors: the values bit for bit spectrum_full's; the
 *     top vectors those of the construction up to sign, tall (right
 *     vectors) and wide (left vectors);
 *   - compare_matrices, B = A with its first right singular vector turned
 *     by theta towards the (k+1)-th: the right principal angles are
 *     theta, 0, ..., 0 (overlap (cos^2 theta + k - 1) / k, min cos cos
 *     theta), the left subspace unchanged (overlap 1), the spectrum
 *     unchanged (sigma_max, stable rank and alpha changes 0), rel_change
 *     s_1 sqrt(2 - 2 cos theta) / ||s||; and the same with the roles of
 *     the sides swapped (a wide matrix, the left vector turned);
 *   - a rank below k: no overlap (NaN), the rest computed.
 * Tolerances: float32 storage moves W by about 6e-8 of its entries; a
 * singular vector by that over the relative gap (0.2): 1e-6 with room.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/compare.h"
#include "../../lib/analysis/spectrum.h"
#include "../../lib/analysis/synth.h"
#include "../../lib/base/rng.h"
#include "tap.h"

#define TOL 1e-6

/* W = U diag(s) V^T into float32, U rows x n, V cols x n (row-major), n
 * = min(rows, cols). */
static float *build(const double *U, const double *s, const double *V, int64_t rows, int64_t cols)
{
	int64_t n = rows < cols ? rows : cols;
	float *W = malloc((size_t)(rows * cols) * sizeof *W);

	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++) {
			double sum = 0;
			for (int64_t q = 0; q < n; q++)
				sum += U[i * n + q] * s[q] * V[j * n + q];
			W[i * cols + j] = (float)sum;
		}
	return W;
}

/* Column q of Q (m x n, row-major) against x (m entries): |<Q_q, x>|. */
static double col_dot(const double *Q, int64_t m, int64_t n, int64_t q, const double *x)
{
	double d = 0;

	for (int64_t i = 0; i < m; i++)
		d += Q[i * n + q] * x[i];
	return fabs(d);
}

static void test_vectors(struct sw_rng *rng, int64_t rows, int64_t cols)
{
	int64_t n = rows < cols ? rows : cols, k = 5;
	double *U = malloc((size_t)(rows * n) * sizeof *U), *V = malloc((size_t)(cols * n) * sizeof *V);
	double *s = malloc((size_t)n * sizeof *s), *s1 = malloc((size_t)n * sizeof *s1);
	double *s2 = malloc((size_t)n * sizeof *s2), *vec = malloc((size_t)(k * n) * sizeof *vec);
	double f1, f2, worst = 0;
	struct sw_err err = {0, ""};
	struct spec_view v;
	float *W;
	int rc;

	synth_orthonormal(rng, rows, n, U, &err);
	synth_orthonormal(rng, cols, n, V, &err);
	for (int64_t i = 0; i < n; i++)
		s[i] = pow(0.8, (double)i);
	W = build(U, s, V, rows, cols);
	v = spectrum_view(W, rows, cols);
	rc = spectrum_full(&v, s1, &f1, &err) || spectrum_full_vectors(&v, s2, &f2, k, vec, &err);
	ok(!rc && !memcmp(s1, s2, (size_t)n * sizeof *s1) && f1 == f2,
	   "%lld x %lld: spectrum_full_vectors' values are spectrum_full's, bit for bit",
	   (long long)rows, (long long)cols);
	/* tall: the Gram side is the right one (V); wide: the left (U) */
	for (int64_t q = 0; q < k; q++)
		worst = fmax(worst, fabs(1 - (rows >= cols ? col_dot(V, cols, n, q, vec + q * n)
							   : col_dot(U, rows, n, q, vec + q * n))));
	ok(worst < TOL, "%lld x %lld: the top %lld vectors are the construction's %s ones (1 - |cos| %.2g)",
	   (long long)rows, (long long)cols, (long long)k, rows >= cols ? "right" : "left", worst);
	free(U);
	free(V);
	free(s);
	free(s1);
	free(s2);
	free(vec);
	free(W);
}

/* Turn column 0 of Q (m x n) by theta towards column k. */
static void turn(double *Q, int64_t m, int64_t n, int64_t k, double theta)
{
	for (int64_t i = 0; i < m; i++) {
		double a = Q[i * n], b = Q[i * n + k];
		Q[i * n] = cos(theta) * a + sin(theta) * b;
		Q[i * n + k] = -sin(theta) * a + cos(theta) * b;
	}
}

static void test_turned(struct sw_rng *rng, int64_t rows, int64_t cols)
{
	int64_t n = rows < cols ? rows : cols, k = 4;
	double *U = malloc((size_t)(rows * n) * sizeof *U), *V = malloc((size_t)(cols * n) * sizeof *V);
	double *U2 = malloc((size_t)(rows * n) * sizeof *U2), *V2 = malloc((size_t)(cols * n) * sizeof *V2);
	double *s = malloc((size_t)n * sizeof *s), theta = 0.3, ss = 0, want_overlap, want_rel;
	struct sw_err err = {0, ""};
	struct compare_result r;
	int turn_right = rows >= cols;
	double turned_overlap, turned_cos, kept_overlap, kept_cos;
	float *A, *B;
	int rc;

	synth_orthonormal(rng, rows, n, U, &err);
	synth_orthonormal(rng, cols, n, V, &err);
	for (int64_t i = 0; i < n; i++) {
		s[i] = pow(0.8, (double)i);
		ss += s[i] * s[i];
	}
	memcpy(U2, U, (size_t)(rows * n) * sizeof *U);
	memcpy(V2, V, (size_t)(cols * n) * sizeof *V);
	/* the turn also moves vector k (to keep the factor orthonormal):
	 * outside the top k, so the top-k angles are theta, 0, ..., 0 */
	if (turn_right)
		turn(V2, cols, n, k, theta);
	else
		turn(U2, rows, n, k, theta);
	A = build(U, s, V, rows, cols);
	B = build(U2, s, V2, rows, cols);
	rc = compare_matrices(A, B, rows, cols, k, NULL, &r, &err);
	ok(!rc, "%lld x %lld: computed (%s)", (long long)rows, (long long)cols, err.msg);
	want_overlap = (cos(theta) * cos(theta) + (double)(k - 1)) / (double)k;
	/* ||B - A||_F: s_1 ||x' - x|| for the turned vector x, and s_(k+1)
	 * for vector k, each turned by theta: |x' - x| = sqrt(2 - 2 cos) */
	want_rel = sqrt((s[0] * s[0] + s[k] * s[k]) * (2 - 2 * cos(theta)) / ss);
	turned_overlap = turn_right ? r.right_overlap : r.left_overlap;
	turned_cos = turn_right ? r.right_min_cos : r.left_min_cos;
	kept_overlap = turn_right ? r.left_overlap : r.right_overlap;
	kept_cos = turn_right ? r.left_min_cos : r.right_min_cos;
	ok(r.k == k && fabs(turned_overlap - want_overlap) < TOL && fabs(turned_cos - cos(theta)) < TOL,
	   "%lld x %lld: the %s subspace turned: overlap %.9g (%.9g), min cos %.9g (%.9g)",
	   (long long)rows, (long long)cols, turn_right ? "right" : "left", turned_overlap,
	   want_overlap, turned_cos, cos(theta));
	ok(fabs(kept_overlap - 1) < TOL && fabs(kept_cos - 1) < TOL,
	   "%lld x %lld: the other subspace kept: overlap %.9g, min cos %.9g", (long long)rows,
	   (long long)cols, kept_overlap, kept_cos);
	ok(fabs(r.rel_change - want_rel) < TOL * want_rel && fabs(r.sigma_max_change) < TOL &&
	   fabs(r.stable_rank_change) < TOL && fabs(r.a.sigma_max - 1) < TOL &&
	   fabs(r.a.stable_rank - ss) < TOL * ss && fabs(r.alpha_change) < 1e-4,
	   "%lld x %lld: rel_change %.9g (%.9g), the spectrum's numbers unchanged (%.3g %.3g %.3g)",
	   (long long)rows, (long long)cols, r.rel_change, want_rel, r.sigma_max_change,
	   r.stable_rank_change, r.alpha_change);
	free(A);
	free(B);
	free(U);
	free(V);
	free(U2);
	free(V2);
	free(s);
}

static void test_low_rank(void)
{
	/* rank 2 (two nonzero columns), k = 4: the top-4 subspace is not
	 * defined */
	int64_t rows = 6, cols = 5;
	float A[30] = {0}, B[30] = {0};
	struct sw_err err = {0, ""};
	struct compare_result r;
	int rc;

	for (int64_t i = 0; i < rows; i++) {
		A[i * cols] = (float)(i + 1);
		A[i * cols + 1] = (float)(i % 2);
		B[i * cols] = (float)(i + 2);
		B[i * cols + 1] = (float)(i % 3);
	}
	rc = compare_matrices(A, B, rows, cols, 4, NULL, &r, &err);
	ok(!rc && isnan(r.right_overlap) && isnan(r.left_overlap) && r.rel_change > 0 &&
	   r.a.sigma_max > 0 && r.k == 4,
	   "rank 2 with k = 4: no overlap, the rest computed");
}

int main(void)
{
	struct sw_rng rng;

	rng_seed(&rng, 20261207);
	test_vectors(&rng, 40, 24);
	test_vectors(&rng, 24, 40);
	test_turned(&rng, 40, 24);
	test_turned(&rng, 24, 40);
	test_turned(&rng, 30, 30);
	test_low_rank();
	return tap_done();
}
