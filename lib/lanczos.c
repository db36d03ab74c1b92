/* lanczos.c - Lanczos with full reorthogonalization, top k and SLQ (see lanczos.h). */
#include "lanczos.h"
#include "par.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sums run over fixed chunks of the vectors, added in chunk order: the
 * same bits whatever the thread count (an OpenMP reduction is not). */
#define CHUNK ((int64_t)1 << 15)

struct lz {
	int64_t n, nchunks;
	lanczos_op op;
	void *ctx;
	int cap, j;             /* vectors room, vectors made */
	float *Q;               /* (cap, n) the basis */
	double *q, *w;          /* (n) q_j as stored, and the new vector */
	double *part;           /* (nchunks, cap) partial sums */
	double *c;              /* (cap) coefficients */
	double *alpha, *beta;   /* (cap) */
};

static void lz_free(struct lz *z)
{
	free(z->Q);
	free(z->q);
	free(z->w);
	free(z->part);
	free(z->c);
	free(z->alpha);
	free(z->beta);
	memset(z, 0, sizeof *z);
}

/* c[i] = Q_i . v for i < count, by chunks */
static void basis_dots(struct lz *z, const double *v, int count)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)z->n * count)
	for (int64_t ch = 0; ch < z->nchunks; ch++) {
		int64_t a = ch * CHUNK, b = a + CHUNK < z->n ? a + CHUNK : z->n;
		double *p = z->part + ch * z->cap;
		for (int i = 0; i < count; i++) {
			const float *qi = z->Q + (size_t)i * z->n;
			double s = 0;
			for (int64_t t = a; t < b; t++)
				s += qi[t] * v[t];
			p[i] = s;
		}
	}
	for (int i = 0; i < count; i++) {
		double s = 0;
		for (int64_t ch = 0; ch < z->nchunks; ch++)
			s += z->part[ch * z->cap + i];
		z->c[i] = s;
	}
}

/* v -= sum_i c[i] Q_i over i < count */
static void basis_subtract(struct lz *z, double *v, int count)
{
#pragma omp parallel for schedule(static) PAR_IF((size_t)z->n * count)
	for (int64_t t = 0; t < z->n; t++) {
		double s = 0;
		for (int i = 0; i < count; i++)
			s += z->c[i] * z->Q[(size_t)i * z->n + t];
		v[t] -= s;
	}
}

static double norm2(struct lz *z, const double *v)
{
	double s = 0;

	/* chunked as basis_dots */
#pragma omp parallel for schedule(static) PAR_IF((size_t)z->n)
	for (int64_t ch = 0; ch < z->nchunks; ch++) {
		int64_t a = ch * CHUNK, b = a + CHUNK < z->n ? a + CHUNK : z->n;
		double acc = 0;
		for (int64_t t = a; t < b; t++)
			acc += v[t] * v[t];
		z->part[ch * z->cap] = acc;
	}
	for (int64_t ch = 0; ch < z->nchunks; ch++)
		s += z->part[ch * z->cap];
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

	memset(z, 0, sizeof *z);
	z->n = n;
	z->op = op;
	z->ctx = ctx;
	z->cap = (int)(steps < n ? steps : n) + 1;
	z->nchunks = (n + CHUNK - 1) / CHUNK;
	z->Q = malloc((size_t)z->cap * (size_t)n * sizeof *z->Q);
	z->q = malloc((size_t)n * sizeof *z->q);
	z->w = malloc((size_t)n * sizeof *z->w);
	z->part = malloc((size_t)(z->nchunks * z->cap) * sizeof *z->part);
	z->c = malloc((size_t)z->cap * sizeof *z->c);
	z->alpha = malloc((size_t)z->cap * sizeof *z->alpha);
	z->beta = malloc((size_t)z->cap * sizeof *z->beta);
	if (!z->Q || !z->q || !z->w || !z->part || !z->c || !z->alpha || !z->beta) {
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
	/* w = A q_j - sum_i (q_i . A q_j) q_i, twice: the second pass takes
	 * away what rounding left of the first */
	basis_dots(z, z->w, z->j);
	z->alpha[j] = z->c[j];
	basis_subtract(z, z->w, z->j);
	basis_dots(z, z->w, z->j);
	z->alpha[j] += z->c[j];
	basis_subtract(z, z->w, z->j);
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

/* T's eigenvalues (ascending) into theta and eigenvectors (column-major,
 * m x m) into s. */
static int tridiag_eig(const double *alpha, const double *beta, int m, double *theta, double *s,
		       double *work, struct sw_err *err)
{
	memcpy(theta, alpha, (size_t)m * sizeof *theta);
	memcpy(work, beta, (size_t)m * sizeof *work);
	if (LAPACKE_dstev(LAPACK_COL_MAJOR, 'V', m, theta, work, s, m) != 0)
		return sw_fail(err, SW_ESOFTWARE, "LAPACK dstev failed on a %d x %d tridiagonal", m, m);
	return SW_OK;
}

int lanczos_top(int64_t n, lanczos_op op, void *ctx, const double *start, int k,
		int max_steps, double tol, double *eig, struct lanczos_top *info,
		struct sw_err *err)
{
	struct lz z;
	double *theta = NULL, *s = NULL, *work = NULL;
	int rc, steps = (int)(max_steps < n ? max_steps : n);

	memset(info, 0, sizeof *info);
	if (k < 1 || n < 1 || steps < 1)
		return sw_fail(err, SW_EUSAGE, "Lanczos needs k >= 1, n >= 1 and a step");
	if ((rc = lz_init(&z, n, op, ctx, start, steps, err)))
		return rc;
	theta = malloc((size_t)steps * sizeof *theta);
	s = malloc((size_t)steps * (size_t)steps * sizeof *s);
	work = malloc((size_t)steps * sizeof *work);
	if (!theta || !s || !work) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (int m = 1; m <= steps; m++) {
		int invariant, kk;
		double bound = 0, scale = 0;

		if ((rc = lz_step(&z, &invariant, err)))
			goto out;
		if ((rc = tridiag_eig(z.alpha, z.beta, m, theta, s, work, err)))
			goto out;
		kk = k < m ? k : m;
		for (int i = 0; i < m; i++)
			scale = fmax(scale, fabs(theta[i]));
		/* the top kk are the last columns; each one's residual norm */
		for (int i = 0; i < kk; i++) {
			int col = m - 1 - i;
			eig[i] = theta[col];
			bound = fmax(bound, fabs(z.beta[m - 1] * s[(size_t)col * m + m - 1]));
		}
		/* the basis is rounded to float32: each stored vector is off by
		 * up to 2^-24 of its norm, which breaks the recurrence by about
		 * that much of ||A|| per vector; the residual norms alone would
		 * claim more than the values have */
		bound += scale * 0x1p-24 * sqrt((double)m);
		info->k = kk;
		info->steps = m;
		info->scale = scale;
		info->bound = bound;
		info->converged = invariant || (kk == k && bound <= tol * scale);
		if (info->converged || invariant || (int64_t)m == n)
			break;
	}
out:
	free(theta);
	free(s);
	free(work);
	lz_free(&z);
	return rc;
}

int lanczos_quadrature(int64_t n, lanczos_op op, void *ctx, const double *start, int steps,
		       double *nodes, double *weights, int *m_out, struct sw_err *err)
{
	struct lz z;
	double *s = NULL, *work = NULL;
	int rc, m = 0;

	*m_out = 0;
	if (steps < 1 || n < 1)
		return sw_fail(err, SW_EUSAGE, "quadrature needs a step");
	if (steps > n)
		steps = (int)n;
	if ((rc = lz_init(&z, n, op, ctx, start, steps, err)))
		return rc;
	s = malloc((size_t)steps * (size_t)steps * sizeof *s);
	work = malloc((size_t)steps * sizeof *work);
	if (!s || !work) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	while (m < steps) {
		int invariant;
		if ((rc = lz_step(&z, &invariant, err)))
			goto out;
		m++;
		if (invariant)
			break;
	}
	if ((rc = tridiag_eig(z.alpha, z.beta, m, nodes, s, work, err)))
		goto out;
	for (int i = 0; i < m; i++)
		weights[i] = s[(size_t)i * m] * s[(size_t)i * m];
	*m_out = m;
out:
	free(s);
	free(work);
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
