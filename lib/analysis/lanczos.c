/* lanczos.c - Lanczos with full reorthogonalization, top k and SLQ, and
 * the core both Lanczos solvers share (see lanczos.h). */
#include "lanczos.h"
#include "../base/isa.h"
#include "../base/par.h"

#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Sums run over fixed chunks of the vectors, added in chunk order: the
 * same bits whatever the thread count (an OpenMP reduction is not). */
#define CHUNK ((int64_t)1 << 15)

/* hot loops in the widest vectors this CPU has (isa.h) */
#define HOT ISA_CLONES
#define INLINE static inline __attribute__((always_inline))

static int64_t chunks_of(int64_t n)
{
	return (n + CHUNK - 1) / CHUNK;
}

/* ---- the core (lanczos.h) ---------------------------------------------- */

/* Entry i of the basis, float32 or double: inlined with f32 a constant,
 * the kernels below are one source and one loop per type. */
INLINE double at(const void *V, int f32, size_t i)
{
	return f32 ? ((const float *)V)[i] : ((const double *)V)[i];
}

/* p[r b + q] = V_r . Z_q over the entries [a, e), r < j, q < b: each V_r
 * read once for two Z_q */
INLINE void dots_body(const void *V, int f32, int64_t n, int j, const double *Z, int b,
		      int64_t a, int64_t e, double *p)
{
	for (int r = 0; r < j; r++) {
		size_t v0 = (size_t)r * (size_t)n;
		int q = 0;

		for (; q + 1 < b; q += 2) {
			const double *z0 = Z + (size_t)q * (size_t)n, *z1 = z0 + n;
			double s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
			for (int64_t i = a; i < e; i++) {
				double x = at(V, f32, v0 + (size_t)i);
				s0 += x * z0[i];
				s1 += x * z1[i];
			}
			p[r * b + q] = s0;
			p[r * b + q + 1] = s1;
		}
		if (q < b) {
			const double *z0 = Z + (size_t)q * (size_t)n;
			double s0 = 0;
#pragma omp simd reduction(+ : s0)
			for (int64_t i = a; i < e; i++)
				s0 += at(V, f32, v0 + (size_t)i) * z0[i];
			p[r * b + q] = s0;
		}
	}
}

/* Z_q -= c[r b + q] V_r over the entries [a, e), r < j, q < b: each V_r
 * read once for two Z_q */
INLINE void subtract_body(const void *V, int f32, int64_t n, int j, double *Z, int b,
			  int64_t a, int64_t e, const double *c)
{
	for (int r = 0; r < j; r++) {
		size_t v0 = (size_t)r * (size_t)n;
		int q = 0;

		for (; q + 1 < b; q += 2) {
			double *z0 = Z + (size_t)q * (size_t)n, *z1 = z0 + n;
			double c0 = c[r * b + q], c1 = c[r * b + q + 1];
#pragma omp simd
			for (int64_t i = a; i < e; i++) {
				double x = at(V, f32, v0 + (size_t)i);
				z0[i] -= c0 * x;
				z1[i] -= c1 * x;
			}
		}
		if (q < b) {
			double *z0 = Z + (size_t)q * (size_t)n, c0 = c[r * b + q];
#pragma omp simd
			for (int64_t i = a; i < e; i++)
				z0[i] -= c0 * at(V, f32, v0 + (size_t)i);
		}
	}
}

HOT static void dots_f32(const void *V, int64_t n, int j, const double *Z, int b, int64_t a,
			 int64_t e, double *p)
{
	dots_body(V, 1, n, j, Z, b, a, e, p);
}

HOT static void dots_f64(const void *V, int64_t n, int j, const double *Z, int b, int64_t a,
			 int64_t e, double *p)
{
	dots_body(V, 0, n, j, Z, b, a, e, p);
}

HOT static void subtract_f32(const void *V, int64_t n, int j, double *Z, int b, int64_t a,
			     int64_t e, const double *c)
{
	subtract_body(V, 1, n, j, Z, b, a, e, c);
}

HOT static void subtract_f64(const void *V, int64_t n, int j, double *Z, int b, int64_t a,
			     int64_t e, const double *c)
{
	subtract_body(V, 0, n, j, Z, b, a, e, c);
}

size_t lanczos_project_work(int64_t n, int j, int b)
{
	return (size_t)(chunks_of(n) + 1) * (size_t)j * (size_t)b;
}

/* lanczos_project_f32 and _f64: the chunks in parallel where there are
 * several (one chunk, as spectrum_top's vectors mostly are: no team to
 * wake). Plain loops, not BLAS: a threaded BLAS keeps its threads
 * spinning after a call, which slows spectrum_top's next pass over W;
 * and this is a few percent of a step there. */
static void project(const void *V, int f32, int64_t n, int j, double *Z, int b, double *C,
		    double *work)
{
	int64_t nch = chunks_of(n);
	size_t jb = (size_t)j * (size_t)b;
	double *c = work, *part = work + jb;

	for (int pass = 0; pass < 2; pass++) {
#pragma omp parallel for schedule(static) PAR_IF(nch > 1 ? (size_t)n * jb : 0)
		for (int64_t ch = 0; ch < nch; ch++) {
			int64_t a = ch * CHUNK, e = a + CHUNK < n ? a + CHUNK : n;
			if (f32)
				dots_f32(V, n, j, Z, b, a, e, part + (size_t)ch * jb);
			else
				dots_f64(V, n, j, Z, b, a, e, part + (size_t)ch * jb);
		}
		for (size_t i = 0; i < jb; i++) {
			double s = 0;
			for (int64_t ch = 0; ch < nch; ch++)
				s += part[(size_t)ch * jb + i];
			c[i] = s;
		}
#pragma omp parallel for schedule(static) PAR_IF(nch > 1 ? (size_t)n * jb : 0)
		for (int64_t ch = 0; ch < nch; ch++) {
			int64_t a = ch * CHUNK, e = a + CHUNK < n ? a + CHUNK : n;
			if (f32)
				subtract_f32(V, n, j, Z, b, a, e, c);
			else
				subtract_f64(V, n, j, Z, b, a, e, c);
		}
		if (C)
			for (int q = 0; q < b; q++)
				for (int r = 0; r < j; r++)
					C[q * j + r] += c[(size_t)r * (size_t)b + (size_t)q];
	}
}

void lanczos_project_f32(const float *V, int64_t n, int j, double *Z, int b, double *C,
			 double *work)
{
	project(V, 1, n, j, Z, b, C, work);
}

void lanczos_project_f64(const double *V, int64_t n, int j, double *Z, int b, double *C,
			 double *work)
{
	project(V, 0, n, j, Z, b, C, work);
}

int lanczos_ritz(int m, int want, double *A, double *theta, double *Y, struct sw_err *err)
{
	int nth = omp_get_max_threads();
	lapack_int info, found = 0, *isuppz = malloc(2 * (size_t)(m > 0 ? m : 1) * sizeof *isuppz);

	if (!isuppz)
		return sw_fail(err, SW_ESOFTWARE, "out of memory for a %d x %d Ritz problem", m, m);
	omp_set_num_threads(1);
	info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', want < m ? 'I' : 'A', 'U', m, A, m, 0, 0,
			      m - want + 1, m, 0, &found, theta, Y, m, isuppz);
	omp_set_num_threads(nth);
	free(isuppz);
	if (info != 0 || found != want)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dsyevr failed on a %d x %d Lanczos matrix (info %d)",
			       m, m, (int)info);
	/* ascending to descending */
	for (int c = 0; c < want / 2; c++) {
		double t = theta[c];
		theta[c] = theta[want - 1 - c];
		theta[want - 1 - c] = t;
		for (int r = 0; r < m; r++) {
			t = Y[(size_t)c * (size_t)m + (size_t)r];
			Y[(size_t)c * (size_t)m + (size_t)r] = Y[(size_t)(want - 1 - c) * (size_t)m + (size_t)r];
			Y[(size_t)(want - 1 - c) * (size_t)m + (size_t)r] = t;
		}
	}
	return SW_OK;
}

void lanczos_residuals(const double *R, int b, const double *Y, int m, int k, double *max,
		       double *frob)
{
	double big = 0, sum = 0;

	for (int i = 0; i < k; i++) {
		const double *y = Y + (size_t)i * (size_t)m + (m - b);
		double s = 0;

		for (int r = 0; r < b; r++) {
			double x = 0;
			for (int c = r; c < b; c++)
				x += R[c * b + r] * y[c];
			s += x * x;
		}
		big = fmax(big, sqrt(s));
		sum += s;
	}
	if (max)
		*max = big;
	if (frob)
		*frob = sqrt(sum);
}

/* ---- one vector a step: lanczos_top, lanczos_quadrature ----------------- */

struct lz {
	int64_t n, nchunks;
	lanczos_op op;
	void *ctx;
	int cap, j;             /* vectors room, vectors made */
	float *Q;               /* (cap, n) the basis */
	double *q, *w;          /* (n) q_j as stored, and the new vector */
	double *part;           /* (nchunks) partial sums of a norm */
	double *work;           /* lanczos_project's */
	double *c;              /* (cap) coefficients */
	double *alpha, *beta;   /* (cap) */
	double *T, *theta, *S;  /* the Ritz problem: (cap, cap), (cap), (cap, cap) */
};

static void lz_free(struct lz *z)
{
	free(z->Q);
	free(z->q);
	free(z->w);
	free(z->part);
	free(z->work);
	free(z->c);
	free(z->alpha);
	free(z->beta);
	free(z->T);
	free(z->theta);
	free(z->S);
	memset(z, 0, sizeof *z);
}

static double norm2(struct lz *z, const double *v)
{
	double s = 0;

	/* chunked as lanczos_project */
#pragma omp parallel for schedule(static) PAR_IF((size_t)z->n)
	for (int64_t ch = 0; ch < z->nchunks; ch++) {
		int64_t a = ch * CHUNK, b = a + CHUNK < z->n ? a + CHUNK : z->n;
		double acc = 0;
		for (int64_t t = a; t < b; t++)
			acc += v[t] * v[t];
		z->part[ch] = acc;
	}
	for (int64_t ch = 0; ch < z->nchunks; ch++)
		s += z->part[ch];
	return sqrt(s);
}

/* Store v / norm as the next basis vector; q becomes it as stored. */
static void push(struct lz *z, const double *v, double norm)
{
	float *dst = z->Q + (size_t)z->j * z->n;

	for (int64_t t = 0; t < z->n; t++) {
		dst[t] = (float)(v[t] / norm);
		z->q[t] = dst[t];
	}
	z->j++;
}

static int lz_init(struct lz *z, int64_t n, lanczos_op op, void *ctx, const double *start,
		   int steps, struct sw_err *err)
{
	double nrm;
	size_t c;

	memset(z, 0, sizeof *z);
	z->n = n;
	z->op = op;
	z->ctx = ctx;
	z->cap = (int)(steps < n ? steps : n) + 1;
	z->nchunks = chunks_of(n);
	c = (size_t)z->cap;
	z->Q = malloc(c * (size_t)n * sizeof *z->Q);
	z->q = malloc((size_t)n * sizeof *z->q);
	z->w = malloc((size_t)n * sizeof *z->w);
	z->part = malloc((size_t)z->nchunks * sizeof *z->part);
	z->work = malloc(lanczos_project_work(n, z->cap, 1) * sizeof *z->work);
	z->c = malloc(c * sizeof *z->c);
	z->alpha = malloc(c * sizeof *z->alpha);
	z->beta = malloc(c * sizeof *z->beta);
	z->T = malloc(c * c * sizeof *z->T);
	z->theta = malloc(c * sizeof *z->theta);
	z->S = malloc(c * c * sizeof *z->S);
	if (!z->Q || !z->q || !z->w || !z->part || !z->work || !z->c || !z->alpha || !z->beta ||
	    !z->T || !z->theta || !z->S) {
		double mb = (double)z->cap * (double)n * 4 / (1 << 20);
		lz_free(z);
		return sw_fail(err, SW_ESOFTWARE, "out of memory for %d Lanczos vectors of %lld (%.0f MiB)",
			       steps + 1, (long long)n, mb);
	}
	nrm = norm2(z, start);
	if (!(nrm > 0) || !isfinite(nrm)) {
		lz_free(z);
		return sw_fail(err, SW_EUSAGE, "Lanczos needs a nonzero, finite start vector");
	}
	push(z, start, nrm);
	return SW_OK;
}

/*
 * One step from q_j (the last vector): alpha_j, beta_j, and q_{j+1}
 * unless beta_j is zero against the operator's scale (*invariant set:
 * the subspace is invariant and T_j exact on it).
 */
static int lz_step(struct lz *z, int *invariant, struct sw_err *err)
{
	int j = z->j - 1, rc;
	double b;

	if ((rc = z->op(z->ctx, z->q, z->w, err)))
		return rc;
	for (int64_t t = 0; t < z->n; t++)
		if (!isfinite(z->w[t]))
			return sw_fail(err, SW_EDATA, "a Hessian-vector product is not finite");
	/* w = A q_j - sum_i (q_i . A q_j) q_i, twice; alpha_j is q_j's
	 * coefficient over both passes */
	memset(z->c, 0, (size_t)z->j * sizeof *z->c);
	lanczos_project_f32(z->Q, z->n, z->j, z->w, 1, z->c, z->work);
	z->alpha[j] = z->c[j];
	b = norm2(z, z->w);
	z->beta[j] = b;
	{
		double scale = 0;
		for (int i = 0; i <= j; i++)
			scale = fmax(scale, fabs(z->alpha[i]) + (i ? z->beta[i - 1] : 0));
		*invariant = !(b > 1e-10 * scale);
	}
	if (!*invariant && z->j < z->cap)
		push(z, z->w, b);
	return SW_OK;
}

/* The Ritz pairs of T_m (lanczos_ritz, all m): theta descending into
 * z->theta, the eigenvectors into z->S's columns (ld m). */
static int lz_ritz(struct lz *z, int m, struct sw_err *err)
{
	memset(z->T, 0, (size_t)m * (size_t)m * sizeof *z->T);
	for (int i = 0; i < m; i++) {
		z->T[(size_t)i * (size_t)m + (size_t)i] = z->alpha[i];
		if (i + 1 < m)
			z->T[(size_t)(i + 1) * (size_t)m + (size_t)i] = z->beta[i];
	}
	return lanczos_ritz(m, m, z->T, z->theta, z->S, err);
}

int lanczos_top(int64_t n, lanczos_op op, void *ctx, const double *start, int k,
		int max_steps, double tol, double *eig, struct lanczos_top *info,
		struct sw_err *err)
{
	return lanczos_extremes(n, op, ctx, start, k, max_steps, tol, eig, NULL, info, err);
}

int lanczos_extremes(int64_t n, lanczos_op op, void *ctx, const double *start, int k,
		     int max_steps, double tol, double *eig, double *vecs,
		     struct lanczos_top *info, struct sw_err *err)
{
	struct lz z;
	int rc, steps = (int)(max_steps < n ? max_steps : n), last = 0;

	memset(info, 0, sizeof *info);
	info->min = info->min_bound = NAN;
	if (k < 1 || n < 1 || steps < 1)
		return sw_fail(err, SW_EUSAGE, "Lanczos needs k >= 1, n >= 1 and a step");
	if ((rc = lz_init(&z, n, op, ctx, start, steps, err)))
		return rc;
	for (int m = 1; m <= steps; m++) {
		int invariant, kk;
		double bound, scale, rounding;

		if ((rc = lz_step(&z, &invariant, err)))
			break;
		if ((rc = lz_ritz(&z, m, err)))
			break;
		last = m;
		kk = k < m ? k : m;
		scale = fmax(fabs(z.theta[0]), fabs(z.theta[m - 1]));
		memcpy(eig, z.theta, (size_t)kk * sizeof *eig);
		/* the top kk's residual norms |beta_m s_{m,i}| */
		lanczos_residuals(&z.beta[m - 1], 1, z.S, m, kk, &bound, NULL);
		/* the basis is rounded to float32: each stored vector is off by
		 * up to 2^-24 of its norm, which breaks the recurrence by about
		 * that much of ||A|| per vector; the residual norms alone would
		 * claim more than the values have */
		rounding = scale * 0x1p-24 * sqrt((double)m);
		bound += rounding;
		/* the smallest Ritz value (the last column), its residual
		 * |beta_m s_{m,m}| and the same rounding */
		info->min = z.theta[m - 1];
		info->min_bound = fabs(z.beta[m - 1] * z.S[(size_t)(m - 1) * (size_t)m + (size_t)(m - 1)]) +
				  rounding;
		info->k = kk;
		info->steps = m;
		info->scale = scale;
		info->bound = bound;
		info->converged = invariant || (kk == k && bound <= tol * scale);
		if (info->converged || invariant || (int64_t)m == n)
			break;
	}
	/* the Ritz vectors V_m s_i of the top k, from the float32 basis */
	if (!rc && vecs)
		for (int i = 0; i < info->k; i++) {
			double *x = vecs + (size_t)i * (size_t)n;
			const double *s = z.S + (size_t)i * (size_t)last;
			memset(x, 0, (size_t)n * sizeof *x);
			for (int r = 0; r < last; r++) {
				const float *q = z.Q + (size_t)r * (size_t)n;
				for (int64_t t = 0; t < n; t++)
					x[t] += s[r] * q[t];
			}
		}
	lz_free(&z);
	return rc;
}

int lanczos_quadrature(int64_t n, lanczos_op op, void *ctx, const double *start, int steps,
		       double *nodes, double *weights, int *m_out, struct sw_err *err)
{
	struct lz z;
	int rc, m = 0;

	*m_out = 0;
	if (steps < 1 || n < 1)
		return sw_fail(err, SW_EUSAGE, "quadrature needs a step");
	if (steps > n)
		steps = (int)n;
	if ((rc = lz_init(&z, n, op, ctx, start, steps, err)))
		return rc;
	while (m < steps) {
		int invariant;
		if ((rc = lz_step(&z, &invariant, err)))
			goto out;
		m++;
		if (invariant)
			break;
	}
	if ((rc = lz_ritz(&z, m, err)))
		goto out;
	/* ascending nodes; the weights are the eigenvectors' first entries squared */
	for (int i = 0; i < m; i++) {
		int col = m - 1 - i;
		nodes[i] = z.theta[col];
		weights[i] = z.S[(size_t)col * (size_t)m] * z.S[(size_t)col * (size_t)m];
	}
	*m_out = m;
out:
	lz_free(&z);
	return rc;
}

void lanczos_density(const double *nodes, const double *weights, int count, int nvec, double s,
		     double lo, double hi, int points, double *x, double *y)
{
	double norm = 1 / (s * sqrt(2 * M_PI) * (nvec > 0 ? nvec : 1));

	for (int p = 0; p < points; p++) {
		double t = points > 1 ? lo + (hi - lo) * p / (points - 1) : lo, acc = 0;
		for (int k = 0; k < count; k++) {
			double d = (t - nodes[k]) / s;
			acc += weights[k] * exp(-0.5 * d * d);
		}
		x[p] = t;
		y[p] = acc * norm;
	}
}
