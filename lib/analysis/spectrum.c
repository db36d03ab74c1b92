/* spectrum.c - singular-value spectra of weight matrices (see spectrum.h). */
#include "spectrum.h"
#include "../base/isa.h"
#include "lanczos.h"
#include "linalg.h"
#include "../base/rng.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* hot loops in the widest vectors this CPU has (isa.h) */
#define HOT ISA_CLONES

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * One pass over the view a row at a time (converted to double: a bf16
 * view is read in place); a row whose sum of squares is not finite has
 * its NaN and Inf counted.
 */
int spectrum_scan(const struct spec_view *v, struct spec_scan *out, struct sw_err *err)
{
	double *row = malloc((size_t)(v->cols > 0 ? v->cols : 1) * sizeof *row);

	out->frob_sq = 0;
	out->nonfinite = 0;
	if (!row)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for a row of %lld values",
			       (long long)v->cols);
	for (int64_t i = 0; i < v->rows; i++) {
		double s = gram_to_double(v, i, 1, 0, v->cols, row);

		if (isfinite(s)) {
			out->frob_sq += s;
			continue;
		}
		for (int64_t j = 0; j < v->cols; j++)
			out->nonfinite += !isfinite(row[j]);
	}
	free(row);
	return SW_OK;
}

static int nonfinite_error(const struct spec_view *v, struct sw_err *err)
{
	struct spec_scan sc;
	int rc = spectrum_scan(v, &sc, err);

	if (rc)
		return rc;
	return sw_fail(err, SW_EDATA, "%lld of %lld values are NaN or Inf",
		       (long long)sc.nonfinite, (long long)(v->rows * v->cols));
}

/* A panel of at most this many doubles: BLAS-3 efficient, a bounded copy. */
#define PANEL_ELEMS ((int64_t)4 << 20)

/*
 * The Gram matrix of the smaller side in double, G = sum over panels of
 * P^T P (tall: panels of rows) or P P^T (wide: panels of columns), into G
 * (k x k, column-major, lower triangle). The float32 values are exact in
 * double and their products too; only the sums round, at 1e-16.
 */
static int gram_matrix(const struct spec_view *v, double *G, double *frob_sq,
		       struct sw_err *err)
{
	int64_t m = v->rows, n = v->cols, k = min64(m, n);
	int tall = m >= n;
	int64_t along = tall ? m : n, width = tall ? n : m;
	int64_t step = PANEL_ELEMS / width;
	double *buf, frob = 0;

	if (step < 64)
		step = 64;
	if (step > along)
		step = along;
	buf = malloc((size_t)step * (size_t)width * sizeof *buf);
	if (!buf)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for a %lld x %lld panel",
			       (long long)step, (long long)width);
	for (int64_t p0 = 0; p0 < along; p0 += step) {
		int64_t p = min64(step, along - p0);
		double beta = p0 ? 1.0 : 0.0, s;

		if (tall) {
			/* rows p0.. as a column-major n x p matrix: G += P P^T */
			s = gram_to_double(v, p0, p, 0, n, buf);
			if (isfinite(s))
				cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)k, (int)p,
					    1.0, buf, (int)n, beta, G, (int)k);
		} else {
			/* columns p0.. as a column-major p x m matrix: G += P^T P */
			s = gram_to_double(v, 0, m, p0, p, buf);
			if (isfinite(s))
				cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (int)k, (int)p,
					    1.0, buf, (int)p, beta, G, (int)k);
		}
		if (!isfinite(s)) {
			free(buf);
			return nonfinite_error(v, err);
		}
		frob += s;
	}
	free(buf);
	if (frob_sq)
		*frob_sq = frob;
	return SW_OK;
}

/*
 * The top nvec eigenvectors of the Gram matrix G (k x k, lower triangle;
 * destroyed) into vec, the largest first (LAPACK dsyevr, only the wanted
 * ones: relatively robust representations, accurate to rounding for
 * vectors whose eigenvalues are apart).
 */
static int gram_top_vectors(double *G, int64_t k, int64_t nvec, double *vec, struct sw_err *err)
{
	/* dsyevr's w holds room for all k eigenvalues, whatever it finds */
	double *w = malloc((size_t)k * sizeof *w), *z = malloc((size_t)(k * nvec) * sizeof *z);
	lapack_int *support = malloc((size_t)(2 * nvec) * sizeof *support), found = 0, info;

	if (!w || !z || !support) {
		free(w);
		free(z);
		free(support);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for %lld singular vectors",
			       (long long)nvec);
	}
	info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'L', (lapack_int)k, G, (lapack_int)k, 0, 0,
			      (lapack_int)(k - nvec + 1), (lapack_int)k, 0, &found, w, z,
			      (lapack_int)k, support);
	/* ascending: the largest is the last column */
	for (int64_t j = 0; info == 0 && found == nvec && j < nvec; j++)
		memcpy(vec + j * k, z + (nvec - 1 - j) * k, (size_t)k * sizeof *vec);
	free(w);
	free(z);
	free(support);
	if (info != 0 || found != nvec)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dsyevr failed (info %d, %d of %lld vectors)",
			       (int)info, (int)found, (long long)nvec);
	return SW_OK;
}

int spectrum_full(const struct spec_view *v, double *s, double *frob_sq,
		  struct sw_err *err)
{
	return spectrum_full_vectors(v, s, frob_sq, 0, NULL, err);
}

int spectrum_full_vectors(const struct spec_view *v, double *s, double *frob_sq, int64_t nvec,
			  double *vec, struct sw_err *err)
{
	int64_t k = min64(v->rows, v->cols);
	double *G, *Gv = NULL;
	lapack_int info;
	int rc;

	if (frob_sq)
		*frob_sq = 0;
	if (k <= 0)
		return SW_OK;
	if (nvec > k)
		nvec = k;
	G = malloc((size_t)k * (size_t)k * sizeof *G);
	if (nvec > 0)
		Gv = malloc((size_t)k * (size_t)k * sizeof *Gv);
	if (!G || (nvec > 0 && !Gv)) {
		free(G);
		free(Gv);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for the %lld x %lld Gram matrix",
			       (long long)k, (long long)k);
	}
	if ((rc = gram_matrix(v, G, frob_sq, err))) {
		free(G);
		free(Gv);
		return rc;
	}
	if (Gv) {
		memcpy(Gv, G, (size_t)k * (size_t)k * sizeof *G);
		rc = gram_top_vectors(Gv, k, nvec, vec, err);
		free(Gv);
		if (rc) {
			free(G);
			return rc;
		}
	}
	/* eigenvalues ascending into s, then sigma = sqrt(lambda) descending;
	 * rounding can leave a zero eigenvalue slightly negative */
	info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)k, G, (lapack_int)k, s);
	free(G);
	if (info != 0)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dsyevd failed (info %d)", (int)info);
	for (int64_t i = 0; i < k / 2; i++) {
		double t = s[i];
		s[i] = s[k - 1 - i];
		s[k - 1 - i] = t;
	}
	for (int64_t i = 0; i < k; i++)
		s[i] = s[i] > 0 ? sqrt(s[i]) : 0.0;
	return SW_OK;
}

/* ---- top k: block Lanczos on the Gram operator ------------------------ */

#define TOP_BMAX GRAM_BMAX
#define TOP_MAX_STEPS 5000
/* The float32 search (gram_apply_single) stops at this fraction of the
 * tolerance, or at this residual relative to theta_1, float32's floor
 * (the operator's rounding is about 3e-7 of its largest entry), or after
 * this many steps; then the check in double. */
#define TOP_SINGLE_STOP 0.3
#define TOP_SINGLE_FLOOR 1e-6
#define TOP_SINGLE_MAX_STEPS 1000

HOT static double dot(const double *x, const double *y, int64_t n)
{
	double s = 0;

#pragma omp simd reduction(+ : s)
	for (int64_t i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

HOT static void axpy(double a, const double *x, double *y, int64_t n)
{
#pragma omp simd
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

/*
 * Orthonormalize the b columns of Z (already orthogonal to V's j columns)
 * among themselves: Z = Q R, R upper triangular b x b (ld b). A column
 * whose norm falls below tiny (an invariant subspace was found) gets R's
 * diagonal 0 and is replaced by a random unit vector orthogonal to V and
 * to the columns before it, so the basis keeps growing.
 */
static void orthonormalize(const double *V, int64_t n, int j, double *Z, int b, double *R,
			   double tiny, struct sw_rng *rng, double *pw)
{
	memset(R, 0, (size_t)b * (size_t)b * sizeof *R);
	for (int q = 0; q < b; q++) {
		double *z = Z + (size_t)q * (size_t)n, nz;

		for (int pass = 0; pass < 2; pass++)
			for (int r = 0; r < q; r++) {
				const double *zr = Z + (size_t)r * (size_t)n;
				double c = dot(zr, z, n);
				axpy(-c, zr, z, n);
				R[q * b + r] += c;
			}
		nz = sqrt(dot(z, z, n));
		if (nz <= tiny) {
			/* n > j + b always (small problems go to spectrum_full),
			 * so a random vector keeps a component outside */
			for (int attempt = 0; attempt < 4; attempt++) {
				for (int64_t i = 0; i < n; i++)
					z[i] = rng_normal(rng);
				lanczos_project_f64(V, n, j, z, 1, NULL, pw);
				for (int pass = 0; pass < 2; pass++)
					for (int r = 0; r < q; r++) {
						const double *zr = Z + (size_t)r * (size_t)n;
						axpy(-dot(zr, z, n), zr, z, n);
					}
				nz = sqrt(dot(z, z, n));
				if (nz > 1e-3 * sqrt((double)n))
					break;
			}
		} else {
			R[q * b + q] = nz;
		}
		for (int64_t i = 0; i < n; i++)
			z[i] /= nz;
	}
}

struct top_ws {
	int64_t n;
	int cap, b;
	double *V;              /* n x (cap + b): the basis, then the pending block */
	double *H;              /* cap x cap: V^T A V */
	double *T;              /* cap x cap: eigenvectors of H */
	double *A;              /* cap x cap: H's copy for LAPACK */
	double *theta;          /* cap */
	double *Z;              /* n x b */
	double *C;              /* (cap + b) x b */
	double *R;              /* b x b */
	double *tmp;            /* n x cap (restart) */
	double *pw;             /* lanczos_project's work */
};

static void top_ws_free(struct top_ws *w)
{
	free(w->V);
	free(w->H);
	free(w->T);
	free(w->A);
	free(w->theta);
	free(w->Z);
	free(w->C);
	free(w->R);
	free(w->tmp);
	free(w->pw);
}

static int top_ws_alloc(struct top_ws *w, int64_t n, int cap, int b)
{
	size_t nn = (size_t)n, c = (size_t)cap, bb = (size_t)b;

	memset(w, 0, sizeof *w);
	w->n = n;
	w->cap = cap;
	w->b = b;
	w->V = malloc(nn * (c + bb) * sizeof *w->V);
	w->H = calloc(c * c, sizeof *w->H);
	w->T = malloc(c * c * sizeof *w->T);
	w->A = malloc(c * c * sizeof *w->A);
	w->theta = malloc(c * sizeof *w->theta);
	w->Z = malloc(nn * bb * sizeof *w->Z);
	w->C = malloc((c + bb) * bb * sizeof *w->C);
	w->R = malloc(bb * bb * sizeof *w->R);
	w->tmp = malloc((nn > c + bb ? nn : c + bb) * (c > bb ? c : bb) * sizeof *w->tmp);
	w->pw = malloc(lanczos_project_work(n, cap + b, b) * sizeof *w->pw);
	return w->V && w->H && w->T && w->A && w->theta && w->Z && w->C && w->R && w->tmp &&
	       w->pw ? 0 : -1;
}

/*
 * One block step on the pending block P = V[:, m:m+b], given Z = A P in
 * w->Z: project out V[:, 0:m+b] (the coefficients are H's new columns),
 * orthonormalize Z = Q R; Q becomes the next pending block. Returns the
 * new m.
 */
static int step_finish(struct top_ws *w, int m, double anorm, struct sw_rng *rng)
{
	int64_t n = w->n;
	int b = w->b, j = m + b, cap = w->cap;

	memset(w->C, 0, (size_t)j * (size_t)b * sizeof *w->C);
	lanczos_project_f64(w->V, n, j, w->Z, b, w->C, w->pw);
	/* H[0:j, m:j] = C, and the mirror; the diagonal block symmetrized */
	for (int q = 0; q < b; q++)
		for (int r = 0; r < j; r++) {
			double c = w->C[q * j + r];
			if (r >= m)
				c = 0.5 * (c + w->C[(r - m) * j + m + q]);
			w->H[(size_t)(m + q) * (size_t)cap + (size_t)r] = c;
			w->H[(size_t)r * (size_t)cap + (size_t)(m + q)] = c;
		}
	orthonormalize(w->V, n, j, w->Z, b, w->R, 1e-12 * anorm, rng, w->pw);
	memcpy(w->V + (size_t)j * (size_t)n, w->Z, (size_t)n * (size_t)b * sizeof *w->Z);
	return j;
}

/* The top `want` Ritz pairs of H[0:m, 0:m] (lanczos_ritz): theta
 * descending, T's columns (ld m) in that order. */
static int ritz(struct top_ws *w, int m, int want, struct sw_err *err)
{
	for (int c = 0; c < m; c++)
		memcpy(w->A + (size_t)c * (size_t)m, w->H + (size_t)c * (size_t)w->cap,
		       (size_t)m * sizeof *w->A);
	return lanczos_ritz(m, want < m ? want : m, w->A, w->theta, w->T, err);
}

/*
 * The check in double after the float32 search: Y = the top b Ritz
 * vectors (orthonormal; check_begin, into w->tmp), Z = A Y by gram_apply
 * (w->Z), the b x b matrix Y^T Z diagonalized (theta descending, Y and Z
 * rotated with it), and the residual block R = Z - Y diag(theta) of the
 * top k: by Kahan's theorem each theta_i, i < k, is within ||R||_2 <=
 * ||R||_F of its own eigenvalue of A, whatever arithmetic found Y. Y (n x
 * b, rotated) is left in w->tmp, theta in w->theta; check_finish puts
 * ||R||_F in *fres, or fails (LAPACK, memory). R is computed from A Y in
 * double, not taken as lanczos_residuals' ||R y_last||: that rests on A V
 * = V H + Q R E^T, which the float32 search keeps only to its rounding.
 */
static double *check_begin(struct top_ws *w, int m)
{
	int64_t n = w->n;
	size_t nb = (size_t)n * (size_t)w->b;
	double *Y = w->tmp;

	memset(Y, 0, nb * sizeof *Y);
	for (int c = 0; c < w->b; c++)
		for (int r = 0; r < m; r++)
			axpy(w->T[(size_t)c * (size_t)m + (size_t)r], w->V + (size_t)r * (size_t)n,
			     Y + (size_t)c * (size_t)n, n);
	return Y;
}

static int check_finish(struct top_ws *w, int k, double *fres, struct sw_err *err)
{
	int64_t n = w->n;
	int b = w->b;
	size_t nb = (size_t)n * (size_t)b;
	double *Y = w->tmp, *Z = w->Z, *G = w->A, *rot = malloc(2 * nb * sizeof *rot), sum = 0;
	int rc;

	if (!rot)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for the Lanczos check");
	for (int c = 0; c < b; c++)
		for (int d = 0; d <= c; d++) {
			double x = 0.5 * (dot(Y + (size_t)c * (size_t)n, Z + (size_t)d * (size_t)n, n) +
					  dot(Y + (size_t)d * (size_t)n, Z + (size_t)c * (size_t)n, n));
			G[c * b + d] = G[d * b + c] = x;
		}
	/* theta and T's columns descending (T's Ritz vectors are in Y now) */
	if ((rc = lanczos_ritz(b, b, G, w->theta, w->T, err))) {
		free(rot);
		return rc;
	}
	memset(rot, 0, 2 * nb * sizeof *rot);
	for (int c = 0; c < b; c++) {
		const double *u = w->T + (size_t)c * (size_t)b;
		for (int d = 0; d < b; d++) {
			axpy(u[d], Y + (size_t)d * (size_t)n, rot + (size_t)c * (size_t)n, n);
			axpy(u[d], Z + (size_t)d * (size_t)n, rot + nb + (size_t)c * (size_t)n, n);
		}
	}
	for (int c = 0; c < k; c++) {
		const double *y = rot + (size_t)c * (size_t)n, *z = rot + nb + (size_t)c * (size_t)n;
		for (int64_t i = 0; i < n; i++) {
			double r = z[i] - w->theta[c] * y[i];
			sum += r * r;
		}
	}
	memcpy(Y, rot, nb * sizeof *Y);
	free(rot);
	*fres = sqrt(sum);
	return SW_OK;
}

/* Thick restart: V[:, 0:keep] = V[:, 0:m] T[:, 0:keep] (the best Ritz
 * vectors), H = diag(theta), the pending block moved behind them. */
static void restart(struct top_ws *w, int m, int keep)
{
	int64_t n = w->n;
	int cap = w->cap;

	memset(w->tmp, 0, (size_t)n * (size_t)keep * sizeof *w->tmp);
	for (int c = 0; c < keep; c++)
		for (int r = 0; r < m; r++)
			axpy(w->T[(size_t)c * (size_t)m + (size_t)r], w->V + (size_t)r * (size_t)n,
			     w->tmp + (size_t)c * (size_t)n, n);
	memcpy(w->V, w->tmp, (size_t)n * (size_t)keep * sizeof *w->V);
	memmove(w->V + (size_t)keep * (size_t)n, w->V + (size_t)m * (size_t)n,
		(size_t)n * (size_t)w->b * sizeof *w->V);
	memset(w->H, 0, (size_t)cap * (size_t)cap * sizeof *w->H);
	for (int i = 0; i < keep; i++)
		w->H[(size_t)i * (size_t)cap + (size_t)i] = w->theta[i];
}

/*
 * One Lanczos run of spectrum_top as a sequence of passes over W: each
 * pass applies the operator to the block run_block names, and run_take
 * goes on from the result (in w.Z). A driver owns the passes, so two runs
 * on one W can share them (spectrum_sigma_max_pair).
 *
 * The search applies the operator in float32 (about three times faster a
 * pass) until its residual is below TOP_SINGLE_STOP of the tolerance, or
 * at float32's floor; then one pass in double checks the Ritz vectors
 * found. Within the bound, they are the answer; otherwise Lanczos goes on
 * in double from them.
 */
struct top_run {
	struct top_ws w;
	struct sw_rng rng;
	int64_t k;
	double rel_tol;
	double anorm;           /* ||A|| <= ||W||_F^2: the scale for "numerically zero" */
	double fres;            /* the residual bound of the last step */
	int b, cap, keep, want;
	int m;                  /* basis vectors */
	int passes, single_steps, restarts;
	int single;             /* the search, in float32 */
	int checking;           /* the next pass is the check in double */
	int checked;            /* the answer is the check's vectors */
	int done;
};

static void run_free(struct top_run *r)
{
	top_ws_free(&r->w);
}

/* k <= n / 4 values of an operator on vectors of length cols (n: the
 * smaller dimension); frob_sq = ||W||_F^2 */
static int run_init(struct top_run *r, int64_t cols, int64_t n, int64_t k, double rel_tol,
		    const double *start, double frob_sq, struct sw_err *err)
{
	memset(r, 0, sizeof *r);
	r->k = k;
	r->rel_tol = rel_tol;
	r->anorm = frob_sq;
	/* a block of b vectors finds a value repeated up to b times; at
	 * least two: where the top of the spectrum has no gap (noise, early
	 * in training) a block needs fewer passes over W, but each pass
	 * costs more arithmetic. Measured on 4096 x 4096 Gaussian, 2
	 * threads, k = 1 to 1e-5: 69 steps for one vector, 60 for two, 43
	 * for four; a pass of float32 2.8, 4.2 and 4.7 ms, of bf16 3.2, 3.9
	 * and 5.6 ms: about even, and two find a double top value. */
	r->b = k < 2 ? 2 : k > TOP_BMAX ? TOP_BMAX : (int)k;
	/* basis: room for the wanted values, a margin of b, and enough
	 * steps between restarts to make progress */
	r->cap = (int)(4 * (k + r->b) > 60 ? 4 * (k + r->b) : 60);
	if (r->cap > n / 2)
		r->cap = (int)(n / 2);
	r->keep = (int)(k + r->b > r->cap / 2 ? k + r->b : r->cap / 2);
	/* the Ritz pairs needed each step: the k, and the b the check takes */
	r->want = (int)(k > r->b ? k : r->b);
	/* the operator is W^T W whatever the shape: vectors of length cols */
	if (top_ws_alloc(&r->w, cols, r->cap, r->b)) {
		run_free(r);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos (%lld x %d)",
			       (long long)cols, r->cap);
	}
	/* a fixed pseudo-random start: the answer is reproducible */
	rng_seed(&r->rng, 0x5ca1e5bec7u);
	for (int64_t i = 0; i < r->w.n * r->b; i++)
		r->w.V[i] = rng_normal(&r->rng);
	/* a warm start: a vector near the top one (orthonormalize keeps the
	 * first vector's direction) */
	if (start)
		memcpy(r->w.V, start, (size_t)r->w.n * sizeof *r->w.V);
	orthonormalize(r->w.V, r->w.n, 0, r->w.V, r->b, r->w.R, 0.0, &r->rng, r->w.pw);
	r->single = k <= r->b;
	return SW_OK;
}

/* The block the next pass applies the operator to (b vectors of length
 * cols), and whether in float32. */
static int run_block(struct top_run *r, const double **P, int *single, struct sw_err *err)
{
	if (r->passes >= TOP_MAX_STEPS)
		return sw_fail(err, SW_ESOFTWARE,
			       "the top %lld singular values did not converge in %d Lanczos steps",
			       (long long)r->k, TOP_MAX_STEPS);
	*single = 0;
	if (r->checking) {
		*P = check_begin(&r->w, r->m);
		return SW_OK;
	}
	if (r->m + r->b > r->cap) {
		/* the last step's Ritz problem had the top `want` */
		int rc = ritz(&r->w, r->m, r->keep, err);
		if (rc)
			return rc;
		restart(&r->w, r->m, r->keep);
		r->m = r->keep;
		r->restarts++;
	}
	*P = r->w.V + (size_t)r->m * (size_t)r->w.n;
	*single = r->single;
	return SW_OK;
}

/* converged; or at the rounding floor of the operator (values of W below
 * ~3e-4 sigma_max, zeros: an absolute bound of 1e-6 sigma_max); or the
 * zero matrix */
static int run_converged(const struct top_run *r)
{
	const double *theta = r->w.theta;

	return r->fres <= r->rel_tol * theta[r->k - 1] || r->fres <= 1e-12 * theta[0] ||
	       theta[0] <= 0;
}

/* On from the pass over run_block's block, its result in w.Z. */
static int run_take(struct top_run *r, struct sw_err *err)
{
	struct top_ws *w = &r->w;
	int rc;

	r->passes++;
	if (r->checking) {
		r->checking = 0;
		if ((rc = check_finish(w, (int)r->k, &r->fres, err)))
			return rc;
		r->checked = 1;
		if (run_converged(r)) {
			r->done = 1;
			return SW_OK;
		}
		/* not yet: on in double, from the vectors checked */
		r->checked = 0;
		memcpy(w->V, w->tmp, (size_t)w->n * (size_t)r->b * sizeof *w->V);
		memset(w->H, 0, (size_t)r->cap * (size_t)r->cap * sizeof *w->H);
		r->m = 0;
		return SW_OK;
	}
	r->m = step_finish(w, r->m, r->anorm, &r->rng);
	if ((rc = ritz(w, r->m, r->want, err)))
		return rc;
	/* ||R_k||_F of the top k (Kahan's theorem: run_converged) */
	lanczos_residuals(w->R, r->b, w->T, r->m, (int)r->k, NULL, &r->fres);
	if (r->single) {
		if (r->fres > TOP_SINGLE_STOP * r->rel_tol * w->theta[r->k - 1] &&
		    r->fres > TOP_SINGLE_FLOOR * w->theta[0] && w->theta[0] > 0 &&
		    r->passes < TOP_SINGLE_MAX_STEPS)
			return SW_OK;
		/* the check is a step: one pass over W */
		r->single_steps = r->passes;
		r->single = 0;
		r->checking = 1;
		return SW_OK;
	}
	r->done = run_converged(r);
	return SW_OK;
}

/* The values (s, k entries), the run's figures, and its top Ritz vector
 * (top_vec, when not NULL). */
static void run_result(const struct top_run *r, double *s, struct spectrum_top_info *info,
		       double *top_vec)
{
	const struct top_ws *w = &r->w;
	const double *theta = w->theta;

	for (int64_t i = 0; i < r->k; i++)
		s[i] = theta[i] > 0 ? sqrt(theta[i]) : 0.0;
	info->method = "lanczos";
	info->block = r->b;
	info->steps = r->passes;
	info->single_steps = r->single_steps;
	info->restarts = r->restarts;
	info->rel_bound = theta[0] <= 0 ? 0 : theta[r->k - 1] > r->fres ?
			  0.5 * r->fres / (theta[r->k - 1] - r->fres) : INFINITY;
	if (top_vec && r->checked) {
		memcpy(top_vec, w->tmp, (size_t)w->n * sizeof *top_vec);
	} else if (top_vec) {
		memset(top_vec, 0, (size_t)w->n * sizeof *top_vec);
		for (int i = 0; i < r->m; i++)
			axpy(w->T[i], w->V + (size_t)i * (size_t)w->n, top_vec, w->n);
	}
}

/* the Lanczos run's ||W||_F^2: known (>= 0; every value checked finite
 * by the caller), else scanned, with the NaN/Inf check */
static int frob_for_run(const struct spec_view *v, double known, double *frob_sq,
			struct sw_err *err)
{
	struct spec_scan sc;
	int rc;

	if (known >= 0) {
		*frob_sq = known;
		return SW_OK;
	}
	if ((rc = spectrum_scan(v, &sc, err)))
		return rc;
	if (sc.nonfinite)
		return nonfinite_error(v, err);
	*frob_sq = sc.frob_sq;
	return SW_OK;
}

/* The size of the view's data for gram_init's float32 scaling: ||W||_F
 * from ||W diag(s)||_F (frob_sq), exact when s is uniform (where W is
 * not, only the power of two matters) */
static double data_magnitude(const struct spec_view *v, double frob_sq)
{
	double smax = 0;

	if (!v->col_scale)
		return sqrt(frob_sq);
	for (int64_t j = 0; j < v->cols; j++)
		smax = fmax(smax, fabs((double)v->col_scale[j]));
	return smax > 0 ? sqrt(frob_sq) / smax : 0;
}

/* small problems, or most of the spectrum: the dense method is as fast
 * and exact */
static int top_is_dense(int64_t n, int64_t k)
{
	return n <= 128 || 4 * k >= n;
}

/* spectrum_top, its first vector optionally start (length cols), its top
 * Ritz vector optionally into top_vec (when Lanczos ran); known_frob_sq
 * as spectrum_sigma_max's frob_sq */
static int top_lanczos(const struct spec_view *v, int64_t k, double rel_tol, const double *start,
		       double known_frob_sq, double *s, double *frob_sq,
		       struct spectrum_top_info *info, double *top_vec, struct sw_err *err)
{
	int64_t n = min64(v->rows, v->cols);
	struct top_run r;
	struct gram_op g;
	double fsq = 0;
	int rc;

	memset(info, 0, sizeof *info);
	if (k > n)
		k = n;
	if (k <= 0) {
		info->method = "full";
		if (frob_sq)
			*frob_sq = 0;
		return SW_OK;
	}
	if (top_is_dense(n, k)) {
		double *all = malloc((size_t)n * sizeof *all);
		if (!all)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		rc = spectrum_full(v, all, frob_sq, err);
		if (!rc)
			memcpy(s, all, (size_t)k * sizeof *s);
		free(all);
		info->method = "full";
		info->rel_bound = 1e-7;
		return rc;
	}
	if ((rc = frob_for_run(v, known_frob_sq, &fsq, err)))
		return rc;
	if (frob_sq)
		*frob_sq = fsq;
	if ((rc = run_init(&r, v->cols, n, k, rel_tol, start, fsq, err)))
		return rc;
	if (gram_init(&g, v, r.b, 0, data_magnitude(v, fsq))) {
		run_free(&r);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos");
	}
	while (!r.done) {
		const double *P;
		int single;

		if ((rc = run_block(&r, &P, &single, err)))
			break;
		if (single)
			gram_apply_single(&g, P, r.w.Z);
		else
			gram_apply(&g, P, r.w.Z);
		if ((rc = run_take(&r, err)))
			break;
	}
	if (!rc)
		run_result(&r, s, info, top_vec);
	gram_free(&g);
	run_free(&r);
	return rc;
}

int spectrum_top(const struct spec_view *v, int64_t k, double rel_tol, double *s,
		 double *frob_sq, struct spectrum_top_info *info, struct sw_err *err)
{
	return top_lanczos(v, k, rel_tol, NULL, -1, s, frob_sq, info, NULL, err);
}

static void sigma_info_of(const struct spectrum_top_info *info, double sigma,
			  struct sigma_info *out)
{
	out->sigma = sigma;
	out->iterations = info->steps;
	out->rel_bound = info->rel_bound;
	out->method = info->method;
}

int spectrum_sigma_max(const struct spec_view *v, double rel_tol, const double *start,
		       double frob_sq, double *top_vec, struct sigma_info *out,
		       struct sw_err *err)
{
	struct spectrum_top_info info;
	double sigma;
	int rc;

	memset(out, 0, sizeof *out);
	if ((rc = top_lanczos(v, 1, rel_tol, start, frob_sq, &sigma, NULL, &info, top_vec, err)))
		return rc;
	sigma_info_of(&info, sigma, out);
	return SW_OK;
}

int spectrum_sigma_max_pair(const struct spec_view *v, double rel_tol, double frob_sq,
			    double scaled_frob_sq, struct sigma_info *raw,
			    struct sigma_info *scaled, struct sw_err *err)
{
	struct spec_view plain = *v;
	int64_t n = min64(v->rows, v->cols), cols = v->cols;
	struct top_run r[2];
	struct gram_op both, alone[2];
	struct spectrum_top_info info;
	double *P2 = NULL, *Z2 = NULL, sigma;
	int rc = SW_OK, ready = 0;

	memset(raw, 0, sizeof *raw);
	memset(scaled, 0, sizeof *scaled);
	plain.col_scale = NULL;
	if (!v->col_scale || top_is_dense(n, 1)) {
		if ((rc = spectrum_sigma_max(&plain, rel_tol, NULL, frob_sq, NULL, raw, err)))
			return rc;
		return spectrum_sigma_max(v, rel_tol, NULL, scaled_frob_sq, NULL, scaled, err);
	}
	if ((rc = frob_for_run(&plain, frob_sq, &frob_sq, err)) ||
	    (rc = frob_for_run(v, scaled_frob_sq, &scaled_frob_sq, err)))
		return rc;
	if ((rc = run_init(&r[0], cols, n, 1, rel_tol, NULL, frob_sq, err)))
		return rc;
	if ((rc = run_init(&r[1], cols, n, 1, rel_tol, NULL, scaled_frob_sq, err))) {
		run_free(&r[0]);
		return rc;
	}
	/* one pass for both blocks while both run in the same arithmetic:
	 * [P_raw, s P_scaled] through W^T W, the second half scaled again
	 * (as gram_apply does for a view's col_scale) */
	P2 = malloc((size_t)cols * (size_t)(r[0].b + r[1].b) * sizeof *P2);
	Z2 = malloc((size_t)cols * (size_t)(r[0].b + r[1].b) * sizeof *Z2);
	/* one W under the three operators: its size is the plain view's */
	if (!P2 || !Z2 || gram_init(&both, &plain, r[0].b + r[1].b, 0, sqrt(frob_sq))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos");
		goto out;
	}
	ready = 1;
	if (gram_init(&alone[0], &plain, r[0].b, 0, sqrt(frob_sq))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos");
		goto out;
	}
	ready = 2;
	if (gram_init(&alone[1], v, r[1].b, 0, sqrt(frob_sq))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for Lanczos");
		goto out;
	}
	ready = 3;
	while (!r[0].done || !r[1].done) {
		const double *P[2] = {NULL, NULL};
		int single[2] = {0, 0};

		for (int i = 0; i < 2; i++)
			if (!r[i].done && (rc = run_block(&r[i], &P[i], &single[i], err)))
				goto out;
		if (!r[0].done && !r[1].done && single[0] == single[1]) {
			size_t nb0 = (size_t)cols * (size_t)r[0].b, nb1 = (size_t)cols * (size_t)r[1].b;
			memcpy(P2, P[0], nb0 * sizeof *P2);
			memcpy(P2 + nb0, P[1], nb1 * sizeof *P2);
			gram_scale_columns(P2 + nb0, r[1].b, cols, v->col_scale);
			if (single[0])
				gram_apply_single(&both, P2, Z2);
			else
				gram_apply(&both, P2, Z2);
			gram_scale_columns(Z2 + nb0, r[1].b, cols, v->col_scale);
			memcpy(r[0].w.Z, Z2, nb0 * sizeof *Z2);
			memcpy(r[1].w.Z, Z2 + nb0, nb1 * sizeof *Z2);
		} else {
			for (int i = 0; i < 2; i++) {
				if (r[i].done)
					continue;
				if (single[i])
					gram_apply_single(&alone[i], P[i], r[i].w.Z);
				else
					gram_apply(&alone[i], P[i], r[i].w.Z);
			}
		}
		for (int i = 0; i < 2; i++)
			if (P[i] && (rc = run_take(&r[i], err)))
				goto out;
	}
	run_result(&r[0], &sigma, &info, NULL);
	sigma_info_of(&info, sigma, raw);
	run_result(&r[1], &sigma, &info, NULL);
	sigma_info_of(&info, sigma, scaled);
out:
	if (ready >= 3)
		gram_free(&alone[1]);
	if (ready >= 2)
		gram_free(&alone[0]);
	if (ready >= 1)
		gram_free(&both);
	free(P2);
	free(Z2);
	run_free(&r[0]);
	run_free(&r[1]);
	return rc;
}

/* ---- summaries -------------------------------------------------------- */

void spectrum_summarize(const double *s, int64_t n, double frob_sq,
			struct spectrum_summary *o)
{
	double sum = 0, ent = 0;

	memset(o, 0, sizeof *o);
	o->count = n;
	o->frobenius = sqrt(frob_sq);
	if (n <= 0)
		return;
	o->sigma_max = s[0];
	o->sigma_min = s[n - 1];
	o->condition = o->sigma_min > 0 ? o->sigma_max / o->sigma_min : INFINITY;
	o->stable_rank = o->sigma_max > 0 ? frob_sq / (o->sigma_max * o->sigma_max) : 0;
	for (int64_t i = 0; i < n; i++)
		sum += s[i];
	if (sum <= 0)
		return;
	for (int64_t i = 0; i < n; i++) {
		double p = s[i] / sum;
		if (p > 0)
			ent -= p * log(p);
	}
	o->effective_rank = exp(ent);
}

int64_t spectrum_hist(const double *s, int64_t n, int bins, struct spectrum_bin *out)
{
	double lo = INFINITY, hi = 0, l0, step;
	int64_t zeros = 0;

	for (int64_t i = 0; i < n; i++) {
		if (s[i] > 0) {
			lo = fmin(lo, s[i]);
			hi = fmax(hi, s[i]);
		} else {
			zeros++;
		}
	}
	if (hi <= 0)
		lo = hi = 1;
	if (hi <= lo * (1 + 1e-12)) {
		lo /= 1.01;
		hi *= 1.01;
	}
	l0 = log(lo);
	step = (log(hi) - l0) / bins;
	for (int b = 0; b < bins; b++) {
		out[b].lo = exp(l0 + step * b);
		out[b].hi = b == bins - 1 ? hi : exp(l0 + step * (b + 1));
		out[b].count = 0;
	}
	out[0].lo = lo;
	for (int64_t i = 0; i < n; i++) {
		int b;
		if (!(s[i] > 0))
			continue;
		b = (int)floor((log(s[i]) - l0) / step);
		b = b < 0 ? 0 : b >= bins ? bins - 1 : b;
		/* the edges are exp() of a sum: settle a value sitting on one */
		while (b > 0 && s[i] < out[b].lo)
			b--;
		while (b < bins - 1 && s[i] >= out[b].hi)
			b++;
		out[b].count++;
	}
	for (int b = 0; b < bins; b++)
		out[b].density = n > 0 ? (double)out[b].count / ((double)n * (out[b].hi - out[b].lo)) : 0;
	return zeros;
}

int spectrum_equilibrium_scale(const struct sw_tensor_info *t, double *scale,
			       struct sw_err *err)
{
	*scale = NAN;
	if (isnan(t->lr) || isnan(t->wd))
		return sw_fail(err, SW_EDATA, "%s: no per-tensor %s%s%s (needed for the equilibrium scale)",
			       t->name, isnan(t->lr) ? "lr" : "", isnan(t->lr) && isnan(t->wd) ? " and " : "",
			       isnan(t->wd) ? "wd" : "");
	if (t->wd_mode != SW_WD_COUPLED && t->wd_mode != SW_WD_INDEPENDENT)
		return sw_fail(err, SW_EDATA, "%s: wd_mode is %s: no equilibrium scale (coupled or independent needed)",
			       t->name, t->wd_mode == SW_WD_NONE ? "none" : "unknown");
	if (!(t->wd > 0))
		return sw_fail(err, SW_EDATA, "%s: wd = %g: no equilibrium without weight decay",
			       t->name, t->wd);
	if (!(t->lr > 0))
		return sw_fail(err, SW_EDATA, "%s: lr = %g: no equilibrium scale", t->name, t->lr);
	*scale = t->wd_mode == SW_WD_COUPLED ? sqrt(t->lr / t->wd) : t->lr / sqrt(t->wd);
	return SW_OK;
}
